package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/skills"
)

// Store is what the admin API reads.
type Store interface {
	GetWorkItem(ctx context.Context, id string) (*bot.WorkItem, error)
	ListWorkItems(ctx context.Context, f bot.WorkItemFilter) ([]bot.WorkItem, string, error)
	ListJobs(ctx context.Context, workItemID string) ([]bot.Job, error)
	ListIngress(ctx context.Context, f bot.IngressFilter) ([]bot.IngressRecord, string, error)
	FindDelivery(ctx context.Context, source, deliveryID string) (bot.IngestResult, error)
	GetEvent(ctx context.Context, ref string) (*bot.Event, error)
}

// AgentCatalog lists the agents in effect. Values are rendered as JSON as
// they are, so the agent manager decides their shape.
type AgentCatalog interface {
	ListAgents() any
	GetAgent(name string) (any, bool)
}

// RoutingTable is the router in effect, for GET /api/v1/rules.
type RoutingTable interface {
	Routing() *bot.Router
}

// Rules is the answer of GET /api/v1/rules and of `switchyard rules list
// --json`: the rules in the order they are tried (the config's, then
// packages' entry points), the commands, the default agent, and the
// entry points of the packages installed, which route where their package
// is enabled.
type Rules struct {
	Rules        []bot.RuleInfo       `json:"rules"`
	Commands     map[string]string    `json:"commands"`
	DefaultAgent string               `json:"default_agent"`
	Entrypoints  []bot.EntrypointInfo `json:"entrypoints"`
}

// RulesOf describes r.
func RulesOf(r *bot.Router) Rules {
	return Rules{Rules: r.Rules(), Commands: r.Commands(), DefaultAgent: r.DefaultAgent(), Entrypoints: r.Entrypoints()}
}

// ThreadResetter resets a thread: it forgets the conversations agents had
// in it, cancels or archives everything it owns (receipts naming by), and
// what came before is carried over into no later run.
type ThreadResetter interface {
	ResetThread(ctx context.Context, sessionKey, by string) (ResetResult, error)
}

// AuditLog lists audit records, newest first; values render as JSON.
type AuditLog interface {
	// ListAudit returns a page of records and the cursor of the next page,
	// "" after the last.
	ListAudit(ctx context.Context, since time.Time, decision string, limit int, cursor string) (any, string, error)
}

// Page is one page of a listing, newest first: GET /api/v1/workitems,
// ingress and audit answer with it. Next is the cursor of the page after
// it, for ?cursor=; it is left out after the last page, and only then, so
// a limit never cuts a listing without saying so.
type Page struct {
	Items any    `json:"items"`
	Next  string `json:"next,omitempty"`
}

// Approvals lists tool calls waiting for a person and records decisions.
type Approvals interface {
	ListApprovals(ctx context.Context, all bool) (any, error)
	// DecideApproval decides as by, who authenticated; claimed is who the
	// request said decides ("" when it said nothing), refused when it is
	// someone else.
	DecideApproval(ctx context.Context, id string, approve bool, by, claimed string) (any, error)
}

// ConfigReloader reloads the daemon's configuration and says what changed;
// a refused reload is an error whose message lists every problem.
type ConfigReloader interface {
	ReloadConfig(ctx context.Context) (any, error)
}

// Intake decides what an event would make, exactly as the intake does, and
// decides stored events again; *bot.Intake has it.
type Intake interface {
	Decide(ctx context.Context, ev *bot.Event) (bot.Decision, error)
	Replay(ctx context.Context, then bot.IngestResult, ev *bot.Event) (bot.Replay, error)
	// DecideWith decides as Decide does with another router (nil: the
	// one in effect) and the threads as they were at asOf (zero: now).
	DecideWith(ctx context.Context, ev *bot.Event, router bot.Decider, asOf time.Time) (bot.Decision, error)
}

// Options configure the API; Store and Intake are required.
type Options struct {
	Store   Store
	Intake  Intake
	Agents  AgentCatalog // nil: the agents endpoints answer 503
	Routing RoutingTable // nil: the rules endpoint answers 503
	// RuleBook keeps the stored routing rules; nil: changing them, and
	// explaining a change, answer 503.
	RuleBook  RuleBook
	Threads   ThreadResetter // nil: reset answers 503
	Audit     AuditLog       // nil: the audit endpoint answers 503
	Approvals Approvals      // nil: the approvals endpoints answer 503
	// Rights say what an explained event's agent may do and why; nil
	// explains without them.
	Rights Rights
	Config ConfigReloader // nil: reload answers 503
	// Runs are the ledger of subagents, agent calls and handoffs; nil:
	// the runs endpoints answer 503 and work items show no children.
	Runs Runs
	// Workspaces deletes workspaces; nil: that answers 503.
	Workspaces Workspaces
	// Canceller cancels work items; nil: cancel answers 503.
	Canceller Canceller
	// Skills is the package registry: skills, packages, their settings
	// per scope. Nil: the skills and packages endpoints answer 503.
	Skills *skills.Registry
	// Installer installs and uninstalls packages; nil: those answer 503.
	Installer Installer
	Logger    *slog.Logger
}

