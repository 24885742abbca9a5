package bot

import "time"

// ApprovalStatus is where an approval stands.
type ApprovalStatus string

const (
	ApprovalPending   ApprovalStatus = "pending"
	ApprovalApproved  ApprovalStatus = "approved"
	ApprovalRejected  ApprovalStatus = "rejected"
	ApprovalExpired   ApprovalStatus = "expired"
	ApprovalCancelled ApprovalStatus = "cancelled"
)

// Valid reports whether s is one of the statuses above.
func (s ApprovalStatus) Valid() bool {
	switch s {
	case ApprovalPending, ApprovalApproved, ApprovalRejected, ApprovalExpired, ApprovalCancelled:
		return true
	}
	return false
}

// Approval is one tool call waiting for, or decided by, a person. It is
// stored, so a pending approval outlives the process that asked: its
// buttons and commands keep working, and the run that resumes the job after
// a restart waits on it instead of asking again. Arguments and Reason are
// redacted.
type Approval struct {
	ID     string         `json:"id"`
	Status ApprovalStatus `json:"status"`
	// Key names the call the approval is for: the work item, the agent,
	// the tool and a digest of its input. A run that makes the same call
	// for the same work item again finds the approval by its key.
	Key           string     `json:"key,omitempty"`
	Tool          string     `json:"tool"`
	Arguments     string     `json:"arguments"`
	Reason        string     `json:"reason"`
	Agent         string     `json:"agent"`
	Profile       string     `json:"profile"`
	SessionKey    string     `json:"session_key"`
	WorkItemID    string     `json:"work_item_id,omitempty"`
	JobID         string     `json:"job_id,omitempty"`
	CorrelationID string     `json:"correlation_id,omitempty"`
	Approvers     []string   `json:"approvers"`
	CreatedAt     time.Time  `json:"created_at"`
	ExpiresAt     time.Time  `json:"expires_at"`
	DecidedAt     *time.Time `json:"decided_at,omitempty"`
	DecidedBy     string     `json:"decided_by,omitempty"`
	// Taken is set once a run has received the outcome: a decided
	// approval that no run has taken yet is what a resumed run finds.
	Taken bool `json:"taken,omitempty"`
}

// ApprovalOutcome is how a pending approval ends, as the store records it.
type ApprovalOutcome struct {
	Status ApprovalStatus // approved, rejected, expired or cancelled
	By     string         // who decided; "" when nobody did (expired, cancelled)
	At     time.Time
	// Taken records that the run waiting on the approval has its outcome
	// already (it expired or was cancelled under it).
	Taken bool
}
