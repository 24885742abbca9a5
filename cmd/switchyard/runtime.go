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
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/storage/bolt"
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
			logger.Warn("no model configured: " + desc)
		}
	}
	ms, err := llm.Open(cfgs, nil)
	if err != nil {
		return nil, withCode(exitUsage, fmt.Errorf("%s: models: %w", cfg.Source, err))
	}
	return ms, nil
}

// secrets lists every configured secret, so the runtime masks them in what
// it stores and replies.
func secrets(cfg *config.Config, token bot.Secret) []bot.Secret {
	out := []bot.Secret{token, cfg.Server.APIToken}
	for _, m := range cfg.Models {
		out = append(out, m.APIKey)
	}
	if g := cfg.GitHub; g != nil {
		out = append(out, g.PrivateKey, g.WebhookSecret)
	}
	if s := cfg.Slack; s != nil {
		out = append(out, s.AppToken, s.BotToken, s.SigningSecret)
	}
	return out
}

// newRuntime builds the agent runtime over the daemon's store.
func newRuntime(ctx context.Context, cfg *config.Config, mgr *agents.Manager, token bot.Secret, logger *slog.Logger) (func(*bolt.Store, []tools.Tool) (bot.Runner, error), error) {
	ms, err := models(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	return func(store *bolt.Store, platformTools []tools.Tool) (bot.Runner, error) {
		reg, err := tools.NewRegistry(slices.Concat(tools.Core(tools.CoreOptions{}), platformTools)...)
		if err != nil {
			return nil, fmt.Errorf("tools: %w", err)
		}
		// Agents may name only configured (or detected) models and known
		// tools; a mistake there is the user's to fix: exit 2.
		if err := mgr.Validate(agents.Known{Models: ms.Names(), Tools: reg.Names()}); err != nil {
			return nil, withCode(exitUsage, err)
		}
		return agents.NewRuntime(agents.RuntimeOptions{
			Agents: mgr, Models: ms, Tools: reg,
			Workspaces:    tools.Workspaces{Root: filepath.Join(cfg.DataDir, "workspaces")},
			Conversations: store, Transcripts: store, Rerouter: store,
			Secrets: secrets(cfg, token), Logger: logger,
		})
	}, nil
}
