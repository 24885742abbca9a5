package admin

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
)

// Runs is the ledger of runs as the API manages it: subagents, agent calls
// and handoffs. Await and cancel act through the process that runs them, so
// a waiting run is woken and a running subagent stopped.
type Runs interface {
	ListRuns(ctx context.Context, f bot.RunFilter) ([]bot.ChildRun, string, error)
	GetRun(ctx context.Context, id string) (*bot.ChildRun, error)
	// RunOfWorkItem returns the subagent whose own work item it is.
	RunOfWorkItem(ctx context.Context, workItemID string) (*bot.ChildRun, error)
	// AwaitRun waits until the record ends or timeout passes and returns it
	// as it then is.
	AwaitRun(ctx context.Context, id string, timeout time.Duration) (*bot.ChildRun, error)
	// CancelRun cancels an open record with a receipt naming by and
	// reason; ECONFLICT when it has ended.
	CancelRun(ctx context.Context, id, reason, by string) (*bot.ChildRun, error)
}

// Workspaces deletes threads' workspaces.
type Workspaces interface {
	// DeleteWorkspace deletes the workspace of sessionKey. While records
	// the thread owns are open it is refused (ECONFLICT) unless force,
	// which closes them first, each with a receipt naming by.
	DeleteWorkspace(ctx context.Context, sessionKey string, force bool, by string) (WorkspaceDeletion, error)
}

// WorkspaceDeletion is the answer of DELETE /api/v1/workspaces/{thread}.
type WorkspaceDeletion struct {
	Thread    string `json:"thread"`
	Workspace string `json:"workspace"`
	// Deleted is false when there was no workspace to delete.
	Deleted  bool          `json:"deleted"`
	Receipts []bot.Receipt `json:"receipts"`
}

// RunNode is one node of GET /api/v1/runs/tree/{work_item}: the work item
// at the root, then the records of what its runs started, nested by their
// parent links.
type RunNode struct {
	ID     string `json:"id"`
	Agent  string `json:"agent"`
	Status string `json:"status"`
	// Kind is work_item at the root, else the record's kind.
	Kind string `json:"kind"`
	// WorkItemID is the work item the node runs as (a subagent's own,
	// the handed-on one), "" for an agent call.
	WorkItemID string    `json:"work_item_id,omitempty"`
	Task       string    `json:"task,omitempty"`
	Tokens     int       `json:"tokens,omitempty"`
	Children   []RunNode `json:"children"`
}

// RunSummary is a record as a work item's detail lists it.
type RunSummary struct {
	ID         string        `json:"id"`
	Kind       bot.RunKind   `json:"kind"`
	Agent      string        `json:"agent"`
	Status     bot.RunStatus `json:"status"`
	WorkItemID string        `json:"work_item_id,omitempty"`
	Task       string        `json:"task,omitempty"`
}

func (a *API) mountRuns(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/runs", a.listRuns)
	mux.HandleFunc("GET /api/v1/runs/{id}", a.getRun)
	mux.HandleFunc("GET /api/v1/runs/tree/{work_item}", a.runTree)
	mux.HandleFunc("POST /api/v1/runs/{id}/await", a.awaitRun)
	mux.HandleFunc("POST /api/v1/runs/{id}/cancel", a.cancelRun)
	mux.HandleFunc("DELETE /api/v1/workspaces/{thread}", a.deleteWorkspace)
}

func (a *API) runs(w http.ResponseWriter, r *http.Request) (Runs, bool) {
	if a.opts.Runs == nil {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAVAILABLE, "no ledger of runs: the agent runtime is not configured"))
		return nil, false
	}
	return a.opts.Runs, true
}

func (a *API) listRuns(w http.ResponseWriter, r *http.Request) {
	runs, ok := a.runs(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	f := bot.RunFilter{Status: bot.RunStatus(q.Get("status")), OwnerAgent: q.Get("agent")}
	if o := q.Get("owner"); o != "" {
		th, err := bot.ParseThread(o)
		if err != nil {
			httpapi.Error(w, r, a.logger, err)
			return
		}
		f.OwnerSessionKey = th.Key()
	}
	if f.Status != "" && !f.Status.Valid() {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EINVALID,
			"status %q: want queued, running, done, failed, cancelled, timed_out or interrupted", f.Status))
		return
	}
	limit, err := httpapi.Limit(r, bot.MaxListLimit)
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	f.Limit, f.Cursor = limit, q.Get("cursor")
	rs, next, err := runs.ListRuns(r.Context(), f)
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	if rs == nil {
		rs = []bot.ChildRun{}
	}
	httpapi.JSON(w, http.StatusOK, Page{Items: rs, Next: next})
}

func (a *API) getRun(w http.ResponseWriter, r *http.Request) {
	runs, ok := a.runs(w, r)
	if !ok {
		return
	}
	rec, err := runs.GetRun(r.Context(), r.PathValue("id"))
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	httpapi.JSON(w, http.StatusOK, rec)
}

