package bot

import (
	"context"
	"time"
)

// The ledger: every long-lived execution a run starts (a subagent, an agent
// called as a tool, a handoff, a background task) is a record with who may
// manage it across runs (its owner), who started it (its creator, for
// receipts) and explicit links to where it came from. Nesting in the status
// message, the CLI and the API comes from these links only.

// Owner is who may manage a long-lived record across runs: list, await,
// cancel and stop check the owner, never the creator. SandboxName is the
// workspace directory the record works in ("" for work without one).
type Owner struct {
	SessionKey  string `json:"owner_session_key"`
	AgentID     string `json:"owner_agent_id"`
	SandboxName string `json:"owner_sandbox_name"`
}

// Owns reports whether o may manage a record owned by other: the same
// session key and agent.
func (o Owner) Owns(other Owner) bool {
	return o.SessionKey != "" && o.SessionKey == other.SessionKey && o.AgentID == other.AgentID
}

// Creator is what started a record, kept for receipts and audits.
type Creator struct {
	JobID      string `json:"creator_job_id"`
	DispatchID string `json:"creator_dispatch_id"`
	WorkItemID string `json:"creator_work_item_id"`
}

// ParentLinks say which run a record came from.
type ParentLinks struct {
	WorkItemID string `json:"parent_work_item_id"`
	JobID      string `json:"parent_job_id"`
	DispatchID string `json:"parent_dispatch_id"`
}

// RunKind says what a ledger record of a run is.
type RunKind string

// Run kinds.
const (
	// RunSubagent is a child run started by spawn_subagent: it has a work
	// item, a dispatch and jobs of its own.
	RunSubagent RunKind = "subagent"
	// RunAgentCall is an agent called as a tool (agent_<name>): it runs
	// inside its caller's job.
	RunAgentCall RunKind = "agent_call"
	// RunHandoff is a work item handed to another agent (handoff_to): its
	// child work item is the same work item, with a new dispatch.
	RunHandoff RunKind = "handoff"
)

// RunStatus is where a ledger record of a run stands.
type RunStatus string

// Run statuses. Queued and running are open; the others are final.
const (
	RunQueued      RunStatus = "queued"
	RunRunning     RunStatus = "running"
	RunDone        RunStatus = "done"
	RunFailed      RunStatus = "failed"
	RunCancelled   RunStatus = "cancelled"
	RunTimedOut    RunStatus = "timed_out"
	RunInterrupted RunStatus = "interrupted" // the daemon stopped under it and it could not go on
)

// Open reports whether a record with status s still runs or waits to.
func (s RunStatus) Open() bool { return s == RunQueued || s == RunRunning }

// Valid reports whether s is a known status.
func (s RunStatus) Valid() bool {
	switch s {
	case RunQueued, RunRunning, RunDone, RunFailed, RunCancelled, RunTimedOut, RunInterrupted:
		return true
	}
	return false
}

// ChildRun is the ledger record of a run one run started: a subagent, an
// agent called as a tool, or a handoff.
type ChildRun struct {
	ID   string  `json:"id"`
	Kind RunKind `json:"kind"`
	Owner
	Creator
	ParentLinks
	// The child's own work item, dispatch and job: a subagent has all
	// three (its job set when a worker claims it), a handoff its work item
	// (the same) and its new dispatch, an agent call none.
	ChildWorkItemID string `json:"child_work_item_id"`
	ChildDispatchID string `json:"child_dispatch_id"`
	ChildJobID      string `json:"child_job_id"`
	// RootWorkItemID is the work item the tree started from: budgets are
	// counted per tree.
	RootWorkItemID string `json:"root_work_item_id"`
	// Agent is the agent that runs (the callee, the agent handed to).
	Agent string `json:"agent"`
	// Task is what it was asked to do; Context the short summary its
	// parent gave with it (never the parent's conversation).
	Task    string   `json:"task"`
	Context string   `json:"context,omitempty"`
	Skills  []string `json:"skills,omitempty"`
	// CallID is the parent's tool call that started it, so a resumed parent
	// finds the child instead of spawning it again.
	CallID string `json:"call_id,omitempty"`
	// Depth is how many spawns deep it is: a child of a top-level run is 1.
	Depth      int  `json:"depth"`
	Background bool `json:"background,omitempty"`
	// TimeoutSeconds bounds a subagent's run from its start.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
	// Ceilings bound the child's rights: everything that bounded its
	// parent and the parent's own profile, so it never gets more.
	Ceilings []Ceiling `json:"ceilings,omitempty"`
	Status   RunStatus `json:"status"`
	// Result is what it answered (the start of it); Error why it failed.
	Result string `json:"result_summary"`
	Error  string `json:"error,omitempty"`
	Tokens int    `json:"tokens"`
	// Receipt says who closed or archived it, and why.
	Receipt    *Receipt   `json:"receipt,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	ArchivedAt *time.Time `json:"archived_at,omitempty"`
}

// TaskStatus is where a background task stands.
type TaskStatus string

// Task statuses. Only running is open.
const (
	TaskRunning     TaskStatus = "running"
	TaskExited      TaskStatus = "exited"      // the process ended by itself
	TaskStopped     TaskStatus = "stopped"     // stopped by a tool call, a run's end, a reset or a deletion
	TaskInterrupted TaskStatus = "interrupted" // the daemon stopped, and the process with it
	TaskFailed      TaskStatus = "failed"      // it could not start
)

// Open reports whether a task with status s still runs.
func (s TaskStatus) Open() bool { return s == TaskRunning }

// BackgroundTask is a long-lived process a run started in the sandbox
// (bash with background: true): a watcher, a dev server.
type BackgroundTask struct {
	ID string `json:"id"`
	Owner
	Creator
	// Agent is the agent whose call started it.
	Agent   string `json:"agent"`
	Command string `json:"command"`
	// CleanupOnRunEnd stops the task when the run that started it ends;
	// with false it outlives the run and later runs of its owner manage it.
	CleanupOnRunEnd bool       `json:"cleanup_on_run_end"`
	Status          TaskStatus `json:"status"`
	ExitCode        *int       `json:"exit_code,omitempty"`
	Error           string     `json:"error,omitempty"`
	// LogFile holds its output, bounded, under the data directory.
	LogFile    string     `json:"log_file"`
	Receipt    *Receipt   `json:"receipt,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	ArchivedAt *time.Time `json:"archived_at,omitempty"`
}

