package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
)

func newServeCmd() *cobra.Command {
	var (
		cfgPath, listen, dataDir string
		logFormat, logLevel      string
	)
	cmd := &cobra.Command{
		Use:   "serve [flags]",
		Short: "Run the daemon",
		Long: "Run the daemon: intake (local console, GitHub, Slack), routing, workers and reporting.\n" +
			"With no config file it listens on 127.0.0.1:8080 and keeps its data in ./data.\n" +
			"SIGHUP (or `switchyard config reload`) reads the config file, the agents and the rules\n" +
			"again and puts them in effect without a restart, or, if they are wrong, logs why and\n" +
			"keeps the config in effect. SIGTERM or Ctrl-C stops intake, lets running jobs finish\n" +
			"or hands them back within 30 s (a second SIGTERM or Ctrl-C hands them back at once),\n" +
			"flushes the outbox and exits 0.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The flags are checked as their config keys are, before
			// anything opens: a port out of range is not found only when
			// the listener is made.
			if listen != "" {
				if err := config.CheckListen(listen); err != nil {
					return withCode(exitUsage, fmt.Errorf("--listen: %w", err))
				}
			}
			if dataDir != "" {
				if err := config.CheckDataDir(dataDir); err != nil {
					return withCode(exitUsage, fmt.Errorf("--data-dir: %w", err))
				}
			}
			// SIGHUP reloads the config; it must never end the process,
			// not even while it starts. One that comes during the start is
			// a reload right after it.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)

			daemon.TuneRuntime()
			logger, err := newLogger(cmd.ErrOrStderr(), logFormat, logLevel)
			if err != nil {
				return err
			}
			path := configPath(cfgPath)
			load := func(ctx context.Context) (*daemon.Setup, error) {
				// Started with the defaults, a reload reads the
				// config.yaml made since, and from then on keeps to it as
				// to a file the daemon started with: a reload while it is
				// gone is refused. Reloads come one at a time.
				if path == "" {
					path = configPath("")
				}
				return daemon.Load(ctx, daemon.LoadOptions{Path: path, Logger: logger, Override: func(c *config.Config) {
					if listen != "" {
						c.Server.Listen = listen
					}
					if dataDir != "" {
						c.DataDir = dataDir
					}
				}})
			}
			s, err := load(cmd.Context())
			if err != nil {
				return usageError(err)
			}
			// The daemon takes server.api_token from the config itself;
			// the token passed is $SWITCHYARD_API_TOKEN's, which serves
			// when the config sets none.
			var token bot.Secret
			if !s.Config.Server.APIToken.IsSet() {
				token = bot.Secret(os.Getenv("SWITCHYARD_API_TOKEN"))
				if token.IsSet() {
					if err := config.CheckAPIToken(token); err != nil {
						return withCode(exitUsage, fmt.Errorf("$SWITCHYARD_API_TOKEN: %w", err))
					}
				}
			}
			d, err := daemon.New(cmd.Context(), daemon.Options{
				Setup: s, Reload: load, APIToken: token,
				Logger: logger, Version: version,
			})
			if err != nil {
				if bot.ErrorCode(err) == bot.EINVALID {
					return withCode(exitUsage, err)
				}
				return err
			}
			logger.Info("agents loaded", "count", len(s.Agents.List()))
			ctx, stop := context.WithCancel(cmd.Context())
			defer stop()
			// The first interrupt or SIGTERM starts the shutdown (through
			// the command's context); a second one cuts the running
			// jobs' grace short.
			sigs := make(chan os.Signal, 2)
			signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sigs)
			stopped := make(chan struct{})
			defer close(stopped)
			go func() {
				for range 2 {
					select {
					case <-sigs:
					case <-stopped:
						return
					}
				}
				d.Hurry()
			}()
			go func() {
				for {
					select {
					case <-ctx.Done():
						return
					case <-hup:
						// The outcome is logged; a refused reload keeps
						// the config in effect.
						_, _ = d.Reload(ctx)
					}
				}
			}()
			return d.ListenAndServe(ctx)
		},
	}
	f := cmd.Flags()
	addConfigFlag(cmd, &cfgPath)
	f.StringVar(&listen, "listen", "", "address to listen on, overriding server.listen")
	f.StringVar(&dataDir, "data-dir", "", "data directory, overriding data_dir")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return cmd
}
