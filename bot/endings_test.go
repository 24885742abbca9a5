package bot_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// statusAndReply are the thread's status and reply as the outbox holds
// them now.
func statusAndReply(t *testing.T, store bot.Store, thread string) (status, reply string) {
	t.Helper()
	msgs, err := store.ListOutbox(context.Background(), bot.LocalThread(thread).Key())
	require.NoError(t, err)
	for _, m := range msgs {
		switch m.Kind {
		case bot.OutboxStatus:
			status = m.Text
		case bot.OutboxReply:
			reply = m.Text
		}
	}
	return status, reply
}

// A person cancels a run that is failing at that moment (the cancel is
// accepted, and the run fails before its lease renewal learns of it): the
// work item ends cancelled, as the person was told, and the thread says
// the run had failed already. It never reads "could not finish".
func TestACancelThatOvertakesAFailingRunEndsItCancelledSayingItHadFailed(t *testing.T) {
	store := openStore(t, t.TempDir())
	started, fail := make(chan struct{}), make(chan struct{})
	runner := runnerFunc(func(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
		close(started)
		<-fail
		return bot.RunResult{Status: bot.ResultError, Error: "the model server answered 500"}, nil
	})
	// A lease of an hour: no renewal comes before the run's end.
	c := startCore(t, store, coreOpts{runner: runner, lease: time.Hour})
	wi := c.send(t, "t1", "fix it")
	<-started
	_, job, err := store.CancelWorkItem(context.Background(), wi.ID, bot.Cancelled{By: "ana", Reason: "wrong repo"})
	require.NoError(t, err)
	require.NotNil(t, job, "the cancel was accepted for the running job")
	close(fail)

	got := c.waitFinished(t, wi.ID)
	require.Equal(t, bot.StatusCancelled, got.Status)
	require.Equal(t, "cancelled by ana: wrong repo", got.Error)
	status, reply := statusAndReply(t, store, "t1")
	require.True(t, strings.HasPrefix(status, "🛑 triage stopped "+wi.ID), status)
	require.Contains(t, status, "cancelled by ana: wrong repo; it had failed already: the model server answered 500")
	require.Equal(t, "triage stopped working on "+wi.ID+": cancelled by ana: wrong repo; it had failed already: the model server answered 500", reply)
	jobs, err := store.ListJobs(context.Background(), wi.ID)
	require.NoError(t, err)
	require.Len(t, jobs, 1, "a cancelled run is not retried")
}

// A run the daemon's shutdown cuts short is handed back: its status says
// it resumes when the daemon starts again rather than go on saying the
// agent works, and the run after the restart replaces it.
func TestAHandedBackRunsStatusSaysItWillResume(t *testing.T) {
	store := openStore(t, t.TempDir())
	started := make(chan struct{})
	runner := runnerFunc(func(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
		close(started)
		<-ctx.Done()
		return bot.RunResult{}, ctx.Err()
	})
	c := startCore(t, store, coreOpts{runner: runner, grace: 50 * time.Millisecond})
	wi := c.send(t, "t1", "long job")
	<-started
	c.stop()
	status, reply := statusAndReply(t, store, "t1")
	require.True(t, strings.HasPrefix(status, "⏸ triage paused "+wi.ID), status)
	require.Contains(t, status, "the daemon is shutting down; the work resumes when it starts again")
	require.Empty(t, reply)

	done := runnerFunc(func(context.Context, bot.RunRequest, bot.Progress) (bot.RunResult, error) {
		return bot.RunResult{Status: bot.ResultSuccess, Reply: "finished after restart"}, nil
	})
	c2 := startCore(t, store, coreOpts{runner: done})
	require.Equal(t, "finished after restart", c2.waitFinished(t, wi.ID).Summary)
	status, reply = statusAndReply(t, store, "t1")
	require.True(t, strings.HasPrefix(status, "✅ triage finished "+wi.ID), status)
	require.Equal(t, "finished after restart", reply)
}

// A person cancels a run as the daemon shuts down (the cancel is stored,
// and the shutdown reaches the run before its lease renewal does): the
// job is not handed back to run again after the restart; it ends
// cancelled, as the person was told.
func TestACancelRacingAShutdownIsNotHandedBack(t *testing.T) {
	store := openStore(t, t.TempDir())
	started := make(chan struct{})
	runner := runnerFunc(func(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
		close(started)
		<-ctx.Done()
		return bot.RunResult{}, ctx.Err()
	})
	c := startCore(t, store, coreOpts{runner: runner, lease: time.Hour, grace: 50 * time.Millisecond})
	wi := c.send(t, "t1", "long job")
	<-started
	_, job, err := store.CancelWorkItem(context.Background(), wi.ID, bot.Cancelled{By: "ana", Reason: "not needed"})
	require.NoError(t, err)
	require.NotNil(t, job)
	c.stop()

	got, err := store.GetWorkItem(context.Background(), wi.ID)
	require.NoError(t, err)
	require.Equal(t, bot.StatusCancelled, got.Status)
	require.Equal(t, "cancelled by ana: not needed", got.Error)
	status, reply := statusAndReply(t, store, "t1")
	require.True(t, strings.HasPrefix(status, "🛑 triage stopped "+wi.ID), status)
	require.Equal(t, "triage stopped working on "+wi.ID+": cancelled by ana: not needed", reply)
	depth, err := store.QueueDepth(context.Background())
	require.NoError(t, err)
	require.Zero(t, depth, "nothing is left to run after the restart")
}

