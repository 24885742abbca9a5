package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/integrations/github"
	"github.com/switchyard/switchyard/integrations/slack"
	"github.com/switchyard/switchyard/storage/bolt"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
)

// openStore opens a store in a temporary directory and, when the test ends,
// closes it and checks the file's consistency.
func openStore(t *testing.T) *bolt.Store {
	t.Helper()
	return bolttest.Open(t, t.TempDir())
}

func newRouter(t *testing.T) *bot.Router {
	t.Helper()
	r, err := bot.NewRouter(bot.RoutingConfig{
		Rules: []bot.Rule{{Name: "outages", Priority: 10, Agent: "ops", Match: bot.Match{Text: `(?i)\boutage\b`}}},
	}, []bot.AgentInfo{
		{Name: "ops", Keywords: []string{"deploy"}},
		{Name: "triage", Keywords: []string{"triage"}},
	})
	require.NoError(t, err)
	return r
}

// seeded is a store with work items, a finished job and ingress records, as
// intake and a worker leave them.
type seeded struct {
	store   *bolt.Store
	router  *bot.Router
	intake  *bot.Intake
	done    string // wi in local:t1, finished by a job
	mention string // wi in local:t1, queued for @ops
	deploy  string // wi in local:t2, queued for ops by keyword
	child   string // wi in local:t2 made by an agent, parent done
}

func seed(t *testing.T) *seeded {
	t.Helper()
	ctx := t.Context()
	s := &seeded{store: openStore(t), router: newRouter(t)}
	in := newIntake(s.store, s.router)
	s.intake = in
	local := func(thread, text string) string {
		t.Helper()
		res, err := in.Ingest(ctx, &bot.Event{
			Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Actor: "carol", Text: text, Thread: bot.LocalThread(thread),
		})
		require.NoError(t, err)
		require.NotNil(t, res.WorkItem)
		return res.WorkItem.ID
	}

	s.done = local("t1", "hello there")
	claim, err := s.store.ClaimNext(ctx, bot.ClaimRequest{Owner: "w1", Now: time.Now(), Lease: time.Minute, MaxAttempts: 3})
	require.NoError(t, err)
	require.NotNil(t, claim.Job)
	require.NoError(t, s.store.FinishJob(ctx, bot.JobOutcome{
		JobID: claim.Job.ID, Owner: "w1", Now: time.Now(), Success: true, Summary: "hi carol",
	}))

	s.mention = local("t1", "@ops can you look")
	s.deploy = local("t2", "please deploy the api")
	res, err := in.IngestRouted(ctx, &bot.Event{
		Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Actor: "ops", Text: "check the logs", Thread: bot.LocalThread("t2"),
	}, bot.Route{Agent: "triage", Kind: bot.RouteHandoff, Reason: "handoff: from @ops"}, s.done)
	require.NoError(t, err)
	s.child = res.WorkItem.ID

	// A GitHub pull request without mention, command or rule: no_route.
	res, err = in.Ingest(ctx, &bot.Event{
		Source: bot.SourceGitHub, Kind: "github.pull_request.opened", DeliveryID: "d-1", Actor: "dan",
		Repo: "acme/api", Number: 7, Thread: bot.GitHubThread("acme", "api", 7),
	})
	require.NoError(t, err)
	require.NotNil(t, res.Ingress)
	res, err = in.Ingest(ctx, &bot.Event{
		Source: bot.SourceSlack, Kind: bot.KindSlackMessage, Actor: "deploybot", ActorIsBot: true, Thread: bot.SlackThread("T1", "C1", "1.2"),
	})
	require.NoError(t, err)
	require.NotNil(t, res.Ingress)
	return s
}

// newIntake is the intake as the daemon wires it, with the sources' gates
// (GitHub's without a client: permissions are named, not looked up).
func newIntake(store *bolt.Store, router *bot.Router) *bot.Intake {
	return bot.NewIntake(bot.IntakeOptions{Store: store, Router: router, Threads: store, Gates: map[string]bot.Gate{
		bot.SourceGitHub: github.NewGate(github.GateOptions{Offline: true}),
		bot.SourceSlack:  slack.NewGate(nil, nil),
	}})
}

func handler(opts admin.Options) http.Handler {
	mux := http.NewServeMux()
	admin.New(opts).Mount(mux)
	return mux
}

