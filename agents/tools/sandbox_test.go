package tools_test

import (
	"context"
	"encoding/json"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/agents/tools"
)

// confiner confines by profile as agents/policy would, and records who
// asked: "locked" keeps .git/hooks read-only, as a profile without the ci
// permission; "reader" gets a read-only workspace, as a profile without
// write.
type confiner struct {
	mu    sync.Mutex
	asked []string
}

func (c *confiner) Confine(s tools.Scope, workspace string) tools.Confinement {
	c.mu.Lock()
	c.asked = append(c.asked, s.Profile)
	c.mu.Unlock()
	switch s.Profile {
	case "locked":
		return tools.Confinement{ReadOnly: []string{filepath.Join(workspace, ".git", "hooks")}}
	case "reader":
		return tools.Confinement{WorkspaceReadOnly: true}
	}
	return tools.Confinement{}
}

// requireBwrap skips only where bubblewrap cannot run at all.
func requireBwrap(t *testing.T) {
	t.Helper()
	if out, err := osexec.Command("bwrap", "--ro-bind", "/", "/", "true").CombinedOutput(); err != nil {
		t.Skipf("bubblewrap cannot run on this machine (bwrap --ro-bind / / true: %v %s); install it (apt-get install bubblewrap) to test sandboxed bash", err, strings.TrimSpace(string(out)))
	}
}

// sandboxed returns a registry whose bash runs under a real bubblewrap
// sandbox, confined by a confiner that records who asked.
func sandboxed(t *testing.T, timeout time.Duration) (*tools.Registry, *confiner) {
	t.Helper()
	requireBwrap(t)
	sb, err := sandbox.New(context.Background(), sandbox.Options{MaxProcesses: 64, CPUTime: 30 * time.Second})
	require.NoError(t, err)
	conf := &confiner{}
	r, err := tools.NewRegistry(tools.Core(tools.CoreOptions{BashTimeout: timeout, Sandbox: sb, Confiner: conf})...)
	require.NoError(t, err)
	return r, conf
}

// runAs runs command through a toolset of an agent with profile, which is
// where a call's profile comes from.
func runAs(r *tools.Registry, ws, profile, command string) tools.Result {
	input, _ := json.Marshal(map[string]string{"command": command})
	ts := tools.NewToolset(r, tools.Scope{Agent: "coder", Profile: profile}, tools.ToolsetOptions{})
	return ts.Execute(context.Background(), tools.CallContext{Workspace: ws}, "bash", input)
}

func TestSandboxedBashWritesOnlyTheWorkspace(t *testing.T) {
	r, conf := sandboxed(t, 30*time.Second)
	ws, outside := workspace(t), t.TempDir()

	res := runAs(r, ws, "", "echo hello > inside.txt && mkdir -p a/b && touch a/b/c && cat inside.txt")
	require.False(t, res.IsError, res.Output)
	require.Equal(t, "hello\n", res.Output)
	data, err := os.ReadFile(filepath.Join(ws, "inside.txt"))
	require.NoError(t, err)
	require.Equal(t, "hello\n", string(data))
	require.FileExists(t, filepath.Join(ws, "a", "b", "c"))

	for _, command := range []string{
		"echo x > " + filepath.Join(outside, "escaped.txt"),
		"touch /etc/switchyard-tools-sandbox-test",
		"cp inside.txt " + filepath.Join(outside, "copied.txt"),
	} {
		res := runAs(r, ws, "", command)
		require.True(t, res.IsError, "%s succeeded: %s", command, res.Output)
	}
	require.NoFileExists(t, filepath.Join(outside, "escaped.txt"))
	require.NoFileExists(t, filepath.Join(outside, "copied.txt"))
	require.NoFileExists(t, "/etc/switchyard-tools-sandbox-test")

	// The profile's read-only paths hold inside the workspace too.
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o750))
	res = runAs(r, ws, "locked", "echo evil > .git/hooks/pre-commit")
	require.True(t, res.IsError, res.Output)
	require.NoFileExists(t, filepath.Join(ws, ".git", "hooks", "pre-commit"))
	res = runAs(r, ws, "open", "echo fine > .git/hooks/pre-commit")
	require.False(t, res.IsError, res.Output)
	require.FileExists(t, filepath.Join(ws, ".git", "hooks", "pre-commit"))

	require.Contains(t, conf.asked, "locked")
}

