package bot

import (
	"fmt"
	"time"
)

// DispatchStatus is the state of a dispatch in the queue.
type DispatchStatus string

const (
	DispatchPending DispatchStatus = "pending" // waiting to be claimed
	DispatchLeased  DispatchStatus = "leased"  // claimed by a worker until its lease expires
	DispatchDone    DispatchStatus = "done"
	DispatchFailed  DispatchStatus = "failed"
)

// Dispatch is a routing decision put in the queue: work item X for agent Y.
type Dispatch struct {
	ID         string         `json:"id"`
	WorkItemID string         `json:"work_item_id"`
	Agent      string         `json:"agent"`
	Thread     Thread         `json:"thread"`
	Status     DispatchStatus `json:"status"`
	Attempts   int            `json:"attempts"` // claims so far
	LastError  string         `json:"last_error,omitempty"`
	CreatedAt  time.Time      `json:"created_at"`
	UpdatedAt  time.Time      `json:"updated_at"`
	// Lane is the queue's unit of one job at a time: "" means the thread.
	// A subagent's dispatch has a lane of its own (ChildLane), so it runs
	// while the parent that waits for it holds the thread's.
	Lane string `json:"lane,omitempty"`
}

// JobStatus is the state of one execution attempt.
type JobStatus string

const (
	JobRunning   JobStatus = "running"
	JobSucceeded JobStatus = "succeeded"
	JobFailed    JobStatus = "failed"
	JobReleased  JobStatus = "released" // given back at shutdown; the dispatches are pending again
	JobExpired   JobStatus = "expired"  // its lease ran out (the process died)
)

// Job is one execution attempt of one or more dispatches of the same thread
// and agent: messages that arrived while an earlier run was active are handed
// to the next run together.
type Job struct {
	ID           string     `json:"id"`
	DispatchIDs  []string   `json:"dispatch_ids"`
	WorkItemIDs  []string   `json:"work_item_ids"`
	Agent        string     `json:"agent"`
	Thread       Thread     `json:"thread"`
	Attempt      int        `json:"attempt"` // 1 for the first claim of the lead dispatch
	Status       JobStatus  `json:"status"`
	Owner        string     `json:"owner"` // the worker holding the lease
	LeaseExpires time.Time  `json:"lease_expires"`
	Error        string     `json:"error,omitempty"`
	StartedAt    time.Time  `json:"started_at"`
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
	// Lane is its dispatches' lane ("" for the thread's).
	Lane string `json:"lane,omitempty"`
	// Cancel is set when a person cancelled the job's work while it ran:
	// the worker running it stops it (see QueueStore.CancelWorkItem).
	Cancel *Cancelled `json:"cancel,omitempty"`
}

