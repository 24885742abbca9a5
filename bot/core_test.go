package bot_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/integrations/local"
	"github.com/switchyard/switchyard/storage/bolt"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
)

// decideFunc routes every event with a function; the router has its own
// tests, these are about what happens after routing.
type decideFunc func(ev *bot.Event) bot.Route

func (f decideFunc) Route(ev *bot.Event) bot.Route { return f(ev) }

func toAgent(agent string) bot.Decider {
	return decideFunc(func(*bot.Event) bot.Route { return bot.Route{Agent: agent, Kind: bot.RouteDefault, Reason: "default"} })
}

// runnerFunc adapts a function to bot.Runner.
type runnerFunc func(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error)

func (f runnerFunc) Run(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
	return f(ctx, req, p)
}

// openStore opens the real store in dir; when the test ends it closes it
// and checks the file's consistency. A test may close the store itself to
// reopen the directory.
func openStore(t *testing.T, dir string) *bolt.Store {
	t.Helper()
	return bolttest.Open(t, dir)
}

// core is the pipeline wired as the daemon wires it, on a real store.
type core struct {
	store      *bolt.Store
	intake     *bot.Intake
	deliverer  *bot.Deliverer
	dispatcher *bot.Dispatcher
	reporter   *bot.Reporter
	stop       func()
}

type coreOpts struct {
	runner      bot.Runner
	workers     int // default 4
	grace       time.Duration
	lease       time.Duration
	maxAttempts int
	sinks       map[string]bot.Sink
	now         func() time.Time // the clock of the dispatcher and reporter
	refresh     time.Duration    // status refresh while running
	// noReact leaves 👀 out of the intake, as for work items made without
	// it (by a schedule, a hand-off): the reporter then makes sure of it.
	noReact bool
	// adopt and adoptWait are the dispatcher's Adopt and AdoptWait.
	adopt     func(context.Context, *bot.JobEnd) bool
	adoptWait time.Duration
	metrics   *bot.Metrics // the dispatcher's; nil counts nowhere a test sees
	// queue wraps the store as the dispatcher's queue; nil: the store.
	queue func(bot.QueueStore) bot.QueueStore
}

func startCore(t *testing.T, store *bolt.Store, o coreOpts) *core {
	t.Helper()
	if o.sinks == nil {
		o.sinks = map[string]bot.Sink{bot.SourceLocal: local.Sink{}}
	}
	c := &core{store: store}
	const editEvery = 50 * time.Millisecond
	c.deliverer = bot.NewDeliverer(bot.DelivererOptions{Store: store, Sinks: o.sinks, Poll: 20 * time.Millisecond, MinEditInterval: editEvery})
	rep := bot.NewReporter(bot.ReporterOptions{Outbox: store, Wake: c.deliverer.Wake, Now: o.now, Refresh: o.refresh, MinInterval: editEvery})
	c.reporter = rep
	var queue bot.QueueStore = store
	if o.queue != nil {
		queue = o.queue(store)
	}
	c.dispatcher = bot.NewDispatcher(bot.DispatcherOptions{
		Queue: queue, Items: store, Runner: o.runner, Reporter: rep,
		Workers: cmp.Or(o.workers, 4), Lease: o.lease, Grace: o.grace, Poll: 20 * time.Millisecond,
		MaxAttempts: o.maxAttempts, Now: o.now, Adopt: o.adopt, AdoptWait: o.adoptWait, Metrics: o.metrics,
	})
	c.intake = bot.NewIntake(bot.IntakeOptions{
		Store: store, Router: toAgent("triage"), React: !o.noReact, Wake: c.deliverer.Wake,
		Accepted: func(context.Context, *bot.WorkItem, *bot.Event) { c.dispatcher.Wake() },
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.dispatcher.Run(ctx) })
	dctx, dcancel := context.WithCancel(context.Background())
	wg.Go(func() { _ = c.deliverer.Run(dctx) })
	var once sync.Once
	c.stop = func() {
		once.Do(func() {
			cancel()
			time.Sleep(10 * time.Millisecond)
			dcancel()
			wg.Wait()
		})
	}
	t.Cleanup(c.stop)
	return c
}

func (c *core) send(t *testing.T, thread, text string) *bot.WorkItem {
	t.Helper()
	res, err := c.intake.Ingest(context.Background(), &bot.Event{
		Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Text: text, Thread: bot.LocalThread(thread),
	})
	require.NoError(t, err)
	require.NotNil(t, res.WorkItem)
	return res.WorkItem
}