func serve(t *testing.T, h http.Handler, method, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	var req *http.Request
	if body == "" {
		req = httptest.NewRequest(method, target, nil)
	} else {
		req = httptest.NewRequest(method, target, strings.NewReader(body))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// page decodes a page of a listing: its items and the next page's cursor.
func page[T any](t *testing.T, rec *httptest.ResponseRecorder) ([]T, string) {
	t.Helper()
	p := decode[struct {
		Items []T     `json:"items"`
		Next  *string `json:"next"`
	}](t, rec)
	require.NotNil(t, p.Items, "items are a list, never null: %s", rec.Body)
	if p.Next == nil {
		return p.Items, ""
	}
	require.NotEmpty(t, *p.Next, "next is left out after the last page, never empty")
	return p.Items, *p.Next
}

func decode[T any](t *testing.T, rec *httptest.ResponseRecorder) T {
	t.Helper()
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var v T
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &v), "body: %s", rec.Body)
	return v
}

// requireError checks an error answer: its status, the code in its JSON
// body, and that the message names what was wrong.
func requireError(t *testing.T, rec *httptest.ResponseRecorder, status int, names ...string) {
	t.Helper()
	require.Equal(t, status, rec.Code, "body: %s", rec.Body)
	body := decode[httpapi.ErrorBody](t, rec)
	require.Equal(t, status, httpapi.Status(body.Code), "code %q", body.Code)
	for _, n := range names {
		require.Contains(t, body.Error, n)
	}
}

func ids(items []admin.WorkItemSummary) []string {
	out := make([]string, 0, len(items))
	for _, wi := range items {
		out = append(out, wi.ID)
	}
	return out
}

func TestListWorkItems(t *testing.T) {
	s := seed(t)
	h := handler(admin.Options{Store: s.store, Intake: s.intake})

	tests := []struct {
		query string
		want  []string
		more  bool
	}{
		{"", []string{s.child, s.deploy, s.mention, s.done}, false},
		{"?thread=t1", []string{s.mention, s.done}, false},
		{"?thread=local:t1", []string{s.mention, s.done}, false},
		{"?thread=local:nobody", []string{}, false},
		{"?status=done", []string{s.done}, false},
		{"?status=queued", []string{s.child, s.deploy, s.mention}, false},
		{"?status=failed", []string{}, false},
		{"?thread=t1&status=queued", []string{s.mention}, false},
		{"?limit=2", []string{s.child, s.deploy}, true},
		{"?limit=4", []string{s.child, s.deploy, s.mention, s.done}, false},
		{"?limit=1000", []string{s.child, s.deploy, s.mention, s.done}, false},
		{"?status=queued&limit=2", []string{s.child, s.deploy}, true},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			rec := serve(t, h, http.MethodGet, "/api/v1/workitems"+tt.query, "")
			require.Equal(t, http.StatusOK, rec.Code, "body: %s", rec.Body)
			items, next := page[admin.WorkItemSummary](t, rec)
			require.Equal(t, tt.want, ids(items))
			require.Equal(t, tt.more, next != "", "next %q", next)
		})
	}
}

func TestListWorkItemsShape(t *testing.T) {
	s := seed(t)
	h := handler(admin.Options{Store: s.store, Intake: s.intake})

	rec := serve(t, h, http.MethodGet, "/api/v1/workitems?thread=t2", "")
	require.Equal(t, http.StatusOK, rec.Code)
	rows, _ := page[map[string]any](t, rec)
	require.Len(t, rows, 2)
	for _, row := range rows {
		require.ElementsMatch(t, []string{"id", "thread", "status", "route", "parent_work_item_id", "created_at"}, keys(row))
		require.Equal(t, "local:t2", row["thread"])
		require.Equal(t, "queued", row["status"])
		_, err := time.Parse(time.RFC3339Nano, row["created_at"].(string))
		require.NoError(t, err)
	}
	// Newest first: the agent's child, then the top-level item whose parent
	// is null rather than "".
	require.Equal(t, s.child, rows[0]["id"])
	require.Equal(t, s.done, rows[0]["parent_work_item_id"])
	require.Equal(t, map[string]any{"agent": "triage", "kind": "handoff", "reason": "handoff: from @ops", "rule": ""}, rows[0]["route"])
	require.Equal(t, s.deploy, rows[1]["id"])
	require.Nil(t, rows[1]["parent_work_item_id"])
	require.Equal(t, "ops", rows[1]["route"].(map[string]any)["agent"])
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestListWorkItemsRefusesBadParameters(t *testing.T) {
	s := seed(t)
	h := handler(admin.Options{Store: s.store, Intake: s.intake})

	tests := []struct {
		query string
		names []string
	}{
		{"?status=bogus", []string{`status "bogus"`, "queued, running, done, failed or cancelled"}},
		{"?status=DONE", []string{`status "DONE"`}},
		{"?limit=abc", []string{`limit "abc"`, "1 to 1000"}},
		{"?limit=0", []string{`limit "0"`}},
		{"?limit=1001", []string{`limit "1001"`}},
		{"?limit=10abc", []string{`limit "10abc"`}},
		{"?thread=github:acme", []string{`thread "github:acme"`}},
		{"?thread=jira:X-1", []string{"unknown source"}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			requireError(t, serve(t, h, http.MethodGet, "/api/v1/workitems"+tt.query, ""), http.StatusBadRequest, tt.names...)
		})
	}
}

