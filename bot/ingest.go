package bot

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"
)

// Decider decides the route of an event; *Router implements it.
type Decider interface {
	Route(ev *Event) Route
}

// DefaultDedupWindow is how long a delivery id is remembered.
const DefaultDedupWindow = 7 * 24 * time.Hour

// IntakeOptions configure an Intake.
type IntakeOptions struct {
	Store IngestStore
	// Router decides routes until Use replaces it.
	Router  Decider
	Metrics *Metrics
	Logger  *slog.Logger
	// DedupWindow defaults to DefaultDedupWindow; Use replaces it.
	DedupWindow time.Duration
	// Gates are the sources' own admission rules, by source; a source
	// without one makes a work item of everything it hands in.
	Gates map[string]Gate
	// Threads, when set, lets an agent keep the thread it works in: a
	// message the router would send to a keyword or the default agent goes
	// to the agent with work in its thread instead (see Intake.Decide).
	Threads WorkItemLister
	// Resets, when set, says when a thread was last reset: its work from
	// before keeps no agent in it.
	Resets ThreadResets
	// ThreadWindow is how long after an agent's last work item in a thread
	// finished the thread still goes to it; DefaultThreadWindow when zero.
	// Use replaces it.
	ThreadWindow time.Duration
	// React acknowledges each work item Ingest makes with 👀 on its
	// triggering message (where Reacts says there is one), written with
	// the work item (IngestRequest.Reaction); Wake is called after.
	React bool
	// Accepted is called after a work item is persisted (not for
	// duplicates): the dispatcher wakes up.
	Accepted func(ctx context.Context, wi *WorkItem, ev *Event)
	// Notices receives the one reply a person gets in their thread when
	// they addressed Switchyard and nothing will run for them, or the
	// agent they named does not exist (see Intake.Ingest); nil: nobody is
	// told. Wake is called after one is queued (the deliverer's).
	Notices NoticeOutbox
	Wake    func()
	// Now defaults to time.Now.
	Now func() time.Time
}

// WorkItemLister lists a thread's work items; bot.WorkItemStore has it.
type WorkItemLister interface {
	ListWorkItems(ctx context.Context, f WorkItemFilter) ([]WorkItem, string, error)
}

// Intake turns events into persisted work items or ingress records. Sources
// call it and acknowledge only after it returns without error.
type Intake struct {
	opts  IntakeOptions
	rules atomic.Pointer[intakeRules]
}

// intakeRules is what the config in effect decides for the intake; Use
// replaces it whole.
type intakeRules struct {
	router       Decider
	dedup        time.Duration
	threadWindow time.Duration
}

// NewIntake returns an Intake.
func NewIntake(opts IntakeOptions) *Intake {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	in := &Intake{opts: opts}
	in.Use(opts.Router, opts.DedupWindow, opts.ThreadWindow)
	return in
}

// Use replaces the router, the dedup window and the thread window at
// once, when the config is reloaded: a decision under way finishes with
// what it started with, the next one uses these. Windows of 0 mean
// DefaultDedupWindow and DefaultThreadWindow.
func (in *Intake) Use(router Decider, dedupWindow, threadWindow time.Duration) {
	if dedupWindow <= 0 {
		dedupWindow = DefaultDedupWindow
	}
	if threadWindow <= 0 {
		threadWindow = DefaultThreadWindow
	}
	in.rules.Store(&intakeRules{router: router, dedup: dedupWindow, threadWindow: threadWindow})
}

// Ingest decides what ev makes (see Decide) and persists it: a work item
// with its dispatch, or an ingress record with the reason. A duplicate
// delivery returns the original with Duplicate set and changes nothing.
func (in *Intake) Ingest(ctx context.Context, ev *Event) (IngestResult, error) {
	d, err := in.Decide(ctx, ev)
	if err != nil {
		return IngestResult{}, err
	}
	req := in.request(ev)
	if d.Ignore != nil {
		req.Ignore = d.Ignore
	} else {
		req.Route = &d.Route
		if in.opts.React && Reacts(ev.Thread, ev.SourceRef) {
			req.Reaction = ReactionSeen
		}
	}
	res, err := in.store(ctx, ev, req)
	if err == nil && !res.Duplicate {
		in.tell(ctx, ev, d)
	}
	return res, err
}

