package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/integrations/github"
	"github.com/switchyard/switchyard/integrations/slack"
	"github.com/switchyard/switchyard/storage/postgres"
)

// Setup is a configuration read and checked as a whole: the config file,
// the agents, the models and the router built from them. Load makes one;
// `switchyard serve` starts from it, `switchyard config check` reports on
// it, and a reload swaps the running daemon to a new one.
type Setup struct {
	Config *config.Config
	Agents *agents.Manager
	Router *bot.Router
	Models llm.Models
	// ModelNote says where the models came from when the config names
	// none: the model detected in the environment, or why there is none
	// ("no model configured: …"). Empty when the config has models.
	ModelNote string
	// ModelFound is false when the config names no model and none was
	// detected: agents then cannot run, which the daemon warns about.
	ModelFound bool
	// Policy is the permission engine of the config's profiles and access
	// ceilings, as they were checked: what the admin UI shows of them.
	// Runs decide with their runtime's own engine, built from the same.
	Policy *policy.Engine

	// detectedKey is the key of a model found in the environment.
	detectedKey bot.Secret
	// stored are the stored routing rules the router was built with, as
	// read from the store.
	stored []bot.StoredRule
}

// LoadOptions say where Load reads from.
type LoadOptions struct {
	// Path is the config file; "" means the built-in defaults.
	Path string
	// Override changes the config after it is read and before anything is
	// built from it: serve's --listen and --data-dir.
	Override func(*config.Config)
	// Getenv reads the environment for model detection; nil means
	// os.Getenv.
	Getenv func(string) string
	// HTTPClient probes a local Ollama during detection; nil means a
	// client of its own.
	HTTPClient *http.Client
	// Logger hears about agents that override others.
	Logger *slog.Logger
}

// Load reads the config file, the agents directory and the models, and
// checks them together: the config's own rules, every agent file, routing
// rules, commands and schedules against the agents, and every agent's
// model, tools and profile against what the config provides. It is the one
// check of a configuration: serve, `config check` and every reload call it,
// so a config that one accepts the others accept too. Problems with what
// the user wrote come back as config.Errors, every one found, each
// "file:line: path: why"; a file that cannot be read is an I/O error.
func Load(ctx context.Context, opts LoadOptions) (*Setup, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := config.Load(opts.Path)
	if err != nil {
		return nil, err
	}
	if opts.Override != nil {
		opts.Override(cfg)
	}
	s := &Setup{Config: cfg}
	var errs, agentErrs config.Errors
	errs = append(errs, checkStorage(cfg, opts.Getenv)...)
	errs = append(errs, checkGitHubKey(cfg)...)
	s.Agents, err = agents.NewManager(ctx, agents.ManagerOptions{Dir: cfg.AgentsDir, Logger: opts.Logger})
	if err != nil {
		agentErrs = append(agentErrs, agentProblems(cfg, err)...)
	} else {
		s.Router, err = cfg.Compile(s.Agents.RouterInfo())
		if err != nil {
			errs = append(errs, asConfigErrors(cfg, "routing", err)...)
		}
	}
	if err := s.openModels(ctx, opts); err != nil {
		errs = append(errs, asConfigErrors(cfg, "models", err)...)
	}
	// The profiles and access ceilings, with the approvals of GitHub's and
	// Slack's tools judged by what those tools declare.
	profiles, err := policy.New(policy.Options{Profiles: cfg.Profiles, Access: cfg.Access})
	if err == nil {
		err = profiles.CheckApprovals(slices.Concat(github.ToolInfos(), slack.ToolInfos()))
	}
	if err != nil {
		errs = append(errs, asConfigErrors(cfg, "profiles", cfg.Positioned(err))...)
		profiles = nil
	}
	s.Policy = profiles
	if s.Agents != nil && s.Models != nil && profiles != nil {
		known := agents.Known{Models: s.Models.Names(), Tools: ToolNames(cfg), Profiles: profiles.Names()}
		if err := s.Agents.Validate(known); err != nil {
			agentErrs = append(agentErrs, agentProblems(cfg, err)...)
		}
	}
	if len(errs)+len(agentErrs) > 0 {
		// The config file first, in the order of its lines, then each
		// agent file in the order of its lines.
		slices.SortStableFunc(agentErrs, func(a, b *config.Error) int {
			return cmp.Or(strings.Compare(a.File, b.File), a.Line-b.Line)
		})
		return nil, append(errs, agentErrs...)
	}
	return s, nil
}

// openModels builds the configured models. With none configured it picks
// one from the environment (ANTHROPIC_API_KEY, OPENAI_API_KEY, a local
// Ollama), as "default".
func (s *Setup) openModels(ctx context.Context, opts LoadOptions) error {
	cfgs := make(map[string]llm.Config, len(s.Config.Models))
	for name, m := range s.Config.Models {
		cfgs[name] = m.LLM()
	}
	s.ModelFound = len(cfgs) > 0
	if len(cfgs) == 0 {
		// A variable of only white space (ANTHROPIC_API_KEY=" ") is
		// unset: no key is a space.
		getenv := func(name string) string { return strings.TrimSpace(opts.Getenv(name)) }
		c, note, ok := llm.Detect(ctx, getenv, opts.HTTPClient)
		s.ModelNote, s.ModelFound = note, ok
		if ok {
			// What is wrong with it was written in the environment, not
			// in models: say so, and where.
			if _, err := llm.New(c, nil); err != nil {
				return &config.Error{File: s.Config.Source, Path: "models", Line: s.Config.Line("models"),
					Msg: fmt.Sprintf("none configured, and the model the environment gives cannot be used (%s): %v", detectedFrom(c), err)}
			}
			cfgs[DetectedModel] = c
			s.detectedKey = c.APIKey
		}
	}
	ms, err := llm.Open(cfgs, nil)
	if err != nil {
		return err
	}
	s.Models = ms
	return nil
}

