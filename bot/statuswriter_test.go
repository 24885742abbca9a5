package bot_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// watchedOutbox is a store's outbox that tells the test of each status
// enqueued, and which state it said.
type watchedOutbox struct {
	bot.Outboxer
	mu     sync.Mutex
	states []string
	wrote  chan struct{}
}

func (o *watchedOutbox) note(msgs ...bot.OutboxMessage) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range msgs {
		if m.Kind == bot.OutboxStatus {
			o.states = append(o.states, m.Status.State)
		}
	}
}

func (o *watchedOutbox) Enqueue(ctx context.Context, msg bot.OutboxMessage) (bot.OutboxMessage, error) {
	m, err := o.Outboxer.Enqueue(ctx, msg)
	o.note(msg)
	if o.wrote != nil {
		o.wrote <- struct{}{}
	}
	return m, err
}

func (o *watchedOutbox) EnqueueAll(ctx context.Context, msgs []bot.OutboxMessage) error {
	err := o.Outboxer.EnqueueAll(ctx, msgs)
	o.note(msgs...)
	return err
}

func (o *watchedOutbox) written() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.states...)
}

// errorCount is a log handler that counts the errors logged.
type errorCount struct {
	slog.Handler
	n *atomic.Int32
}

func (h errorCount) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		h.n.Add(1)
	}
	return nil
}

func (h errorCount) Enabled(context.Context, slog.Level) bool { return true }

// claimedJob ingests a message in a local thread and claims its job, as a
// worker would, for a Reporter to report on.
func claimedJob(t *testing.T, store bot.Store, thread string) (*bot.Job, []bot.WorkItem) {
	t.Helper()
	ctx := context.Background()
	intake := bot.NewIntake(bot.IntakeOptions{Store: store, Router: toAgent("triage")})
	_, err := intake.Ingest(ctx, &bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Text: "x", Thread: bot.LocalThread(thread)})
	require.NoError(t, err)
	claim, err := store.ClaimNext(ctx, bot.ClaimRequest{Owner: "w-0", Now: time.Now(), Lease: time.Hour, MaxAttempts: 3})
	require.NoError(t, err)
	require.NotNil(t, claim.Job)
	return claim.Job, claim.WorkItems
}

// settledGoroutines waits for the goroutine count to come down to at most
// want, and returns it.
func settledGoroutines(want int) int {
	n := runtime.NumGoroutine()
	for i := 0; i < 200 && n > want; i++ {
		time.Sleep(10 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	return n
}

// TestABurstOfProgressEndsWithTheFinalStatusAndNoGoroutineLeft reports
// thousands of progress events from many goroutines while the run
// finishes, over and over: the last status written says how the run
// ended, nothing is written after it, and no goroutine is left behind.
func TestABurstOfProgressEndsWithTheFinalStatusAndNoGoroutineLeft(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	before := runtime.NumGoroutine()
	for round := range 20 {
		job, items := claimedJob(t, store, fmt.Sprintf("burst-%d", round))
		out := &watchedOutbox{Outboxer: store}
		rep := bot.NewReporter(bot.ReporterOptions{Outbox: out, Refresh: time.Millisecond})
		run := rep.Start(ctx, job, items)
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 500 {
					run.Report(ctx, bot.ProgressEvent{Kind: bot.ProgressToolCalled, Text: fmt.Sprintf("step %d.%d", g, i)})
				}
			})
		}
		if round%2 == 0 {
			wg.Wait() // finished right after the last event
		}
		require.NoError(t, out.EnqueueAll(ctx, run.Finish(round%3 != 0, "ok", "it broke")))
		wg.Wait()
		run.Close()
		states := out.written()
		require.NotEmpty(t, states)
		last := states[len(states)-1]
		require.Contains(t, []string{"done", "failed"}, last, "round %d: %v", round, states[max(0, len(states)-5):])
		text := statusText(t, store, items[0].ID+"/status")
		require.False(t, strings.HasPrefix(text, "⏳"), "round %d: the status stayed running: %s", round, text)
	}
	require.LessOrEqual(t, settledGoroutines(before), before, "the runs' status writers are gone")
}

// TestACancelledRunsStatusWriterStopsQuietly cancels runs while progress
// events keep coming: the status ends cancelled, and the writer stopping
// with the run's context logs no failed write.
func TestACancelledRunsStatusWriterStopsQuietly(t *testing.T) {
	store := openStore(t, t.TempDir())
	var errs atomic.Int32
	before := runtime.NumGoroutine()
	for round := range 50 {
		job, items := claimedJob(t, store, fmt.Sprintf("cancel-%d", round))
		rep := bot.NewReporter(bot.ReporterOptions{Outbox: store, Logger: slog.New(errorCount{n: &errs})})
		runCtx, cancel := context.WithCancelCause(context.Background())
		run := rep.Start(runCtx, job, items)
		c := &bot.Cancelled{By: "alice", Reason: "wrong repo", At: time.Now()}
		cancel(c)
		for i := range 50 {
			run.Report(runCtx, bot.ProgressEvent{Kind: bot.ProgressToolFinished, Text: fmt.Sprintf("bash %d finished", i)})
		}
		require.NoError(t, store.EnqueueAll(context.Background(), run.Cancelled(c, "")))
		require.True(t, strings.HasPrefix(statusText(t, store, items[0].ID+"/status"), "🛑 triage stopped "+items[0].ID),
			statusText(t, store, items[0].ID+"/status"))
	}
	require.Zero(t, errs.Load(), "a run's status writer logged a failed write when the run was cancelled")
	require.LessOrEqual(t, settledGoroutines(before), before)
}

