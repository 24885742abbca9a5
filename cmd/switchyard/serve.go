package main

import (
	"log/slog"
	"maps"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/bot"
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
			"SIGTERM or Ctrl-C stops intake, lets running jobs finish or hands them back within\n" +
			"30 s, flushes the outbox and exits 0.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(cmd.ErrOrStderr(), logFormat, logLevel)
			if err != nil {
				return err
			}
			s, err := loadSetup(cmd.Context(), cfgPath, logger)
			if err != nil {
				return err
			}
			cfg := s.cfg
			if listen != "" {
				cfg.Server.Listen = listen
			}
			if dataDir != "" {
				cfg.DataDir = dataDir
			}
			token := cfg.Server.APIToken
			if !token.IsSet() {
				token = bot.Secret(os.Getenv("SWITCHYARD_API_TOKEN"))
			}
			// The daemon masks secrets in what it logs; what is logged here
			// before it starts (a detected model's address) is masked too.
			base := logger
			logger = slog.New(bot.NewRedactor(append(secrets(cfg), token)...).Handler(base.Handler()))
			newRunner, err := newRuntime(cmd.Context(), cfg, s.agents, logger)
			if err != nil {
				return err
			}
			d, err := daemon.New(daemon.Options{
				NewRunner: newRunner,
				Listen:    cfg.Server.Listen, APIToken: token, APITokens: cfg.Server.APITokens,
				PublicURL: cfg.Server.PublicURL, Console: cfg.Server.Console, DataDir: cfg.DataDir,
				Secrets: secrets(cfg),
				Router:  s.router, Schedules: cfg.BotSchedules(),
				Workers: cfg.Workers, Lease: cfg.Dispatch.Lease, MaxAttempts: cfg.Dispatch.MaxAttempts,
				DedupWindow: cfg.DedupWindow,
				GitHub:      cfg.GitHub, Slack: cfg.Slack,
				Agents: s.agents, Sandbox: sandboxOptions(cfg), SlackGroups: slices.Sorted(maps.Keys(cfg.Access.Slack.Groups)),
				Logger: base, Version: version,
			})
			if err != nil {
				if bot.ErrorCode(err) == bot.EINVALID {
					return withCode(exitUsage, err)
				}
				return err
			}
			logger.Info("agents loaded", "count", len(s.agents.List()))
			return d.ListenAndServe(cmd.Context())
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