func (c *core) waitFinished(t *testing.T, id string) *bot.WorkItem {
	t.Helper()
	var wi *bot.WorkItem
	require.Eventually(t, func() bool {
		var err error
		wi, err = c.store.GetWorkItem(context.Background(), id)
		require.NoError(t, err)
		return wi.Status.Finished()
	}, 10*time.Second, 10*time.Millisecond, "work item %s never finished", id)
	return wi
}

func (c *core) messages(t *testing.T, thread string) []local.ThreadMessage {
	t.Helper()
	msgs, err := c.store.ListOutbox(context.Background(), bot.LocalThread(thread).Key())
	require.NoError(t, err)
	return local.Visible(msgs)
}

func TestNoRuntimeIsReportedInTheThread(t *testing.T) {
	c := startCore(t, openStore(t, t.TempDir()), coreOpts{runner: bot.NoRuntime{}})
	wi := c.send(t, "default", "@triage hello")
	done := c.waitFinished(t, wi.ID)
	require.Equal(t, bot.StatusFailed, done.Status)
	require.Equal(t, "no agent runtime is configured", done.Error)

	require.Eventually(t, func() bool {
		msgs := c.messages(t, "default")
		return len(msgs) == 2 && msgs[0].Kind == "status" && msgs[1].Kind == "reply" &&
			msgs[1].Text == "triage could not finish "+wi.ID+": no agent runtime is configured"
	}, 5*time.Second, 10*time.Millisecond)
}

func TestStatusMessageIsEditedInPlaceThenSummarised(t *testing.T) {
	runner := runnerFunc(func(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
		for i := 1; i <= 3; i++ {
			p.Report(ctx, bot.ProgressEvent{Kind: bot.ProgressTurnStarted, Turn: i})
			time.Sleep(80 * time.Millisecond) // longer than the edit interval, so edits show
		}
		return bot.RunResult{Status: bot.ResultSuccess, Reply: "all done: " + req.WorkItems[0].Text}, nil
	})
	c := startCore(t, openStore(t, t.TempDir()), coreOpts{runner: runner})
	wi := c.send(t, "t1", "do it")
	require.Equal(t, bot.StatusDone, c.waitFinished(t, wi.ID).Status)

	require.Eventually(t, func() bool {
		msgs := c.messages(t, "t1")
		if len(msgs) != 2 {
			return false
		}
		status, reply := msgs[0], msgs[1]
		return status.ID == wi.ID+"/status" && status.Edits >= 1 &&
			reply.Text == "all done: do it" && reply.Edits == 0
	}, 5*time.Second, 10*time.Millisecond)
	msgs := c.messages(t, "t1")
	require.Contains(t, msgs[0].Text, "✅ triage finished "+wi.ID, "the last state always arrives")
}

func TestOneRunAtATimePerThreadAndLaterMessagesTogether(t *testing.T) {
	release := make(chan struct{})
	var (
		mu    sync.Mutex
		runs  [][]string // work item ids per run, thread t1
		other atomic.Bool
	)
	runner := runnerFunc(func(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
		if req.Thread.Name == "t2" {
			other.Store(true)
			return bot.RunResult{Status: bot.ResultSuccess, Reply: "ok"}, nil
		}
		var ids []string
		for _, wi := range req.WorkItems {
			ids = append(ids, wi.ID)
		}
		mu.Lock()
		runs = append(runs, ids)
		first := len(runs) == 1
		mu.Unlock()
		if first {
			<-release
		}
		return bot.RunResult{Status: bot.ResultSuccess, Reply: "ok"}, nil
	})
	c := startCore(t, openStore(t, t.TempDir()), coreOpts{runner: runner})
	first := c.send(t, "t1", "one")
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(runs) == 1 }, 5*time.Second, 5*time.Millisecond)
	second := c.send(t, "t1", "two")
	third := c.send(t, "t1", "three")
	c.send(t, "t2", "elsewhere")
	require.Eventually(t, other.Load, 5*time.Second, 5*time.Millisecond, "another thread is not held up")
	mu.Lock()
	require.Len(t, runs, 1, "no second run of t1 while the first is active")
	mu.Unlock()
	close(release)
	c.waitFinished(t, third.ID)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, [][]string{{first.ID}, {second.ID, third.ID}}, runs,
		"messages that arrived during a run are handed to the next run together, in order")
}

