package skills

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/switchyard/switchyard/internal/yamldecode"
)

// Validation error codes.
const (
	// CodeUnknownSkill: a name no skill has.
	CodeUnknownSkill = "unknown_skill"
	// CodeMissingCompanion: a skill whose required companion is not in
	// the set.
	CodeMissingCompanion = "missing_companion"
	// CodeIncompatible: two skills of the set that cannot be loaded
	// together.
	CodeIncompatible = "incompatible_skills"
)

// ValidationError is one reason a skill set is invalid: a code, a message
// a person reads, and the skills at fault.
type ValidationError struct {
	Code    string   `json:"code"`
	Message string   `json:"message"`
	Skills  []string `json:"skills"`
}

// ValidationResult is the verdict on a skill set.
type ValidationResult struct {
	Valid    bool              `json:"valid"`
	Errors   []ValidationError `json:"errors"`
	Warnings []string          `json:"warnings"`
}

// MarshalJSON writes empty lists as [], never null.
func (v ValidationResult) MarshalJSON() ([]byte, error) {
	type plain ValidationResult
	p := plain(v)
	if p.Errors == nil {
		p.Errors = []ValidationError{}
	}
	if p.Warnings == nil {
		p.Warnings = []string{}
	}
	return json.Marshal(p)
}

// Validate checks a skill set before anything uses it (spawn_subagent
// calls it before a subagent starts): every name known, every required
// companion present, no two incompatible skills. A skill named twice counts
// once. Warnings are those registration found for the skills of the set.
// It reads the catalog in effect and allocates only to report problems.
func (r *Registry) Validate(names []string) ValidationResult {
	return r.cur.Load().validate(names)
}

func (c *catalog) validate(names []string) ValidationResult {
	var res ValidationResult
	for i, name := range names {
		if slices.Contains(names[:i], name) {
			continue // duplicates merge silently
		}
		e, ok := c.skills[name]
		if !ok {
			msg := fmt.Sprintf("unknown skill %q", name)
			if best := yamldecode.Closest(name, c.names); best != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", best)
			}
			res.Errors = append(res.Errors, ValidationError{Code: CodeUnknownSkill, Message: msg, Skills: []string{name}})
			continue
		}
		for _, req := range e.requires {
			if !slices.Contains(names, req) {
				res.Errors = append(res.Errors, ValidationError{
					Code:    CodeMissingCompanion,
					Message: fmt.Sprintf("%s requires %s, which is not in the set; add it", name, req),
					Skills:  []string{name, req},
				})
			}
		}
		for _, inc := range e.incompatible {
			j := slices.Index(names, inc)
			if j < 0 {
				continue
			}
			// A pair both sides declare is reported once, by the first named.
			if other, ok := c.skills[inc]; ok && j < i && slices.Contains(other.incompatible, name) {
				continue
			}
			res.Errors = append(res.Errors, ValidationError{
				Code:    CodeIncompatible,
				Message: fmt.Sprintf("%s and %s cannot be loaded together (%s declares them incompatible)", name, inc, name),
				Skills:  []string{name, inc},
			})
		}
		res.Warnings = append(res.Warnings, e.warnings...)
		// A step of this skill that another member stops: most
		// restrictive wins, so loaded together the step cannot be taken.
		for _, st := range e.steps {
			for j, other := range names {
				o, ok := c.skills[other]
				if other == name || !ok || slices.Contains(names[:j], other) || !MatchTool(o.skill.ForbiddenTools, st.tool) {
					continue
				}
				res.Warnings = append(res.Warnings, fmt.Sprintf("skill %s: step %d names tool %s, which %s forbids; loaded together, that step cannot be taken",
					name, st.step, st.tool, other))
			}
		}
	}
	res.Valid = len(res.Errors) == 0
	return res
}

// Composition is the capability a skill set gives, most restrictive
// winning: a tool any member forbids is forbidden, whatever allows it, the
// same skill's allowed_tools included; the allowed tools are those some
// member allows and none forbids. An empty set composes to zero
// capability.
type Composition struct {
	Skills         []string `json:"skills"`
	AllowedTools   []string `json:"allowed_tools"`
	ForbiddenTools []string `json:"forbidden_tools"`
}