// MaxAwait bounds how long one await request waits; a client waits longer
// by asking again.
const MaxAwait = 10 * time.Minute

func (a *API) awaitRun(w http.ResponseWriter, r *http.Request) {
	runs, ok := a.runs(w, r)
	if !ok {
		return
	}
	timeout := MaxAwait
	if s := r.URL.Query().Get("timeout"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			httpapi.Error(w, r, a.logger, bot.Errorf(bot.EINVALID, "timeout %q: want a positive duration such as 30s or 5m", s))
			return
		}
		timeout = min(d, MaxAwait)
	}
	rec, err := runs.AwaitRun(r.Context(), r.PathValue("id"), timeout)
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	httpapi.JSON(w, http.StatusOK, rec)
}

func (a *API) cancelRun(w http.ResponseWriter, r *http.Request) {
	runs, ok := a.runs(w, r)
	if !ok {
		return
	}
	id, ok := httpapi.IdentityFrom(r.Context())
	if !ok {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAUTHORIZED, "a cancel is made by who authenticated, and this request did not"))
		return
	}
	rec, err := runs.CancelRun(r.Context(), r.PathValue("id"), "cancelled through the API by "+id.Name, id.Name)
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	httpapi.JSON(w, http.StatusOK, rec)
}

func (a *API) runTree(w http.ResponseWriter, r *http.Request) {
	runs, ok := a.runs(w, r)
	if !ok {
		return
	}
	wi, err := a.opts.Store.GetWorkItem(r.Context(), r.PathValue("work_item"))
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	root := RunNode{ID: wi.ID, Agent: wi.Route.Agent, Status: string(wi.Status), Kind: "work_item", WorkItemID: wi.ID}
	if root.Children, err = RunTree(r.Context(), runs, wi.ID); err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	httpapi.JSON(w, http.StatusOK, root)
}

// RunTree returns the records under the work item parent, oldest first, each
// with what its own work item's runs started, from the parent links alone.
func RunTree(ctx context.Context, runs Runs, parent string) ([]RunNode, error) {
	return runTree(ctx, runs, parent, map[string]bool{parent: true})
}

func runTree(ctx context.Context, runs Runs, parent string, seen map[string]bool) ([]RunNode, error) {
	rs, err := allRuns(ctx, runs, parent)
	if err != nil {
		return nil, err
	}
	out := []RunNode{}
	for _, rec := range slices.Backward(rs) {
		n := RunNode{ID: rec.ID, Agent: rec.Agent, Status: string(rec.Status), Kind: string(rec.Kind),
			WorkItemID: rec.ChildWorkItemID, Task: rec.Task, Tokens: rec.Tokens, Children: []RunNode{}}
		// A handoff's work item is the parent's own: the links say so,
		// and it is not walked twice.
		if rec.ChildWorkItemID != "" && !seen[rec.ChildWorkItemID] {
			seen[rec.ChildWorkItemID] = true
			if n.Children, err = runTree(ctx, runs, rec.ChildWorkItemID, seen); err != nil {
				return nil, err
			}
		}
		out = append(out, n)
	}
	return out, nil
}

// allRuns lists every record whose parent is the work item, newest first.
func allRuns(ctx context.Context, runs Runs, parent string) ([]bot.ChildRun, error) {
	var out []bot.ChildRun
	f := bot.RunFilter{ParentWorkItemID: parent, Limit: 1000}
	for {
		rs, next, err := runs.ListRuns(ctx, f)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
		if next == "" {
			return out, nil
		}
		f.Cursor = next
	}
}

func (a *API) deleteWorkspace(w http.ResponseWriter, r *http.Request) {
	th, err := bot.ParseThread(r.PathValue("thread"))
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	if a.opts.Workspaces == nil {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAVAILABLE, "no workspaces: the agent runtime is not configured"))
		return
	}
	id, ok := httpapi.IdentityFrom(r.Context())
	if !ok {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAUTHORIZED, "a deletion is made by who authenticated, and this request did not"))
		return
	}
	var force bool
	switch v := r.URL.Query().Get("force"); v {
	case "", "false":
	case "true":
		force = true
	default:
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EINVALID, "force %q: want true or false", v))
		return
	}
	res, err := a.opts.Workspaces.DeleteWorkspace(r.Context(), th.Key(), force, id.Name)
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	httpapi.JSON(w, http.StatusOK, res)
}

// summarizeRuns lists a work item's records for its detail.
func summarizeRuns(rs []bot.ChildRun) []RunSummary {
	out := make([]RunSummary, 0, len(rs))
	for _, rec := range slices.Backward(rs) {
		out = append(out, RunSummary{ID: rec.ID, Kind: rec.Kind, Agent: rec.Agent, Status: rec.Status,
			WorkItemID: rec.ChildWorkItemID, Task: rec.Task})
	}
	return out
}