// A person cancels a running work item and the daemon running it is
// killed before its lease renewal learns of it: after the restart the
// work item ends cancelled, told in its thread, and does not run again.
func TestACancelledWorkItemWhoseWorkerDiedIsNotRunAgain(t *testing.T) {
	store := openStore(t, t.TempDir())
	intake := bot.NewIntake(bot.IntakeOptions{Store: store, Router: toAgent("triage")})
	res, err := intake.Ingest(context.Background(), &bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Text: "x", Thread: bot.LocalThread("t1")})
	require.NoError(t, err)
	// A worker of a process that is then killed: it claims and never finishes.
	claim, err := store.ClaimNext(context.Background(), bot.ClaimRequest{Owner: "dead", Now: time.Now(), Lease: 50 * time.Millisecond, MaxAttempts: 3})
	require.NoError(t, err)
	require.NotNil(t, claim.Job)
	_, _, err = store.CancelWorkItem(context.Background(), res.WorkItem.ID, bot.Cancelled{By: "ana", Reason: "not needed"})
	require.NoError(t, err)

	runner := runnerFunc(func(context.Context, bot.RunRequest, bot.Progress) (bot.RunResult, error) {
		t.Error("the cancelled work item ran again")
		return bot.RunResult{Status: bot.ResultSuccess}, nil
	})
	c := startCore(t, store, coreOpts{runner: runner})
	wi := c.waitFinished(t, res.WorkItem.ID)
	require.Equal(t, bot.StatusCancelled, wi.Status)
	require.Equal(t, "cancelled by ana: not needed", wi.Error)
	status, reply := statusAndReply(t, store, "t1")
	require.True(t, strings.HasPrefix(status, "🛑 triage stopped "+wi.ID), status)
	require.Equal(t, "triage stopped working on "+wi.ID+": cancelled by ana: not needed", reply)
}

// A subagent's record is cancelled (by a person, or by its parent) as its
// run finishes: the store ends its work item cancelled, and the
// dispatcher counts and logs it so, not as succeeded.
func TestAChildCancelledAsItFinishedIsCountedCancelled(t *testing.T) {
	store := openStore(t, t.TempDir())
	children := make(chan string, 1)
	runner := runnerFunc(func(ctx context.Context, req bot.RunRequest, _ bot.Progress) (bot.RunResult, error) {
		lead := req.WorkItems[0]
		if !lead.IsChild() {
			spawned, err := store.SpawnChild(ctx, bot.SpawnRequest{
				Run: bot.ChildRun{
					Owner:       bot.Owner{SessionKey: req.Thread.Key(), AgentID: req.Agent},
					ParentLinks: bot.ParentLinks{WorkItemID: lead.ID, JobID: req.Job.ID}, RootWorkItemID: lead.ID,
					Agent: req.Agent, Task: "help", Depth: 1,
				},
				Thread: req.Thread, Now: time.Now(),
			})
			if err != nil {
				return bot.RunResult{}, err
			}
			children <- spawned.Run.ChildWorkItemID
			return bot.RunResult{Status: bot.ResultSuccess, Reply: "led"}, nil
		}
		rec, err := store.RunOfWorkItem(ctx, lead.ID)
		if err != nil {
			return bot.RunResult{}, err
		}
		// Cancelled as it finishes.
		if _, err := store.UpdateRun(ctx, rec.ID, func(c *bot.ChildRun) error {
			c.Status, c.Error = bot.RunCancelled, "cancelled by ana: not needed"
			c.Receipt = &bot.Receipt{RecordID: c.ID, Kind: string(c.Kind), Action: bot.ReceiptCancelled, Reason: "not needed", By: "ana", At: time.Now()}
			return nil
		}); err != nil {
			return bot.RunResult{}, err
		}
		return bot.RunResult{Status: bot.ResultSuccess, Reply: "helped", Records: bot.JobRecords{
			Run: &bot.RunEnd{ID: rec.ID, ParentWorkItemID: lead.ParentID, Status: bot.RunDone, Result: "helped", At: time.Now()},
		}}, nil
	})
	metrics := bot.NewMetrics(prometheus.NewRegistry())
	c := startCore(t, store, coreOpts{runner: runner, metrics: metrics})
	parent := c.send(t, "t1", "lead")
	require.Equal(t, bot.StatusDone, c.waitFinished(t, parent.ID).Status)
	child := c.waitFinished(t, <-children)
	require.Equal(t, bot.StatusCancelled, child.Status)
	require.Equal(t, "cancelled by ana: not needed", child.Error)
	c.stop() // every job's end is counted
	require.Equal(t, 1.0, testutil.ToFloat64(metrics.Jobs.WithLabelValues("cancelled")), "the child")
	require.Equal(t, 1.0, testutil.ToFloat64(metrics.Jobs.WithLabelValues("succeeded")), "the parent alone")
}

