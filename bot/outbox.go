package bot

import (
	"errors"
	"fmt"
	"time"
)

// OutboxKind says what an egress message is.
type OutboxKind string

const (
	OutboxStatus   OutboxKind = "status"   // the living status message of a work item, edited in place
	OutboxReply    OutboxKind = "reply"    // the final summary
	OutboxReaction OutboxKind = "reaction" // an emoji on the triggering message (👀, ✅, ❌)
	// OutboxOpener is a message that opens the thread an event is reported
	// in when the event has no message of its own (a Slack slash command).
	// It is posted at the top level of its thread's channel; once it exists,
	// its sink hands the event in Payload, now with a thread, to the intake.
	OutboxOpener OutboxKind = "opener"
)

// Reactions, by their Slack names; sinks map them to their platform.
const (
	ReactionSeen    = "eyes"
	ReactionSuccess = "white_check_mark"
	ReactionFailure = "x"
)

// StatusView is the structured state behind a status message, so a sink can
// render it natively (Slack Block Kit) instead of parsing Text.
type StatusView struct {
	WorkItemID string `json:"work_item_id"`
	Agent      string `json:"agent"`
	State      string `json:"state"`    // queued, running, paused, done, failed, cancelled
	Activity   string `json:"activity"` // what the agent is doing now
	// Rights are the agent's effective rights and why: "read-only:
	// requested by @stranger, read access".
	Rights string `json:"rights,omitempty"`
	// Skills are the skills the agent has loaded, in the order it loaded
	// them.
	Skills   []string  `json:"skills,omitempty"`
	Started  time.Time `json:"started"`
	Updated  time.Time `json:"updated"`
	Children []string  `json:"children,omitempty"` // one line per open child run
	// Resumed says the run went on after a restart, from where, and what
	// became of the calls under way then.
	Resumed string `json:"resumed,omitempty"`
	// Summary is what a run that started others ends with: what it spent,
	// its subagents' included, and what it owns that is still open.
	Summary string `json:"summary,omitempty"`
	// Attempt is the attempt of the job whose run wrote the status; zero
	// where no run did (a work item given up because its workers kept
	// dying).
	Attempt int `json:"attempt,omitempty"`
}

// Final reports whether the status says how the work item ended.
func (v *StatusView) Final() bool {
	return v.State == "done" || v.State == "failed" || v.State == "cancelled"
}