func TestContinuationCarriesEarlierWork(t *testing.T) {
	var got bot.Continuation
	runner := runnerFunc(func(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
		got = req.Continuation
		return bot.RunResult{Status: bot.ResultSuccess, Reply: "answer to " + req.WorkItems[0].Text}, nil
	})
	c := startCore(t, openStore(t, t.TempDir()), coreOpts{runner: runner})
	c.waitFinished(t, c.send(t, "t1", "first question").ID)
	c.waitFinished(t, c.send(t, "t1", "second question").ID)
	require.Equal(t, "local:t1", got.SessionKey)
	require.Len(t, got.Earlier, 1)
	require.Equal(t, "first question", got.Earlier[0].Text)
	require.Equal(t, "answer to first question", got.Earlier[0].Summary)
	require.Contains(t, got.Text(), "answer to first question")
}

// A run that failed after the agent said something is carried on with both:
// why it failed and what it said.
func TestContinuationCarriesWhyEarlierWorkFailed(t *testing.T) {
	var got bot.Continuation
	runner := runnerFunc(func(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
		got = req.Continuation
		return bot.RunResult{Status: bot.ResultError, Error: "the answer was cut off", Reply: "The fix is to"}, nil
	})
	c := startCore(t, openStore(t, t.TempDir()), coreOpts{runner: runner})
	c.waitFinished(t, c.send(t, "t1", "fix it").ID)
	c.waitFinished(t, c.send(t, "t1", "again").ID)
	require.Len(t, got.Earlier, 1)
	require.Equal(t, bot.StatusFailed, got.Earlier[0].Status)
	require.Equal(t, "the answer was cut off; it had said: The fix is to", got.Earlier[0].Summary)
}

func TestPanickingRunnerFailsTheJobNotTheDaemon(t *testing.T) {
	runner := runnerFunc(func(context.Context, bot.RunRequest, bot.Progress) (bot.RunResult, error) {
		panic("boom")
	})
	c := startCore(t, openStore(t, t.TempDir()), coreOpts{runner: runner})
	wi := c.waitFinished(t, c.send(t, "t1", "x").ID)
	require.Equal(t, bot.StatusFailed, wi.Status)
	require.Contains(t, wi.Error, "panicked: boom")
	// The pool still works.
	require.Equal(t, bot.StatusFailed, c.waitFinished(t, c.send(t, "t2", "y").ID).Status)
}

func TestExpiredLeaseIsReclaimedAndRetried(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, dir)
	intake := bot.NewIntake(bot.IntakeOptions{Store: store, Router: toAgent("triage")})
	res, err := intake.Ingest(context.Background(), &bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Text: "x", Thread: bot.LocalThread("t")})
	require.NoError(t, err)
	// A worker of a process that then dies: it claims and never finishes.
	claim, err := store.ClaimNext(context.Background(), bot.ClaimRequest{Owner: "dead", Now: time.Now(), Lease: 50 * time.Millisecond, MaxAttempts: 3})
	require.NoError(t, err)
	require.NotNil(t, claim.Job)

	var attempts []int
	runner := runnerFunc(func(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
		attempts = append(attempts, req.Job.Attempt)
		return bot.RunResult{Status: bot.ResultSuccess, Reply: "recovered"}, nil
	})
	c := startCore(t, store, coreOpts{runner: runner})
	wi := c.waitFinished(t, res.WorkItem.ID)
	require.Equal(t, bot.StatusDone, wi.Status)
	require.Equal(t, "recovered", wi.Summary)
	require.Equal(t, []int{2}, attempts)
}

func TestShutdownReleasesRunningJobs(t *testing.T) {
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
	got, err := store.GetWorkItem(context.Background(), wi.ID)
	require.NoError(t, err)
	require.Equal(t, bot.StatusQueued, got.Status, "a job cut short by shutdown is handed back, not failed")
	jobs, err := store.ListJobs(context.Background(), wi.ID)
	require.NoError(t, err)
	require.Equal(t, bot.JobReleased, jobs[len(jobs)-1].Status)

	// The next start runs it.
	done := runnerFunc(func(context.Context, bot.RunRequest, bot.Progress) (bot.RunResult, error) {
		return bot.RunResult{Status: bot.ResultSuccess, Reply: "finished after restart"}, nil
	})
	c2 := startCore(t, store, coreOpts{runner: done})
	require.Equal(t, "finished after restart", c2.waitFinished(t, wi.ID).Summary)
}

