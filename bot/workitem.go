package bot

import (
	"strings"
	"time"
)

// WorkStatus is the lifecycle of a work item.
type WorkStatus string

const (
	StatusQueued    WorkStatus = "queued"    // persisted and waiting for a worker
	StatusRunning   WorkStatus = "running"   // a job holds it
	StatusDone      WorkStatus = "done"      // the agent answered
	StatusFailed    WorkStatus = "failed"    // the run failed or attempts ran out
	StatusCancelled WorkStatus = "cancelled" // someone cancelled it
)

// Valid reports whether s is a known status.
func (s WorkStatus) Valid() bool {
	switch s {
	case StatusQueued, StatusRunning, StatusDone, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// Finished reports whether s is terminal.
func (s WorkStatus) Finished() bool {
	return s == StatusDone || s == StatusFailed || s == StatusCancelled
}

// Route is a routing decision: the agent, what kind of decision it was, and
// the reason a person can read ("mention @coder", "command /deploy",
// `rule "bugs" (priority 100)`, `thread: @coder is working here (wi_12)`,
// `content: keyword "deploy"`, "default"). Rule names the rule for rule and
// schedule decisions, and the entry point for a package's command; it is
// empty otherwise. Kind is what code reads;
// Reason is for people and never parsed.
type Route struct {
	Agent  string    `json:"agent"`
	Kind   RouteKind `json:"kind"`
	Reason string    `json:"reason"`
	Rule   string    `json:"rule"`
	// Unknown are the names the text mentioned ("@codr") that are no
	// agent's, when no agent was mentioned; a default route names them
	// in its reason.
	Unknown []string `json:"unknown,omitempty"`
	// Origin is who made the rule or command that decided: "" for the
	// config file and the built-in commands, "package:<name>" for a
	// package's entry point.
	Origin string `json:"origin,omitempty"`
	// Skills are loaded when the run starts: those of the entry point
	// that decided.
	Skills []string `json:"skills,omitempty"`
}

// RouteKind says what made a routing decision; metrics are labelled with it.
type RouteKind string

// Route kinds.
const (
	RouteMention  RouteKind = "mention"  // the text names the agent: @coder
	RouteCommand  RouteKind = "command"  // a command mapped to the agent: /deploy
	RouteRule     RouteKind = "rule"     // a routing rule matched
	RouteThread   RouteKind = "thread"   // the agent has work in the thread
	RouteKeyword  RouteKind = "keyword"  // one of the agent's keywords is in the text
	RouteDefault  RouteKind = "default"  // nothing else did: the default agent
	RouteHandoff  RouteKind = "handoff"  // an agent handed the work, or the thread, over
	RouteSchedule RouteKind = "schedule" // a schedule fired for the agent
	RouteSubagent RouteKind = "subagent" // a run spawned the agent as a child (spawn_subagent)
)

// Explicit reports whether a person or the config asked for this agent by
// name: a mention, a command, a rule or a schedule. Sources that act only
// on explicit requests (GitHub) make no work item for other kinds.
func (k RouteKind) Explicit() bool {
	switch k {
	case RouteMention, RouteCommand, RouteRule, RouteSchedule:
		return true
	}
	return false
}

// Hop is one re-routing of a work item by an agent.
type Hop struct {
	From   string    `json:"from"`
	To     string    `json:"to"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	// Ceilings bound the agent the work goes to: the effective rights of
	// the run that handed it on, so a handoff never widens them.
	Ceilings []Ceiling `json:"ceilings,omitempty"`
}

// MaxHops bounds how often agents may re-route one work item.
const MaxHops = 3

// WorkItem is the durable unit of work made from an Event.
type WorkItem struct {
	ID     string     `json:"id"`
	Thread Thread     `json:"thread"`
	Status WorkStatus `json:"status"`
	Route  Route      `json:"route"`
	Hops   []Hop      `json:"hops,omitempty"`
	// FirstRoute is the route the work item was made with, once agents
	// handed it on (Route is then the latest hand-off's).
	FirstRoute *Route `json:"first_route,omitempty"`
	ParentID   string `json:"parent_work_item_id,omitempty"`

	// What it was made from; the raw payload is kept apart under EventRef.
	EventRef   string `json:"event_ref"`
	Source     string `json:"source"`
	Kind       string `json:"kind"`
	DeliveryID string `json:"delivery_id,omitempty"`
	Actor      string `json:"actor,omitempty"`
	// Requester is who asked for the work; their access bounds every run.
	Requester Requester `json:"requester,omitzero"`
	Text      string    `json:"text,omitempty"`
	SourceRef string    `json:"source_ref,omitempty"`

	Summary string `json:"summary,omitempty"` // the final reply
	Error   string `json:"error,omitempty"`   // why it failed

	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// Agent returns the agent that currently owns the work item.
func (w *WorkItem) Agent() string { return w.Route.Agent }

// IsChild reports whether the work item is a subagent's: a run spawned it,
// and it reports to that run, not in the thread.
func (w *WorkItem) IsChild() bool { return w.ParentID != "" && w.Route.Kind == RouteSubagent }

// A listing's page size: DefaultListLimit when a filter's Limit is 0,
// never more than MaxListLimit.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// ListLimit is the page size a store lists with for a filter's Limit n.
func ListLimit(n int) int {
	switch {
	case n <= 0:
		return DefaultListLimit
	case n > MaxListLimit:
		return MaxListLimit
	}
	return n
}

// BadCursor is the error of a listing given a cursor it did not give out
// (EINVALID). The cursor is said back up to 64 bytes, so one made up at
// length does not come back whole in the answer, the UI's page or a log.
func BadCursor(cursor string) error {
	const shown = 64
	if len(cursor) > shown {
		return Errorf(EINVALID, "cursor %q… (%d bytes) is not one this listing gave out", strings.ToValidUTF8(cursor[:shown], ""), len(cursor))
	}
	return Errorf(EINVALID, "cursor %q is not one this listing gave out", cursor)
}

// WorkItemFilter selects work items; zero fields select all.
type WorkItemFilter struct {
	Thread string // session key
	// Conversation is the session key of a conversation made of threads,
	// a Slack direct message channel ("slack:T1/D1"): its threads' work
	// items, newest thread first.
	Conversation string
	Status       WorkStatus // one status
	Job          string     // the work items one job ran (a batched job runs several)
	Limit        int        // newest first; 0 means the store's default (100)
	// Cursor continues a listing after the page that returned it; "" is
	// the first page.
	Cursor string
}

// IngressReason codes say why an event made no work item.
const (
	IgnoreNoRoute      = "no_route"     // nothing routed it (GitHub events without mention, command or rule)
	IgnoreBot          = "bot_actor"    // sent by a bot, or by Switchyard itself
	IgnoreUnauthorized = "unauthorized" // the actor lacks permission
	IgnoreNotAllowed   = "not_allowed"  // channel or user outside the allow lists
	IgnoreUnsupported  = "unsupported"  // an event kind Switchyard does not act on
	IgnoreEdited       = "edited"       // an edit that adds no mention
	IgnoreDeleted      = "deleted"      // a deletion
	IgnoreApproval     = "approval"     // a person deciding an approval (a GitHub /approve or /deny comment)
	IgnoreAnswered     = "answered"     // a command answered at once, not work for an agent (Slack's /switchyard)
)

// IngressReasons are every reason code an ingress record has: what a
// listing of ingress records may be filtered by.
func IngressReasons() []string {
	return []string{IgnoreNoRoute, IgnoreBot, IgnoreUnauthorized, IgnoreNotAllowed, IgnoreUnsupported,
		IgnoreEdited, IgnoreDeleted, IgnoreApproval, IgnoreAnswered}
}

// IngressRecord keeps an event that created no work item, with the reason.
type IngressRecord struct {
	ID         string    `json:"id"`
	Source     string    `json:"source"`
	Kind       string    `json:"kind"`
	DeliveryID string    `json:"delivery_id,omitempty"`
	Actor      string    `json:"actor,omitempty"`
	Thread     Thread    `json:"thread"`
	Reason     string    `json:"reason"`
	Detail     string    `json:"detail,omitempty"`
	EventRef   string    `json:"event_ref"`
	CreatedAt  time.Time `json:"created_at"`
}

// IngressFilter selects ingress records, newest first.
type IngressFilter struct {
	Reason string
	Limit  int    // 0 means the store's default (100)
	Cursor string // continues a listing after the page that returned it
}