func TestGetWorkItem(t *testing.T) {
	s := seed(t)
	h := handler(admin.Options{Store: s.store, Intake: s.intake})

	t.Run("finished, with its job", func(t *testing.T) {
		rec := serve(t, h, http.MethodGet, "/api/v1/workitems/"+s.done, "")
		require.Equal(t, http.StatusOK, rec.Code)
		got := decode[admin.WorkItemDetail](t, rec)
		require.Equal(t, s.done, got.ID)
		require.Equal(t, bot.LocalThread("t1"), got.Thread)
		require.Equal(t, bot.StatusDone, got.Status)
		require.Equal(t, "triage", got.Route.Agent)
		require.Equal(t, "hi carol", got.Summary)
		require.Equal(t, "hello there", got.Text)
		require.NotNil(t, got.FinishedAt)
		require.Len(t, got.Jobs, 1)
		require.Equal(t, bot.JobSucceeded, got.Jobs[0].Status)
		require.Equal(t, []string{s.done}, got.Jobs[0].WorkItemIDs)
	})
	t.Run("queued child: parent named, jobs an empty list", func(t *testing.T) {
		rec := serve(t, h, http.MethodGet, "/api/v1/workitems/"+s.child, "")
		require.Equal(t, http.StatusOK, rec.Code)
		raw := decode[map[string]any](t, rec)
		require.Equal(t, []any{}, raw["jobs"])
		require.Equal(t, s.done, raw["parent_work_item_id"])
		require.Equal(t, "queued", raw["status"])
	})
	for _, id := range []string{"wi_999", "nonsense", "d_1"} {
		t.Run("unknown "+id, func(t *testing.T) {
			requireError(t, serve(t, h, http.MethodGet, "/api/v1/workitems/"+id, ""), http.StatusNotFound, id)
		})
	}
}

