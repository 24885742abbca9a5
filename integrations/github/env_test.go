package github

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
)

var _ InstallationStore = (*bolt.Store)(nil)

const (
	testSecret       = "webhook secret for tests"
	testInstallation = 77
)

// testRouter is a tiny router: agent mentions, the default commands, a label
// rule and a path rule, else the default agent.
type testRouter struct{}

func (testRouter) Route(ev *bot.Event) bot.Route {
	for _, m := range ev.Mentions {
		switch a := strings.ToLower(m); a {
		case "triage", "coder", "reviewer":
			return bot.Route{Agent: a, Kind: bot.RouteMention, Reason: "mention @" + a}
		}
	}
	if a, ok := bot.DefaultCommands()[ev.Command]; ok {
		return bot.Route{Agent: a, Kind: bot.RouteCommand, Reason: "command /" + ev.Command}
	}
	if slices.Contains(ev.Labels, "bug") {
		return bot.Route{Agent: "triage", Kind: bot.RouteRule, Reason: `rule "bugs" (priority 100)`, Rule: "bugs"}
	}
	for _, p := range ev.Paths {
		if strings.HasPrefix(p, "docs/") {
			return bot.Route{Agent: "docs", Kind: bot.RouteRule, Reason: `rule "docs" (priority 50)`, Rule: "docs"}
		}
	}
	return bot.Route{Agent: "triage", Kind: bot.RouteDefault, Reason: "default"}
}

// env is the webhook handler wired as the daemon wires it: a real bot.Intake
// over a real bbolt store, a real Client against the fake GitHub.
type env struct {
	t       testing.TB
	gh      *fakeGitHub
	store   *bolt.Store
	client  *Client
	intake  *bot.Intake
	gate    *Gate
	opts    WebhookOptions
	handler http.Handler
}

func newEnv(t testing.TB, configure ...func(*WebhookOptions, *GateOptions)) *env {
	t.Helper()
	e := &env{t: t, gh: newFakeGitHub(t, "")}
	e.gh.installs["octo/hello"] = testInstallation
	store := bolttest.Open(t, t.TempDir())
	e.store = store
	var err error
	e.client, err = NewClient(ClientOptions{
		AppID: testAppID, PrivateKey: bot.Secret(testKeyPEM()), APIURL: e.gh.url(), Installations: store,
	})
	require.NoError(t, err)
	gopts := GateOptions{Client: e.client, AppSlug: "switchyard", AllowBots: []string{"renovate"}}
	e.opts = WebhookOptions{Secret: testSecret, Client: e.client, Installations: store, Deliveries: store}
	for _, c := range configure {
		c(&e.opts, &gopts)
	}
	e.gate = NewGate(gopts)
	e.intake = bot.NewIntake(bot.IntakeOptions{
		Store: store, Router: testRouter{}, Gates: map[string]bot.Gate{bot.SourceGitHub: e.gate}, Notices: store, React: true,
	})
	e.opts.Intake, e.opts.Gate = e.intake, e.gate
	e.handler = NewWebhookHandler(e.opts)
	return e
}

func sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// post delivers a signed webhook as GitHub does.
func (e *env) post(event, delivery string, payload []byte) (int, answer) {
	e.t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", sign(testSecret, payload))
	return e.serve(req)
}

func (e *env) serve(req *http.Request) (int, answer) {
	e.t.Helper()
	rec := httptest.NewRecorder()
	e.handler.ServeHTTP(rec, req)
	var a answer
	require.NoError(e.t, json.Unmarshal(rec.Body.Bytes(), &a), rec.Body.String())
	return rec.Code, a
}

func (e *env) workItems() []bot.WorkItem {
	e.t.Helper()
	items, _, err := e.store.ListWorkItems(context.Background(), bot.WorkItemFilter{})
	require.NoError(e.t, err)
	return items
}

func (e *env) ingress() []bot.IngressRecord {
	e.t.Helper()
	recs, _, err := e.store.ListIngress(context.Background(), bot.IngressFilter{})
	require.NoError(e.t, err)
	return recs
}

func (e *env) event(ref string) *bot.Event {
	e.t.Helper()
	ev, err := e.store.GetEvent(context.Background(), ref)
	require.NoError(e.t, err)
	return ev
}

// Payload builders: the fields Switchyard reads, shaped as GitHub sends them.

type payload map[string]any

func (p payload) bytes(t testing.TB) []byte {
	t.Helper()
	b, err := json.Marshal(p)
	require.NoError(t, err)
	return b
}

func person(login string) ghUser  { return ghUser{Login: login, Type: "User"} }
func botUser(login string) ghUser { return ghUser{Login: login, Type: "Bot"} }

func repository() payload {
	return payload{"id": 1, "name": "hello", "full_name": "octo/hello", "owner": payload{"login": "octo", "type": "Organization"}}
}

func labels(names ...string) []payload {
	out := []payload{}
	for _, n := range names {
		out = append(out, payload{"name": n})
	}
	return out
}

func issueCommentPayload(action string, sender ghUser, body string, previous *string) payload {
	p := payload{
		"action":       action,
		"issue":        payload{"number": 7, "title": "Flaky login test", "body": "It fails.", "labels": labels("flaky")},
		"comment":      payload{"id": 555, "body": body, "user": sender},
		"repository":   repository(),
		"sender":       sender,
		"installation": payload{"id": testInstallation},
	}
	if previous != nil {
		p["changes"] = payload{"body": payload{"from": *previous}}
	}
	return p
}

// labelled adds to p, for a "labeled" action, the label the event added: the
// last of labelNames, as GitHub sends it.
func labelled(p payload, action string, labelNames []string) payload {
	if action == "labeled" && len(labelNames) > 0 {
		p["label"] = payload{"name": labelNames[len(labelNames)-1]}
	}
	return p
}

func pullRequestPayload(action string, sender ghUser, body string, labelNames ...string) payload {
	return labelled(payload{
		"action": action,
		"number": 9,
		"pull_request": payload{
			"number": 9, "title": "Fix docs", "body": body, "labels": labels(labelNames...), "user": sender,
		},
		"repository":   repository(),
		"sender":       sender,
		"installation": payload{"id": testInstallation},
	}, action, labelNames)
}

func issuesPayload(action string, sender ghUser, body string, previous *string, labelNames ...string) payload {
	p := payload{
		"action":       action,
		"issue":        payload{"number": 3, "title": "Crash", "body": body, "labels": labels(labelNames...), "user": sender},
		"repository":   repository(),
		"sender":       sender,
		"installation": payload{"id": testInstallation},
	}
	if previous != nil {
		p["changes"] = payload{"body": payload{"from": *previous}}
	}
	return labelled(p, action, labelNames)
}

func ptr[T any](v T) *T { return &v }