// Allows reports whether the composition allows tool.
func (c Composition) Allows(tool string) bool {
	return !MatchTool(c.ForbiddenTools, tool) && MatchTool(c.AllowedTools, tool)
}

// Compose composes the skills named (each once). An unknown name is an
// error; missing companions and incompatibilities are Validate's to report.
func (r *Registry) Compose(names []string) (Composition, error) {
	c := r.cur.Load()
	out := Composition{Skills: []string{}, AllowedTools: []string{}, ForbiddenTools: []string{}}
	var unknown []string
	for _, name := range names {
		if slices.Contains(out.Skills, name) || slices.Contains(unknown, name) {
			continue
		}
		e, ok := c.skills[name]
		if !ok {
			unknown = append(unknown, name)
			continue
		}
		out.Skills = append(out.Skills, name)
		for _, t := range e.skill.AllowedTools {
			if !slices.Contains(out.AllowedTools, t) {
				out.AllowedTools = append(out.AllowedTools, t)
			}
		}
		for _, t := range e.skill.ForbiddenTools {
			if !slices.Contains(out.ForbiddenTools, t) {
				out.ForbiddenTools = append(out.ForbiddenTools, t)
			}
		}
	}
	if len(unknown) > 0 {
		return Composition{}, errorf(ErrNotFound, "unknown skill%s %s", plural(len(unknown), "", "s"), strings.Join(quoteAll(unknown), ", "))
	}
	out.AllowedTools = slices.DeleteFunc(out.AllowedTools, func(t string) bool { return MatchTool(out.ForbiddenTools, t) })
	slices.Sort(out.Skills)
	slices.Sort(out.AllowedTools)
	slices.Sort(out.ForbiddenTools)
	return out, nil
}

// MatchTool reports whether a tools list names tool: exactly, or by a
// pattern ending in "*" (github_*).
func MatchTool(list []string, tool string) bool {
	for _, t := range list {
		if t == tool {
			return true
		}
		if prefix, ok := strings.CutSuffix(t, "*"); ok && strings.HasPrefix(tool, prefix) {
			return true
		}
	}
	return false
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}

// SelectRequest describes a task for the selector.
type SelectRequest struct {
	Task string `json:"task"`
	// RiskLevel is low, medium or high; empty means not said.
	RiskLevel string `json:"risk_level,omitempty"`
	// Coding says the task changes code.
	Coding bool `json:"coding"`
	// Among limits the choice (to the skills enabled where the task runs);
	// nil means every skill. Required companions are added regardless.
	Among []string `json:"among,omitempty"`
}

// Pick is a selected skill and why.
type Pick struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Selection is what the selector chose, and the verdict on the set.
type Selection struct {
	Skills     []string         `json:"skills"`
	Picks      []Pick           `json:"picks"`
	Validation ValidationResult `json:"validation"`
}