func TestACancelNobodyWasToldOfStopsTheRunAtItsLeaseRenewal(t *testing.T) {
	store := openStore(t, t.TempDir())
	started := make(chan struct{})
	var runs atomic.Int32
	runner := runnerFunc(func(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
		if runs.Add(1) == 1 {
			close(started)
		}
		<-ctx.Done()
		return bot.RunResult{}, context.Cause(ctx)
	})
	c := startCore(t, store, coreOpts{runner: runner, lease: 150 * time.Millisecond})
	wi := c.send(t, "t1", "long job")
	<-started
	// Cancelled in the store only, as by a replica whose notification
	// this one missed: the next renewal finds it.
	_, job, err := store.CancelWorkItem(context.Background(), wi.ID, bot.Cancelled{By: "ana", Reason: "wrong thread"})
	require.NoError(t, err)
	require.NotNil(t, job)

	got := c.waitFinished(t, wi.ID)
	require.Equal(t, bot.StatusCancelled, got.Status)
	require.Equal(t, "cancelled by ana: wrong thread", got.Error)
	jobs, err := store.ListJobs(context.Background(), wi.ID)
	require.NoError(t, err)
	require.Len(t, jobs, 1, "a cancelled run is not retried")
	require.Equal(t, int32(1), runs.Load())
	msgs, err := store.ListOutbox(context.Background(), bot.LocalThread("t1").Key())
	require.NoError(t, err)
	var status string
	for _, m := range msgs {
		if m.Kind == bot.OutboxStatus {
			status = m.Text
		}
	}
	require.Contains(t, status, "stopped "+wi.ID)
	require.Contains(t, status, "cancelled by ana: wrong thread")
}

// flakySink fails as told, then delivers.
type flakySink struct {
	mu        sync.Mutex
	failures  []error
	delivered []bot.OutboxMessage
}

func (s *flakySink) Deliver(_ context.Context, msg bot.OutboxMessage) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failures) > 0 {
		err := s.failures[0]
		s.failures = s.failures[1:]
		return "", err
	}
	s.delivered = append(s.delivered, msg)
	return "remote-" + msg.Key, nil
}

func (s *flakySink) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.delivered) }

func TestDelivererRetriesHonoursRetryAfterAndGivesUpOnPermanent(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	now := time.Now()
	clock := func() time.Time { return now }
	sink := &flakySink{failures: []error{
		errors.New("connection reset"),
		&bot.DeliveryError{Err: errors.New("429"), RetryAfter: 30 * time.Second},
	}}
	d := bot.NewDeliverer(bot.DelivererOptions{Store: store, Sinks: map[string]bot.Sink{"slack": sink}, Now: clock})
	th := bot.SlackThread("T", "C", "1.1")
	_, err := store.Enqueue(ctx, bot.OutboxMessage{Key: "wi_1/reply", Thread: th, Kind: bot.OutboxReply, Text: "hi"})
	require.NoError(t, err)

	_, err = d.DeliverDue(ctx) // transient failure: backoff 1s
	require.NoError(t, err)
	m, err := store.GetOutbox(ctx, "wi_1/reply")
	require.NoError(t, err)
	require.Equal(t, 1, m.Attempts)
	require.Equal(t, "connection reset", m.LastError)

	now = now.Add(time.Second)
	_, err = d.DeliverDue(ctx) // 429: wait what the platform said
	require.NoError(t, err)
	m, err = store.GetOutbox(ctx, "wi_1/reply")
	require.NoError(t, err)
	require.WithinDuration(t, now.Add(30*time.Second), m.NextAttemptAt, time.Millisecond)

	now = now.Add(29 * time.Second)
	n, err := d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "not before Retry-After")
	now = now.Add(time.Second)
	_, err = d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sink.count())
	m, err = store.GetOutbox(ctx, "wi_1/reply")
	require.NoError(t, err)
	require.False(t, m.Pending())
	require.Equal(t, "remote-wi_1/reply", m.RemoteID)

	sink.failures = []error{&bot.DeliveryError{Err: errors.New("channel_not_found"), Permanent: true}}
	_, err = store.Enqueue(ctx, bot.OutboxMessage{Key: "wi_2/reply", Thread: th, Kind: bot.OutboxReply, Text: "x"})
	require.NoError(t, err)
	_, err = d.DeliverDue(ctx)
	require.NoError(t, err)
	m, err = store.GetOutbox(ctx, "wi_2/reply")
	require.NoError(t, err)
	require.True(t, m.Dead)
	_, dead, err := store.OutboxPending(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, dead)
}

