package skills

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/internal/yamldecode"
)

// Agent modes: how other agents reach an agent.
const (
	ModeTool    = "tool"    // offered to other agents as agent_<name>
	ModeHandoff = "handoff" // reached by routing or handoff_to
)

// AgentFields are an agent's settings as people write them: the
// frontmatter of an agent file and an agent entry of a package manifest
// have exactly these fields. Zero values mean "not set".
type AgentFields struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description" json:"description"`
	// Model names an entry of the config's models.
	Model           string   `yaml:"model" json:"model,omitempty"`
	Temperature     *float64 `yaml:"temperature" json:"temperature,omitempty"`
	ReasoningEffort string   `yaml:"reasoning_effort" json:"reasoning_effort,omitempty"`
	// Tools is the tools list; empty means the defaults of the agent's
	// kind.
	Tools    []string `yaml:"tools" json:"tools,omitempty"`
	Skills   []string `yaml:"skills" json:"skills,omitempty"`
	Profile  string   `yaml:"profile" json:"profile,omitempty"`
	Mode     string   `yaml:"mode" json:"mode,omitempty"`
	Keywords []string `yaml:"keywords" json:"keywords,omitempty"`
	MaxTurns int      `yaml:"max_turns" json:"max_turns,omitempty"`
	// MaxTokens bounds the tokens of one invocation, all turns.
	MaxTokens  int           `yaml:"max_tokens" json:"max_tokens,omitempty"`
	TimeBudget time.Duration `yaml:"time_budget" json:"time_budget,omitempty"`
	// Subagents are the agent's own limits of spawn_subagent, over the
	// config's subagents section.
	Subagents *SubagentFields `yaml:"subagents" json:"subagents,omitempty"`
}

// SubagentFields are an agent's own limits of spawning; zero fields leave
// the config's.
type SubagentFields struct {
	MaxConcurrent int           `yaml:"max_concurrent" json:"max_concurrent,omitempty"`
	MaxDepth      int           `yaml:"max_depth" json:"max_depth,omitempty"`
	Timeout       time.Duration `yaml:"timeout" json:"timeout,omitempty"`
}

// Limits of agent fields.
const (
	MaxAgentTurns  = 1000
	MaxAgentTokens = 1<<31 - 1
)

