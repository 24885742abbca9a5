package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
	"github.com/switchyard/switchyard/skills/install"
)

// withPackages completes s, a configuration as Load read it, with what the
// installed packages contribute: their agents in the agent manager (those
// it cannot run left out, and logged), and a router that knows them and
// routes their entry points where their package is enabled. s itself is
// not changed. A registry of nil leaves s as it is.
func withPackages(ctx context.Context, s *Setup, reg *skills.Registry, log *slog.Logger) (*Setup, error) {
	if reg == nil {
		return s, nil
	}
	cfg := s.Config
	keep, err := runnablePackageAgents(ctx, s, reg, log)
	if err != nil {
		return nil, err
	}
	m, err := agents.NewManager(ctx, agents.ManagerOptions{Dir: cfg.AgentsDir, Packages: agents.FromPackages(reg, keep), Logger: log})
	if err != nil {
		return nil, err
	}
	router, err := cfg.Compile(m.RouterInfo())
	if err != nil {
		return nil, err
	}
	router, warnings := router.WithEntrypoints(entrypoints(reg))
	for _, w := range warnings {
		log.LogAttrs(ctx, slog.LevelWarn, w)
	}
	next := *s
	next.Agents, next.Router = m, router
	return &next, nil
}

// runnablePackageAgents says which package agents the daemon can run with
// s: each is checked as agent files are (its model, its tools, its
// profile), and one that fails is left out with an error in the log
// naming the package and why, so a package never stops the daemon or a
// reload.
func runnablePackageAgents(ctx context.Context, s *Setup, reg *skills.Registry, log *slog.Logger) (func(agents.Definition) bool, error) {
	known, err := packageAgentsKnown(s, reg, nil)
	if err != nil {
		return nil, err
	}
	ok := map[string]bool{}
	for _, a := range reg.Agents() {
		d := agents.FromSkills(a)
		if err := d.Validate(known); err != nil {
			log.LogAttrs(ctx, slog.LevelError, "package agent left out: it cannot run with this configuration",
				slog.String("agent", d.Name), slog.String("package", d.Package), slog.String("error", oneLineErrors(err)))
			continue
		}
		ok[d.Package+"/"+d.Name] = true
	}
	return func(d agents.Definition) bool { return ok[d.Package+"/"+d.Name] }, nil
}

// packageAgentsKnown is what a package agent is checked against with s:
// its models and profiles, and every tool (core and platform, the control
// tools, the packages' command tools, the agents called as tools), those
// of p too when it is not installed yet.
func packageAgentsKnown(s *Setup, reg *skills.Registry, p *skills.Package) (agents.Known, error) {
	profiles, err := policy.New(policy.Options{Profiles: s.Config.Profiles, Access: s.Config.Access})
	if err != nil {
		return agents.Known{}, err
	}
	toolNames := ToolNames(s.Config)
	pkgTools, pkgAgents := reg.Tools(), reg.Agents()
	if p != nil {
		pkgTools, pkgAgents = append(slices.Clone(pkgTools), p.Tools...), append(slices.Clone(pkgAgents), p.Agents...)
	}
	for _, t := range pkgTools {
		toolNames = append(toolNames, t.Name)
	}
	toolNames = append(toolNames, agents.HandoffTool, agents.EnableSkillTool, agents.DisableSkillTool, agents.InstallPackageTool)
	for _, d := range s.Agents.List() {
		if d.Mode == agents.ModeTool {
			toolNames = append(toolNames, agents.ToolName(d.Name))
		}
	}
	for _, a := range pkgAgents {
		if a.Mode == "" || a.Mode == skills.ModeTool {
			toolNames = append(toolNames, agents.ToolName(a.Name))
		}
	}
	return agents.Known{Models: s.Models.Names(), Tools: toolNames, Profiles: profiles.Names()}, nil
}

