package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/internal/yamldecode"
	"github.com/switchyard/switchyard/skills"
)

// The control tools of skills loaded on demand.
const (
	EnableSkillTool  = "enable_skill"
	DisableSkillTool = "disable_skill"
)

// SkillCatalog is what runs read of the skills registry: which skills and
// packages are enabled where a run happens, and the skills themselves.
// *skills.Registry implements it.
type SkillCatalog interface {
	EnabledSkills(t skills.Target) []*skills.Skill
	Enabled(t skills.Target, skill string) skills.Effective
	Skill(name string) (*skills.Skill, bool)
	Validate(names []string) skills.ValidationResult
	PackageEnabled(t skills.Target, pkg string) skills.Effective
}

// CommandTools gives the command tools of the packages enabled for a
// target; a run sees no other package's tools.
type CommandTools interface {
	CommandTools(t skills.Target) []tools.Tool
}

// targetOf is where a run happens, as skills are enabled: the org and
// repository of its thread (GitHub threads have them) and its agent.
func targetOf(sessionKey, agent string) skills.Target {
	t := skills.Target{Agent: agent}
	if th, err := bot.ParseThread(sessionKey); err == nil && th.Source == bot.SourceGitHub {
		t.Org = strings.ToLower(th.Owner)
		t.Repo = strings.ToLower(th.Owner + "/" + th.Repo)
	}
	return t
}

// where says a target in words: "in acme/web for @coder".
func where(t skills.Target) string {
	switch {
	case t.Repo != "":
		return fmt.Sprintf("in %s for @%s", t.Repo, t.Agent)
	case t.Org != "":
		return fmt.Sprintf("in %s for @%s", t.Org, t.Agent)
	}
	return "for @" + t.Agent
}

// loadedSkills is a run's one record of the skills it has loaded. The
// prompt builder reads it for the skills' instructions, the toolset for the
// tools they bring, and the policy (through LoadedSkills) for what they
// allow and forbid. enable_skill and disable_skill change what the next
// turn starts with; the turn under way keeps what it started with.
type loadedSkills struct {
	mu     sync.Mutex
	active []*skills.Skill // in effect this turn, in the order loaded
	next   []*skills.Skill // in effect from the next turn
	// pinned are the skills the run started with (a subagent's from its
	// parent, or its agent's and its entry point's): whoever set it up
	// fixed its tools with them, and it cannot unload them.
	pinned []string
	// spawned says a parent gave the pinned skills, for the refusal.
	spawned bool
}

// pin makes names unloadable for the rest of the run.
func (l *loadedSkills) pin(names []string) {
	l.mu.Lock()
	l.pinned = append(l.pinned, names...)
	l.mu.Unlock()
}

// isPinned reports whether name was loaded when the run started.
func (l *loadedSkills) isPinned(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.pinned, name)
}

// current returns the skills in effect this turn.
func (l *loadedSkills) current() []*skills.Skill {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.active
}

// pending returns what the next turn starts with.
func (l *loadedSkills) pending() []*skills.Skill {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

func (l *loadedSkills) setNext(next []*skills.Skill) {
	l.mu.Lock()
	l.next = next
	l.mu.Unlock()
}

// startTurn puts what enable_skill and disable_skill asked for in effect
// and reports whether that changed anything.
func (l *loadedSkills) startTurn() ([]*skills.Skill, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	changed := !slices.Equal(skillNames(l.active), skillNames(l.next))
	l.active = l.next
	return l.active, changed
}

func skillNames(list []*skills.Skill) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s.Name
	}
	return out
}