func TestExplain(t *testing.T) {
	s := seed(t)
	h := handler(admin.Options{Store: s.store, Intake: s.intake})

	// Explain answers what intake would do, the sources' rules included.
	tests := []struct {
		name string
		body string
		want string
	}{
		{"mention in the text", `{"source":"local","kind":"local.message","text":"@ops look at this"}`,
			`{"work_item":true,"agent":"ops","kind":"mention","reason":"mention @ops","rule":""}`},
		{"command in the text", `{"source":"local","kind":"local.message","text":"/deploy api"}`,
			`{"work_item":true,"agent":"ops","kind":"command","reason":"command /deploy","rule":""}`},
		{"rule", `{"source":"local","kind":"local.message","text":"big outage here"}`,
			`{"work_item":true,"agent":"ops","kind":"rule","reason":"rule \"outages\" (priority 10)","rule":"outages"}`},
		{"keyword", `{"source":"slack","kind":"slack.message","actor":"U1","text":"time to deploy","thread":"slack:T1/C1/1.2"}`,
			`{"work_item":true,"agent":"ops","kind":"keyword","reason":"content: keyword \"deploy\"","rule":""}`},
		{"default", `{"source":"local","kind":"local.message","text":"hello"}`,
			`{"work_item":true,"agent":"triage","kind":"default","reason":"default","rule":""}`},
		{"GitHub event no rule matches", `{"source":"github","kind":"github.pull_request.opened","actor":"dan","repo":"acme/api","number":9,"thread":"github:acme/api#9"}`,
			`{"work_item":false,"agent":"","kind":"","reason":"no mention, command or rule matched","rule":"","ingress":"no_route"}`},
		{"GitHub bot", `{"source":"github","kind":"github.issue_comment.created","actor":"renovate[bot]","actor_is_bot":true,"text":"@ops deploy"}`,
			`{"work_item":false,"agent":"","kind":"","reason":"sent by bot renovate[bot], not in github.allow_bots","rule":"","ingress":"bot_actor"}`},
		{"GitHub deletion", `{"source":"github","kind":"github.issue_comment.deleted","actor":"dan"}`,
			`{"work_item":false,"agent":"","kind":"","reason":"github.issue_comment.deleted is a deletion","rule":"","ingress":"deleted"}`},
		{"GitHub mention needs a permission", `{"source":"github","kind":"github.issue_comment.created","actor":"dan","repo":"acme/api","text":"@ops deploy"}`,
			`{"work_item":true,"agent":"ops","kind":"mention","reason":"mention @ops","rule":"","needs":"@dan has write permission on acme/api (github.min_permission; not checked offline)"}`},
		{"Slack edit", `{"source":"slack","kind":"slack.message","actor":"U1","edited":true,"text":"@ops again"}`,
			`{"work_item":false,"agent":"","kind":"","reason":"an edited message; post a new message to ask again","rule":"","ingress":"edited"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := serve(t, h, http.MethodPost, "/api/v1/explain", tt.body)
			require.Equal(t, http.StatusOK, rec.Code, "body: %s", rec.Body)
			require.JSONEq(t, tt.want, rec.Body.String())
		})
	}

	// Explaining is a dry run: nothing is stored.
	items, _, err := s.store.ListWorkItems(t.Context(), bot.WorkItemFilter{})
	require.NoError(t, err)
	require.Len(t, items, 4)
	in, _, err := s.store.ListIngress(t.Context(), bot.IngressFilter{})
	require.NoError(t, err)
	require.Len(t, in, 2)
}

func TestExplainRefusesBadBodies(t *testing.T) {
	h := handler(admin.Options{Store: openStore(t), Intake: bot.NewIntake(bot.IntakeOptions{Router: newRouter(t)})})

	tests := []struct {
		name   string
		body   string
		status int
		names  []string
	}{
		{"empty", "", http.StatusBadRequest, []string{"empty body"}},
		{"unknown field", `{"text":"hi","txet":"hi"}`, http.StatusBadRequest, []string{`"txet"`}},
		{"wrong type", `{"text":42}`, http.StatusBadRequest, []string{`"text"`}},
		{"work item id of the wrong type", `{"work_item_id":7}`, http.StatusBadRequest, []string{`"work_item_id"`}},
		{"unknown field beside a work item", `{"work_item_id":"wi_1","wrok":1}`, http.StatusBadRequest, []string{`"wrok"`}},
		{"bad thread", `{"text":"hi","thread":"github:acme"}`, http.StatusBadRequest, []string{`thread "github:acme"`}},
		{"two objects", `{"text":"a"}{"text":"b"}`, http.StatusBadRequest, []string{"after the object"}},
		{"too large", `{"text":"` + strings.Repeat("x", httpapi.MaxBody) + `"}`, http.StatusRequestEntityTooLarge, nil},
		{"unknown source", `{"source":"nope","text":"hi"}`, http.StatusBadRequest, []string{`source: unknown source "nope"`}},
		{"kind of another source", `{"source":"github","kind":"slack.app_mention","text":"hi"}`, http.StatusBadRequest,
			[]string{`kind: "slack.app_mention" is not an event of github`}},
		{"negative number", `{"source":"github","repo":"acme/api","number":-3}`, http.StatusBadRequest, []string{"number: want a positive"}},
		{"repository without owner", `{"source":"github","repo":"api"}`, http.StatusBadRequest, []string{`repo: want owner/name, such as acme/api, got "api"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requireError(t, serve(t, h, http.MethodPost, "/api/v1/explain", tt.body), tt.status, tt.names...)
		})
	}
}

func TestListIngress(t *testing.T) {
	s := seed(t)
	h := handler(admin.Options{Store: s.store, Intake: s.intake})

	tests := []struct {
		query   string
		reasons []string
	}{
		{"", []string{bot.IgnoreBot, bot.IgnoreNoRoute}},
		{"?reason=no_route", []string{bot.IgnoreNoRoute}},
		{"?reason=bot_actor", []string{bot.IgnoreBot}},
		{"?reason=deleted", []string{}},
		{"?limit=1", []string{bot.IgnoreBot}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			rec := serve(t, h, http.MethodGet, "/api/v1/ingress"+tt.query, "")
			require.Equal(t, http.StatusOK, rec.Code, "body: %s", rec.Body)
			recs, _ := page[bot.IngressRecord](t, rec)
			reasons := []string{}
			for _, r := range recs {
				reasons = append(reasons, r.Reason)
			}
			require.Equal(t, tt.reasons, reasons)
		})
	}

	t.Run("shape", func(t *testing.T) {
		rec := serve(t, h, http.MethodGet, "/api/v1/ingress?reason=no_route", "")
		rows, _ := page[map[string]any](t, rec)
		require.Len(t, rows, 1)
		row := rows[0]
		require.Equal(t, "github", row["source"])
		require.Equal(t, "github.pull_request.opened", row["kind"])
		require.Equal(t, "d-1", row["delivery_id"])
		require.Equal(t, "dan", row["actor"])
		require.Equal(t, "github:acme/api#7", row["thread"])
		require.Equal(t, "no_route", row["reason"])
		require.NotEmpty(t, row["detail"])
		require.NotEmpty(t, row["id"])
		require.NotEmpty(t, row["event_ref"])
		require.NotEmpty(t, row["created_at"])
	})
	t.Run("empty store answers an empty list", func(t *testing.T) {
		h := handler(admin.Options{Store: openStore(t), Intake: s.intake})
		rec := serve(t, h, http.MethodGet, "/api/v1/ingress", "")
		require.Equal(t, http.StatusOK, rec.Code)
		require.JSONEq(t, `{"items":[]}`, rec.Body.String())
	})
	for _, q := range []string{"abc", "0", "1001", "5x"} {
		t.Run("limit="+q, func(t *testing.T) {
			requireError(t, serve(t, h, http.MethodGet, "/api/v1/ingress?limit="+q, ""), http.StatusBadRequest, `limit "`+q+`"`)
		})
	}
}

