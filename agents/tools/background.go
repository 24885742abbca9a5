package tools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/switchyard/switchyard/bot"
)

// Background task tools.
const (
	ListBackgroundTasks  = "list_background_tasks"
	ReadBackgroundOutput = "read_background_output"
	StopBackgroundTask   = "stop_background_task"
)

// TaskStore keeps the records of background tasks; bot.LedgerStore has it.
type TaskStore interface {
	AddTask(ctx context.Context, t bot.BackgroundTask) (bot.BackgroundTask, error)
	GetTask(ctx context.Context, id string) (*bot.BackgroundTask, error)
	UpdateTask(ctx context.Context, id string, edit func(*bot.BackgroundTask) error) (*bot.BackgroundTask, error)
	ListTasks(ctx context.Context, f bot.TaskFilter) ([]bot.BackgroundTask, string, error)
}

// Defaults of BackgroundOptions.
const (
	DefaultTaskLog  = 1 << 20 // bytes of output kept per task
	DefaultMaxTasks = 16      // running tasks per owner
	taskStopWait    = 5 * time.Second
)

// BackgroundOptions configure Background; Store and Dir are required.
type BackgroundOptions struct {
	Store TaskStore
	// Dir holds the tasks' logs: a directory of the daemon's data, never
	// a workspace, so a task's output cannot be changed by what it runs.
	Dir string
	// MaxLog bounds each log; when it fills up the older half goes.
	MaxLog int64
	// MaxTasks bounds the tasks an owner may have running at once.
	MaxTasks int
	Logger   *slog.Logger
	Now      func() time.Time
}

// Background runs the long-lived processes bash starts with background:
// true (a watcher, a dev server) and keeps a record of each with its owner
// and creator. A process runs as bash's commands do, confined by the same
// sandbox, with its output in a bounded log under the data directory. It
// dies with the daemon (bubblewrap's --die-with-parent; without the
// sandbox the process is sent SIGKILL when the daemon's thread that started
// it ends, which its own children may escape): after a restart its record
// says interrupted. One Background serves every configuration the daemon
// runs, as its processes outlive a reload.
type Background struct {
	opts BackgroundOptions

	mu    sync.Mutex
	procs map[string]*taskProc // running in this process, by task id
}

type taskProc struct {
	cmd      *exec.Cmd
	done     chan struct{} // closed when it has exited and its record says so
	stopping *bot.Receipt  // set when stopped on purpose
}

// NewBackground returns the background tasks of a daemon.
func NewBackground(opts BackgroundOptions) (*Background, error) {
	if opts.Store == nil || opts.Dir == "" {
		return nil, errors.New("background tasks: a store and a directory are required")
	}
	if opts.MaxLog <= 0 {
		opts.MaxLog = DefaultTaskLog
	}
	if opts.MaxTasks <= 0 {
		opts.MaxTasks = DefaultMaxTasks
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("background tasks: %w", err)
	}
	return &Background{opts: opts, procs: map[string]*taskProc{}}, nil
}

// Recover marks interrupted the tasks a previous process left running:
// their processes died with it. It returns how many.
func (b *Background) Recover(ctx context.Context) (int, error) {
	ts, _, err := b.opts.Store.ListTasks(ctx, bot.TaskFilter{Open: true, Limit: 1000})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range ts {
		b.mu.Lock()
		_, live := b.procs[t.ID]
		b.mu.Unlock()
		if live {
			continue
		}
		now := b.opts.Now().UTC()
		_, err := b.opts.Store.UpdateTask(ctx, t.ID, func(bt *bot.BackgroundTask) error {
			if !bt.Status.Open() {
				return errTaskEnded
			}
			bt.Status, bt.FinishedAt = bot.TaskInterrupted, &now
			bt.Error = "the daemon stopped, and the process with it"
			return nil
		})
		switch {
		case err == nil:
			n++
		case !errors.Is(err, errTaskEnded):
			return n, err
		}
	}
	return n, nil
}

