package tools_test

import (
	"context"
	"encoding/json"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/agents/tools"
)

// sandboxed returns a registry whose bash runs under a real bubblewrap
// sandbox, skipping only where bubblewrap cannot run at all. The profile
// "locked" keeps .git/hooks read-only, as a profile without the ci
// permission would.
func sandboxed(t *testing.T, timeout time.Duration) (*tools.Registry, *[]string) {
	t.Helper()
	if out, err := osexec.Command("bwrap", "--ro-bind", "/", "/", "true").CombinedOutput(); err != nil {
		t.Skipf("bubblewrap cannot run on this machine (bwrap --ro-bind / / true: %v %s); install it (apt-get install bubblewrap) to test sandboxed bash", err, strings.TrimSpace(string(out)))
	}
	sb, err := sandbox.New(context.Background(), sandbox.Options{Require: true, MaxProcesses: 64, CPUTime: 30 * time.Second})
	require.NoError(t, err)
	var asked []string
	r, err := tools.NewRegistry(tools.Core(tools.CoreOptions{
		BashTimeout: timeout,
		Sandbox:     sb,
		Network:     func(profile string) bool { asked = append(asked, "network:"+profile); return false },
		ReadOnly: func(profile, workspace string) []string {
			asked = append(asked, "readonly:"+profile)
			if profile == "locked" {
				return []string{filepath.Join(workspace, ".git", "hooks")}
			}
			return nil
		},
	})...)
	require.NoError(t, err)
	return r, &asked
}

// runAs runs command through a toolset of an agent with profile, which is
// where a call's profile comes from.
func runAs(r *tools.Registry, ws, profile, command string) tools.Result {
	input, _ := json.Marshal(map[string]string{"command": command})
	ts := tools.NewToolset(r, tools.Scope{Agent: "coder", Profile: profile}, tools.ToolsetOptions{})
	return ts.Execute(context.Background(), tools.CallContext{Workspace: ws}, "bash", input)
}

func TestSandboxedBashWritesOnlyTheWorkspace(t *testing.T) {
	r, asked := sandboxed(t, 30*time.Second)
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

	require.Contains(t, *asked, "network:locked")
	require.Contains(t, *asked, "readonly:locked")
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