// releaseWatch is a queue that notes what a thread's status says when the
// dispatcher asks to give a job back.
type releaseWatch struct {
	bot.QueueStore
	store  bot.Store
	thread string
	status chan string
}

func (q releaseWatch) ReleaseJob(ctx context.Context, jobID, owner string, now time.Time, tell []bot.OutboxMessage) error {
	msgs, err := q.store.ListOutbox(ctx, bot.LocalThread(q.thread).Key())
	var status string
	for _, m := range msgs {
		if m.Kind == bot.OutboxStatus {
			status = m.Text
		}
	}
	q.status <- status
	if err != nil {
		return err
	}
	return q.QueueStore.ReleaseJob(ctx, jobID, owner, now, tell)
}

// A person cancels a run as the daemon shuts down: the thread never says
// the work resumes after the restart, not even for a moment before it
// says the run stopped, since it does not.
func TestACancelRacingAShutdownNeverSaysTheWorkResumes(t *testing.T) {
	store := openStore(t, t.TempDir())
	started := make(chan struct{})
	runner := runnerFunc(func(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
		close(started)
		<-ctx.Done()
		return bot.RunResult{}, ctx.Err()
	})
	seen := make(chan string, 1)
	c := startCore(t, store, coreOpts{runner: runner, lease: time.Hour, grace: 50 * time.Millisecond,
		queue: func(q bot.QueueStore) bot.QueueStore {
			return releaseWatch{QueueStore: q, store: store, thread: "t1", status: seen}
		}})
	wi := c.send(t, "t1", "long job")
	<-started
	_, _, err := store.CancelWorkItem(context.Background(), wi.ID, bot.Cancelled{By: "ana", Reason: "not needed"})
	require.NoError(t, err)
	c.stop()

	require.NotContains(t, <-seen, "resumes", "the status before the job was given back")
	status, _ := statusAndReply(t, store, "t1")
	require.True(t, strings.HasPrefix(status, "🛑 triage stopped "+wi.ID), status)
}

// finishOutage is a queue whose first ends of a job fail as a database
// that went away for a moment fails them.
type finishOutage struct {
	bot.QueueStore
	mu       sync.Mutex
	failures int
}

func (q *finishOutage) FinishJob(ctx context.Context, out bot.JobOutcome) error {
	q.mu.Lock()
	fail := q.failures > 0
	if fail {
		q.failures--
	}
	q.mu.Unlock()
	if fail {
		return bot.Errorf(bot.EUNAVAILABLE, "finish job: the database is not available: terminating connection due to administrator command")
	}
	return q.QueueStore.FinishJob(ctx, out)
}

// A run whose end cannot be written for a moment (the database restarting,
// its connection cut) writes it once the store answers again, holding its
// lease meanwhile: the work item ends as the run did, and does not run
// again when the lease would have run out.
func TestARunsEndIsWrittenOnceTheStoreAnswersAgain(t *testing.T) {
	store := openStore(t, t.TempDir())
	var runs atomic.Int32
	runner := runnerFunc(func(context.Context, bot.RunRequest, bot.Progress) (bot.RunResult, error) {
		runs.Add(1)
		return bot.RunResult{Status: bot.ResultSuccess, Reply: "shipped"}, nil
	})
	q := &finishOutage{failures: 4}
	c := startCore(t, store, coreOpts{runner: runner, lease: 300 * time.Millisecond,
		queue: func(s bot.QueueStore) bot.QueueStore { q.QueueStore = s; return q }})
	wi := c.send(t, "t1", "ship it")
	got := c.waitFinished(t, wi.ID)
	require.Equal(t, bot.StatusDone, got.Status)
	require.Equal(t, "shipped", got.Summary)
	require.Equal(t, int32(1), runs.Load(), "run once")
	jobs, err := store.ListJobs(context.Background(), wi.ID)
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	_, reply := statusAndReply(t, store, "t1")
	require.Equal(t, "shipped", reply)
}