// tools returns the tools the skills in effect allow, merged into what the
// agent may see: a skill brings its tools along, and its rules keep it to
// them.
func (l *loadedSkills) tools() []string {
	var out []string
	for _, s := range l.current() {
		for _, t := range s.AllowedTools {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

type loadedKey struct{}

// withLoaded marks ctx as a run's whose loaded skills are l; every tool call
// of the run runs under it.
func withLoaded(ctx context.Context, l *loadedSkills) context.Context {
	return context.WithValue(ctx, loadedKey{}, l)
}

// LoadedSkills is the policy's view of the skills an agent has loaded
// (policy.SkillSource): the record of the run making the call, which the
// runtime puts in the context of every call. A call outside a run has
// none. Give it to policy.Options.Skills.
type LoadedSkills struct{}

var _ policy.SkillSource = LoadedSkills{}

// ActiveSkills implements policy.SkillSource.
func (LoadedSkills) ActiveSkills(ctx context.Context, _ tools.CallContext) []policy.Skill {
	l, _ := ctx.Value(loadedKey{}).(*loadedSkills)
	return policySkills(l.current())
}

func policySkills(list []*skills.Skill) []policy.Skill {
	if len(list) == 0 {
		return nil
	}
	out := make([]policy.Skill, len(list))
	for i, s := range list {
		// A skill's allowed_tools is explicit: an empty list allows none.
		allowed := s.AllowedTools
		if allowed == nil {
			allowed = []string{}
		}
		out[i] = policy.Skill{Name: s.Name, AllowedTools: allowed, ForbiddenTools: s.ForbiddenTools}
	}
	return out
}

// passedOnHeld are the ceilings of a run rn spawns or hands its work to:
// what passedOn gives, and the skills rn cannot unload (its agent's, its
// entry point's, its parent's), kept as rules. A skill's allowed_tools
// never names spawn_subagent or handoff_to (control tools pass it), so
// without them either would be a way out of the skill.
func (rn *run) passedOnHeld(how string) []bot.Ceiling {
	cs := rn.passedOn(how)
	var held []bot.SkillRule
	var names []string
	for _, s := range policySkills(rn.skills.held()) {
		held = append(held, bot.SkillRule{Name: s.Name, AllowedTools: s.AllowedTools, ForbiddenTools: s.ForbiddenTools})
		names = append(names, s.Name)
	}
	if len(held) == 0 {
		return cs
	}
	return append(cs, bot.Ceiling{Profile: rn.def.Profile, Skills: held,
		Reason: fmt.Sprintf("%s @%s, which is held to %s %s", how, rn.def.Name, skillWord(len(names)), quoteList(names))})
}

func skillWord(n int) string {
	if n == 1 {
		return "skill"
	}
	return "skills"
}

// held returns the skills in effect that the run cannot unload.
func (l *loadedSkills) held() []*skills.Skill {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*skills.Skill
	for _, s := range l.active {
		if slices.Contains(l.pinned, s.Name) {
			out = append(out, s)
		}
	}
	return out
}

// hideRefused leaves out of the listing what the loaded skills, and those
// the run's ceilings hold it to, refuse, as the policy would.
func (l *loadedSkills) hideRefused(ceilings []bot.Ceiling) func(tools.Info) bool {
	loaded := policySkills(l.current())
	var sets [][]policy.Skill
	if len(loaded) > 0 {
		sets = append(sets, loaded)
	}
	for _, c := range ceilings {
		if len(c.Skills) > 0 {
			sets = append(sets, policy.CeilingSkills(c))
		}
	}
	if len(sets) == 0 {
		return nil
	}
	return func(t tools.Info) bool {
		for _, set := range sets {
			if _, _, refused := policy.SkillRefusal(set, t); refused {
				return true
			}
		}
		return false
	}
}

// preload loads the skills a run starts with: its agent's skills and
// those of the entry point its work came through. A skill that is not
// enabled where the run happens is left out and said so. Those loaded stay
// loaded for the whole run.
func (r *Runtime) preload(ctx context.Context, rn *run, names []string) {
	if r.opts.Skills == nil || len(names) == 0 {
		return
	}
	var set []*skills.Skill
	for _, name := range names {
		if slices.ContainsFunc(set, func(s *skills.Skill) bool { return s.Name == name }) {
			continue
		}
		add, err := r.withCompanions(rn.target, name)
		if err != nil {
			r.log.LogAttrs(ctx, slog.LevelWarn, "skill not loaded", append(rn.attrs(), slog.String("skill", name), slog.String("reason", err.Error()))...)
			r.report(ctx, rn, bot.ProgressEvent{Kind: bot.ProgressNote, Text: "not loading skill " + name + ": " + err.Error()})
			continue
		}
		for _, s := range add {
			if !slices.ContainsFunc(set, func(x *skills.Skill) bool { return x.Name == s.Name }) {
				set = append(set, s)
			}
		}
	}
	if v := r.opts.Skills.Validate(skillNames(set)); !v.Valid {
		why := validationText(v)
		r.log.LogAttrs(ctx, slog.LevelWarn, "skills not loaded", append(rn.attrs(), slog.String("reason", why))...)
		r.report(ctx, rn, bot.ProgressEvent{Kind: bot.ProgressNote, Text: "not loading skills: " + why})
		return
	}
	rn.skills.setNext(set)
	rn.skills.pin(skillNames(set))
}

// withCompanions returns the skill named and the companions it requires,
// each of which must be enabled for t.
func (r *Runtime) withCompanions(t skills.Target, name string) ([]*skills.Skill, error) {
	var out []*skills.Skill
	var visit func(name, by string) error
	visit = func(name, by string) error {
		if slices.ContainsFunc(out, func(s *skills.Skill) bool { return s.Name == name }) {
			return nil
		}
		s, ok := r.opts.Skills.Skill(name)
		if !ok {
			if by != "" {
				return fmt.Errorf("skill %q requires %q, which is not installed", by, name)
			}
			// Skill names are lower-case; a model may write one otherwise,
			// or misspell it: the enabled skill it most likely meant.
			msg := fmt.Sprintf("there is no skill %q", name)
			if best := yamldecode.Closest(name, skillNames(r.opts.Skills.EnabledSkills(t))); best != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", best)
			}
			return errors.New(msg)
		}
		if e := r.opts.Skills.Enabled(t, name); !e.Enabled {
			why := "no setting enables it"
			if e.Scope != skills.ScopeDefault {
				why = "it is disabled at " + e.Scope
			}
			if by != "" {
				return fmt.Errorf("skill %q requires %q, which is not enabled %s (%s)", by, name, where(t), why)
			}
			return fmt.Errorf("skill %q is not enabled %s (%s); a person enables it with switchyard skills enable", name, where(t), why)
		}
		out = append(out, s)
		if c := s.ComposabilityRules; c != nil {
			for _, req := range c.Requires {
				if err := visit(req, name); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, visit(name, "")
}

func validationText(v skills.ValidationResult) string {
	msgs := make([]string, len(v.Errors))
	for i, e := range v.Errors {
		msgs[i] = e.Message
	}
	return strings.Join(msgs, "; ")
}

// startTurn puts the skills asked for in effect for the turn about to
// start, and shows them in the status message when they changed.
func (r *Runtime) startTurn(ctx context.Context, rn *run, turn int) {
	active, changed := rn.skills.startTurn()
	if !changed {
		return
	}
	names := skillNames(active)
	r.log.LogAttrs(ctx, slog.LevelInfo, "skills in effect", append(rn.attrs(), slog.Int("turn", turn), slog.String("skills", strings.Join(names, ",")))...)
	r.report(ctx, rn, bot.ProgressEvent{Kind: bot.ProgressSkills, Turn: turn, Skills: names})
}

// skillTools are the control tools of rn: enable_skill while the run's
// target enables any skill, disable_skill while one is loaded or can be.
func (r *Runtime) skillTools(rn *run) []tools.Tool {
	if r.opts.Skills == nil {
		return nil
	}
	if len(r.opts.Skills.EnabledSkills(rn.target)) == 0 && len(rn.skills.pending()) == 0 {
		return nil
	}
	return []tools.Tool{&enableSkillTool{rt: r, rn: rn}, &disableSkillTool{rt: r, rn: rn}}
}

var skillToolSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"name":{"type":"string","description":"The skill's name, as listed under Skills"}},` +
	`"required":["name"],"additionalProperties":false}`)

func skillName(input json.RawMessage) (string, error) {
	var in struct {
		Name string `json:"name"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	name := strings.TrimSpace(in.Name)
	if name == "" {
		return "", errors.New("invalid input: name is required")
	}
	return name, nil
}

// enableSkillTool loads a skill enabled where the run happens: from the
// next turn its instructions are in the agent's prompt, its tools in its
// toolset, and its rules in every decision the policy makes for it.
type enableSkillTool struct {
	rt *Runtime
	rn *run
}

func (t *enableSkillTool) Info() tools.Info {
	return tools.Info{
		Name: EnableSkillTool,
		Description: "Load one of the skills listed under Skills when the request matches it. From your next turn its instructions " +
			"are in your prompt and its tools are yours, and its rules hold: only its allowed tools, never its forbidden ones. " +
			"Skills it requires are loaded with it. disable_skill unloads it.",
		Schema: skillToolSchema,
		Kind:   tools.KindControl,
		// Loading narrows what the agent may do; the tools it brings are
		// decided call by call under the agent's own rights.
		Permissions: []tools.Permission{tools.PermRead},
	}
}

func (t *enableSkillTool) Run(ctx context.Context, _ tools.CallContext, input json.RawMessage) (string, error) {
	name, err := skillName(input)
	if err != nil {
		return "", err
	}
	rt, rn := t.rt, t.rn
	pending := rn.skills.pending()
	if slices.ContainsFunc(pending, func(s *skills.Skill) bool { return s.Name == name }) {
		return fmt.Sprintf("skill %q is loaded already", name), nil
	}
	add, err := rt.withCompanions(rn.target, name)
	if err != nil {
		return "", tools.Refuse("%v", err)
	}
	next := slices.Clone(pending)
	var added []string
	for _, s := range add {
		if !slices.ContainsFunc(next, func(x *skills.Skill) bool { return x.Name == s.Name }) {
			next = append(next, s)
			added = append(added, s.Name)
		}
	}
	if v := rt.opts.Skills.Validate(skillNames(next)); !v.Valid {
		return "", tools.Refuse("skill %q cannot be loaded with the skills you have: %s", name, validationText(v))
	}
	rn.skills.setNext(next)
	rt.log.LogAttrs(ctx, slog.LevelInfo, "skill loaded", append(rn.attrs(), slog.String("skills", strings.Join(added, ",")))...)
	var b strings.Builder
	fmt.Fprintf(&b, "Loaded %s. From your next turn ", quoteList(added))
	if len(added) == 1 {
		b.WriteString("its instructions are in your prompt under Loaded skills, and its rules hold for every call you make:\n")
	} else {
		b.WriteString("their instructions are in your prompt under Loaded skills, and their rules hold for every call you make:\n")
	}
	for _, s := range add {
		fmt.Fprintf(&b, "- %s: allowed tools %s", s.Name, listOr(s.AllowedTools, "none"))
		if len(s.ForbiddenTools) > 0 {
			fmt.Fprintf(&b, "; forbidden %s", strings.Join(s.ForbiddenTools, ", "))
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

// disableSkillTool unloads a skill, and the loaded skills that require it,
// from the next turn.
type disableSkillTool struct {
	rt *Runtime
	rn *run
}

func (t *disableSkillTool) Info() tools.Info {
	return tools.Info{
		Name:        DisableSkillTool,
		Description: "Unload a skill you loaded, and the skills that require it: from your next turn its instructions, tools and rules are gone.",
		Schema:      skillToolSchema,
		Kind:        tools.KindControl,
		Permissions: []tools.Permission{tools.PermRead},
	}
}

func (t *disableSkillTool) Run(ctx context.Context, _ tools.CallContext, input json.RawMessage) (string, error) {
	name, err := skillName(input)
	if err != nil {
		return "", err
	}
	rt, rn := t.rt, t.rn
	pending := rn.skills.pending()
	if !slices.ContainsFunc(pending, func(s *skills.Skill) bool { return s.Name == name }) {
		return "", tools.Refuse("skill %q is not loaded (loaded: %s)", name, listOr(skillNames(pending), "none"))
	}

	gone := []string{name}
	// Whatever requires a skill that goes, goes too.
	for changed := true; changed; {
		changed = false
		for _, s := range pending {
			if slices.Contains(gone, s.Name) || s.ComposabilityRules == nil {
				continue
			}
			if slices.ContainsFunc(s.ComposabilityRules.Requires, func(req string) bool { return slices.Contains(gone, req) }) {
				gone = append(gone, s.Name)
				changed = true
			}
		}
	}
	for _, g := range gone {
		switch {
		case !rn.skills.isPinned(g):
		case rn.skills.spawned:
			return "", tools.Refuse("skill %q was given to you when you were spawned and stays loaded: the run that spawned you decided what you may do", g)
		default:
			return "", tools.Refuse("skill %q was loaded when you started and stays loaded: whoever set you up decided what you may do", g)
		}
	}
	next := slices.DeleteFunc(slices.Clone(pending), func(s *skills.Skill) bool { return slices.Contains(gone, s.Name) })
	rn.skills.setNext(next)
	rt.log.LogAttrs(ctx, slog.LevelInfo, "skill unloaded", append(rn.attrs(), slog.String("skills", strings.Join(gone, ",")))...)
	return fmt.Sprintf("Unloaded %s from your next turn (still loaded: %s).", quoteList(gone), listOr(skillNames(next), "none")), nil
}

// writeSkills adds to a system prompt the skills the run may load, one
// line each, and the instructions of those it has loaded.
func (r *Runtime) writeSkills(b *strings.Builder, rn *run, visible []tools.Info) {
	active := rn.skills.current()
	var offered []*skills.Skill
	if r.opts.Skills != nil && slices.ContainsFunc(visible, func(t tools.Info) bool { return t.Name == EnableSkillTool }) {
		offered = r.opts.Skills.EnabledSkills(rn.target)
	}
	if len(offered) == 0 && len(active) == 0 {
		return
	}
	b.WriteString("\n## Skills\n\n")
	if len(offered) > 0 {
		b.WriteString("Load a skill with enable_skill when the request matches it; its instructions and tools are yours from your next turn.\n")
		for _, s := range offered {
			writeItem(b, s.Name, oneLine(s.Description, 500))
		}
	}
	if len(active) == 0 {
		return
	}
	b.WriteString("\n## Loaded skills\n\nThese rules hold for every call you make until you unload a skill with disable_skill.\n")
	for _, s := range active {
		fmt.Fprintf(b, "\n### %s\n\n", s.Name)
		if text := strings.TrimSpace(s.Instructions); text != "" {
			b.WriteString(text)
			b.WriteString("\n")
		}
		if len(s.Preconditions) > 0 {
			b.WriteString("\nBefore you start:\n")
			for _, p := range s.Preconditions {
				fmt.Fprintf(b, "- %s\n", p)
			}
		}
		if len(s.ExecutionProtocol) > 0 {
			b.WriteString("\nSteps:\n")
			for i, step := range s.ExecutionProtocol {
				fmt.Fprintf(b, "%d. %s\n", i+1, step)
			}
		}
		if len(s.Postconditions) > 0 {
			b.WriteString("\nWhen you are done:\n")
			for _, p := range s.Postconditions {
				fmt.Fprintf(b, "- %s\n", p)
			}
		}
		if oc := s.OutputContract; oc != nil && len(oc.Sections) > 0 {
			fmt.Fprintf(b, "\nAnswer in %s with the sections %s.\n", oc.Format, strings.Join(oc.Sections, ", "))
		}
		fmt.Fprintf(b, "\nAllowed tools: %s.", listOr(s.AllowedTools, "none"))
		if len(s.ForbiddenTools) > 0 {
			fmt.Fprintf(b, " Forbidden: %s.", strings.Join(s.ForbiddenTools, ", "))
		}
		b.WriteString("\n")
	}
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

func listOr(list []string, none string) string {
	if len(list) == 0 {
		return none
	}
	return strings.Join(list, ", ")
}

// packageOff says why d, a package's agent, does not run at t (its package
// is not enabled there), or "".
func (r *Runtime) packageOff(t skills.Target, d Definition) string {
	if r.opts.Skills == nil || d.Package == "" {
		return ""
	}
	t.Agent = d.Name
	e := r.opts.Skills.PackageEnabled(t, d.Package)
	if e.Enabled {
		return ""
	}
	why := "no setting enables it"
	if e.Scope != skills.ScopeDefault {
		why = "it is disabled at " + e.Scope
	}
	return fmt.Sprintf("agent %q comes from package %q, which is not enabled %s (%s); a person enables it with switchyard skills enable %s --scope …",
		d.Name, d.Package, where(t), why, d.Package)
}

// packageDisabled is packageOff for a run's own agent.
func (r *Runtime) packageDisabled(rn *run) string { return r.packageOff(rn.target, rn.def) }

// runSkills are the skills a job's run starts with: its agent's, then those
// of the entry point its lead work item came through.
func runSkills(def Definition, items []bot.WorkItem) []string {
	out := slices.Clone(def.Skills)
	if len(items) > 0 {
		for _, s := range items[0].Route.Skills {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// packageTools are what packages give rn: enable_skill and disable_skill,
// the command tools of the packages enabled where it happens, and the
// builder's install_package.
func (r *Runtime) packageTools(rn *run) []tools.Tool {
	out := r.skillTools(rn)
	if r.opts.CommandTools != nil {
		// A command tool named as a tool the run has otherwise (a package
		// installed before installs refused such names) is left out: it
		// never stands in for that tool.
		for _, t := range r.opts.CommandTools.CommandTools(rn.target) {
			name := t.Info().Name
			taken := slices.Contains(ReservedToolNames(), name)
			if r.opts.Tools != nil {
				_, registered := r.opts.Tools.Get(name)
				taken = taken || registered
			}
			if !taken {
				out = append(out, t)
			}
		}
	}
	if r.opts.Installer != nil && rn.def.Name == BuilderAgent {
		out = append(out, &installTool{rt: r, rn: rn})
	}
	return out
}
