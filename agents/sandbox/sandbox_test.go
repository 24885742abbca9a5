package sandbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
	s, err := sandbox.New(context.Background(), sandbox.Options{MaxProcesses: 64, CPUTime: 30 * time.Second})
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
	s, err := sandbox.New(context.Background(), sandbox.Options{Hide: []string{data, "/nonexistent-switchyard"}})
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

// A masked file reads empty by every route, cannot be written, and the
// rest of the workspace is as it was; a masked path outside the workspace
// is refused.
func TestSandboxMasksFiles(t *testing.T) {
	s := requireBwrap(t)
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".env"), []byte("TOKEN=planted-secret-value\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("TOKEN in notes\n"), 0o644))
	spec := sandbox.Spec{Workspace: ws, Masked: []string{filepath.Join(ws, ".env"), filepath.Join(ws, "missing.pem")}}
	for _, script := range []string{"cat .env", "grep -r TOKEN .", "find . -name .env -exec cat {} +", "base64 .env", "cp .env x && cat x"} {
		spec.Script = script
		out, _ := run(t, s, spec)
		require.NotContains(t, out, "planted-secret-value", script)
	}
	spec.Script = "grep -r TOKEN ."
	out, err := run(t, s, spec)
	require.NoError(t, err, out)
	require.Contains(t, out, "TOKEN in notes")
	spec.Script = "echo changed > .env"
	out, err = run(t, s, spec)
	require.Error(t, err, out)
	b, err := os.ReadFile(filepath.Join(ws, ".env"))
	require.NoError(t, err)
	require.Equal(t, "TOKEN=planted-secret-value\n", string(b))

	_, err = s.CommandSpec(context.Background(), sandbox.Spec{Workspace: ws, Script: "true", Masked: []string{"/etc/passwd"}})
	require.Error(t, err)
}

func TestSandboxStopsWithItsContext(t *testing.T) {
	s := requireBwrap(t)
	ws := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cmd, err := s.CommandSpec(ctx, sandbox.Spec{Workspace: ws, Script: "sleep 60"})
	require.NoError(t, err)
	start := time.Now()
	err = cmd.Run()
	require.Error(t, err)
	require.Less(t, time.Since(start), 30*time.Second)
}

// logged records what a sandbox logs.
type logged struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logged) Enabled(context.Context, slog.Level) bool { return true }
func (l *logged) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r)
	return nil
}
func (l *logged) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logged) WithGroup(string) slog.Handler      { return l }

func (l *logged) only(t *testing.T) slog.Record {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Len(t, l.records, 1)
	return l.records[0]
}

func TestWithoutBubblewrapCommandsAreRefused(t *testing.T) {
	ctx := context.Background()
	log := &logged{}
	s, err := sandbox.New(ctx, sandbox.Options{Bwrap: "/nonexistent/bwrap", Logger: slog.New(log)})
	require.NoError(t, err, "a missing bubblewrap does not stop the daemon")
	ok, reason := s.Available()
	require.False(t, ok)
	require.Equal(t, "/nonexistent/bwrap was not found", reason)
	rec := log.only(t)
	require.Equal(t, slog.LevelError, rec.Level, "the start-up log says so at ERROR")
	require.Contains(t, rec.Message, "bash and command tools are refused")

	ws := t.TempDir()
	for _, spec := range []sandbox.Spec{
		{Workspace: ws, Script: "touch here"},
		{Workspace: ws, Argv: []string{"touch", "here"}},
	} {
		_, _, err = s.Argv(spec)
		var unavailable *sandbox.UnavailableError
		require.ErrorAs(t, err, &unavailable)
		require.Equal(t, "commands run only inside the sandbox (sandbox.mode: required), and bubblewrap cannot run here: "+
			"/nonexistent/bwrap was not found. Install bubblewrap (Debian and Ubuntu: apt-get install bubblewrap; it needs unprivileged user namespaces), "+
			"or set sandbox.mode: none in the config to run commands without a sandbox and accept the risk", err.Error())
	}
	require.NoFileExists(t, filepath.Join(ws, "here"))
	require.Contains(t, s.String(), "commands refused")

	// Without bwrap in PATH the reason names PATH.
	t.Setenv("PATH", t.TempDir())
	s, err = sandbox.New(ctx, sandbox.Options{})
	require.NoError(t, err)
	_, reason = s.Available()
	require.Equal(t, "bwrap was not found in PATH", reason)

	_, err = sandbox.New(ctx, sandbox.Options{Mode: "sometimes"})
	require.EqualError(t, err, `sandbox mode "sometimes": want required or none`)
}

