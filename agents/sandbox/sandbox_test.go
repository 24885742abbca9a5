package sandbox_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/sandbox"
)

// requireBwrap skips the test only where bubblewrap cannot run at all,
// which is decided by running it.
func requireBwrap(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	if out, err := exec.Command("bwrap", "--ro-bind", "/", "/", "true").CombinedOutput(); err != nil {
		t.Skipf("bubblewrap cannot run on this machine (bwrap --ro-bind / / true: %v %s); install it (apt-get install bubblewrap) to test the sandbox", err, strings.TrimSpace(string(out)))
	}
	s, err := sandbox.New(context.Background(), sandbox.Options{Require: true, MaxProcesses: 64, CPUTime: 30 * time.Second})
	require.NoError(t, err)
	ok, reason := s.Available()
	require.True(t, ok, reason)
	return s
}

// run runs script in ws and returns its output and error.
func run(t *testing.T, s *sandbox.Sandbox, spec sandbox.Spec) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, err := s.CommandSpec(ctx, spec)
	require.NoError(t, err)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + spec.Workspace, "LANG=C.UTF-8"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestSandboxWritesOnlyTheWorkspace(t *testing.T) {
	s := requireBwrap(t)
	ws, outside := t.TempDir(), t.TempDir()

	out, err := run(t, s, sandbox.Spec{Workspace: ws, Script: "echo hello > inside.txt && mkdir -p a/b && touch a/b/c && pwd"})
	require.NoError(t, err, out)
	real, _ := filepath.EvalSymlinks(ws)
	require.Equal(t, real, strings.TrimSpace(out), "the command runs in the workspace")
	data, err := os.ReadFile(filepath.Join(ws, "inside.txt"))
	require.NoError(t, err)
	require.Equal(t, "hello\n", string(data))

	for _, script := range []string{
		"echo x > " + filepath.Join(outside, "escaped.txt"),
		"touch /etc/switchyard-sandbox-test",
		"mkdir /switchyard-sandbox-test",
		"mount -o remount,rw / && touch /etc/switchyard-sandbox-test",
	} {
		out, err := run(t, s, sandbox.Spec{Workspace: ws, Script: script})
		require.Error(t, err, "%s succeeded: %s", script, out)
	}
	// The workspace's parent under /tmp is the sandbox's private /tmp: a
	// write there may succeed, but never reaches the host.
	_, _ = run(t, s, sandbox.Spec{Workspace: ws, Script: "cp inside.txt ../escaped.txt"})
	_, err = os.Stat(filepath.Join(outside, "escaped.txt"))
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = os.Stat("/etc/switchyard-sandbox-test")
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = os.Stat(filepath.Join(filepath.Dir(real), "escaped.txt"))
	require.ErrorIs(t, err, os.ErrNotExist)

	// /tmp is private: what a command leaves there is gone for the next one
	// and never reaches the host.
	_, err = run(t, s, sandbox.Spec{Workspace: ws, Script: "echo x > /tmp/switchyard-sandbox-tmp"})
	require.NoError(t, err)
	_, err = os.Stat("/tmp/switchyard-sandbox-tmp")
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestSandboxReachesTheNetworkOnlyWhenAllowed(t *testing.T) {
	s := requireBwrap(t)
	ws := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan struct{}, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			_ = c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	script := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && echo connected", port)

	out, err := run(t, s, sandbox.Spec{Workspace: ws, Script: script})
	require.Error(t, err, "connected without the network: %s", out)
	require.NotContains(t, out, "connected")
	select {
	case <-accepted:
		t.Fatal("the listener accepted a connection from a sandbox without the network")
	default:
	}

	out, err = run(t, s, sandbox.Spec{Workspace: ws, Script: script, Network: true})
	require.NoError(t, err, out)
	require.Contains(t, out, "connected")
	require.Eventually(t, func() bool {
		select {
		case <-accepted:
			return true
		default:
			return false
		}
	}, 10*time.Second, 10*time.Millisecond)
}

func TestSandboxLimitsBindTheCommand(t *testing.T) {
	s := requireBwrap(t)
	ws := t.TempDir()
	out, err := run(t, s, sandbox.Spec{Workspace: ws, Script: "ulimit -u; ulimit -t; ulimit -Hu; ulimit -u 100000 || echo cannot-raise"})
	require.NoError(t, err, out)
	lines := strings.Fields(out)
	require.GreaterOrEqual(t, len(lines), 3, out)
	// Where the hard limit was already lower, that one applies.
	require.Contains(t, []string{"64"}, lines[0], out)
	require.Equal(t, "30", lines[1])
	if os.Geteuid() != 0 {
		require.Contains(t, out, "cannot-raise")
	}
}

func TestSandboxHidesAndProtects(t *testing.T) {
	data := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(data, "switchyard.db"), []byte("secret"), 0o600))
	ws := filepath.Join(data, "workspaces", "t1")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755))
	requireBwrap(t)
	s, err := sandbox.New(context.Background(), sandbox.Options{Require: true, Hide: []string{data, "/nonexistent-switchyard"}})
	require.NoError(t, err)

	out, err := run(t, s, sandbox.Spec{Workspace: ws, Script: "cat " + filepath.Join(data, "switchyard.db")})
	require.Error(t, err, out)
	require.NotContains(t, out, "secret")

	// The workspace inside the hidden directory is still there and
	// writable, except for what is bound read-only.
	spec := sandbox.Spec{Workspace: ws, ReadOnly: []string{".git/hooks", ".github/workflows"}}
	spec.Script = "touch ok"
	out, err = run(t, s, spec)
	require.NoError(t, err, out)
	require.FileExists(t, filepath.Join(ws, "ok"))
	spec.Script = "touch .git/hooks/pre-commit"
	out, err = run(t, s, spec)
	require.Error(t, err, out)
	require.NoFileExists(t, filepath.Join(ws, ".git", "hooks", "pre-commit"))

	_, err = s.CommandSpec(context.Background(), sandbox.Spec{Workspace: ws, Script: "true", ReadOnly: []string{"/etc"}})
	require.Error(t, err)
}