var errTaskEnded = errors.New("the task ended meanwhile")

// start runs argv (bash's sandboxed command line) in dir as a background
// task of the call cc, and returns its record.
func (b *Background) start(ctx context.Context, cc CallContext, command string, argv []string, dir string, env []string, cleanup bool) (*bot.BackgroundTask, error) {
	owner := cc.Owner
	if owner.SessionKey == "" || owner.AgentID == "" {
		return nil, Refuse("background tasks need a run with an owner (a thread and an agent)")
	}
	open, _, err := b.opts.Store.ListTasks(ctx, bot.TaskFilter{OwnerSessionKey: owner.SessionKey, OwnerAgent: owner.AgentID, Open: true, Limit: b.opts.MaxTasks + 1})
	if err != nil {
		return nil, err
	}
	if len(open) >= b.opts.MaxTasks {
		return nil, Refuse("%s of this thread already run; stop_background_task one before starting another", bot.Count(len(open), "background task", "background tasks"))
	}
	var name [8]byte
	_, _ = rand.Read(name[:])
	logPath := filepath.Join(b.opts.Dir, hex.EncodeToString(name[:])+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("background task log: %w", err)
	}
	out := &taskLog{f: logf, max: b.opts.MaxLog}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, out, out
	setBackgroundGroup(cmd)
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		_ = os.Remove(logPath)
		return nil, fmt.Errorf("start background task: %w", err)
	}
	rec, err := b.opts.Store.AddTask(ctx, bot.BackgroundTask{
		Owner: owner, Creator: cc.Creator, Agent: cc.Agent, Command: command, CleanupOnRunEnd: cleanup,
		Status: bot.TaskRunning, LogFile: logPath, CreatedAt: b.opts.Now().UTC(),
	})
	if err != nil {
		killGroup(cmd)
		_ = cmd.Wait()
		_ = logf.Close()
		return nil, fmt.Errorf("record background task: %w", err)
	}
	p := &taskProc{cmd: cmd, done: make(chan struct{})}
	b.mu.Lock()
	b.procs[rec.ID] = p
	b.mu.Unlock()
	go b.wait(rec.ID, p, out)
	b.opts.Logger.LogAttrs(ctx, slog.LevelInfo, "background task started", slog.String("task", rec.ID),
		slog.String("agent", cc.Agent), slog.String("thread", owner.SessionKey), slog.Bool("cleanup_on_run_end", cleanup))
	return &rec, nil
}

// wait records how a task's process ended.
func (b *Background) wait(id string, p *taskProc, out *taskLog) {
	err := p.cmd.Wait()
	_ = out.close()
	now := b.opts.Now().UTC()
	b.mu.Lock()
	receipt := p.stopping
	delete(b.procs, id)
	b.mu.Unlock()
	code := p.cmd.ProcessState.ExitCode()
	_, uerr := b.opts.Store.UpdateTask(context.Background(), id, func(bt *bot.BackgroundTask) error {
		if !bt.Status.Open() {
			return errTaskEnded
		}
		bt.FinishedAt = &now
		switch {
		case receipt != nil:
			bt.Status, bt.Receipt = bot.TaskStopped, receipt
		default:
			bt.Status = bot.TaskExited
			if code >= 0 {
				bt.ExitCode = &code
			} else if err != nil {
				bt.Error = err.Error()
			}
		}
		return nil
	})
	if uerr != nil && !errors.Is(uerr, errTaskEnded) {
		b.opts.Logger.Error("record the end of a background task", slog.String("task", id), slog.String("error", uerr.Error()))
	}
	close(p.done)
}