// Select chooses skills for a task: for a coding task every coding skill
// (compatibility_rules.coding), never one for other tasks; skills whose
// keywords or name the task mentions as words; then every required
// companion of those, so a coding task always gets a complete pipeline.
// Skills whose risk levels exclude the task's are left out, unless
// required.
func (r *Registry) Select(req SelectRequest) (Selection, error) {
	if req.RiskLevel != "" && !slices.Contains(RiskLevels(), req.RiskLevel) {
		return Selection{}, errorf(ErrInvalid, "risk_level %q: want low, medium or high", req.RiskLevel)
	}
	c := r.cur.Load()
	words := " " + strings.Join(taskWords(req.Task), " ") + " "
	out := Selection{Skills: []string{}, Picks: []Pick{}}
	pick := func(name, reason string) {
		if !slices.Contains(out.Skills, name) {
			out.Skills = append(out.Skills, name)
			out.Picks = append(out.Picks, Pick{Name: name, Reason: reason})
		}
	}
	for _, name := range c.names {
		if req.Among != nil && !slices.Contains(req.Among, name) {
			continue
		}
		s := c.skills[name].skill
		var cr CompatibilityRules
		if s.CompatibilityRules != nil {
			cr = *s.CompatibilityRules
		}
		if cr.Coding != req.Coding && cr.Coding {
			continue // a coding skill, and the task changes no code
		}
		if req.RiskLevel != "" && len(cr.RiskLevels) > 0 && !slices.Contains(cr.RiskLevels, req.RiskLevel) {
			continue
		}
		if cr.Coding && req.Coding {
			pick(name, "coding task")
			continue
		}
		for _, phrase := range append([]string{strings.NewReplacer("-", " ", "_", " ").Replace(name)}, s.Keywords...) {
			if p := strings.Join(taskWords(phrase), " "); p != "" && strings.Contains(words, " "+p+" ") {
				pick(name, fmt.Sprintf("the task mentions %q", phrase))
				break
			}
		}
	}
	// Required companions, transitively: never a partial pipeline.
	for i := 0; i < len(out.Skills); i++ {
		e, ok := c.skills[out.Skills[i]]
		if !ok {
			continue
		}
		for _, req := range e.requires {
			pick(req, "required by "+out.Skills[i])
		}
	}
	out.Validation = c.validate(out.Skills)
	return out, nil
}

// taskWords splits text into lower-case words of letters and digits.
func taskWords(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127)
	})
}

// ParseSkill decodes one skill definition (for Register and
// OverrideVersion through the API) strictly, JSON for a .json name,
// reporting every problem at once.
func ParseSkill(file string, data []byte) (*Skill, error) {
	d := yamldecode.New(file, yamldecode.Options{JSON: strings.HasSuffix(file, ".json"), NoAliases: true})
	s := &Skill{}
	d.Document(data, s)
	if !d.Failed("") {
		s.check(d, "")
		if s.InstructionsFile != "" {
			d.FailAt("instructions_file", "a skill registered at run time has its instructions inline")
		}
	}
	return s, d.Err()
}

// check validates a skill given as a value (Register), with messages
// naming the skill.
func (s *Skill) validate() error {
	name := s.Name
	if name == "" {
		name = "skill"
	}
	d := yamldecode.New(name, yamldecode.Options{})
	s.check(d, "")
	return d.Err()
}