func TestSandboxStopsWithItsContext(t *testing.T) {
	s := requireBwrap(t)
	ws := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cmd, err := s.Command(ctx, ws, "sleep 60", false)
	require.NoError(t, err)
	start := time.Now()
	err = cmd.Run()
	require.Error(t, err)
	require.Less(t, time.Since(start), 30*time.Second)
}

func TestWithoutBubblewrapCommandsRunPlainWithLimits(t *testing.T) {
	ctx := context.Background()
	_, err := sandbox.New(ctx, sandbox.Options{Bwrap: "/nonexistent/bwrap", Require: true})
	require.ErrorContains(t, err, "not found")

	s, err := sandbox.New(ctx, sandbox.Options{Bwrap: "/nonexistent/bwrap", MaxProcesses: 32, CPUTime: 90 * time.Second})
	require.NoError(t, err)
	ok, reason := s.Available()
	require.False(t, ok)
	require.Contains(t, reason, "install bubblewrap")
	require.Contains(t, s.String(), "plain process")

	ws := t.TempDir()
	out, err := run(t, s, sandbox.Spec{Workspace: ws, Script: `ulimit -u; ulimit -t; echo "$0" > here; printf '%s' "$1"`})
	require.NoError(t, err, out)
	lines := strings.Fields(out)
	require.Equal(t, []string{"32", "90"}, lines[:2])
	require.FileExists(t, filepath.Join(ws, "here"))

	disabled, err := sandbox.New(ctx, sandbox.Options{Disable: true})
	require.NoError(t, err)
	ok, reason = disabled.Available()
	require.False(t, ok)
	require.Contains(t, reason, "disabled")
}
