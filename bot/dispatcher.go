package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DispatcherOptions configure a Dispatcher.
type DispatcherOptions struct {
	Queue    QueueStore
	Items    WorkItemStore // earlier work items, for continuation
	Runner   Runner
	Reporter *Reporter
	// Open lists records a thread still owns (subagents, background tasks);
	// nil until that capability is wired in.
	Open OpenRecordSource
	// Resets say when a thread was last reset: its earlier work is not
	// carried over past it. Nil carries everything over.
	Resets ThreadResets
	// Details read, by source, the stored events of a job's work items when
	// the job starts, with the source's full model, and say what the run
	// should know beyond their text (see Detailer).
	Details map[string]Detailer
	// Recorded is told what a run left for its job's end once it is
	// written (see JobRecords): a subagent's parent waits for its record
	// to end. Nil tells no one.
	Recorded func(ctx context.Context, recs JobRecords)
	// Adopt offers the end of a subagent's job that finished to a run of
	// this process waiting for exactly that child, which writes it with
	// its own next save (see JobEnd), and reports whether it took it.
	// The job gives its worker back at once (its parent needs one to go
	// on), keeps its lease, and writes its end itself if the taker does
	// not. Nil, or false, and the job writes its end as any job does.
	Adopt func(ctx context.Context, end *JobEnd) bool
	// AdoptWait is how long a job whose end was taken waits for the taker
	// to take it into a commit before it writes its end itself; default 5s.
	AdoptWait time.Duration
	// Cancelled is told of a job whose run a person cancelled, once its
	// end is recorded, so what its run left open (subagents, background
	// tasks) is closed too. Nil closes nothing.
	Cancelled func(ctx context.Context, job *Job, c *Cancelled)
	// Workers is how many runs may work at once; default 4. Runs waiting
	// for a person (see Await) do not count.
	Workers int
	// Lease is how long a claim holds without renewal; default 30s. Workers
	// renew at a third of it, so a dead process's jobs are reclaimed within
	// one lease.
	Lease time.Duration
	// MaxAttempts per dispatch when workers die; default 3.
	MaxAttempts int
	// Grace is how long running jobs may finish at shutdown before they are
	// cancelled and their leases released; default 30s.
	Grace time.Duration
	// Poll is how often the queue is looked at without a wake; default 1s.
	Poll time.Duration
	// Name prefixes worker identities; default "worker".
	Name    string
	Metrics *Metrics
	Logger  *slog.Logger
	Now     func() time.Time
}

// Detailer reads an event as its source's full, typed model has it, when a
// job of a work item made from it starts: the intake reads only what
// deciding needs, and the run is told the rest (for GitHub: the title,
// state and address of the issue or pull request). It returns "" when it
// has nothing to add.
type Detailer interface {
	Details(ctx context.Context, ev *Event) (string, error)
}

// Dispatcher claims dispatches and runs them, at most Workers at a time.
type Dispatcher struct {
	opts   DispatcherOptions
	wake   chan struct{}
	active chan struct{} // closed once Run has started claiming
	once   sync.Once
	// hurry is closed by Hurry: a shutdown's grace is over at once.
	hurry     chan struct{}
	hurryOnce sync.Once

	mu      sync.Mutex
	running map[string]chan struct{} // by job id, the runs of this process: CheckJob's wake
}

