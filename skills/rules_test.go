package skills_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/skills"
)

// skill returns a valid skill definition to vary.
func skill(name string, allowed []string) skills.Skill {
	return skills.Skill{
		Name: name, Description: name + " does things", Instructions: "Do " + name + ".",
		AllowedTools: allowed, ExecutionProtocol: []string{"Do the thing."}, Version: "1.0.0",
	}
}

// SC-006, FR-005, US3: unknown names, missing companions and incompatible
// pairs are caught before anything starts; duplicates merge silently.
func TestValidate(t *testing.T) {
	r := newRegistry(t)
	a, b, c := skill("alpha", []string{"read_file"}), skill("beta", []string{"bash"}), skill("gamma", nil)
	a.ComposabilityRules = &skills.ComposabilityRules{IncompatibleWith: []string{"beta"}}
	b.ComposabilityRules = &skills.ComposabilityRules{IncompatibleWith: []string{"alpha"}}
	c.AllowedTools = []string{}
	c.ComposabilityRules = &skills.ComposabilityRules{Requires: []string{"alpha"}, IncompatibleWith: []string{"release-notes"}}
	for _, s := range []skills.Skill{a, b, c} {
		_, err := r.Register(s)
		require.NoError(t, err)
	}
	type verr struct {
		code   string
		skills []string
		msg    string
	}
	cases := []struct {
		name  string
		set   []string
		valid bool
		errs  []verr
	}{
		{"implementer alone misses its companion", []string{"opencode-implementer"}, false,
			[]verr{{skills.CodeMissingCompanion, []string{"opencode-implementer", "specification-engine"}, "opencode-implementer requires specification-engine, which is not in the set; add it"}}},
		{"specification engine alone misses its companion", []string{"specification-engine"}, false,
			[]verr{{skills.CodeMissingCompanion, []string{"specification-engine", "opencode-implementer"}, "specification-engine requires opencode-implementer, which is not in the set; add it"}}},
		{"both companions", []string{"opencode-implementer", "specification-engine"}, true, nil},
		{"duplicates merge silently", []string{"specification-engine", "opencode-implementer", "specification-engine"}, true, nil},
		{"unknown skill", []string{"opencode-implementor"}, false,
			[]verr{{skills.CodeUnknownSkill, []string{"opencode-implementor"}, `unknown skill "opencode-implementor" (did you mean "opencode-implementer"?)`}}},
		{"incompatible pair declared both ways is one error", []string{"alpha", "beta"}, false,
			[]verr{{skills.CodeIncompatible, []string{"alpha", "beta"}, "alpha and beta cannot be loaded together (alpha declares them incompatible)"}}},
		{"incompatible declared by one side", []string{"release-notes", "gamma", "alpha"}, false,
			[]verr{{skills.CodeIncompatible, []string{"gamma", "release-notes"}, "gamma and release-notes cannot be loaded together (gamma declares them incompatible)"}}},
		{"every problem at once", []string{"gamma", "nope", "release-notes"}, false, []verr{
			{skills.CodeMissingCompanion, []string{"gamma", "alpha"}, "gamma requires alpha, which is not in the set; add it"},
			{skills.CodeIncompatible, []string{"gamma", "release-notes"}, "gamma and release-notes cannot be loaded together (gamma declares them incompatible)"},
			{skills.CodeUnknownSkill, []string{"nope"}, `unknown skill "nope"`},
		}},
		{"empty set", nil, true, nil},
		{"compatible built-ins", []string{"release-notes", "code-review-checklist", "incident-triage"}, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := r.Validate(tc.set)
			require.Equal(t, tc.valid, res.Valid)
			var got []verr
			for _, e := range res.Errors {
				got = append(got, verr{e.Code, e.Skills, e.Message})
			}
			require.Equal(t, tc.errs, got)
		})
	}
	// US3 scenario 3: a valid set is {valid: true, errors: [], warnings: []}.
	out, err := json.Marshal(r.Validate([]string{"specification-engine", "opencode-implementer"}))
	require.NoError(t, err)
	require.JSONEq(t, `{"valid":true,"errors":[],"warnings":[]}`, string(out))
}

