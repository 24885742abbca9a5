package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
)

// defaultConfigFile is read when --config is not given and it exists.
const defaultConfigFile = "config.yaml"

func addConfigFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVar(path, "config", "", "config file (default ./config.yaml when present, else built-in defaults)")
}

// configPath is the config file a command reads: --config, else
// ./config.yaml when it exists, else "" for the built-in defaults.
func configPath(flag string) string {
	if flag == "" {
		if _, err := os.Stat(defaultConfigFile); err == nil {
			return defaultConfigFile
		}
	}
	return flag
}

// loadConfig reads the config file alone, for commands that need nothing
// else of it. Bad input exits 2.
func loadConfig(path string) (*config.Config, error) {
	cfg, err := config.Load(configPath(path))
	if err != nil {
		return nil, usageError(err)
	}
	return cfg, nil
}

// loadSetup reads the config file, the agents and the models and checks
// them together, as serve does; every problem with what the user wrote
// exits 2.
func loadSetup(ctx context.Context, path string, logger *slog.Logger) (*daemon.Setup, error) {
	s, err := daemon.Load(ctx, daemon.LoadOptions{Path: configPath(path), Logger: logger})
	if err != nil {
		return nil, usageError(err)
	}
	return s, nil
}

// usageError gives a problem with the config, or a config file that does
// not exist, exit status 2.
func usageError(err error) error {
	if config.IsInvalid(err) || errors.Is(err, os.ErrNotExist) {
		return withCode(exitUsage, err)
	}
	return err
}

// newLogger logs to w in the given format and level.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, withCode(exitUsage, fmt.Errorf("--log-level %q: want debug, info, warn or error", level))
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, withCode(exitUsage, fmt.Errorf("--log-format %q: want text or json", format))
	}
}
