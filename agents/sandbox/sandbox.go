package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// Home is the home directory of every command under bubblewrap: an empty
// directory of the command's own in its private /tmp, gone when it ends.
// The workspace is never the home, so a file checked out in it
// (.gitconfig, .npmrc, .curlrc, .ssh/config, .bashrc …) configures no
// program a command runs. It holds only git's global configuration,
// read-only (see gitConfig).
const Home = "/tmp/home"

// gitConfig is git's global configuration for every command, which it
// finds through GIT_CONFIG_GLOBAL: a bare repository git comes upon by
// itself (one committed into the workspace, with a config that runs
// programs) is not used unless named with --git-dir. The system's
// configuration is not read (GIT_CONFIG_NOSYSTEM).
const gitConfig = "[safe]\n\tbareRepository = explicit\n"

// Mode says whether commands may run without the sandbox.
type Mode string

const (
	// ModeRequired runs commands only under bubblewrap: where it cannot
	// run, every command is refused with a message that says why.
	ModeRequired Mode = "required"
	// ModeNone runs commands as plain processes with the limits, without
	// any isolation: the operator accepts the risk.
	ModeNone Mode = "none"
)

// Modes lists the valid modes, for validating configuration.
func Modes() []Mode { return []Mode{ModeRequired, ModeNone} }

// Options configure a Sandbox. The zero value requires bubblewrap, with the
// default limits.
type Options struct {
	// Mode is ModeRequired ("" means it) or ModeNone.
	Mode Mode
	// Bwrap is the bubblewrap program; "" looks up "bwrap" in PATH.
	Bwrap string
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
	// data directory, its config file, its home, its credentials. The
	// workspace stays visible even inside a hidden directory. Paths that
	// do not exist are skipped; DefaultHidden are always added.
	Hide []string
	// Dir is where the sandbox keeps its own files: git's configuration
	// bound into every command and, with ModeNone, the commands' home.
	// "" makes a temporary directory. The daemon's is in its data
	// directory, out of the commands' sight.
	Dir    string
	Logger *slog.Logger
}

// DefaultHidden are places where a host or an orchestrator keeps
// credentials of the process, hidden from every command: container
// secrets, Kubernetes service account tokens, systemd credentials,
// per-user runtime directories (keyrings, agent sockets).
func DefaultHidden() []string {
	return []string{"/run/secrets", "/var/run/secrets", "/run/credentials", "/run/user"}
}

// Spec is one command to run: a script for the shell, or a program with
// its arguments.
type Spec struct {
	// Workspace is the directory the command runs in and the only one it
	// may write.
	Workspace string
	// Script is run by the shell; Argv, when set instead, is the program
	// and its arguments.
	Script string
	Argv   []string
	// Network shares the host's network; otherwise the command has only a
	// loopback of its own.
	Network bool
	// WorkspaceReadOnly mounts the workspace read-only: for an agent whose
	// rights do not include writing, whatever the policy let through.
	WorkspaceReadOnly bool
	// ReadOnly are paths inside the workspace the command may read but
	// not change, such as .git/hooks for a profile without the ci
	// permission. Paths that do not exist are skipped.
	ReadOnly []string
	// Masked are files inside the workspace the command sees empty and
	// cannot change, such as .env for rights without the secrets
	// permission: reading one by any route (grep -r, find -exec cat, git
	// grep of the work tree) shows nothing. Paths that are not regular
	// files are skipped.
	Masked []string
	// Expose are paths outside the workspace the command may read even
	// where they lie in a hidden directory, such as the package directory
	// of a command tool.
	Expose []string
}

// UnavailableError is the answer to a command while the sandbox is
// required and bubblewrap cannot run: it says why and how to fix it.
type UnavailableError struct {
	// Reason says why bubblewrap cannot run.
	Reason string
}

func (e *UnavailableError) Error() string {
	return "commands run only inside the sandbox (sandbox.mode: required), and bubblewrap cannot run here: " + e.Reason +
		". Install bubblewrap (Debian and Ubuntu: apt-get install bubblewrap; it needs unprivileged user namespaces), " +
		"or set sandbox.mode: none in the config to run commands without a sandbox and accept the risk"
}

// Sandbox builds the commands bash and command tools run: inside bubblewrap
// (no network unless allowed, the system read-only, the workspace writable
// only where the caller's rights allow, private /tmp, /dev and /proc, no
// capabilities, the daemon's data, config, home and environment out of
// sight), or with ModeNone as a plain process. Either way the process, CPU
// time and file size limits apply. It is safe for concurrent use.
type Sandbox struct {
	opts   Options
	bwrap  string
	ok     bool
	reason string
	// dir is the daemon's own directory for the sandbox: the git
	// configuration bound into every command, and with ModeNone the
	// home commands share.
	dir string
}