// FR-004, SC-003, US2: most restrictive wins.
func TestCompose(t *testing.T) {
	r := newRegistry(t)
	a := skill("writer", []string{"write_file", "opencode"})
	b := skill("guard", []string{"opencode"})
	b.ForbiddenTools = []string{"write_file"}
	self := skill("self-contradicting", []string{"bash", "read_file"})
	self.ForbiddenTools = []string{"bash"}
	pattern := skill("no-github-writes", []string{"github_*", "read_file"})
	pattern.ForbiddenTools = []string{"github_merge_pull_request", "github_push_*"}
	for _, s := range []skills.Skill{a, b, self, pattern} {
		_, err := r.Register(s)
		require.NoError(t, err)
	}
	cases := []struct {
		name               string
		set                []string
		allowed, forbidden []string
	}{
		{"the pair: spec_kit and the implementer's tools, never write or edit", []string{"specification-engine", "opencode-implementer"},
			[]string{"agent_coder", "bash", "list_directory", "read_file", "search_files", "spec_kit"}, []string{"edit_file", "write_file"}},
		{"one skill forbids what another allows", []string{"writer", "guard"}, []string{"opencode"}, []string{"write_file"}},
		{"order does not matter", []string{"guard", "writer"}, []string{"opencode"}, []string{"write_file"}},
		{"forbidden wins within one skill", []string{"self-contradicting"}, []string{"read_file"}, []string{"bash"}},
		{"an empty set is zero capability", []string{}, []string{}, []string{}},
		{"duplicates once", []string{"guard", "guard"}, []string{"opencode"}, []string{"write_file"}},
		{"patterns", []string{"no-github-writes"}, []string{"github_*", "read_file"}, []string{"github_merge_pull_request", "github_push_*"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := r.Compose(tc.set)
			require.NoError(t, err)
			require.Equal(t, tc.allowed, c.AllowedTools)
			require.Equal(t, tc.forbidden, c.ForbiddenTools)
			for _, f := range tc.forbidden {
				require.False(t, c.Allows(f), "%s is forbidden", f)
			}
		})
	}
	c, err := r.Compose([]string{"no-github-writes"})
	require.NoError(t, err)
	require.True(t, c.Allows("github_comment"))
	require.False(t, c.Allows("github_push_branch"))
	require.False(t, c.Allows("bash"), "a skill never grants what it does not list")

	_, err = r.Compose([]string{"guard", "nope", "nada"})
	require.EqualError(t, err, `unknown skills "nope", "nada"`)
	require.True(t, skills.IsNotFound(err))
}

// US4, FR-006, FR-007, SC-004.
func TestSelect(t *testing.T) {
	r := newRegistry(t)
	helper := skill("tests-helper", []string{"bash"})
	helper.CompatibilityRules = &skills.CompatibilityRules{Coding: true}
	helper.Keywords = []string{"flaky"}
	_, err := r.Register(helper)
	require.NoError(t, err)
	cases := []struct {
		name string
		req  skills.SelectRequest
		want []string
	}{
		{"a coding task gets both companions", skills.SelectRequest{Task: "fix the login bug", Coding: true},
			[]string{"opencode-implementer", "specification-engine", "tests-helper"}},
		{"limited to the enabled skills, the pair is still complete", skills.SelectRequest{Task: "fix it", Coding: true, Among: []string{"opencode-implementer"}},
			[]string{"opencode-implementer", "specification-engine"}},
		{"no coding skills for other tasks", skills.SelectRequest{Task: "write the release notes for v1.2", RiskLevel: "low"},
			[]string{"release-notes"}},
		{"a coding skill's keyword is not enough without coding", skills.SelectRequest{Task: "why is this test flaky?"}, []string{}},
		{"risk levels", skills.SelectRequest{Task: "incident: the site is down", RiskLevel: "high"}, []string{"incident-triage"}},
		{"a skill whose levels exclude the task's", skills.SelectRequest{Task: "release notes please", RiskLevel: "high"}, []string{}},
		{"words, not substrings", skills.SelectRequest{Task: "prerelease"}, []string{}},
		{"review", skills.SelectRequest{Task: "Please review PR #12", RiskLevel: "medium"}, []string{"code-review-checklist"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := r.Select(tc.req)
			require.NoError(t, err)
			require.ElementsMatch(t, tc.want, sel.Skills)
			require.True(t, sel.Validation.Valid, "%v", sel.Validation.Errors)
			if tc.req.Coding {
				require.Contains(t, sel.Skills, "specification-engine")
				require.Contains(t, sel.Skills, "opencode-implementer")
			}
		})
	}
	_, err = r.Select(skills.SelectRequest{Task: "x", RiskLevel: "extreme"})
	require.ErrorContains(t, err, `risk_level "extreme"`)
}