// Canceller cancels a work item that has not finished, for by: a
// subagent's through the ledger of runs, any other queued one out of the
// queue, a running one's run on whichever replica runs it. It returns the
// work item as it is then; ECONFLICT when it has finished.
type Canceller interface {
	CancelWorkItem(ctx context.Context, id, reason, by string) (*bot.WorkItem, error)
}

// Rights says what an agent may do when a requester asks in a thread, and
// why: the rights its run would start with. The agent runtime implements
// it.
type Rights interface {
	Rights(ctx context.Context, agent string, r bot.Requester, th bot.Thread) (bot.EffectiveRights, error)
}

// API serves the admin endpoints.
type API struct {
	opts   Options
	logger *slog.Logger
}

// New returns an API.
func New(opts Options) *API {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &API{opts: opts, logger: opts.Logger}
}

// Mount registers the API's routes on mux.
func (a *API) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/workitems", a.listWorkItems)
	mux.HandleFunc("GET /api/v1/workitems/{id}", a.getWorkItem)
	mux.HandleFunc("POST /api/v1/workitems/{id}/cancel", a.cancelWorkItem)
	mux.HandleFunc("POST /api/v1/explain", a.explain)
	mux.HandleFunc("GET /api/v1/ingress", a.listIngress)
	mux.HandleFunc("GET /api/v1/agents", a.listAgents)
	mux.HandleFunc("GET /api/v1/rules", a.listRules)
	mux.HandleFunc("GET /api/v1/agents/{name}", a.getAgent)
	mux.HandleFunc("POST /api/v1/threads/{thread}/reset", a.resetThread)
	mux.HandleFunc("GET /api/v1/audit", a.listAudit)
	mux.HandleFunc("GET /api/v1/approvals", a.listApprovals)
	mux.HandleFunc("POST /api/v1/approvals/{id}/{decision}", a.decideApproval)
	mux.HandleFunc("POST /api/v1/config/reload", a.reloadConfig)
	a.mountRules(mux)
	a.mountSkills(mux)
	a.mountRuns(mux)
}

// reloadConfig reads the config file, the agents and the rules again and
// puts them in effect, or refuses them (400, every problem in the message)
// and keeps the config in effect.
func (a *API) reloadConfig(w http.ResponseWriter, r *http.Request) {
	if a.opts.Config == nil {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAVAILABLE, "this daemon cannot reload its config"))
		return
	}
	res, err := a.opts.Config.ReloadConfig(r.Context())
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	httpapi.JSON(w, http.StatusOK, res)
}

func (a *API) listAudit(w http.ResponseWriter, r *http.Request) {
	if a.opts.Audit == nil {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAVAILABLE, "no audit log: the agent runtime is not configured"))
		return
	}
	q := r.URL.Query()
	var since time.Time
	if s := q.Get("since"); s != "" {
		t, err := ParseSince(s, time.Now())
		if err != nil {
			httpapi.Error(w, r, a.logger, err)
			return
		}
		since = t
	}
	// The audit log knows its decisions and refuses others (EINVALID).
	decision := q.Get("decision")
	limit, err := httpapi.Limit(r, 10000)
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	recs, next, err := a.opts.Audit.ListAudit(r.Context(), since, decision, limit, q.Get("cursor"))
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	httpapi.JSON(w, http.StatusOK, Page{Items: recs, Next: next})
}

// ParseSince reads a time as RFC 3339 or as a duration back from now ("1h"),
// as the audit log is filtered by.
func ParseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, bot.Errorf(bot.EINVALID, "since %q: a duration back from now cannot be negative", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, bot.Errorf(bot.EINVALID, "since %q: want a duration such as 1h or an RFC 3339 time", s)
	}
	return t, nil
}

func (a *API) listApprovals(w http.ResponseWriter, r *http.Request) {
	if a.opts.Approvals == nil {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAVAILABLE, "no approvals: the agent runtime is not configured"))
		return
	}
	list, err := a.opts.Approvals.ListApprovals(r.Context(), r.URL.Query().Get("all") == "true")
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	httpapi.JSON(w, http.StatusOK, list)
}