func TestModeNoneRunsPlainWithLimitsAndWarns(t *testing.T) {
	ctx := context.Background()
	log := &logged{}
	s, err := sandbox.New(ctx, sandbox.Options{Mode: sandbox.ModeNone, MaxProcesses: 32, CPUTime: 90 * time.Second, Logger: slog.New(log)})
	require.NoError(t, err)
	rec := log.only(t)
	require.Equal(t, slog.LevelWarn, rec.Level, "none warns at every start")
	require.Contains(t, rec.Message, "sandbox.mode is none")
	ok, reason := s.Available()
	require.False(t, ok)
	require.Equal(t, "sandbox.mode is none", reason)
	require.Equal(t, sandbox.ModeNone, s.Mode())
	require.Contains(t, s.String(), "plain processes")

	ws := t.TempDir()
	out, err := run(t, s, sandbox.Spec{Workspace: ws, Script: `ulimit -u; ulimit -t; echo "$0" > here; printf '%s' "$1"`})
	require.NoError(t, err, out)
	lines := strings.Fields(out)
	require.Equal(t, []string{"32", "90"}, lines[:2])
	require.FileExists(t, filepath.Join(ws, "here"))

	out, err = run(t, s, sandbox.Spec{Workspace: ws, Argv: []string{"bash", "-c", `ulimit -u; echo "$1"`, "bash", "an argument"}})
	require.NoError(t, err, out)
	require.Equal(t, "32\nan argument\n", out, "a program runs with its arguments, under the limits")

	_, _, err = s.Argv(sandbox.Spec{Workspace: ws})
	require.Error(t, err)
	_, _, err = s.Argv(sandbox.Spec{Workspace: ws, Script: "true", Argv: []string{"true"}})
	require.Error(t, err)
}

func TestSandboxReadOnlyWorkspaceRefusesWritesAtTheOS(t *testing.T) {
	s := requireBwrap(t)
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "README.md"), []byte("read me\n"), 0o644))
	spec := sandbox.Spec{Workspace: ws, WorkspaceReadOnly: true}

	spec.Script = "cat README.md"
	out, err := run(t, s, spec)
	require.NoError(t, err, out)
	require.Equal(t, "read me\n", out)

	for _, script := range []string{"touch x", "echo changed > README.md", "rm README.md", "mkdir d", "mv README.md r"} {
		spec.Script = script
		out, err := run(t, s, spec)
		require.Error(t, err, "%s succeeded in a read-only workspace: %s", script, out)
	}
	require.NoFileExists(t, filepath.Join(ws, "x"))
	data, err := os.ReadFile(filepath.Join(ws, "README.md"))
	require.NoError(t, err)
	require.Equal(t, "read me\n", string(data))

	spec.Script = "echo scratch > /tmp/s && cat /tmp/s"
	out, err = run(t, s, spec)
	require.NoError(t, err, out)
	require.Equal(t, "scratch\n", out, "private /tmp stays writable")
}

