package bot

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Runner executes the agent of a job. The agent runtime implements it; until
// one is configured the daemon uses NoRuntime.
type Runner interface {
	Run(ctx context.Context, req RunRequest, progress Progress) (RunResult, error)
}

// RunRequest is everything a run starts from.
type RunRequest struct {
	Job Job
	// WorkItems are the job's work items in arrival order; the first leads.
	// Later ones arrived while an earlier run of the thread was active.
	WorkItems    []WorkItem
	Agent        string
	Thread       Thread
	Continuation Continuation
}

// Result statuses, as in the agent runtime's AgentResponse.
const (
	ResultSuccess = "success"
	ResultError   = "error"
	ResultRefused = "refused"
	// ResultCancelled is a run stopped on purpose (a subagent its parent
	// cancelled): its work items end cancelled, not failed.
	ResultCancelled = "cancelled"
)

// RunResult is how a run ended. A Runner returns a non-nil error only when it
// could not run at all; an agent that ran and failed returns Status "error".
type RunResult struct {
	Status     string
	Reply      string // the summary posted in the thread
	Error      string
	TokensUsed int
	TurnsUsed  int
	// Records are what the run leaves to be written with its job's end.
	Records JobRecords
}

// Progress receives what a run is doing; the reporter turns it into edits of
// the status message.
type Progress interface {
	Report(ctx context.Context, ev ProgressEvent)
}

// Progress event kinds.
const (
	ProgressTurnStarted  = "turn_started"
	ProgressToolCalled   = "tool_called"
	ProgressToolFinished = "tool_finished"
	ProgressLimitReached = "limit_reached"
	ProgressNote         = "note"
	// ProgressResumed says a run went on after a restart; the status
	// message keeps saying so to its end.
	ProgressResumed = "resumed"
	// ProgressSummary is what a run that started others spent and left
	// open, which its final status message shows.
	ProgressSummary = "summary"
	// ProgressRights says what the agent may do in this run and why, in
	// Text; the status message shows it for the rest of the run.
	ProgressRights = "rights"
	// ProgressSkills gives the skills the agent has loaded now, in Skills
	// (none when it unloaded the last); the status message shows them for
	// the rest of the run ("🧩 release-notes").
	ProgressSkills = "skills"
	// ProgressChildren is the tree of the subagents the run spawned, in
	// Children; the status message shows the latest.
	ProgressChildren = "children"
)

// ProgressEvent is one step of a run, in words a person reads in the thread.
type ProgressEvent struct {
	Kind string
	Text string // "reading main.go", "turn 3"
	Tool string
	Turn int
	// Skills are the loaded skills of a ProgressSkills event, in the order
	// they were loaded.
	Skills []string
	At     time.Time
	// Children are the lines of the subagent tree, nested by indentation,
	// for ProgressChildren.
	Children []string
}

// ErrNoRuntime is the answer of NoRuntime.
var ErrNoRuntime = Errorf(EUNAVAILABLE, "no agent runtime is configured")

// NoRuntime is the Runner used before the agent runtime is wired in: it ends
// every job with ErrNoRuntime, which the reporter posts in the thread.
type NoRuntime struct{}

var _ Runner = NoRuntime{}

// Run implements Runner.
func (NoRuntime) Run(context.Context, RunRequest, Progress) (RunResult, error) {
	return RunResult{}, ErrNoRuntime
}

// Continuation is what a run of (session key, agent) carries over from the
// thread: its earlier work items and every record the thread still owns.
type Continuation struct {
	SessionKey string
	Agent      string
	Earlier    []EarlierWork
	Open       []OpenRecord
	// At is when it was gathered: the ages of open records are counted to
	// it.
	At time.Time
	// ResetAt is when the thread was last reset, zero if never: nothing
	// from before it is carried over, not even a conversation saved after
	// it by a run that had started before.
	ResetAt time.Time
}

// EarlierWork is one earlier work item of the thread.
type EarlierWork struct {
	ID      string
	Agent   string
	Status  WorkStatus
	Text    string
	Summary string
	At      time.Time
}

// OpenRecord is a long-lived record (a child run, a background task) owned by
// the thread and still open. The subagents capability supplies them through
// an OpenRecordSource.
type OpenRecord struct {
	Kind    string // "subagent", "background_task"
	ID      string
	Status  string
	Summary string
	// Since is when it was started; the summary says how long ago.
	Since time.Time
}

// OpenRecordSource lists open records owned by a session key and agent. It is
// the seam for subagents and background tasks.
type OpenRecordSource interface {
	OpenRecords(ctx context.Context, sessionKey, agent string) ([]OpenRecord, error)
}

// Text renders the continuation for a prompt; "" when there is nothing.
func (c Continuation) Text() string {
	if len(c.Earlier) == 0 && len(c.Open) == 0 {
		return ""
	}
	var b strings.Builder
	if len(c.Earlier) > 0 {
		fmt.Fprintf(&b, "Earlier in this thread (%s):\n", c.SessionKey)
		for _, w := range c.Earlier {
			fmt.Fprintf(&b, "- %s [%s, %s] %q", w.ID, w.Agent, w.Status, oneLine(w.Text, 200))
			if w.Summary != "" {
				fmt.Fprintf(&b, " → %s", oneLine(w.Summary, 400))
			}
			b.WriteByte('\n')
		}
	}
	if len(c.Open) > 0 {
		b.WriteString("Still open and owned by this thread (manage them with list_children, await_child, cancel_child, list_background_tasks, read_background_output, stop_background_task):\n")
		for _, r := range c.Open {
			age := ""
			if !r.Since.IsZero() && !c.At.IsZero() {
				age = ", started " + Ago(c.At.Sub(r.Since)) + " ago"
			}
			fmt.Fprintf(&b, "- %s %s [%s%s] %s\n", r.Kind, r.ID, r.Status, age, oneLine(r.Summary, 200))
		}
	}
	return b.String()
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		return strings.ToValidUTF8(s[:max], "") + "…"
	}
	return s
}