// TestALateRunningStatusOfAReplicaThatLostTheJobDoesNotUndoTheEnd: a
// replica whose lease ran out (it was paused) still reports progress
// before it notices; the replica that took the job over has finished it
// meanwhile. The status stays what the second run ended with.
func TestALateRunningStatusOfAReplicaThatLostTheJobDoesNotUndoTheEnd(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	job, items := claimedJob(t, store, "replicas")
	key := items[0].ID + "/status"

	stale := &watchedOutbox{Outboxer: store, wrote: make(chan struct{}, 16)}
	first := bot.NewReporter(bot.ReporterOptions{Outbox: stale, Refresh: time.Hour, MinInterval: time.Millisecond}).Start(ctx, job, items)
	defer first.Close()
	<-stale.wrote // its first status

	// The other replica's claim of the same work: the next attempt.
	taken := *job
	taken.ID, taken.Attempt, taken.Owner = job.ID+"-b", job.Attempt+1, "b-0"
	second := bot.NewReporter(bot.ReporterOptions{Outbox: store, Refresh: time.Hour}).Start(ctx, &taken, items)
	require.NoError(t, store.EnqueueAll(ctx, second.Finish(true, "all done", "")))
	final := statusText(t, store, key)
	require.True(t, strings.HasPrefix(final, "✅"), final)

	for range 3 {
		first.Report(ctx, bot.ProgressEvent{Kind: bot.ProgressToolCalled, Text: "still at it"})
		<-stale.wrote
		require.Equal(t, final, statusText(t, store, key), "a late running status of the first run replaced the end")
	}
	// Its own end, which its job cannot record and so never writes, would
	// not replace it either.
	require.NoError(t, store.EnqueueAll(ctx, first.Finish(false, "", "it broke")))
	require.Equal(t, final, statusText(t, store, key))
}

// TestAFastRunsStatusIsWrittenAtTheEditPace reports a stream of progress
// events for a while: the running status is written no more often than
// once every MinInterval, as the deliverer would send no more edits, and
// the latest state is the one written.
func TestAFastRunsStatusIsWrittenAtTheEditPace(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	job, items := claimedJob(t, store, "fast")
	const every = 40 * time.Millisecond
	out := &watchedOutbox{Outboxer: store, wrote: make(chan struct{}, 1<<16)}
	rep := bot.NewReporter(bot.ReporterOptions{Outbox: out, Refresh: time.Hour, MinInterval: every})
	start := time.Now()
	run := rep.Start(ctx, job, items)
	defer run.Close()
	events := 0
	for time.Since(start) < 10*every {
		events++
		run.Report(ctx, bot.ProgressEvent{Kind: bot.ProgressToolCalled, Text: fmt.Sprintf("step %d", events)})
		time.Sleep(100 * time.Microsecond)
	}
	last := fmt.Sprintf("step %d", events)
	require.Eventually(t, func() bool {
		return strings.HasSuffix(statusText(t, store, items[0].ID+"/status"), last)
	}, 5*time.Second, time.Millisecond, "the latest state is written")
	elapsed := time.Since(start)
	writes := len(out.written())
	// The start's status, then one write per interval at most.
	require.LessOrEqual(t, writes, 1+int(elapsed/every)+1, "%d events in %s gave %d writes", events, elapsed, writes)
	require.Greater(t, events, writes)
}

// stuckOutbox is an outbox whose single enqueues wait until it is let go,
// as a store under a long commit does.
type stuckOutbox struct {
	bot.Outboxer
	held  atomic.Bool
	letGo chan struct{}
}

func (o *stuckOutbox) Enqueue(ctx context.Context, msg bot.OutboxMessage) (bot.OutboxMessage, error) {
	if o.held.Load() {
		<-o.letGo
	}
	return o.Outboxer.Enqueue(ctx, msg)
}