// unrunnableAgents says, one line each, which agents of p the daemon
// cannot run with the configuration in effect, and why: they are left out
// (runnablePackageAgents), so an install says so rather than leave the
// one who asked to find them missing.
func (d *Daemon) unrunnableAgents(p *skills.Package) ([]string, error) {
	cur := d.config.Current()
	known, err := packageAgentsKnown(cur, d.skills, p)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range p.Agents {
		def := agents.FromSkills(a)
		if err := def.Validate(known); err != nil {
			out = append(out, fmt.Sprintf("agent %s cannot run with this configuration (%s)", a.Name, oneLineErrors(err)))
		}
	}
	return out, nil
}

// checkedInstaller is the daemon's installer as the API and the admin UI
// use it: an install's warnings say which of the package's agents cannot
// run here.
type checkedInstaller struct{ d *Daemon }

func (c checkedInstaller) Install(ctx context.Context, req install.Request) (install.Result, error) {
	res, err := c.d.installer.Install(ctx, req)
	if err != nil {
		return res, err
	}
	if p, ok := c.d.skills.Package(res.Package); ok {
		problems, err := c.d.unrunnableAgents(p)
		if err != nil {
			return res, err
		}
		for _, pr := range problems {
			res.Warnings = append(res.Warnings, pr+"; it is left out until it can")
		}
	}
	return res, nil
}

func (c checkedInstaller) Uninstall(ctx context.Context, name string) (skills.InstalledPackage, error) {
	return c.d.installer.Uninstall(ctx, name)
}

func oneLineErrors(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// entrypoints are the entry points of every installed package, as the
// router takes them, each routing where its package is enabled for the
// event's org, repository and the entry point's agent.
func entrypoints(reg *skills.Registry) []bot.Entrypoint {
	var out []bot.Entrypoint
	for _, ep := range reg.Entrypoints() {
		pkg, agent := ep.Package, ep.Handler.Agent
		out = append(out, bot.Entrypoint{
			Name: ep.Package + "/" + ep.Name, Origin: bot.OriginPackage + ep.Package,
			Agent: agent, Skills: ep.Handler.Skills, Commands: ep.Commands, Kinds: ep.Triggers,
			Enabled: func(org, repo string) bool {
				return reg.PackageEnabled(skills.Target{Org: strings.ToLower(org), Repo: strings.ToLower(repo), Agent: agent}, pkg).Enabled
			},
		})
	}
	return out
}

// currentAgents are the agents of the configuration in effect, read at
// every turn of a run: an agent a package adds meanwhile is callable at
// the next turn of a run already under way.
type currentAgents struct{ c *Coordinator }

func (a currentAgents) Get(name string) (agents.Definition, bool) {
	return a.c.Current().Agents.Get(name)
}
func (a currentAgents) List() []agents.Definition { return a.c.Current().Agents.List() }

// commandTools are the command tools of the installed packages, run in the
// sandbox and confined by the rights of the caller; a run is given those of
// the packages enabled where it happens.
type commandTools struct {
	reg   *skills.Registry
	tools []commandTool
}

type commandTool struct {
	pkg  string
	tool tools.Tool
}

// newCommandTools makes the command tools of reg's packages. A tool that
// cannot be made is left out and logged.
func newCommandTools(ctx context.Context, reg *skills.Registry, sb *sandbox.Sandbox, confiner tools.Confiner, log *slog.Logger) *commandTools {
	ct := &commandTools{reg: reg}
	for _, t := range reg.Tools() {
		tool, err := commandOf(t, sb, confiner)
		if err != nil {
			log.LogAttrs(ctx, slog.LevelError, "command tool left out", slog.String("tool", t.Name),
				slog.String("package", t.Package), slog.String("error", err.Error()))
			continue
		}
		ct.tools = append(ct.tools, commandTool{pkg: t.Package, tool: tool})
	}
	return ct
}

// commandOf makes a package's command tool: its program resolved in the
// package's directory, its input on stdin, through the policy and the
// sandbox as bash goes.
func commandOf(t skills.Tool, sb *sandbox.Sandbox, confiner tools.Confiner) (tools.Tool, error) {
	if len(t.Command) == 0 {
		return nil, errors.New("no command")
	}
	dir := t.Dir
	if dir != "" {
		// The sandbox binds it from wherever the command runs.
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, err
		}
		dir = abs
	}
	perms := make([]tools.Permission, len(t.Permissions))
	for i, p := range t.Permissions {
		perms[i] = tools.Permission(p)
	}
	spec := tools.CommandSpec{
		Name: t.Name, Description: t.Description, Package: t.Package, Dir: dir,
		Command: t.Command[0], Args: slices.Clone(t.Command[1:]), Schema: t.InputSchema,
		RequiredAgent: t.RequiredAgent, Permissions: perms, Timeout: t.Timeout,
		Confiner: confiner,
	}
	if sb != nil {
		spec.Sandbox = sb
	}
	return tools.NewCommand(spec)
}

