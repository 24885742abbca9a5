package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
)

// models opens the configured models. With none configured it picks one
// from the environment (ANTHROPIC_API_KEY, OPENAI_API_KEY, a local Ollama)
// and says which in the log.
func models(ctx context.Context, cfg *config.Config, logger *slog.Logger) (llm.Models, error) {
	cfgs := make(map[string]llm.Config, len(cfg.Models))
	for name, m := range cfg.Models {
		cfgs[name] = llm.Config{
			Provider: m.Provider, BaseURL: m.BaseURL, APIKey: m.APIKey, Model: m.Model,
			MaxTokens: m.MaxTokens, Timeout: m.Timeout,
		}
	}
	if len(cfgs) == 0 {
		c, desc, ok := llm.Detect(ctx, os.Getenv, nil)
		if ok {
			cfgs["default"] = c
			logger.Info("model detected: " + desc)
		} else {
			logger.Warn(desc)
		}
	}
	ms, err := llm.Open(cfgs, nil)
	if err != nil {
		return nil, withCode(exitUsage, fmt.Errorf("%s: models: %w", cfg.Source, err))
	}
	return ms, nil
}

// newRuntime builds the agent runtime over the daemon's store, with the
// daemon's redactor and logger.
func newRuntime(ctx context.Context, cfg *config.Config, mgr *agents.Manager, logger *slog.Logger) (func(daemon.RunnerDeps) (daemon.Runtime, error), error) {
	ms, err := models(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	return func(deps daemon.RunnerDeps) (daemon.Runtime, error) {
		redactor, logger := deps.Redactor, deps.Logger
		auditor, err := policy.NewAuditor(deps.Store, redactor)
		if err != nil {
			return daemon.Runtime{}, err
		}
		engine, err := policy.New(policy.Options{Profiles: cfg.Profiles, Access: cfg.Access, Audit: auditor, Logger: logger})
		if err != nil {
			return daemon.Runtime{}, withCode(exitUsage, err)
		}
		// bash runs in the daemon's sandbox, confined by the rights of the
		// agent that calls it.
		core := tools.Core(tools.CoreOptions{Sandbox: deps.Sandbox, Confiner: engine})
		reg, err := tools.NewRegistry(slices.Concat(core, deps.Tools)...)
		if err != nil {
			return daemon.Runtime{}, fmt.Errorf("tools: %w", err)
		}
		// An approval of a GitHub or Slack tool the profile refuses outright
		// would never ask anyone: the config is wrong.
		if err := engine.CheckApprovals(reg.List()); err != nil {
			return daemon.Runtime{}, withCode(exitUsage, cfg.Positioned(err))
		}
		approvals, err := policy.NewApprovals(policy.ApprovalOptions{
			Approvers: engine, Notifier: deps.Notifier, Audit: auditor, Redactor: redactor, Logger: logger,
			Timeout: cfg.ApprovalTimeout,
		})
		if err != nil {
			return daemon.Runtime{}, err
		}
		// Agents may name only configured (or detected) models, known tools
		// and known profiles; a mistake there is the user's to fix: exit 2.
		if err := mgr.Validate(agents.Known{Models: ms.Names(), Tools: reg.Names(), Profiles: engine.Names()}); err != nil {
			return daemon.Runtime{}, withCode(exitUsage, err)
		}
		rt, err := agents.NewRuntime(agents.RuntimeOptions{
			Agents: mgr, Models: ms, Tools: reg,
			Policy: engine, Profiles: engine, Approver: approvals, Access: engine, Requesters: deps.Requesters,
			Workspaces:    tools.Workspaces{Root: filepath.Join(cfg.DataDir, "workspaces")},
			Conversations: deps.Store, Transcripts: deps.Store, Rerouter: deps.Store,
			Redactor: redactor, Logger: logger,
		})
		if err != nil {
			return daemon.Runtime{}, err
		}
		return daemon.Runtime{Runner: rt, Audit: auditor, Approvals: approvals}, nil
	}, nil
}

// secrets lists every value configured as a secret, so the daemon masks
// them wherever it shows or stores text. The GitHub App's key counts
// whether it is written in the config or kept in private_key_file.
func secrets(cfg *config.Config) []bot.Secret {
	out := []bot.Secret{cfg.Server.APIToken}
	for _, t := range cfg.Server.APITokens {
		out = append(out, t.Token)
	}
	for _, m := range cfg.Models {
		out = append(out, m.APIKey)
	}
	if g := cfg.GitHub; g != nil {
		out = append(out, g.PrivateKey, g.WebhookSecret)
		if g.PrivateKeyFile != "" {
			// Unreadable, the GitHub client says so when it starts.
			if key, err := os.ReadFile(g.PrivateKeyFile); err == nil {
				out = append(out, bot.Secret(key))
			}
		}
	}
	if s := cfg.Slack; s != nil {
		out = append(out, s.AppToken, s.BotToken, s.SigningSecret)
	}
	return out
}

// sandboxOptions configures the sandbox from the config: its mode, and what
// commands must never see besides the data directory, which the daemon
// hides itself: the config file, the GitHub App's key file and the home
// directory of the user the daemon runs as.
func sandboxOptions(cfg *config.Config) sandbox.Options {
	var hide []string
	if cfg.Source != config.DefaultsName {
		hide = append(hide, cfg.Source)
	}
	if g := cfg.GitHub; g != nil && g.PrivateKeyFile != "" {
		hide = append(hide, g.PrivateKeyFile)
	}
	if home, err := os.UserHomeDir(); err == nil {
		hide = append(hide, home)
	}
	for i, h := range hide {
		if abs, err := filepath.Abs(h); err == nil {
			hide[i] = abs
		}
	}
	return sandbox.Options{Mode: cfg.Sandbox.Mode, Hide: hide}
}
