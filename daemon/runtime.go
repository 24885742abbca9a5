package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync/atomic"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/integrations/github"
	"github.com/switchyard/switchyard/skills"
)

// RunnerDeps is what the runner of one configuration is built from.
type RunnerDeps struct {
	// Setup is the configuration: agents, models, profiles, limits.
	Setup *Setup
	Store Store
	// Tools are the tools of the built-in packages (spec_kit) and the agent
	// tools of the connected platforms (GitHub, Slack), offered beside the
	// core ones.
	Tools []tools.Tool
	// Sandbox runs bash and command tools; it refuses them while it is
	// required and bubblewrap cannot run.
	Sandbox *sandbox.Sandbox
	// Audit and Approvals outlive a configuration: the audit log is the
	// store's, and a call waiting for a person keeps waiting through a
	// reload.
	Audit     *policy.Auditor
	Approvals *policy.Approvals
	// Requesters complete a run's requester through the integration that
	// knows them: a GitHub permission, Slack user groups.
	Requesters agents.RequesterResolver
	// Skills is the package registry: installed and built-in packages,
	// their skills, agents, command tools and entry points, and the
	// settings that enable them per scope. It outlives a configuration;
	// the config's settings are put in it by reloads.
	Skills *skills.Registry
	// Subagents outlive a configuration too: a parent waiting for its
	// child is woken whichever configuration the child ran under.
	Subagents *agents.Subagents
	// Budgets count what runs spend across configurations; each
	// configuration's budgets: section sets the caps.
	Budgets *agents.Budgets
	// Agents are the agents in effect, read at every turn of a run; nil
	// means the Setup's.
	Agents agents.AgentSource
	// Installer puts packages the builder writes into effect; nil leaves
	// install_package out.
	Installer agents.PackageInstaller
	// Background runs bash's background tasks, which outlive a
	// configuration as they outlive a run.
	Background *tools.Background
	// Redactor is the daemon's one redactor: every configured secret, the
	// API tokens and credential shapes.
	Redactor *bot.Redactor
	// Logger masks secrets in what it logs.
	Logger *slog.Logger
}

// NewAgentRuntime builds the agent runtime of one configuration: the
// permission engine of its profiles and access ceilings, the core tools in the sandbox beside
// the platforms' tools, approvals that wait as long as it says, and the
// runtime over its agents and models.
func NewAgentRuntime(deps RunnerDeps) (bot.Runner, error) {
	cfg := deps.Setup.Config
	// Every call is decided with the skills its run has loaded.
	engine, err := policy.New(policy.Options{Profiles: cfg.Profiles, Access: cfg.Access, Audit: deps.Audit, Logger: deps.Logger,
		Skills: agents.LoadedSkills{}})
	if err != nil {
		return nil, err
	}
	// bash runs in the daemon's sandbox, confined by the rights of the
	// agent that calls it.
	core := tools.Core(tools.CoreOptions{Sandbox: deps.Sandbox, Confiner: engine, Background: deps.Background})
	reg, err := tools.NewRegistry(slices.Concat(core, deps.Tools)...)
	if err != nil {
		return nil, fmt.Errorf("tools: %w", err)
	}
	opts := agents.RuntimeOptions{
		Agents: deps.Agents, Models: deps.Setup.Models, Tools: reg,
		Policy: engine, Profiles: engine, Approver: deps.Approvals.With(engine, cfg.ApprovalTimeout),
		Access: engine, Requesters: deps.Requesters,
		Workspaces:    tools.Workspaces{Root: filepath.Join(cfg.DataDir, "workspaces")},
		Conversations: deps.Store, Transcripts: deps.Store, Rerouter: deps.Store,
		Subagents: deps.Subagents, SubagentLimits: SubagentLimits(cfg), Background: runEnder(deps.Background),
		Budgets: deps.Budgets, BudgetLimits: BudgetLimits(cfg), RunStates: deps.Store,
		Redactor: deps.Redactor, Logger: deps.Logger,
	}
	if opts.Agents == nil {
		opts.Agents = deps.Setup.Agents
	}
	if deps.Skills != nil {
		// Packages' skills load on demand, and their command tools run
		// in the sandbox, confined like bash, where they are enabled.
		opts.Skills = deps.Skills
		opts.CommandTools = newCommandTools(context.Background(), deps.Skills, deps.Sandbox, engine, deps.Logger)
		opts.Installer = deps.Installer
	}
	rt, err := agents.NewRuntime(opts)
	if err != nil {
		return nil, err
	}
	return rt, nil
}

// runEnder is b as the runtime's RunEnder, nil when there is none.
func runEnder(b *tools.Background) agents.RunEnder {
	if b == nil {
		return nil
	}
	return b
}