var (
	agentNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,57}$`)
	toolNameRe  = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	efforts     = []string{"minimal", "low", "medium", "high"}
)

// ValidAgentName reports whether name can name an agent: lower-case
// letters, digits, '-' and '_', starting with a letter or digit, at most 58
// characters.
func ValidAgentName(name string) bool { return agentNameRe.MatchString(name) }

// ValidToolName reports whether name can be sent to every model provider
// as a tool name: 1 to 64 letters, digits, '_' or '-'.
func ValidToolName(name string) bool { return toolNameRe.MatchString(name) }

// check reports what is wrong with the fields decoded at path ("" for
// frontmatter, "agents[0]" in a manifest), at the lines of d, and tidies
// them: strings trimmed, keywords lower-cased.
func (a *AgentFields) check(d *yamldecode.Decoder, path string) {
	at := func(field string) string { return join(path, field) }
	pos := d.Positions()
	nonEmpty := func(field string, s *string) {
		*s = strings.TrimSpace(*s)
		if *s == "" && pos.Has(at(field)) && !d.Failed(at(field)) {
			if _, unset := d.Unset(at(field)); !unset {
				d.FailAt(at(field), "must not be empty")
			}
		}
	}
	nonEmpty("name", &a.Name)
	nonEmpty("description", &a.Description)
	nonEmpty("model", &a.Model)
	nonEmpty("reasoning_effort", &a.ReasoningEffort)
	nonEmpty("profile", &a.Profile)
	nonEmpty("mode", &a.Mode)
	if a.Name != "" && !ValidAgentName(a.Name) {
		d.FailAt(at("name"), "%q is not a valid name: want lower-case letters, digits, '-' or '_', starting with a letter or digit, at most 58 characters", a.Name)
	}
	if t := a.Temperature; t != nil && (*t < 0 || *t > 2) {
		d.FailAt(at("temperature"), "want 0 to 2, got %v", *t)
	}
	if a.ReasoningEffort != "" && !slices.Contains(efforts, a.ReasoningEffort) {
		d.FailAt(at("reasoning_effort"), "unknown effort %q (want %s)", a.ReasoningEffort, strings.Join(efforts, ", "))
	}
	if a.Mode != "" && a.Mode != ModeTool && a.Mode != ModeHandoff {
		d.FailAt(at("mode"), "unknown mode %q (want tool or handoff)", a.Mode)
	}
	checkList(d, at("tools"), a.Tools, func(t string) string {
		if !ValidToolName(t) {
			return fmt.Sprintf("%q is not a valid tool name", t)
		}
		return ""
	})
	checkList(d, at("skills"), a.Skills, nil)
	checkList(d, at("keywords"), a.Keywords, nil)
	for i, k := range a.Keywords {
		a.Keywords[i] = strings.ToLower(k)
	}
	if pos.Has(at("max_turns")) && (a.MaxTurns < 1 || a.MaxTurns > MaxAgentTurns) {
		d.FailAt(at("max_turns"), "want 1 to %d, got %d", MaxAgentTurns, a.MaxTurns)
	}
	if pos.Has(at("max_tokens")) && (a.MaxTokens < 1 || a.MaxTokens > MaxAgentTokens) {
		d.FailAt(at("max_tokens"), "want 1 to %d, got %d", MaxAgentTokens, a.MaxTokens)
	}
	if pos.Has(at("time_budget")) && a.TimeBudget <= 0 {
		d.FailAt(at("time_budget"), "bad duration %s: want a positive number and a unit, such as 90s, 10m or 1h", a.TimeBudget)
	}
	if sa := a.Subagents; sa != nil {
		if p := at("subagents.max_concurrent"); pos.Has(p) && (sa.MaxConcurrent < 1 || sa.MaxConcurrent > 64) {
			d.FailAt(p, "want 1 to 64, got %d", sa.MaxConcurrent)
		}
		if p := at("subagents.max_depth"); pos.Has(p) && (sa.MaxDepth < 1 || sa.MaxDepth > 5) {
			d.FailAt(p, "want 1 to 5, got %d", sa.MaxDepth)
		}
		if p := at("subagents.timeout"); pos.Has(p) && sa.Timeout < time.Second {
			d.FailAt(p, "want at least 1s, got %s", sa.Timeout)
		}
	}
}

// checkList reports empty and repeated entries of a list of names, and
// what bad says of an entry; the entries are trimmed.
func checkList(d *yamldecode.Decoder, path string, list []string, bad func(string) string) {
	for i, s := range list {
		list[i] = strings.TrimSpace(s)
	}
	for i, s := range list {
		switch {
		case s == "":
			d.FailAt(path, "want a list of non-empty strings, got nothing in it")
			return
		case slices.Contains(list[:i], s):
			d.FailAt(path, "%q is listed twice", s)
			return
		case bad != nil:
			if why := bad(s); why != "" {
				d.FailAt(path, "%s", why)
				return
			}
		}
	}
}

// over returns a with every field that b sets replaced by b's: a package
// manifest's values win over the frontmatter of the file it names.
func (a AgentFields) over(b AgentFields) AgentFields {
	set := func(dst *string, src string) {
		if src != "" {
			*dst = src
		}
	}
	set(&a.Name, b.Name)
	set(&a.Description, b.Description)
	set(&a.Model, b.Model)
	set(&a.ReasoningEffort, b.ReasoningEffort)
	set(&a.Profile, b.Profile)
	set(&a.Mode, b.Mode)
	if b.Temperature != nil {
		a.Temperature = b.Temperature
	}
	if b.Tools != nil {
		a.Tools = b.Tools
	}
	if b.Skills != nil {
		a.Skills = b.Skills
	}
	if b.Keywords != nil {
		a.Keywords = b.Keywords
	}
	if b.MaxTurns != 0 {
		a.MaxTurns = b.MaxTurns
	}
	if b.MaxTokens != 0 {
		a.MaxTokens = b.MaxTokens
	}
	if b.TimeBudget != 0 {
		a.TimeBudget = b.TimeBudget
	}
	if b.Subagents != nil {
		a.Subagents = b.Subagents
	}
	return a
}

// Agent is an agent definition as read: its fields and its instructions.
type Agent struct {
	AgentFields
	// Instructions are the system prompt, markdown.
	Instructions string `json:"instructions"`
	// File is where it was read from, as messages name it.
	File string `json:"file"`
	// Package is the package that contributed it, "" for an agent file of
	// its own.
	Package string `json:"package,omitempty"`

	// lines are the lines of File its fields are written on.
	lines map[string]int
}

// Lines returns the lines of File the agent's fields are written on, by
// field name, so that checks made later (an unknown tool) can say where.
func (a Agent) Lines() map[string]int { return a.lines }

// fieldLines returns the lines of the agent fields written at prefix.
func fieldLines(pos yamldecode.Positions, prefix string) map[string]int {
	out := map[string]int{}
	for _, f := range yamldecode.Keys(AgentFields{}) {
		if p := yamldecode.JoinPath(prefix, f); pos.Has(p) {
			out[f] = pos.Line(p)
		}
	}
	return out
}

// ParseAgentFile reads an agent file: YAML frontmatter between "---" lines,
// then the markdown instructions. Decoding is strict: an unknown key, a
// wrong type, a bad value or a missing name or description is an error
// naming the file, line and field; every problem is reported at once, as
// yamldecode.Errors.
func ParseAgentFile(file string, data []byte) (Agent, error) {
	a, d, closing := parseAgentFile(file, data)
	if closing == 0 {
		return a, d.Err()
	}
	required := func(field, value, why string) {
		if value != "" || d.Failed(field) {
			return
		}
		if line := d.Positions().Line(field); line > 0 {
			d.Fail(line, field, "%s", why)
		} else {
			d.Fail(closing, field, "%s", why)
		}
	}
	required("name", a.Name, "required")
	required("description", a.Description, "required: say what the agent is for, written for routing")
	return a, d.Err()
}

// parseAgentFile splits and decodes an agent file. It returns the line of
// the frontmatter's closing delimiter, or 0 when the file has no readable
// frontmatter (the decoder then holds why).
func parseAgentFile(file string, data []byte) (Agent, *yamldecode.Decoder, int) {
	a := Agent{File: file}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	lines := strings.SplitAfter(text, "\n")
	d := yamldecode.New(file, yamldecode.Options{NoAliases: true, FirstLine: 2})
	if len(lines) == 0 || strings.TrimRight(lines[0], " \t\n") != "---" {
		d.Fail(1, "", "want YAML frontmatter: the file must start with a line \"---\"")
		return a, d, 0
	}
	end := -1
	for i := 1; i < len(lines); i++ {
		if l := strings.TrimRight(lines[i], " \t\n"); l == "---" || l == "..." {
			end = i
			break
		}
	}
	if end < 0 {
		d.Fail(0, "", "frontmatter is not closed: want a line \"---\" after it")
		return a, d, 0
	}
	a.Instructions = strings.TrimSpace(strings.Join(lines[end+1:], ""))
	if root := d.Parse([]byte(strings.Join(lines[1:end], ""))); root != nil {
		d.Value(root, &a.AgentFields, "")
	}
	if d.Failed("") {
		return a, d, 0 // not YAML, or not a mapping: nothing more to say
	}
	a.AgentFields.check(d, "")
	a.lines = fieldLines(d.Positions(), "")
	return a, d, end + 1
}