// catalog is an AgentCatalog of fixed values.
type catalog map[string]any

func (c catalog) ListAgents() any {
	out := []any{}
	for _, name := range []string{"ops", "triage"} {
		if a, ok := c[name]; ok {
			out = append(out, a)
		}
	}
	return out
}

func (c catalog) GetAgent(name string) (any, bool) {
	a, ok := c[name]
	return a, ok
}

func TestAgents(t *testing.T) {
	agents := catalog{
		"ops":    map[string]any{"name": "ops", "model": "m1"},
		"triage": map[string]any{"name": "triage", "model": "m2"},
	}
	h := handler(admin.Options{Store: openStore(t), Agents: agents})

	rec := serve(t, h, http.MethodGet, "/api/v1/agents", "")
	require.Equal(t, http.StatusOK, rec.Code)
	require.JSONEq(t, `[{"name":"ops","model":"m1"},{"name":"triage","model":"m2"}]`, rec.Body.String())

	rec = serve(t, h, http.MethodGet, "/api/v1/agents/ops", "")
	require.Equal(t, http.StatusOK, rec.Code)
	require.JSONEq(t, `{"name":"ops","model":"m1"}`, rec.Body.String())

	requireError(t, serve(t, h, http.MethodGet, "/api/v1/agents/coder", ""), http.StatusNotFound, `"coder"`)
}

// resetter records the session keys it was asked to reset, and by whom.
type resetter struct {
	mu      sync.Mutex
	keys    []string
	by      []string
	cleared int
	err     error
}

func (r *resetter) ResetThread(_ context.Context, key, by string) (admin.ResetResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = append(r.keys, key)
	r.by = append(r.by, by)
	return admin.ResetResult{Thread: key, Cleared: r.cleared}, r.err
}

func TestResetThread(t *testing.T) {
	tests := []struct {
		name    string
		thread  string // as it appears in the path, escaped
		key     string
		cleared int
	}{
		{"bare local name", "t1", "local:t1", 2},
		{"local key", "local:t1", "local:t1", 0},
		{"github, escaped", "github:acme%2Fapi%237", "github:acme/api#7", 1},
		{"slack, escaped", "slack:T1%2FC1%2F1.2", "slack:T1/C1/1.2", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := &resetter{cleared: tt.cleared}
			h := as("ana", handler(admin.Options{Store: openStore(t), Threads: rs}))
			rec := serve(t, h, http.MethodPost, "/api/v1/threads/"+tt.thread+"/reset", "")
			require.Equal(t, http.StatusOK, rec.Code, "body: %s", rec.Body)
			require.Equal(t, admin.ResetResult{Thread: tt.key, Cleared: tt.cleared, Receipts: []bot.Receipt{}}, decode[admin.ResetResult](t, rec))
			require.JSONEq(t, fmt.Sprintf(`{"thread":%q,"cleared":%d,"receipts":[]}`, tt.key, tt.cleared), rec.Body.String())
			require.Equal(t, []string{tt.key}, rs.keys)
			require.Equal(t, []string{"ana"}, rs.by, "the reset is made by who authenticated")
		})
	}

	t.Run("bad thread", func(t *testing.T) {
		rs := &resetter{}
		h := as("ana", handler(admin.Options{Store: openStore(t), Threads: rs}))
		requireError(t, serve(t, h, http.MethodPost, "/api/v1/threads/slack:T1/reset", ""), http.StatusBadRequest, `thread "slack:T1"`)
		require.Empty(t, rs.keys)
	})
	t.Run("runtime error is not shown", func(t *testing.T) {
		rs := &resetter{err: errors.New("bbolt: bucket conversations damaged")}
		h := as("ana", handler(admin.Options{Store: openStore(t), Threads: rs}))
		rec := serve(t, h, http.MethodPost, "/api/v1/threads/t1/reset", "")
		requireError(t, rec, http.StatusInternalServerError, "internal error")
		require.NotContains(t, rec.Body.String(), "damaged")
	})
}

