package agents_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents"
)

func TestParseFullDefinition(t *testing.T) {
	src := `---
name: database-agent
description: SQL expert. Use it for queries and schema changes.
model: fast
temperature: 0.2
reasoning_effort: high
tools: [read_file, execute_sql]
skills:
  - postgres
profile: maintainer
mode: handoff
keywords: [SQL, Query]
max_turns: 12
max_tokens: 50000
time_budget: 90s
subagents: {max_concurrent: 8, timeout: 2m}
---

You are a database specialist.

Never run destructive queries without confirmation.
`
	d, err := agents.Parse("agents/database-agent.md", []byte(src))
	require.NoError(t, err)
	require.Equal(t, "database-agent", d.Name)
	require.Equal(t, "SQL expert. Use it for queries and schema changes.", d.Description)
	require.Equal(t, "fast", d.Model)
	require.Equal(t, 0.2, *d.Temperature)
	require.Equal(t, "high", d.ReasoningEffort)
	require.Equal(t, []string{"read_file", "execute_sql"}, d.Tools)
	require.Equal(t, []string{"postgres"}, d.Skills)
	require.Equal(t, "maintainer", d.Profile)
	require.Equal(t, agents.ModeHandoff, d.Mode)
	require.Equal(t, []string{"sql", "query"}, d.Keywords, "keywords match case-insensitively")
	require.Equal(t, 12, d.MaxTurns)
	require.Equal(t, 50000, d.MaxTokens)
	require.Equal(t, 90*time.Second, d.TimeBudget)
	require.Equal(t, agents.SubagentLimits{MaxConcurrent: 8, Timeout: 2 * time.Minute}, d.Subagents, "max_depth left to the config")
	require.Equal(t, "You are a database specialist.\n\nNever run destructive queries without confirmation.", d.Instructions)
	require.Equal(t, "agents/database-agent.md", d.File)
}