// Register adds a skill at run time, usable at once (validate, compose,
// enable) without a restart. Its package is "runtime" and it lasts until
// the daemon stops; install a package to keep a skill. A skill of that
// name must not exist: OverrideVersion replaces one. It returns the
// warnings registration found.
func (r *Registry) Register(s Skill) ([]string, error) {
	s.Package = RuntimePackage
	if err := s.validate(); err != nil {
		return nil, errorf(ErrInvalid, "%v", err)
	}
	if s.Version == "" {
		s.Version = "0.0.0"
	}
	err := r.update(func(c *catalog) error {
		if e, ok := c.skills[s.Name]; ok {
			return errorf(ErrConflict, "skill %s exists (package %s, version %s); use override_version to replace it", s.Name, e.skill.Package, e.skill.Version)
		}
		if c.runtime == nil {
			c.runtime = map[string]*Skill{}
		}
		c.runtime[s.Name] = &s
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r.Warnings(s.Name), nil
}

// OverrideVersion replaces the skill of that name by another version of
// it, in effect at once and until the daemon stops: the package on disk is
// unchanged. The new version keeps the package (and so the settings that
// enable it) of the one it replaces. A skill of that name that does not
// exist is registered.
func (r *Registry) OverrideVersion(s Skill) ([]string, error) {
	if s.Version == "" {
		return nil, errorf(ErrInvalid, "skill %s: override_version needs the version", s.Name)
	}
	if err := s.validate(); err != nil {
		return nil, errorf(ErrInvalid, "%v", err)
	}
	err := r.update(func(c *catalog) error {
		s.Package = RuntimePackage
		if e, ok := c.skills[s.Name]; ok {
			if e.skill.Version == s.Version {
				return errorf(ErrConflict, "skill %s is at version %s already", s.Name, s.Version)
			}
			s.Package = e.skill.Package
		}
		if c.runtime == nil {
			c.runtime = map[string]*Skill{}
		}
		c.runtime[s.Name] = &s
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r.Warnings(s.Name), nil
}

// PackageWarnings returns what registering p's skills would find worth
// saying, against the tools in effect.
func (r *Registry) PackageWarnings(p *Package) []string {
	c := r.cur.Load()
	tools := cloneMap(c.tools)
	known := c.known
	if known != nil {
		known = slices.Clone(known)
	}
	for _, t := range p.Tools {
		tools[t.Name] = true
		if known != nil {
			known = append(known, t.Name)
		}
	}
	var out []string
	for _, s := range p.Skills {
		out = append(out, skillWarnings(s, tools, known)...)
	}
	return out
}

// skillWarnings are what is worth saying about a skill without refusing
// it: a tool both allowed and forbidden, a protocol step naming a tool
// (one in tools, or in its own lists) that it does not allow, and, when
// known lists the tools there are (nil: not known), a tool list naming
// one that does not exist, most likely a misspelling: allowed, it grants
// nothing; forbidden, it refuses nothing.
func skillWarnings(s *Skill, tools map[string]bool, known []string) []string {
	var out []string
	for _, t := range s.AllowedTools {
		if MatchTool(s.ForbiddenTools, t) {
			out = append(out, fmt.Sprintf("skill %s: tool %s is both allowed and forbidden; forbidden wins", s.Name, t))
		}
	}
	if known != nil {
		for _, list := range []struct {
			field string
			names []string
			does  string
		}{{"allowed_tools", s.AllowedTools, "it grants nothing"}, {"forbidden_tools", s.ForbiddenTools, "it refuses nothing"}} {
			for _, t := range list.names {
				// Which agents there are is the runtime's to know.
				if strings.HasSuffix(t, "*") || strings.HasPrefix(t, "agent_") || MatchTool(known, t) {
					continue
				}
				msg := fmt.Sprintf("skill %s: %s names %s, which is no tool here", s.Name, list.field, t)
				if best := yamldecode.Closest(t, known); best != "" && !strings.HasSuffix(best, "*") {
					msg += fmt.Sprintf(" (did you mean %s?)", best)
				}
				out = append(out, msg+"; "+list.does)
			}
		}
	}
	for i, step := range s.ExecutionProtocol {
		var named []string
		for _, w := range protocolWords(step) {
			isTool := tools[w] || slices.Contains(s.AllowedTools, w) || slices.Contains(s.ForbiddenTools, w)
			if !isTool || slices.Contains(named, w) {
				continue
			}
			named = append(named, w)
			if MatchTool(s.ForbiddenTools, w) || !MatchTool(s.AllowedTools, w) {
				out = append(out, fmt.Sprintf("skill %s: step %d names tool %s, which the skill does not allow", s.Name, i+1, w))
			}
		}
	}
	return out
}

// stepTool is a tool a skill's protocol names at a step (1-based).
type stepTool struct {
	step int
	tool string
}

// protocolTools lists the tools a skill's protocol names that the skill
// allows, each once, with the first step naming it.
func protocolTools(s *Skill, tools map[string]bool) []stepTool {
	var out []stepTool
	for i, step := range s.ExecutionProtocol {
		for _, w := range protocolWords(step) {
			isTool := tools[w] || slices.Contains(s.AllowedTools, w)
			if !isTool || MatchTool(s.ForbiddenTools, w) || !MatchTool(s.AllowedTools, w) || slices.ContainsFunc(out, func(st stepTool) bool { return st.tool == w }) {
				continue
			}
			out = append(out, stepTool{step: i + 1, tool: w})
		}
	}
	return out
}

// protocolWords splits a protocol step into the words that could be tool
// names.
func protocolWords(step string) []string {
	return strings.FieldsFunc(step, func(r rune) bool {
		return !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
}