func TestDelivererThrottlesEditsAndSendsTheLastState(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	now := time.Now()
	sink := &flakySink{}
	d := bot.NewDeliverer(bot.DelivererOptions{Store: store, Sinks: map[string]bot.Sink{"slack": sink}, Now: func() time.Time { return now }})
	th := bot.SlackThread("T", "C", "1.1")
	enqueue := func(text string) {
		_, err := store.Enqueue(ctx, bot.OutboxMessage{Key: "wi_1/status", Thread: th, Kind: bot.OutboxStatus, Text: text})
		require.NoError(t, err)
	}
	enqueue("turn 1")
	_, err := d.DeliverDue(ctx)
	require.NoError(t, err)
	for i := 2; i <= 10; i++ {
		enqueue(fmt.Sprintf("turn %d", i))
		now = now.Add(50 * time.Millisecond)
		_, err := d.DeliverDue(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, 1, sink.count(), "at most one delivery a second per message")
	now = now.Add(time.Second)
	_, err = d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, sink.count())
	require.Equal(t, "turn 10", sink.delivered[1].Text, "the last state arrives")
	require.Equal(t, "remote-wi_1/status", sink.delivered[1].RemoteID, "an edit, not a new message")
}

func TestMessageForUnconfiguredSinkDiesVisibly(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	d := bot.NewDeliverer(bot.DelivererOptions{Store: store, Sinks: map[string]bot.Sink{}})
	_, err := store.Enqueue(ctx, bot.OutboxMessage{Key: "k", Thread: bot.GitHubThread("o", "r", 1), Kind: bot.OutboxReply, Text: "x"})
	require.NoError(t, err)
	_, err = d.DeliverDue(ctx)
	require.NoError(t, err)
	m, err := store.GetOutbox(ctx, "k")
	require.NoError(t, err)
	require.True(t, m.Dead)
	require.Contains(t, m.LastError, `no sink for "github" threads`)
}

func TestSchedulerNeitherSkipsNorDoubles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := openStore(t, dir)
	start := time.Date(2026, 11, 23, 10, 0, 30, 0, time.UTC)
	now := start
	newScheduler := func() *bot.Scheduler {
		intake := bot.NewIntake(bot.IntakeOptions{Store: store, Router: toAgent("unused"), Now: func() time.Time { return now }})
		s, err := bot.NewScheduler(bot.SchedulerOptions{
			Schedules: []bot.Schedule{{Name: "hourly-report", Spec: "@hourly", Agent: "ops", Thread: bot.LocalThread("reports"), Text: "report"}},
			Store:     store, Intake: intake, Now: func() time.Time { return now },
		})
		require.NoError(t, err)
		return s
	}
	count := func() int {
		items, _, err := store.ListWorkItems(ctx, bot.WorkItemFilter{Thread: "local:reports"})
		require.NoError(t, err)
		for _, wi := range items {
			require.Equal(t, "ops", wi.Route.Agent)
			require.Equal(t, `schedule "hourly-report"`, wi.Route.Reason)
			require.Equal(t, bot.Requester{Source: bot.SourceSchedule, ID: "hourly-report"}, wi.Requester)
		}
		return len(items)
	}

	s := newScheduler()
	next, err := s.Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC), next)
	require.Zero(t, count(), "a new schedule does not fire for the past")

	now = next
	_, err = s.Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, count())

	// A restart right after: nothing doubles.
	_, err = newScheduler().Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, count())

	// Down for three firings: each is made up once.
	now = now.Add(3*time.Hour + time.Minute)
	_, err = newScheduler().Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, count())
	_, err = newScheduler().Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, count())
}