func TestSandboxedBashOfAReaderCannotWrite(t *testing.T) {
	r, _ := sandboxed(t, 30*time.Second)
	ws := workspace(t)
	require.NoError(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("mine\n"), 0o644))
	res := runAs(r, ws, "reader", "cat notes.txt")
	require.False(t, res.IsError, res.Output)
	require.Equal(t, "mine\n", res.Output)
	for _, command := range []string{"touch x", "echo y >> notes.txt", "rm notes.txt"} {
		res := runAs(r, ws, "reader", command)
		require.True(t, res.IsError, "%s: %s", command, res.Output)
	}
	require.NoFileExists(t, filepath.Join(ws, "x"))
	data, err := os.ReadFile(filepath.Join(ws, "notes.txt"))
	require.NoError(t, err)
	require.Equal(t, "mine\n", string(data))
}

func TestSandboxedBashGetsACleanEnvironment(t *testing.T) {
	r, _ := sandboxed(t, 30*time.Second)
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-api03-daemon-secret")
	t.Setenv("SWITCHYARD_API_TOKEN", "daemon-token")
	ws := workspace(t)
	res := runAs(r, ws, "", "env | sort; echo; cat /proc/*/environ | tr '\\0' '\\n'")
	require.False(t, res.IsError, res.Output)
	require.NotContains(t, res.Output, "ANTHROPIC_API_KEY")
	require.NotContains(t, res.Output, "daemon-secret")
	require.NotContains(t, res.Output, "SWITCHYARD_API_TOKEN")
	real, err := filepath.EvalSymlinks(ws)
	require.NoError(t, err)
	require.NotContains(t, res.Output, "HOME="+real+"\n", "the home is never the workspace")
	require.Contains(t, res.Output, "HOME="+sandbox.Home+"\n")
	require.Contains(t, res.Output, "LANG=C.UTF-8\n")
}

func TestBashIsRefusedWithoutASandbox(t *testing.T) {
	ctx := context.Background()
	missing, err := sandbox.New(ctx, sandbox.Options{Bwrap: "/nonexistent/bwrap"})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		sb   tools.CommandSandbox
		want string
	}{
		{"bubblewrap missing", missing, "refused: bash cannot run: commands run only inside the sandbox (sandbox.mode: required), and bubblewrap cannot run here: " +
			"/nonexistent/bwrap was not found. Install bubblewrap (Debian and Ubuntu: apt-get install bubblewrap; it needs unprivileged user namespaces), " +
			"or set sandbox.mode: none in the config to run commands without a sandbox and accept the risk"},
		{"no sandbox at all", nil, "refused: bash cannot run: no sandbox is configured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tools.NewRegistry(tools.Core(tools.CoreOptions{Sandbox: tc.sb})...)
			require.NoError(t, err)
			ws := workspace(t)
			res := runAs(r, ws, "", "touch ran")
			require.True(t, res.Refused)
			require.Equal(t, tc.want, res.Output)
			require.NoFileExists(t, filepath.Join(ws, "ran"))

			// Every other tool works.
			ts := tools.NewToolset(r, tools.Scope{Agent: "coder"}, tools.ToolsetOptions{})
			res = ts.Execute(ctx, tools.CallContext{Workspace: ws}, "write_file", json.RawMessage(`{"path":"a.txt","content":"x"}`))
			require.False(t, res.IsError, res.Output)
			res = ts.Execute(ctx, tools.CallContext{Workspace: ws}, "read_file", json.RawMessage(`{"path":"a.txt"}`))
			require.Equal(t, "x", res.Output)
		})
	}
}

