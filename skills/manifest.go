package skills

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/switchyard/switchyard/internal/yamldecode"
)

// ManifestFiles are the names a package's manifest may have, in the order
// they are looked for. A package holds exactly one.
var ManifestFiles = []string{"manifest.json", "manifest.yaml", "plugin.json"}

// Manifest is a package's manifest as written.
type Manifest struct {
	// Name names the package: lower-case letters, digits, '-' and '_'.
	Name string `yaml:"name" json:"name"`
	// Version is a semantic version, MAJOR.MINOR.PATCH.
	Version     string `yaml:"version" json:"version"`
	Description string `yaml:"description" json:"description"`
	Author      string `yaml:"author" json:"author,omitempty"`
	// Dependencies are the packages it needs, name → semver range.
	Dependencies map[string]string `yaml:"dependencies" json:"dependencies,omitempty"`
	Skills       []Skill           `yaml:"skills" json:"skills,omitempty"`
	Agents       []AgentSpec       `yaml:"agents" json:"agents,omitempty"`
	// Agent makes the package itself an agent (a declarative agent): it
	// is named and described by the manifest's name and description.
	Agent       *DeclarativeAgent         `yaml:"agent" json:"agent,omitempty"`
	Tools       []ToolSpec                `yaml:"tools" json:"tools,omitempty"`
	Entrypoints map[string]EntrypointSpec `yaml:"entrypoints" json:"entrypoints,omitempty"`
	// Permissions are everything the package's command tools need; each
	// tool declares its own share.
	Permissions []string `yaml:"permissions" json:"permissions,omitempty"`
	// Config is the JSON schema of the package's settings.
	Config json.RawMessage `yaml:"config" json:"config,omitempty"`
}

// Skill is a capability an agent loads on demand: what it is for (its
// advertisement to the model), how to do it, and the tools it allows. A
// skill never grants implicitly: every tool it allows is listed.
type Skill struct {
	Name string `yaml:"name" json:"name"`
	// Description is what the model reads before it loads the skill.
	Description string `yaml:"description" json:"description"`
	// Version defaults to the package's.
	Version  string   `yaml:"version" json:"version,omitempty"`
	Keywords []string `yaml:"keywords" json:"keywords,omitempty"`
	// Instructions are loaded when the skill is; InstructionsFile names a
	// markdown file of the package holding them instead.
	Instructions     string `yaml:"instructions" json:"instructions,omitempty"`
	InstructionsFile string `yaml:"instructions_file" json:"instructions_file,omitempty"`
	// AllowedTools are the tools the skill allows, explicitly; required,
	// and an empty list allows none.
	AllowedTools []string `yaml:"allowed_tools" json:"allowed_tools"`
	// ForbiddenTools are refused whatever allows them, this skill's own
	// allowed_tools included.
	ForbiddenTools []string `yaml:"forbidden_tools" json:"forbidden_tools"`
	// ExecutionProtocol is the ordered steps of the skill; required.
	ExecutionProtocol  []string            `yaml:"execution_protocol" json:"execution_protocol"`
	Preconditions      []string            `yaml:"preconditions" json:"preconditions,omitempty"`
	Postconditions     []string            `yaml:"postconditions" json:"postconditions,omitempty"`
	OutputContract     *OutputContract     `yaml:"output_contract" json:"output_contract,omitempty"`
	CompatibilityRules *CompatibilityRules `yaml:"compatibility_rules" json:"compatibility_rules,omitempty"`
	ComposabilityRules *ComposabilityRules `yaml:"composability_rules" json:"composability_rules,omitempty"`

	// Package is the package that contributed the skill; "runtime" for
	// one registered while the daemon runs.
	Package string `yaml:"-" json:"package,omitempty"`
}

// OutputContract says what a skill's result looks like.
type OutputContract struct {
	// Format is markdown, json or text.
	Format string `yaml:"format" json:"format"`
	// Sections are the headings a markdown result has, in order.
	Sections []string `yaml:"sections" json:"sections,omitempty"`
	// Schema is the JSON schema of a json result.
	Schema json.RawMessage `yaml:"schema" json:"schema,omitempty"`
}

