package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/internal/yamldecode"
)

// SpecKit is the tool of the built-in specification-engine package: it
// keeps specifications of changes as markdown documents under specs/ in
// the workspace, in the sections the skill's instructions name, and checks
// them. It belongs to its package, so an agent sees it when that package's
// skill allows it (or its tools list names it).
const SpecKit = "spec_kit"

// SpecKitPackage is the package spec_kit belongs to.
const SpecKitPackage = "specification-engine"

// SpecDir is where specifications live in the workspace.
const SpecDir = "specs"

// Spec statuses, in the order a specification goes through them.
const (
	SpecDraft       = "draft"
	SpecApproved    = "approved"
	SpecImplemented = "implemented"
)

// SpecSections are a specification's sections, in order.
var SpecSections = []string{"Problem", "User stories", "Requirements", "Acceptance scenarios", "Open questions"}

var (
	specNameRe    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)
	requirementRe = regexp.MustCompile(`^\s*[-*]?\s*\**(FR-\d{3})\**[:.)]?\s+(.*)$`)
	specSchema    = json.RawMessage(`{"type":"object","properties":{` +
		`"action":{"type":"string","enum":["list","read","create","update","check"],"description":"list the specifications; read, create, update or check one"},` +
		`"name":{"type":"string","description":"the specification's name, lower-case words joined by '-', such as login-timeout: the file specs/<name>.md"},` +
		`"title":{"type":"string","description":"create, update: a one-line title"},` +
		`"status":{"type":"string","enum":["draft","approved","implemented"],"description":"update: approved only when check reports nothing"},` +
		`"sections":{"type":"object","description":"create, update: section name → markdown text; sections: Problem, User stories, Requirements, Acceptance scenarios, Open questions",` +
		`"additionalProperties":{"type":"string"}}},` +
		`"required":["action"],"additionalProperties":false}`)
)

// NewSpecKit returns the spec_kit tool.
func NewSpecKit(now func() time.Time) Tool {
	if now == nil {
		now = time.Now
	}
	return &funcTool{
		info: Info{
			Name: SpecKit, Kind: KindCommand, Package: SpecKitPackage, Permissions: []Permission{PermWrite}, Schema: specSchema,
			Description: "Keep specifications of changes under specs/ in the workspace: list them, read one, create one " +
				"(sections Problem, User stories, Requirements, Acceptance scenarios, Open questions), update its sections or " +
				"status, and check that it is complete (numbered MUST requirements, Given/When/Then scenarios).",
		},
		run: func(ctx context.Context, cc CallContext, input json.RawMessage) (string, error) {
			return specKit(cc, input, now)
		},
	}
}

// specFront is a specification's frontmatter.
type specFront struct {
	Title   string `yaml:"title"`
	Status  string `yaml:"status"`
	Updated string `yaml:"updated"`
}

// spec is a specification document.
type spec struct {
	specFront
	sections map[string]string
	order    []string // sections as they appear, ours first
}

func specKit(cc CallContext, input json.RawMessage, now func() time.Time) (string, error) {
	var in struct {
		Action   string            `json:"action"`
		Name     string            `json:"name"`
		Title    string            `json:"title"`
		Status   string            `json:"status"`
		Sections map[string]string `json:"sections"`
	}
	if err := DecodeInput(input, &in); err != nil {
		return "", err
	}
	root, err := openRoot(cc.Workspace)
	if err != nil {
		return "", err
	}
	defer root.Close()
	if in.Action == "list" {
		return listSpecs(root)
	}
	if !specNameRe.MatchString(in.Name) {
		return "", fmt.Errorf("invalid input: name %q: want lower-case words joined by '-', such as login-timeout", in.Name)
	}
	file := SpecDir + "/" + in.Name + ".md"
	read := func() (*spec, error) {
		data, err := readChecked(root, file)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no specification %s: create it first (action create)", file)
		}
		var refused *RefusedError
		if errors.As(err, &refused) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", file, unwrapPath(err))
		}
		return parseSpec(file, data)
	}
	switch in.Action {
	case "read":
		s, err := read()
		if err != nil {
			return "", err
		}
		return s.render(), nil
	case "check":
		s, err := read()
		if err != nil {
			return "", err
		}
		if problems := s.check(); len(problems) > 0 {
			return fmt.Sprintf("%s: %d problem%s:\n- %s", file, len(problems), plural(len(problems)), strings.Join(problems, "\n- ")), nil
		}
		return file + ": complete; nothing to fix", nil
	case "create", "update":
	default:
		return "", fmt.Errorf("invalid input: action %q: want list, read, create, update or check", in.Action)
	}
	for name := range in.Sections {
		if !slices.Contains(SpecSections, name) {
			return "", fmt.Errorf("invalid input: unknown section %q (want %s)", name, strings.Join(SpecSections, ", "))
		}
	}
	var s *spec
	if in.Action == "create" {
		if _, err := root.Stat(file); err == nil {
			return "", fmt.Errorf("%s exists: read it and update it instead", file)
		}
		if strings.TrimSpace(in.Title) == "" {
			return "", errors.New("invalid input: create needs a title")
		}
		if in.Status != "" && in.Status != SpecDraft {
			return "", errors.New("invalid input: a specification starts as a draft")
		}
		s = &spec{specFront: specFront{Status: SpecDraft}, sections: map[string]string{}}
	} else if s, err = read(); err != nil {
		return "", err
	}
	if t := strings.TrimSpace(in.Title); t != "" {
		s.Title = strings.ReplaceAll(t, "\n", " ")
	}
	for name, text := range in.Sections {
		s.sections[name] = strings.TrimSpace(text)
	}
	if in.Status != "" {
		prev := s.Status
		s.Status = in.Status
		if in.Status != SpecDraft {
			if problems := s.check(); len(problems) > 0 {
				s.Status = prev
				return "", fmt.Errorf("%s cannot be %s: %s", file, in.Status, strings.Join(problems, "; "))
			}
		}
	}
	s.Updated = now().UTC().Format(time.RFC3339)
	if err := root.MkdirAll(SpecDir, 0o750); err != nil {
		return "", fmt.Errorf("make %s: %w", SpecDir, unwrapPath(err))
	}
	text := s.render()
	if err := writeChecked(root, file, file, []byte(text), 0o644, os.O_CREATE); err != nil {
		return "", err
	}
	verb := "updated"
	if in.Action == "create" {
		verb = "created"
	}
	msg := fmt.Sprintf("%s %s (status %s)", verb, file, s.Status)
	if problems := s.check(); len(problems) > 0 {
		msg += fmt.Sprintf("; check finds %d problem%s: %s", len(problems), plural(len(problems)), strings.Join(problems, "; "))
	}
	return msg, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// listSpecs lists the specifications with their status and title.
