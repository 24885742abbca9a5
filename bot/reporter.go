package bot

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// Outboxer is what the reporter needs of the outbox store.
type Outboxer interface {
	Enqueue(ctx context.Context, msg OutboxMessage) (OutboxMessage, error)
	EnqueueNew(ctx context.Context, msg OutboxMessage) (OutboxMessage, bool, error)
	EnqueueAll(ctx context.Context, msgs []OutboxMessage) error
}

// DefaultStatusRefresh is how often a running job's status message is
// brought up to date when nothing else changes it, so its elapsed time
// moves during a long tool call. With Slack's limit of about 50 edits a
// minute, ten jobs running at once stay within it.
const DefaultStatusRefresh = 15 * time.Second

// ReporterOptions configure a Reporter.
type ReporterOptions struct {
	Outbox Outboxer
	// Wake (may be nil) is called after each enqueue so delivery does not
	// wait for its next poll.
	Wake func()
	// Refresh is how often a running job's status is refreshed without a
	// progress event; DefaultStatusRefresh when zero.
	Refresh time.Duration
	// MinInterval is the least time between two writes of a running
	// job's status, so a fast run's events do not each cost a commit;
	// DefaultMinEditInterval when zero, the pace the deliverer edits at.
	// Events in between are one write, of the latest state.
	MinInterval time.Duration
	Logger      *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

// Reporter turns what happens to a work item into outbox messages: a
// reaction when it is accepted, one status message edited in place while it
// runs, and a final reply. It only enqueues; the Deliverer sends, throttles
// edits and retries.
type Reporter struct {
	opts ReporterOptions
}

// NewReporter returns a Reporter.
func NewReporter(opts ReporterOptions) *Reporter {
	if opts.Wake == nil {
		opts.Wake = func() {}
	}
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultStatusRefresh
	}
	if opts.MinInterval <= 0 {
		opts.MinInterval = DefaultMinEditInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Reporter{opts: opts}
}

// Keys of a work item's outbox messages. They are stable, so a retried job
// edits the same messages instead of posting new ones.
func statusKey(wi string) string { return wi + "/status" }
func replyKey(wi string) string  { return wi + "/reply" }

// ReactionKey is the outbox key of a work item's reaction: the intake
// writes 👀 under it with the work item, the reporter ✅ or ❌.
func ReactionKey(workItemID, reaction string) string { return workItemID + "/reaction/" + reaction }

// Reacts reports whether a work item made from what happened in thread,
// on the message ref names, gets reactions: where there is a message to
// react to, and not in the local console.
func Reacts(thread Thread, ref string) bool {
	return ref != "" && !thread.IsZero() && thread.Source != SourceLocal
}

// ReactionMessage is the outbox message that puts reaction on the
// triggering message of wi.
func ReactionMessage(wi *WorkItem, reaction string) OutboxMessage {
	return OutboxMessage{
		Key: ReactionKey(wi.ID, reaction), Thread: wi.Thread, WorkItemID: wi.ID,
		Kind: OutboxReaction, Reaction: reaction, Target: wi.SourceRef,
	}
}

// react puts a reaction on the work item's triggering message. A reaction
// is created once: enqueueing it again changes nothing.
func (r *Reporter) react(ctx context.Context, wi *WorkItem, reaction string) {
	if !Reacts(wi.Thread, wi.SourceRef) {
		return
	}
	msg := ReactionMessage(wi, reaction)
	if _, created, err := r.opts.Outbox.EnqueueNew(ctx, msg); err != nil {
		r.failed(ctx, msg.Key, err)
	} else if created {
		r.opts.Wake()
	}
}

func (r *Reporter) enqueue(ctx context.Context, msg OutboxMessage) {
	if _, err := r.opts.Outbox.Enqueue(ctx, msg); err != nil {
		r.failed(ctx, msg.Key, err)
		return
	}
	r.opts.Wake()
}

func (r *Reporter) failed(ctx context.Context, key string, err error) {
	// The run goes on: a lost progress edit is superseded by the next one,
	// and the final messages are written with the job's end.
	r.opts.Logger.LogAttrs(ctx, slog.LevelError, "enqueue outbox message",
		slog.String("key", key), slog.String("error", err.Error()))
}

// Run tracks one job's status message. Its Report method is the
// bot.Progress a Runner receives. The status is written by a goroutine of
// the Run, not by whoever reports: a progress event marks it changed and
// returns, so a run's turn never waits for a commit of its status, and
// the status is written at most once every ReporterOptions.MinInterval
// (the pace the deliverer edits at): the events in between are one write,
// of the latest state. While the job
// runs, the status is also refreshed every ReporterOptions.Refresh, so its
// elapsed time moves even when the agent reports nothing. Finish or Close
// stop the goroutine, after the write under way, before anything final is
// written.
type Run struct {
	r       *Reporter
	lead    WorkItem
	others  []WorkItem // the job's other work items, batched with the lead
	job     string     // the job's id
	attempt int        // the job's attempt
	agent   string
	started time.Time

	mu       sync.Mutex
	activity string
	rights   string
	skills   []string
	children []string
	resumed  string
	summary  string
	done     bool
	quiet    bool // a subagent's: nothing is posted

	changed chan struct{} // a progress event since the status was last written
	stop    chan struct{}
	stopped sync.WaitGroup
}

var _ Progress = (*Run)(nil)

// Start creates the status message of a job's lead work item: a job
// starting is its first progress event. Each work item's 👀 is made sure of
// first, so it comes before the status even when the job was claimed before
// the intake reacted. Call Close when the job ends, however it ends.
func (r *Reporter) Start(ctx context.Context, job *Job, items []WorkItem) *Run {
	started := job.StartedAt
	if started.IsZero() {
		started = r.opts.Now()
	}
	run := &Run{r: r, lead: items[0], others: items[1:], job: job.ID, attempt: job.Attempt, agent: job.Agent, started: started, activity: "starting",
		changed: make(chan struct{}, 1), stop: make(chan struct{})}
	if run.lead.IsChild() {
		// A subagent reports to the run that spawned it, whose status
		// message shows the tree; it posts nothing in the thread itself.
		run.quiet, run.done = true, true
		close(run.stop)
		return run
	}
	if job.Attempt > 1 {
		run.activity = fmt.Sprintf("starting (attempt %d)", job.Attempt)
	}
	for i := range items {
		r.react(ctx, &items[i], ReactionSeen)
	}
	// The first status is there before the run starts.
	r.enqueue(ctx, run.status("running"))
	run.stopped.Go(func() { run.write(ctx) })
	return run
}

// write writes the running status whenever a progress event changed it,
// and every Refresh, until the run stops; never twice within MinInterval.
// Start wrote the first status just before.
func (run *Run) write(ctx context.Context) {
	t := time.NewTicker(run.r.opts.Refresh)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-run.stop:
			return
		case <-run.changed:
		case <-t.C:
		}
		if wait := time.Until(last.Add(run.r.opts.MinInterval)); wait > 0 {
			pace := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				pace.Stop()
				return
			case <-run.stop:
				pace.Stop()
				return
			case <-pace.C:
			}
		}
		// The write reads the state as it is now: events that came while
		// the pace was waited out are in it, and their signal is spent.
		select {
		case <-run.stop:
			return // the run's end writes the final status
		case <-run.changed:
		default:
		}
		last = time.Now()
		msg := run.status("running")
		if _, err := run.r.opts.Outbox.Enqueue(ctx, msg); err != nil {
			if ctx.Err() != nil {
				return // the run was stopped: its end writes the final status
			}
			run.r.failed(ctx, msg.Key, err)
			continue
		}
		run.r.opts.Wake()
	}
}

