package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Defaults of Options.
const (
	DefaultMaxProcesses = 256
	DefaultCPUTime      = 10 * time.Minute
	probeTimeout        = 10 * time.Second
)

// Options configure a Sandbox. The zero value runs bash under bubblewrap
// where it works, with the default limits.
type Options struct {
	// Bwrap is the bubblewrap program; "" looks up "bwrap" in PATH.
	Bwrap string
	// Disable runs plain processes even where bubblewrap works.
	Disable bool
	// Require makes New fail where bubblewrap cannot run, for deployments
	// that must not run agents' commands without it.
	Require bool
	// Shell runs the scripts; "" means "bash".
	Shell string
	// MaxProcesses is each command's process limit (RLIMIT_NPROC).
	// Linux does not apply it to root outside a user namespace, so run
	// the daemon as an unprivileged user.
	MaxProcesses int
	// CPUTime is each command's CPU time limit (RLIMIT_CPU), rounded up to
	// seconds. Wall-clock time is the caller's: the context it passes.
	CPUTime time.Duration
	// MaxFileSize caps every file a command writes (RLIMIT_FSIZE), in
	// bytes; 0 leaves it unlimited.
	MaxFileSize int64
	// Hide are paths the sandbox replaces with empty ones: the daemon's
	// data directory, its config file, its home. The workspace stays
	// visible even inside a hidden directory. Paths that do not exist are
	// skipped.
	Hide   []string
	Logger *slog.Logger
}

// Spec is one command to run.
type Spec struct {
	// Workspace is the directory the command runs in and the only one it
	// may write.
	Workspace string
	Script    string
	// Network shares the host's network; otherwise the command has only a
	// loopback of its own.
	Network bool
	// ReadOnly are paths inside the workspace the command may read but
	// not change, such as .git/hooks for a profile without the ci
	// permission. Paths that do not exist are skipped.
	ReadOnly []string
}

// Sandbox builds the commands bash runs: inside bubblewrap where it works
// (no network unless allowed, the system read-only, only the workspace
// writable, private /tmp, /dev and /proc, no capabilities), otherwise as a
// plain process. Either way the process, CPU time and file size limits
// apply. It is safe for concurrent use.
type Sandbox struct {
	opts   Options
	bwrap  string
	ok     bool
	reason string
}

