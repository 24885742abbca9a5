package bot

import (
	"context"
	"time"
)

// The stores bot needs, each as small as its one consumer wants. storage/bolt
// implements all of them; storage/storetest is the conformance suite every
// implementation must pass.

// IngestRequest is one event to persist. Exactly one of Route and Ignore is
// set: a routed event becomes a work item and a pending dispatch, an ignored
// one an ingress record.
type IngestRequest struct {
	Event      Event
	Route      *Route
	Ignore     *IngressReason
	ParentID   string    // parent work item, for work items made by agents
	Now        time.Time //
	DedupUntil time.Time // when the dedup key may be forgotten
	// SignedUntil is when the event's SignatureKey may be forgotten;
	// DedupUntil when zero.
	SignedUntil time.Time
	// Reaction, on a routed event, is put on the triggering message
	// (Event.SourceRef): an outbox message keyed ReactionKey(work item,
	// Reaction), as ReactionMessage makes it, written in the same
	// transaction as the work item. "" for none.
	Reaction string
}

// IngressReason is why an event makes no work item.
type IngressReason struct {
	Code   string // one of the Ignore* constants
	Detail string
	// Tell is what to tell a person who addressed Switchyard, in their
	// thread, once per thread and reason; "" for reasons nobody is told
	// about (bots, edits, events nobody asked for). It is not stored.
	Tell string
	// About is whom Tell speaks to, when its words name them (GitHub's
	// "Sorry @mallory, …"), case-insensitively: then each person refused
	// in a thread is told once, not only the first. "" when Tell is the
	// same for everyone, told once per thread.
	About string
}

// Validate refuses a request no store should keep: exactly one of route and
// ignore, a route with its agent and kind, an ignore reason with its code,
// a reaction only on a routed event with a message to react to, and a
// thread (and conversation), delivery id, agent and code each store can
// keep and read back as they are.
func (r *IngestRequest) Validate() error {
	switch {
	case (r.Route == nil) == (r.Ignore == nil):
		return Errorf(EINVALID, "ingest: exactly one of route and ignore must be set")
	case r.Route != nil && r.Route.Agent == "":
		return Errorf(EINVALID, "ingest: route names no agent")
	case r.Route != nil && r.Route.Kind == "":
		return Errorf(EINVALID, "ingest: route to %q has no kind", r.Route.Agent)
	case r.Ignore != nil && r.Ignore.Code == "":
		return Errorf(EINVALID, "ingest: ignore reason has no code")
	case r.Reaction != "" && (r.Route == nil || !Reacts(r.Event.Thread, r.Event.SourceRef)):
		return Errorf(EINVALID, "ingest: a reaction needs a routed event with a message to react to")
	}
	for _, th := range []Thread{r.Event.Thread, r.Event.Conversation} {
		if th.IsZero() {
			continue
		}
		if err := th.Validate(); err != nil {
			return Errorf(EINVALID, "ingest: %s", ErrorMessage(err))
		}
	}
	texts := [][2]string{{"delivery id", r.Event.DedupKey()}, {"signature", r.Event.SignatureKey()}}
	if r.Route != nil {
		texts = append(texts, [2]string{"agent", r.Route.Agent})
	}
	if r.Ignore != nil {
		texts = append(texts, [2]string{"ignore reason", r.Ignore.Code})
	}
	for _, t := range texts {
		if err := ValidText(t[0], t[1]); err != nil {
			return Errorf(EINVALID, "ingest: %s", ErrorMessage(err))
		}
	}
	return nil
}

// IngestResult is what was stored, or what had been stored before for a
// duplicate.
type IngestResult struct {
	Duplicate bool
	// Replayed marks a duplicate known by its signature rather than its
	// delivery id: a signed request sent again under another delivery id
	// (or, where requests carry none, again).
	Replayed bool
	WorkItem *WorkItem      // set when the event (or its original) made a work item
	Ingress  *IngressRecord // set when it (or its original) was ignored
}