// auditLog records what it was asked for and answers fixed records.
type auditLog struct {
	since    time.Time
	decision string
	limit    int
	cursor   string
	err      error
}

func (a *auditLog) ListAudit(_ context.Context, since time.Time, decision string, limit int, cursor string) (any, string, error) {
	a.since, a.decision, a.limit, a.cursor = since, decision, limit, cursor
	if a.err != nil {
		return nil, "", a.err
	}
	next := ""
	if cursor == "" {
		next = "page-2"
	}
	return []map[string]string{{"decision": "deny", "tool": "bash"}}, next, nil
}

func TestListAudit(t *testing.T) {
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		query    string
		since    time.Time // zero: none; for durations, how far back from now
		back     time.Duration
		decision string
		limit    int
		cursor   string
	}{
		{query: ""},
		{query: "?since=2025-03-01T10:00:00Z", since: at},
		{query: "?since=2025-03-01T12:00:00%2B02:00", since: at},
		{query: "?since=1h", back: time.Hour},
		{query: "?since=90m&decision=needs_approval&limit=10000", back: 90 * time.Minute, decision: "needs_approval", limit: 10000},
		{query: "?decision=allow", decision: "allow"},
		{query: "?decision=deny", decision: "deny"},
		{query: "?decision=approved", decision: "approved"},
		{query: "?decision=rejected&limit=5", decision: "rejected", limit: 5},
		{query: "?decision=rejected&limit=5&cursor=page-2", decision: "rejected", limit: 5, cursor: "page-2"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			audit := &auditLog{}
			h := handler(admin.Options{Store: openStore(t), Audit: audit})
			before := time.Now()
			rec := serve(t, h, http.MethodGet, "/api/v1/audit"+tt.query, "")
			after := time.Now()

			require.Equal(t, http.StatusOK, rec.Code, "body: %s", rec.Body)
			want := `{"items":[{"decision":"deny","tool":"bash"}],"next":"page-2"}`
			if tt.cursor != "" {
				want = `{"items":[{"decision":"deny","tool":"bash"}]}`
			}
			require.JSONEq(t, want, rec.Body.String())
			require.Equal(t, tt.cursor, audit.cursor)
			require.Equal(t, tt.decision, audit.decision)
			require.Equal(t, tt.limit, audit.limit)
			switch {
			case tt.back > 0:
				require.False(t, audit.since.Before(before.Add(-tt.back)), "since %v", audit.since)
				require.False(t, audit.since.After(after.Add(-tt.back)), "since %v", audit.since)
			default:
				require.True(t, tt.since.Equal(audit.since), "since %v, want %v", audit.since, tt.since)
			}
		})
	}
}

func TestListAuditRefusesBadParameters(t *testing.T) {
	tests := []struct {
		query string
		names []string
	}{
		{"?since=garbage", []string{`since "garbage"`, "RFC 3339"}},
		{"?since=2025-03-01", []string{`since "2025-03-01"`}},
		{"?since=yesterday", []string{`since "yesterday"`}},
		{"?since=-1h", []string{`since "-1h"`, "negative"}},
		{"?limit=abc", []string{`limit "abc"`, "1 to 10000"}},
		{"?limit=10001", []string{`limit "10001"`}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			audit := &auditLog{limit: -1}
			h := handler(admin.Options{Store: openStore(t), Audit: audit})
			requireError(t, serve(t, h, http.MethodGet, "/api/v1/audit"+tt.query, ""), http.StatusBadRequest, tt.names...)
			require.Equal(t, -1, audit.limit, "the audit log was read")
		})
	}

	t.Run("audit log errors keep their code", func(t *testing.T) {
		audit := &auditLog{err: bot.Errorf(bot.EUNAVAILABLE, "audit log closed")}
		h := handler(admin.Options{Store: openStore(t), Audit: audit})
		requireError(t, serve(t, h, http.MethodGet, "/api/v1/audit", ""), http.StatusServiceUnavailable, "audit log closed")
	})
}

// approval is what the fake desk lists and answers.
type approval struct {
	ID        string   `json:"id"`
	Status    string   `json:"status"`
	Approvers []string `json:"approvers"`
	DecidedBy string   `json:"decided_by,omitempty"`
}

// desk is an Approvals with one pending call that only ana may decide,
// refusing others and unknown ids the way the policy engine does.
type desk struct {
	mu      sync.Mutex
	pending map[string]approval
	listed  []bool // the all flag of each list call
	decided int
}

func newDesk() *desk {
	return &desk{pending: map[string]approval{"ap_1": {ID: "ap_1", Status: "pending", Approvers: []string{"ana"}}}}
}