// DecisionRequest is the body of POST /api/v1/approvals/{id}/approve|deny.
// The body may be left out.
type DecisionRequest struct {
	// By is who decides. It must be the name of the request's token (or
	// be left out, meaning that name); the name is checked against the
	// profile's approvers.
	By string `json:"by,omitempty"`
}

func (a *API) decideApproval(w http.ResponseWriter, r *http.Request) {
	if a.opts.Approvals == nil {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAVAILABLE, "no approvals: the agent runtime is not configured"))
		return
	}
	var approve bool
	switch r.PathValue("decision") {
	case "approve":
		approve = true
	case "deny":
	default:
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.ENOTFOUND, "want /approve or /deny"))
		return
	}
	id, ok := httpapi.IdentityFrom(r.Context())
	if !ok {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAUTHORIZED, "approvals are decided by who authenticated, and this request did not"))
		return
	}
	var req DecisionRequest
	if r.ContentLength != 0 {
		if err := httpapi.Decode(w, r, &req); err != nil {
			httpapi.Error(w, r, a.logger, err)
			return
		}
	}
	res, err := a.opts.Approvals.DecideApproval(r.Context(), r.PathValue("id"), approve, id.Name, req.By)
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	httpapi.JSON(w, http.StatusOK, res)
}

func (a *API) listAgents(w http.ResponseWriter, r *http.Request) {
	if a.opts.Agents == nil {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAVAILABLE, "no agents are loaded"))
		return
	}
	httpapi.JSON(w, http.StatusOK, a.opts.Agents.ListAgents())
}

// listRules answers what the router in effect routes, packages' entry
// points included.
func (a *API) listRules(w http.ResponseWriter, r *http.Request) {
	if a.opts.Routing == nil {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAVAILABLE, "no router is loaded"))
		return
	}
	httpapi.JSON(w, http.StatusOK, RulesOf(a.opts.Routing.Routing()))
}

func (a *API) getAgent(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if a.opts.Agents == nil {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAVAILABLE, "no agents are loaded"))
		return
	}
	ag, ok := a.opts.Agents.GetAgent(name)
	if !ok {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.ENOTFOUND, "no agent %q", name))
		return
	}
	httpapi.JSON(w, http.StatusOK, ag)
}

// ResetResult is the answer of a thread reset.
type ResetResult struct {
	Thread  string `json:"thread"`
	Cleared int    `json:"cleared"` // conversations forgotten
	// Receipts are one per record the thread owned that the reset
	// cancelled, stopped or archived.
	Receipts []bot.Receipt `json:"receipts"`
}

func (a *API) resetThread(w http.ResponseWriter, r *http.Request) {
	th, err := bot.ParseThread(r.PathValue("thread"))
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	if a.opts.Threads == nil {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAVAILABLE, "no agent runtime is configured"))
		return
	}
	id, ok := httpapi.IdentityFrom(r.Context())
	if !ok {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAUTHORIZED, "a reset is made by who authenticated, and this request did not"))
		return
	}
	res, err := a.opts.Threads.ResetThread(r.Context(), th.Key(), id.Name)
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	if res.Receipts == nil {
		res.Receipts = []bot.Receipt{}
	}
	httpapi.JSON(w, http.StatusOK, res)
}

// CancelRequest is the body of a cancel; it and its reason are optional.
type CancelRequest struct {
	Reason string `json:"reason,omitempty"`
}

func (a *API) cancelWorkItem(w http.ResponseWriter, r *http.Request) {
	if a.opts.Canceller == nil {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAVAILABLE, "this daemon cannot cancel work items"))
		return
	}
	id, ok := httpapi.IdentityFrom(r.Context())
	if !ok {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAUTHORIZED, "a cancel is made by who authenticated, and this request did not"))
		return
	}
	var req CancelRequest
	if r.ContentLength != 0 {
		if err := httpapi.Decode(w, r, &req); err != nil {
			httpapi.Error(w, r, a.logger, err)
			return
		}
	}
	wi, err := a.opts.Canceller.CancelWorkItem(r.Context(), r.PathValue("id"), strings.TrimSpace(req.Reason), id.Name)
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	httpapi.JSON(w, http.StatusOK, wi)
}