// OriginalID is the id of what was stored: the work item or the ingress
// record; "" when neither is known.
func (r IngestResult) OriginalID() string {
	switch {
	case r.WorkItem != nil:
		return r.WorkItem.ID
	case r.Ingress != nil:
		return r.Ingress.ID
	}
	return ""
}

// IngestStore persists events. Ingest is atomic: the raw payload, the dedup
// keys and the work item with its dispatch and reaction (or the ingress
// record) are written in one transaction or not at all. An event whose dedup
// key is known and not expired writes nothing and returns the original with
// Duplicate set; so does one whose SignatureKey is (with Replayed set too,
// unless its dedup key is known as well). The original of a signature whose
// record is gone is a Duplicate with neither WorkItem nor Ingress. Events
// with an empty DedupKey and SignatureKey are never duplicates.
type IngestStore interface {
	Ingest(ctx context.Context, req IngestRequest) (IngestResult, error)
	// Duplicate answers, writing nothing, what Ingest would for ev at now
	// if it is a duplicate: the original with Duplicate (and Replayed) set,
	// or a zero result for an event not seen within its window.
	Duplicate(ctx context.Context, ev *Event, now time.Time) (IngestResult, error)
	// ExpireDedup forgets dedup keys whose window ended before now and
	// returns how many it removed.
	ExpireDedup(ctx context.Context, now time.Time) (int, error)
}

// QueueStore is the persisted dispatch queue.
type QueueStore interface {
	// ClaimNext leases the oldest pending dispatch whose thread has no active
	// job, with every later pending dispatch of the same thread and agent, as
	// one new Job; their work items become running. A job whose lease has
	// expired counts as inactive: its dispatches are claimable again, unless
	// they have been claimed MaxAttempts times, in which case they fail with
	// their work items (returned as Abandoned). Returns a Claim with a nil Job
	// when nothing is claimable.
	ClaimNext(ctx context.Context, req ClaimRequest) (Claim, error)
	// RenewLease extends a running job's lease. It fails with ECONFLICT when
	// the job is no longer owned by owner (its lease expired and another
	// worker took it), and with the job's *Cancelled, extending nothing,
	// when its work was cancelled (CancelWorkItem): the worker that missed
	// the notification stops the run then.
	RenewLease(ctx context.Context, jobID, owner string, until time.Time) error
	// CancelWorkItem cancels a work item that has not finished, in one
	// transaction. A queued one leaves the queue and ends cancelled with
	// c's reason, and no job is returned. A running one is left to the
	// worker running it: c is recorded on its running job (Job.Cancel),
	// which is returned, and the job's end makes it cancelled. A claim
	// racing with it either comes first (then the work item is running) or
	// finds nothing to claim. ENOTFOUND for an unknown id, ECONFLICT for a
	// finished work item.
	CancelWorkItem(ctx context.Context, id string, c Cancelled) (*WorkItem, *Job, error)
	// FinishJob records how a job ended, in one transaction with its
	// dispatches (done or failed) and work items (done or failed, with the
	// summary or error), and the records its run left (out.Records, written
	// first). ECONFLICT when owner no longer holds the job, and nothing is
	// written.
	FinishJob(ctx context.Context, out JobOutcome) error
	// SaveJobRecords writes what a run left for its job's end, in one
	// transaction, when the job does not end here (see JobRecords).
	SaveJobRecords(ctx context.Context, recs JobRecords) error
	// ReleaseJob gives a running job back at shutdown: its dispatches are
	// pending again, its attempt not counted, its work items queued, and
	// tell (the status saying the work resumes after the restart) written
	// in the same transaction. A job whose work a person cancelled
	// (Job.Cancel) is not given back: it fails with the *Cancelled, writing
	// nothing, not even tell, and is ended cancelled.
	ReleaseJob(ctx context.Context, jobID, owner string, now time.Time, tell []OutboxMessage) error
	// QueueDepth counts pending and leased dispatches.
	QueueDepth(ctx context.Context) (int, error)
}