// TestProgressNeverWaitsForAStatusWrite reports thousands of events while
// the store holds the status write under way: none of them waits for it,
// and once the store goes on the run ends with its final status.
func TestProgressNeverWaitsForAStatusWrite(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	job, items := claimedJob(t, store, "stuck")
	out := &stuckOutbox{Outboxer: store, letGo: make(chan struct{})}
	rep := bot.NewReporter(bot.ReporterOptions{Outbox: out, Refresh: time.Millisecond})
	run := rep.Start(ctx, job, items)
	out.held.Store(true) // from the first write after the start on
	reported := make(chan struct{})
	go func() {
		for i := range 5000 {
			run.Report(ctx, bot.ProgressEvent{Kind: bot.ProgressToolCalled, Text: fmt.Sprintf("step %d", i)})
		}
		close(reported)
	}()
	select {
	case <-reported:
	case <-time.After(time.Minute):
		t.Fatal("progress events waited for the status write the store held")
	}
	close(out.letGo)
	require.NoError(t, store.EnqueueAll(ctx, run.Finish(true, "ok", "")))
	require.True(t, strings.HasPrefix(statusText(t, store, items[0].ID+"/status"), "✅"))
}

// TestARunCancelledWhileWaitingForAPersonEndsCancelled: runs wait for an
// approval, holding no worker, while their status is refreshed every
// millisecond; a person cancels them. Each status ends saying so, and no
// refresh brings "working" back.
func TestARunCancelledWhileWaitingForAPersonEndsCancelled(t *testing.T) {
	runner := runnerFunc(func(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
		p.Report(ctx, bot.ProgressEvent{Kind: bot.ProgressToolCalled, Text: "waiting for approval of deploy"})
		err := bot.Await(ctx, func() error {
			<-ctx.Done()
			return context.Cause(ctx)
		})
		return bot.RunResult{}, err
	})
	store := openStore(t, t.TempDir())
	c := startCore(t, store, coreOpts{runner: runner, refresh: time.Millisecond, workers: 1})
	for i := range 10 {
		wi := c.send(t, fmt.Sprintf("approve-%d", i), "deploy, once someone approves")
		key := wi.ID + "/status"
		require.Eventually(t, func() bool {
			return strings.HasSuffix(statusText(t, store, key), "waiting for approval of deploy")
		}, 5*time.Second, time.Millisecond)
		_, job, err := store.CancelWorkItem(context.Background(), wi.ID, bot.Cancelled{By: "ana", Reason: "not today"})
		require.NoError(t, err)
		c.dispatcher.CheckJob(job.ID)
		require.Equal(t, bot.StatusCancelled, c.waitFinished(t, wi.ID).Status)
		want := "🛑 triage stopped " + wi.ID
		require.True(t, strings.HasPrefix(statusText(t, store, key), want), statusText(t, store, key))
		time.Sleep(20 * time.Millisecond) // twenty refreshes, were any left
		require.True(t, strings.HasPrefix(statusText(t, store, key), want), statusText(t, store, key))
	}
}

// activityOutbox is a store's outbox that tells the test of each running
// status enqueued, with the activity it said.
type activityOutbox struct {
	bot.Outboxer
	wrote chan string
}

func (o *activityOutbox) Enqueue(ctx context.Context, msg bot.OutboxMessage) (bot.OutboxMessage, error) {
	m, err := o.Outboxer.Enqueue(ctx, msg)
	if msg.Kind == bot.OutboxStatus && msg.Status.State == "running" {
		o.wrote <- msg.Status.Activity
	}
	return m, err
}

// TestABurstOfProgressIsOneWrite reports a burst of progress events while
// the writer waits out the edit pace, then nothing: the burst is one
// write, of its last event, and no second write says the same again.
func TestABurstOfProgressIsOneWrite(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	for round := range 5 {
		job, items := claimedJob(t, store, fmt.Sprintf("burst-once-%d", round))
		const every = 30 * time.Millisecond
		out := &activityOutbox{Outboxer: store, wrote: make(chan string, 1<<10)}
		rep := bot.NewReporter(bot.ReporterOptions{Outbox: out, Refresh: time.Hour, MinInterval: every})
		run := rep.Start(ctx, job, items)
		require.Equal(t, "starting", <-out.wrote, "the first status is written at the start")
		const n = 100
		for i := range n {
			if i == 1 {
				// The first event woke the writer, which waits out the
				// pace; the rest come while it waits.
				time.Sleep(every / 2)
			}
			run.Report(ctx, bot.ProgressEvent{Kind: bot.ProgressToolCalled, Text: fmt.Sprintf("step %d", i)})
		}
		last := fmt.Sprintf("step %d", n-1)
		var writes []string
		for len(writes) == 0 || writes[len(writes)-1] != last {
			writes = append(writes, <-out.wrote)
		}
		// Were a write due still, it would come within a few paces.
		time.Sleep(5 * every)
		run.Close()
		close(out.wrote)
		for a := range out.wrote {
			writes = append(writes, a)
		}
		for i := 1; i < len(writes); i++ {
			require.NotEqual(t, writes[i-1], writes[i], "round %d: the same running status was written twice: %q", round, writes)
		}
	}
}