// NewDispatcher returns a Dispatcher.
func NewDispatcher(opts DispatcherOptions) *Dispatcher {
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Lease <= 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 3
	}
	if opts.Grace <= 0 {
		opts.Grace = 30 * time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.AdoptWait <= 0 {
		opts.AdoptWait = 5 * time.Second
	}
	if opts.Name == "" {
		opts.Name = "worker"
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Dispatcher{opts: opts, wake: make(chan struct{}, 1), active: make(chan struct{}), hurry: make(chan struct{}),
		running: map[string]chan struct{}{}}
}

// Hurry ends the grace period of the shutdown under way, or of the next
// one, at once: the running jobs are cancelled and released, as when Grace
// runs out. A person who asks the daemon to stop a second time means now.
func (d *Dispatcher) Hurry() { d.hurryOnce.Do(func() { close(d.hurry) }) }

// Wake tells the claiming loop there is work.
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// CheckJob has the run of job id, when this process runs it, renew its
// lease at once rather than at its next renewal, and reports whether this
// process runs it. A renewal is how a run learns its work was cancelled
// (QueueStore.CancelWorkItem): the replica that cancels checks the job
// here and tells the others (see the daemon's notifications), and a
// replica not told learns it at the next renewal all the same.
func (d *Dispatcher) CheckJob(id string) bool {
	d.mu.Lock()
	check := d.running[id]
	d.mu.Unlock()
	if check == nil {
		return false
	}
	select {
	case check <- struct{}{}:
	default:
	}
	return true
}

// Running reports whether the workers have started (readiness).
func (d *Dispatcher) Running() bool {
	select {
	case <-d.active:
		return true
	default:
		return false
	}
}

// Run claims jobs and runs each in its own goroutine, at most Workers at a
// time (runs waiting for a person do not count, see Await), until ctx is
// cancelled. Then it stops claiming, hands parked runs back at once, lets
// running jobs finish for up to Grace (or until Hurry), cancels the rest
// and releases their leases, and returns.
func (d *Dispatcher) Run(ctx context.Context) error {
	// Jobs run under jobCtx, which outlives ctx by the grace period.
	jobCtx, cancelJobs := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelJobs(ErrShutdown)
	pool := newWorkerPool(d.opts.Workers, func(delta int) { d.opts.Metrics.RunsAwaiting.Add(float64(delta)) })
	var jobs sync.WaitGroup
	d.once.Do(func() { close(d.active) })
	w := &workers{d: d, ctx: ctx, jobCtx: jobCtx, pool: pool, jobs: &jobs}
	d.claim(w)

	pool.cancelParked(ErrShutdown)
	done := make(chan struct{})
	go func() { jobs.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d.opts.Grace):
		d.opts.Logger.Warn("grace period over: cancelling running jobs", slog.Duration("grace", d.opts.Grace))
		cancelJobs(ErrShutdown)
		<-done
	case <-d.hurry:
		d.opts.Logger.Warn("asked again to stop: cancelling running jobs now")
		cancelJobs(ErrShutdown)
		<-done
	}
	return nil
}

// ErrShutdown is the cause of a run's context ending because the daemon
// stops: its job is released, to run again after the restart.
var ErrShutdown = errors.New("shutting down")

// ErrLeaseLost is the cause of a run's context ending because another
// worker took its job over after its lease ran out, or may: the lease
// could not be renewed before it ran out.
var ErrLeaseLost = errors.New("lease lost")

// errLeaseRunningOut is ErrLeaseLost when no renewal got through (the
// store could not be reached) before the lease was about to run out.
var errLeaseRunningOut = fmt.Errorf("%w: it could not be renewed before it ran out", ErrLeaseLost)

// HandedBack reports whether ctx, a run's context, ended because its job
// goes on elsewhere or later (shutdown, a lease taken over) rather than
// because the run itself ended. What the run waits for then stays in
// place for the job's next run.
func HandedBack(ctx context.Context) bool {
	c := context.Cause(ctx)
	return errors.Is(c, ErrShutdown) || errors.Is(c, ErrLeaseLost)
}

// claim is the dispatcher's one claiming loop: whenever a worker slot is
// free it claims the next job and starts its run, until ctx ends.
func (d *Dispatcher) claim(w *workers) {
	ctx, jobCtx, pool := w.ctx, w.jobCtx, w.pool
	t := time.NewTicker(d.opts.Poll)
	defer t.Stop()
	for ctx.Err() == nil {
		slot, ok := pool.take()
		if !ok {
			select {
			case <-ctx.Done():
			case <-pool.freed:
			}
			continue
		}
		owner := d.worker(slot)
		claim, err := d.opts.Queue.ClaimNext(jobCtx, ClaimRequest{
			Owner: owner, Now: d.opts.Now(), Lease: d.opts.Lease, MaxAttempts: d.opts.MaxAttempts,
			Abandon: d.opts.Reporter.Abandoned,
		})
		if err != nil {
			d.opts.Logger.Error("claim dispatch", slog.String("worker", owner), slog.String("error", err.Error()))
		}
		for _, wi := range claim.Abandoned {
			if wi.Status == StatusCancelled {
				d.opts.Metrics.Jobs.WithLabelValues("cancelled").Inc()
				d.opts.Logger.Info("work item cancelled: its worker died after the cancel", slog.String("work_item", wi.ID),
					slog.String("error", wi.Error))
				continue
			}
			d.opts.Metrics.Jobs.WithLabelValues("abandoned").Inc()
			d.opts.Logger.Warn("work item abandoned", slog.String("work_item", wi.ID), slog.String("error", wi.Error))
		}
		if len(claim.Abandoned) > 0 {
			d.opts.Reporter.Wake()
		}
		if claim.Job != nil {
			w.start(claim, slot)
			continue // there may be more
		}
		pool.put(slot)
		select {
		case <-ctx.Done():
		case <-d.wake:
		case <-t.C:
		}
	}
}