// detectedFrom names the variables a model found in the environment was
// made from.
func detectedFrom(c llm.Config) string {
	switch {
	case c.Provider == llm.ProviderAnthropic:
		return "$ANTHROPIC_API_KEY, $ANTHROPIC_MODEL"
	case c.APIKey.IsSet():
		return "$OPENAI_API_KEY, $OPENAI_BASE_URL, $OPENAI_MODEL"
	default:
		return "the Ollama at $OLLAMA_HOST"
	}
}

// DetectedModel is the name a model found in the environment is known by.
const DetectedModel = agents.DefaultModel

// ToolNames are the names of the tools a daemon with cfg registers, what
// agents' tools lists are checked against: the core tools, and the GitHub
// and Slack tools when those are configured. Agent and control tools are
// added by the agents' own check.
func ToolNames(cfg *config.Config) []string {
	names := slices.Concat(tools.CoreNames(), tools.BackgroundNames(), builtinToolNames())
	var platform []tools.Info
	if cfg.GitHub != nil {
		platform = append(platform, github.ToolInfos()...)
	}
	if cfg.Slack != nil {
		platform = append(platform, slack.ToolInfos()...)
	}
	for _, info := range platform {
		names = append(names, info.Name)
	}
	return names
}

// Secrets lists every value the setup holds as a secret, so the daemon
// masks them wherever it shows or stores text. The GitHub App's key counts
// whether it is written in the config or kept in private_key_file.
func (s *Setup) Secrets() []bot.Secret {
	cfg := s.Config
	out := []bot.Secret{cfg.Server.APIToken}
	for _, t := range cfg.Server.APITokens {
		out = append(out, t.Token)
	}
	for _, u := range cfg.Admin.Users {
		out = append(out, u.PasswordHash)
	}
	for _, m := range cfg.Models {
		out = append(out, m.APIKey)
	}
	out = append(out, s.detectedKey)
	out = append(out, cfg.Storage.Secrets()...)
	if g := cfg.GitHub; g != nil {
		out = append(out, g.PrivateKey, g.WebhookSecret)
		if g.PrivateKeyFile != "" {
			// Unreadable, the GitHub client says so when it starts.
			if key, err := os.ReadFile(g.PrivateKeyFile); err == nil {
				out = append(out, bot.Secret(key))
			}
		}
	}
	if sl := cfg.Slack; sl != nil {
		out = append(out, sl.AppToken, sl.BotToken, sl.SigningSecret)
	}
	return append(out, cfg.SkillSecrets()...)
}

// checkStorage finds what opening the store would refuse before it
// touches the database: a connection string that does not parse, or the
// postgres driver with no API token the replicas could share.
func checkStorage(cfg *config.Config, getenv func(string) string) config.Errors {
	if cfg.Storage.Driver != config.StoragePostgres {
		return nil
	}
	var errs config.Errors
	fail := func(path, msg string) {
		errs = append(errs, &config.Error{File: cfg.Source, Line: cfg.Line(path), Path: path, Msg: msg})
	}
	if err := postgres.CheckDSN(cfg.Storage.DSN.Reveal()); err != nil {
		fail("storage.dsn", err.Error())
	}
	if !cfg.Server.APIToken.IsSet() && getenv("SWITCHYARD_API_TOKEN") == "" {
		fail("storage.driver", sharedTokenProblem)
	}
	return errs
}

// checkGitHubKey reads and parses the GitHub App's key, as connecting to
// GitHub at start does, when the config gives exactly one (the config's own
// check refuses none or both).
func checkGitHubKey(cfg *config.Config) config.Errors {
	g := cfg.GitHub
	if g == nil || g.PrivateKey.IsSet() == (g.PrivateKeyFile != "") {
		return nil
	}
	err := github.CheckPrivateKey(g.PrivateKey, g.PrivateKeyFile)
	if err == nil {
		return nil
	}
	var fe *bot.FieldError
	if !errors.As(err, &fe) {
		return asConfigErrors(cfg, "github", err)
	}
	return config.Errors{{File: cfg.Source, Line: cfg.Line(fe.Field), Path: fe.Field, Msg: fe.Msg}}
}

// agentProblems turns what loading or checking the agents found into
// config errors: a definition's problem at its file and line, anything else
// (agents_dir cannot be read) at agents_dir in the config.
func agentProblems(cfg *config.Config, err error) config.Errors {
	var out config.Errors
	for _, e := range flatten(err) {
		var de *agents.DefinitionError
		if errors.As(e, &de) {
			out = append(out, &config.Error{File: de.File, Line: de.Line, Path: de.Field, Msg: de.Msg})
			continue
		}
		out = append(out, &config.Error{File: cfg.Source, Line: cfg.Line("agents_dir"), Path: "agents_dir",
			Msg: strings.TrimPrefix(e.Error(), "agents_dir: ")})
	}
	return out
}

// asConfigErrors keeps config errors as they are and places anything else
// at path in the config.
func asConfigErrors(cfg *config.Config, path string, err error) config.Errors {
	var out config.Errors
	for _, e := range flatten(err) {
		var ce *config.Error
		if errors.As(e, &ce) {
			out = append(out, ce)
			continue
		}
		out = append(out, &config.Error{File: cfg.Source, Line: cfg.Line(path), Path: path, Msg: e.Error()})
	}
	return out
}

// flatten lists the errors a joined error (errors.Join, config.Errors)
// holds, or err alone.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}
