package github

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
)

// GitHub's published example: https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
const (
	vectorSecret    = "It's a Secret to Everybody"
	vectorBody      = "Hello, World!"
	vectorSignature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
)

func flipBit(s string, i int) string {
	b := []byte(s)
	b[i] ^= 1
	return string(b)
}

func TestSignatureMatchesGitHubTestVector(t *testing.T) {
	e := newEnv(t, func(o *WebhookOptions, _ *GateOptions) { o.Secret = vectorSecret })
	deliver := func(body, signature string) int {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/github", strings.NewReader(body))
		req.Header.Set("X-GitHub-Event", "ping")
		req.Header.Set("X-GitHub-Delivery", "vector")
		req.Header.Set("X-Hub-Signature-256", signature)
		code, _ := e.serve(req)
		return code
	}
	require.Equal(t, http.StatusOK, deliver(vectorBody, vectorSignature))
	for _, tc := range []struct {
		name            string
		body, signature string
	}{
		{"body bit 0", flipBit(vectorBody, 0), vectorSignature},
		{"body last bit", flipBit(vectorBody, len(vectorBody)-1), vectorSignature},
		{"signature first hex digit", vectorBody, flipBit(vectorSignature, len("sha256="))},
		{"signature last hex digit", vectorBody, flipBit(vectorSignature, len(vectorSignature)-1)},
		{"sha1 prefix", vectorBody, "sha1=" + strings.TrimPrefix(vectorSignature, "sha256=")},
		{"truncated", vectorBody, vectorSignature[:len(vectorSignature)-2]},
		{"missing", vectorBody, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, http.StatusUnauthorized, deliver(tc.body, tc.signature))
		})
	}
}

func TestWebhookRefusesBadDeliveriesAndStoresNothing(t *testing.T) {
	e := newEnv(t)
	good := issueCommentPayload("created", person("alice"), "@triage please look", nil).bytes(t)
	for _, tc := range []struct {
		name   string
		method string
		body   []byte
		header map[string]string // overrides; "" deletes
		want   int
	}{
		{name: "no signature", body: good, header: map[string]string{"X-Hub-Signature-256": ""}, want: http.StatusUnauthorized},
		{name: "wrong secret", body: good, header: map[string]string{"X-Hub-Signature-256": sign("other", good)}, want: http.StatusUnauthorized},
		{name: "signature not hex", body: good, header: map[string]string{"X-Hub-Signature-256": "sha256=zz"}, want: http.StatusUnauthorized},
		{name: "no event header", body: good, header: map[string]string{"X-GitHub-Event": ""}, want: http.StatusBadRequest},
		{name: "odd event header", body: good, header: map[string]string{"X-GitHub-Event": "Issue Comment"}, want: http.StatusBadRequest},
		{name: "no delivery header", body: good, header: map[string]string{"X-GitHub-Delivery": ""}, want: http.StatusBadRequest},
		{name: "not JSON", body: []byte("not json"), want: http.StatusBadRequest},
		{name: "JSON null", body: []byte("null"), want: http.StatusBadRequest},
		{name: "wrong field types", body: []byte(`{"action":"created","issue":{"number":"seven"}}`), want: http.StatusBadRequest},
		{name: "no repository", body: []byte(`{"action":"created","issue":{"number":7},"comment":{"id":1,"body":"@triage"}}`), want: http.StatusBadRequest},
		{name: "GET", method: http.MethodGet, body: good, want: http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			req := httptest.NewRequest(method, "/webhooks/github", bytes.NewReader(tc.body))
			req.Header.Set("X-GitHub-Event", "issue_comment")
			req.Header.Set("X-GitHub-Delivery", "d-"+tc.name)
			req.Header.Set("X-Hub-Signature-256", sign(testSecret, tc.body))
			for k, v := range tc.header {
				if v == "" {
					req.Header.Del(k)
				} else {
					req.Header.Set(k, v)
				}
			}
			code, a := e.serve(req)
			require.Equal(t, tc.want, code)
			require.Equal(t, "error", a.Status)
		})
	}
	require.Empty(t, e.workItems())
	require.Empty(t, e.ingress())
	require.Zero(t, e.gh.callCount("POST /app/installations/{id}/access_tokens"), "nothing asked GitHub")
}

func TestWebhookRefusesBodiesOver25MiB(t *testing.T) {
	e := newEnv(t)
	body := bytes.Repeat([]byte(" "), MaxWebhookBody+1)
	req := httptest.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(body))
	req.Header.Set("X-GitHub-Event", "issues")
	req.Header.Set("X-GitHub-Delivery", "big")
	req.Header.Set("X-Hub-Signature-256", sign(testSecret, body))
	code, _ := e.serve(req)
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
	require.Empty(t, e.ingress())
}

func TestWebhookWithoutSecretRefusesEverything(t *testing.T) {
	e := newEnv(t, func(o *WebhookOptions, _ *GateOptions) { o.Secret = "" })
	body := []byte(`{}`)
	req := httptest.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(body))
	req.Header.Set("X-GitHub-Event", "ping")
	req.Header.Set("X-GitHub-Delivery", "x")
	req.Header.Set("X-Hub-Signature-256", sign("", body))
	code, _ := e.serve(req)
	require.Equal(t, http.StatusUnauthorized, code)
}