func (d *desk) ListApprovals(_ context.Context, all bool) (any, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.listed = append(d.listed, all)
	out := []approval{}
	for _, a := range d.pending {
		out = append(out, a)
	}
	return out, nil
}

func (d *desk) DecideApproval(_ context.Context, id string, approve bool, by, claimed string) (any, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, ok := d.pending[id]
	if !ok {
		return nil, bot.Errorf(bot.ENOTFOUND, "no pending approval %q", id)
	}
	if claimed != "" && claimed != by {
		return nil, bot.Errorf(bot.EFORBIDDEN, "authenticated as %s, cannot decide as %s", by, claimed)
	}
	if by != "ana" {
		return nil, bot.Errorf(bot.EFORBIDDEN, "%s may not decide approval %q", by, id)
	}
	d.decided++
	a.Status, a.DecidedBy = "denied", by
	if approve {
		a.Status = "approved"
	}
	delete(d.pending, id)
	return a, nil
}

func TestListApprovals(t *testing.T) {
	d := newDesk()
	h := handler(admin.Options{Store: openStore(t), Approvals: d})

	for _, q := range []string{"", "?all=true", "?all=1"} {
		rec := serve(t, h, http.MethodGet, "/api/v1/approvals"+q, "")
		require.Equal(t, http.StatusOK, rec.Code)
		require.JSONEq(t, `[{"id":"ap_1","status":"pending","approvers":["ana"]}]`, rec.Body.String())
	}
	// Only all=true asks for decided approvals too.
	require.Equal(t, []bool{false, true, false}, d.listed)
}

// A decision is made as the identity the request authenticated as; "by"
// may only repeat it.
func TestDecideApproval(t *testing.T) {
	tests := []struct {
		name   string
		as     string // the authenticated identity; "" none
		path   string
		body   string
		status int
		names  []string // in the error message
		want   approval // on success
	}{
		{name: "approve", as: "ana", path: "ap_1/approve", body: `{"by":"ana"}`, status: http.StatusOK,
			want: approval{ID: "ap_1", Status: "approved", Approvers: []string{"ana"}, DecidedBy: "ana"}},
		{name: "deny", as: "ana", path: "ap_1/deny", body: `{"by":"ana"}`, status: http.StatusOK,
			want: approval{ID: "ap_1", Status: "denied", Approvers: []string{"ana"}, DecidedBy: "ana"}},
		{name: "no by is the identity", as: "ana", path: "ap_1/approve", body: `{}`, status: http.StatusOK,
			want: approval{ID: "ap_1", Status: "approved", Approvers: []string{"ana"}, DecidedBy: "ana"}},
		{name: "no body is the identity", as: "ana", path: "ap_1/deny", body: ``, status: http.StatusOK,
			want: approval{ID: "ap_1", Status: "denied", Approvers: []string{"ana"}, DecidedBy: "ana"}},
		{name: "by another name", as: "admin", path: "ap_1/approve", body: `{"by":"ana"}`, status: http.StatusForbidden, names: []string{"admin", "ana"}},
		{name: "not an approver", as: "bob", path: "ap_1/approve", body: ``, status: http.StatusForbidden, names: []string{"bob"}},
		{name: "not authenticated", as: "", path: "ap_1/approve", body: `{"by":"ana"}`, status: http.StatusUnauthorized, names: []string{"authenticated"}},
		{name: "unknown field", as: "ana", path: "ap_1/approve", body: `{"by":"ana","reason":"ok"}`, status: http.StatusBadRequest, names: []string{`"reason"`}},
		{name: "by not a string", as: "ana", path: "ap_1/approve", body: `{"by":7}`, status: http.StatusBadRequest, names: []string{`"by"`}},
		{name: "unknown id", as: "ana", path: "ap_9/approve", body: `{"by":"ana"}`, status: http.StatusNotFound, names: []string{`"ap_9"`}},
		{name: "unknown decision", as: "ana", path: "ap_1/maybe", body: `{"by":"ana"}`, status: http.StatusNotFound, names: []string{"/approve or /deny"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDesk()
			h := handler(admin.Options{Store: openStore(t), Approvals: d})
			if tt.as != "" {
				h = as(tt.as, h)
			}
			rec := serve(t, h, http.MethodPost, "/api/v1/approvals/"+tt.path, tt.body)
			if tt.status != http.StatusOK {
				requireError(t, rec, tt.status, tt.names...)
				require.Zero(t, d.decided)
				return
			}
			require.Equal(t, http.StatusOK, rec.Code, "body: %s", rec.Body)
			require.Equal(t, tt.want, decode[approval](t, rec))
			require.Equal(t, 1, d.decided)
		})
	}
}

// as authenticates every request as who, as httpapi.Authenticate does.
func as(who string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(httpapi.WithIdentity(r.Context(), httpapi.Identity{Name: who})))
	})
}