// Receipt actions.
const (
	ReceiptCancelled = "cancelled" // an open child run was cancelled
	ReceiptStopped   = "stopped"   // a running background task was stopped
	ReceiptArchived  = "archived"  // a finished record will not be carried over again
)

// Receipt is the record of closing or archiving a ledger record: what it
// was, who started it, who closed it and why.
type Receipt struct {
	RecordID string `json:"record_id"`
	// Kind is the record's: subagent, agent_call, handoff or
	// background_task.
	Kind           string `json:"kind"`
	Action         string `json:"action"`
	PreviousStatus string `json:"previous_status"`
	Reason         string `json:"reason"`
	By             string `json:"by"`
	Owner
	Creator
	At time.Time `json:"at"`
}

// KindBackgroundTask is the Kind of a background task's receipt.
const KindBackgroundTask = "background_task"

// SpawnRequest asks the ledger for a subagent: its record and the work item
// and pending dispatch that run it, written together.
type SpawnRequest struct {
	// Run is the record to write; ID, the child ids and the timestamps are
	// filled in. Status is queued.
	Run ChildRun
	// Thread is where the parent works: the child works in the same
	// workspace. Requester is the parent's.
	Thread    Thread
	Requester Requester
	Now       time.Time
	// Claim, when set, leases the child's dispatch in the same transaction
	// as a job of Claim.Owner's, a worker the spawner took (see
	// TakeWorker), so the child starts without a claim of its own.
	Claim *ClaimRequest
	// State, when set, is the spawning run's state, saved in the same
	// transaction as SaveRunState saves it: a turn that asks for nothing
	// but spawns saves its answer with the first of them.
	State *RunState
}

// Validate checks the request's claim and state.
func (r SpawnRequest) Validate() error {
	if st := r.State; st != nil && (st.WorkItemID == "" || len(st.Doc) == 0) {
		return Errorf(EINVALID, "spawn %s: the spawning run's state needs a work item and a document", r.Run.Agent)
	}
	if r.Claim != nil {
		return r.Claim.Validate()
	}
	return nil
}

// Spawned is what SpawnChild wrote: the record, and the child's job when
// the request claimed it (Claim.Job nil otherwise).
type Spawned struct {
	Run   ChildRun
	Claim Claim
}

// RunFilter selects ledger records of runs; zero fields select all.
type RunFilter struct {
	OwnerSessionKey  string
	OwnerAgent       string
	ParentWorkItemID string
	Status           RunStatus
	// Open selects queued and running records only.
	Open bool
	// Unarchived leaves out archived records.
	Unarchived bool
	// Limit is the page size, newest first; 0 means the store's default
	// (100).
	Limit  int
	Cursor string
}

// Validate checks the filter's status.
func (f RunFilter) Validate() error {
	if f.Status != "" && !f.Status.Valid() {
		return Errorf(EINVALID, "unknown run status %q: want queued, running, done, failed, cancelled, timed_out or interrupted", f.Status)
	}
	return nil
}