// ApprovalView is the structured state behind an approval request posted
// in a thread, so a sink can render it natively (Slack's Approve / Deny
// buttons) instead of Text. Arguments and Reason are already redacted.
type ApprovalView struct {
	ID        string    `json:"id"`
	Agent     string    `json:"agent"`
	Profile   string    `json:"profile"`
	Tool      string    `json:"tool"`
	Arguments string    `json:"arguments,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	State     string    `json:"state"` // pending, approved, rejected, expired, cancelled
	DecidedBy string    `json:"decided_by,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Pending reports whether the request still waits for a decision.
func (v *ApprovalView) Pending() bool { return v.State == "pending" }

// OutboxMessage is one egress message, persisted before it is sent. Its Key
// is stable ("wi_7/status"), so enqueueing the same key again edits the one
// message instead of posting a second: each key produces exactly one visible
// message on the platform, created on first delivery and updated after.
type OutboxMessage struct {
	Key        string      `json:"key"`
	Seq        uint64      `json:"seq"` // delivery order, assigned on first enqueue
	Thread     Thread      `json:"thread"`
	WorkItemID string      `json:"work_item_id,omitempty"`
	Kind       OutboxKind  `json:"kind"`
	Text       string      `json:"text"`
	Status     *StatusView `json:"status,omitempty"`
	// Approval, on a reply, makes it an approval request; sinks that cannot
	// render one post Text.
	Approval *ApprovalView `json:"approval,omitempty"`
	// For, on a reply telling a person why nothing runs for them, is the
	// person its words name (IngressReason.About), lower-cased.
	For      string `json:"for,omitempty"`
	Reaction string `json:"reaction,omitempty"` // for OutboxReaction
	Target   string `json:"target,omitempty"`   // what a reaction goes on (Slack ts, GitHub comment or issue ref)
	// Payload, on an opener, is the event's payload as its source received
	// it; the sink that posts the opener reads it.
	Payload []byte `json:"payload,omitempty"`

	Version          int    `json:"version"`           // bumped by every enqueue of the key
	DeliveredVersion int    `json:"delivered_version"` // the version the platform shows
	RemoteID         string `json:"remote_id,omitempty"`
	Edits            int    `json:"edits"` // updates delivered after the first post

	// Attempted is set before the deliverer first tries to create the message
	// on its platform and cleared by a successful delivery. While it is set,
	// an earlier attempt may have created the message without its id being
	// recorded (a crash, a timeout, a shutdown mid-request), so the deliverer
	// asks the sink to find that message before creating another.
	Attempted bool `json:"attempted,omitempty"`

	Attempts      int       `json:"attempts"` // failed attempts since the last success
	NextAttemptAt time.Time `json:"next_attempt_at"`
	LastError     string    `json:"last_error,omitempty"`
	Dead          bool      `json:"dead,omitempty"` // gave up: permanent failure or attempts exhausted

	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
}

// Pending reports whether the platform does not yet show the latest version.
func (m *OutboxMessage) Pending() bool { return !m.Dead && m.Version > m.DeliveredVersion }

// Validate refuses a message no store should keep: one without a key, or
// without a thread its store could read back (a GitHub thread without a
// number, a Slack one without a channel).
func (m *OutboxMessage) Validate() error {
	switch {
	case m.Key == "":
		return Errorf(EINVALID, "outbox message without a key")
	case m.Thread.IsZero():
		return Errorf(EINVALID, "outbox message %q has no thread", m.Key)
	}
	if err := ValidText("outbox message key", m.Key); err != nil {
		return err
	}
	if err := m.Thread.Validate(); err != nil {
		return Errorf(EINVALID, "outbox message %q: %s", m.Key, ErrorMessage(err))
	}
	return nil
}

// Replaces reports whether m, enqueued under the key of prev, replaces it.
// A work item's status written by a run that no longer holds its job (its
// replica lost the lease, or was paused past it, and has not noticed yet)
// does not undo what the run that took the job over wrote: a status of an
// earlier attempt never replaces one of a later attempt, and a running
// status replaces a final one only when it is of a later attempt (the job
// ran again after its end was written but not recorded). A work item given
// up for good (a final status without an attempt) stays so, whatever a run
// that lost its job writes. Every other message replaces its key's content.
func (m *OutboxMessage) Replaces(prev *OutboxMessage) bool {
	if m.Kind != OutboxStatus || prev.Kind != OutboxStatus || m.Status == nil || prev.Status == nil {
		return true
	}
	next, was := m.Status, prev.Status
	switch {
	case was.Final() && was.Attempt == 0:
		return next.Attempt == 0
	case next.Attempt > 0 && next.Attempt < was.Attempt:
		return false
	case was.Final() && !next.Final():
		return next.Attempt > was.Attempt
	}
	return true
}

// DeliveryError is how a Sink says a delivery failed in a way the outbox
// should treat specially. Any other error is retried with backoff.
type DeliveryError struct {
	Err        error
	Permanent  bool          // do not retry (bad request, channel gone)
	RetryAfter time.Duration // the platform asked to wait this long (429 Retry-After)
	// Destination says RetryAfter holds every message of the destination,
	// not only this one (a rate limit of the whole account): the
	// deliverer takes the destination down until then, as one shared
	// wait, instead of trying each message in turn.
	Destination bool
}

func (e *DeliveryError) Error() string {
	switch {
	case e.Permanent:
		return fmt.Sprintf("permanent: %v", e.Err)
	case e.RetryAfter > 0:
		return fmt.Sprintf("retry after %s: %v", e.RetryAfter, e.Err)
	}
	return e.Err.Error()
}

func (e *DeliveryError) Unwrap() error { return e.Err }

// AsDeliveryError returns err's *DeliveryError, if it has one.
func AsDeliveryError(err error) (*DeliveryError, bool) {
	var de *DeliveryError
	ok := errors.As(err, &de)
	return de, ok
}