// worker is the identity of the worker that holds slot.
func (d *Dispatcher) worker(slot int) string { return d.opts.Name + "-" + strconv.Itoa(slot) }

func (d *Dispatcher) runJob(w *workers, claim Claim, slot int) {
	ctx, jobCtx, pool := w.ctx, w.jobCtx, w.pool
	job := claim.Job
	log := d.opts.Logger.With(slog.String("job", job.ID), slog.String("agent", job.Agent),
		slog.String("thread", job.Thread.Key()), slog.String("worker", job.Owner))
	runCtx, cancel := context.WithCancelCause(jobCtx)
	defer cancel(nil)
	rs := &runSlot{pool: pool, cancel: cancel, slot: slot, held: true}
	defer rs.release()
	check := make(chan struct{}, 1)
	d.mu.Lock()
	d.running[job.ID] = check
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.running, job.ID)
		d.mu.Unlock()
	}()
	runCtx = context.WithValue(runCtx, runSlotKey{}, rs)
	runCtx = context.WithValue(runCtx, workersKey{}, w)

	// The lease is renewed by one goroutine owned by this job.
	var renewer sync.WaitGroup
	renewer.Go(func() { d.renew(runCtx, cancel, check, job, log) })
	defer renewer.Wait()
	defer cancel(nil)

	start := d.opts.Now()
	// The job's work items are counted, not listed: a batched job may hold
	// hundreds (switchyard workitems list --job lists them).
	log.Info("job started", slog.Int("attempt", job.Attempt), slog.String("work_item", firstNonEmpty(job.WorkItemIDs...)),
		slog.Int("requests", len(job.WorkItemIDs)))
	run := d.opts.Reporter.Start(runCtx, job, claim.WorkItems)
	defer run.Close()
	req := RunRequest{
		Job: *job, WorkItems: d.detailed(runCtx, claim.WorkItems, log), Agent: job.Agent, Thread: job.Thread,
		Continuation: d.continuation(runCtx, job, claim.WorkItems, log),
	}
	res, err := d.safeRun(runCtx, req, run, log)

	finishCtx := context.WithoutCancel(runCtx)
	var cancelled *Cancelled
	if errors.As(context.Cause(runCtx), &cancelled) {
		d.cancelled(finishCtx, job, run, res, cancelled, "", start, log)
		return
	}
	if ctx.Err() != nil && runCtx.Err() != nil {
		// Shutdown cut the run short: give the work back for the next
		// start, its thread told so in the release's transaction (after
		// it, the status is the next run's, wherever it runs; a job a
		// person cancelled is not given back, and its thread never reads
		// that it resumes).
		rerr := d.opts.Queue.ReleaseJob(finishCtx, job.ID, job.Owner, d.opts.Now(), run.HandedBack())
		if rerr == nil {
			d.opts.Reporter.Wake()
		}
		if errors.As(rerr, &cancelled) {
			// A person cancelled it before the shutdown reached it: it
			// ends as they asked, rather than run again after the restart.
			d.cancelled(finishCtx, job, run, res, cancelled, "", start, log)
			return
		}
		if rerr != nil {
			log.Error("release job", slog.String("error", rerr.Error()))
		}
		d.saveRecords(finishCtx, res.Records, log)
		d.opts.Metrics.Jobs.WithLabelValues("released").Inc()
		log.Info("job released at shutdown")
		return
	}
	if cause := context.Cause(runCtx); errors.Is(cause, ErrLeaseLost) {
		d.saveRecords(finishCtx, res.Records, log)
		if !errors.Is(cause, errLeaseRunningOut) {
			log.Warn("job abandoned: its lease was taken over")
		}
		return
	}

	success := err == nil && res.Status == ResultSuccess
	errText := res.Error
	if err != nil {
		errText = ErrorMessage(err)
		if ErrorCode(err) == EINTERNAL {
			errText = err.Error()
		}
	} else if !success && errText == "" {
		errText = "the agent ended with status " + strconv.Quote(res.Status)
	}
	out := JobOutcome{JobID: job.ID, Owner: job.Owner, Now: d.opts.Now(), Success: success, Summary: res.Reply, Error: errText,
		Cancelled: err == nil && res.Status == ResultCancelled, Records: res.Records,
		Messages: run.Finish(success, res.Reply, errText)}
	if end := d.adopt(finishCtx, out); end != nil {
		// Its parent writes the end with its next save, and needs a worker
		// to go on: the lease is kept (the renewal goes on) until then.
		rs.release()
		adopted := end.taken(d.opts.AdoptWait)
		finished := adopted || d.finish(finishCtx, runCtx.Done(), job, run, res, out, start, log)
		close(end.settled)
		if !finished {
			return
		}
	} else if !d.finish(finishCtx, runCtx.Done(), job, run, res, out, start, log) {
		return
	}
	d.recorded(finishCtx, res.Records)
	outcome := "succeeded"
	switch {
	case out.Cancelled:
		outcome = "cancelled"
	case !success:
		outcome = "failed"
	}
	if out.Records.Run != nil && !out.Cancelled {
		outcome, errText = d.endedAs(finishCtx, job, outcome, errText, log)
	}
	d.opts.Metrics.Jobs.WithLabelValues(outcome).Inc()
	d.opts.Metrics.JobDuration.WithLabelValues(job.Agent, outcome).Observe(d.opts.Now().Sub(start).Seconds())
	log.Info("job finished", slog.String("outcome", outcome), slog.String("error", errText),
		slog.Int("tokens", res.TokensUsed), slog.Int("turns", res.TurnsUsed))
}