// CompatibilityRules say where a skill fits.
type CompatibilityRules struct {
	// Switchyard is the semver range of daemon versions the skill works
	// with; empty means any.
	Switchyard string `yaml:"switchyard" json:"switchyard,omitempty"`
	// Coding marks a skill for tasks that change code: the selector picks
	// it for coding tasks and never for others.
	Coding bool `yaml:"coding" json:"coding,omitempty"`
	// RiskLevels are the task risk levels (low, medium, high) the skill
	// suits; empty means every level.
	RiskLevels []string `yaml:"risk_levels" json:"risk_levels,omitempty"`
}

// ComposabilityRules say which skills a skill needs beside it and which it
// cannot be loaded with.
type ComposabilityRules struct {
	Requires         []string `yaml:"requires" json:"requires,omitempty"`
	IncompatibleWith []string `yaml:"incompatible_with" json:"incompatible_with,omitempty"`
}

// Risk levels of a task, for the selector.
const (
	RiskLow    = "low"
	RiskMedium = "medium"
	RiskHigh   = "high"
)

// RiskLevels are the task risk levels, from the least.
func RiskLevels() []string { return []string{RiskLow, RiskMedium, RiskHigh} }

// Output formats of a skill's output contract.
var outputFormats = []string{"markdown", "json", "text"}

// AgentSpec is an agent entry of a manifest: the agent file fields, and
// its instructions inline or in a markdown file of the package (file, or
// system_prompt_file as plugin.json names it) whose frontmatter the
// manifest's values override.
type AgentSpec struct {
	AgentFields      `yaml:",inline"`
	Instructions     string `yaml:"instructions" json:"instructions,omitempty"`
	File             string `yaml:"file" json:"file,omitempty"`
	SystemPromptFile string `yaml:"system_prompt_file" json:"system_prompt_file,omitempty"`
}

// promptFile is the file the entry names, either way.
func (a AgentSpec) promptFile() string { return a.File + a.SystemPromptFile }

// DeclarativeAgent is a manifest's agent section: the package is one agent,
// named and described by the manifest.
type DeclarativeAgent struct {
	// IntegrationMode is tool or handoff; required.
	IntegrationMode string `yaml:"integration_mode" json:"integration_mode"`
	Model           string `yaml:"model" json:"model,omitempty"`
	// Instructions are the system prompt: inline, or the path of a
	// markdown or text file of the package.
	Instructions string          `yaml:"instructions" json:"instructions"`
	Parameters   AgentParameters `yaml:"parameters" json:"parameters,omitempty"`
	// UsesTools is the agent's tools list.
	UsesTools []string    `yaml:"uses_tools" json:"uses_tools,omitempty"`
	Limits    AgentLimits `yaml:"limits" json:"limits,omitempty"`
	Profile   string      `yaml:"profile" json:"profile,omitempty"`
	Keywords  []string    `yaml:"keywords" json:"keywords,omitempty"`
}

// AgentParameters are a declarative agent's model parameters.
type AgentParameters struct {
	Temperature     *float64 `yaml:"temperature" json:"temperature,omitempty"`
	ReasoningEffort string   `yaml:"reasoning_effort" json:"reasoning_effort,omitempty"`
}

// AgentLimits are a declarative agent's guardrails.
type AgentLimits struct {
	MaxTurns               int `yaml:"max_turns" json:"max_turns,omitempty"`
	MaxTokensPerInvocation int `yaml:"max_tokens_per_invocation" json:"max_tokens_per_invocation,omitempty"`
	TimeBudgetMS           int `yaml:"time_budget_ms" json:"time_budget_ms,omitempty"`
}