// TestEverySchedulesKeepTheirTimesAcrossRestarts: an "@every" schedule
// counts from its last firing, so a restart between two firings does not
// push the next one back.
func TestEverySchedulesKeepTheirTimesAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	now := time.Date(2026, 11, 23, 10, 0, 30, 0, time.UTC)
	newScheduler := func() *bot.Scheduler {
		intake := bot.NewIntake(bot.IntakeOptions{Store: store, Router: toAgent("unused"), Now: func() time.Time { return now }})
		s, err := bot.NewScheduler(bot.SchedulerOptions{
			Schedules: []bot.Schedule{{Name: "sweep", Spec: "@every 1h", Agent: "ops", Thread: bot.LocalThread("sweeps"), Text: "sweep"}},
			Store:     store, Intake: intake, Now: func() time.Time { return now },
		})
		require.NoError(t, err)
		return s
	}
	firings := func() []string {
		items, _, err := store.ListWorkItems(ctx, bot.WorkItemFilter{Thread: "local:sweeps"})
		require.NoError(t, err)
		var out []string
		for _, wi := range slices.Backward(items) {
			out = append(out, wi.DeliveryID)
		}
		return out
	}
	at := func(h, m, s int) time.Time { return time.Date(2026, 11, 23, h, m, s, 0, time.UTC) }

	next, err := newScheduler().Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, at(11, 0, 30), next)
	now = next
	next, err = newScheduler().Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, at(12, 0, 30), next)

	// A restart half-way: the next firing is still an hour after the last.
	now = at(11, 30, 0)
	next, err = newScheduler().Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, at(12, 0, 30), next, "not an hour after the restart")
	now = next
	next, err = newScheduler().Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, at(13, 0, 30), next)

	// Down for two firings: both are made up, and the rhythm stays.
	now = at(15, 10, 0)
	next, err = newScheduler().Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, at(16, 0, 30), next)
	require.Equal(t, []string{
		"sweep@2026-11-23T11:00:30Z", "sweep@2026-11-23T12:00:30Z", "sweep@2026-11-23T13:00:30Z",
		"sweep@2026-11-23T14:00:30Z", "sweep@2026-11-23T15:00:30Z",
	}, firings())
}

func TestReloadedSchedulesCountFromTheReload(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	now := time.Date(2026, 11, 23, 9, 0, 30, 0, time.UTC)
	clock := func() time.Time { return now }
	intake := bot.NewIntake(bot.IntakeOptions{Store: store, Router: toAgent("unused"), Now: clock})
	daily := bot.Schedule{Name: "digest", Spec: "0 9 * * *", Agent: "docs", Thread: bot.LocalThread("digest"), Text: "digest"}
	report := bot.Schedule{Name: "report", Spec: "@hourly", Agent: "ops", Thread: bot.LocalThread("report"), Text: "report"}
	s, err := bot.NewScheduler(bot.SchedulerOptions{Schedules: []bot.Schedule{daily, report}, Store: store, Intake: intake, Now: clock})
	require.NoError(t, err)
	count := func(thread string) int {
		items, _, err := store.ListWorkItems(ctx, bot.WorkItemFilter{Thread: "local:" + thread})
		require.NoError(t, err)
		return len(items)
	}
	_, err = s.Tick(ctx) // both start counting from 09:00:30
	require.NoError(t, err)

	// At 14:10 the digest becomes hourly and the report is removed.
	now = time.Date(2026, 11, 23, 14, 10, 0, 0, time.UTC)
	daily.Spec = "@hourly"
	commit, err := s.Prepare([]bot.Schedule{daily})
	require.NoError(t, err)
	commit()
	next, err := s.Tick(ctx)
	require.NoError(t, err)
	require.Zero(t, count("digest"), "the new spec's firings before the reload are not made up")
	require.Zero(t, count("report"), "a removed schedule fires no more")
	require.Equal(t, time.Date(2026, 11, 23, 15, 0, 0, 0, time.UTC), next)

	now = next
	_, err = s.Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, count("digest"))

	// A reload that leaves a schedule as it is keeps its times.
	commit, err = s.Prepare([]bot.Schedule{daily, report})
	require.NoError(t, err)
	commit()
	now = now.Add(2 * time.Hour)
	_, err = s.Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, count("digest"), "16:00 and 17:00")

	_, err = s.Prepare([]bot.Schedule{{Name: "x", Spec: "61 * * * *"}})
	require.ErrorContains(t, err, `schedule "x": cron "61 * * * *"`)
}

func TestBadCronNamesTheSchedule(t *testing.T) {
	_, err := bot.NewScheduler(bot.SchedulerOptions{Schedules: []bot.Schedule{{Name: "nightly", Spec: "61 * * * *"}}})
	require.ErrorContains(t, err, `schedule "nightly": cron "61 * * * *"`)
}

