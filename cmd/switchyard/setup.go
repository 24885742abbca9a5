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

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
)

// defaultConfigFile is read when --config is not given and it exists.
const defaultConfigFile = "config.yaml"

func addConfigFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVar(path, "config", "", "config file (default ./config.yaml when present, else built-in defaults)")
}

// loadConfig reads the config file. Bad input exits 2.
func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		if _, err := os.Stat(defaultConfigFile); err == nil {
			path = defaultConfigFile
		}
	}
	cfg, err := config.Load(path)
	if err != nil {
		if config.IsInvalid(err) || errors.Is(err, os.ErrNotExist) {
			return nil, withCode(exitUsage, err)
		}
		return nil, err
	}
	return cfg, nil
}

// setup is a loaded config with its agents and compiled router.
type setup struct {
	cfg    *config.Config
	agents *agents.Manager
	router *bot.Router
}

// loadSetup loads config and agents and compiles the router; every problem
// with what the user wrote exits 2.
func loadSetup(ctx context.Context, path string, logger *slog.Logger) (*setup, error) {
	cfg, err := loadConfig(path)
	if err != nil {
		return nil, err
	}
	mgr, err := agents.NewManager(ctx, agents.ManagerOptions{Dir: cfg.AgentsDir, Logger: logger})
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	router, err := cfg.Compile(mgr.RouterInfo())
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	return &setup{cfg: cfg, agents: mgr, router: router}, nil
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