// Agents, Threads, Audit and Approvals are optional: a daemon without an
// agent runtime leaves them nil, and their endpoints say so with 503.
func TestOptionalServicesAbsent(t *testing.T) {
	h := handler(admin.Options{Store: openStore(t), Intake: bot.NewIntake(bot.IntakeOptions{Router: newRouter(t)})})

	tests := []struct {
		method, path, body string
		names              []string
	}{
		{http.MethodGet, "/api/v1/agents", "", []string{"no agents"}},
		{http.MethodGet, "/api/v1/agents/ops", "", []string{"no agents"}},
		{http.MethodPost, "/api/v1/threads/t1/reset", "", []string{"no agent runtime"}},
		{http.MethodGet, "/api/v1/audit", "", []string{"no audit log"}},
		{http.MethodGet, "/api/v1/audit?since=1h&decision=deny", "", []string{"no audit log"}},
		{http.MethodGet, "/api/v1/approvals", "", []string{"no approvals"}},
		{http.MethodPost, "/api/v1/approvals/ap_1/approve", `{"by":"ana"}`, []string{"no approvals"}},
		{http.MethodPost, "/api/v1/approvals/ap_1/deny", ``, []string{"no approvals"}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			requireError(t, serve(t, h, tt.method, tt.path, tt.body), http.StatusServiceUnavailable, tt.names...)
		})
	}

	// The work item, explain and ingress endpoints need only the store and
	// the router.
	for _, path := range []string{"/api/v1/workitems", "/api/v1/ingress"} {
		require.Equal(t, http.StatusOK, serve(t, h, http.MethodGet, path, "").Code, path)
	}
	require.Equal(t, http.StatusOK, serve(t, h, http.MethodPost, "/api/v1/explain", `{"text":"hi"}`).Code)
}

func TestExplainReplaysStoredEvents(t *testing.T) {
	s := seed(t)
	// The config in effect now has a rule for pull requests, which the one
	// the seeded pull request was decided by did not.
	now, err := bot.NewRouter(bot.RoutingConfig{
		Rules: []bot.Rule{{Name: "prs", Priority: 5, Agent: "triage", Match: bot.Match{Kinds: []string{"github.pull_request.*"}}}},
	}, []bot.AgentInfo{{Name: "ops", Keywords: []string{"deploy"}}, {Name: "triage"}})
	require.NoError(t, err)
	h := handler(admin.Options{Store: s.store, Intake: newIntake(s.store, now)})

	tests := []struct {
		name, body, want string
	}{
		{"a delivery that made no work item then", `{"delivery_id":"d-1"}`,
			`{"source":"github","kind":"github.pull_request.opened","delivery_id":"d-1","thread":"github:acme/api#7","ingress_id":"in_1",
			  "then":{"work_item":false,"agent":"","kind":"","reason":"no mention, command or rule matched","rule":"","ingress":"no_route"},
			  "now":{"work_item":true,"agent":"triage","kind":"rule","reason":"rule \"prs\" (priority 5)","rule":"prs"},
			  "differs":true}`},
		{"the same delivery named with its source", `{"delivery_id":"d-1","source":"github"}`, ""},
		{"a work item decided the same now", `{"work_item_id":"` + s.mention + `"}`,
			`{"source":"local","kind":"local.message","thread":"local:t1","work_item_id":"` + s.mention + `",
			  "then":{"work_item":true,"agent":"ops","kind":"mention","reason":"mention @ops","rule":""},
			  "now":{"work_item":true,"agent":"ops","kind":"mention","reason":"mention @ops","rule":""},
			  "differs":false}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := serve(t, h, http.MethodPost, "/api/v1/explain", tt.body)
			require.Equal(t, http.StatusOK, rec.Code, "body: %s", rec.Body)
			if tt.want != "" {
				require.JSONEq(t, tt.want, rec.Body.String())
			}
		})
	}

	for _, tt := range []struct {
		name, body string
		status     int
		names      []string
	}{
		{"unknown delivery", `{"delivery_id":"nope"}`, http.StatusNotFound, []string{`no delivery "nope"`}},
		{"unknown work item", `{"work_item_id":"wi_99"}`, http.StatusNotFound, []string{`"wi_99"`}},
		{"a work item an agent made", `{"work_item_id":"` + s.child + `"}`, http.StatusBadRequest, []string{"made by an agent's run"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			requireError(t, serve(t, h, http.MethodPost, "/api/v1/explain", tt.body), tt.status, tt.names...)
		})
	}

	// Replaying stores nothing.
	items, _, err := s.store.ListWorkItems(t.Context(), bot.WorkItemFilter{})
	require.NoError(t, err)
	require.Len(t, items, 4)
}