// CommandTools implements agents.CommandTools.
func (ct *commandTools) CommandTools(t skills.Target) []tools.Tool {
	var out []tools.Tool
	for _, c := range ct.tools {
		if ct.reg.PackageEnabled(t, c.pkg).Enabled {
			out = append(out, c.tool)
		}
	}
	return out
}

// installer is the builder's way to install: the daemon's installer,
// from a directory. agents are the agents in effect.
type installer struct {
	in     *install.Installer
	agents func(name string) (agents.Definition, bool)
	// unrunnable says which agents of a package cannot run here, and why.
	unrunnable func(p *skills.Package) ([]string, error)
}

func (i installer) InstallPackage(ctx context.Context, dir string, enable []skills.Scope) (agents.Installed, error) {
	res, err := i.in.Install(ctx, install.Request{Source: dir, Enable: enable, Check: i.check})
	if err != nil {
		return agents.Installed{}, err
	}
	return agents.Installed{
		Package: res.Package, Version: res.Version, Previous: res.Previous, Agents: res.Agents, Skills: res.Skills,
		Tools: res.Tools, Commands: res.Commands, Enabled: res.Enabled, Warnings: res.Warnings,
	}, nil
}

// check refuses a package the builder wrote that takes the name of an
// agent in effect (keepsAgents) or whose agent cannot run here: the
// builder installs to call its agent at the next turn, and an agent left
// out would be one it is told it can call.
func (i installer) check(p *skills.Package) error {
	if err := i.keepsAgents(p); err != nil {
		return err
	}
	if i.unrunnable == nil {
		return nil
	}
	problems, err := i.unrunnable(p)
	if err != nil || len(problems) == 0 {
		return err
	}
	return &skills.Error{Kind: skills.ErrInvalid, Msg: fmt.Sprintf("package %s is not installed: %s", p.Name(), strings.Join(problems, "; "))}
}

// keepsAgents refuses a package the builder wrote whose agent takes the
// name of an agent in effect that is not its own (built in, the config's,
// another package's): package agents replace built-in ones, and the
// builder's one approved call would otherwise put its own @coder or
// @builder in the place of the agent every thread calls by that name. A
// package the builder installed before may be installed again.
func (i installer) keepsAgents(p *skills.Package) error {
	var taken []string
	for _, a := range p.Agents {
		if d, ok := i.agents(a.Name); ok && d.Package != p.Name() {
			from := d.Source
			switch d.Source {
			case agents.SourceBuiltin:
				from = "built in"
			case agents.SourceUser:
				from = "an agent file"
			}
			taken = append(taken, fmt.Sprintf("%s (%s)", a.Name, from))
		}
	}
	switch len(taken) {
	case 0:
		return nil
	case 1:
		return &skills.Error{Kind: skills.ErrConflict, Msg: fmt.Sprintf("package %s would replace the agent %s; name its agent otherwise", p.Name(), taken[0])}
	}
	return &skills.Error{Kind: skills.ErrConflict, Msg: fmt.Sprintf("package %s would replace the agents %s; name its agents otherwise", p.Name(), strings.Join(taken, ", "))}
}

