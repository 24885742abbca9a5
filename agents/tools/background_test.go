package tools_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
)

// tasks is a toolset whose bash starts background tasks, over a real store.
type tasks struct {
	bg    *tools.Background
	store bot.LedgerStore
	ts    *tools.Toolset
	ws    string
}

func newTasks(t *testing.T, sb *sandbox.Sandbox, maxLog int64) *tasks {
	t.Helper()
	store := bolttest.Open(t, t.TempDir())
	bg, err := tools.NewBackground(tools.BackgroundOptions{Store: store, Dir: filepath.Join(t.TempDir(), "tasks"), MaxLog: maxLog})
	require.NoError(t, err)
	t.Cleanup(func() { bg.Shutdown(context.Background()) })
	r, err := tools.NewRegistry(tools.Core(tools.CoreOptions{Sandbox: sb, Background: bg})...)
	require.NoError(t, err)
	return &tasks{bg: bg, store: store, ws: t.TempDir(),
		ts: tools.NewToolset(r, tools.Scope{Agent: "coder", Profile: "contributor"}, tools.ToolsetOptions{})}
}

var ownerA = bot.Owner{SessionKey: "local:a", AgentID: "coder", SandboxName: "local_a-1"}

func (tk *tasks) call(t *testing.T, owner bot.Owner, job, tool string, input any) tools.Result {
	t.Helper()
	raw, err := json.Marshal(input)
	require.NoError(t, err)
	cc := tools.CallContext{Workspace: tk.ws, SessionKey: owner.SessionKey, JobID: job, Owner: owner,
		Creator: bot.Creator{JobID: job, DispatchID: "d_1", WorkItemID: "wi_1"}}
	return tk.ts.Execute(context.Background(), cc, tool, raw)
}

var taskID = regexp.MustCompile(`task_\d+`)

func (tk *tasks) start(t *testing.T, owner bot.Owner, job, command string, cleanup *bool) string {
	t.Helper()
	in := map[string]any{"command": command, "background": true}
	if cleanup != nil {
		in["cleanup_on_run_end"] = *cleanup
	}
	res := tk.call(t, owner, job, tools.Bash, in)
	require.False(t, res.IsError, res.Output)
	id := taskID.FindString(res.Output)
	require.NotEmpty(t, id, res.Output)
	return id
}

func (tk *tasks) task(t *testing.T, id string) *bot.BackgroundTask {
	t.Helper()
	rec, err := tk.store.GetTask(context.Background(), id)
	require.NoError(t, err)
	return rec
}

func (tk *tasks) ended(t *testing.T, id string) *bot.BackgroundTask {
	t.Helper()
	var rec *bot.BackgroundTask
	require.Eventually(t, func() bool {
		rec = tk.task(t, id)
		return !rec.Status.Open()
	}, 20*time.Second, 10*time.Millisecond)
	return rec
}

