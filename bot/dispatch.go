package bot

import "time"

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
	// Abandoned are work items failed during this claim because their
	// dispatch's lease expired with no attempts left, told to their threads
	// with ClaimRequest.Abandon's messages.
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
}

// ChildLane is the lane of a subagent's work item: its own, inside its
// thread's workspace.
func ChildLane(th Thread, workItemID string) string { return th.Key() + "\x00child\x00" + workItemID }