// Cancelled is a person's cancel of running work: who, why and when. It is
// the cause a cancelled run's context ends with, and what its status
// message and work items say.
type Cancelled struct {
	By     string    `json:"by"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// Error says who cancelled, and why when they said.
func (c *Cancelled) Error() string {
	s := "cancelled by " + c.By
	if c.Reason != "" {
		s += ": " + c.Reason
	}
	return s
}

// ClaimRequest asks the queue for the next job.
type ClaimRequest struct {
	Owner       string        // worker identity, recorded on the job
	Now         time.Time     //
	Lease       time.Duration // how long the claim holds without renewal
	MaxAttempts int           // a dispatch claimed this often and expired again fails
	// Abandon, when set, gives the messages that tell a work item's thread
	// it was given up. ClaimNext writes them in the transaction that fails
	// the work item, so no crash can leave it failed and untold. A message
	// of Kind OutboxReaction is written only when its key is new (as
	// EnqueueNew); the others replace what their keys hold (as Enqueue).
	Abandon func(WorkItem) []OutboxMessage
}

// Validate checks a claim asks for something a store can grant.
func (r ClaimRequest) Validate() error {
	switch {
	case r.Owner == "":
		return Errorf(EINVALID, "claim: no owner")
	case r.Lease <= 0:
		return Errorf(EINVALID, "claim: lease %s is not positive", r.Lease)
	case r.MaxAttempts < 1:
		return Errorf(EINVALID, "claim: max attempts %d is below 1", r.MaxAttempts)
	}
	return nil
}

// Claim is what ClaimNext hands a worker.
type Claim struct {
	// Job is the new job, or nil when nothing is claimable.
	Job *Job
	// WorkItems are the job's work items, in arrival order, already marked
	// running.
	WorkItems []WorkItem
	// Abandoned are work items ended during this claim because their
	// dispatch's lease expired: failed with no attempts left, or cancelled
	// when a person had cancelled them before their worker died (see
	// Dispatch.Expired), told to their threads with ClaimRequest.Abandon's
	// messages.
	Abandoned []WorkItem
}

// JobOutcome is how a job ended, recorded by FinishJob in one transaction with
// its dispatches and work items.
type JobOutcome struct {
	JobID   string
	Owner   string
	Now     time.Time
	Success bool
	Summary string // the final reply, set on every work item of the job
	Error   string // why it failed
	// Cancelled ends the work items cancelled rather than failed: a
	// subagent its parent, or a person, cancelled.
	Cancelled bool
	// Records are what the run left to be written with its job's end,
	// before the job's own changes (see JobRecords).
	Records JobRecords
	// Messages tell the job's thread how it ended: the final status, the
	// reply, ✅ or ❌. They are written in the transaction that ends the
	// job, and only when it ends there: a run whose job another worker took
	// over, or whose failure a person's cancel overtook (CancelledFirst),
	// writes none of them, so the thread hears one end, once. A message of
	// Kind OutboxReaction is written only when its key is new (as
	// EnqueueNew); the others replace what their keys hold (as Enqueue).
	Messages []OutboxMessage
}

// Expired decides how d, leased by job j whose worker died (its lease ran
// out), ends: with attempts left it is retried; a dispatch whose work a
// person cancelled before the worker died ends cancelled, saying who,
// rather than run again; one out of attempts fails. why is the work item's
// error. Every store decides through it, in the claim that finds the lease
// expired.
func (d *Dispatch) Expired(j *Job, maxAttempts int) (retry bool, status WorkStatus, run RunStatus, why string) {
	switch {
	case j.Cancel != nil:
		return false, StatusCancelled, RunCancelled, j.Cancel.Error()
	case d.Attempts < maxAttempts:
		return true, "", "", ""
	}
	return false, StatusFailed, RunInterrupted, fmt.Sprintf("lease expired after %s (worker died)", Count(d.Attempts, "attempt", "attempts"))
}

// CancelledFirst is the cancel a person made of job j while its run was
// failing, or nil: the store refuses a failed end of such a job with it,
// writing nothing, and the dispatcher ends the job cancelled, saying it had
// failed as well. A run that succeeded before the cancel reached it keeps
// its result. Every store checks it in the transaction that ends the job.
func (o *JobOutcome) CancelledFirst(j *Job) *Cancelled {
	if o.Success || o.Cancelled {
		return nil
	}
	return j.Cancel
}

// Follow makes o end as its subagent's record, rec, says when the record
// was cancelled (by a person, or by the parent) before the job's end was
// written: the child finished as the cancel came, and its work item ends
// cancelled too, rather than done beside a record and a receipt saying
// cancelled. Every store calls it with the record as the job's end left it,
// in the transaction that ends the job.
func (o *JobOutcome) Follow(rec *ChildRun) {
	if rec == nil || o.Cancelled || rec.Status != RunCancelled {
		return
	}
	o.Success, o.Cancelled, o.Error = false, true, rec.Error
}

// End ends job j as the outcome says, at now, and returns the statuses
// its dispatches, its work items and a subagent's ledger record take.
// Every store ends a job through it.
func (o JobOutcome) End(j *Job, now time.Time) (DispatchStatus, WorkStatus, RunStatus) {
	j.FinishedAt = &now
	switch {
	case o.Cancelled:
		j.Status, j.Error = JobFailed, o.Error
		return DispatchFailed, StatusCancelled, RunCancelled
	case !o.Success:
		j.Status, j.Error = JobFailed, o.Error
		return DispatchFailed, StatusFailed, RunFailed
	}
	j.Status = JobSucceeded
	return DispatchDone, StatusDone, RunDone
}

// JobRecords are what a run leaves to be written in the transaction that
// ends its job, so that a subagent's end is one commit: its last model
// call's usage, its transcript and its ledger record's end. None of them
// can wait past the job's end: no model call of the run follows its last
// one, and its parent reads the record once it has ended. A job that is
// not finished (handed back at shutdown, its lease taken over) has them
// written on their own (QueueStore.SaveJobRecords).
type JobRecords struct {
	// Usage is the run's last model call's, counted with the call's
	// answer rather than before it.
	Usage *Usage
	// Transcript is the run's transcript.
	Transcript *Transcript
	// Run is how a subagent's ledger record ended.
	Run *RunEnd
}

// Empty reports whether there is nothing to write.
func (r JobRecords) Empty() bool { return r.Usage == nil && r.Transcript == nil && r.Run == nil }

// Validate checks the records before a store writes any of them.
func (r JobRecords) Validate() error {
	if r.Usage != nil {
		if err := r.Usage.Validate(); err != nil {
			return err
		}
	}
	if t := r.Transcript; t != nil && (t.JobID == "" || t.RunID == "") {
		return Errorf(EINVALID, "transcript: a job and a run id are required")
	}
	if e := r.Run; e != nil {
		switch {
		case e.ID == "":
			return Errorf(EINVALID, "run end: no record id")
		case !e.Status.Valid() || e.Status.Open():
			return Errorf(EINVALID, "run end of %s: %q is not how a run ends", e.ID, e.Status)
		case e.Tokens < 0:
			return Errorf(EINVALID, "run end of %s: negative tokens", e.ID)
		case len(e.Result) > MaxLedgerText || len(e.Error) > MaxLedgerText:
			return Errorf(ETOOLARGE, "run end of %s: result or error over %d bytes", e.ID, MaxLedgerText)
		}
	}
	return nil
}

// Transcript is the transcript of run RunID of job JobID, an opaque
// document the agent runtime encodes; saving a run's again replaces it.
type Transcript struct {
	JobID string
	RunID string
	Doc   []byte
}

// RunEnd is how a subagent's run ended, for its ledger record: applied
// unless the record ended first (cancelled, or timed out by its parent),
// whose tokens are raised to Tokens either way.
type RunEnd struct {
	ID string
	// ParentWorkItemID is the parent's work item, whose tree shows it.
	ParentWorkItemID string
	Status           RunStatus
	Result           string
	Error            string
	Tokens           int
	At               time.Time
}

// Apply ends r as e says, unless r ended first; it reports whether it
// changed anything.
func (e RunEnd) Apply(r *ChildRun) bool {
	changed := e.Tokens > r.Tokens
	r.Tokens = max(r.Tokens, e.Tokens)
	if r.Status.Open() {
		at := e.At
		r.Status, r.Result, r.Error, r.FinishedAt = e.Status, e.Result, e.Error, &at
		changed = true
	}
	return changed
}

// ChildLane is the lane of a subagent's work item: its own, inside its
// thread's workspace.
func ChildLane(th Thread, workItemID string) string { return th.Key() + "\x00child\x00" + workItemID }