// TaskFilter selects background tasks; zero fields select all.
type TaskFilter struct {
	OwnerSessionKey string
	OwnerAgent      string
	CreatorJobID    string
	Open            bool
	Unarchived      bool
	Limit           int
	Cursor          string
}

// MaxLedgerText bounds the free text of a ledger record (a run's task,
// context and result, a task's command): the ledger keeps summaries, the
// transcripts the rest.
const MaxLedgerText = 16 << 10

// Validate checks a run record before a store keeps it.
func (r *ChildRun) Validate() error {
	switch {
	case r.Kind != RunSubagent && r.Kind != RunAgentCall && r.Kind != RunHandoff:
		return Errorf(EINVALID, "run: unknown kind %q", r.Kind)
	case r.Agent == "":
		return Errorf(EINVALID, "run: no agent")
	case r.SessionKey == "" || r.AgentID == "":
		return Errorf(EINVALID, "run of %s: no owner (session key and agent are required)", r.Agent)
	case !r.Status.Valid():
		return Errorf(EINVALID, "run of %s: unknown status %q", r.Agent, r.Status)
	case len(r.Task) > MaxLedgerText || len(r.Context) > MaxLedgerText:
		return Errorf(ETOOLARGE, "run of %s: task or context over %d bytes", r.Agent, MaxLedgerText)
	}
	return nil
}

// Validate checks a background task before a store keeps it.
func (bt *BackgroundTask) Validate() error {
	switch {
	case bt.SessionKey == "" || bt.AgentID == "":
		return Errorf(EINVALID, "background task: no owner (session key and agent are required)")
	case bt.Command == "":
		return Errorf(EINVALID, "background task: no command")
	case len(bt.Command) > MaxLedgerText:
		return Errorf(ETOOLARGE, "background task: command over %d bytes", MaxLedgerText)
	}
	switch bt.Status {
	case TaskRunning, TaskExited, TaskStopped, TaskInterrupted, TaskFailed:
		return nil
	}
	return Errorf(EINVALID, "background task: unknown status %q", bt.Status)
}

// CapLedgerText cuts s to MaxLedgerText bytes.
func CapLedgerText(s string) string {
	if len(s) <= MaxLedgerText {
		return s
	}
	return s[:MaxLedgerText]
}

// LedgerStore keeps the ledger. A subagent's record moves with its work
// item: when a worker claims the work item the record is running with the
// job's id; when the job is released or its worker dies it is queued again;
// when the work item ends and the record is still open, it ends the same
// way (abandoned work is interrupted).
type LedgerStore interface {
	// SpawnChild writes a subagent's record, its work item (parent link
	// set, routed as a subagent) and its pending dispatch, in a lane of its
	// own, in one transaction, and returns the record. With req.Claim the
	// same transaction leases the dispatch as a job of the claim's owner:
	// the record is then running in that job.
	SpawnChild(ctx context.Context, req SpawnRequest) (Spawned, error)
	// AddRun records an agent call or a handoff: a run without a work item
	// of its own to start.
	AddRun(ctx context.Context, r ChildRun) (ChildRun, error)
	GetRun(ctx context.Context, id string) (*ChildRun, error)
	// RunOfWorkItem returns the subagent record whose child work item is
	// workItemID, or ENOTFOUND.
	RunOfWorkItem(ctx context.Context, workItemID string) (*ChildRun, error)
	// UpdateRun changes a record with edit in one transaction; edit may
	// refuse with an error, which is returned and changes nothing.
	UpdateRun(ctx context.Context, id string, edit func(*ChildRun) error) (*ChildRun, error)
	// CancelRun ends an open subagent: a queued one's dispatch leaves the
	// queue and its work item is cancelled with it; either way the record
	// is cancelled with receipt. A running one's process is the caller's
	// to stop. A finished record is ECONFLICT.
	CancelRun(ctx context.Context, id string, receipt Receipt) (*ChildRun, error)
	// ListRuns pages records newest first, as ListWorkItems pages.
	ListRuns(ctx context.Context, f RunFilter) (runs []ChildRun, next string, err error)

	AddTask(ctx context.Context, t BackgroundTask) (BackgroundTask, error)
	GetTask(ctx context.Context, id string) (*BackgroundTask, error)
	UpdateTask(ctx context.Context, id string, edit func(*BackgroundTask) error) (*BackgroundTask, error)
	ListTasks(ctx context.Context, f TaskFilter) (tasks []BackgroundTask, next string, err error)

	// MarkThreadReset records that a thread was reset at at: what came
	// before is not carried over into its next runs.
	MarkThreadReset(ctx context.Context, sessionKey string, at time.Time) error
	// ThreadResetAt returns when the thread was last reset, zero if never.
	ThreadResetAt(ctx context.Context, sessionKey string) (time.Time, error)
}