func TestDuplicateDeliveryChangesNothing(t *testing.T) {
	store := openStore(t, t.TempDir())
	var accepted atomic.Int32
	intake := bot.NewIntake(bot.IntakeOptions{Store: store, Router: toAgent("triage"),
		Accepted: func(context.Context, *bot.WorkItem, *bot.Event) { accepted.Add(1) }})
	var wg sync.WaitGroup
	ids := make([]string, 100)
	dups := make([]bool, 100)
	for i := range 100 {
		wg.Go(func() {
			res, err := intake.Ingest(context.Background(), &bot.Event{
				Source: bot.SourceLocal, Kind: bot.KindLocalMessage, DeliveryID: "client-1", Text: "x", Thread: bot.LocalThread("t"),
			})
			require.NoError(t, err)
			ids[i], dups[i] = res.WorkItem.ID, res.Duplicate
		})
	}
	wg.Wait()
	require.Equal(t, int32(1), accepted.Load())
	require.Len(t, slices.Compact(slices.Sorted(slices.Values(ids))), 1)
	require.Equal(t, 99, count(dups, true))
}

func count[T comparable](s []T, v T) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

func TestThreadsKeepTheirAgent(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	router, err := bot.NewRouter(bot.RoutingConfig{
		Rules: []bot.Rule{{Name: "outages", Agent: "ops", Match: bot.Match{Text: `(?i)\boutage\b`}}},
	}, []bot.AgentInfo{{Name: "coder"}, {Name: "ops"}, {Name: "reviewer", Keywords: []string{"review"}}, {Name: "triage"}})
	require.NoError(t, err)
	now := time.Date(2025, 3, 4, 9, 0, 0, 0, time.UTC)
	intake := bot.NewIntake(bot.IntakeOptions{Store: store, Router: router, Threads: store, ThreadWindow: time.Hour,
		Now: func() time.Time { return now }})
	send := func(thread, text string) *bot.WorkItem {
		t.Helper()
		res, err := intake.Ingest(ctx, &bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Text: text, Thread: bot.LocalThread(thread)})
		require.NoError(t, err)
		return res.WorkItem
	}
	finishAll := func() {
		t.Helper()
		for {
			claim, err := store.ClaimNext(ctx, bot.ClaimRequest{Owner: "w", Now: now, Lease: time.Minute, MaxAttempts: 3})
			require.NoError(t, err)
			if claim.Job == nil {
				return
			}
			require.NoError(t, store.FinishJob(ctx, bot.JobOutcome{JobID: claim.Job.ID, Owner: "w", Now: now, Success: true, Summary: "done"}))
		}
	}

	first := send("t", "@coder fix the flaky login test")
	require.Equal(t, "coder", first.Route.Agent)

	// While the coder works, what nobody addressed elsewhere is the coder's.
	next := send("t", "the signup test too, and ask for a review")
	require.Equal(t, bot.Route{Agent: "coder", Kind: bot.RouteThread, Reason: "thread: @coder is working here (" + first.ID + ")"}, next.Route)
	// A mention, a command or a rule asks for another agent explicitly.
	require.Equal(t, "reviewer", send("t", "@reviewer have a look").Route.Agent)
	require.Equal(t, "ops", send("t", "/deploy when done").Route.Agent)
	require.Equal(t, "ops", send("t", "is this an outage?").Route.Agent)
	// Other threads route as usual.
	require.Equal(t, "reviewer", send("u", "please review").Route.Agent)

	// Finished a little while ago: a reply still goes to the last agent.
	finishAll()
	now = now.Add(50 * time.Minute)
	items, _, err := store.ListWorkItems(ctx, bot.WorkItemFilter{Thread: "local:t", Limit: 1})
	require.NoError(t, err)
	last := send("t", "one more thing")
	require.Equal(t, bot.Route{Agent: "ops", Kind: bot.RouteThread, Reason: "thread: @ops answered here (" + items[0].ID + ")"}, last.Route,
		"the latest work in the thread was ops'")
	require.Equal(t, "thread: @ops is working here ("+last.ID+")", send("t", "thanks").Route.Reason)
	finishAll()

	// Past the window the thread routes as usual again.
	now = now.Add(61 * time.Minute)
	require.Equal(t, bot.Route{Agent: "triage", Kind: bot.RouteDefault, Reason: "default"}, send("t", "hello again").Route)
}

