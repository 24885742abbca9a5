package agents

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/switchyard/switchyard/agents/tools"
)

// Mode is how other agents reach an agent.
type Mode string

const (
	// ModeTool agents are offered to other agents as agent_<name>: they run
	// a task to completion and their answer becomes the tool result.
	ModeTool Mode = "tool"
	// ModeHandoff agents are not offered as tools; work reaches them by
	// routing or by handoff_to, which gives them the work item itself.
	ModeHandoff Mode = "handoff"
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
	File            string   `json:"file"`
	Overrides       []string `json:"overrides,omitempty"`
	Instructions    string   `json:"instructions"`
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

var (
	agentName  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,57}$`)
	yamlLineRe = regexp.MustCompile(`^yaml: line (\d+): `)
	efforts    = []string{"minimal", "low", "medium", "high"}
)

// frontmatter fields, in the order messages list them.
var fields = []string{
	"name", "description", "model", "temperature", "reasoning_effort", "tools", "skills",
	"profile", "mode", "keywords", "max_turns", "max_tokens", "time_budget",
}

// Parse reads an agent file: YAML frontmatter between "---" lines, then the
// markdown instructions. Decoding is strict: an unknown key, a wrong type or
// a bad value is an error naming the file, line and field. Source is left
// for the caller; Profile and Mode get their defaults.
func Parse(file string, data []byte) (Definition, error) {
	d := Definition{File: file}
	errf := func(line int, field, format string, args ...any) error {
		return &DefinitionError{File: file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	lines := strings.SplitAfter(text, "\n")
	if len(lines) == 0 || strings.TrimRight(lines[0], " \t\n") != "---" {
		return d, errf(1, "", "want YAML frontmatter: the file must start with a line \"---\"")
	}
	end := -1
	for i := 1; i < len(lines); i++ {
		if l := strings.TrimRight(lines[i], " \t\n"); l == "---" || l == "..." {
			end = i
			break
		}
	}
	if end < 0 {
		return d, errf(0, "", "frontmatter is not closed: want a line \"---\" after it")
	}
	closing := end + 1 // the 1-based line of the closing delimiter
	front := strings.Join(lines[1:end], "")
	d.Instructions = strings.TrimSpace(strings.Join(lines[end+1:], ""))

	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(front), &doc); err != nil {
		msg := err.Error()
		line := 0
		if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
			n, _ := strconv.Atoi(m[1])
			line = n + 1
			msg = strings.TrimPrefix(msg, m[0])
		}
		return d, errf(line, "", "invalid YAML: %s", strings.TrimPrefix(msg, "yaml: "))
	}
	seen := map[string]int{}
	if len(doc.Content) > 0 {
		root := doc.Content[0]
		if root.Kind != yaml.MappingNode {
			return d, errf(root.Line+1, "", "frontmatter must be a mapping of fields, got %s", kindName(root))
		}
		for i := 0; i+1 < len(root.Content); i += 2 {
			k, v := root.Content[i], root.Content[i+1]
			line := k.Line + 1
			if first, dup := seen[k.Value]; dup {
				return d, errf(line, k.Value, "duplicate field (first on line %d)", first)
			}
			seen[k.Value] = line
			if err := d.set(k.Value, v, func(format string, args ...any) error {
				return errf(v.Line+1, k.Value, format, args...)
			}); err != nil {
				return d, err
			}
		}
	}
	d.lines = seen
	if d.Name == "" {
		return d, errf(closing, "name", "required")
	}
	if d.Description == "" {
		return d, errf(closing, "description", "required: say what the agent is for, written for routing")
	}
	if d.Profile == "" {
		d.Profile = DefaultProfile
	}
	if d.Mode == "" {
		d.Mode = ModeTool
	}
	return d, nil
}

// set decodes one frontmatter field into d; bad reports an error at the
// value's line.
func (d *Definition) set(field string, v *yaml.Node, bad func(string, ...any) error) error {
	if hasAlias(v) {
		return bad("YAML aliases are not supported in agent files")
	}
	switch field {
	case "name":
		s, err := scalar(v, bad)
		if err != nil {
			return err
		}
		if !agentName.MatchString(s) {
			return bad("%q is not a valid name: want lower-case letters, digits, '-' or '_', starting with a letter or digit, at most 58 characters", s)
		}
		d.Name = s
	case "description":
		s, err := scalar(v, bad)
		if err != nil {
			return err
		}
		d.Description = strings.TrimSpace(s)
	case "model":
		s, err := scalar(v, bad)
		if err != nil {
			return err
		}
		d.Model = s
	case "temperature":
		f, err := number(v, bad)
		if err != nil {
			return err
		}
		if f < 0 || f > 2 {
			return bad("want 0 to 2, got %v", f)
		}
		d.Temperature = &f
	case "reasoning_effort":
		s, err := scalar(v, bad)
		if err != nil {
			return err
		}
		if !slices.Contains(efforts, s) {
			return bad("unknown effort %q (want %s)", s, strings.Join(efforts, ", "))
		}
		d.ReasoningEffort = s
	case "tools":
		list, err := stringList(v, bad)
		if err != nil {
			return err
		}
		for _, t := range list {
			if !tools.ValidName(t) {
				return bad("%q is not a valid tool name", t)
			}
		}
		d.Tools = list
	case "skills":
		list, err := stringList(v, bad)
		if err != nil {
			return err
		}
		d.Skills = list
	case "profile":
		s, err := scalar(v, bad)
		if err != nil {
			return err
		}
		d.Profile = s
	case "mode":
		s, err := scalar(v, bad)
		if err != nil {
			return err
		}
		switch Mode(s) {
		case ModeTool, ModeHandoff:
			d.Mode = Mode(s)
		default:
			return bad("unknown mode %q (want tool or handoff)", s)
		}
	case "keywords":
		list, err := stringList(v, bad)
		if err != nil {
			return err
		}
		for i, k := range list {
			list[i] = strings.ToLower(k)
		}
		d.Keywords = list
	case "max_turns":
		n, err := count(v, 1000, bad)
		if err != nil {
			return err
		}
		d.MaxTurns = n
	case "max_tokens":
		n, err := count(v, math.MaxInt32, bad)
		if err != nil {
			return err
		}
		d.MaxTokens = n
	case "time_budget":
		s, err := scalar(v, bad)
		if err != nil {
			return err
		}
		dur, err := time.ParseDuration(s)
		if err != nil || dur <= 0 {
			return bad("bad duration %q: want a positive number and a unit, such as 90s, 10m or 1h", s)
		}
		d.TimeBudget = dur
	default:
		return bad("unknown field; want one of %s", strings.Join(fields, ", "))
	}
	return nil
}

func scalar(v *yaml.Node, bad func(string, ...any) error) (string, error) {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		return "", bad("want a string, got %s", kindName(v))
	}
	s := strings.TrimSpace(v.Value)
	if s == "" {
		return "", bad("must not be empty")
	}
	return s, nil
}

func number(v *yaml.Node, bad func(string, ...any) error) (float64, error) {
	if v.Kind != yaml.ScalarNode || (v.Tag != "!!int" && v.Tag != "!!float") {
		return 0, bad("want a number, got %s", kindName(v))
	}
	f, err := strconv.ParseFloat(v.Value, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, bad("want a number, got %q", v.Value)
	}
	return f, nil
}

func count(v *yaml.Node, max int, bad func(string, ...any) error) (int, error) {
	if v.Kind != yaml.ScalarNode || v.Tag != "!!int" {
		return 0, bad("want a whole number, got %s", kindName(v))
	}
	n, err := strconv.ParseInt(v.Value, 0, 64)
	if err != nil || n < 1 || n > int64(max) {
		return 0, bad("want 1 to %d, got %s", max, v.Value)
	}
	return int(n), nil
}

func stringList(v *yaml.Node, bad func(string, ...any) error) ([]string, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, bad("want a list, such as [a, b], got %s", kindName(v))
	}
	out := make([]string, 0, len(v.Content))
	for _, item := range v.Content {
		if item.Kind != yaml.ScalarNode || item.Tag == "!!null" || strings.TrimSpace(item.Value) == "" {
			return nil, bad("want a list of non-empty strings, got %s in it", kindName(item))
		}
		s := strings.TrimSpace(item.Value)
		if slices.Contains(out, s) {
			return nil, bad("%q is listed twice", s)
		}
		out = append(out, s)
	}
	return out, nil
}

func hasAlias(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode {
		return true
	}
	for _, c := range n.Content {
		if hasAlias(c) {
			return true
		}
	}
	return false
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	switch n.Tag {
	case "!!null":
		return "nothing"
	case "!!int", "!!float":
		return "the number " + n.Value
	case "!!bool":
		return "the boolean " + n.Value
	}
	return fmt.Sprintf("%q", n.Value)
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