// ToolSpec is a command tool: a program of the package (or one on the
// sandbox's PATH) run in the workspace with the call's input as JSON on
// stdin, through the same policy and sandbox as bash.
type ToolSpec struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description" json:"description"`
	// Command is the argv: a program name, or the path of a file of the
	// package, and its arguments.
	Command []string `yaml:"command" json:"command"`
	// InputSchema is the JSON schema of the input, an object; default any
	// object.
	InputSchema json.RawMessage `yaml:"input_schema" json:"input_schema,omitempty"`
	// RequiredAgent, when set, is the only agent that may see and call it.
	RequiredAgent string `yaml:"required_agent" json:"required_agent,omitempty"`
	// Permissions are what the command needs at the least; required.
	Permissions []string `yaml:"permissions" json:"permissions"`
	// Timeout bounds one call; default 2 minutes.
	Timeout time.Duration `yaml:"timeout" json:"timeout,omitempty"`
}

// EntrypointSpec is a way into the package from outside: events and chat
// commands handled by an agent with skills.
type EntrypointSpec struct {
	Description string  `yaml:"description" json:"description,omitempty"`
	Handler     Handler `yaml:"handler" json:"handler"`
	// Triggers are event kinds, such as github.pull_request.opened.
	Triggers []string `yaml:"triggers" json:"triggers,omitempty"`
	// Commands are chat commands, such as /release-notes.
	Commands []string `yaml:"commands" json:"commands,omitempty"`
}

// Handler is who handles an entry point: an agent, with skills loaded.
type Handler struct {
	Agent  string   `yaml:"agent" json:"agent"`
	Skills []string `yaml:"skills" json:"skills,omitempty"`
}

var (
	packageNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	triggerRe     = regexp.MustCompile(`^[a-z0-9_]+(\.[a-z0-9_]+)+$`)
	commandRe     = regexp.MustCompile(`^/[a-z0-9][a-z0-9_-]{0,31}$`)
)

// ValidName reports whether name can name a package or a skill:
// lower-case letters, digits, '-' and '_', starting with a letter or digit,
// at most 64 characters. Names appear in paths and scopes as they are.
func ValidName(name string) bool { return packageNameRe.MatchString(name) }

// ParseManifest decodes a manifest strictly: JSON for a .json file, YAML
// otherwise. Every problem is reported at once, as yamldecode.Errors naming
// the file, line and field. It checks what the manifest alone can tell;
// LoadPackage checks the files it names and the secrets it must not hold.
func ParseManifest(file string, data []byte) (*Manifest, error) {
	m, d := parseManifest(file, data)
	return m, d.Err()
}

func parseManifest(file string, data []byte) (*Manifest, *yamldecode.Decoder) {
	d := yamldecode.New(file, yamldecode.Options{JSON: strings.HasSuffix(file, ".json"), NoAliases: true})
	m := &Manifest{}
	if isLFSPointer(data) {
		d.Fail(1, "", "the manifest %s", lfsPointerMsg)
		return m, d
	}
	d.Document(data, m)
	if d.Failed("") {
		return m, d
	}
	m.check(d)
	return m, d
}