// New returns the Sandbox. Unless the mode is none it probes bubblewrap by
// running it with the sandbox's own arguments; where that fails it logs an
// error, and every command is refused until bubblewrap works (a restart
// probes again). ModeNone logs a warning every time. The error is for
// options that make no sense.
func New(ctx context.Context, opts Options) (*Sandbox, error) {
	switch opts.Mode {
	case "":
		opts.Mode = ModeRequired
	case ModeRequired, ModeNone:
	default:
		return nil, fmt.Errorf("sandbox mode %q: want required or none", opts.Mode)
	}
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
	opts.Hide = append(slices.Clone(opts.Hide), DefaultHidden()...)
	s := &Sandbox{opts: opts}
	// Descriptors the daemon inherited (a supervisor's pipe or socket)
	// would be inherited by every command too.
	closeInheritedOnExec()
	dir, err := makeStateDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	s.dir = dir
	if opts.Mode == ModeNone {
		s.reason = "sandbox.mode is none"
		opts.Logger.LogAttrs(ctx, slog.LevelWarn, "sandbox.mode is none: bash and command tools run without a sandbox, "+
			"with the daemon's network and every file its user can read or write; set sandbox.mode: required (the default) to confine them")
		return s, nil
	}
	s.ok, s.reason = s.probe(ctx)
	if !s.ok {
		opts.Logger.LogAttrs(ctx, slog.LevelError, "sandbox unavailable: bash and command tools are refused until bubblewrap works; "+
			"install bubblewrap, or set sandbox.mode: none to run commands without a sandbox and accept the risk",
			slog.String("reason", s.reason))
	} else {
		opts.Logger.LogAttrs(ctx, slog.LevelInfo, "sandbox: bash and command tools run under bubblewrap", slog.String("bwrap", s.bwrap))
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

// Mode is the sandbox's mode.
func (s *Sandbox) Mode() Mode { return s.opts.Mode }

func (s *Sandbox) probe(ctx context.Context) (bool, string) {
	name := s.opts.Bwrap
	if name == "" {
		name = "bwrap"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		if name == "bwrap" {
			return false, "bwrap was not found in PATH"
		}
		return false, fmt.Sprintf("%s was not found", name)
	}
	s.bwrap = path
	dir, err := os.MkdirTemp("", "switchyard-sandbox-probe-")
	if err != nil {
		return false, fmt.Sprintf("its self-test could not make a directory: %v", err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	argv, err := s.bwrapArgv(Spec{Workspace: dir, Script: "touch probe"}, dir)
	if err != nil {
		return false, fmt.Sprintf("its self-test could not be prepared: %v", err)
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
		return false, fmt.Sprintf("%s failed its self-test: %s", path, msg)
	}
	if _, err := os.Stat(filepath.Join(dir, "probe")); err != nil {
		return false, fmt.Sprintf("%s ran, but the workspace was not writable inside it", path)
	}
	return true, ""
}

// CommandSpec returns the command that runs spec. The caller sets its
// environment, output and process group, and passes the context that
// bounds its wall-clock time.
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
// to run them in, for callers that build their own exec.Cmd. While the
// sandbox is required and bubblewrap cannot run it returns an
// *UnavailableError.
func (s *Sandbox) Argv(spec Spec) (argv []string, dir string, err error) {
	if spec.Workspace == "" {
		return nil, "", errors.New("sandbox: no workspace")
	}
	if (spec.Script == "") == (len(spec.Argv) == 0) {
		return nil, "", errors.New("sandbox: give a script or a program, not both or neither")
	}
	dir, err = filepath.EvalSymlinks(spec.Workspace)
	if err != nil {
		return nil, "", fmt.Errorf("sandbox: workspace: %w", err)
	}
	switch {
	case s.ok:
		argv, err = s.bwrapArgv(spec, dir)
		return argv, dir, err
	case s.opts.Mode == ModeNone:
		return s.shellArgv(spec, false), dir, nil
	}
	return nil, "", &UnavailableError{Reason: s.reason}
}

// shellArgv runs spec in a shell that first sets the limits, then replaces
// itself with the shell that runs the script, or with the program, so the
// limits bind everything the command starts and it cannot raise them.
func (s *Sandbox) shellArgv(spec Spec, bwrap bool) []string {
	var b strings.Builder
	if !bwrap {
		// Under bubblewrap the environment is set by --setenv.
		for _, kv := range s.env(false) {
			fmt.Fprintf(&b, "export %s=%s; ", kv[0], shellQuote(kv[1]))
		}
	}
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
	if len(spec.Argv) > 0 {
		b.WriteString(`exec "$@"`)
		return append([]string{s.opts.Shell, "--noprofile", "--norc", "-c", b.String(), "switchyard-sandbox"}, spec.Argv...)
	}
	b.WriteString(`exec ` + s.opts.Shell + ` --noprofile --norc -c "$1"`)
	return []string{s.opts.Shell, "--noprofile", "--norc", "-c", b.String(), "switchyard-sandbox", spec.Script}
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
	for _, h := range s.hidden() {
		if h.dir {
			argv = append(argv, "--tmpfs", h.path)
		} else {
			argv = append(argv, "--ro-bind", "/dev/null", h.path)
		}
	}
	argv = append(argv, "--dir", Home, "--ro-bind", filepath.Join(s.dir, "gitconfig"), Home+"/.gitconfig")
	for _, kv := range s.env(true) {
		argv = append(argv, "--setenv", kv[0], kv[1])
	}
	for _, p := range spec.Expose {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			argv = append(argv, "--ro-bind", real, real)
		}
	}
	if spec.WorkspaceReadOnly {
		argv = append(argv, "--ro-bind", ws, ws)
	} else {
		argv = append(argv, "--bind", ws, ws)
	}
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
	for _, p := range spec.Masked {
		if !filepath.IsAbs(p) {
			p = filepath.Join(ws, p)
		}
		p = filepath.Clean(p)
		if !strings.HasPrefix(p, ws+string(filepath.Separator)) {
			return nil, fmt.Errorf("sandbox: masked path %s is outside the workspace", p)
		}
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		argv = append(argv, "--ro-bind", filepath.Join(s.dir, "empty"), p)
	}
	argv = append(argv, "--chdir", ws, "--")
	return append(argv, s.shellArgv(spec, true)...), nil
}

// shellQuote quotes s for the shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

type hiddenPath struct {
	path string
	dir  bool
}

// hidden returns the real paths of Hide that exist, without those inside
// another hidden directory, which are out of sight already.
func (s *Sandbox) hidden() []hiddenPath {
	var all []hiddenPath
	for _, h := range s.opts.Hide {
		abs, err := filepath.Abs(h)
		if err != nil {
			continue
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil || real == "/" {
			continue
		}
		fi, err := os.Stat(real)
		if err != nil {
			continue
		}
		all = append(all, hiddenPath{path: real, dir: fi.IsDir()})
	}
	slices.SortFunc(all, func(a, b hiddenPath) int { return strings.Compare(a.path, b.path) })
	var out []hiddenPath
	for _, h := range all {
		inside := slices.ContainsFunc(out, func(o hiddenPath) bool {
			return h.path == o.path || o.dir && strings.HasPrefix(h.path, o.path+"/")
		})
		if !inside {
			out = append(out, h)
		}
	}
	return out
}

// makeStateDir makes the sandbox's own directory: the git configuration
// of every command, read-only, and a home for commands run without
// bubblewrap.
func makeStateDir(dir string) (string, error) {
	var err error
	if dir == "" {
		dir, err = os.MkdirTemp("", "switchyard-sandbox-")
	} else {
		dir, err = filepath.Abs(dir)
		if err == nil {
			err = os.MkdirAll(dir, 0o700)
		}
	}
	if err != nil {
		return "", fmt.Errorf("make its directory: %w", err)
	}
	// Written aside and renamed into place: the file is read-only, and a
	// command may be reading the one there.
	tmp, err := os.CreateTemp(dir, "gitconfig.*")
	if err == nil {
		_, err = tmp.WriteString(gitConfig)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Chmod(tmp.Name(), 0o444)
		}
		if err == nil {
			err = os.Rename(tmp.Name(), filepath.Join(dir, "gitconfig"))
		}
		if err != nil {
			os.Remove(tmp.Name())
		}
	}
	if err != nil {
		return "", fmt.Errorf("write its git configuration: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "home"), 0o700); err != nil {
		return "", fmt.Errorf("make its home: %w", err)
	}
	// What a masked file shows: an empty regular file, so that reading it
	// succeeds and shows nothing.
	if err := os.WriteFile(filepath.Join(dir, "empty"), nil, 0o444); err != nil && !errors.Is(err, fs.ErrPermission) {
		return "", fmt.Errorf("write its empty file: %w", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "empty")); err != nil || fi.Size() != 0 {
		return "", fmt.Errorf("its empty file %s is not empty", filepath.Join(dir, "empty"))
	}
	return dir, nil
}

// env is what the sandbox sets in every command's environment, over the
// caller's: the home and git's configuration, under bubblewrap or not.
func (s *Sandbox) env(bwrap bool) [][2]string {
	home, gitcfg := Home, Home+"/.gitconfig"
	if !bwrap {
		home, gitcfg = filepath.Join(s.dir, "home"), filepath.Join(s.dir, "gitconfig")
	}
	return [][2]string{{"HOME", home}, {"GIT_CONFIG_GLOBAL", gitcfg}, {"GIT_CONFIG_NOSYSTEM", "1"}}
}

// String describes the sandbox for logs.
func (s *Sandbox) String() string {
	limits := "processes " + strconv.Itoa(s.opts.MaxProcesses) + ", cpu " + s.opts.CPUTime.String()
	switch {
	case s.ok:
		return "bubblewrap (" + limits + ")"
	case s.opts.Mode == ModeNone:
		return "none: plain processes (" + limits + ")"
	}
	return "unavailable, commands refused: " + s.reason
}