func TestParseDefaults(t *testing.T) {
	d, err := agents.Parse("a.md", []byte("---\r\nname: helper\r\ndescription: Helps.\r\n---\r\nBe helpful.\r\n"))
	require.NoError(t, err)
	require.Equal(t, agents.DefaultProfile, d.Profile)
	require.Equal(t, agents.ModeTool, d.Mode)
	require.Equal(t, "default", d.ModelName())
	require.Nil(t, d.Temperature)
	require.Equal(t, "Be helpful.", d.Instructions)

	s := d.Summary()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	require.JSONEq(t, `{"name":"helper","description":"Helps.","source":"","model":"default","profile":"contributor","mode":"tool","tools":[]}`, string(b))
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want string
	}{
		{"missing name", "---\ndescription: x\n---\nbody\n", "agents/x.md:3: name: required"},
		{"missing description", "---\nname: x\n---\n", "agents/x.md:3: description: required: say what the agent is for, written for routing"},
		{"empty frontmatter", "---\n---\n", "agents/x.md:2: name: required"},
		{"no frontmatter", "# just markdown\n", `agents/x.md:1: want YAML frontmatter: the file must start with a line "---"`},
		{"not closed", "---\nname: x\n", `agents/x.md: frontmatter is not closed: want a line "---" after it`},
		{"bad yaml", "---\nname: x\ndescription: a: b\n---\n", "agents/x.md:3: mapping values are not allowed in this context"},
		{"not a mapping", "---\n- a\n- b\n---\n", "agents/x.md:2: want a mapping, got a list"},
		{"unknown field", "---\nname: x\ndescription: y\ncolour: blue\n---\n", "agents/x.md:4: colour: unknown key; want one of description, keywords"},
		{"duplicate field", "---\nname: x\nname: y\n---\n", "agents/x.md:3: name: duplicate key (first on line 2)"},
		{"bad name", "---\nname: Coder Bot\ndescription: y\n---\n", `agents/x.md:2: name: "Coder Bot" is not a valid name`},
		{"name is a list", "---\nname: [a]\n---\n", "agents/x.md:2: name: want a string, got a list"},
		{"temperature as text", "---\nname: x\ndescription: y\ntemperature: hot\n---\n", `agents/x.md:4: temperature: want a number, got "hot"`},
		{"temperature out of range", "---\nname: x\ndescription: y\ntemperature: 3\n---\n", "agents/x.md:4: temperature: want 0 to 2, got 3"},
		{"tools not a list", "---\nname: x\ndescription: y\ntools: bash\n---\n", "agents/x.md:4: tools: want a list, got a string"},
		{"tool listed twice", "---\nname: x\ndescription: y\ntools: [bash, bash]\n---\n", `agents/x.md:4: tools: "bash" is listed twice`},
		{"bad tool name", "---\nname: x\ndescription: y\ntools: [rm -rf]\n---\n", `agents/x.md:4: tools: "rm -rf" is not a valid tool name`},
		{"bad mode", "---\nname: x\ndescription: y\nmode: auto\n---\n", `agents/x.md:4: mode: unknown mode "auto" (want tool or handoff)`},
		{"bad effort", "---\nname: x\ndescription: y\nreasoning_effort: extreme\n---\n", `agents/x.md:4: reasoning_effort: unknown effort "extreme"`},
		{"zero turns", "---\nname: x\ndescription: y\nmax_turns: 0\n---\n", "agents/x.md:4: max_turns: want 1 to 1000, got 0"},
		{"turns as text", "---\nname: x\ndescription: y\nmax_turns: many\n---\n", `agents/x.md:4: max_turns: want an integer, got "many"`},
		{"bad budget", "---\nname: x\ndescription: y\ntime_budget: 5 minutes\n---\n", `agents/x.md:4: time_budget: bad duration "5 minutes"`},
		{"alias", "---\nname: &n x\ndescription: *n\n---\n", "agents/x.md:3: description: YAML aliases are not supported"},
		{"null description", "---\nname: x\ndescription:\n---\n", "agents/x.md:3: description: must not be empty"},
		{"empty model", "---\nname: x\ndescription: y\nmodel: ' '\n---\n", "agents/x.md:4: model: must not be empty"},
		{"zero budget", "---\nname: x\ndescription: y\ntime_budget: 0s\n---\n", "agents/x.md:4: time_budget: bad duration 0s"},
		{"subagent limits", "---\nname: x\ndescription: y\nsubagents:\n  max_concurrent: 0\n  max_depth: 6\n  timeout: 1ms\n---\n",
			"agents/x.md:5: subagents.max_concurrent: want 1 to 64, got 0"},
		{"subagent depth", "---\nname: x\ndescription: y\nsubagents:\n  max_depth: 6\n---\n", "agents/x.md:5: subagents.max_depth: want 1 to 5, got 6"},
		{"subagent timeout", "---\nname: x\ndescription: y\nsubagents: {timeout: 1ms}\n---\n", "agents/x.md:4: subagents.timeout: want at least 1s, got 1ms"},
		{"subagent key", "---\nname: x\ndescription: y\nsubagents: {max_children: 2}\n---\n", "agents/x.md:4: subagents.max_children: unknown key"},
		{"unknown field close to a known one", "---\nname: x\ndescription: y\nkeyword: [a]\n---\n", `agents/x.md:4: keyword: unknown key; did you mean "keywords"?`},
		{"every problem at once", "---\nname: X\ndescription: y\nmode: auto\n---\n", `agents/x.md:4: mode: unknown mode "auto"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := agents.Parse("agents/x.md", []byte(tc.src))
			require.Error(t, err)
			// Every problem is reported; the one of the case among them.
			found := slices.ContainsFunc(strings.Split(err.Error(), "\n"), func(l string) bool { return strings.HasPrefix(l, tc.want) })
			require.True(t, found, "got  %s\nwant %s", err, tc.want)
			var de *agents.DefinitionError
			require.ErrorAs(t, err, &de)
		})
	}
}

func TestValidate(t *testing.T) {
	d, err := agents.Parse("agents/coder.md", []byte("---\nname: coder\ndescription: x\nmodel: fast\nprofile: wizard\ntools: [read_file, rm_rf]\nskills: [go]\n---\n"))
	require.NoError(t, err)
	err = d.Validate(agents.Known{
		Models:   []string{"default"},
		Tools:    []string{"read_file", "bash"},
		Profiles: []string{"read-only", "contributor"},
		Skills:   []string{},
	})
	require.Error(t, err)
	require.Equal(t, `agents/coder.md:4: model: unknown model "fast" (configured: default)
agents/coder.md:5: profile: unknown profile "wizard" (want read-only, contributor)
agents/coder.md:6: tools: unknown tool "rm_rf"
agents/coder.md:7: skills: unknown skill "go"`, err.Error())

	require.NoError(t, d.Validate(agents.Known{}), "nil lists skip their checks")
}

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"---\nname: coder\ndescription: x\n---\nbody",
		"---\nname: x\ndescription: y\ntools: [a, b]\nkeywords: [A]\ntemperature: 1.5\ntime_budget: 1m\nmax_turns: 3\n---\n",
		"---\nname: &a x\ndescription: *a\n---\n",
		"---\n[\n---\n",
		"---\nname: x\n",
		"\xef\xbb\xbf---\r\nname: x\r\ndescription: y\r\n...\r\n",
		"---\nname: x\ndescription: y\nmax_tokens: 0x10\n---\n",
		"---\n? [a]\n: b\n---\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := agents.Parse("agents/f.md", data)
		if err != nil {
			require.True(t, strings.HasPrefix(err.Error(), "agents/f.md"), err.Error())
			return
		}
		require.Regexp(t, validName, d.Name)
		require.NotEmpty(t, d.Description)
		require.Contains(t, []agents.Mode{agents.ModeTool, agents.ModeHandoff}, d.Mode)
		require.NotEmpty(t, d.Profile)
		if d.Temperature != nil {
			require.True(t, *d.Temperature >= 0 && *d.Temperature <= 2)
		}
		_, err = json.Marshal(d)
		require.NoError(t, err)
	})
}