// check reports what is wrong with the manifest at the lines of d.
func (m *Manifest) check(d *yamldecode.Decoder) {
	pos := d.Positions()
	required := func(path, value, what string) {
		if strings.TrimSpace(value) == "" && !d.Failed(path) {
			if pos.Has(path) {
				d.FailAt(path, "must not be empty")
			} else {
				d.Fail(1, path, "required: %s", what)
			}
		}
	}
	m.Name, m.Description = strings.TrimSpace(m.Name), strings.TrimSpace(m.Description)
	required("name", m.Name, "the package's name")
	required("version", m.Version, "a semantic version such as 1.0.0")
	required("description", m.Description, "say what the package is for")
	if m.Name != "" && !ValidName(m.Name) {
		d.FailAt("name", "%q is not a valid package name: want lower-case letters, digits, '-' or '_', starting with a letter or digit, at most 64 characters", m.Name)
	}
	if m.Version != "" {
		if _, err := semver.StrictNewVersion(m.Version); err != nil {
			d.FailAt("version", "%q is not a semantic version: want MAJOR.MINOR.PATCH such as 1.2.0", m.Version)
		}
	}
	for _, dep := range slices.Sorted(maps.Keys(m.Dependencies)) {
		p := yamldecode.JoinPath("dependencies", dep)
		if !ValidName(dep) {
			d.FailAt(p, "%q is not a valid package name", dep)
			continue
		}
		if dep == m.Name {
			d.FailAt(p, "a package cannot depend on itself")
			continue
		}
		if _, err := semver.NewConstraint(m.Dependencies[dep]); err != nil {
			d.FailAt(p, "%q is not a version range: want one such as ^1.2, ~1.4.0 or >=2.0.0 <3.0.0", m.Dependencies[dep])
		}
	}
	checkList(d, "permissions", m.Permissions, nil)
	names := map[string]string{} // skill, agent and tool names → the path that first named them
	unique := func(path, kind, name string) {
		key := kind + ":" + name
		if first, dup := names[key]; dup {
			d.FailAt(path, "%s %q is defined twice (first at %s)", kind, name, first)
			return
		}
		names[key] = path
	}
	for i := range m.Skills {
		p := fmt.Sprintf("skills[%d]", i)
		m.Skills[i].check(d, p)
		if m.Skills[i].Name != "" {
			unique(p+".name", "skill", m.Skills[i].Name)
		}
	}
	for i := range m.Agents {
		p := fmt.Sprintf("agents[%d]", i)
		a := &m.Agents[i]
		a.AgentFields.check(d, p)
		files := 0
		for _, f := range []string{a.Instructions, a.File, a.SystemPromptFile} {
			if strings.TrimSpace(f) != "" {
				files++
			}
		}
		switch {
		case files == 0:
			d.FailAt(p, "say what the agent does: instructions, or file (system_prompt_file) naming a markdown file of the package")
		case files > 1:
			d.FailAt(p, "give one of instructions, file and system_prompt_file")
		}
		if a.promptFile() == "" {
			required(p+".name", a.Name, "the agent's name")
			required(p+".description", a.Description, "say what the agent is for, written for routing")
		}
		if a.Name != "" {
			unique(p+".name", "agent", a.Name)
		}
	}
	if a := m.Agent; a != nil {
		a.check(d, "agent")
		if m.Name != "" && ValidAgentName(m.Name) {
			unique("agent", "agent", m.Name)
		} else if m.Name != "" {
			d.FailAt("agent", "the package's name %q must be a valid agent name to make the package an agent", m.Name)
		}
	}
	for i := range m.Tools {
		p := fmt.Sprintf("tools[%d]", i)
		m.Tools[i].check(d, p, m.Permissions)
		if m.Tools[i].Name != "" {
			unique(p+".name", "tool", m.Tools[i].Name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(m.Entrypoints)) {
		p := yamldecode.JoinPath("entrypoints", name)
		e := m.Entrypoints[name]
		e.check(d, p)
		m.Entrypoints[name] = e
	}
	if len(m.Config) > 0 {
		if _, err := compileSchema("config", m.Config); err != nil {
			d.FailAt("config", "not a JSON schema: %v", err)
		}
	}
}

// check reports what is wrong with a skill at path.
func (s *Skill) check(d *yamldecode.Decoder, path string) {
	at := func(field string) string { return join(path, field) }
	pos := d.Positions()
	s.Name, s.Description = strings.TrimSpace(s.Name), strings.TrimSpace(s.Description)
	for _, f := range []struct {
		field, value, what string
	}{
		{"name", s.Name, "the skill's name"},
		{"description", s.Description, "what the model reads to decide to load it"},
	} {
		if f.value == "" && !d.Failed(at(f.field)) {
			if pos.Has(at(f.field)) {
				d.FailAt(at(f.field), "must not be empty")
			} else {
				missing(d, path, f.field, "required: "+f.what)
			}
		}
	}
	if s.Name != "" && !ValidName(s.Name) {
		d.FailAt(at("name"), "%q is not a valid skill name: want lower-case letters, digits, '-' or '_', starting with a letter or digit, at most 64 characters", s.Name)
	}
	if s.Version != "" {
		if _, err := semver.StrictNewVersion(s.Version); err != nil {
			d.FailAt(at("version"), "%q is not a semantic version: want MAJOR.MINOR.PATCH such as 1.2.0", s.Version)
		}
	}
	switch inline, file := strings.TrimSpace(s.Instructions) != "", strings.TrimSpace(s.InstructionsFile) != ""; {
	case inline && file:
		d.FailAt(path, "give one of instructions and instructions_file")
	case !inline && !file:
		missing(d, path, "instructions", "required: what the agent reads once it loads the skill (or instructions_file)")
	}
	if s.AllowedTools == nil && !d.Failed(at("allowed_tools")) {
		missing(d, path, "allowed_tools", "required: list the tools the skill allows, [] for none; a skill never grants a tool it does not list")
	}
	if s.AllowedTools == nil {
		s.AllowedTools = []string{}
	}
	if s.ForbiddenTools == nil {
		s.ForbiddenTools = []string{}
	}
	toolName := func(t string) string {
		if !ValidToolName(t) && !validToolPattern(t) {
			return fmt.Sprintf("%q is not a valid tool name", t)
		}
		return ""
	}
	checkList(d, at("allowed_tools"), s.AllowedTools, toolName)
	checkList(d, at("forbidden_tools"), s.ForbiddenTools, toolName)
	if len(s.ExecutionProtocol) == 0 && !d.Failed(at("execution_protocol")) {
		missing(d, path, "execution_protocol", "required: the skill's steps, in order")
	}
	checkList(d, at("execution_protocol"), s.ExecutionProtocol, nil)
	checkList(d, at("preconditions"), s.Preconditions, nil)
	checkList(d, at("postconditions"), s.Postconditions, nil)
	checkList(d, at("keywords"), s.Keywords, nil)
	for i, k := range s.Keywords {
		s.Keywords[i] = strings.ToLower(k)
	}
	if oc := s.OutputContract; oc != nil {
		if !slices.Contains(outputFormats, oc.Format) {
			d.FailAt(at("output_contract.format"), "unknown format %q (want %s)", oc.Format, strings.Join(outputFormats, ", "))
		}
		checkList(d, at("output_contract.sections"), oc.Sections, nil)
		if len(oc.Schema) > 0 {
			if oc.Format != "json" {
				d.FailAt(at("output_contract.schema"), "a schema describes a json result; the format is %q", oc.Format)
			} else if _, err := compileSchema("output_contract", oc.Schema); err != nil {
				d.FailAt(at("output_contract.schema"), "not a JSON schema: %v", err)
			}
		}
	}
	if cr := s.CompatibilityRules; cr != nil {
		if cr.Switchyard != "" {
			if _, err := semver.NewConstraint(cr.Switchyard); err != nil {
				d.FailAt(at("compatibility_rules.switchyard"), "%q is not a version range", cr.Switchyard)
			}
		}
		checkList(d, at("compatibility_rules.risk_levels"), cr.RiskLevels, func(l string) string {
			if !slices.Contains(RiskLevels(), l) {
				return fmt.Sprintf("unknown risk level %q (want low, medium or high)", l)
			}
			return ""
		})
	}
	if cr := s.ComposabilityRules; cr != nil {
		skillName := func(n string) string {
			if !ValidName(n) {
				return fmt.Sprintf("%q is not a valid skill name", n)
			}
			if n == s.Name {
				return "a skill cannot name itself"
			}
			return ""
		}
		checkList(d, at("composability_rules.requires"), cr.Requires, skillName)
		checkList(d, at("composability_rules.incompatible_with"), cr.IncompatibleWith, skillName)
		for _, r := range cr.Requires {
			if slices.Contains(cr.IncompatibleWith, r) {
				d.FailAt(at("composability_rules"), "%q is both required and incompatible", r)
			}
		}
	}
}

// validToolPattern reports whether p is a tool pattern: a name prefix and
// "*" (github_*), as profiles and skills may list.
func validToolPattern(p string) bool {
	prefix, ok := strings.CutSuffix(p, "*")
	return ok && (prefix == "" || ValidToolName(prefix))
}

// check reports what is wrong with a declarative agent section.
func (a *DeclarativeAgent) check(d *yamldecode.Decoder, path string) {
	at := func(field string) string { return join(path, field) }
	switch a.IntegrationMode {
	case ModeTool, ModeHandoff:
	case "":
		missing(d, path, "integration_mode", "required: tool or handoff")
	default:
		d.FailAt(at("integration_mode"), "unknown mode %q (want tool or handoff)", a.IntegrationMode)
	}
	if strings.TrimSpace(a.Instructions) == "" && !d.Failed(at("instructions")) {
		missing(d, path, "instructions", "required: the agent's system prompt, inline or the path of a file of the package")
	}
	f := a.Fields("", "")
	f.check(d, path)
	// The agent fields' bounds, at the section's own keys: f.check looks
	// for max_turns and max_tokens, which this section spells otherwise.
	pos := d.Positions()
	if p := at("limits.max_turns"); pos.Has(p) && (a.Limits.MaxTurns < 1 || a.Limits.MaxTurns > MaxAgentTurns) {
		d.FailAt(p, "want 1 to %d, got %d", MaxAgentTurns, a.Limits.MaxTurns)
	}
	if p := at("limits.max_tokens_per_invocation"); pos.Has(p) && (a.Limits.MaxTokensPerInvocation < 1 || a.Limits.MaxTokensPerInvocation > MaxAgentTokens) {
		d.FailAt(p, "want 1 to %d, got %d", MaxAgentTokens, a.Limits.MaxTokensPerInvocation)
	}
	if a.Limits.TimeBudgetMS < 0 {
		d.FailAt(at("limits.time_budget_ms"), "must be positive")
	}
}

// Fields returns the agent fields the section stands for, for an agent
// named and described so.
func (a *DeclarativeAgent) Fields(name, description string) AgentFields {
	return AgentFields{
		Name: name, Description: description, Model: a.Model, Temperature: a.Parameters.Temperature,
		ReasoningEffort: a.Parameters.ReasoningEffort, Tools: a.UsesTools, Profile: a.Profile, Mode: a.IntegrationMode,
		Keywords: a.Keywords, MaxTurns: a.Limits.MaxTurns, MaxTokens: a.Limits.MaxTokensPerInvocation,
		TimeBudget: time.Duration(a.Limits.TimeBudgetMS) * time.Millisecond,
	}
}

// check reports what is wrong with a command tool at path; perms are the
// package's permissions, which must include the tool's.
func (t *ToolSpec) check(d *yamldecode.Decoder, path string, perms []string) {
	at := func(field string) string { return join(path, field) }
	pos := d.Positions()
	t.Name, t.Description = strings.TrimSpace(t.Name), strings.TrimSpace(t.Description)
	if t.Name == "" && !d.Failed(at("name")) {
		missing(d, path, "name", "required")
	} else if t.Name != "" && !ValidToolName(t.Name) {
		d.FailAt(at("name"), "%q is not a valid tool name: want 1 to 64 letters, digits, '_' or '-'", t.Name)
	} else if strings.HasPrefix(t.Name, "agent_") {
		d.FailAt(at("name"), "the agent_ prefix is reserved for agents called as tools")
	}
	if t.Description == "" && !d.Failed(at("description")) {
		missing(d, path, "description", "required: what the model reads to decide to call it")
	}
	switch {
	case len(t.Command) == 0 && !d.Failed(at("command")):
		missing(d, path, "command", "required: the program and its arguments, such as [bin/lint, --json]")
	case len(t.Command) > 0:
		prog := t.Command[0]
		switch {
		case strings.TrimSpace(prog) == "":
			d.FailAt(at("command"), "the program must not be empty")
		case strings.HasPrefix(prog, "/"):
			d.FailAt(at("command"), "%q is an absolute path: name a program on the PATH (python3) or a file of the package (bin/tool)", prog)
		case strings.ContainsRune(prog, '/') && !inPackage(prog):
			d.FailAt(at("command"), "%q is outside the package", prog)
		}
	}
	if len(t.InputSchema) > 0 {
		var top struct {
			Type any `json:"type"`
		}
		if err := json.Unmarshal(t.InputSchema, &top); err != nil || top.Type != "object" {
			d.FailAt(at("input_schema"), "must be the schema of an object: {type: object, properties: ...}")
		} else if _, err := compileSchema(t.Name, t.InputSchema); err != nil {
			d.FailAt(at("input_schema"), "not a JSON schema: %v", err)
		}
	}
	if t.RequiredAgent != "" && !ValidAgentName(t.RequiredAgent) {
		d.FailAt(at("required_agent"), "%q is not a valid agent name", t.RequiredAgent)
	}
	if len(t.Permissions) == 0 && !d.Failed(at("permissions")) {
		missing(d, path, "permissions", "required: what the command needs at the least, such as [read] or [exec]")
	}
	checkList(d, at("permissions"), t.Permissions, func(p string) string {
		if !slices.Contains(perms, p) {
			return fmt.Sprintf("%q is not among the package's permissions (%s)", p, orNone(perms))
		}
		return ""
	})
	if pos.Has(at("timeout")) && (t.Timeout <= 0 || t.Timeout > time.Hour) {
		d.FailAt(at("timeout"), "want a duration from 1s to 1h, got %s", t.Timeout)
	}
}

// check reports what is wrong with an entry point at path.
func (e *EntrypointSpec) check(d *yamldecode.Decoder, path string) {
	at := func(field string) string { return join(path, field) }
	name := path[strings.LastIndexAny(path, ".[")+1:]
	if !ValidName(strings.Trim(name, `"]`)) {
		d.FailAt(path, "%s is not a valid entry point name", name)
	}
	if e.Handler.Agent == "" && !d.Failed(at("handler.agent")) {
		missing(d, path, "handler.agent", "required: the agent that handles it")
	} else if e.Handler.Agent != "" && !ValidAgentName(e.Handler.Agent) {
		d.FailAt(at("handler.agent"), "%q is not a valid agent name", e.Handler.Agent)
	}
	checkList(d, at("handler.skills"), e.Handler.Skills, func(s string) string {
		if !ValidName(s) {
			return fmt.Sprintf("%q is not a valid skill name", s)
		}
		return ""
	})
	if len(e.Triggers) == 0 && len(e.Commands) == 0 {
		d.FailAt(path, "give triggers (event kinds such as github.pull_request.opened) or commands (such as /release-notes), or both")
	}
	checkList(d, at("triggers"), e.Triggers, func(t string) string {
		if !triggerRe.MatchString(t) {
			return fmt.Sprintf("%q is not an event kind: want source.event[.action], such as github.pull_request.opened", t)
		}
		return ""
	})
	checkList(d, at("commands"), e.Commands, func(c string) string {
		if !commandRe.MatchString(c) {
			return fmt.Sprintf("%q is not a chat command: want a slash and a lower-case name, such as /release-notes", c)
		}
		return ""
	})
}

// inPackage reports whether a relative path stays inside the package.
func inPackage(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") {
		return false
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return false
		}
	}
	return true
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none declared"
	}
	return strings.Join(s, ", ")
}

// join appends a dotted field to a path: join("skills[0]", "a.b").
func join(path, field string) string {
	for _, f := range strings.Split(field, ".") {
		path = yamldecode.JoinPath(path, f)
	}
	return path
}

// missing reports a required field that is not there, at the line of the
// entry it belongs in.
func missing(d *yamldecode.Decoder, path, field, why string) {
	d.Fail(d.Positions().Line(path), join(path, field), "%s", why)
}
