package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"

	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
)

// Skill is what a loaded skill restricts. AllowedTools nil means the skill
// declares no allow list; an empty, non-nil list allows no tool. Forbidden
// tools are refused whatever else allows them. Control tools (enable_skill,
// disable_skill, handoff_to) are exempt from allow lists, so a skill can
// always be unloaded.
type Skill struct {
	Name           string   `json:"name" yaml:"name"`
	AllowedTools   []string `json:"allowed_tools" yaml:"allowed_tools"`
	ForbiddenTools []string `json:"forbidden_tools" yaml:"forbidden_tools"`
}

// CeilingSkills are the skills a ceiling holds a run to.
func CeilingSkills(c bot.Ceiling) []Skill {
	out := make([]Skill, len(c.Skills))
	for i, s := range c.Skills {
		allowed := s.AllowedTools
		if allowed == nil {
			allowed = []string{}
		}
		out[i] = Skill{Name: s.Name, AllowedTools: allowed, ForbiddenTools: s.ForbiddenTools}
	}
	return out
}

// SkillSource gives the skills the agent making a call has loaded. The
// runtime implements it from its record of enable_skill calls.
type SkillSource interface {
	ActiveSkills(ctx context.Context, cc tools.CallContext) []Skill
}

// Options configure an Engine.
type Options struct {
	// Profiles are the custom profiles of the config file (profiles:).
	Profiles map[string]ProfileConfig
	// Skills gives each call's loaded skills; nil means none are loaded.
	Skills SkillSource
	// Access maps requesters to the ceilings of their runs (access: in
	// the config); the zero value applies the documented defaults.
	Access AccessConfig
	// Audit records denials, approval requests and sensitive calls; nil
	// records nothing.
	Audit *Auditor
	// ProtectedBranches are the branch globs pushing to needs merge; nil
	// means DefaultProtectedBranches.
	ProtectedBranches []string
	Logger            *slog.Logger
}

// Decision is what the Engine decided about a call, with the rule that
// decided ("profile:read-only/permission:write") and the reason the model
// reads.
type Decision struct {
	Verdict tools.Verdict `json:"verdict"`
	Reason  string        `json:"reason"`
	Rule    string        `json:"rule"`
	Profile string        `json:"profile"`
	// Sensitive marks an allowed call worth an audit record: it uses a
	// permission beyond the workspace (push, merge, ci, deploy, secrets,
	// network, admin), a path outside it, or needed approval.
	Sensitive bool `json:"sensitive,omitempty"`
	// Permissions are those the call uses.
	Permissions []Permission `json:"permissions,omitempty"`
}

// Engine is the one enforcement point: every tool call passes the
// intersection of its agent's tools list, required_agent, its loaded
// skills and its permission profile, with the profile's shell and path
// policy applied to the call's arguments. It is safe for concurrent use.
type Engine struct {
	profiles map[string]*Profile
	cfg      map[string]ProfileConfig
	cmds     map[string]handler
	branches []string
	skills   SkillSource
	access   *accessRules
	audit    *Auditor
	// checkers holds shell checkers between checks, each with its parser,
	// maps and word buffer: what a check allocates is what the garbage
	// collector has to catch up with, and that is a decision's tail
	// latency.
	checkers sync.Pool
	// roots caches each workspace with its real path: resolving it costs
	// a system call per component, more than the rest of a check.
	rootsMu sync.RWMutex
	roots   map[string]*workspace
	log     *slog.Logger
}

var (
	_ tools.Policy   = (*Engine)(nil)
	_ tools.Profiles = (*Engine)(nil)
)