// checkEnable refuses to enable a package at a scope where an agent that
// would run its command tools lacks what they need: the agent a tool
// requires, the package's own agents that see it, and at an agent's scope
// that agent. Profiles are the config's in effect.
func (d *Daemon) checkEnable(p *skills.Package, at skills.Scope) error {
	cur := d.config.Current()
	engine, err := policy.New(policy.Options{Profiles: cur.Config.Profiles, Access: cur.Config.Access})
	if err != nil {
		return err
	}
	own := make([]agents.Definition, len(p.Agents))
	for i, a := range p.Agents {
		own[i] = agents.FromSkills(a)
	}
	lookup := func(name string) (agents.Definition, bool) {
		for _, a := range own {
			if a.Name == name {
				return a, true
			}
		}
		return cur.Agents.Get(name)
	}
	var problems []string
	for _, t := range p.Tools {
		info := tools.Info{Name: t.Name, Kind: tools.KindCommand, Package: t.Package, RequiredAgent: t.RequiredAgent}
		for _, perm := range t.Permissions {
			info.Permissions = append(info.Permissions, tools.Permission(perm))
		}
		var runners []agents.Definition
		switch {
		case t.RequiredAgent != "":
			if a, ok := lookup(t.RequiredAgent); ok {
				runners = append(runners, a)
			}
		default:
			for _, a := range own {
				if len(a.Tools) == 0 || slices.Contains(a.Tools, t.Name) {
					runners = append(runners, a)
				}
			}
			if at.Kind == skills.ScopeAgent {
				if a, ok := lookup(at.Name); ok && !slices.ContainsFunc(runners, func(r agents.Definition) bool { return r.Name == a.Name }) {
					runners = append(runners, a)
				}
			}
		}
		for _, a := range runners {
			if why := lacks(engine, a.Profile, info); why != "" {
				problems = append(problems, fmt.Sprintf("its tool %s needs %s, which the profile %s of agent %s lacks", t.Name, why, a.Profile, a.Name))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return &bot.Error{Code: bot.EINVALID, Message: fmt.Sprintf("package %s cannot be enabled at %s: %s", p.Name(), at, strings.Join(problems, "; "))}
}

// lacks says what a profile lacks to call t, or "" when it may.
func lacks(e *policy.Engine, profile string, t tools.Info) string {
	if !e.Forbids(profile, t) {
		return ""
	}
	p, ok := e.Profile(profile)
	if !ok {
		return "a profile that exists"
	}
	if p.Tools != nil && !slices.Contains(p.Tools, t.Name) {
		return "to be in the profile's tools list"
	}
	var missing []string
	for _, perm := range t.Permissions {
		if !slices.Contains(p.Permissions, perm) {
			missing = append(missing, string(perm))
		}
	}
	switch len(missing) {
	case 0:
		return "what it declares"
	case 1:
		return "the " + missing[0] + " permission"
	}
	return "the " + strings.Join(missing, " and ") + " permissions"
}

// packageInstaller is the builder's installer; nil while the daemon has
// none.
func (d *Daemon) packageInstaller() agents.PackageInstaller {
	if d.installer == nil {
		return nil
	}
	return installer{in: d.installer, agents: func(name string) (agents.Definition, bool) {
		return d.config.Current().Agents.Get(name)
	}, unrunnable: d.unrunnableAgents}
}

// startPackages completes the setup the daemon starts with by what the
// installed packages contribute, makes it the one in effect, and from then
// on puts every change of the packages (an install, an uninstall, a
// setting) in effect at once, through the coordinator, as a reload does.
func (d *Daemon) startPackages(ctx context.Context, setup *Setup) (*Setup, error) {
	s, err := d.complete(ctx, setup)
	if err != nil {
		return nil, err
	}
	d.config.cur.Store(s)
	d.intake.Use(s.Router, d.cfg.DedupWindow, s.Router.ThreadWindow())
	d.config.rebuild = d.complete
	d.skills.Subscribe(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = d.config.Refresh(ctx)
	})
	return s, nil
}
