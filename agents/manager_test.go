package agents_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

func writeAgent(t testing.TB, dir, file, src string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o750))
	require.NoError(t, os.WriteFile(filepath.Join(dir, file), []byte(src), 0o644))
}

// packages is a package registry's view of its agents.
type packages map[string]map[string]string // package → file → source

func (p packages) Agents(context.Context) ([]agents.Definition, error) {
	var out []agents.Definition
	for _, pkg := range []string{"db-tools", "linters"} {
		for file, src := range p[pkg] {
			d, err := agents.ParsePackage(pkg, file, []byte(src))
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
	}
	return out, nil
}

func TestBuiltinAgents(t *testing.T) {
	m, err := agents.NewManager(context.Background(), agents.ManagerOptions{})
	require.NoError(t, err)
	want := map[string]struct {
		profile string
		mode    agents.Mode
		keyword []string
	}{
		"coder":    {"contributor", agents.ModeTool, []string{"fix", "implement", "bug", "refactor"}},
		"reviewer": {"read-only", agents.ModeTool, []string{"review", "diff"}},
		"ops":      {"ops", agents.ModeHandoff, []string{"deploy", "rollback", "incident", "outage"}},
		"triage":   {"read-only", agents.ModeTool, []string{"triage", "label"}},
		"docs":     {"contributor", agents.ModeTool, []string{"docs", "documentation", "readme"}},
		"builder":  {"contributor", agents.ModeHandoff, []string{"new agent", "create an agent"}},
	}
	list := m.List()
	require.Len(t, list, len(want))
	for _, d := range list {
		w, ok := want[d.Name]
		require.True(t, ok, d.Name)
		require.Equal(t, agents.SourceBuiltin, d.Source)
		require.Equal(t, w.profile, d.Profile, d.Name)
		require.Equal(t, w.mode, d.Mode, d.Name)
		require.Subset(t, d.Keywords, w.keyword, d.Name)
		require.Greater(t, len(d.Instructions), 800, "%s has real instructions", d.Name)
		require.Contains(t, d.Instructions, "final answer", d.Name)
		require.NotEmpty(t, d.Description)
	}
	require.NoError(t, m.Validate(agents.Known{
		Models: []string{}, Tools: tools.CoreNames(), Profiles: tools.BuiltinProfiles{}.Names(),
	}), "built-ins need no configuration")

	info := m.RouterInfo()
	require.Len(t, info, 6)
	require.Equal(t, bot.AgentInfo{Name: "coder", Keywords: []string{"fix", "implement", "bug", "refactor", "build", "compile", "crash", "feature"}}, info[1])
}

func TestPriorityUserOverPackageOverBuiltin(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agents")
	writeAgent(t, dir, "coder.md", "---\nname: coder\ndescription: Our own coder.\nmodel: fast\ntools: [read_file]\n---\nHouse rules.\n")
	writeAgent(t, dir, "notes.txt", "not an agent")
	pkgs := packages{
		"db-tools": {
			"agents/reviewer.md": "---\nname: reviewer\ndescription: Reviews SQL.\nprofile: read-only\n---\nReview SQL.\n",
			"agents/coder.md":    "---\nname: coder\ndescription: Package coder.\n---\n",
			"agents/dba.md":      "---\nname: dba\ndescription: Database admin.\n---\n",
		},
		"linters": {
			"agents/dba.md": "---\nname: dba\ndescription: Second dba.\n---\n",
		},
	}
	var logs bytes.Buffer
	m, err := agents.NewManager(context.Background(), agents.ManagerOptions{
		Dir: dir, Packages: pkgs, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	require.NoError(t, err)

	coder, ok := m.Get("Coder")
	require.True(t, ok)
	require.Equal(t, "user", coder.Source)
	require.Equal(t, "Our own coder.", coder.Description)
	require.Equal(t, []string{"builtin", "package:db-tools"}, coder.Overrides)
	require.Equal(t, filepath.Join(dir, "coder.md"), coder.File)

	reviewer, _ := m.Get("reviewer")
	require.Equal(t, "package:db-tools", reviewer.Source)
	require.Equal(t, "db-tools", reviewer.Package)
	require.Equal(t, []string{"builtin"}, reviewer.Overrides)

	dba, _ := m.Get("dba")
	require.Equal(t, "Database admin.", dba.Description, "the first package keeps a name")

	ops, _ := m.Get("ops")
	require.Equal(t, "builtin", ops.Source)

	// The warning names both sources.
	require.Contains(t, logs.String(), `msg="agent overridden" agent=coder by="user (`+filepath.Join(dir, "coder.md")+`)" overridden="package:db-tools (agents/coder.md)"`)
	require.Contains(t, logs.String(), `msg="agent overridden" agent=reviewer by="package:db-tools (agents/reviewer.md)" overridden="builtin (builtin/reviewer.md)"`)
	require.Contains(t, logs.String(), `ignored="package:linters (agents/dba.md)"`)

	// agents list --json
	b, err := json.Marshal(m.Summaries())
	require.NoError(t, err)
	var list []map[string]any
	require.NoError(t, json.Unmarshal(b, &list))
	require.Len(t, list, 7)
	require.Equal(t, map[string]any{
		"name": "coder", "description": "Our own coder.", "source": "user", "model": "fast",
		"profile": "contributor", "mode": "tool", "tools": []any{"read_file"},
	}, list[1])

	// The user's coder names a model that is not configured.
	err = m.Validate(agents.Known{Models: []string{"default"}, Tools: tools.CoreNames()})
	require.EqualError(t, err, filepath.Join(dir, "coder.md")+`:4: model: unknown model "fast" (configured: default)`)
}

func TestUserDirErrors(t *testing.T) {
	dir := t.TempDir()
	writeAgent(t, dir, "a.md", "---\nname: helper\ndescription: A.\n---\n")
	writeAgent(t, dir, "b.md", "---\nname: helper\ndescription: B.\n---\n")
	writeAgent(t, dir, "c.md", "---\ndescription: no name\n---\n")
	_, err := agents.NewManager(context.Background(), agents.ManagerOptions{Dir: dir})
	require.Error(t, err)
	require.Equal(t, filepath.Join(dir, "b.md")+`:2: name: agent "helper" is already defined in `+filepath.Join(dir, "a.md")+"\n"+
		filepath.Join(dir, "c.md")+":3: name: required", err.Error())

	m, err := agents.NewManager(context.Background(), agents.ManagerOptions{Dir: filepath.Join(dir, "missing")})
	require.NoError(t, err, "no agents_dir means no user agents")
	require.Len(t, m.List(), 6)
}

func TestValidateAgentTools(t *testing.T) {
	dir := t.TempDir()
	writeAgent(t, dir, "lead.md", "---\nname: lead\ndescription: Leads.\ntools: [read_file, agent_reviewer, handoff_to, agent_ops, rm_rf]\n---\n")
	m, err := agents.NewManager(context.Background(), agents.ManagerOptions{Dir: dir})
	require.NoError(t, err)
	err = m.Validate(agents.Known{Tools: tools.CoreNames()})
	require.Error(t, err)
	file := filepath.Join(dir, "lead.md")
	require.Equal(t, file+`:4: tools: unknown tool "agent_ops"`+"\n"+file+`:4: tools: unknown tool "rm_rf"`, err.Error(),
		"ops works by handoff, so there is no agent_ops")
}

func TestReload(t *testing.T) {
	dir := t.TempDir()
	m, err := agents.NewManager(context.Background(), agents.ManagerOptions{Dir: dir})
	require.NoError(t, err)
	_, ok := m.Get("helper")
	require.False(t, ok)

	writeAgent(t, dir, "helper.md", "---\nname: helper\ndescription: Helps.\n---\n")
	require.NoError(t, m.Reload(context.Background()))
	_, ok = m.Get("helper")
	require.True(t, ok)

	writeAgent(t, dir, "broken.md", "no frontmatter")
	require.Error(t, m.Reload(context.Background()))
	_, ok = m.Get("helper")
	require.True(t, ok, "a failed reload keeps the previous set")
	helper, _ := m.Get("helper")
	require.True(t, strings.HasSuffix(helper.File, "helper.md"))
}
