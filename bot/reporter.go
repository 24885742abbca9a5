package bot

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Outboxer is what the reporter needs of the outbox store.
type Outboxer interface {
	Enqueue(ctx context.Context, msg OutboxMessage) (OutboxMessage, error)
}

// Reporter turns what happens to a work item into outbox messages: a
// reaction when it is accepted, one status message edited in place while it
// runs, and a final reply. It only enqueues; the Deliverer sends, throttles
// edits and retries.
type Reporter struct {
	out    Outboxer
	wake   func()
	now    func() time.Time
	logger *slog.Logger
}

// NewReporter returns a Reporter writing to out; wake (may be nil) is called
// after each enqueue so delivery does not wait for its next poll.
func NewReporter(out Outboxer, wake func(), logger *slog.Logger) *Reporter {
	if wake == nil {
		wake = func() {}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Reporter{out: out, wake: wake, now: time.Now, logger: logger}
}

// Keys of a work item's outbox messages. They are stable, so a retried job
// edits the same messages instead of posting new ones.
func statusKey(wi string) string             { return wi + "/status" }
func replyKey(wi string) string              { return wi + "/reply" }
func reactionKey(wi, reaction string) string { return wi + "/reaction/" + reaction }

// Accepted reacts with 👀 on the triggering message, where there is one.
func (r *Reporter) Accepted(ctx context.Context, wi *WorkItem) {
	r.react(ctx, wi, ReactionSeen)
}

func (r *Reporter) react(ctx context.Context, wi *WorkItem, reaction string) {
	if wi.SourceRef == "" || wi.Thread.Source == SourceLocal {
		return
	}
	r.enqueue(ctx, OutboxMessage{
		Key: reactionKey(wi.ID, reaction), Thread: wi.Thread, WorkItemID: wi.ID,
		Kind: OutboxReaction, Reaction: reaction, Target: wi.SourceRef,
	})
}

func (r *Reporter) enqueue(ctx context.Context, msg OutboxMessage) {
	if _, err := r.out.Enqueue(ctx, msg); err != nil {
		// The run goes on; a lost progress edit is superseded by the next one
		// and the final messages are enqueued before the job is finished, so a
		// failure there surfaces as a retried job.
		r.logger.LogAttrs(ctx, slog.LevelError, "enqueue outbox message",
			slog.String("key", msg.Key), slog.String("error", err.Error()))
		return
	}
	r.wake()
}

// Run tracks one job's status message. Its Report method is the
// bot.Progress a Runner receives.
type Run struct {
	r       *Reporter
	lead    WorkItem
	others  []string
	agent   string
	started time.Time

	mu       sync.Mutex
	activity string
}

var _ Progress = (*Run)(nil)

// Start creates the status message of a job's lead work item: a job
// starting is its first progress event.
func (r *Reporter) Start(ctx context.Context, job *Job, items []WorkItem) *Run {
	run := &Run{r: r, lead: items[0], agent: job.Agent, started: r.now(), activity: "starting"}
	for _, wi := range items[1:] {
		run.others = append(run.others, wi.ID)
	}
	if job.Attempt > 1 {
		run.activity = fmt.Sprintf("starting (attempt %d)", job.Attempt)
	}
	run.push(ctx, "running")
	return run
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
	run.activity = text
	run.mu.Unlock()
	run.push(ctx, "running")
}

func (run *Run) push(ctx context.Context, state string) {
	run.mu.Lock()
	activity := run.activity
	run.mu.Unlock()
	now := run.r.now()
	view := &StatusView{
		WorkItemID: run.lead.ID, Agent: run.agent, State: state, Activity: activity,
		Started: run.started, Updated: now,
	}
	run.r.enqueue(ctx, OutboxMessage{
		Key: statusKey(run.lead.ID), Thread: run.lead.Thread, WorkItemID: run.lead.ID,
		Kind: OutboxStatus, Text: run.statusText(view), Status: view,
	})
}

func (run *Run) statusText(v *StatusView) string {
	elapsed := v.Updated.Sub(v.Started).Round(time.Second)
	var s string
	switch v.State {
	case "done":
		s = fmt.Sprintf("✅ %s finished %s in %s", v.Agent, v.WorkItemID, elapsed)
	case "failed":
		s = fmt.Sprintf("❌ %s failed %s after %s: %s", v.Agent, v.WorkItemID, elapsed, v.Activity)
	default:
		s = fmt.Sprintf("⏳ %s is working on %s (%s): %s", v.Agent, v.WorkItemID, elapsed, v.Activity)
	}
	if len(run.others) > 0 {
		s += fmt.Sprintf(" (with %d later message(s): %v)", len(run.others), run.others)
	}
	return s
}

// Finish enqueues the final status and the reply. It is called before the
// job is recorded as finished, so a crash in between retries the job and the
// stable keys edit the same messages.
func (run *Run) Finish(ctx context.Context, success bool, reply, errText string) {
	state := "done"
	if !success {
		state = "failed"
		run.mu.Lock()
		run.activity = errText
		run.mu.Unlock()
	}
	run.push(ctx, state)
	text := reply
	if !success {
		text = fmt.Sprintf("%s could not finish %s: %s", run.agent, run.lead.ID, errText)
		if reply != "" && reply != errText {
			text += "\n\n" + reply
		}
	}
	run.r.enqueue(ctx, OutboxMessage{
		Key: replyKey(run.lead.ID), Thread: run.lead.Thread, WorkItemID: run.lead.ID,
		Kind: OutboxReply, Text: text,
	})
	if success {
		run.r.react(ctx, &run.lead, ReactionSuccess)
	} else {
		run.r.react(ctx, &run.lead, ReactionFailure)
	}
}

// Abandoned reports a work item failed because its worker kept dying.
func (r *Reporter) Abandoned(ctx context.Context, wi WorkItem) {
	r.enqueue(ctx, OutboxMessage{
		Key: replyKey(wi.ID), Thread: wi.Thread, WorkItemID: wi.ID, Kind: OutboxReply,
		Text: fmt.Sprintf("%s could not finish %s: %s", wi.Route.Agent, wi.ID, wi.Error),
	})
	r.react(ctx, &wi, ReactionFailure)
}