// Close stops the refresh of the status message; it is safe to call more
// than once, and after Finish.
func (run *Run) Close() {
	run.mu.Lock()
	if !run.done {
		run.done = true
		close(run.stop)
	}
	run.mu.Unlock()
	run.stopped.Wait()
}

// Report implements Progress.
func (run *Run) Report(ctx context.Context, ev ProgressEvent) {
	text := ev.Text
	if text == "" {
		switch ev.Kind {
		case ProgressTurnStarted:
			text = fmt.Sprintf("thinking (turn %d)", ev.Turn)
		case ProgressToolCalled:
			text = "calling " + ev.Tool
		case ProgressToolFinished:
			text = ev.Tool + " finished"
		case ProgressLimitReached:
			text = "limit reached"
		default:
			text = ev.Kind
		}
	}
	run.mu.Lock()
	if run.done {
		// The job has ended: a late event must not undo its final status.
		run.mu.Unlock()
		return
	}
	switch ev.Kind {
	case ProgressRights:
		run.rights = ev.Text
	case ProgressSkills:
		run.skills = slices.Clone(ev.Skills)
		if ev.Text != "" {
			run.activity = ev.Text
		}
	case ProgressChildren:
		run.children = slices.Clone(ev.Children)
	case ProgressResumed:
		run.resumed = ev.Text
	case ProgressSummary:
		run.summary = ev.Text
	default:
		run.activity = text
	}
	run.mu.Unlock()
	if !run.quiet {
		select {
		case run.changed <- struct{}{}:
		default: // a write is due already, and reads the state then
		}
	}
}