// New compiles the profiles and returns the Engine. Problems with the
// profiles come back as *bot.FieldError values joined with errors.Join,
// each at its config path: profiles.deployer.extends: unknown profile "x".
func New(opts Options) (*Engine, error) {
	profiles, err := compileProfiles(opts.Profiles)
	if err != nil {
		return nil, err
	}
	if err := ValidateAccess(opts.Access, opts.Profiles); err != nil {
		return nil, err
	}
	e := &Engine{
		profiles: profiles,
		cfg:      opts.Profiles,
		cmds:     newCommandTable(),
		branches: opts.ProtectedBranches,
		skills:   opts.Skills,
		access:   compileAccess(opts.Access),
		audit:    opts.Audit,
		roots:    map[string]*workspace{},
		log:      opts.Logger,
	}
	if e.branches == nil {
		e.branches = DefaultProtectedBranches()
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	e.checkers.New = func() any {
		return &checker{cmds: e.cmds, branches: e.branches, parser: syntax.NewParser(syntax.Variant(syntax.LangBash)),
			seen: map[*syntax.CallExpr]bool{}, stats: statCache{}}
	}
	// A profile that asks for approval of what it refuses outright would
	// never ask anyone: that is a mistake in the config.
	if errs := e.deadApprovals(opts.Profiles, nil); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return e, nil
}

// ValidateProfiles checks the profiles section of a config without building
// an Engine, for `switchyard config check`.
func ValidateProfiles(cfg map[string]ProfileConfig) error {
	_, err := New(Options{Profiles: cfg})
	return err
}

// Names returns every profile name, sorted: what agent definitions are
// validated against.
func (e *Engine) Names() []string {
	names := make([]string, 0, len(e.profiles))
	for n := range e.profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Profiles returns every profile, the built-in ones first, for `switchyard
// policy profiles`.
func (e *Engine) Profiles() []Profile {
	out := make([]Profile, 0, len(e.profiles))
	for _, n := range builtinNames() {
		out = append(out, *e.profiles[n])
	}
	for _, n := range e.Names() {
		if p := e.profiles[n]; !p.Builtin {
			out = append(out, *p)
		}
	}
	return out
}

// Profile returns the named profile.
func (e *Engine) Profile(name string) (Profile, bool) {
	p, ok := e.profiles[name]
	if !ok {
		return Profile{}, false
	}
	return *p, true
}

// Network reports whether bash of an agent with the profile may reach the
// network: what the sandbox is told.
func (e *Engine) Network(profile string) bool {
	p, ok := e.profiles[profile]
	return ok && p.Network
}

// AdminApprover is the daemon's administrator, the identity of its own
// API token: who decides the calls of a profile that names no approvers.
const AdminApprover = "admin"

// Approvers returns who may approve calls of the profile: its approvers, or
// the daemon's administrator when it names none (the built-in profiles).
func (e *Engine) Approvers(profile string) []string {
	if p, ok := e.profiles[profile]; ok && len(p.Approvers) > 0 {
		return slices.Clone(p.Approvers)
	}
	return []string{AdminApprover}
}

// Forbids implements tools.Profiles: whether the profile can never allow
// the tool, whatever its arguments. An unknown profile forbids everything.
func (e *Engine) Forbids(profile string, t tools.Info) bool {
	p, ok := e.profiles[profile]
	if !ok {
		return true
	}
	return e.toolGate(p, t) != nil
}

// Check implements tools.Policy: it decides the call, with the skills the
// agent has loaded, and records denials, approval requests and sensitive
// calls in the audit log. A sensitive call that cannot be recorded is
// refused.
func (e *Engine) Check(ctx context.Context, call tools.Call) tools.Decision {
	var skills []Skill
	if e.skills != nil {
		skills = e.skills.ActiveSkills(ctx, call.CallContext)
	}
	d, err := e.decide(call, skills)
	if err != nil {
		d = Decision{Verdict: tools.Deny, Profile: call.Profile, Rule: "input:invalid", Reason: "denied: " + err.Error()}
	}
	if e.audit != nil && (d.Verdict != tools.Allow || d.Sensitive) {
		if err := e.audit.RecordCall(ctx, call, d); err != nil {
			e.log.LogAttrs(ctx, slog.LevelError, "audit record failed", slog.String("tool", call.Tool.Name),
				slog.String("agent", call.Agent), slog.String("error", err.Error()))
			if d.Verdict == tools.Allow {
				d = Decision{Verdict: tools.Deny, Profile: d.Profile, Rule: "audit:unavailable",
					Reason: "denied: this call must be recorded in the audit log, and the audit log cannot be written"}
			}
		}
	}
	return tools.Decision{Verdict: d.Verdict, Reason: d.Reason}
}

// Decide decides a call with the given loaded skills and records nothing.
// Input that is not what the tool takes is refused.
func (e *Engine) Decide(call tools.Call, skills []Skill) Decision {
	d, err := e.decide(call, skills)
	if err != nil {
		return Decision{Verdict: tools.Deny, Profile: call.Profile, Rule: "input:invalid", Reason: "denied: " + err.Error()}
	}
	return d
}

// inputError is a call whose input cannot be read: bad input to the offline
// check, a refusal at run time.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

func (e *Engine) decide(call tools.Call, skills []Skill) (Decision, error) {
	t, s := call.Tool, call.Scope
	deny := func(rule, reason string) Decision {
		return Decision{Verdict: tools.Deny, Rule: rule, Reason: reason, Profile: s.Profile}
	}
	p, ok := e.profiles[s.Profile]
	if !ok {
		return deny("profile:unknown", fmt.Sprintf("denied: agent %q names profile %q, which does not exist", s.Agent, s.Profile)), nil
	}
	if t.RequiredAgent != "" && t.RequiredAgent != s.Agent {
		return deny("required_agent", fmt.Sprintf("denied: tool %q may only be called by agent %q (required_agent)", t.Name, t.RequiredAgent)), nil
	}
	if ok, reason := tools.Visible(t, s, nil); !ok {
		return deny("agent:"+s.Agent+"/tools", fmt.Sprintf("denied by agent %q: %s", s.Agent, reason)), nil
	}
	if rule, reason, refused := SkillRefusal(skills, t); refused {
		return deny(rule, reason), nil
	}
	d, err := e.under(p, nil, call)
	if err != nil || d.Verdict == tools.Deny {
		return d, err
	}
	// Every ceiling of the run must allow the call too: deny wins, an
	// approval any of them asks for is asked. A ceiling that allows at
	// least what the profile allows changes nothing and is not checked.
	for i := range s.Ceilings {
		c := &s.Ceilings[i]
		if len(c.Skills) > 0 {
			if rule, reason, refused := SkillRefusal(CeilingSkills(*c), t); refused {
				return deny("ceiling:"+rule, fmt.Sprintf("%s; a ceiling of this run: %s", reason, c.Reason)), nil
			}
		}
		if e.covers(c.Profile, p.Name) {
			continue
		}
		cp, ok := e.profiles[c.Profile]
		if !ok {
			return deny("ceiling:unknown", fmt.Sprintf("denied: the ceiling %q (%s) is not a profile", c.Profile, c.Reason)), nil
		}
		cd, err := e.under(cp, c, call)
		if err != nil || cd.Verdict == tools.Deny {
			cd.Profile = p.Name
			return cd, err
		}
		if cd.Verdict == tools.NeedsApproval && d.Verdict == tools.Allow {
			d.Verdict, d.Rule, d.Reason = cd.Verdict, cd.Rule, cd.Reason
		}
		d.Permissions = unionPerms(d.Permissions, cd.Permissions)
		d.Sensitive = d.Sensitive || cd.Sensitive
	}
	e.skillApproval(&d, p, call, skills)
	return d, nil
}

// under decides a call by one profile: the agent's own (ceiling nil) or a
// ceiling of its run.
func (e *Engine) under(p *Profile, ceiling *bot.Ceiling, call tools.Call) (Decision, error) {
	t := call.Tool
	rulePrefix, who := "profile:"+p.Name+"/", fmt.Sprintf("profile %q", p.Name)
	if ceiling != nil {
		rulePrefix, who = "ceiling:"+p.Name+"/", fmt.Sprintf("the ceiling %q (%s)", p.Name, ceiling.Reason)
	}
	deny := func(f *finding) Decision {
		return Decision{Verdict: tools.Deny, Rule: rulePrefix + f.rule, Reason: fmt.Sprintf("denied by %s: %s", who, f.reason), Profile: p.Name}
	}
	if f := e.toolGate(p, t); f != nil {
		return deny(f), nil
	}
	used := e.toolNeeds(t)
	if listed, _ := p.allowsTool(t.Name); listed {
		used = 0
	}
	var approval *finding
	if p.toolNeedsApproval(t.Name) {
		approval = &finding{rule: "approval:" + t.Name, reason: fmt.Sprintf("tool %q needs approval", t.Name)}
	} else if listed, _ := p.allowsTool(t.Name); t.Approval && !listed {
		approval = &finding{rule: "tool:" + t.Name + "/approval", reason: fmt.Sprintf("every call of tool %q waits for a person", t.Name)}
	}
	outside := false
	if t.Kind == tools.KindCore {
		var grant perms
		if listed, _ := p.allowsTool(t.Name); listed {
			grant = e.toolNeeds(t)
		}
		f, a, u, out, err := e.checkArgs(p, call, grant)
		if err != nil {
			return Decision{}, err
		}
		if f != nil {
			return deny(f), nil
		}
		if approval == nil {
			approval = a
		}
		used |= u
		outside = out
	}
	d := Decision{Verdict: tools.Allow, Rule: p.allowRule, Reason: p.allowReason, Profile: p.Name, Permissions: used.list()}
	if approval != nil {
		d.Verdict = tools.NeedsApproval
		d.Rule = rulePrefix + approval.rule
		d.Reason = fmt.Sprintf("%s requires approval: %s", who, approval.reason)
	}
	d.Sensitive = used&sensitivePerms != 0 || outside || approval != nil
	return d, nil
}

// unionPerms returns the permissions of a and b in canonical order.
func unionPerms(a, b []Permission) []Permission {
	var set perms
	for _, p := range slices.Concat(a, b) {
		if bit, ok := permBit(p); ok {
			set |= bit
		}
	}
	return set.list()
}

func dedupSkills(skills []Skill) []Skill {
	if len(skills) < 2 {
		return skills
	}
	seen := map[string]bool{}
	out := make([]Skill, 0, len(skills))
	for _, s := range skills {
		if !seen[s.Name] {
			seen[s.Name] = true
			out = append(out, s)
		}
	}
	return out
}

// SkillRefusal reports whether the loaded skills refuse the tool, with the
// rule and the reason, as skills compose (skills.Composition): a tool any
// of them forbids is refused, whatever allows it, the same skill's
// allowed_tools included; when any of them has an allowed_tools list, a
// tool none of them allows is refused too, except control tools
// (enable_skill, disable_skill, handoff_to), so a skill can always be
// unloaded. The Engine decides with it, and the runtime leaves what it
// refuses out of the tools it shows the model.
func SkillRefusal(loaded []Skill, t tools.Info) (rule, reason string, refused bool) {
	loaded = dedupSkills(loaded)
	for _, sk := range loaded {
		if skills.MatchTool(sk.ForbiddenTools, t.Name) {
			return "skill:" + sk.Name + "/forbidden_tools", fmt.Sprintf("denied by skill %q: tool %q is forbidden (forbidden_tools)", sk.Name, t.Name), true
		}
	}
	if t.Kind == tools.KindControl {
		return "", "", false
	}
	var listing []string
	for _, sk := range loaded {
		if sk.AllowedTools == nil {
			continue
		}
		if skills.MatchTool(sk.AllowedTools, t.Name) {
			return "", "", false
		}
		listing = append(listing, sk.Name)
	}
	switch len(listing) {
	case 0:
		return "", "", false
	case 1:
		return "skill:" + listing[0] + "/allowed_tools", fmt.Sprintf("denied by skill %q: tool %q is not in its allowed_tools", listing[0], t.Name), true
	}
	quoted := make([]string, len(listing))
	for i, n := range listing {
		quoted[i] = strconv.Quote(n)
	}
	return "skill:" + strings.Join(listing, ",") + "/allowed_tools",
		fmt.Sprintf("denied by skills %s: tool %q is in none of their allowed_tools", strings.Join(quoted, ", "), t.Name), true
}

// skillApproval makes an allowed call of a sensitive tool that only a
// loaded skill brought into view (the agent's own tools list does not give
// it) wait for a person, unless the profile lists the tool: a skill can
// never widen what an agent does unasked.
func (e *Engine) skillApproval(d *Decision, p *Profile, call tools.Call, loaded []Skill) {
	t, s := call.Tool, call.Scope
	if d.Verdict != tools.Allow || !d.Sensitive || len(s.Loaded) == 0 {
		return
	}
	if listed, _ := p.allowsTool(t.Name); listed {
		return
	}
	own := s
	own.Loaded = nil
	if ok, _ := tools.Visible(t, own, nil); ok {
		return
	}
	by := "a loaded skill"
	for _, sk := range dedupSkills(loaded) {
		if skills.MatchTool(sk.AllowedTools, t.Name) {
			by = fmt.Sprintf("skill %q", sk.Name)
			break
		}
	}
	var used perms
	for _, perm := range d.Permissions {
		if bit, ok := permBit(perm); ok {
			used |= bit
		}
	}
	what := "paths outside the workspace"
	if sensitive := used & sensitivePerms; sensitive != 0 {
		what = sensitive.String()
	}
	d.Verdict, d.Rule = tools.NeedsApproval, "skill:"+t.Name+"/approval"
	d.Reason = fmt.Sprintf("tool %q came with %s and uses %s; profile %q does not list it, so each call needs a person's approval",
		t.Name, by, what, p.Name)
}

// toolGate decides whether the profile allows the tool at all. A tool that
// declares no permissions is allowed by none: nothing is granted by
// omission.
func (e *Engine) toolGate(p *Profile, t tools.Info) *finding {
	if len(t.Permissions) == 0 {
		return &finding{rule: "tool:undeclared", reason: fmt.Sprintf("tool %q declares no permissions, so no profile allows it", t.Name)}
	}
	listed, hasList := p.allowsTool(t.Name)
	if hasList && !listed {
		return &finding{rule: "tools", reason: fmt.Sprintf("tool %q is not in the profile's tools list", t.Name)}
	}
	if listed {
		return nil
	}
	if missing := e.toolNeeds(t) &^ p.perms; missing != 0 {
		return &finding{rule: "permission:" + missingName(missing), reason: fmt.Sprintf("tool %q is not allowed (needs the %s permission)", t.Name, missing)}
	}
	return nil
}

// toolNeeds is what a tool needs at the least, before its arguments are
// looked at: what it declares.
func (e *Engine) toolNeeds(t tools.Info) perms {
	var need perms
	for _, p := range t.Permissions {
		if bit, ok := permBit(p); ok {
			need |= bit
		}
	}
	return need
}

// checkArgs applies the path and shell policy to a core tool's input. It
// returns a refusal, an approval, the permissions used and whether a path
// outside the workspace is involved; an error for input that cannot be
// read.
func (e *Engine) checkArgs(p *Profile, call tools.Call, grant perms) (deny, approval *finding, used perms, outside bool, err error) {
	in, ok := decodeToolInput(bytes.TrimSpace(call.Input))
	if !ok {
		return nil, nil, 0, false, &inputError{fmt.Sprintf("tool %q input is not a JSON object", call.Tool.Name)}
	}
	str := func(key string, raw json.RawMessage) (string, error) {
		if raw == nil {
			return "", nil
		}
		if s, ok := plainJSONString(raw); ok {
			return s, nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", &inputError{fmt.Sprintf("tool %q input: %s must be a string", call.Tool.Name, key)}
		}
		return s, nil
	}
	var acc access
	switch call.Tool.Name {
	case tools.ReadFile, tools.ListDirectory, tools.SearchFiles:
		acc = accRead
	case tools.WriteFile, tools.EditFile:
		acc = accWrite
	case tools.Bash:
		cmd, err := str("command", in.Command)
		if err != nil {
			return nil, nil, 0, false, err
		}
		if strings.TrimSpace(cmd) == "" {
			return nil, nil, 0, false, &inputError{"tool \"bash\" input: command is required"}
		}
		ws, werr := e.workspace(call.Workspace)
		if werr != nil {
			return &finding{rule: "workspace", reason: "the run has no workspace, so the command's paths cannot be checked"}, nil, 0, false, nil
		}
		// Listing bash in a profile's tools lets it be called; the
		// commands in it still need permissions or commands.allow.
		c := e.newChecker(p, ws)
		c.script(cmd, c.dirs)
		if c.deny == nil && c.used.has(pExec) {
			c.payloadScan(cmd)
		}
		deny, approval, used, outside = c.deny, c.approval, c.used, c.outside
		e.releaseChecker(c)
		return deny, approval, used, outside, nil
	default:
		return nil, nil, 0, false, nil
	}
	rel, err := str("path", in.Path)
	if err != nil {
		return nil, nil, 0, false, err
	}
	if rel == "" {
		if acc == accWrite {
			return nil, nil, 0, false, &inputError{fmt.Sprintf("tool %q input: path is required", call.Tool.Name)}
		}
		rel = "."
	}
	ws, werr := e.workspace(call.Workspace)
	if werr != nil {
		return &finding{rule: "workspace", reason: "the run has no workspace, so paths cannot be checked"}, nil, 0, false, nil
	}
	r := ws.resolve(ws.real, rel)
	u := pathUse{acc: acc, tree: call.Tool.Name == tools.SearchFiles || call.Tool.Name == tools.ListDirectory}
	if d, out := p.checkPath(r, u, grant); d != nil {
		return &finding{rule: d.rule, reason: d.reason}, nil, 0, false, nil
	} else {
		outside = out
	}
	if call.Tool.Name == tools.EditFile {
		// edit_file reads the file too, and what it answers (found, how
		// many times) tells its text: it must be readable as well.
		if d, _ := p.checkPath(r, pathUse{acc: accRead}, grant); d != nil {
			return &finding{rule: d.rule, reason: d.reason}, nil, 0, false, nil
		}
	}
	used = pRead
	if acc == accWrite {
		used = pWrite
	}
	return nil, nil, used, outside, nil
}

// workspace returns the workspace of a call. The real path of its root is
// resolved once and then only confirmed to still be a directory: the
// directories above a workspace belong to the daemon, not to agents.
func (e *Engine) workspace(dir string) (*workspace, error) {
	if dir == "" {
		return nil, errors.New("no workspace")
	}
	abs := dir
	if !filepath.IsAbs(abs) {
		var err error
		if abs, err = filepath.Abs(dir); err != nil {
			return nil, fmt.Errorf("workspace %s: %w", dir, err)
		}
	}
	abs = filepath.Clean(abs)
	e.rootsMu.RLock()
	w := e.roots[abs]
	e.rootsMu.RUnlock()
	if w != nil {
		if isDir(w.real) {
			return w, nil
		}
		e.rootsMu.Lock()
		delete(e.roots, abs)
		e.rootsMu.Unlock()
	}
	w, err := newWorkspace(abs)
	if err != nil {
		return nil, err
	}
	e.rootsMu.Lock()
	if len(e.roots) >= maxCachedRoots {
		// A bound, not a cache policy: a thread's next check just resolves
		// its workspace again.
		clear(e.roots)
	}
	e.roots[abs] = w
	e.rootsMu.Unlock()
	return w, nil
}

// maxCachedRoots bounds the workspaces whose real path is remembered; every
// thread has its own, and a long-lived daemon sees many.
const maxCachedRoots = 4096

// newChecker takes a checker from the pool and sets it up for one check.
func (e *Engine) newChecker(p *Profile, ws *workspace) *checker {
	c := e.checkers.Get().(*checker)
	c.p, c.perms, c.ws = p, p.perms, ws
	c.root[0] = ws.real
	c.dirs = c.root[:1:1]
	return c
}

// releaseChecker clears what the check left in c, so no syntax tree or
// finding outlives it, and returns c to the pool.
func (e *Engine) releaseChecker(c *checker) {
	c.reset()
	e.checkers.Put(c)
}

// CheckRequest is a call checked offline, by `switchyard policy check`.
type CheckRequest struct {
	Profile string
	// Agent, AgentTools and Package describe the calling agent; an empty
	// AgentTools means every core tool, as for a definition without one.
	Agent      string
	AgentTools []string
	Package    string
	Skills     []Skill
	// Workspace is the directory paths are resolved in; "" means the
	// current directory.
	Workspace string
	// Tool is the tool called. One that declares no permissions is taken
	// as the core tool of its name, or agent_<name> as an agent called as
	// a tool; any other is refused for declaring nothing.
	Tool  tools.Info
	Input json.RawMessage
}

// CheckOffline decides req without recording anything. Its error is bad
// input (an unknown profile, a tool input that is not JSON), which the CLI
// exits 2 for; otherwise the decision's verdict says allow, deny or
// needs_approval.
func (e *Engine) CheckOffline(req CheckRequest) (Decision, error) {
	if _, ok := e.profiles[req.Profile]; !ok {
		return Decision{}, fmt.Errorf("unknown profile %q (known: %s)", req.Profile, strings.Join(e.Names(), ", "))
	}
	if req.Tool.Name == "" {
		return Decision{}, errors.New("no tool named")
	}
	if len(req.Tool.Permissions) == 0 {
		if core, ok := tools.CoreInfo(req.Tool.Name); ok && (req.Tool.Kind == "" || req.Tool.Kind == tools.KindCore) {
			req.Tool.Kind, req.Tool.Permissions = core.Kind, core.Permissions
		} else if strings.HasPrefix(req.Tool.Name, "agent_") && (req.Tool.Kind == "" || req.Tool.Kind == tools.KindAgent) {
			req.Tool.Kind, req.Tool.Permissions = tools.KindAgent, []Permission{PermRead}
		}
	}
	ws := req.Workspace
	if ws == "" {
		ws = "."
	}
	w, err := e.workspace(ws)
	if err != nil {
		return Decision{}, err
	}
	input := req.Input
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	if !json.Valid(input) {
		return Decision{}, fmt.Errorf("tool input is not valid JSON")
	}
	agent := req.Agent
	if agent == "" {
		agent = "(offline)"
	}
	call := tools.Call{
		CallContext: tools.CallContext{
			Scope:     tools.Scope{Agent: agent, Tools: req.AgentTools, Profile: req.Profile, Package: req.Package},
			Workspace: w.root,
		},
		Tool:  req.Tool,
		Input: input,
	}
	return e.decide(call, req.Skills)
}