// US1, FR-014, SC-005: register and override at run time, used at once.
func TestRegisterAndOverride(t *testing.T) {
	r := newRegistry(t)
	s := skill("triage-lite", []string{"read_file"})
	s.ForbiddenTools = nil // no forbidden_tools: none, and nothing implied
	warnings, err := r.Register(s)
	require.NoError(t, err)
	require.Empty(t, warnings)
	got, ok := r.Skill("triage-lite")
	require.True(t, ok)
	require.Equal(t, []string{"read_file"}, got.AllowedTools)
	require.Empty(t, got.ForbiddenTools)
	require.Equal(t, skills.RuntimePackage, got.Package)
	require.True(t, r.Validate([]string{"triage-lite"}).Valid, "usable at once")
	c, err := r.Compose([]string{"triage-lite"})
	require.NoError(t, err)
	require.False(t, c.Allows("bash"), "a tool not in allowed_tools is unauthorised")

	_, err = r.Register(s)
	require.ErrorContains(t, err, "skill triage-lite exists (package runtime, version 1.0.0); use override_version")

	v2 := skill("triage-lite", []string{"read_file", "search_files"})
	v2.Version = "2.0.0"
	_, err = r.OverrideVersion(v2)
	require.NoError(t, err)
	got, _ = r.Skill("triage-lite")
	require.Equal(t, "2.0.0", got.Version)
	require.Equal(t, []string{"read_file", "search_files"}, got.AllowedTools)
	_, err = r.OverrideVersion(v2)
	require.ErrorContains(t, err, "at version 2.0.0 already")

	// Overriding a package's skill keeps its package, so its settings.
	rn := skill("release-notes", []string{"bash"})
	rn.Version = "1.1.0"
	_, err = r.OverrideVersion(rn)
	require.NoError(t, err)
	got, _ = r.Skill("release-notes")
	require.Equal(t, "release-notes", got.Package)
	require.True(t, r.Enabled(skills.Target{}, "release-notes").Enabled)

	// Overriding a skill that does not exist registers it.
	fresh := skill("fresh", []string{})
	_, err = r.OverrideVersion(fresh)
	require.NoError(t, err)
	_, ok = r.Skill("fresh")
	require.True(t, ok)

	// A step naming a tool the skill does not allow is a warning.
	w := skill("warned", []string{"read_file"})
	w.ExecutionProtocol = []string{"Read the file with read_file.", "Then run the tests with bash and bash again."}
	w.ForbiddenTools = []string{"read_file"}
	warnings, err = r.Register(w)
	require.NoError(t, err)
	require.Equal(t, []string{
		"skill warned: tool read_file is both allowed and forbidden; forbidden wins",
		"skill warned: step 1 names tool read_file, which the skill does not allow",
		"skill warned: step 2 names tool bash, which the skill does not allow",
	}, warnings)
	res := r.Validate([]string{"warned"})
	require.True(t, res.Valid)
	require.Len(t, res.Warnings, 3)

	bad := skill("Bad Name", nil)
	_, err = r.Register(bad)
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), `"Bad Name" is not a valid skill name`), err.Error())
	require.Contains(t, err.Error(), "allowed_tools: required")
}

// Validation of installed skills speaks of their tools as an author would
// want to hear it: a name that is no tool (it grants or refuses nothing),
// and a step that another member of the set stops, most restrictive
// winning. None of it makes a set invalid.
func TestValidateWarnsOfToolsThatCannotWork(t *testing.T) {
	r := newRegistry(t)
	addPackage(t, r, map[string]string{"manifest.yaml": `name: tool-kit
version: 1.0.0
description: Skills naming tools.
skills:
  - name: typo
    description: Names tools that are not.
    instructions: Read.
    allowed_tools: [reed_file, bash, agent_coder, "github_*"]
    forbidden_tools: [write_flie]
    execution_protocol: [Read with bash.]
  - name: writer
    description: Writes files.
    instructions: Write.
    allowed_tools: [read_file, write_file]
    execution_protocol: [Read the file with read_file., Write it back with write_file.]
  - name: guard
    description: Never writes.
    instructions: Guard.
    allowed_tools: [read_file]
    forbidden_tools: [write_file]
    execution_protocol: [Read with read_file.]
`})
	cases := []struct {
		name     string
		set      []string
		warnings []string
	}{
		{"names that are no tool", []string{"typo"}, []string{
			"skill typo: allowed_tools names reed_file, which is no tool here (did you mean read_file?); it grants nothing",
			"skill typo: forbidden_tools names write_flie, which is no tool here (did you mean write_file?); it refuses nothing",
		}},
		{"a member forbids what another's step uses", []string{"writer", "guard"}, []string{
			"skill writer: step 2 names tool write_file, which guard forbids; loaded together, that step cannot be taken",
		}},
		{"the same the other way round, named twice", []string{"guard", "writer", "guard"}, []string{
			"skill writer: step 2 names tool write_file, which guard forbids; loaded together, that step cannot be taken",
		}},
		{"alone, each step can be taken", []string{"writer"}, nil},
		{"with a built-in that forbids writing", []string{"writer", "release-notes"}, []string{
			"skill writer: step 2 names tool write_file, which release-notes forbids; loaded together, that step cannot be taken",
		}},
		{"built-ins together", []string{"specification-engine", "opencode-implementer", "release-notes", "code-review-checklist", "incident-triage"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := r.Validate(tc.set)
			require.True(t, res.Valid, res.Errors)
			require.Equal(t, tc.warnings, res.Warnings)
		})
	}
	comp, err := r.Compose([]string{"writer", "guard"})
	require.NoError(t, err)
	require.Equal(t, []string{"read_file"}, comp.AllowedTools, "the warning says what composing does")

	// A skill registered at run time is the session's own: its names are
	// not checked against the tools here.
	_, err = r.Register(skill("session", []string{"write", "opencode"}))
	require.NoError(t, err)
	require.Empty(t, r.Validate([]string{"session"}).Warnings)
}