// Seen reports, storing nothing, whether ev was ingested before within its
// dedup window, by its delivery id or its signature: the result Ingest
// would give it then, or a zero result.
func (in *Intake) Seen(ctx context.Context, ev *Event) (IngestResult, error) {
	res, err := in.opts.Store.Duplicate(ctx, ev, in.opts.Now().UTC())
	if err != nil {
		return IngestResult{}, fmt.Errorf("look up %s event %q: %w", ev.Source, ev.DeliveryID, err)
	}
	return res, nil
}

// IngestRouted persists an event whose route is already decided: a schedule
// firing names its agent, an agent hands work to another (parentID set).
func (in *Intake) IngestRouted(ctx context.Context, ev *Event, route Route, parentID string) (IngestResult, error) {
	req := in.request(ev)
	req.Route = &route
	req.ParentID = parentID
	return in.store(ctx, ev, req)
}

// DefaultThreadWindow is how long a thread stays with the agent that last
// worked in it: a reply the next morning is still part of the conversation.
const DefaultThreadWindow = 24 * time.Hour

// owner returns the route to the agent with work in ev's thread (its
// conversation, for a Slack direct message): the agent a work item was
// handed off to while that is unfinished; else the agent of the newest
// unfinished work item; else the agent of the newest work item, if it
// finished within ThreadWindow. Work that finished before the thread was
// reset counts for nothing (a reset thread starts afresh), nor does the work of
// an agent router no longer has (a reload took it out of the config): a
// reply there goes where the router sends it, and gone names the agent so
// the reason can say why.
func (in *Intake) owner(ctx context.Context, ev *Event, asOf time.Time, window time.Duration, router Decider) (route Route, ok bool, gone string) {
	items, err := in.threadWork(ctx, ev, asOf)
	if err != nil {
		in.opts.Logger.Warn("look up the agent of a thread", slog.String("thread", ev.Thread.Key()), slog.String("error", err.Error()))
		return Route{}, false, ""
	}
	now := in.opts.Now()
	unfinished := func(wi *WorkItem) bool { return !wi.Status.Finished() }
	if !asOf.IsZero() {
		// The thread as it was: work that finished since was unfinished
		// then.
		now = asOf
		unfinished = func(wi *WorkItem) bool {
			return !wi.Status.Finished() || wi.FinishedAt != nil && wi.FinishedAt.After(asOf)
		}
	}
	items = in.sinceReset(ctx, items, asOf, unfinished)
	recent := func(wi *WorkItem) bool {
		ended := wi.UpdatedAt
		if wi.FinishedAt != nil {
			ended = *wi.FinishedAt
		}
		return now.Sub(ended) <= window
	}
	if namer, ok := router.(agentNamer); ok && len(items) > 0 {
		agents := namer.Agents()
		kept := items[:0]
		for _, wi := range items {
			switch {
			case slices.Contains(agents, wi.Route.Agent):
				kept = append(kept, wi)
			case gone == "" && (unfinished(&wi) || recent(&wi)):
				gone = wi.Route.Agent
			}
		}
		items = kept
	}
	for _, wi := range items {
		if len(wi.Hops) > 0 && unfinished(&wi) {
			return Route{Agent: wi.Route.Agent, Kind: RouteHandoff, Reason: fmt.Sprintf("handoff: @%s owns this thread (%s)", wi.Route.Agent, wi.ID)}, true, ""
		}
	}
	for _, wi := range items {
		if unfinished(&wi) {
			return Route{Agent: wi.Route.Agent, Kind: RouteThread, Reason: fmt.Sprintf("thread: @%s is working here (%s)", wi.Route.Agent, wi.ID)}, true, ""
		}
	}
	if len(items) == 0 {
		return Route{}, false, gone
	}
	wi := items[0]
	if !recent(&wi) {
		return Route{}, false, gone
	}
	did := "worked"
	if wi.Status == StatusDone {
		did = "answered"
	}
	return Route{Agent: wi.Route.Agent, Kind: RouteThread, Reason: fmt.Sprintf("thread: @%s %s here (%s)", wi.Route.Agent, did, wi.ID)}, true, ""
}