func TestPingIsAnsweredAndNotStored(t *testing.T) {
	e := newEnv(t)
	code, a := e.post("ping", "p1", []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`))
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "pong", a.Status)
	require.Empty(t, e.ingress())
}

// The acceptance path: a mention in a comment becomes a work item routed to
// the mentioned agent, the reporter's 👀 and status message reach the fake
// GitHub through the outbox and the Sink, and a redelivery changes nothing.
func TestMentionBecomesWorkItemWithReactionAndStatusComment(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.gh.setPermission("octo/hello", "alice", "write", "write")
	reporter := bot.NewReporter(bot.ReporterOptions{Outbox: e.store})
	deliverer := bot.NewDeliverer(bot.DelivererOptions{
		Store: e.store, Sinks: map[string]bot.Sink{bot.SourceGitHub: NewSink(e.client)},
		MinEditInterval: time.Millisecond,
	})
	flush := func() {
		fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		require.NoError(t, deliverer.Flush(fctx))
	}

	body := issueCommentPayload("created", person("alice"), "@triage please look", nil).bytes(t)
	code, a := e.post("issue_comment", "delivery-1", body)
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, "accepted", a.Status)

	items := e.workItems()
	require.Len(t, items, 1)
	wi := items[0]
	require.Equal(t, a.WorkItem, wi.ID)
	require.Equal(t, "triage", wi.Route.Agent)
	require.Equal(t, "mention @triage", wi.Route.Reason)
	require.Equal(t, "github:octo/hello#7", wi.Thread.Key())
	require.Equal(t, "github.issue_comment.created", wi.Kind)
	require.Equal(t, "alice", wi.Actor)
	require.Equal(t, bot.Requester{Source: bot.SourceGitHub, ID: "alice", Permission: "write"}, wi.Requester,
		"the permission looked up for the mention is recorded for the run's ceiling")
	require.Equal(t, "comment:555", wi.SourceRef)
	ev := e.event(wi.EventRef)
	require.Equal(t, body, ev.Raw)
	require.Equal(t, int64(testInstallation), ev.InstallationID)
	require.Equal(t, []string{"flaky"}, ev.Labels)

	flush()
	require.Equal(t, []fakeReaction{{ID: e.gh.reactionList()[0].ID, Path: "/repos/octo/hello/issues/comments/555/reactions", Content: "eyes"}}, e.gh.reactionList())

	run := reporter.Start(ctx, &bot.Job{ID: "job_1", Agent: wi.Route.Agent, Attempt: 1}, items)
	flush()
	comments := e.gh.threadComments("octo/hello#7")
	require.Len(t, comments, 1)
	require.Contains(t, comments[0].Body, "triage is working on "+wi.ID)
	require.Contains(t, comments[0].Body, "<!-- switchyard:"+wi.ID+"/status -->")

	require.NoError(t, e.store.EnqueueAll(ctx, run.Finish(true, "The test waited on a real clock; it uses a fake one now.", "")))
	flush()
	comments = e.gh.threadComments("octo/hello#7")
	require.Len(t, comments, 2, "the status is edited in place, the reply is new")
	require.Contains(t, comments[0].Body, "triage finished "+wi.ID)
	require.Contains(t, comments[1].Body, "uses a fake one now")
	require.Len(t, e.gh.reactionList(), 2)
	require.Equal(t, "rocket", e.gh.reactionList()[1].Content)

	// GitHub redelivers: nothing new is stored, reacted to or posted.
	code, a = e.post("issue_comment", "delivery-1", body)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "duplicate", a.Status)
	flush()
	require.Len(t, e.workItems(), 1)
	require.Len(t, e.gh.threadComments("octo/hello#7"), 2)
	require.Len(t, e.gh.reactionList(), 2)
}

func TestTriggerRules(t *testing.T) {
	type want struct {
		agent  string // a work item for this agent, or
		reason string // an ingress record with this reason
		reply  bool   // a refusal queued in the thread
	}
	for _, tc := range []struct {
		name    string
		event   string
		payload payload
		want    want
	}{
		{
			name: "the App itself", event: "issue_comment",
			payload: issueCommentPayload("created", botUser("switchyard[bot]"), "@triage done", nil),
			want:    want{reason: bot.IgnoreBot},
		},
		{
			name: "another bot", event: "issue_comment",
			payload: issueCommentPayload("created", botUser("dependabot[bot]"), "@triage rebase", nil),
			want:    want{reason: bot.IgnoreBot},
		},
		{
			name: "a bot by login alone", event: "issue_comment",
			payload: issueCommentPayload("created", person("ci[bot]"), "@triage rebase", nil),
			want:    want{reason: bot.IgnoreBot},
		},
		{
			name: "an allowed bot needs no permission", event: "issue_comment",
			payload: issueCommentPayload("created", botUser("renovate[bot]"), "@coder update the lock file", nil),
			want:    want{agent: "coder"},
		},
		{
			name: "a writer's mention", event: "issue_comment",
			payload: issueCommentPayload("created", person("alice"), "@coder fix this", nil),
			want:    want{agent: "coder"},
		},
		{
			name: "a writer's command", event: "issue_comment",
			payload: issueCommentPayload("created", person("alice"), "Ship it.\n/deploy staging", nil),
			want:    want{agent: "ops"},
		},
		{
			name: "a reader's mention", event: "issue_comment",
			payload: issueCommentPayload("created", person("rita"), "@coder fix this", nil),
			want:    want{reason: bot.IgnoreUnauthorized, reply: true},
		},
		{
			name: "a triager's command (role_name is finer than permission)", event: "issue_comment",
			payload: issueCommentPayload("created", person("tom"), "/deploy prod", nil),
			want:    want{reason: bot.IgnoreUnauthorized, reply: true},
		},
		{
			name: "a stranger's mention", event: "issue_comment",
			payload: issueCommentPayload("created", person("mallory"), "@coder rm -rf", nil),
			want:    want{reason: bot.IgnoreUnauthorized, reply: true},
		},
		{
			name: "a stranger mentioning a person asks no agent", event: "issue_comment",
			payload: issueCommentPayload("created", person("mallory"), "thanks @alice!", nil),
			want:    want{reason: bot.IgnoreNoRoute},
		},
		{
			name: "quoting an earlier request asks nothing", event: "issue_comment",
			payload: issueCommentPayload("created", person("alice"), "> @coder fix this\n\nAgreed, this keeps failing.", nil),
			want:    want{reason: bot.IgnoreNoRoute},
		},
		{
			name: "an e-mail reply quoting a request asks nothing", event: "issue_comment",
			payload: issueCommentPayload("created", person("alice"),
				"Same here.\n\nOn Tue, Mar 5, 2024 at 10:00 AM Bob <notifications@github.com> wrote:\n\n> @coder fix this\n>\n> — Reply to this email directly", nil),
			want: want{reason: bot.IgnoreNoRoute},
		},
		{
			name: "a mention in code asks nothing", event: "issue_comment",
			payload: issueCommentPayload("created", person("alice"), "Write `@coder fix it` to ask the coder:\n```\n@coder fix it\n/deploy prod\n```", nil),
			want:    want{reason: bot.IgnoreNoRoute},
		},
		{
			name: "a scoped package, a team or a profile URL asks nothing", event: "issue_comment",
			payload: issueCommentPayload("created", person("alice"), "Bumped @coder/cli; cc @octo/triage, see https://medium.com/@reviewer", nil),
			want:    want{reason: bot.IgnoreNoRoute},
		},
		{
			name: "a request below a quote asks", event: "issue_comment",
			payload: issueCommentPayload("created", person("alice"), "> it fails on main\n\n@coder fix this", nil),
			want:    want{agent: "coder"},
		},
		{
			name: "an edit that adds a mention", event: "issue_comment",
			payload: issueCommentPayload("edited", person("alice"), "@reviewer and @triage please look", ptr("@reviewer please look")),
			want:    want{agent: "triage"},
		},
		{
			name: "an edit that adds no mention", event: "issue_comment",
			payload: issueCommentPayload("edited", person("alice"), "@triage please look again", ptr("@triage please look")),
			want:    want{reason: bot.IgnoreEdited},
		},
		{
			name: "a review comment edit that adds no mention", event: "pull_request_review_comment",
			payload: payload{
				"action": "edited", "comment": payload{"id": 8, "body": "@coder nit"}, "changes": payload{"body": payload{"from": "@coder nit"}},
				"pull_request": payload{"number": 9}, "repository": repository(), "sender": person("alice"),
				"installation": payload{"id": testInstallation},
			},
			want: want{reason: bot.IgnoreEdited},
		},
		{
			name: "a mention in an HTML comment asks nothing", event: "issue_comment",
			payload: issueCommentPayload("created", person("alice"), "<!-- @coder fix this -->\nThanks, looks good.", nil),
			want:    want{reason: bot.IgnoreNoRoute},
		},
		{
			name: "an edit that takes a request out of its quote asks", event: "issue_comment",
			payload: issueCommentPayload("edited", person("alice"), "@coder fix this", ptr("> @coder fix this")),
			want:    want{agent: "coder"},
		},
		{
			name: "an edit that quotes a request asks nothing", event: "issue_comment",
			payload: issueCommentPayload("edited", person("alice"), "> @coder fix this\n\nthanks", ptr("thanks")),
			want:    want{reason: bot.IgnoreEdited},
		},
		{
			name: "an edit that mentions a person runs no command again", event: "issue_comment",
			payload: issueCommentPayload("edited", person("alice"), "/deploy prod\n\ncc @bob", ptr("/deploy prod")),
			want:    want{reason: bot.IgnoreEdited},
		},
		{
			name: "an edit that mentions a person matches no rule again", event: "pull_request_review_comment",
			payload: payload{
				"action": "edited", "comment": payload{"id": 8, "body": "see docs/x.md, cc @bob"}, "changes": payload{"body": payload{"from": "see docs/x.md"}},
				"pull_request": payload{"number": 9, "labels": []payload{{"name": "bug"}}}, "repository": repository(), "sender": person("alice"),
				"installation": payload{"id": testInstallation},
			},
			want: want{reason: bot.IgnoreEdited},
		},
		{
			name: "an issue edit keeps old mentions quiet", event: "issues",
			payload: issuesPayload("edited", person("alice"), "@coder fix the crash (typo fixed)", ptr("@coder fix the crahs")),
			want:    want{reason: bot.IgnoreNoRoute},
		},
		{
			name: "an issue edit still matches rules", event: "issues",
			payload: issuesPayload("edited", person("mallory"), "crash", nil, "bug"),
			want:    want{agent: "triage"},
		},
		{
			name: "a labelled issue by a stranger matches a rule", event: "issues",
			payload: issuesPayload("labeled", person("mallory"), "@coder fix", nil, "bug"),
			want:    want{agent: "triage"},
		},
		{
			name: "an issue opened without mention or rule", event: "issues",
			payload: issuesPayload("opened", person("alice"), "It crashes.", nil),
			want:    want{reason: bot.IgnoreNoRoute},
		},
		{
			name: "a pull request opened with a mention", event: "pull_request",
			payload: pullRequestPayload("opened", person("alice"), "@reviewer have a look"),
			want:    want{agent: "reviewer"},
		},
		{
			name: "a pull request synchronised does not repeat its mention", event: "pull_request",
			payload: pullRequestPayload("synchronize", person("alice"), "@reviewer have a look"),
			want:    want{reason: bot.IgnoreNoRoute},
		},
		{
			name: "a review with a mention", event: "pull_request_review",
			payload: payload{
				"action": "submitted", "review": payload{"id": 4, "body": "@coder address these", "state": "changes_requested"},
				"pull_request": payload{"number": 9}, "repository": repository(), "sender": person("alice"),
				"installation": payload{"id": testInstallation},
			},
			want: want{agent: "coder"},
		},
		{
			name: "an unsupported action", event: "pull_request",
			payload: pullRequestPayload("assigned", person("alice"), "@reviewer"),
			want:    want{reason: bot.IgnoreUnsupported},
		},
		{
			name: "a deleted comment", event: "issue_comment",
			payload: issueCommentPayload("deleted", person("alice"), "@coder fix this", nil),
			want:    want{reason: bot.IgnoreDeleted},
		},
		{
			name: "an event go-github does not know", event: "merge_group",
			payload: payload{"action": "checks_requested", "repository": repository(), "sender": person("alice")},
			want:    want{reason: bot.IgnoreUnsupported},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Listing the App itself among the allowed bots changes nothing:
			// Switchyard never answers itself.
			e := newEnv(t, func(_ *WebhookOptions, o *GateOptions) { o.AllowBots = []string{"renovate", "switchyard[bot]"} })
			e.gh.setPermission("octo/hello", "alice", "write", "write")
			e.gh.setPermission("octo/hello", "rita", "read", "read")
			e.gh.setPermission("octo/hello", "tom", "read", "triage")
			code, a := e.post(tc.event, "d-1", tc.payload.bytes(t))
			require.Equal(t, http.StatusAccepted, code)
			if tc.want.agent != "" {
				require.Equal(t, "accepted", a.Status)
				items := e.workItems()
				require.Len(t, items, 1)
				require.Equal(t, tc.want.agent, items[0].Route.Agent)
				require.Equal(t, bot.SourceGitHub, items[0].Requester.Source)
				require.Equal(t, items[0].Actor, items[0].Requester.ID, "the sender asked for the work")
				require.Empty(t, e.ingress())
			} else {
				require.Equal(t, "ignored", a.Status)
				require.Equal(t, tc.want.reason, a.Reason)
				recs := e.ingress()
				require.Len(t, recs, 1)
				require.Equal(t, tc.want.reason, recs[0].Reason)
				require.NotEmpty(t, recs[0].Detail)
				require.Empty(t, e.workItems())
			}
			msgs, err := e.store.ListOutbox(context.Background(), "github:octo/hello#7")
			require.NoError(t, err)
			switch {
			case tc.want.reply:
				require.Len(t, msgs, 1)
				require.Equal(t, "notice/github:octo/hello#7/unauthorized", msgs[0].Key)
				require.Equal(t, bot.OutboxReply, msgs[0].Kind)
				require.Contains(t, msgs[0].Text, "write access to octo/hello")
			case tc.want.agent != "":
				// 👀, written with the work item, in its thread.
				wi := e.workItems()[0]
				msgs, err := e.store.ListOutbox(context.Background(), wi.Thread.Key())
				require.NoError(t, err)
				require.Len(t, msgs, 1)
				require.Equal(t, wi.ID+"/reaction/eyes", msgs[0].Key)
				require.Equal(t, bot.OutboxReaction, msgs[0].Kind)
				require.Equal(t, wi.SourceRef, msgs[0].Target)
			default:
				require.Empty(t, msgs)
			}
		})
	}
}

func TestEditThatAddsAMentionRoutesToTheNewMention(t *testing.T) {
	e := newEnv(t)
	e.gh.setPermission("octo/hello", "alice", "write", "write")
	p := issueCommentPayload("edited", person("alice"), "@coder did this; @reviewer please check", ptr("@coder did this"))
	code, _ := e.post("issue_comment", "d-edit", p.bytes(t))
	require.Equal(t, http.StatusAccepted, code)
	items := e.workItems()
	require.Len(t, items, 1)
	require.Equal(t, "reviewer", items[0].Route.Agent)
	require.Equal(t, []string{"reviewer"}, e.event(items[0].EventRef).Mentions)
}

func TestMinPermission(t *testing.T) {
	for _, tc := range []struct {
		min    Permission
		role   string
		accept bool
	}{
		{"", "write", true},
		{"", "triage", false},
		{PermissionTriage, "triage", true},
		{PermissionMaintain, "write", false},
		{PermissionMaintain, "maintain", true},
		{PermissionAdmin, "admin", true},
		{"owner", "maintain", false}, // invalid: the strictest, admin
		{"owner", "admin", true},
	} {
		t.Run(string(tc.min)+"/"+tc.role, func(t *testing.T) {
			e := newEnv(t, func(_ *WebhookOptions, o *GateOptions) { o.MinPermission = tc.min })
			e.gh.setPermission("octo/hello", "alice", "", tc.role)
			code, a := e.post("issue_comment", "d", issueCommentPayload("created", person("alice"), "@coder go", nil).bytes(t))
			require.Equal(t, http.StatusAccepted, code)
			require.Equal(t, tc.accept, a.Status == "accepted", a)
		})
	}
}

// A reloaded config changes the permission a person needs at once, for the
// gate the webhook and the intake share.
func TestGateConfigureTakesEffectAtOnce(t *testing.T) {
	e := newEnv(t)
	e.gh.setPermission("octo/hello", "tom", "read", "triage")
	ask := func(id string) answer {
		// Each a comment of its own: the same one sent again is a replay.
		code, a := e.post("issue_comment", id, issueCommentPayload("created", person("tom"), "@coder go "+id, nil).bytes(t))
		require.Equal(t, http.StatusAccepted, code)
		return a
	}
	require.Equal(t, "ignored", ask("d-1").Status, "write is needed by default")
	e.gate.Configure("switchyard", nil, PermissionTriage)
	require.Equal(t, PermissionTriage, e.gate.MinPermission())
	require.Equal(t, "accepted", ask("d-2").Status)
}

func TestParsePermission(t *testing.T) {
	for in, want := range map[string]Permission{"": PermissionWrite, "read": PermissionRead, " Maintain ": PermissionMaintain, "admin": PermissionAdmin} {
		got, err := ParsePermission(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got)
	}
	for _, in := range []string{"none", "owner", "wrote"} {
		_, err := ParsePermission(in)
		require.Equal(t, bot.EINVALID, bot.ErrorCode(err), in)
	}
}

func TestPermissionAnswersAreCached(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	e := newEnv(t, func(_ *WebhookOptions, o *GateOptions) { o.Now = clock; o.PermissionTTL = time.Minute })
	e.gh.setPermission("octo/hello", "alice", "write", "write")
	const perm = "GET /repos/{owner}/{repo}/collaborators/{user}/permission"

	for i, id := range []string{"a", "b", "c"} {
		code, _ := e.post("issue_comment", id, issueCommentPayload("created", person("alice"), "@coder step "+id, nil).bytes(t))
		require.Equal(t, http.StatusAccepted, code, i)
	}
	require.Equal(t, 1, e.gh.callCount(perm))
	require.Equal(t, 1, e.gh.callCount("POST /app/installations/{id}/access_tokens"), "the installation token is reused")

	// Alice loses write access; once the cached answer expires, she is refused.
	e.gh.setPermission("octo/hello", "alice", "read", "read")
	now = now.Add(2 * time.Minute)
	code, a := e.post("issue_comment", "d", issueCommentPayload("created", person("alice"), "@coder again", nil).bytes(t))
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, bot.IgnoreUnauthorized, a.Reason)
	require.Equal(t, 2, e.gh.callCount(perm))
}

// When GitHub cannot say whether the commenter may ask, nothing is stored and
// GitHub is told the delivery failed, so it can be redelivered.
func TestPermissionLookupFailureFailsTheDelivery(t *testing.T) {
	e := newEnv(t)
	e.gh.setPermission("octo/hello", "alice", "write", "write")
	body := issueCommentPayload("created", person("alice"), "@coder fix this", nil).bytes(t)

	e.gh.fail("GET /repos/{owner}/{repo}/collaborators/{user}/permission", failure{status: 502, body: `{"message":"Server Error"}`})
	code, a := e.post("issue_comment", "d-1", body)
	require.Equal(t, http.StatusBadGateway, code)
	require.NotContains(t, a.Error, "ghs_", "no token in the answer")
	require.Empty(t, e.workItems())
	require.Empty(t, e.ingress())

	// A failed token exchange fails the delivery the same way.
	e2 := newEnv(t)
	e2.gh.fail("POST /app/installations/{id}/access_tokens", failure{status: 500, body: `{"message":"oops"}`})
	code, _ = e2.post("issue_comment", "d-1", body)
	require.Equal(t, http.StatusBadGateway, code)
	require.Empty(t, e2.workItems())

	code, a = e.post("issue_comment", "d-1", body)
	require.Equal(t, http.StatusAccepted, code, "the redelivery goes through")
	require.Equal(t, "accepted", a.Status)
}

// A GitHub that does not answer does not hold the delivery past GitHub's own
// timeout.
func TestSlowLookupsFailTheDeliveryInTime(t *testing.T) {
	e := newEnv(t, func(w *WebhookOptions, o *GateOptions) {
		w.LookupTimeout = 100 * time.Millisecond
		o.LookupTimeout = 100 * time.Millisecond
	})
	e.gh.fail("GET /repos/{owner}/{repo}/collaborators/{user}/permission", failure{hang: true})
	code, _ := e.post("issue_comment", "d-slow", issueCommentPayload("created", person("alice"), "@coder go", nil).bytes(t))
	require.Equal(t, http.StatusBadGateway, code)
	require.Empty(t, e.workItems())
	require.Empty(t, e.ingress())
}

func TestRefusalIsQueuedAgainOnRedelivery(t *testing.T) {
	e := newEnv(t)
	body := issueCommentPayload("created", person("mallory"), "@coder hi", nil).bytes(t)
	code, _ := e.post("issue_comment", "d-9", body)
	require.Equal(t, http.StatusAccepted, code)
	code, a := e.post("issue_comment", "d-9", body)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "duplicate", a.Status)
	msgs, err := e.store.ListOutbox(context.Background(), "github:octo/hello#7")
	require.NoError(t, err)
	require.Len(t, msgs, 1, "one message key, so at most one comment")
	require.Len(t, e.ingress(), 1)
}

func TestPullRequestChangedPaths(t *testing.T) {
	needs := true
	e := newEnv(t, func(o *WebhookOptions, _ *GateOptions) { o.NeedsPaths = func() bool { return needs } })
	var files []string
	for i := range 230 {
		files = append(files, "src/file"+string(rune('a'+i%26))+strings.Repeat("x", i/26)+".go")
	}
	files = append(files, "renamed:docs/old.md->guide/new.md")
	e.gh.files["octo/hello#9"] = files

	code, a := e.post("pull_request", "pr-1", pullRequestPayload("opened", person("alice"), "Tidy up").bytes(t))
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, "accepted", a.Status, "the docs rule matched the old name of a renamed file")
	items := e.workItems()
	require.Len(t, items, 1)
	require.Equal(t, "docs", items[0].Route.Agent)
	paths := e.event(items[0].EventRef).Paths
	require.Len(t, paths, 232)
	require.Contains(t, paths, "guide/new.md")
	require.Contains(t, paths, "docs/old.md")
	require.Equal(t, 3, e.gh.callCount("GET /repos/{owner}/{repo}/pulls/{number}/files"), "three pages of 100")

	// A failed listing fails the delivery; nothing is stored.
	e.gh.fail("GET /repos/{owner}/{repo}/pulls/{number}/files", failure{status: 500, body: `{}`})
	code, _ = e.post("pull_request", "pr-2", pullRequestPayload("synchronize", person("alice"), "").bytes(t))
	require.Equal(t, http.StatusBadGateway, code)
	require.Len(t, e.workItems(), 1)
	require.Empty(t, e.ingress())

	// Rules that look at no paths cost no API call.
	needs = false
	code, _ = e.post("pull_request", "pr-3", pullRequestPayload("synchronize", person("alice"), "").bytes(t))
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, 4, e.gh.callCount("GET /repos/{owner}/{repo}/pulls/{number}/files"))
}

func TestInstallationEventsAreRecorded(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	forRepo := func(repo string) int64 {
		id, err := e.store.InstallationForRepo(ctx, repo)
		require.NoError(t, err)
		return id
	}
	// The removal and deletion examples are of another installation; make
	// them about the one created here.
	retarget := func(name string, edit func(payload)) []byte {
		var p payload
		require.NoError(t, json.Unmarshal(fixture(t, name), &p))
		p["installation"].(map[string]any)["id"] = 957387
		edit(p)
		return p.bytes(t)
	}

	code, a := e.post("installation", "i-1", fixture(t, "installation/created.payload.json"))
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, "ignored", a.Status)
	require.EqualValues(t, 957387, forRepo("Codertocat/Hello-World"))

	code, _ = e.post("installation_repositories", "i-2", fixture(t, "installation_repositories/added.payload.json"))
	require.Equal(t, http.StatusAccepted, code)
	require.EqualValues(t, 957387, forRepo("codertocat/space"))

	code, _ = e.post("installation_repositories", "i-3", retarget("installation_repositories/removed.payload.json", func(p payload) {
		p["repositories_removed"] = []payload{{"full_name": "Codertocat/Space", "name": "Space"}}
	}))
	require.Equal(t, http.StatusAccepted, code)
	require.Zero(t, forRepo("Codertocat/Space"))
	require.EqualValues(t, 957387, forRepo("Codertocat/Hello-World"))

	code, _ = e.post("installation", "i-4", retarget("installation/deleted.payload.json", func(payload) {}))
	require.Equal(t, http.StatusAccepted, code)
	require.Zero(t, forRepo("Codertocat/Hello-World"))

	recs := e.ingress()
	require.Len(t, recs, 4)
	for _, r := range recs {
		require.True(t, strings.HasPrefix(r.Kind, "github.installation"), r.Kind)
	}
}

func TestFormEncodedDeliveries(t *testing.T) {
	e := newEnv(t)
	e.gh.setPermission("octo/hello", "alice", "write", "write")
	js := issueCommentPayload("created", person("alice"), "@triage +1 & more", nil).bytes(t)
	body := []byte(url.Values{"payload": {string(js)}}.Encode())
	req := httptest.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-GitHub-Event", "issue_comment")
	req.Header.Set("X-GitHub-Delivery", "form-1")
	req.Header.Set("X-Hub-Signature-256", sign(testSecret, body))
	code, a := e.serve(req)
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, "accepted", a.Status)
	require.Equal(t, "@triage +1 & more", e.workItems()[0].Text)
}

// An intake failure is a 500 without detail; GitHub redelivers later.
func TestIntakeFailureIs500(t *testing.T) {
	e := newEnv(t)
	e.gh.setPermission("octo/hello", "alice", "write", "write")
	require.NoError(t, e.store.Close())
	code, a := e.post("issue_comment", "d", issueCommentPayload("created", person("alice"), "@coder go", nil).bytes(t))
	require.Equal(t, http.StatusInternalServerError, code)
	require.Equal(t, "internal error", a.Error)
}

// A rule-triggered event records its sender without a permission; the run
// looks it up when it starts, through the same cache as mentions.
func TestRequesterPermissionIsLookedUpWhenTheRunStarts(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.gh.setPermission("octo/hello", "mallory", "read", "read")
	code, a := e.post("issues", "d-rule", issuesPayload("labeled", person("mallory"), "crash", nil, "bug").bytes(t))
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, "accepted", a.Status)
	wi := e.workItems()[0]
	require.Equal(t, bot.Requester{Source: bot.SourceGitHub, ID: "mallory"}, wi.Requester, "a rule asks nobody's permission at intake")

	r, err := e.gate.ResolveRequester(ctx, wi.Requester, wi.Thread)
	require.NoError(t, err)
	require.Equal(t, "read", r.Permission)
	e.gh.setPermission("octo/hello", "mallory", "admin", "admin")
	r, err = e.gate.ResolveRequester(ctx, wi.Requester, wi.Thread)
	require.NoError(t, err)
	require.Equal(t, "read", r.Permission, "answered from the cache")

	// Known permissions, other sources and other threads are left alone.
	known := bot.Requester{Source: bot.SourceGitHub, ID: "alice", Permission: "write"}
	r, err = e.gate.ResolveRequester(ctx, known, wi.Thread)
	require.NoError(t, err)
	require.Equal(t, known, r)
	local := bot.Requester{Source: bot.SourceLocal, ID: "ana"}
	r, err = e.gate.ResolveRequester(ctx, local, bot.LocalThread("x"))
	require.NoError(t, err)
	require.Equal(t, local, r)

	// A failed lookup is an error: the run's rights cannot be known.
	_, err = e.gate.ResolveRequester(ctx, bot.Requester{Source: bot.SourceGitHub, ID: "bob"}, bot.GitHubThread("elsewhere", "repo", 1))
	require.Error(t, err)
}

// GitHub lets a person redeliver any recent delivery. An installation event
// delivered again after later ones changes nothing: the repositories stay
// where the later events left them.
func TestRedeliveredInstallationEventsChangeNothing(t *testing.T) {
	ctx := context.Background()
	const inst = 957387
	retarget := func(t *testing.T, name string, edit func(payload)) []byte {
		var p payload
		require.NoError(t, json.Unmarshal(fixture(t, name), &p))
		p["installation"].(map[string]any)["id"] = inst
		edit(p)
		return p.bytes(t)
	}
	type delivery struct {
		event, id string
		body      func(t *testing.T) []byte
	}
	created := delivery{"installation", "created", func(t *testing.T) []byte { return fixture(t, "installation/created.payload.json") }}
	deleted := delivery{"installation", "deleted", func(t *testing.T) []byte {
		return retarget(t, "installation/deleted.payload.json", func(payload) {})
	}}
	added := delivery{"installation_repositories", "added", func(t *testing.T) []byte {
		return retarget(t, "installation_repositories/added.payload.json", func(payload) {})
	}}
	removed := delivery{"installation_repositories", "removed", func(t *testing.T) []byte {
		return retarget(t, "installation_repositories/removed.payload.json", func(p payload) {
			p["repositories_removed"] = []payload{{"full_name": "Codertocat/Space", "name": "Space"}}
		})
	}}
	for _, tc := range []struct {
		name  string
		order []delivery
		repo  string
		want  int64
	}{
		{"a creation after the deletion", []delivery{created, deleted, created}, "Codertocat/Hello-World", 0},
		{"a creation twice after the deletion", []delivery{created, deleted, created, created}, "Codertocat/Hello-World", 0},
		{"an addition after the removal", []delivery{created, added, removed, added}, "Codertocat/Space", 0},
		{"a removal after the deletion and a new creation", []delivery{created, added, removed, deleted, removed}, "Codertocat/Hello-World", 0},
		{"a creation redelivered while it holds", []delivery{created, created}, "Codertocat/Hello-World", inst},
	} {
		// Sent again by GitHub under its own delivery id, or by someone
		// who captured it under a new one.
		for _, replayed := range []bool{false, true} {
			name := tc.name
			if replayed {
				name += ", replayed under a new id"
			}
			t.Run(name, func(t *testing.T) {
				e := newEnv(t)
				seen := map[string]bool{}
				for i, d := range tc.order {
					id := "i-" + d.id
					if replayed && seen[d.id] {
						id = fmt.Sprintf("forged-%d", i)
					}
					code, a := e.post(d.event, id, d.body(t))
					switch {
					case seen[d.id] && replayed:
						require.Equal(t, http.StatusOK, code)
						require.Equal(t, answer{Status: "duplicate", Reason: ReasonReplayed}, a)
					case seen[d.id]:
						require.Equal(t, http.StatusOK, code)
						require.Equal(t, "duplicate", a.Status)
					default:
						require.Equal(t, http.StatusAccepted, code)
					}
					seen[d.id] = true
				}
				id, err := e.store.InstallationForRepo(ctx, tc.repo)
				require.NoError(t, err)
				require.EqualValues(t, tc.want, id)
				require.Len(t, e.ingress(), len(seen))
			})
		}
	}
}

// A signed delivery whose sender is missing, null or has no login asks
// nobody's permission and tells nobody anything: a mention, a command or
// an approval in it makes nothing.
func TestDeliveriesWithoutASenderAskForNothing(t *testing.T) {
	senders := map[string]any{
		"missing": nil, "null": "null", "empty object": payload{}, "empty login": payload{"login": ""},
		"null login": payload{"login": nil, "type": "User"}, "type alone": payload{"type": "User"},
	}
	texts := []string{"@coder fix this", "/deploy prod", "/approve ap_1", "@triage\n/deploy staging"}
	for name, sender := range senders {
		for _, text := range texts {
			t.Run(name+"/"+text, func(t *testing.T) {
				e := newEnv(t)
				var answered []ApprovalComment
				e.opts.Approvals = approvalFunc(func(_ context.Context, c ApprovalComment) error {
					answered = append(answered, c)
					return nil
				})
				e.handler = NewWebhookHandler(e.opts)
				p := issueCommentPayload("created", person("alice"), text, nil)
				switch sender {
				case nil:
					delete(p, "sender")
				case "null":
					p["sender"] = nil
				default:
					p["sender"] = sender
				}
				code, a := e.post("issue_comment", "d-1", p.bytes(t))
				require.Equal(t, http.StatusAccepted, code)
				require.Equal(t, "ignored", a.Status)
				require.Equal(t, bot.IgnoreUnauthorized, a.Reason)
				recs := e.ingress()
				require.Len(t, recs, 1)
				require.Contains(t, recs[0].Detail, "no sender")
				require.Empty(t, e.workItems())
				require.Empty(t, answered)
				msgs, err := e.store.ListOutbox(context.Background(), "github:octo/hello#7")
				require.NoError(t, err)
				require.Empty(t, msgs, "nobody to tell")
				require.Zero(t, e.gh.callCount("GET /repos/{owner}/{repo}/collaborators/{user}/permission"))
			})
		}
	}
}

type approvalFunc func(context.Context, ApprovalComment) error

func (f approvalFunc) DecideApproval(ctx context.Context, c ApprovalComment) error { return f(ctx, c) }

// A corpus of forged, mangled and ambiguous signatures and headers, made
// from one signed delivery: none stores anything or asks GitHub anything,
// and the delivery as GitHub sends it is then accepted.
func TestForgedDeliveriesAreRefused(t *testing.T) {
	e := newEnv(t)
	e.gh.setPermission("octo/hello", "alice", "write", "write")
	body := issueCommentPayload("created", person("alice"), "@coder fix this", nil).bytes(t)
	good := sign(testSecret, body)
	hexSig := strings.TrimPrefix(good, "sha256=")
	type forged struct {
		name    string
		body    []byte
		headers [][2]string // added in order; the three GitHub headers are set unless named
		want    int
	}
	var corpus []forged
	sig := func(name, value string) {
		corpus = append(corpus, forged{name: "signature " + name, headers: [][2]string{{"X-Hub-Signature-256", value}}, want: http.StatusUnauthorized})
	}
	sig("empty", "")
	for _, prefix := range []string{"", "sha1=", "SHA256=", "Sha256=", "sha256:", "sha256 =", " sha256=", "sha256= ", "sha-256=", "sha512=", "hmac-sha256=", "sha256==", "sha256=sha256="} {
		sig("prefix "+strconv.Quote(prefix), prefix+hexSig)
	}
	sig("upper-case hex", "sha256="+strings.ToUpper(hexSig))
	for i, c := range hexSig {
		if c >= 'a' && c <= 'f' {
			sig(fmt.Sprintf("upper-case digit %d", i), "sha256="+hexSig[:i]+strings.ToUpper(string(c))+hexSig[i+1:])
		}
	}
	for n := range len(hexSig) {
		sig(fmt.Sprintf("cut to %d digits", n), "sha256="+hexSig[:n])
	}
	for _, tail := range []string{"0", "00", " ", "\t", ",", ", " + good, "=", "\x00"} {
		sig("followed by "+strconv.Quote(tail), good+tail)
	}
	for i, c := range hexSig {
		other := "0"
		if c == '0' {
			other = "1"
		}
		sig(fmt.Sprintf("digit %d changed", i), "sha256="+hexSig[:i]+other+hexSig[i+1:])
	}
	sha1 := hmac.New(sha1.New, []byte(testSecret))
	sha1.Write(body)
	sig("SHA-1 of the body", "sha1="+hex.EncodeToString(sha1.Sum(nil)))
	corpus = append(corpus, forged{name: "SHA-1 header alone", headers: [][2]string{{"X-Hub-Signature", "sha1=" + hex.EncodeToString(sha1.Sum(nil))}, {"X-Hub-Signature-256", ""}}, want: http.StatusUnauthorized})
	for _, secret := range []string{"", "other", testSecret + "\n", " " + testSecret, strings.ToUpper(testSecret)} {
		sig("under secret "+strconv.Quote(secret), sign(secret, body))
	}
	for _, pair := range [][2]string{{good, "sha256=00"}, {"sha256=00", good}, {good, good}, {good, "sha256="}} {
		corpus = append(corpus, forged{
			name:    "signature twice " + strconv.Quote(pair[0][:9]) + " " + strconv.Quote(pair[1]),
			headers: [][2]string{{"X-Hub-Signature-256", pair[0]}, {"X-Hub-Signature-256", pair[1]}}, want: http.StatusUnauthorized,
		})
	}
	// Bodies changed after signing, the signature left as it was.
	changed := func(name string, b []byte) {
		corpus = append(corpus, forged{name: "body " + name, body: b, want: http.StatusUnauthorized})
	}
	changed("with a newline after", append(slices.Clone(body), '\n'))
	changed("with a space before", append([]byte(" "), body...))
	changed("cut by one byte", body[:len(body)-1])
	changed("empty", nil)
	changed("re-encoded", bytes.ReplaceAll(body, []byte(`":`), []byte(`": `)))
	changed("form-encoded", []byte(url.Values{"payload": {string(body)}}.Encode()))
	for i := 0; i < len(body); i += max(1, len(body)/40) {
		changed(fmt.Sprintf("with byte %d changed", i), []byte(flipBit(string(body), i)))
	}
	changed("asking another agent", bytes.Replace(body, []byte("@coder"), []byte("@triag"), 1))
	// Signed, but the headers that say what it is are missing, doubled or
	// not GitHub's.
	hdr := func(name string, want int, headers ...[2]string) {
		corpus = append(corpus, forged{name: name, headers: headers, want: want})
	}
	hdr("no event", http.StatusBadRequest, [2]string{"X-GitHub-Event", ""})
	hdr("no delivery", http.StatusBadRequest, [2]string{"X-GitHub-Delivery", ""})
	hdr("event twice", http.StatusBadRequest, [2]string{"X-GitHub-Event", "issue_comment"}, [2]string{"X-GitHub-Event", "ping"})
	hdr("event twice, the same", http.StatusBadRequest, [2]string{"X-GitHub-Event", "issue_comment"}, [2]string{"X-GitHub-Event", "issue_comment"})
	hdr("delivery twice", http.StatusBadRequest, [2]string{"X-GitHub-Delivery", "f1"}, [2]string{"X-GitHub-Delivery", "f2"})
	hdr("delivery of 201 bytes", http.StatusBadRequest, [2]string{"X-GitHub-Delivery", strings.Repeat("d", 201)})
	for _, ev := range []string{"Issue_Comment", "issue-comment", "issue comment", "issue_comment\t", "../issue_comment", strings.Repeat("e", 65), "issue_comment,ping"} {
		hdr("event "+strconv.Quote(ev), http.StatusBadRequest, [2]string{"X-GitHub-Event", ev})
	}

	for i, f := range corpus {
		b := f.body
		if b == nil && !strings.HasPrefix(f.name, "body empty") {
			b = body
		}
		req := httptest.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		named := map[string]bool{}
		for _, h := range f.headers {
			named[h[0]] = true
			if h[1] != "" {
				req.Header.Add(h[0], h[1])
			}
		}
		if !named["X-Hub-Signature-256"] {
			req.Header.Set("X-Hub-Signature-256", good)
		}
		if !named["X-GitHub-Event"] {
			req.Header.Set("X-GitHub-Event", "issue_comment")
		}
		if !named["X-GitHub-Delivery"] {
			req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("forged-%d", i))
		}
		code, a := e.serve(req)
		require.Equal(t, f.want, code, f.name)
		require.Equal(t, "error", a.Status, f.name)
	}
	t.Logf("%d forged deliveries refused", len(corpus))
	require.Empty(t, e.workItems())
	require.Empty(t, e.ingress())
	require.Zero(t, e.gh.callCount("POST /app/installations/{id}/access_tokens"), "nothing asked GitHub")

	code, a := e.post("issue_comment", "genuine", body)
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, "accepted", a.Status)
}

// A delivery's action becomes part of its kind, which is stored, listed,
// logged and counted in metrics by kind: one GitHub would not send (longer
// than a repository dispatch's 100 characters, or with control characters)
// is refused as malformed, by both readers, rather than making a kind of
// its own.
func TestActionsGitHubWouldNotSendAreRefused(t *testing.T) {
	e := newEnv(t)
	actions := []string{strings.Repeat("a", 100000), strings.Repeat("a", 101), strings.Repeat("é", 51), "created\n", "created\x00", "\x1b[31mcreated", "created\u0085"}
	bodies := map[string]func(action string) payload{
		"issue_comment": func(a string) payload { return issueCommentPayload(a, person("alice"), "@coder fix", nil) },
		"issues":        func(a string) payload { return issuesPayload(a, person("alice"), "@coder fix", nil, "bug") },
		"pull_request":  func(a string) payload { return pullRequestPayload(a, person("alice"), "@coder fix") },
		"check_run": func(a string) payload {
			return payload{"action": a, "repository": repository(), "sender": person("alice")}
		},
		"installation": func(a string) payload {
			return payload{"action": a, "installation": payload{"id": testInstallation, "account": payload{"login": "octo"}}, "sender": person("alice")}
		},
	}
	n := 0
	for event, body := range bodies {
		for _, action := range actions {
			n++
			b := body(action).bytes(t)
			requireAgree(t, event, b)
			code, a := e.post(event, fmt.Sprintf("a-%d", n), b)
			require.Equal(t, http.StatusBadRequest, code, "%s %.20q", event, action)
			require.Equal(t, "malformed payload", a.Error)
		}
	}
	require.Empty(t, e.workItems())
	require.Empty(t, e.ingress())
	for i, action := range []string{"rerequested_action", "on-demand-test", "deploy prod.eu", strings.Repeat("a", 100), strings.Repeat("é", 50)} {
		code, _ := e.post("check_run", fmt.Sprint("genuine-", i), bodies["check_run"](action).bytes(t))
		require.Equal(t, http.StatusAccepted, code)
		require.Equal(t, "github.check_run."+action, e.ingress()[0].Kind)
	}
}

// A rule on labels matches a "labeled" event by the label it added: an issue
// labelled "bug" starts work once, and labelling it with anything else
// later does not start the "bugs" rule again. Other events match by the
// labels the issue or pull request has.
func TestLabellingMatchesRulesByTheLabelAdded(t *testing.T) {
	withoutLabel := issuesPayload("labeled", person("alice"), "crash", nil, "bug")
	delete(withoutLabel, "label")
	for _, tc := range []struct {
		name    string
		event   string
		payload payload
		rule    bool // the "bugs" rule makes a work item
	}{
		{"bug added to an issue", "issues", issuesPayload("labeled", person("alice"), "crash", nil, "bug"), true},
		{"bug added beside others", "issues", issuesPayload("labeled", person("alice"), "crash", nil, "p1", "ui", "bug"), true},
		{"p1 added to a bug", "issues", issuesPayload("labeled", person("alice"), "crash", nil, "bug", "p1"), false},
		{"ui added to a bug", "issues", issuesPayload("labeled", person("alice"), "crash", nil, "bug", "p1", "ui"), false},
		{"bug added to a pull request", "pull_request", pullRequestPayload("labeled", person("alice"), "fix", "docs", "bug"), true},
		{"docs added to a bug pull request", "pull_request", pullRequestPayload("labeled", person("alice"), "fix", "bug", "docs"), false},
		{"a labelling that names no label", "issues", withoutLabel, false},
		{"a bug opened", "issues", issuesPayload("opened", person("alice"), "crash", nil, "bug", "p1"), true},
		{"a bug pull request reopened", "pull_request", pullRequestPayload("reopened", person("alice"), "fix", "docs", "bug"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			b := tc.payload.bytes(t)
			requireAgree(t, tc.event, b)
			code, a := e.post(tc.event, "d-1", b)
			require.Equal(t, http.StatusAccepted, code)
			if tc.rule {
				require.Equal(t, "accepted", a.Status)
				require.Equal(t, bot.RouteRule, e.workItems()[0].Route.Kind)
			} else {
				require.Equal(t, "ignored", a.Status)
				require.Equal(t, bot.IgnoreNoRoute, a.Reason)
			}
		})
	}
}

// "Why didn't it run?": for each way a delivery makes no work item, its
// ingress record names the reason a person would look for.
func TestIngressRecordsSayWhyNothingRan(t *testing.T) {
	for _, tc := range []struct {
		name    string
		event   string
		payload payload
		reason  string
		detail  string
	}{
		{"the App itself", "issue_comment", issueCommentPayload("created", botUser("switchyard[bot]"), "@coder", nil), bot.IgnoreBot, "sent by Switchyard itself"},
		{"the App by login alone", "issue_comment", issueCommentPayload("created", person("SwitchYard[bot]"), "@coder", nil), bot.IgnoreBot, "sent by Switchyard itself"},
		{"another bot", "issue_comment", issueCommentPayload("created", botUser("dependabot[bot]"), "@coder", nil), bot.IgnoreBot, "dependabot[bot], not in github.allow_bots"},
		{"a bot deciding an approval", "issue_comment", issueCommentPayload("created", botUser("renovate[bot]"), "/approve ap_1", nil), bot.IgnoreBot, "cannot decide approvals"},
		{"a reader", "issue_comment", issueCommentPayload("created", person("rita"), "@coder fix", nil), bot.IgnoreUnauthorized, "rita has read permission on octo/hello, write is required"},
		{"a stranger's command", "issue_comment", issueCommentPayload("created", person("mallory"), "/deploy prod", nil), bot.IgnoreUnauthorized, "mallory has none permission on octo/hello"},
		{"no sender", "issue_comment", func() payload {
			p := issueCommentPayload("created", person("alice"), "@coder fix", nil)
			delete(p, "sender")
			return p
		}(), bot.IgnoreUnauthorized, "names no sender"},
		{"a misspelt command", "issue_comment", issueCommentPayload("created", person("alice"), "/deplyo staging", nil), bot.IgnoreNoRoute, "/deplyo is not a command"},
		{"a mention in code", "issue_comment", issueCommentPayload("created", person("alice"), "`@coder`", nil), bot.IgnoreNoRoute, "no mention, command or rule matched"},
		{"an edit adding nothing", "issue_comment", issueCommentPayload("edited", person("alice"), "@coder fix it", ptr("@coder fix")), bot.IgnoreEdited, "the edit adds no mention"},
		{"a deletion", "issue_comment", issueCommentPayload("deleted", person("alice"), "@coder", nil), bot.IgnoreDeleted, "github.issue_comment.deleted is a deletion"},
		{"an action not acted on", "pull_request", pullRequestPayload("assigned", person("alice"), "@coder"), bot.IgnoreUnsupported, "github.pull_request.assigned is not acted on"},
		{"an event not acted on", "star", payload{"action": "created", "repository": repository(), "sender": person("alice")}, bot.IgnoreUnsupported, "github.star.created is not acted on"},
		{"a label no rule names", "issues", issuesPayload("labeled", person("alice"), "x", nil, "bug", "p1"), bot.IgnoreNoRoute, "no mention, command or rule matched"},
		{"an installation", "installation", payload{"action": "created", "installation": payload{"id": 5, "account": payload{"login": "octo"}}, "sender": person("alice")}, bot.IgnoreUnsupported, "installation events make no work item"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.gh.setPermission("octo/hello", "alice", "write", "write")
			e.gh.setPermission("octo/hello", "rita", "read", "read")
			code, a := e.post(tc.event, "d-1", tc.payload.bytes(t))
			require.Equal(t, http.StatusAccepted, code)
			require.Equal(t, tc.reason, a.Reason)
			recs := e.ingress()
			require.Len(t, recs, 1)
			require.Equal(t, tc.reason, recs[0].Reason)
			require.Contains(t, recs[0].Detail, tc.detail)
			require.Empty(t, e.workItems())
		})
	}
}

// GitHub sends a delivery as JSON or, when the webhook is set up so, as a
// form whose "payload" field holds the JSON. Other content types, and
// compressed bodies, are answered 415 and store nothing.
func TestWebhookContentTypes(t *testing.T) {
	js := issueCommentPayload("created", person("alice"), "@coder fix", nil).bytes(t)
	form := []byte(url.Values{"payload": {string(js)}}.Encode())
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err := zw.Write(js)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	for _, tc := range []struct {
		name    string
		body    []byte
		headers [][2]string
		want    int
	}{
		{"JSON", js, [][2]string{{"Content-Type", "application/json"}}, http.StatusAccepted},
		{"JSON with a charset", js, [][2]string{{"Content-Type", "application/json; charset=utf-8"}}, http.StatusAccepted},
		{"JSON in capitals", js, [][2]string{{"Content-Type", "Application/JSON"}}, http.StatusAccepted},
		{"no content type", js, nil, http.StatusAccepted},
		{"form", form, [][2]string{{"Content-Type", "application/x-www-form-urlencoded"}}, http.StatusAccepted},
		{"form with a charset", form, [][2]string{{"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"}}, http.StatusAccepted},
		{"identity encoding", js, [][2]string{{"Content-Type", "application/json"}, {"Content-Encoding", "identity"}}, http.StatusAccepted},
		{"text", js, [][2]string{{"Content-Type", "text/plain"}}, http.StatusUnsupportedMediaType},
		{"XML", js, [][2]string{{"Content-Type", "application/xml"}}, http.StatusUnsupportedMediaType},
		{"multipart", js, [][2]string{{"Content-Type", "multipart/form-data; boundary=x"}}, http.StatusUnsupportedMediaType},
		{"JSON-ish", js, [][2]string{{"Content-Type", "application/json-patch+json"}}, http.StatusUnsupportedMediaType},
		{"a list", js, [][2]string{{"Content-Type", "application/json, text/plain"}}, http.StatusUnsupportedMediaType},
		{"an empty content type", js, [][2]string{{"Content-Type", ";"}}, http.StatusUnsupportedMediaType},
		{"two content types", js, [][2]string{{"Content-Type", "application/json"}, {"Content-Type", "application/json"}}, http.StatusUnsupportedMediaType},
		{"gzip", gz.Bytes(), [][2]string{{"Content-Type", "application/json"}, {"Content-Encoding", "gzip"}}, http.StatusUnsupportedMediaType},
		{"gzip, identity", gz.Bytes(), [][2]string{{"Content-Type", "application/json"}, {"Content-Encoding", "gzip"}, {"Content-Encoding", "identity"}}, http.StatusUnsupportedMediaType},
		{"a form said to be JSON", form, [][2]string{{"Content-Type", "application/json"}}, http.StatusBadRequest},
		{"JSON said to be a form", js, [][2]string{{"Content-Type", "application/x-www-form-urlencoded"}}, http.StatusBadRequest},
		{"a form without payload", []byte("other=1"), [][2]string{{"Content-Type", "application/x-www-form-urlencoded"}}, http.StatusBadRequest},
		{"a form with a bad escape", []byte("payload=%zz"), [][2]string{{"Content-Type", "application/x-www-form-urlencoded"}}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.gh.setPermission("octo/hello", "alice", "write", "write")
			req := httptest.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(tc.body))
			req.Header.Set("X-GitHub-Event", "issue_comment")
			req.Header.Set("X-GitHub-Delivery", "ct-1")
			req.Header.Set("X-Hub-Signature-256", sign(testSecret, tc.body))
			for _, h := range tc.headers {
				req.Header.Add(h[0], h[1])
			}
			code, a := e.serve(req)
			require.Equal(t, tc.want, code, a.Error)
			if tc.want != http.StatusAccepted {
				require.Empty(t, e.workItems())
				require.Empty(t, e.ingress())
				return
			}
			require.Len(t, e.workItems(), 1)
			require.Equal(t, "@coder fix", e.workItems()[0].Text)
		})
	}
}

// mutations calls emit with root re-encoded once for each member of every
// object in it deleted, set to null, and set to a value of each other JSON
// type, restoring the member after.
func mutations(t *testing.T, v, root any, path string, emit func(name string, body []byte)) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			child := x[k]
			for _, repl := range []any{"(deleted)", nil, "text", 7, -1, 1e20, 1.5, true, []any{}, []any{nil}, map[string]any{}} {
				if repl == "(deleted)" {
					delete(x, k)
				} else {
					x[k] = repl
				}
				b, err := json.Marshal(root)
				require.NoError(t, err)
				emit(fmt.Sprintf("%s.%s=%v", path, k, repl), b)
				x[k] = child
			}
			mutations(t, child, root, path+"."+k, emit)
		}
	case []any:
		for i, child := range x {
			mutations(t, child, root, fmt.Sprintf("%s[%d]", path, i), emit)
		}
	}
}

// Signed payloads with any member missing, null or of another type, at every
// level: each is answered 202 or 400, never 5xx; both readers agree on it;
// and none makes Switchyard speak to nobody (a refusal to "@").
func TestHostilePayloadsAreAnsweredAndNeverFailTheIntake(t *testing.T) {
	e := newEnv(t)
	e.gh.setPermission("octo/hello", "alice", "write", "write")
	bases := []struct {
		event   string
		payload payload
	}{
		{"issue_comment", issueCommentPayload("created", person("alice"), "@coder fix", nil)},
		{"issue_comment", issueCommentPayload("edited", person("alice"), "@coder and @triage", ptr("@coder"))},
		{"pull_request", pullRequestPayload("opened", person("alice"), "@reviewer look", "docs")},
		{"issues", issuesPayload("labeled", person("alice"), "crash", nil, "bug")},
		{"pull_request_review", payload{
			"action": "submitted", "review": payload{"id": 4, "body": "@coder address these"},
			"pull_request": payload{"number": 9, "labels": labels("bug")}, "repository": repository(), "sender": person("alice"),
			"installation": payload{"id": testInstallation},
		}},
		{"installation_repositories", payload{
			"action": "added", "installation": payload{"id": testInstallation, "account": payload{"login": "octo"}},
			"repositories_added": []payload{{"full_name": "octo/other", "name": "other"}}, "sender": person("alice"),
		}},
		{"installation", payload{
			"action": "created", "installation": payload{"id": testInstallation, "account": payload{"login": "octo"}, "suspended_at": nil},
			"repositories": []payload{{"full_name": "octo/hello", "name": "hello"}}, "sender": person("alice"),
		}},
		{"pull_request_review_comment", payload{
			"action": "created", "comment": payload{"id": 8, "body": "/deploy staging"},
			"pull_request": payload{"number": 9}, "repository": repository(), "sender": person("alice"),
			"installation": payload{"id": testInstallation},
		}},
		{"check_run", payload{"action": "created", "check_run": payload{"id": 1}, "repository": repository(), "sender": person("alice")}},
	}
	n, codes := 0, map[int]int{}
	sent := map[string]bool{}
	for _, base := range bases {
		var root any
		require.NoError(t, json.Unmarshal(base.payload.bytes(t), &root))
		mutations(t, root, root, base.event, func(name string, body []byte) {
			n++
			requireAgree(t, base.event, body)
			code, a := e.post(base.event, fmt.Sprintf("hostile-%d", n), body)
			codes[code]++
			key := base.event + "\x00" + string(body)
			if sent[key] && code != http.StatusBadRequest {
				// Two mutations made the same body: it was sent before.
				require.Equal(t, answer{Status: "duplicate", Reason: ReasonReplayed}, a, name)
				return
			}
			sent[key] = true
			require.Contains(t, []int{http.StatusAccepted, http.StatusBadRequest}, code, "%s: %+v", name, a)
		})
	}
	t.Logf("%d hostile payloads: %v", n, codes)
	require.Greater(t, n, 500)
	require.Positive(t, codes[http.StatusBadRequest])
	require.Positive(t, codes[http.StatusAccepted])
	for _, th := range []string{"github:octo/hello#7", "github:octo/hello#9", "github:octo/hello#3"} {
		msgs, err := e.store.ListOutbox(context.Background(), th)
		require.NoError(t, err)
		for _, m := range msgs {
			require.NotContains(t, m.Text, "Sorry @,", m.Key)
		}
	}
}

// A delivery GitHub signed is acted on once: sent again under any other
// X-GitHub-Delivery (which the signature does not cover), or as another
// event, it is acknowledged as a replay and changes nothing, whatever it
// was: a mention, an event no rule routes, an approval comment.
func TestACapturedDeliveryIsActedOnOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		event   string
		payload payload
		status  string // the first delivery's
	}{
		{"a mention", "issue_comment", issueCommentPayload("created", person("alice"), "@triage please look", nil), "accepted"},
		{"a command", "pull_request_review_comment", payload{
			"action": "created", "comment": payload{"id": 8, "body": "/deploy staging"},
			"pull_request": payload{"number": 9}, "repository": repository(), "sender": person("alice"),
			"installation": payload{"id": testInstallation},
		}, "accepted"},
		{"an event no rule routes", "pull_request", pullRequestPayload("opened", person("alice"), "docs only"), "ignored"},
		{"a bot's comment", "issue_comment", issueCommentPayload("created", botUser("dependabot[bot]"), "@triage rebase", nil), "ignored"},
		{"an approval comment", "issue_comment", issueCommentPayload("created", person("alice"), "/approve ap_1abc", nil), "ignored"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &deciderFake{}
			e := newEnv(t, func(o *WebhookOptions, _ *GateOptions) { o.Approvals = d })
			e.answering()
			e.gh.setPermission("octo/hello", "alice", "write", "write")
			body := tc.payload.bytes(t)
			code, a := e.post(tc.event, "72d3162e-cc78-11e3-81ab-4c9367dc0958", body)
			require.Equal(t, http.StatusAccepted, code)
			require.Equal(t, tc.status, a.Status)
			items, ingress, decided := e.workItems(), e.ingress(), len(d.seen())
			outbox := func() []bot.OutboxMessage {
				var all []bot.OutboxMessage
				for _, th := range []string{"github:octo/hello#7", "github:octo/hello#9"} {
					msgs, err := e.store.ListOutbox(context.Background(), th)
					require.NoError(t, err)
					all = append(all, msgs...)
				}
				return all
			}
			queued := outbox()

			// Redelivered by GitHub, under its own id.
			code, a = e.post(tc.event, "72d3162e-cc78-11e3-81ab-4c9367dc0958", body)
			require.Equal(t, http.StatusOK, code)
			require.Equal(t, answer{Status: "duplicate"}, a)
			// Replayed by someone else, under ids of their choosing and as
			// other events (which, when the body is not one, are refused
			// as malformed).
			for i, event := range []string{tc.event, tc.event, "issues", "issue_comment", "pull_request_review", tc.event} {
				code, a = e.post(event, fmt.Sprintf("forged-%d", i), body)
				if event != tc.event && code == http.StatusBadRequest {
					continue
				}
				require.Equal(t, http.StatusOK, code, event)
				require.Equal(t, answer{Status: "duplicate", Reason: ReasonReplayed}, a, event)
			}
			require.Equal(t, items, e.workItems())
			require.Equal(t, ingress, e.ingress())
			require.Len(t, d.seen(), decided, "an approval is decided once")
			require.Equal(t, queued, outbox(), "nothing more is said or reacted")

			// One byte more is another delivery GitHub signed.
			code, _ = e.post(tc.event, "forged-0", append(body, ' '))
			require.Equal(t, http.StatusAccepted, code)
		})
	}
}

// A repository owner or name no session key can hold (not UTF-8 text, or
// with the "/" or "#" a key is read back at) is no GitHub delivery's: it is
// refused as malformed by both readers, and stores nothing, rather than
// failing the intake as an internal error that GitHub would show as a
// failed delivery to redeliver.
func TestRepositoriesNoThreadCanHoldAreMalformed(t *testing.T) {
	e := newEnv(t)
	e.gh.setPermission("octo/hello", "alice", "write", "write")
	bodies := map[string]func() payload{
		"issue_comment": func() payload { return issueCommentPayload("created", person("alice"), "@coder fix", nil) },
		"issues":        func() payload { return issuesPayload("labeled", person("alice"), "crash", nil, "bug") },
		"pull_request":  func() payload { return pullRequestPayload("opened", person("alice"), "@reviewer look") },
		"check_run": func() payload {
			return payload{"action": "created", "check_run": payload{"id": 1}, "repository": repository(), "sender": person("alice")}
		},
	}
	n := 0
	for event, body := range bodies {
		// Bytes that are not UTF-8 are read as U+FFFD by both readers, which
		// a key holds.
		for _, bad := range []string{"\x00", "/", "#", "#1/x", "a\x00/b#2"} {
			for _, field := range []string{"owner", "name"} {
				for _, at := range []string{"start", "end"} {
					n++
					p := body()
					repo := p["repository"].(payload)
					value := "hello"
					if field == "owner" {
						value = "octo"
					}
					if at == "start" {
						value = bad + value
					} else {
						value += bad
					}
					if field == "owner" {
						repo["owner"] = payload{"login": value, "type": "Organization"}
					} else {
						repo["name"] = value
					}
					b := p.bytes(t)
					requireAgree(t, event, b)
					code, a := e.post(event, fmt.Sprintf("bad-repo-%d", n), b)
					require.Equal(t, http.StatusBadRequest, code, "%s with %s %q", event, field, value)
					require.Equal(t, "malformed payload", a.Error)
				}
			}
		}
	}
	t.Logf("%d deliveries naming repositories GitHub has none of", n)
	require.Empty(t, e.workItems())
	require.Empty(t, e.ingress())
}

// What the App itself does on GitHub comes back to it as deliveries: its
// comments, reviews, pull requests and labels. Whatever case its login is
// spelt in, whatever type GitHub gives the sender, and even with the App
// listed in github.allow_bots, none makes work: each is an ingress record
// bot_actor, so Switchyard never answers itself.
func TestTheAppsOwnDeliveriesNeverMakeWork(t *testing.T) {
	logins := []string{"switchyard[bot]", "Switchyard[bot]", "SWITCHYARD[BOT]", "switchyard[Bot]"}
	types := []string{"Bot", "User", "", "Organization"}
	allowed := [][]string{nil, {"switchyard"}, {"switchyard[bot]"}, {"Switchyard", "renovate"}}
	events := []struct {
		event string
		body  func(sender ghUser) payload
	}{
		{"issue_comment", func(s ghUser) payload { return issueCommentPayload("created", s, "@coder fix this", nil) }},
		{"issue_comment", func(s ghUser) payload { return issueCommentPayload("edited", s, "@coder and @triage", ptr("@coder")) }},
		{"issues", func(s ghUser) payload { return issuesPayload("opened", s, "@triage crash", nil, "bug") }},
		{"pull_request", func(s ghUser) payload { return pullRequestPayload("opened", s, "@reviewer look") }},
		{"pull_request_review_comment", func(s ghUser) payload {
			return payload{"action": "created", "comment": payload{"id": 8, "body": "/deploy staging"},
				"pull_request": payload{"number": 9}, "repository": repository(), "sender": s, "installation": payload{"id": testInstallation}}
		}},
		{"pull_request_review", func(s ghUser) payload {
			return payload{"action": "submitted", "review": payload{"id": 4, "body": "@coder address these"},
				"pull_request": payload{"number": 9}, "repository": repository(), "sender": s, "installation": payload{"id": testInstallation}}
		}},
	}
	n := 0
	for _, allow := range allowed {
		e := newEnv(t, func(_ *WebhookOptions, g *GateOptions) { g.AllowBots = allow })
		for _, login := range logins {
			e.gh.setPermission("octo/hello", login, "admin", "admin")
			for _, typ := range types {
				for _, ev := range events {
					n++
					p := ev.body(ghUser{Login: login, Type: typ})
					if c, ok := p["comment"].(payload); ok {
						c["id"] = 10000 + n // each a comment of its own
					}
					code, a := e.post(ev.event, fmt.Sprintf("self-%d", n), p.bytes(t))
					require.Equal(t, http.StatusAccepted, code, "%s by %s (%s), allow_bots %v", ev.event, login, typ, allow)
					require.Equal(t, answer{Status: "ignored", Reason: bot.IgnoreBot}, a, "%s by %s (%s), allow_bots %v", ev.event, login, typ, allow)
				}
			}
		}
		require.Empty(t, e.workItems())
		require.Zero(t, e.gh.callCount("POST /app/installations/{id}/access_tokens"), "nothing asked GitHub")
	}
	t.Logf("%d of the App's own deliveries", n)
}

// GitHub's redelivery sends a delivery again under its own id, by hand or
// from a script, days later if need be. It makes its work once: after a
// restart, and after the dedup window has ended and its keys were swept,
// it is answered as a redelivery and makes nothing; so are a redelivered
// refusal and an ignored delivery.
func TestARedeliveryAfterTheDedupWindowMakesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clock := time.Date(2025, 3, 4, 9, 0, 0, 0, time.UTC)
	e := newEnv(t)
	e.gh.setPermission("octo/hello", "alice", "write", "write")
	use := func(s *bolt.Store) {
		e.store = s
		e.opts.Installations, e.opts.Deliveries = s, s
		e.intake = bot.NewIntake(bot.IntakeOptions{
			Store: s, Router: testRouter{}, Gates: map[string]bot.Gate{bot.SourceGitHub: e.gate}, Notices: s, React: true,
			DedupWindow: time.Hour, Now: func() time.Time { return clock },
		})
		e.opts.Intake = e.intake
		e.handler = NewWebhookHandler(e.opts)
	}
	s := bolttest.Open(t, dir)
	use(s)

	deliveries := []struct {
		id, event string
		body      []byte
	}{
		{"d-work", "issue_comment", issueCommentPayload("created", person("alice"), "@coder fix the flaky test", nil).bytes(t)},
		{"d-refused", "issue_comment", issueCommentPayload("created", person("mallory"), "@coder delete everything", nil).bytes(t)},
		{"d-ignored", "issue_comment", issueCommentPayload("created", person("alice"), "thanks all", nil).bytes(t)},
	}
	for _, d := range deliveries {
		code, _ := e.post(d.event, d.id, d.body)
		require.Equal(t, http.StatusAccepted, code, d.id)
	}
	items, records := len(e.workItems()), len(e.ingress())
	require.Equal(t, 1, items)
	outbox, err := e.store.ListOutbox(ctx, "github:octo/hello#7")
	require.NoError(t, err)

	redeliver := func(when string) {
		t.Helper()
		for _, d := range deliveries {
			code, a := e.post(d.event, d.id, d.body)
			require.Equal(t, http.StatusOK, code, "%s: %s", when, d.id)
			require.Equal(t, "duplicate", a.Status, "%s: %s", when, d.id)
		}
		require.Len(t, e.workItems(), items, when)
		require.Len(t, e.ingress(), records, when)
		again, err := e.store.ListOutbox(ctx, "github:octo/hello#7")
		require.NoError(t, err)
		require.Len(t, again, len(outbox), "%s: no second notice, status or reaction", when)
	}

	// After a restart, within the window.
	require.NoError(t, s.Close())
	s = bolttest.Open(t, dir)
	use(s)
	redeliver("after a restart")

	// Long after the window, its keys swept, and after another restart.
	clock = clock.Add(72 * time.Hour)
	_, err = s.ExpireDedup(ctx, clock)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s = bolttest.Open(t, dir)
	use(s)
	redeliver("after the dedup window")
}

// Two people without the permission ask on one issue: each is told, once,
// in words addressed to them; asking again, or GitHub redelivering, tells
// nobody twice.
func TestEachPersonRefusedOnAnIssueIsToldOnce(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.gh.setPermission("octo/hello", "mallory", "read", "read")
	e.gh.setPermission("octo/hello", "eve", "none", "none")
	ask := func(delivery, login, text string) {
		t.Helper()
		code, a := e.post("issue_comment", delivery, issueCommentPayload("created", person(login), text, nil).bytes(t))
		require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, code)
		require.Contains(t, []string{"ignored", "duplicate"}, a.Status)
	}
	ask("d-1", "mallory", "@coder delete the release branch")
	ask("d-2", "eve", "@coder me too")
	ask("d-3", "mallory", "@coder please?")
	ask("d-2", "eve", "@coder me too")
	ask("d-4", "Eve", "/deploy prod")

	msgs, err := e.store.ListOutbox(ctx, "github:octo/hello#7")
	require.NoError(t, err)
	var told []string
	for _, m := range msgs {
		require.Equal(t, bot.OutboxReply, m.Kind)
		told = append(told, m.Text)
	}
	require.Len(t, told, 2, "one reply for each person refused: %q", told)
	require.Contains(t, told[0], "Sorry @mallory")
	require.Contains(t, told[1], "Sorry @eve")
	require.Equal(t, "notice/github:octo/hello#7/unauthorized", msgs[0].Key, "the first reply keeps the thread's key")
}