// endedAs is how the store ended a subagent's job: cancelled, with the
// cancel's words, when its ledger record was cancelled (by a person, or by
// its parent) as the run finished (see JobOutcome.Follow); else outcome
// and errText as the run ended.
func (d *Dispatcher) endedAs(ctx context.Context, job *Job, outcome, errText string, log *slog.Logger) (string, string) {
	if d.opts.Items == nil || len(job.WorkItemIDs) == 0 {
		return outcome, errText
	}
	wi, err := d.opts.Items.GetWorkItem(ctx, job.WorkItemIDs[0])
	if err != nil {
		log.Warn("read how the job ended", slog.String("error", err.Error()))
		return outcome, errText
	}
	if wi.Status == StatusCancelled {
		return "cancelled", wi.Error
	}
	return outcome, errText
}

// finish writes the end of a job that ran to its end with the messages
// that tell its thread, and reports whether it did. A failed run whose
// work a person cancelled meanwhile ends cancelled instead (see
// JobOutcome.CancelledFirst); what the run left is written on its own when
// the job could not end here (its lease was taken over).
func (d *Dispatcher) finish(ctx context.Context, held <-chan struct{}, job *Job, run *Run, res RunResult, out JobOutcome, start time.Time, log *slog.Logger) bool {
	err := d.endJob(ctx, held, out, log)
	var c *Cancelled
	switch {
	case err == nil:
		d.opts.Reporter.Wake()
		return true
	case errors.As(err, &c):
		d.cancelled(ctx, job, run, res, c, out.Error, start, log)
		return false
	}
	log.Error("finish job", slog.String("error", err.Error()))
	d.saveRecords(ctx, out.Records, log)
	return false
}

// endJob writes a job's end, trying again while the store cannot be
// reached (a database restarting, a connection cut) and the job's lease
// holds: held closes when the lease is lost, cannot be renewed in time, or
// the daemon stops. An end given up on leaves the job to run again when
// its lease runs out; one written late is the run's, not a second run.
func (d *Dispatcher) endJob(ctx context.Context, held <-chan struct{}, out JobOutcome, log *slog.Logger) error {
	wait := 50 * time.Millisecond
	for {
		err := d.opts.Queue.FinishJob(ctx, out)
		if ErrorCode(err) != EUNAVAILABLE {
			return err
		}
		log.Warn("finish job: the store is unavailable; trying again while the lease holds",
			slog.String("error", err.Error()), slog.Duration("retry_in", wait))
		select {
		case <-held:
			return err
		case <-time.After(wait):
		}
		wait = min(wait*2, 2*time.Second)
	}
}