func TestCommandToolsRunInTheSandbox(t *testing.T) {
	requireBwrap(t)
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-api03-daemon-secret")
	hidden := t.TempDir()
	pkg := filepath.Join(hidden, "packages", "lint")
	require.NoError(t, os.MkdirAll(pkg, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(pkg, "lint.sh"), []byte("#!/bin/sh\nset -e\ncat > input.json\nenv\n"), 0o755))
	sb, err := sandbox.New(context.Background(), sandbox.Options{Hide: []string{hidden}})
	require.NoError(t, err)
	lint, err := tools.NewCommand(tools.CommandSpec{
		Name: "lint", Package: "lint", Dir: pkg, Command: "./lint.sh",
		Permissions: []tools.Permission{tools.PermExec}, Sandbox: sb, Confiner: &confiner{},
	})
	require.NoError(t, err)
	r := registry(t, lint)
	ws := workspace(t)
	call := func(profile string) tools.Result {
		ts := tools.NewToolset(r, tools.Scope{Agent: "linter", Profile: profile, Tools: []string{"lint"}}, tools.ToolsetOptions{})
		return ts.Execute(context.Background(), tools.CallContext{Workspace: ws, Scope: tools.Scope{Agent: "linter"}}, "lint", json.RawMessage(`{"path":"."}`))
	}
	res := call("")
	require.False(t, res.IsError, res.Output)
	require.Contains(t, res.Output, "SWITCHYARD_AGENT=linter")
	require.NotContains(t, res.Output, "daemon-secret")
	data, err := os.ReadFile(filepath.Join(ws, "input.json"))
	require.NoError(t, err)
	require.JSONEq(t, `{"path":"."}`, string(data))

	require.NoError(t, os.Remove(filepath.Join(ws, "input.json")))
	res = call("reader")
	require.True(t, res.IsError, "a reader's command tool cannot write the workspace: %s", res.Output)
	require.NoFileExists(t, filepath.Join(ws, "input.json"))

	missing, err := sandbox.New(context.Background(), sandbox.Options{Bwrap: "/nonexistent/bwrap"})
	require.NoError(t, err)
	refused, err := tools.NewCommand(tools.CommandSpec{
		Name: "lint2", Dir: pkg, Command: "./lint.sh", Permissions: []tools.Permission{tools.PermExec}, Sandbox: missing,
	})
	require.NoError(t, err)
	res = tools.NewToolset(registry(t, refused), tools.Scope{Agent: "linter", Tools: []string{"lint2"}}, tools.ToolsetOptions{}).
		Execute(context.Background(), tools.CallContext{Workspace: ws}, "lint2", json.RawMessage(`{}`))
	require.True(t, res.Refused)
	require.Contains(t, res.Output, "refused: lint2 cannot run: commands run only inside the sandbox")
}

func TestSandboxedBashNoNetworkUnlessAllowed(t *testing.T) {
	r, _ := sandboxed(t, 30*time.Second)
	ws := workspace(t)
	res := runAs(r, ws, "", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
	require.False(t, res.IsError, res.Output)
	require.Equal(t, "lo\n", res.Output, "only the loopback interface exists inside the sandbox")
}

func TestSandboxedBashTimeoutKillsEverything(t *testing.T) {
	r, _ := sandboxed(t, 500*time.Millisecond)
	ws := workspace(t)
	marker := "switchyard-sandbox-timeout-" + filepath.Base(t.TempDir())
	start := time.Now()
	res := runAs(r, ws, "",
		"(exec -a "+marker+" sleep 30) & exec -a "+marker+" sleep 30")
	require.True(t, res.IsError)
	require.Contains(t, res.Output, "timed out after 500ms and was killed")
	require.Less(t, time.Since(start), 15*time.Second)
	require.Eventually(t, func() bool { return !processRunning(marker) }, 10*time.Second, 50*time.Millisecond,
		"a process the command started outlived its timeout")
}

// processRunning reports whether any process's command line starts with
// name; processes inside the sandbox's PID namespace are visible from the
// host's /proc.
func processRunning(name string) bool {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range dirs {
		data, err := os.ReadFile(p)
		if err == nil && strings.HasPrefix(string(data), name+"\x00") {
			return true
		}
	}
	return false
}