// status is the job's status message in state.
func (run *Run) status(state string) OutboxMessage {
	run.mu.Lock()
	activity, rights, skills, children, resumed, summary := run.activity, run.rights, run.skills, run.children, run.resumed, run.summary
	run.mu.Unlock()
	view := &StatusView{
		WorkItemID: run.lead.ID, Agent: run.agent, State: state, Activity: activity, Rights: rights, Skills: skills,
		Started: run.started, Updated: run.r.opts.Now(), Children: children, Resumed: resumed, Summary: summary,
		Attempt: run.attempt,
	}
	return OutboxMessage{
		Key: statusKey(run.lead.ID), Thread: run.lead.Thread, WorkItemID: run.lead.ID,
		Kind: OutboxStatus, Text: statusText(view, len(run.others), run.job), Status: view,
	}
}

// statusText is the status message in words; the elapsed time runs from
// the job's start to the view's update.
func statusText(v *StatusView, others int, job string) string {
	elapsed := v.Updated.Sub(v.Started).Round(time.Second)
	var s string
	switch v.State {
	case "done":
		s = fmt.Sprintf("✅ %s finished %s in %s", v.Agent, v.WorkItemID, elapsed)
	case "failed":
		s = fmt.Sprintf("❌ %s failed %s after %s: %s", v.Agent, v.WorkItemID, elapsed, v.Activity)
	case "cancelled":
		s = fmt.Sprintf("🛑 %s stopped %s after %s: %s", v.Agent, v.WorkItemID, elapsed, v.Activity)
	case "paused":
		s = fmt.Sprintf("⏸ %s paused %s after %s: %s", v.Agent, v.WorkItemID, elapsed, v.Activity)
	default:
		s = fmt.Sprintf("⏳ %s is working on %s (%s): %s", v.Agent, v.WorkItemID, elapsed, v.Activity)
	}
	if others > 0 {
		// The job's work items are listed where they are kept, not here:
		// a batched job may hold hundreds.
		s += fmt.Sprintf(" (%s in all: switchyard workitems list --job %s)", Count(others+1, "request", "requests"), job)
	}
	if len(v.Skills) > 0 {
		s += "\n🧩 " + strings.Join(v.Skills, " · ")
	}
	for _, c := range v.Children {
		s += "\n  " + c
	}
	if v.Resumed != "" {
		s += "\n↻ " + v.Resumed
	}
	if v.Summary != "" {
		s += "\n" + v.Summary
	}
	if v.Rights != "" {
		s += "\nrights: " + v.Rights
	}
	return s
}

// Finish stops the status's refresh and gives the messages that tell the
// thread how the run ended: the final status, the reply, and ✅ or ❌. The
// dispatcher writes them in the transaction that ends the job
// (JobOutcome.Messages): a crash cannot leave one without the other, and a
// run that no longer holds its job (another worker took it over, a person
// cancelled it as it failed) writes none of them.
func (run *Run) Finish(success bool, reply, errText string) []OutboxMessage {
	run.Close()
	if run.quiet {
		return nil
	}
	state, reaction := "done", ReactionSuccess
	if !success {
		state, reaction = "failed", ReactionFailure
		run.mu.Lock()
		run.activity = errText
		run.mu.Unlock()
	}
	text := reply
	if success && strings.TrimSpace(reply) == "" {
		// Platforms refuse a message without text (Slack's no_text, a
		// GitHub comment without a body) and the reply would be given up:
		// the thread hears that the agent is done all the same.
		text = fmt.Sprintf("%s finished %s and wrote no reply.", run.agent, run.lead.ID)
	}
	if !success {
		text = fmt.Sprintf("%s could not finish %s: %s", run.agent, run.lead.ID, errText)
		if reply != "" && reply != errText {
			text += "\n\n" + reply
		}
	}
	return run.final(state, text, reaction)
}