// Stop stops a running task with a receipt saying who and why, and returns
// its record once its process has ended. A task that has ended already is
// returned as it is.
func (b *Background) Stop(ctx context.Context, id, reason, by string) (*bot.BackgroundTask, error) {
	t, err := b.opts.Store.GetTask(ctx, id)
	if err != nil {
		return nil, err
	}
	if !t.Status.Open() {
		return t, nil
	}
	receipt := &bot.Receipt{RecordID: t.ID, Kind: bot.KindBackgroundTask, Action: bot.ReceiptStopped,
		PreviousStatus: string(t.Status), Reason: reason, By: by, Owner: t.Owner, Creator: t.Creator, At: b.opts.Now().UTC()}
	b.mu.Lock()
	p := b.procs[id]
	if p != nil && p.stopping == nil {
		p.stopping = receipt
	}
	b.mu.Unlock()
	if p == nil {
		// Not running here (a record the previous process left): close it.
		now := b.opts.Now().UTC()
		return b.opts.Store.UpdateTask(ctx, id, func(bt *bot.BackgroundTask) error {
			if bt.Status.Open() {
				bt.Status, bt.Receipt, bt.FinishedAt = bot.TaskStopped, receipt, &now
			}
			return nil
		})
	}
	terminateGroup(p.cmd)
	select {
	case <-p.done:
	case <-time.After(taskStopWait):
		killGroup(p.cmd)
		select {
		case <-p.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case <-ctx.Done():
		killGroup(p.cmd)
		return nil, ctx.Err()
	}
	return b.opts.Store.GetTask(ctx, id)
}

// EndRun stops the tasks job started with cleanup_on_run_end: the run that
// started them is over. It returns how many it stopped.
func (b *Background) EndRun(ctx context.Context, jobID string) int {
	ts, _, err := b.opts.Store.ListTasks(ctx, bot.TaskFilter{CreatorJobID: jobID, Open: true, Limit: 1000})
	if err != nil {
		b.opts.Logger.Error("list the background tasks of a run", slog.String("job", jobID), slog.String("error", err.Error()))
		return 0
	}
	n := 0
	for _, t := range ts {
		if !t.CleanupOnRunEnd {
			continue
		}
		if _, err := b.Stop(ctx, t.ID, "the run that started it ended (cleanup_on_run_end)", "job "+jobID); err != nil {
			b.opts.Logger.Error("stop a background task", slog.String("task", t.ID), slog.String("error", err.Error()))
			continue
		}
		n++
	}
	return n
}

// Shutdown stops every task of this process, as the daemon stops: they
// would die with it anyway, and their records say so.
func (b *Background) Shutdown(ctx context.Context) {
	b.mu.Lock()
	ids := make([]string, 0, len(b.procs))
	for id := range b.procs {
		ids = append(ids, id)
	}
	b.mu.Unlock()
	for _, id := range ids {
		if _, err := b.Stop(ctx, id, "the daemon stopped", "switchyard"); err != nil {
			b.opts.Logger.Warn("stop a background task at shutdown", slog.String("task", id), slog.String("error", err.Error()))
		}
	}
}

// owned returns task id if cc's owner owns it, and refuses otherwise.
func (b *Background) owned(ctx context.Context, cc CallContext, id string) (*bot.BackgroundTask, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return nil, errors.New("invalid input: id is required")
	}
	t, err := b.opts.Store.GetTask(ctx, id)
	if bot.ErrorCode(err) == bot.ENOTFOUND {
		return nil, Refuse("there is no background task %q; list_background_tasks lists yours", id)
	}
	if err != nil {
		return nil, err
	}
	if !cc.Owner.Owns(t.Owner) {
		return nil, Refuse("%s is not yours: it belongs to another thread or agent, and only the runs of its owner may manage it", id)
	}
	return t, nil
}

// maxReadOutput is the most of a log read_background_output returns.
const maxReadOutput = 16 << 10

