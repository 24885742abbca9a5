package agents

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/internal/yamldecode"
	"github.com/switchyard/switchyard/skills"
)

// Mode is how other agents reach an agent.
type Mode string

const (
	// ModeTool agents are offered to other agents as agent_<name>: they run
	// a task to completion and their answer becomes the tool result.
	ModeTool Mode = skills.ModeTool
	// ModeHandoff agents are not offered as tools; work reaches them by
	// routing or by handoff_to, which gives them the work item itself.
	ModeHandoff Mode = skills.ModeHandoff
)

// Sources of definitions; a package's is "package:<name>".
const (
	SourceBuiltin = "builtin"
	SourceUser    = "user"
	sourcePackage = "package:"
)

// DefaultProfile is the permission profile of an agent that names none.
const DefaultProfile = tools.ProfileContributor

// DefaultModel is the model name of an agent that names none.
const DefaultModel = "default"

// Definition is an agent: what it is for, how it runs and what it may use.
// Zero limits mean the runtime's defaults.
type Definition struct {
	Name        string
	Description string
	// Model names an entry of the config's models; "" means "default".
	Model           string
	Temperature     *float64
	ReasoningEffort string
	// Tools is the tools list; empty means every core tool.
	Tools    []string
	Skills   []string
	Profile  string
	Mode     Mode
	Keywords []string
	MaxTurns int
	// MaxTokens bounds the tokens (input and output, all turns) of one
	// invocation.
	MaxTokens  int
	TimeBudget time.Duration
	// Subagents are its own limits of spawning, over the config's.
	Subagents SubagentLimits
	// Instructions are the markdown body.
	Instructions string

	// Source is builtin, user or package:<name>; Package the package name.
	Source  string
	Package string
	// File is where it was read from, as messages name it.
	File string
	// Overrides are the sources of same-named definitions this one replaced.
	Overrides []string

	// lines are the frontmatter's fields by the line they are on, so that
	// Validate can say where a name it does not know is written.
	lines map[string]int
}

// ModelName is the model the agent runs on.
func (d Definition) ModelName() string {
	if d.Model == "" {
		return DefaultModel
	}
	return d.Model
}

// Summary is the JSON shape of `agents list --json`.
type Summary struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Source      string   `json:"source"`
	Model       string   `json:"model"`
	Profile     string   `json:"profile"`
	Mode        string   `json:"mode"`
	Tools       []string `json:"tools"`
}

// Summary returns the list entry of d. Tools is never null: [] means every
// core tool.
func (d Definition) Summary() Summary {
	return Summary{
		Name: d.Name, Description: d.Description, Source: d.Source, Model: d.ModelName(),
		Profile: d.Profile, Mode: string(d.Mode), Tools: nonNil(d.Tools),
	}
}

// Detail is the JSON shape of `agents show --json`: the summary and
// everything else.
type Detail struct {
	Summary
	Temperature     *float64 `json:"temperature,omitempty"`
	ReasoningEffort string   `json:"reasoning_effort,omitempty"`
	Skills          []string `json:"skills"`
	Keywords        []string `json:"keywords"`
	MaxTurns        int      `json:"max_turns,omitempty"`
	MaxTokens       int      `json:"max_tokens,omitempty"`
	TimeBudget      string   `json:"time_budget,omitempty"`
	// Subagents are the agent's own limits of spawning, when it sets any.
	Subagents    *SubagentDetail `json:"subagents,omitempty"`
	File         string          `json:"file"`
	Overrides    []string        `json:"overrides,omitempty"`
	Instructions string          `json:"instructions"`
}

// SubagentDetail is how `agents show --json` shows an agent's own limits of
// spawning.
type SubagentDetail struct {
	MaxConcurrent int    `json:"max_concurrent,omitempty"`
	MaxDepth      int    `json:"max_depth,omitempty"`
	Timeout       string `json:"timeout,omitempty"`
}

// Detail returns the full description of d.
func (d Definition) Detail() Detail {
	det := Detail{
		Summary: d.Summary(), Temperature: d.Temperature, ReasoningEffort: d.ReasoningEffort,
		Skills: nonNil(d.Skills), Keywords: nonNil(d.Keywords), MaxTurns: d.MaxTurns, MaxTokens: d.MaxTokens,
		File: d.File, Overrides: d.Overrides, Instructions: d.Instructions,
	}
	if d.TimeBudget > 0 {
		det.TimeBudget = d.TimeBudget.String()
	}
	if l := d.Subagents; l != (SubagentLimits{}) {
		det.Subagents = &SubagentDetail{MaxConcurrent: l.MaxConcurrent, MaxDepth: l.MaxDepth}
		if l.Timeout > 0 {
			det.Subagents.Timeout = l.Timeout.String()
		}
	}
	return det
}

