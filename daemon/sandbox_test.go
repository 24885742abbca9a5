package daemon_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os/exec"
	"regexp"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
)

// records keeps what the daemon logs.
type records struct {
	mu   sync.Mutex
	list []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// level returns the level of the first record whose message matches re.
func (r *records) level(t *testing.T, re string) slog.Level {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.list {
		if regexp.MustCompile(re).MatchString(rec.Message) {
			return rec.Level
		}
	}
	t.Fatalf("nothing logged matching %q", re)
	return 0
}

func sandboxGauge(t *testing.T, r *running) string {
	t.Helper()
	return metric(t, r, "switchyard_sandbox_available")
}

func TestWithoutBubblewrapBashIsRefusedAndTheDaemonRuns(t *testing.T) {
	log := &records{}
	var sb *sandbox.Sandbox
	r := start(t, func(o *daemon.Options) {
		o.Logger = slog.New(log)
		o.Sandbox = sandbox.Options{Bwrap: "/nonexistent/bwrap"}
		o.NewRunner = func(deps daemon.RunnerDeps) (bot.Runner, error) {
			sb = deps.Sandbox
			return bot.NoRuntime{}, nil
		}
	})
	require.Equal(t, "0", sandboxGauge(t, r))
	require.Equal(t, 200, r.status(t, "GET", "/readyz", ""), "the daemon is ready")
	require.Equal(t, slog.LevelError, log.level(t, `^sandbox unavailable`))

	// The runtime's bash is refused with what to do; other tools work.
	reg, err := tools.NewRegistry(tools.Core(tools.CoreOptions{Sandbox: sb})...)
	require.NoError(t, err)
	ts := tools.NewToolset(reg, tools.Scope{Agent: "coder"}, tools.ToolsetOptions{})
	ws := t.TempDir()
	res := ts.Execute(context.Background(), tools.CallContext{Workspace: ws}, "bash", json.RawMessage(`{"command":"touch ran"}`))
	require.True(t, res.Refused)
	require.Contains(t, res.Output, "bubblewrap cannot run here: /nonexistent/bwrap was not found")
	require.Contains(t, res.Output, "apt-get install bubblewrap")
	require.Contains(t, res.Output, "sandbox.mode: none")
	res = ts.Execute(context.Background(), tools.CallContext{Workspace: ws}, "write_file", json.RawMessage(`{"path":"a","content":"b"}`))
	require.False(t, res.IsError, res.Output)
}

func TestSandboxGaugeFollowsTheSandbox(t *testing.T) {
	log := &records{}
	r := start(t, func(o *daemon.Options) {
		o.Logger = slog.New(log)
		o.Setup.Config.Sandbox.Mode = sandbox.ModeNone
	})
	require.Equal(t, "0", sandboxGauge(t, r), "no sandbox is not an available sandbox")
	require.Equal(t, slog.LevelWarn, log.level(t, `^sandbox\.mode is none`))

	if out, err := exec.Command("bwrap", "--ro-bind", "/", "/", "true").CombinedOutput(); err != nil {
		t.Skipf("bubblewrap cannot run on this machine (%v %s); the gauge's 1 is not tested", err, out)
	}
	r = start(t, nil)
	require.Equal(t, "1", sandboxGauge(t, r))
}

func TestBadSandboxModeIsAConfigError(t *testing.T) {
	_, err := daemon.New(t.Context(), daemon.Options{Setup: setupFor(t, func(c *config.Config) { c.Sandbox.Mode = "off" })})
	require.EqualError(t, err, `sandbox mode "off": want required or none`)
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
}