// WorkItemSummary is one row of the work item list.
type WorkItemSummary struct {
	ID       string         `json:"id"`
	Thread   string         `json:"thread"`
	Status   bot.WorkStatus `json:"status"`
	Route    bot.Route      `json:"route"`
	ParentID *string        `json:"parent_work_item_id"`
	Created  time.Time      `json:"created_at"`
}

// Summarize returns the list row of wi.
func Summarize(wi bot.WorkItem) WorkItemSummary {
	s := WorkItemSummary{
		ID: wi.ID, Thread: wi.Thread.Key(), Status: wi.Status, Route: wi.Route, Created: wi.CreatedAt,
	}
	if wi.ParentID != "" {
		s.ParentID = &wi.ParentID // null, not "", for top-level work items
	}
	return s
}

func (a *API) listWorkItems(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := bot.WorkItemFilter{Status: bot.WorkStatus(q.Get("status")), Job: q.Get("job")}
	if t := q.Get("thread"); t != "" {
		th, err := bot.ParseThread(t)
		if err != nil {
			httpapi.Error(w, r, a.logger, err)
			return
		}
		f.Thread = th.Key()
	}
	if f.Status != "" && !f.Status.Valid() {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EINVALID,
			"status %q: want queued, running, done, failed or cancelled", f.Status))
		return
	}
	limit, err := httpapi.Limit(r, bot.MaxListLimit)
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	f.Limit, f.Cursor = limit, q.Get("cursor")
	items, next, err := a.opts.Store.ListWorkItems(r.Context(), f)
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	out := make([]WorkItemSummary, 0, len(items))
	for _, wi := range items {
		out = append(out, Summarize(wi))
	}
	httpapi.JSON(w, http.StatusOK, Page{Items: out, Next: next})
}

// WorkItemDetail is a work item with its jobs, the record it runs for
// when a run spawned it (its parent is parent_work_item_id), and the
// records of what its runs started (children), from the ledger's links.
type WorkItemDetail struct {
	bot.WorkItem
	Jobs     []bot.Job     `json:"jobs"`
	Run      *bot.ChildRun `json:"run,omitempty"`
	Children []RunSummary  `json:"children"`
}

func (a *API) getWorkItem(w http.ResponseWriter, r *http.Request) {
	wi, err := a.opts.Store.GetWorkItem(r.Context(), r.PathValue("id"))
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	jobs, err := a.opts.Store.ListJobs(r.Context(), wi.ID)
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	if jobs == nil {
		jobs = []bot.Job{}
	}
	detail := WorkItemDetail{WorkItem: *wi, Jobs: jobs, Children: []RunSummary{}}
	if a.opts.Runs != nil {
		rs, err := allRuns(r.Context(), a.opts.Runs, wi.ID)
		if err != nil {
			httpapi.Error(w, r, a.logger, err)
			return
		}
		detail.Children = summarizeRuns(rs)
		if wi.IsChild() {
			if detail.Run, err = a.opts.Runs.RunOfWorkItem(r.Context(), wi.ID); err != nil && bot.ErrorCode(err) != bot.ENOTFOUND {
				httpapi.Error(w, r, a.logger, err)
				return
			}
		}
	}
	httpapi.JSON(w, http.StatusOK, detail)
}

// ExplainRequest is the body of POST /api/v1/explain: an event to decide,
// or a stored one to decide again, named by work_item_id, or by
// delivery_id (and optionally source) with nothing to route by (no kind,
// no text). With change, the answer is a ChangeExplanation: what the rules
// decide now and with the change made.
type ExplainRequest struct {
	bot.Event
	WorkItemID string      `json:"work_item_id"`
	Change     *RuleChange `json:"change"`
}