func TestBackgroundTasksAreRecordedReadStoppedAndEndWithTheirRun(t *testing.T) {
	tk := newTasks(t, plain(t), 0)
	keep := false
	dev := tk.start(t, ownerA, "job_1", "echo serving; sleep 300", &keep)
	watch := tk.start(t, ownerA, "job_1", "echo watching; sleep 300", nil)
	done := tk.start(t, ownerA, "job_1", "echo once; exit 3", nil)

	rec := tk.task(t, dev)
	require.Equal(t, bot.TaskRunning, rec.Status)
	require.Equal(t, ownerA, rec.Owner)
	require.Equal(t, bot.Creator{JobID: "job_1", DispatchID: "d_1", WorkItemID: "wi_1"}, rec.Creator)
	require.Equal(t, "echo serving; sleep 300", rec.Command)
	require.False(t, rec.CleanupOnRunEnd)
	require.True(t, tk.task(t, watch).CleanupOnRunEnd, "cleanup_on_run_end defaults to true")
	require.NotContains(t, rec.LogFile, tk.ws, "the log is not in the workspace")

	exited := tk.ended(t, done)
	require.Equal(t, bot.TaskExited, exited.Status)
	require.Equal(t, 3, *exited.ExitCode)
	require.Eventually(t, func() bool {
		return strings.Contains(tk.call(t, ownerA, "job_2", tools.ReadBackgroundOutput, map[string]string{"id": dev}).Output, "serving")
	}, 10*time.Second, 10*time.Millisecond)
	out := tk.call(t, ownerA, "job_2", tools.ReadBackgroundOutput, map[string]string{"id": done})
	require.Equal(t, done+" is exited (exit code 3); the end of its output:\nonce\n", out.Output)

	list := tk.call(t, ownerA, "job_2", tools.ListBackgroundTasks, map[string]bool{"open": true}).Output
	require.Contains(t, list, dev+" [running, started ")
	require.Contains(t, list, ", outlives its run] `echo serving; sleep 300`")
	require.Contains(t, list, watch)
	require.NotContains(t, list, done)

	// The run that started them ends: the one that ends with it stops.
	require.Equal(t, 1, tk.bg.EndRun(context.Background(), "job_1"))
	stopped := tk.task(t, watch)
	require.Equal(t, bot.TaskStopped, stopped.Status)
	require.Equal(t, "the run that started it ended (cleanup_on_run_end)", stopped.Receipt.Reason)
	require.Equal(t, bot.TaskRunning, tk.task(t, dev).Status, "cleanup_on_run_end: false outlives the run")

	// Another thread knowing the id is refused; the owner stops it.
	other := bot.Owner{SessionKey: "local:b", AgentID: "coder"}
	for _, tool := range []string{tools.ReadBackgroundOutput, tools.StopBackgroundTask} {
		res := tk.call(t, other, "job_9", tool, map[string]string{"id": dev})
		require.True(t, res.Refused)
		require.Equal(t, "refused: "+dev+" is not yours: it belongs to another thread or agent, and only the runs of its owner may manage it", res.Output)
	}
	require.Equal(t, bot.TaskRunning, tk.task(t, dev).Status)
	res := tk.call(t, ownerA, "job_3", tools.StopBackgroundTask, map[string]string{"id": dev})
	require.False(t, res.IsError, res.Output)
	require.Equal(t, "stopped "+dev+" (`echo serving; sleep 300`)", res.Output)
	rec = tk.task(t, dev)
	require.Equal(t, bot.TaskStopped, rec.Status)
	require.Equal(t, bot.Receipt{RecordID: dev, Kind: bot.KindBackgroundTask, Action: bot.ReceiptStopped, PreviousStatus: "running",
		Reason: "stopped by @coder (job_3)", By: "@coder", Owner: ownerA, Creator: rec.Creator, At: rec.Receipt.At}, *rec.Receipt)

	res = tk.call(t, ownerA, "job_3", tools.Bash, map[string]any{"command": "true", "cleanup_on_run_end": false})
	require.Equal(t, "error: invalid input: cleanup_on_run_end is for background commands", res.Output)
}

func TestABackgroundTasksLogIsBounded(t *testing.T) {
	tk := newTasks(t, plain(t), 4096)
	id := tk.start(t, ownerA, "job_1", `for i in $(seq 1 2000); do echo "line $i"; done`, nil)
	tk.ended(t, id)
	rec := tk.task(t, id)
	fi, err := os.Stat(rec.LogFile)
	require.NoError(t, err)
	require.LessOrEqual(t, fi.Size(), int64(4096))
	out := tk.call(t, ownerA, "job_2", tools.ReadBackgroundOutput, map[string]any{"id": id, "bytes": 100}).Output
	require.True(t, strings.HasSuffix(out, "line 2000\n"), out)
	require.Contains(t, out, "[… the first ")
}

func TestTasksAPreviousProcessLeftRunningAreInterrupted(t *testing.T) {
	store := bolttest.Open(t, t.TempDir())
	rec, err := store.AddTask(context.Background(), bot.BackgroundTask{Owner: ownerA, Agent: "coder", Command: "sleep 300",
		Status: bot.TaskRunning, LogFile: "/nowhere.log"})
	require.NoError(t, err)
	bg, err := tools.NewBackground(tools.BackgroundOptions{Store: store, Dir: t.TempDir()})
	require.NoError(t, err)
	n, err := bg.Recover(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got, err := store.GetTask(context.Background(), rec.ID)
	require.NoError(t, err)
	require.Equal(t, bot.TaskInterrupted, got.Status)
	require.Equal(t, "the daemon stopped, and the process with it", got.Error)
}

func TestABackgroundTaskRunsInTheSandbox(t *testing.T) {
	requireBwrap(t)
	sb, err := sandbox.New(context.Background(), sandbox.Options{})
	require.NoError(t, err)
	tk := newTasks(t, sb, 0)
	id := tk.start(t, ownerA, "job_1", `touch made-here; cat /proc/1/cmdline | tr '\0' ' '; echo; sleep 300`, nil)
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(tk.ws, "made-here"))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "it works in the workspace")
	// Its pid 1 is the sandbox's own bubblewrap, which takes it along when
	// the daemon dies, without the network.
	require.Eventually(t, func() bool {
		out := tk.call(t, ownerA, "job_1", tools.ReadBackgroundOutput, map[string]string{"id": id}).Output
		return strings.Contains(out, "bwrap --die-with-parent") && strings.Contains(out, "--unshare-net")
	}, 10*time.Second, 10*time.Millisecond)
	_, err = tk.bg.Stop(context.Background(), id, "test over", "test")
	require.NoError(t, err)
	require.Equal(t, bot.TaskStopped, tk.task(t, id).Status)
}