// cancelled ends a job whose run a person cancelled: its work items end
// cancelled, saying who did it (and what the run had failed with, when
// the cancel overtook its failure), and what the run left open is closed.
func (d *Dispatcher) cancelled(ctx context.Context, job *Job, run *Run, res RunResult, c *Cancelled, failed string, start time.Time, log *slog.Logger) {
	msgs := run.Cancelled(c, failed)
	if end := res.Records.Run; end != nil && end.Status != RunCancelled {
		// The run ended another way as the cancel came (it failed for it,
		// or finished just before): its record ends as its work item does.
		cancelled := *end
		cancelled.Status, cancelled.Error = RunCancelled, c.Error()
		res.Records.Run = &cancelled
	}
	out := JobOutcome{JobID: job.ID, Owner: job.Owner, Now: d.opts.Now(), Cancelled: true, Error: c.Error(), Records: res.Records,
		Messages: msgs}
	if err := d.opts.Queue.FinishJob(ctx, out); err != nil {
		log.Error("finish job", slog.String("error", err.Error()))
		d.saveRecords(ctx, res.Records, log)
		return
	}
	d.opts.Reporter.Wake()
	d.recorded(ctx, res.Records)
	if d.opts.Cancelled != nil {
		d.opts.Cancelled(ctx, job, c)
	}
	d.opts.Metrics.Jobs.WithLabelValues("cancelled").Inc()
	d.opts.Metrics.JobDuration.WithLabelValues(job.Agent, "cancelled").Observe(d.opts.Now().Sub(start).Seconds())
	if failed != "" {
		log.Info("job cancelled after its run had failed", slog.String("by", c.By), slog.String("reason", c.Reason),
			slog.String("error", failed))
		return
	}
	log.Info("job cancelled", slog.String("by", c.By), slog.String("reason", c.Reason))
}

// saveRecords writes what a run left for its job's end when the job does
// not end here: the tokens it spent are counted, its transcript kept and
// its record ended all the same.
func (d *Dispatcher) saveRecords(ctx context.Context, recs JobRecords, log *slog.Logger) {
	if recs.Empty() {
		return
	}
	if err := d.opts.Queue.SaveJobRecords(ctx, recs); err != nil {
		log.Error("save what the run left", slog.String("error", err.Error()))
		return
	}
	d.recorded(ctx, recs)
}

func (d *Dispatcher) recorded(ctx context.Context, recs JobRecords) {
	if d.opts.Recorded != nil && !recs.Empty() {
		d.opts.Recorded(ctx, recs)
	}
}

// safeRun runs the agent, turning a panic into a failed job so one bad run
// cannot take the daemon down.
func (d *Dispatcher) safeRun(ctx context.Context, req RunRequest, p Progress, log *slog.Logger) (res RunResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("runner panicked", slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
			err = fmt.Errorf("internal error: the agent runtime panicked: %v", r)
		}
	}()
	return d.opts.Runner.Run(ctx, req, p)
}

// renew renews job's lease every third of it, and at once when check
// says so, until ctx ends. A lease taken over, or the job's work cancelled,
// ends the run with ErrLeaseLost or the *Cancelled as its cause. So does a
// lease no renewal got through for (the store cannot be reached, or does
// not answer) when it is a fifth of its time from running out: the run
// stops before another worker may take the job over, never beside it.
func (d *Dispatcher) renew(ctx context.Context, cancel context.CancelCauseFunc, check <-chan struct{}, job *Job, log *slog.Logger) {
	t := time.NewTicker(d.opts.Lease / 3)
	defer t.Stop()
	expires := job.LeaseExpires
	if expires.IsZero() {
		expires = d.opts.Now().Add(d.opts.Lease)
	}
	stopBy := time.Now().Add(d.leaseLeft(expires))
	held := time.NewTimer(time.Until(stopBy))
	defer held.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-held.C:
			log.Warn("job stopped: its lease could not be renewed before it ran out; a worker that reaches the store takes the job over",
				slog.Time("lease_expires", expires))
			cancel(errLeaseRunningOut)
			return
		case <-t.C:
		case <-check:
		}
		until := d.opts.Now().Add(d.opts.Lease)
		// A renewal that hangs is given up when the run must stop.
		rctx, done := context.WithDeadline(ctx, stopBy)
		err := d.opts.Queue.RenewLease(rctx, job.ID, job.Owner, until)
		done()
		var cancelled *Cancelled
		switch {
		case err == nil:
			expires = until
			stopBy = time.Now().Add(d.leaseLeft(until))
			held.Reset(time.Until(stopBy))
		case errors.As(err, &cancelled):
			cancel(cancelled)
			return
		case ErrorCode(err) == ECONFLICT:
			cancel(ErrLeaseLost)
			return
		case ctx.Err() == nil:
			log.Warn("renew lease", slog.String("error", err.Error()))
		}
	}
}