func TestHandedOffThreadKeepsItsOwnerWhileItWorks(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	intake := bot.NewIntake(bot.IntakeOptions{Store: store, Router: toAgent("triage"), Threads: store})
	send := func(text string) *bot.WorkItem {
		res, err := intake.Ingest(ctx, &bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Text: text, Thread: bot.LocalThread("t")})
		require.NoError(t, err)
		return res.WorkItem
	}
	first := send("the site is down")
	send("who is on call?")
	_, err := store.RerouteWorkItem(ctx, first.ID, bot.Hop{From: "triage", To: "ops", Reason: "incident", At: time.Now()})
	require.NoError(t, err)

	// The handed-off work wins over newer unfinished work in the thread.
	next := send("any news?")
	require.Equal(t, "ops", next.Route.Agent)
	require.Equal(t, bot.RouteHandoff, next.Route.Kind)
	require.Equal(t, "handoff: @ops owns this thread ("+first.ID+")", next.Route.Reason)
}

// A thread keeps its agent only while that agent exists and only for work
// since the thread was last reset: a reload that takes the agent out of
// the config, or a reset, lets the next reply route afresh, and the
// reason says which agent is gone.
func TestThreadsForgetAgentsTheConfigDroppedAndWorkBeforeAReset(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	agents := []bot.AgentInfo{{Name: "coder"}, {Name: "ops"}, {Name: "triage"}}
	router, err := bot.NewRouter(bot.RoutingConfig{}, agents)
	require.NoError(t, err)
	now := time.Date(2025, 3, 4, 9, 0, 0, 0, time.UTC)
	intake := bot.NewIntake(bot.IntakeOptions{Store: store, Router: router, Threads: store, Resets: store,
		Now: func() time.Time { return now }})
	send := func(thread, text string) *bot.WorkItem {
		t.Helper()
		res, err := intake.Ingest(ctx, &bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Text: text, Thread: bot.LocalThread(thread)})
		require.NoError(t, err)
		require.NotNil(t, res.WorkItem)
		return res.WorkItem
	}
	finishAll := func() {
		t.Helper()
		for {
			claim, err := store.ClaimNext(ctx, bot.ClaimRequest{Owner: "w", Now: now, Lease: time.Minute, MaxAttempts: 3})
			require.NoError(t, err)
			if claim.Job == nil {
				return
			}
			require.NoError(t, store.FinishJob(ctx, bot.JobOutcome{JobID: claim.Job.ID, Owner: "w", Now: now, Success: true, Summary: "done"}))
		}
	}

	t.Run("an agent a reload removed", func(t *testing.T) {
		send("gone", "@coder fix the flaky login test")
		require.Equal(t, "coder", send("gone", "and the signup test").Route.Agent)

		// The coder leaves the config while its work is under way.
		smaller, err := bot.NewRouter(bot.RoutingConfig{}, []bot.AgentInfo{{Name: "ops"}, {Name: "triage"}})
		require.NoError(t, err)
		intake.Use(smaller, 0, 0)
		t.Cleanup(func() { intake.Use(router, 0, 0) })
		next := send("gone", "any news?")
		require.Equal(t, "triage", next.Route.Agent, "no reply goes to an agent that is not there to run it")
		require.Equal(t, bot.RouteDefault, next.Route.Kind)
		require.Equal(t, "default; @coder, who had work in this thread, is no agent now", next.Route.Reason)
		// The agent now working there keeps it.
		require.Equal(t, bot.Route{Agent: "triage", Kind: bot.RouteThread, Reason: "thread: @triage is working here (" + next.ID + ")"},
			send("gone", "hello?").Route)
		finishAll()
	})

	t.Run("a reset thread", func(t *testing.T) {
		first := send("reset", "@ops roll back the release")
		finishAll()
		now = now.Add(time.Minute)
		require.Equal(t, "thread: @ops answered here ("+first.ID+")", send("reset", "thanks").Route.Reason)
		finishAll()

		now = now.Add(time.Minute)
		require.NoError(t, store.MarkThreadReset(ctx, bot.LocalThread("reset").Key(), now))
		now = now.Add(time.Minute)
		next := send("reset", "let's start over: the deploy script")
		require.Equal(t, bot.Route{Agent: "triage", Kind: bot.RouteDefault, Reason: "default"}, next.Route,
			"nothing from before the reset carries over, its agent neither")

		// Work still under way when the thread is reset keeps its agent:
		// a reset cancels no job.
		now = now.Add(time.Minute)
		busy := send("reset", "@coder look at the deploy script")
		require.NoError(t, store.MarkThreadReset(ctx, bot.LocalThread("reset").Key(), now.Add(time.Second)))
		now = now.Add(time.Minute)
		require.Equal(t, "thread: @coder is working here ("+busy.ID+")", send("reset", "and its tests").Route.Reason)
	})
}