// read returns the last n bytes of a task's log (all of a short one).
func (b *Background) read(t *bot.BackgroundTask, n int) (string, error) {
	f, err := os.Open(t.LogFile)
	if err != nil {
		return "", fmt.Errorf("read the output of %s: %w", t.ID, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	size := fi.Size()
	from := max(0, size-int64(n))
	buf := make([]byte, size-from)
	if _, err := f.ReadAt(buf, from); err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	s := strings.ToValidUTF8(string(buf), "")
	if from > 0 {
		s = fmt.Sprintf("[… the first %d bytes are left out …]\n", from) + s
	}
	return s, nil
}

// Tools returns list_background_tasks, read_background_output and
// stop_background_task. They act on the tasks of the calling run's owner
// only. They declare read: a run that may start a task may look at and stop
// its own.
func (b *Background) Tools() []Tool {
	read := []Permission{PermRead}
	return []Tool{
		&funcTool{info: Info{Name: ListBackgroundTasks, Kind: KindCore, Permissions: read, Schema: listTasksSchema,
			Description: "List the background tasks (bash with background: true) of this thread's runs of you: id, command, status, age."},
			run: b.listTool},
		&funcTool{info: Info{Name: ReadBackgroundOutput, Kind: KindCore, Permissions: read, Schema: readTaskSchema,
			Description: "Read the end of a background task's output (16 KiB at most)."},
			run: b.readTool},
		&funcTool{info: Info{Name: StopBackgroundTask, Kind: KindCore, Permissions: read, Schema: stopTaskSchema,
			Description: "Stop a background task of this thread's runs of you, and everything it started."},
			run: b.stopTool},
	}
}

var (
	listTasksSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"open":{"type":"boolean","description":"Only those still running"}},"additionalProperties":false}`)
	readTaskSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"id":{"type":"string","description":"The task's id (task_…)"},` +
		`"bytes":{"type":"integer","minimum":1,"description":"How much of the end to read; default and most 16384"}},` +
		`"required":["id"],"additionalProperties":false}`)
	stopTaskSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"id":{"type":"string","description":"The task's id (task_…)"}},"required":["id"],"additionalProperties":false}`)
)

func (b *Background) listTool(ctx context.Context, cc CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Open bool `json:"open"`
	}
	if err := DecodeInput(input, &in); err != nil {
		return "", err
	}
	if cc.Owner.SessionKey == "" {
		return "no background tasks", nil
	}
	ts, _, err := b.opts.Store.ListTasks(ctx, bot.TaskFilter{OwnerSessionKey: cc.Owner.SessionKey, OwnerAgent: cc.Owner.AgentID,
		Open: in.Open, Unarchived: true, Limit: 50})
	if err != nil {
		return "", err
	}
	if len(ts) == 0 {
		return "no background tasks", nil
	}
	now := b.opts.Now()
	var out strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&out, "- %s [%s, started %s ago", t.ID, t.Status, bot.Ago(now.Sub(t.CreatedAt)))
		if t.ExitCode != nil {
			fmt.Fprintf(&out, ", exit code %d", *t.ExitCode)
		}
		if !t.CleanupOnRunEnd {
			out.WriteString(", outlives its run")
		}
		fmt.Fprintf(&out, "] `%s`\n", oneLineText(t.Command, 120))
	}
	return out.String(), nil
}

func (b *Background) readTool(ctx context.Context, cc CallContext, input json.RawMessage) (string, error) {
	var in struct {
		ID    string `json:"id"`
		Bytes int    `json:"bytes"`
	}
	if err := DecodeInput(input, &in); err != nil {
		return "", err
	}
	t, err := b.owned(ctx, cc, in.ID)
	if err != nil {
		return "", err
	}
	n := maxReadOutput
	if in.Bytes > 0 {
		n = min(in.Bytes, maxReadOutput)
	}
	out, err := b.read(t, n)
	if err != nil {
		return "", err
	}
	head := fmt.Sprintf("%s is %s", t.ID, t.Status)
	if t.ExitCode != nil {
		head += fmt.Sprintf(" (exit code %d)", *t.ExitCode)
	}
	if out == "" {
		return head + "; it has written nothing yet", nil
	}
	return head + "; the end of its output:\n" + out, nil
}

func (b *Background) stopTool(ctx context.Context, cc CallContext, input json.RawMessage) (string, error) {
	var in struct {
		ID string `json:"id"`
	}
	if err := DecodeInput(input, &in); err != nil {
		return "", err
	}
	t, err := b.owned(ctx, cc, in.ID)
	if err != nil {
		return "", err
	}
	if !t.Status.Open() {
		return fmt.Sprintf("%s had ended already (%s); nothing was stopped", t.ID, t.Status), nil
	}
	t, err = b.Stop(ctx, t.ID, fmt.Sprintf("stopped by @%s (%s)", cc.Agent, cc.JobID), "@"+cc.Agent)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("stopped %s (`%s`)", t.ID, oneLineText(t.Command, 120)), nil
}

func oneLineText(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}

// taskLog is a task's output file, kept at most max bytes: when a write
// would pass it, the older half of the file goes.
type taskLog struct {
	mu   sync.Mutex
	f    *os.File
	max  int64
	size int64
}

func (l *taskLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	if int64(len(p)) > l.max/2 {
		p = p[int64(len(p))-l.max/2:]
	}
	if l.size+int64(len(p)) > l.max {
		if err := l.shrink(); err != nil {
			return 0, err
		}
	}
	w, err := l.f.WriteAt(p, l.size)
	l.size += int64(w)
	if err != nil {
		return 0, err
	}
	return n, nil
}

// shrink keeps the newer half of the file.
func (l *taskLog) shrink() error {
	keep := l.max / 2
	if keep > l.size {
		keep = l.size
	}
	buf := make([]byte, keep)
	if _, err := l.f.ReadAt(buf, l.size-keep); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if _, err := l.f.WriteAt(buf, 0); err != nil {
		return err
	}
	if err := l.f.Truncate(keep); err != nil {
		return err
	}
	l.size = keep
	return nil
}

func (l *taskLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

// CloseOwned stops every running task sessionKey owns and, with archive,
// archives the ended ones not archived yet, each with a receipt, so that
// nothing of it is carried over again.
func (b *Background) CloseOwned(ctx context.Context, sessionKey, reason, by string, archive bool) ([]bot.Receipt, error) {
	var out []bot.Receipt
	f := bot.TaskFilter{OwnerSessionKey: sessionKey, Unarchived: true, Limit: 1000}
	if !archive {
		f.Open = true
	}
	for {
		ts, next, err := b.opts.Store.ListTasks(ctx, f)
		if err != nil {
			return out, err
		}
		for _, t := range ts {
			if t.Status.Open() {
				stopped, err := b.Stop(ctx, t.ID, reason, by)
				if err != nil {
					return out, err
				}
				if stopped.Receipt != nil && stopped.Receipt.Action == bot.ReceiptStopped && stopped.Status == bot.TaskStopped {
					out = append(out, *stopped.Receipt)
				}
			}
			if !archive {
				continue
			}
			now := b.opts.Now().UTC()
			var receipt *bot.Receipt
			_, err := b.opts.Store.UpdateTask(ctx, t.ID, func(bt *bot.BackgroundTask) error {
				if bt.ArchivedAt != nil {
					return errTaskEnded
				}
				bt.ArchivedAt = &now
				if bt.Receipt == nil {
					bt.Receipt = &bot.Receipt{RecordID: bt.ID, Kind: bot.KindBackgroundTask, Action: bot.ReceiptArchived,
						PreviousStatus: string(bt.Status), Reason: reason, By: by, Owner: bt.Owner, Creator: bt.Creator, At: now}
					receipt = bt.Receipt
				}
				return nil
			})
			switch {
			case err == nil && receipt != nil:
				out = append(out, *receipt)
			case err != nil && !errors.Is(err, errTaskEnded):
				return out, err
			}
		}
		if next == "" {
			return out, nil
		}
		f.Cursor = next
	}
}