func listSpecs(root *os.Root) (string, error) {
	entries, err := fs.ReadDir(root.FS(), SpecDir)
	if errors.Is(err, fs.ErrNotExist) {
		return "no specifications yet (specs/ does not exist)", nil
	}
	if err != nil {
		return "", fmt.Errorf("list %s: %w", SpecDir, unwrapPath(err))
	}
	var lines []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".md")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		data, err := readChecked(root, SpecDir+"/"+e.Name())
		if err != nil {
			continue
		}
		s, err := parseSpec(e.Name(), data)
		if err != nil {
			lines = append(lines, fmt.Sprintf("%s: unreadable: %v", name, err))
			continue
		}
		lines = append(lines, fmt.Sprintf("%s [%s] %s", name, s.Status, s.Title))
	}
	if len(lines) == 0 {
		return "no specifications yet", nil
	}
	return strings.Join(lines, "\n"), nil
}

// parseSpec reads a specification: YAML frontmatter, then "## " sections.
func parseSpec(file string, data []byte) (*spec, error) {
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	rest, ok := strings.CutPrefix(text, "---\n")
	front, body, closed := strings.Cut(rest, "\n---\n")
	if !ok || !closed {
		return nil, fmt.Errorf("%s: not a specification: want frontmatter between --- lines", file)
	}
	s := &spec{sections: map[string]string{}}
	d := yamldecode.New(file, yamldecode.Options{NoAliases: true, FirstLine: 2})
	d.Document([]byte(front), &s.specFront)
	if err := d.Err(); err != nil {
		return nil, err
	}
	var current string
	var buf []string
	flush := func() {
		if current != "" {
			s.sections[current] = strings.TrimSpace(strings.Join(buf, "\n"))
			s.order = append(s.order, current)
		}
		buf = buf[:0]
	}
	for _, line := range strings.Split(body, "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			flush()
			current = strings.TrimSpace(h)
			continue
		}
		buf = append(buf, line)
	}
	flush()
	return s, nil
}

// render writes the specification: frontmatter, then the sections in
// their order, any others after them.
func (s *spec) render() string {
	var b strings.Builder
	fmt.Fprintf(&b, "---\ntitle: %s\nstatus: %s\nupdated: %s\n---\n", yamlString(s.Title), s.Status, s.Updated)
	names := slices.Clone(SpecSections)
	for _, n := range s.order {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, n := range names {
		text, ok := s.sections[n]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n\n%s\n", n, text)
	}
	return b.String()
}

// yamlString quotes a title for the frontmatter.
func yamlString(s string) string {
	b, _ := json.Marshal(s) // a JSON string is a YAML string
	return string(b)
}

// check lists what keeps the specification from being complete.
func (s *spec) check() []string {
	var problems []string
	for _, n := range SpecSections[:4] {
		if strings.TrimSpace(s.sections[n]) == "" {
			problems = append(problems, fmt.Sprintf("section %q is missing or empty", n))
		}
	}
	reqs := 0
	for _, line := range strings.Split(s.sections["Requirements"], "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		m := requirementRe.FindStringSubmatch(line)
		if m == nil {
			if strings.HasPrefix(strings.TrimSpace(line), "-") || strings.HasPrefix(strings.TrimSpace(line), "*") {
				problems = append(problems, fmt.Sprintf("requirement %q is not numbered FR-001, FR-002 …", strings.TrimSpace(line)))
			}
			continue
		}
		reqs++
		if !strings.Contains(m[2], "MUST") {
			problems = append(problems, fmt.Sprintf("%s says neither MUST nor MUST NOT", m[1]))
		}
	}
	if s.sections["Requirements"] != "" && reqs == 0 {
		problems = append(problems, "no requirement is numbered FR-001, FR-002 …")
	}
	if acc := s.sections["Acceptance scenarios"]; acc != "" {
		lower := strings.ToLower(acc)
		for _, w := range []string{"Given", "When", "Then"} {
			if !strings.Contains(lower, strings.ToLower(w)) {
				problems = append(problems, fmt.Sprintf("the acceptance scenarios have no %q step", w))
			}
		}
	}
	if s.Status != SpecDraft {
		if q := strings.TrimSpace(s.sections["Open questions"]); q != "" && !strings.EqualFold(q, "none") && !strings.EqualFold(q, "none.") {
			problems = append(problems, "open questions remain; answer them or keep the specification a draft")
		}
	}
	return problems
}