// sinceReset leaves out of a thread's work items, newest first, the
// finished ones made before their thread was last reset (before asOf, when
// set: the thread as it was then). A reset cancels no job, so work still
// under way keeps its agent there. Without Resets every item is kept.
func (in *Intake) sinceReset(ctx context.Context, items []WorkItem, asOf time.Time, unfinished func(*WorkItem) bool) []WorkItem {
	if in.opts.Resets == nil || len(items) == 0 {
		return items
	}
	resets := map[string]time.Time{}
	kept := items[:0]
	for _, wi := range items {
		key := wi.Thread.Key()
		at, seen := resets[key]
		if !seen {
			var err error
			if at, err = in.opts.Resets.ThreadResetAt(ctx, key); err != nil {
				in.opts.Logger.Warn("look up when a thread was reset", slog.String("thread", key), slog.String("error", err.Error()))
			}
			if !asOf.IsZero() && at.After(asOf) {
				at = time.Time{}
			}
			resets[key] = at
		}
		if !wi.CreatedAt.Before(at) || unfinished(&wi) {
			kept = append(kept, wi)
		}
	}
	return kept
}

// threadRecent is how many of a thread's newest work items tell who has
// work in it.
const threadRecent = 10

// threadWork returns the newest work items of ev's thread (or
// conversation), leaving out subagents' (they work for a run, not for the
// thread); with asOf set, the newest made before it, paging back as far as
// it takes.
func (in *Intake) threadWork(ctx context.Context, ev *Event, asOf time.Time) ([]WorkItem, error) {
	f := WorkItemFilter{Thread: ev.Thread.Key(), Limit: threadRecent}
	if !ev.Conversation.IsZero() {
		f = WorkItemFilter{Conversation: ev.Conversation.Key(), Limit: threadRecent}
	}
	if !asOf.IsZero() || !ev.Conversation.IsZero() {
		f.Limit = 10 * threadRecent // a conversation's work comes in one page
	}
	var out []WorkItem
	for len(out) < threadRecent {
		items, next, err := in.opts.Threads.ListWorkItems(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, wi := range items {
			if !wi.IsChild() && (asOf.IsZero() || wi.CreatedAt.Before(asOf)) && len(out) < threadRecent {
				out = append(out, wi)
			}
		}
		if next == "" || f.Conversation != "" {
			break
		}
		f.Cursor = next
	}
	return out, nil
}

func (in *Intake) request(ev *Event) IngestRequest {
	now := in.opts.Now().UTC()
	if ev.ReceivedAt.IsZero() {
		ev.ReceivedAt = now
	}
	req := IngestRequest{Event: *ev, Now: now, DedupUntil: now.Add(in.rules.Load().dedup)}
	if ev.Signature != "" && !ev.SignedUntil.IsZero() && ev.SignedUntil.Before(req.DedupUntil) {
		req.SignedUntil = ev.SignedUntil
	}
	return req
}

func (in *Intake) store(ctx context.Context, ev *Event, req IngestRequest) (IngestResult, error) {
	res, err := in.opts.Store.Ingest(ctx, req)
	if err != nil {
		return IngestResult{}, fmt.Errorf("ingest %s event %q: %w", ev.Source, ev.DeliveryID, err)
	}
	m := in.opts.Metrics
	m.Events.WithLabelValues(ev.Source, ev.Kind).Inc()
	switch {
	case res.Duplicate:
		m.Duplicates.WithLabelValues(ev.Source).Inc()
		if res.Replayed {
			// Not a platform's retry, which keeps its delivery id: someone
			// sent a captured request again.
			in.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "signed request replayed: nothing done again",
				slog.String("source", ev.Source), slog.String("kind", ev.Kind), slog.String("delivery", ev.DeliveryID),
				slog.String("original", res.OriginalID()))
		}
	case res.WorkItem != nil:
		m.Routes.WithLabelValues(string(res.WorkItem.Route.Kind)).Inc()
		in.opts.Logger.LogAttrs(ctx, slog.LevelInfo, "work item accepted",
			slog.String("work_item", res.WorkItem.ID), slog.String("thread", res.WorkItem.Thread.Key()),
			slog.String("agent", res.WorkItem.Route.Agent), slog.String("reason", res.WorkItem.Route.Reason))
		if req.Reaction != "" && in.opts.Wake != nil {
			in.opts.Wake()
		}
		if in.opts.Accepted != nil {
			in.opts.Accepted(ctx, res.WorkItem, ev)
		}
	case res.Ingress != nil:
		m.Ignored.WithLabelValues(ev.Source, res.Ingress.Reason).Inc()
		in.opts.Logger.LogAttrs(ctx, slog.LevelDebug, "event ignored",
			slog.String("kind", ev.Kind), slog.String("reason", res.Ingress.Reason))
	}
	return res, nil
}