// New probes bubblewrap by running it with the sandbox's own arguments and
// returns the Sandbox. Where it cannot run, New logs a warning and the
// Sandbox runs plain processes, unless opts.Require is set.
func New(ctx context.Context, opts Options) (*Sandbox, error) {
	if opts.Shell == "" {
		opts.Shell = "bash"
	}
	if opts.MaxProcesses <= 0 {
		opts.MaxProcesses = DefaultMaxProcesses
	}
	if opts.CPUTime <= 0 {
		opts.CPUTime = DefaultCPUTime
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Sandbox{opts: opts}
	s.ok, s.reason = s.probe(ctx)
	if !s.ok {
		if opts.Require {
			return nil, fmt.Errorf("sandbox required, but bubblewrap cannot run: %s", s.reason)
		}
		opts.Logger.LogAttrs(ctx, slog.LevelWarn, "sandbox unavailable: bash commands run as plain processes with limits, "+
			"without network isolation or a read-only system", slog.String("reason", s.reason))
	} else {
		opts.Logger.LogAttrs(ctx, slog.LevelInfo, "sandbox: bash commands run under bubblewrap", slog.String("bwrap", s.bwrap))
	}
	return s, nil
}

// Available reports whether commands run under bubblewrap, and if not, why.
func (s *Sandbox) Available() (bool, string) {
	if s.ok {
		return true, "bubblewrap at " + s.bwrap
	}
	return false, s.reason
}

func (s *Sandbox) probe(ctx context.Context) (bool, string) {
	if s.opts.Disable {
		return false, "disabled by configuration"
	}
	name := s.opts.Bwrap
	if name == "" {
		name = "bwrap"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return false, fmt.Sprintf("%s not found: install bubblewrap", name)
	}
	s.bwrap = path
	dir, err := os.MkdirTemp("", "switchyard-sandbox-probe-")
	if err != nil {
		return false, fmt.Sprintf("probe: %v", err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	argv, err := s.bwrapArgv(Spec{Workspace: dir, Script: "touch probe"}, dir)
	if err != nil {
		return false, fmt.Sprintf("probe: %v", err)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			msg = err.Error()
		}
		return false, fmt.Sprintf("%s does not run here: %s", path, msg)
	}
	if _, err := os.Stat(filepath.Join(dir, "probe")); err != nil {
		return false, fmt.Sprintf("%s ran, but the workspace was not writable inside it", path)
	}
	return true, ""
}

// Command returns the command that runs script in workspace, with the
// network if allowNetwork. The caller sets its environment, output and
// process group, and passes the context that bounds its wall-clock time.
func (s *Sandbox) Command(ctx context.Context, workspace, script string, allowNetwork bool) (*exec.Cmd, error) {
	return s.CommandSpec(ctx, Spec{Workspace: workspace, Script: script, Network: allowNetwork})
}

// CommandSpec is Command with every option of Spec.
func (s *Sandbox) CommandSpec(ctx context.Context, spec Spec) (*exec.Cmd, error) {
	argv, dir, err := s.Argv(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	return cmd, nil
}

// Argv returns the program and arguments that run spec, and the directory
// to run them in, for callers that build their own exec.Cmd.
func (s *Sandbox) Argv(spec Spec) (argv []string, dir string, err error) {
	if spec.Workspace == "" {
		return nil, "", errors.New("sandbox: no workspace")
	}
	dir, err = filepath.EvalSymlinks(spec.Workspace)
	if err != nil {
		return nil, "", fmt.Errorf("sandbox: workspace: %w", err)
	}
	if !s.ok {
		return s.shellArgv(spec.Script), dir, nil
	}
	argv, err = s.bwrapArgv(spec, dir)
	return argv, dir, err
}

// shellArgv runs script in a shell that first sets the limits, then
// replaces itself with the shell that runs the script, so the limits bind
// everything the script starts and the script cannot raise them.
func (s *Sandbox) shellArgv(script string) []string {
	var b strings.Builder
	limit := func(flag string, v int64) {
		// Lower both limits to v, or to the hard limit where that is
		// already lower.
		fmt.Fprintf(&b, `ulimit -%s %d 2>/dev/null || ulimit -%s "$(ulimit -H%s)" || exit 126; `, flag, v, flag, flag)
	}
	limit("u", int64(s.opts.MaxProcesses))
	limit("t", int64((s.opts.CPUTime+time.Second-1)/time.Second))
	if s.opts.MaxFileSize > 0 {
		// bash counts file size in 1024-byte blocks.
		limit("f", (s.opts.MaxFileSize+1023)/1024)
	}
	b.WriteString(`exec ` + s.opts.Shell + ` --noprofile --norc -c "$1"`)
	return []string{s.opts.Shell, "--noprofile", "--norc", "-c", b.String(), "switchyard-sandbox", script}
}

func (s *Sandbox) bwrapArgv(spec Spec, ws string) ([]string, error) {
	argv := []string{s.bwrap,
		"--die-with-parent", "--new-session",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
	}
	if !spec.Network {
		argv = append(argv, "--unshare-net")
	}
	argv = append(argv,
		// Root keeps its capabilities inside bubblewrap unless told
		// otherwise, and could remount the system writable.
		"--cap-drop", "ALL",
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
		"--tmpfs", "/tmp",
	)
	for _, h := range s.opts.Hide {
		h = filepath.Clean(h)
		fi, err := os.Stat(h)
		if err != nil || h == "/" {
			continue
		}
		if fi.IsDir() {
			argv = append(argv, "--tmpfs", h)
		} else {
			argv = append(argv, "--ro-bind", "/dev/null", h)
		}
	}
	argv = append(argv, "--bind", ws, ws)
	for _, p := range spec.ReadOnly {
		if !filepath.IsAbs(p) {
			p = filepath.Join(ws, p)
		}
		p = filepath.Clean(p)
		if p != ws && !strings.HasPrefix(p, ws+string(filepath.Separator)) {
			return nil, fmt.Errorf("sandbox: read-only path %s is outside the workspace", p)
		}
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		argv = append(argv, "--ro-bind", p, p)
	}
	argv = append(argv, "--chdir", ws, "--")
	return append(argv, s.shellArgv(spec.Script)...), nil
}

// String describes the sandbox for logs and `switchyard doctor`.
func (s *Sandbox) String() string {
	limits := "processes " + strconv.Itoa(s.opts.MaxProcesses) + ", cpu " + s.opts.CPUTime.String()
	if s.ok {
		return "bubblewrap (" + limits + ")"
	}
	return "plain process (" + limits + "): " + s.reason
}
