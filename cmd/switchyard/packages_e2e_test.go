package main

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/tools"
)

// modelConfig writes a config whose default model is the fake at url.
func modelConfig(t *testing.T, dir, url string) {
	t.Helper()
	cfg := fmt.Sprintf("models:\n  default:\n    provider: openai\n    base_url: %s/v1\n    model: fake\n", url)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
}

// finished waits until the console thread's work item is finished and
// its final status and reply are delivered, and returns them.
func finished(t *testing.T, dir string, env []string, thread string) (status, reply string) {
	t.Helper()
	require.Eventually(t, func() bool {
		r := run(t, dir, env, "thread", thread, "--json")
		var msgs []struct{ ID, Kind, Text string }
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &msgs) != nil {
			return false
		}
		status, reply = "", ""
		for _, m := range msgs {
			switch {
			case m.Kind == "status":
				status = m.Text
			case m.Kind == "reply" && strings.HasSuffix(m.ID, "/reply"):
				// A work item's reply; an approval's prompt is a reply
				// of its own, and may come last.
				reply = m.Text
			}
		}
		return reply != "" && (strings.HasPrefix(status, "✅") || strings.HasPrefix(status, "❌"))
	}, 60*time.Second, 100*time.Millisecond)
	return status, reply
}

// gitRepo makes dir a git repository with a tagged release and commits
// after it.
func gitRepo(t *testing.T, dir string) {
	t.Helper()
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	git("init", "-q")
	git("commit", "-q", "--allow-empty", "-m", "chore: first")
	git("tag", "v1.0.0")
	git("commit", "-q", "--allow-empty", "-m", "feat: replies are split on line ends")
	git("commit", "-q", "--allow-empty", "-m", "fix: the status message keeps its order")
}

// The example package, installed and enabled at one repository: its
// /command routes there (explain), and nowhere else; its agent is listed as
// package:release-helper; its rules and commands name their origin; where
// it is enabled, its command runs its agent with its skill loaded and its
// command tool runs in the sandbox.
func TestAPackagesEntryPointsAgentAndToolWhereItIsEnabled(t *testing.T) {
	fake := &fakeOpenAI{quick: true, byAgent: map[string][]toolStep{"release-writer": {{name: "changelog_since", args: `{}`}}}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	modelConfig(t, dir, srv.URL)
	p := serve(t, dir, freeAddr(t))
	env := p.env()
	example, err := filepath.Abs(filepath.Join("..", "..", "examples", "release-helper"))
	require.NoError(t, err)

	explain := func(repo string) string {
		t.Helper()
		r := run(t, dir, env, "explain", "--daemon", "--source", "github", "--actor", "octocat", "--repo", repo, "--text", "/release-notes since v1.0.0")
		require.Equal(t, 0, r.code, r.stderr)
		return r.stdout
	}
	before := explain("acme/web")
	require.NotContains(t, before, "release-writer", "nothing installed, nothing routes /release-notes")

	r := run(t, dir, env, "skills", "install", example)
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, explain("acme/web"), "release-writer", "installed but enabled nowhere: it does not route")

	r = run(t, dir, env, "agents", "list", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var list []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	sources := map[string]any{}
	for _, a := range list {
		sources[a["name"].(string)] = a["source"]
	}
	require.Equal(t, "package:release-helper", sources["release-writer"], "its agent is listed, no restart")

	r = run(t, dir, env, "skills", "enable", "release-helper", "--scope", "repo:acme/web")
	require.Equal(t, 0, r.code, r.stderr)
	require.True(t, strings.HasPrefix(explain("acme/web"), "release-writer (command /release-notes of package:release-helper) with skills changelog-draft;"),
		"enabled at acme/web, its command routes there")
	require.NotContains(t, explain("acme/api"), "release-writer", "enabled at acme/web only")

	r = run(t, dir, env, "explain", "--daemon", "--json", "--source", "github", "--repo", "acme/web", "--kind", "github.release.published")
	require.Equal(t, 0, r.code, r.stderr)
	var e map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &e))
	require.Equal(t, "release-writer", e["agent"])
	require.Equal(t, "rule", e["kind"])
	require.Equal(t, "release-helper/notes", e["rule"])
	require.Equal(t, "package:release-helper", e["origin"])

	r = run(t, dir, env, "rules", "list", "--daemon")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `0\s+release-helper/notes\s+release-writer\s+package:release-helper\s+kinds github.release.published`, r.stdout)
	require.Contains(t, r.stdout, "/release-notes → release-writer (package:release-helper, where it is enabled)")
	require.Contains(t, r.stdout, "/deploy → ops\n")
	r = run(t, dir, env, "rules", "list", "--daemon", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var rules struct {
		Commands    map[string]string
		Entrypoints []struct{ Name, Origin, Agent string }
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rules))
	require.Equal(t, "release-writer", rules.Commands["release-notes"])
	require.Len(t, rules.Entrypoints, 1)
	require.Equal(t, "package:release-helper", rules.Entrypoints[0].Origin)

	// On the console (no repository) it is enabled once it is globally;
	// the command runs its agent with the skill, and the command tool reads
	// the workspace's history inside the sandbox.
	r = run(t, dir, env, "skills", "enable", "release-helper", "--scope", "global")
	require.Equal(t, 0, r.code, r.stderr)
	ws, err := tools.Workspaces{Root: filepath.Join(dir, "data", "workspaces")}.Dir("local:notes")
	require.NoError(t, err)
	gitRepo(t, ws)
	r = run(t, dir, env, "send", "--thread", "notes", "/release-notes")
	require.Equal(t, 0, r.code, r.stderr)
	status, reply := finished(t, dir, env, "notes")
	require.True(t, strings.HasPrefix(status, "✅ release-writer finished"), status)
	require.Contains(t, status, "\n🧩 changelog-draft\n", "the entry point's skill is loaded and shown")
	require.Contains(t, reply, "## Features\n- feat: replies are split on line ends")
	require.Contains(t, reply, "## Fixes\n- fix: the status message keeps its order")
	require.NotContains(t, reply, "chore: first", "the tool ran git in the workspace, since the tag")
}