// final is the final status in state, the reply and the reaction, which
// goes on each of the job's work items: each had its 👀, and none is left
// reading as still being worked on.
func (run *Run) final(state, reply, reaction string) []OutboxMessage {
	msgs := []OutboxMessage{run.status(state), {
		Key: replyKey(run.lead.ID), Thread: run.lead.Thread, WorkItemID: run.lead.ID,
		Kind: OutboxReply, Text: reply,
	}}
	for _, wi := range append([]WorkItem{run.lead}, run.others...) {
		if Reacts(wi.Thread, wi.SourceRef) {
			msgs = append(msgs, ReactionMessage(&wi, reaction))
		}
	}
	return msgs
}

// Cancelled stops the status's refresh and gives the messages that tell the
// thread a person cancelled the run, saying who (and why, when they said),
// as Finish does for a run that ended by itself. failed is what the run
// had failed with when the cancel overtook its end, or "".
func (run *Run) Cancelled(c *Cancelled, failed string) []OutboxMessage {
	run.Close()
	if run.quiet {
		return nil
	}
	why := c.Error()
	if failed != "" {
		why += "; it had failed already: " + failed
	}
	run.mu.Lock()
	run.activity = why
	run.mu.Unlock()
	return run.final("cancelled", fmt.Sprintf("%s stopped working on %s: %s", run.agent, run.lead.ID, why), ReactionFailure)
}

// HandedBack stops the status's refresh and gives the status of a run the
// daemon's shutdown cut short, to be written as its job is given back to
// run again after the restart (QueueStore.ReleaseJob): it says so, rather
// than go on saying the agent is working. The status is not final: the run
// that resumes the job replaces it.
func (run *Run) HandedBack() []OutboxMessage {
	run.Close()
	if run.quiet {
		return nil
	}
	run.mu.Lock()
	run.activity = "the daemon is shutting down; the work resumes when it starts again"
	run.mu.Unlock()
	return []OutboxMessage{run.status("paused")}
}

// Abandoned gives the messages that report a work item failed because its
// worker kept dying (or, when a person had cancelled it before its worker
// died, cancelled): the reply, the failure reaction, and the status saying
// so too, so none is left saying it is working. The dispatcher hands it to
// ClaimNext (ClaimRequest.Abandon), which writes them with the failure.
func (r *Reporter) Abandoned(wi WorkItem) []OutboxMessage {
	if wi.IsChild() {
		return nil // its ledger record says interrupted; its parent reports it
	}
	state, reply := "failed", fmt.Sprintf("%s could not finish %s: %s", wi.Route.Agent, wi.ID, wi.Error)
	if wi.Status == StatusCancelled {
		// A person cancelled it before its worker died: it ends as they
		// asked rather than run again.
		state, reply = "cancelled", fmt.Sprintf("%s stopped working on %s: %s", wi.Route.Agent, wi.ID, wi.Error)
	}
	view := &StatusView{
		WorkItemID: wi.ID, Agent: wi.Route.Agent, State: state, Activity: wi.Error,
		Started: wi.CreatedAt, Updated: r.opts.Now(),
	}
	msgs := []OutboxMessage{{
		Key: statusKey(wi.ID), Thread: wi.Thread, WorkItemID: wi.ID,
		Kind: OutboxStatus, Text: statusText(view, 0, ""), Status: view,
	}, {
		Key: replyKey(wi.ID), Thread: wi.Thread, WorkItemID: wi.ID, Kind: OutboxReply, Text: reply,
	}}
	if Reacts(wi.Thread, wi.SourceRef) {
		msgs = append(msgs, ReactionMessage(&wi, ReactionFailure))
	}
	return msgs
}

// Wake tells the deliverer there are messages to deliver, as each enqueue
// of the Reporter does: for the messages a claim wrote with Abandoned's.
func (r *Reporter) Wake() { r.opts.Wake() }