// UnmarshalJSON reads work_item_id and change as the request's own and
// every other member as the event's, refusing members none knows.
func (req *ExplainRequest) UnmarshalJSON(b []byte) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return err
	}
	own := false
	for name, into := range map[string]any{"work_item_id": &req.WorkItemID, "change": &req.Change} {
		raw, ok := members[name]
		if !ok {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil {
			var typ *json.UnmarshalTypeError
			if errors.As(err, &typ) {
				typ.Field = name + fieldSuffix(typ.Field)
			}
			return err
		}
		delete(members, name)
		own = true
	}
	if own {
		var err error
		if b, err = json.Marshal(members); err != nil {
			return err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(&req.Event)
}

// fieldSuffix is ".f" for a field f inside a member, "" for the member
// itself.
func fieldSuffix(f string) string {
	if f == "" {
		return ""
	}
	return "." + f
}

// replay reports whether the request names a stored event.
func (req *ExplainRequest) replay() bool {
	return req.WorkItemID != "" || req.DeliveryID != "" && req.Kind == "" && req.Text == ""
}

func (a *API) explain(w http.ResponseWriter, r *http.Request) {
	var req ExplainRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	if req.Change != nil {
		a.explainWithChange(w, r, &req)
		return
	}
	if req.replay() {
		rep, err := a.replay(r.Context(), &req)
		if err != nil {
			httpapi.Error(w, r, a.logger, explainError(err))
			return
		}
		httpapi.JSON(w, http.StatusOK, rep)
		return
	}
	ev := req.Event
	if err := ev.CheckDescribed(); err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	d, err := a.opts.Intake.Decide(r.Context(), &ev)
	if err != nil {
		httpapi.Error(w, r, a.logger, explainError(err))
		return
	}
	e := d.Explain()
	if err := a.opts.rights(r.Context(), &e, &ev); err != nil {
		httpapi.Error(w, r, a.logger, explainError(err))
		return
	}
	httpapi.JSON(w, http.StatusOK, e)
}

// rights adds to e what its agent may do for ev's requester.
func (o Options) rights(ctx context.Context, e *bot.Explanation, ev *bot.Event) error {
	if o.Rights == nil || !e.WorkItem {
		return nil
	}
	rights, err := o.Rights.Rights(ctx, e.Agent, ev.Requester, ev.Thread)
	if err != nil {
		return err
	}
	e.Rights = &rights
	return nil
}

// explainWithChange answers what the rules decide for the request's event,
// or its stored event, now and with its change made.
func (a *API) explainWithChange(w http.ResponseWriter, r *http.Request, req *ExplainRequest) {
	out, err := ExplainChange(r.Context(), a.opts, req)
	if err != nil {
		httpapi.Error(w, r, a.logger, explainError(err))
		return
	}
	httpapi.JSON(w, http.StatusOK, out)
}

// replay decides a stored event again: what was decided then, what is
// now.
func (a *API) replay(ctx context.Context, req *ExplainRequest) (bot.Replay, error) {
	rep, ev, err := a.opts.replayEvent(ctx, req)
	if err != nil {
		return bot.Replay{}, err
	}
	return rep, a.opts.rights(ctx, &rep.Now, ev)
}

// replayEvent finds the stored event the request names and decides it
// again; it returns the event too.
func (o Options) replayEvent(ctx context.Context, req *ExplainRequest) (bot.Replay, *bot.Event, error) {
	var then bot.IngestResult
	if req.WorkItemID != "" {
		wi, err := o.Store.GetWorkItem(ctx, req.WorkItemID)
		if err != nil {
			return bot.Replay{}, nil, err
		}
		then.WorkItem = wi
	} else {
		var err error
		if then, err = o.Store.FindDelivery(ctx, req.Source, req.DeliveryID); err != nil {
			return bot.Replay{}, nil, err
		}
	}
	ref := ""
	switch {
	case then.WorkItem != nil:
		ref = then.WorkItem.EventRef
	case then.Ingress != nil:
		ref = then.Ingress.EventRef
	}
	ev, err := o.Store.GetEvent(ctx, ref)
	if err != nil {
		return bot.Replay{}, nil, err
	}
	rep, err := o.Intake.Replay(ctx, then, ev)
	if err != nil {
		return bot.Replay{}, nil, err
	}
	return rep, ev, nil
}

// explainError keeps a domain error as it is; anything else is a platform
// that could not be asked (a GitHub permission lookup), which explain
// reports as unavailable rather than as a fault of its own.
func explainError(err error) error {
	if bot.ErrorCode(err) != bot.EINTERNAL {
		return err
	}
	return bot.Errorf(bot.EUNAVAILABLE, "cannot decide now: %v", err)
}

func (a *API) listIngress(w http.ResponseWriter, r *http.Request) {
	limit, err := httpapi.Limit(r, bot.MaxListLimit)
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	q := r.URL.Query()
	// A reason no record has is a mistake, not an empty listing.
	if reason := q.Get("reason"); reason != "" && !slices.Contains(bot.IngressReasons(), reason) {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EINVALID, "reason %q: want %s", reason, strings.Join(bot.IngressReasons(), ", ")))
		return
	}
	recs, next, err := a.opts.Store.ListIngress(r.Context(), bot.IngressFilter{Reason: q.Get("reason"), Limit: limit, Cursor: q.Get("cursor")})
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	if recs == nil {
		recs = []bot.IngressRecord{}
	}
	httpapi.JSON(w, http.StatusOK, Page{Items: recs, Next: next})
}