func TestSandboxKeepsTheDaemonOutOfSight(t *testing.T) {
	requireBwrap(t)
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-api03-fake-key-of-the-daemon")
	root := t.TempDir()
	data := filepath.Join(root, "data")
	ws := filepath.Join(data, "workspaces", "t1")
	require.NoError(t, os.MkdirAll(ws, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(data, "api-token"), []byte("token-of-the-daemon"), 0o600))
	cfg := filepath.Join(root, "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("models: {default: {api_key: sk-from-config}}\n"), 0o600))
	pkg := filepath.Join(data, "packages", "lint")
	require.NoError(t, os.MkdirAll(pkg, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(pkg, "run.sh"), []byte("#!/bin/sh\necho linted\n"), 0o755))
	s, err := sandbox.New(context.Background(), sandbox.Options{Hide: []string{data, cfg}})
	require.NoError(t, err)

	for _, script := range []string{
		"cat " + filepath.Join(data, "api-token"),
		"cat " + cfg,
		"ls " + filepath.Join(data, "packages"),
	} {
		out, err := run(t, s, sandbox.Spec{Workspace: ws, Script: script})
		require.Error(t, err, "%s: %s", script, out)
		require.NotContains(t, out, "token-of-the-daemon")
		require.NotContains(t, out, "sk-from-config")
	}

	// The command sees the environment it is given, and no process of the
	// host: its /proc is its own, so the daemon's environ and command line
	// are out of reach.
	out, err := run(t, s, sandbox.Spec{Workspace: ws, Script: "env; cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr '\\0' '\\n'; ls /proc | grep -c '^[0-9]'"})
	require.NoError(t, err, out)
	require.NotContains(t, out, "ANTHROPIC_API_KEY")
	require.NotContains(t, out, "sk-ant-api03")
	require.NotContains(t, out, filepath.Base(os.Args[0]), "the test binary's command line")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	procs, err := strconv.Atoi(lines[len(lines)-1])
	require.NoError(t, err, out)
	require.Less(t, procs, 10, "only the sandbox's own processes: %s", out)

	// A command tool's package directory is exposed although it lies in
	// the hidden data directory.
	out, err = run(t, s, sandbox.Spec{Workspace: ws, Argv: []string{filepath.Join(pkg, "run.sh")}, Expose: []string{pkg}})
	require.NoError(t, err, out)
	require.Equal(t, "linted\n", out)
}

func TestSandboxHidesWhereCredentialsLive(t *testing.T) {
	require.Equal(t, []string{"/run/secrets", "/var/run/secrets", "/run/credentials", "/run/user"}, sandbox.DefaultHidden())
	s := requireBwrap(t)
	ws := t.TempDir()
	dir := fmt.Sprintf("/run/user/%d", os.Getuid())
	if _, err := os.Stat(dir); err != nil {
		t.Logf("%s does not exist here; only its absence is checked", dir)
	}
	out, err := run(t, s, sandbox.Spec{Workspace: ws, Script: "ls -A /run/user /run/secrets /var/run/secrets /run/credentials 2>/dev/null | grep -v ':$' | grep -c . || true"})
	require.NoError(t, err, out)
	require.Equal(t, "0\n", out, "nothing of the host's runtime directories or secrets is visible")
}

// hostileCheckout makes a workspace as a repository an attacker wrote
// would check out: start-up files that make programs run commands, and a
// bare repository committed into it whose config runs a program on every
// diff. Each of them would touch a file named pwned-… in the workspace.
func hostileCheckout(t *testing.T) string {
	t.Helper()
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=a", "-c", "user.email=a@example.com", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	}
	ws, src := t.TempDir(), t.TempDir()
	real, err := filepath.EvalSymlinks(ws)
	require.NoError(t, err)
	git(src, "init", "-q")
	require.NoError(t, os.WriteFile(filepath.Join(src, "f"), []byte("a\n"), 0o644))
	git(src, "add", "f")
	git(src, "commit", "-qm", "one")
	require.NoError(t, os.WriteFile(filepath.Join(src, "f"), []byte("b\n"), 0o644))
	git(src, "commit", "-qam", "two")
	git(ws, "clone", "-q", "--bare", src, "vendor.git")
	git(filepath.Join(ws, "vendor.git"), "config", "diff.external", "touch "+real+"/pwned-bare")
	git(filepath.Join(ws, "vendor.git"), "config", "core.fsmonitor", "touch "+real+"/pwned-fsmonitor")
	files := map[string]string{
		".gitconfig":         "[alias]\n\tst = !touch " + real + "/pwned-alias\n[diff]\n\texternal = touch " + real + "/pwned-home-diff\n",
		".config/git/config": "[alias]\n\tlg = !touch " + real + "/pwned-xdg\n",
		".bashrc":            "touch " + real + "/pwned-bashrc\n",
		".curlrc":            "output = " + real + "/pwned-curlrc\n",
		"README.md":          "read me\n",
	}
	for name, content := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644))
	}
	git(ws, "init", "-q")
	git(ws, "add", "-A")
	git(ws, "commit", "-qm", "checkout")
	require.NoError(t, os.WriteFile(filepath.Join(ws, "README.md"), []byte("changed\n"), 0o644))
	return ws
}