// MarshalJSON encodes the Detail.
func (d Definition) MarshalJSON() ([]byte, error) { return json.Marshal(d.Detail()) }

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// DefinitionError is a problem with one field of one definition file:
// "agents/x.md:3: name: required". Line is 0 when the problem is not at a
// place in the file (an unknown tool found by validation).
type DefinitionError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *DefinitionError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// Parse reads an agent file: YAML frontmatter between "---" lines, then the
// markdown instructions, as skills.ParseAgentFile reads it, package agents'
// files included. Decoding is strict: an unknown key, a wrong type or a bad
// value is an error naming the file, line and field, every problem at once.
// Source is left for the caller; Profile and Mode get their defaults.
func Parse(file string, data []byte) (Definition, error) {
	a, err := skills.ParseAgentFile(file, data)
	if err != nil {
		return Definition{File: file}, definitionErrors(err)
	}
	return FromSkills(a), nil
}

// FromSkills returns the definition of an agent as the skills package read
// it, with the defaults of what it leaves unset. A package's agent gets
// Source package:<name>.
func FromSkills(a skills.Agent) Definition {
	d := Definition{
		Name: a.Name, Description: a.Description, Model: a.Model, Temperature: a.Temperature,
		ReasoningEffort: a.ReasoningEffort, Tools: a.Tools, Skills: a.Skills, Profile: a.Profile,
		Mode: Mode(a.Mode), Keywords: a.Keywords, MaxTurns: a.MaxTurns, MaxTokens: a.MaxTokens,
		TimeBudget: a.TimeBudget, Instructions: a.Instructions, File: a.File, lines: a.Lines(),
	}
	if sa := a.Subagents; sa != nil {
		d.Subagents = SubagentLimits{MaxConcurrent: sa.MaxConcurrent, MaxDepth: sa.MaxDepth, Timeout: sa.Timeout}
	}
	if d.Profile == "" {
		d.Profile = DefaultProfile
	}
	if d.Mode == "" {
		d.Mode = ModeTool
	}
	if a.Package != "" {
		d.Source = sourcePackage + a.Package
		d.Package = a.Package
	}
	return d
}

// definitionErrors turns the decoder's problems into DefinitionErrors.
func definitionErrors(err error) error {
	var es yamldecode.Errors
	if !errors.As(err, &es) {
		return err
	}
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = &DefinitionError{File: e.File, Line: e.Line, Field: e.Path, Msg: e.Msg}
	}
	return errors.Join(out...)
}

// Known is what definitions are validated against. A nil list skips its
// check.
type Known struct {
	// Models are the configured model names.
	Models []string
	// Tools are the registered tool names (core and package command
	// tools); the manager adds agent_<name> and the control tools itself.
	Tools []string
	// Profiles are the permission profile names.
	Profiles []string
	// Skills are the installed skill names.
	Skills []string
}

// Validate checks the names d refers to against k, reporting every problem
// at the line of its field: `agents/coder.md:5: tools: unknown tool "rm_rf"`.
func (d Definition) Validate(k Known) error {
	var errs []*DefinitionError
	bad := func(field, format string, args ...any) {
		errs = append(errs, &DefinitionError{File: d.File, Line: d.lines[field], Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if k.Models != nil && d.Model != "" && !slices.Contains(k.Models, d.Model) {
		bad("model", "unknown model %q (configured: %s)", d.Model, listOrNone(k.Models))
	}
	if k.Tools != nil {
		for _, t := range d.Tools {
			if !slices.Contains(k.Tools, t) {
				bad("tools", "unknown tool %q", t)
			}
		}
	}
	if k.Profiles != nil && !slices.Contains(k.Profiles, d.Profile) {
		bad("profile", "unknown profile %q (want %s)", d.Profile, strings.Join(k.Profiles, ", "))
	}
	if k.Skills != nil {
		for _, s := range d.Skills {
			if !slices.Contains(k.Skills, s) {
				bad("skills", "unknown skill %q", s)
			}
		}
	}
	// In the order of the file.
	slices.SortStableFunc(errs, func(a, b *DefinitionError) int { return a.Line - b.Line })
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return errors.Join(out...)
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none; add it under models in config.yaml"
	}
	return strings.Join(s, ", ")
}