// WorkItemStore reads work items and records re-routing.
type WorkItemStore interface {
	GetWorkItem(ctx context.Context, id string) (*WorkItem, error)
	// ListWorkItems returns a page of matching work items, newest first,
	// and the cursor of the next page: "" only when there is none, so a
	// limit never cuts a listing silently. Work items added while someone
	// pages never make a page skip or repeat one.
	ListWorkItems(ctx context.Context, f WorkItemFilter) (items []WorkItem, next string, err error)
	// ListJobs returns the jobs that ran a work item, oldest first.
	ListJobs(ctx context.Context, workItemID string) ([]Job, error)
	// RerouteWorkItem records a hop to another agent and queues a new
	// dispatch for it, in one transaction. It fails with ECONFLICT after
	// MaxHops hops.
	RerouteWorkItem(ctx context.Context, id string, hop Hop) (*WorkItem, error)
	// GetEvent returns the stored event a work item or ingress record was
	// made from, with Raw filled in.
	GetEvent(ctx context.Context, ref string) (*Event, error)
}

// DeliveryStore finds what a delivery made, for explain.
type DeliveryStore interface {
	// FindDelivery returns the work item or the ingress record the delivery
	// with the id from source made (the latest, when it was delivered again
	// after the dedup window), or ENOTFOUND. An empty source means any; an
	// id that more than one source used is then EINVALID.
	FindDelivery(ctx context.Context, source, deliveryID string) (IngestResult, error)
}

// IngressStore lists ignored events.
type IngressStore interface {
	// ListIngress pages ingress records, newest first, as ListWorkItems
	// pages work items.
	ListIngress(ctx context.Context, f IngressFilter) (recs []IngressRecord, next string, err error)
}

// OutboxStore persists egress messages.
type OutboxStore interface {
	// Enqueue creates the message of msg.Key (Version 1) or, when the key
	// exists, replaces its content and bumps Version. Delivery state
	// (DeliveredVersion, RemoteID, Edits) is kept. A dead message stays dead.
	// A status that does not replace the stored one (OutboxMessage.Replaces)
	// changes nothing, and the stored message is returned.
	Enqueue(ctx context.Context, msg OutboxMessage) (OutboxMessage, error)
	// EnqueueNew creates the message of msg.Key as Enqueue does, unless the
	// key exists: then it changes nothing and returns the stored message
	// with created false.
	EnqueueNew(ctx context.Context, msg OutboxMessage) (m OutboxMessage, created bool, err error)
	// EnqueueAll enqueues each message as Enqueue does, in one transaction.
	EnqueueAll(ctx context.Context, msgs []OutboxMessage) error
	// Due returns pending messages whose NextAttemptAt is not after now, in
	// Seq order within each destination (Thread.Destination), at most limit
	// of each, leaving out the destinations skip reports (nil: none). A
	// message is held back while an earlier message of its work item is
	// pending but not due (waiting out a retry or an edit interval), so each
	// work item's messages reach the platform in the order they were first
	// enqueued.
	Due(ctx context.Context, now time.Time, limit int, skip func(destination string) bool) ([]OutboxMessage, error)
	// MarkAttempts records, before messages are created on their platform,
	// that the attempts may reach it (Attempted); a delivery clears it.
	MarkAttempts(ctx context.Context, keys []string) error
	// Record records how deliveries went, in one transaction: a delivered
	// version with the platform's id for the message and when its next
	// delivery may happen (edit throttling), which clears Attempted; or a
	// failed attempt, with when to try again or that the message is given
	// up. A key that does not exist or a version it never had fails the
	// whole call and records nothing.
	Record(ctx context.Context, outcomes []DeliveryOutcome) error
	// ListOutbox returns a thread's messages in Seq order.
	ListOutbox(ctx context.Context, thread string) ([]OutboxMessage, error)
	// GetOutbox returns one message by key.
	GetOutbox(ctx context.Context, key string) (*OutboxMessage, error)
	// OutboxPending counts messages not yet delivered in their latest
	// version, and dead ones.
	OutboxPending(ctx context.Context) (pending, dead int, err error)
	// OutboxWaiting counts the pending messages of one destination.
	OutboxWaiting(ctx context.Context, destination string) (int, error)
}