// A run that loads a skill shows it in its status message, and what the
// skill forbids stays refused, through the daemon and the model's wire.
func TestEnableSkillShowsInTheThreadAndItsRulesHold(t *testing.T) {
	fake := &fakeOpenAI{quick: true, steps: []toolStep{
		{name: "enable_skill", args: `{"name":"release-notes"}`},
		{name: "write_file", args: `{"path":"CHANGELOG.md","content":"x"}`},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	modelConfig(t, dir, srv.URL)
	p := serve(t, dir, freeAddr(t))
	env := p.env()

	r := run(t, dir, env, "send", "--thread", "rn", "@coder write the release notes")
	require.Equal(t, 0, r.code, r.stderr)
	status, reply := finished(t, dir, env, "rn")
	require.Contains(t, status, "\n🧩 release-notes\n", "the activation shows in the status message")
	require.Contains(t, reply, `Loaded "release-notes". From your next turn`)
	require.Contains(t, reply, `refused: denied by skill "release-notes": tool "write_file" is forbidden (forbidden_tools)`)
	matches, err := filepath.Glob(filepath.Join(dir, "data", "workspaces", "*", "CHANGELOG.md"))
	require.NoError(t, err)
	require.Empty(t, matches, "nothing was written")
}

// The builder writes a declarative agent package, installs it once the
// administrator approves through the API, and calls the new agent at its
// next turn, without a restart.
func TestTheBuilderInstallsAnAgentAndCallsIt(t *testing.T) {
	manifest := "name: greeter\nversion: 0.1.0\ndescription: Greets whoever the task names.\n" +
		"agent:\n  integration_mode: tool\n  instructions: prompt.md\n  profile: read-only\n  uses_tools: [list_directory]\n"
	args := func(path, content string) string {
		b, err := json.Marshal(map[string]string{"path": path, "content": content})
		require.NoError(t, err)
		return string(b)
	}
	fake := &fakeOpenAI{quick: true, byAgent: map[string][]toolStep{
		"builder": {
			{name: "write_file", args: args("greeter/manifest.yaml", manifest)},
			{name: "write_file", args: args("greeter/prompt.md", "You greet people by name.\n")},
			{name: "install_package", args: `{"path":"greeter"}`},
			{name: "agent_greeter", args: `{"task":"greet Ana"}`},
		},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	modelConfig(t, dir, srv.URL)
	p := serve(t, dir, freeAddr(t))
	env := p.env()

	r := run(t, dir, env, "send", "--thread", "build", "@builder make an agent that greets people")
	require.Equal(t, 0, r.code, r.stderr)
	var pending []struct{ ID, Tool, Agent string }
	require.Eventually(t, func() bool {
		r := run(t, dir, env, "approvals", "list", "--json")
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &pending) == nil && len(pending) == 1
	}, 30*time.Second, 100*time.Millisecond)
	require.Equal(t, "install_package", pending[0].Tool)
	require.Equal(t, "builder", pending[0].Agent)
	r = run(t, dir, env, "agents", "list", "--json")
	require.NotContains(t, r.stdout, `"greeter"`, "nothing is installed before a person approves")

	r = run(t, dir, env, "approvals", "approve", pending[0].ID)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "approved by admin")
	status, reply := finished(t, dir, env, "build")
	require.True(t, strings.HasPrefix(status, "✅ builder finished"), status)
	require.Contains(t, reply, "Installed package greeter 0.1.0, enabled at global.")
	require.Contains(t, reply, `{"status":"success","content":"The workspace holds: greeter/`, "the new agent answered the builder's call")
	r = run(t, dir, env, "agents", "list", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var list []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	var greeter map[string]any
	for _, a := range list {
		if a["name"] == "greeter" {
			greeter = a
		}
	}
	require.NotNil(t, greeter, "the new agent is listed")
	require.Equal(t, "package:greeter", greeter["source"])
	require.Equal(t, "read-only", greeter["profile"])
}

// The builder installing an agent that cannot run here (a tool that is
// not) is refused with the reason once approved, and nothing is
// installed: it is never told it can call an agent that is left out.
func TestTheBuilderIsRefusedAnAgentThatCannotRun(t *testing.T) {
	manifest := "name: greeter\nversion: 0.1.0\ndescription: Greets whoever the task names.\n" +
		"agent:\n  integration_mode: tool\n  instructions: prompt.md\n  profile: read-only\n  uses_tools: [list_directry]\n"
	args := func(path, content string) string {
		b, err := json.Marshal(map[string]string{"path": path, "content": content})
		require.NoError(t, err)
		return string(b)
	}
	fake := &fakeOpenAI{quick: true, byAgent: map[string][]toolStep{
		"builder": {
			{name: "write_file", args: args("greeter/manifest.yaml", manifest)},
			{name: "write_file", args: args("greeter/prompt.md", "You greet people by name.\n")},
			{name: "install_package", args: `{"path":"greeter"}`},
		},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	modelConfig(t, dir, srv.URL)
	p := serve(t, dir, freeAddr(t))
	env := p.env()

	r := run(t, dir, env, "send", "--thread", "build", "@builder make an agent that greets people")
	require.Equal(t, 0, r.code, r.stderr)
	var pending []struct{ ID string }
	require.Eventually(t, func() bool {
		r := run(t, dir, env, "approvals", "list", "--json")
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &pending) == nil && len(pending) == 1
	}, 30*time.Second, 100*time.Millisecond)
	r = run(t, dir, env, "approvals", "approve", pending[0].ID)
	require.Equal(t, 0, r.code, r.stderr)
	_, reply := finished(t, dir, env, "build")
	require.Contains(t, reply, `package greeter is not installed: agent greeter cannot run with this configuration (manifest.yaml: tools: unknown tool "list_directry")`)
	r = run(t, dir, env, "skills", "packages", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, "greeter", "nothing installed")
	entries, err := os.ReadDir(filepath.Join(dir, "data", "packages"))
	require.NoError(t, err)
	require.Empty(t, entries)
}

// A package whose command tool needs what the profile of the agent that
// would run it lacks is refused when it is enabled, with the reason.
func TestEnablingAPackageItsAgentsCannotRunIsRefused(t *testing.T) {
	dir := t.TempDir()
	p := serve(t, dir, freeAddr(t))
	env := p.env()
	pkg := filepath.Join(t.TempDir(), "tester")
	require.NoError(t, os.MkdirAll(pkg, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(pkg, "manifest.yaml"), []byte(`name: tester
version: 1.0.0
description: Runs the tests.
permissions: [exec]
agents:
  - name: tester
    description: Runs the project's tests and says what failed.
    profile: read-only
    instructions: Run the tests with run_tests and report what failed.
tools:
  - name: run_tests
    description: Run the project's tests.
    command: [make, test]
    permissions: [exec]
`), 0o600))
	r := run(t, dir, env, "skills", "install", pkg)
	require.Equal(t, 0, r.code, r.stderr)

	r = run(t, dir, env, "skills", "enable", "tester", "--scope", "repo:acme/web")
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "package tester cannot be enabled at repo:acme/web: its tool run_tests needs the exec permission, which the profile read-only of agent tester lacks")
	// Installing with --enable is refused the same way.
	r = run(t, dir, env, "skills", "install", pkg, "--enable", "global")
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "package tester cannot be enabled at global: its tool run_tests needs the exec permission")
}