// SubagentLimits are the limits of spawning cfg sets.
func SubagentLimits(cfg *config.Config) agents.SubagentLimits {
	return agents.SubagentLimits{
		MaxConcurrent: cfg.Subagents.MaxConcurrent, MaxDepth: cfg.Subagents.MaxDepth, Timeout: cfg.Subagents.Timeout,
	}
}

// BudgetLimits are the config's budgets: caps as the runtime holds runs
// to them.
func BudgetLimits(cfg *config.Config) agents.BudgetLimits {
	b := cfg.Budgets
	prices := map[string]agents.ModelPrices{}
	for name, m := range cfg.Models {
		if m.Prices != nil {
			prices[name] = agents.ModelPrices{Input: m.Prices.Input, Output: m.Prices.Output}
		}
	}
	return agents.BudgetLimits{TreeTokens: b.Tree.Tokens, TreeWallTime: b.Tree.WallTime, TreeCost: b.Tree.Cost, Currency: b.Currency,
		RequesterTokens: b.PerDay.Requester, AgentTokens: b.PerDay.Agent, RepoTokens: b.PerDay.Repo, Prices: prices}
}

// generation is what the daemon built for one configuration: its runner
// and the sandbox that runner's commands run in.
type generation struct {
	runner    bot.Runner
	sandbox   *sandbox.Sandbox
	sbOptions sandbox.Options
}

// currentRunner runs every job with the runner of the configuration in
// effect when the job starts; a reload changes what the next job gets, not
// one under way.
type currentRunner struct{ gen *atomic.Pointer[generation] }

func (r currentRunner) Run(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
	return r.gen.Load().runner.Run(ctx, req, p)
}

// currentRights says what an agent may do under the configuration in
// effect, as the runner of the next job will see it.
type currentRights struct{ gen *atomic.Pointer[generation] }

func (r currentRights) Rights(ctx context.Context, agent string, req bot.Requester, th bot.Thread) (bot.EffectiveRights, error) {
	rr, ok := r.gen.Load().runner.(admin.Rights)
	if !ok {
		return bot.EffectiveRights{}, bot.Errorf(bot.EUNAVAILABLE, "no agent runtime to say what an agent may do")
	}
	return rr.Rights(ctx, agent, req, th)
}

// buildGeneration builds the runner of s. The sandbox of prev is kept when
// s asks for the same one.
func (d *Daemon) buildGeneration(ctx context.Context, s *Setup, prev *generation) (*generation, error) {
	g := &generation{sbOptions: d.sandboxOptions(s.Config)}
	if prev != nil && reflect.DeepEqual(prev.sbOptions, g.sbOptions) {
		g.sandbox = prev.sandbox
	} else {
		opts := g.sbOptions
		opts.Logger = d.log
		sb, err := sandbox.New(ctx, opts)
		if err != nil {
			return nil, bot.Errorf(bot.EINVALID, "%v", err)
		}
		g.sandbox = sb
	}
	platform := builtinTools()
	if d.ghClient != nil {
		platform = append(platform, github.Tools(d.ghClient, github.ToolOptions{AllowOtherRepos: s.Config.GitHub.AllowOtherRepos})...)
	}
	if d.slack != nil {
		platform = append(platform, d.slack.Tools()...)
	}
	newRunner := d.opts.NewRunner
	if newRunner == nil {
		newRunner = NewAgentRuntime
	}
	r, err := newRunner(RunnerDeps{
		Setup: s, Store: d.store, Tools: platform, Sandbox: g.sandbox,
		Audit: d.audit, Approvals: d.approvals, Requesters: d.requesters, Skills: d.skills, Subagents: d.subagents, Background: d.background, Budgets: d.budgets,
		Redactor: d.redactor, Logger: d.log, Agents: currentAgents{d.config}, Installer: d.packageInstaller(),
	})
	if err != nil {
		return nil, fmt.Errorf("agent runtime: %w", err)
	}
	g.runner = r
	return g, nil
}

// sandboxOptions configures the sandbox from the config: its mode, and what
// commands must never see: the data directory, the config file, the GitHub
// App's key file and the home directory of the user the daemon runs as.
func (d *Daemon) sandboxOptions(cfg *config.Config) sandbox.Options {
	opts := d.opts.Sandbox
	opts.Mode = cfg.Sandbox.Mode
	hide := append(slices.Clone(opts.Hide), cfg.DataDir)
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
	opts.Hide = hide
	if opts.Dir == "" {
		opts.Dir = filepath.Join(cfg.DataDir, "sandbox")
	}
	return opts
}