// DeliveryOutcome is how one delivery of an outbox message went.
type DeliveryOutcome struct {
	Key string
	// Delivered says the platform shows Version, as RemoteID (kept when
	// empty); Next is when the key may be delivered again.
	Delivered bool
	Version   int
	RemoteID  string
	// Error is why an attempt failed; Next is when to try again, and Dead
	// gives the message up.
	Error string
	Dead  bool
	At    time.Time
	Next  time.Time
}

// Apply records o on m, the message as stored: a delivered version (edits
// counted, the remote id kept when o has none) or a failed attempt. A
// delivered version m does not have is refused.
func (o DeliveryOutcome) Apply(m *OutboxMessage) error {
	at := o.At.Round(0).UTC()
	if o.At.IsZero() {
		at = time.Now().Round(0).UTC()
	}
	m.UpdatedAt = at
	m.NextAttemptAt = o.Next.Round(0).UTC()
	if !o.Delivered {
		m.Attempts++
		m.LastError = o.Error
		m.Dead = m.Dead || o.Dead
		return nil
	}
	if o.Version < 1 || o.Version > m.Version {
		return Errorf(EINVALID, "outbox message %q has no version %d (latest %d)", o.Key, o.Version, m.Version)
	}
	if m.DeliveredVersion > 0 {
		m.Edits++
	}
	m.DeliveredVersion = max(m.DeliveredVersion, o.Version)
	if o.RemoteID != "" {
		m.RemoteID = o.RemoteID
	}
	m.Attempted, m.Attempts, m.LastError = false, 0, ""
	m.DeliveredAt = &at
	return nil
}

// ScheduleStore remembers when each schedule last fired.
type ScheduleStore interface {
	LastFired(ctx context.Context, name string) (time.Time, bool, error)
	SetLastFired(ctx context.Context, name string, at time.Time) error
}

// Retention is how long what is over is kept; a zero duration keeps it
// forever.
type Retention struct {
	// Payloads is how long the raw payload of an event is kept; its record
	// (what was decided from it) stays as long as what it made.
	Payloads time.Duration
	// Records is how long a finished work item is kept after it finished,
	// with its dispatches, jobs and their transcripts, and its event; and
	// ingress records and outbox messages delivered or given up.
	Records time.Duration
	// Audit is how long audit records are kept.
	Audit time.Duration
}

// Default retention.
const (
	DefaultPayloadRetention = 30 * 24 * time.Hour
	DefaultRecordRetention  = 90 * 24 * time.Hour
	DefaultAuditRetention   = 365 * 24 * time.Hour
)

// Swept counts what a sweep removed.
type Swept struct {
	Payloads, WorkItems, Jobs, Dispatches, Ingress, Outbox, Audit int
}

// SweepStore forgets what retention lets go.
type SweepStore interface {
	// Sweep removes, as of now, what r lets go, and never anything live:
	// an unfinished work item, a running job, a pending dispatch, a message
	// still to be delivered. It works in transactions of bounded size, so
	// intake never waits long behind it.
	Sweep(ctx context.Context, now time.Time, r Retention) (Swept, error)
}

// Store is every store bot uses; it is what an implementation provides and
// what the conformance suite tests.
type Store interface {
	IngestStore
	QueueStore
	WorkItemStore
	IngressStore
	DeliveryStore
	OutboxStore
	ScheduleStore
	LedgerStore
	BudgetStore
	RunStateStore
	SweepStore
	// Ping reports whether the store is open and usable (readiness).
	Ping(ctx context.Context) error
	Close() error
}