// TestRepositoryContentConfiguresNoProgram runs, in a workspace an
// attacker's repository filled, the commands its files would hijack if the
// workspace were the home or git used a bare repository it came upon: the
// home is the sandbox's own and git refuses such a repository, so nothing
// runs.
func TestRepositoryContentConfiguresNoProgram(t *testing.T) {
	requireBwrap(t)
	ws := hostileCheckout(t)
	none, err := sandbox.New(context.Background(), sandbox.Options{Mode: sandbox.ModeNone})
	require.NoError(t, err)
	bwrap, err := sandbox.New(context.Background(), sandbox.Options{})
	require.NoError(t, err)
	for name, s := range map[string]*sandbox.Sandbox{"bubblewrap": bwrap, "none": none} {
		for _, script := range []string{
			"git diff; git st; git lg; git status",
			"git -C vendor.git diff HEAD~1 HEAD; cd vendor.git && git log -p -1 && git diff HEAD~1 HEAD",
			"bash -i -c true </dev/null; curl --version >/dev/null",
		} {
			out, _ := run(t, s, sandbox.Spec{Workspace: ws, Script: script})
			matches, err := filepath.Glob(filepath.Join(ws, "pwned-*"))
			require.NoError(t, err)
			require.Empty(t, matches, "%s: %s ran what the repository configured: %s", name, script, out)
		}
		out, err := run(t, s, sandbox.Spec{Workspace: ws, Script: `echo "$HOME"; git config --get safe.bareRepository; git config --show-scope --get-regexp 'alias\..*' || echo no-alias`})
		require.NoError(t, err, out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		real, _ := filepath.EvalSymlinks(ws)
		require.NotEqual(t, real, lines[0], "%s: the home is not the workspace", name)
		require.Equal(t, []string{"explicit", "no-alias"}, lines[1:], name)
		if name == "bubblewrap" {
			require.Equal(t, sandbox.Home, lines[0])
		}
	}
	// Named explicitly, the bare repository is still a repository.
	out, err := run(t, bwrap, sandbox.Spec{Workspace: ws, Script: "git --git-dir=vendor.git log --oneline | wc -l"})
	require.NoError(t, err, out)
	require.Equal(t, "2\n", out)
}

// TestCommandsInheritNoDescriptor opens a descriptor as a supervisor would
// leave one to the daemon, without close-on-exec: no command sees it.
func TestCommandsInheritNoDescriptor(t *testing.T) {
	requireBwrap(t)
	fd, err := syscall.Open(filepath.Join(t.TempDir(), "leaked"), syscall.O_CREAT|syscall.O_RDWR, 0o600)
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Close(fd) })
	for _, mode := range []sandbox.Mode{sandbox.ModeRequired, sandbox.ModeNone} {
		s, err := sandbox.New(context.Background(), sandbox.Options{Mode: mode})
		require.NoError(t, err)
		out, err := run(t, s, sandbox.Spec{Workspace: t.TempDir(), Script: "ls /proc/self/fd"})
		require.NoError(t, err, out)
		require.NotContains(t, strings.Fields(out), strconv.Itoa(fd), "%s: descriptor %d reached the command", mode, fd)
	}
}