// leaseLeft is how long a run may go on under a lease that runs out at
// until: up to a fifth of the lease before, which leaves the run time to
// stop and the replicas' clocks room to differ by their reading of the
// server's.
func (d *Dispatcher) leaseLeft(until time.Time) time.Duration {
	return until.Sub(d.opts.Now()) - d.opts.Lease/5
}

// detailed returns items with what their sources' Detailers say of their
// events ahead of their text. A detail that cannot be read is left out and
// logged: the run goes on with the text.
func (d *Dispatcher) detailed(ctx context.Context, items []WorkItem, log *slog.Logger) []WorkItem {
	if len(d.opts.Details) == 0 || d.opts.Items == nil {
		return items
	}
	out := slices.Clone(items)
	for i, wi := range out {
		dt := d.opts.Details[wi.Source]
		if dt == nil || wi.EventRef == "" {
			continue
		}
		ev, err := d.opts.Items.GetEvent(ctx, wi.EventRef)
		var details string
		if err == nil {
			details, err = dt.Details(ctx, ev)
		}
		if err != nil {
			log.Warn("read the event of a work item", slog.String("work_item", wi.ID), slog.String("error", err.Error()))
			continue
		}
		if details != "" {
			out[i].Text = strings.TrimSpace(details + "\n\n" + wi.Text)
		}
	}
	return out
}

// ThreadResets say when a thread was last reset.
type ThreadResets interface {
	ThreadResetAt(ctx context.Context, sessionKey string) (time.Time, error)
}

// continuation gathers what the thread carries over into this run: its
// earlier work items since its last reset (a subagent's are its parent's
// business), and the records its owner still has open. A subagent's run
// carries nothing over: it starts from its task.
func (d *Dispatcher) continuation(ctx context.Context, job *Job, items []WorkItem, log *slog.Logger) Continuation {
	c := Continuation{SessionKey: job.Thread.Key(), Agent: job.Agent, At: d.opts.Now()}
	if len(items) > 0 && items[0].IsChild() {
		return c
	}
	var since time.Time
	if d.opts.Resets != nil {
		at, err := d.opts.Resets.ThreadResetAt(ctx, c.SessionKey)
		if err != nil {
			log.Warn("continuation: thread reset", slog.String("error", err.Error()))
		}
		since = at
		c.ResetAt = at
	}
	if d.opts.Items != nil {
		items, _, err := d.opts.Items.ListWorkItems(ctx, WorkItemFilter{Thread: c.SessionKey, Limit: 20})
		if err != nil {
			log.Warn("continuation: list work items", slog.String("error", err.Error()))
		}
		for _, wi := range slices.Backward(items) {
			if slices.Contains(job.WorkItemIDs, wi.ID) || wi.IsChild() || wi.CreatedAt.Before(since) {
				continue
			}
			summary := firstNonEmpty(wi.Summary, wi.Error)
			if wi.Error != "" && wi.Summary != "" && wi.Summary != wi.Error {
				// A run that failed after the agent said something.
				summary = wi.Error + "; it had said: " + wi.Summary
			}
			c.Earlier = append(c.Earlier, EarlierWork{
				ID: wi.ID, Agent: wi.Route.Agent, Status: wi.Status, Text: wi.Text,
				Summary: summary, At: wi.CreatedAt,
			})
		}
	}
	if d.opts.Open != nil {
		open, err := d.opts.Open.OpenRecords(ctx, c.SessionKey, job.Agent)
		if err != nil {
			log.Warn("continuation: open records", slog.String("error", err.Error()))
		}
		c.Open = open
	}
	return c
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
