package github

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// deciderFake records approval comments and refuses anyone but alice, as
// the approvals do.
type deciderFake struct {
	mu       sync.Mutex
	comments []ApprovalComment
}

func (d *deciderFake) DecideApproval(_ context.Context, c ApprovalComment) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.comments = append(d.comments, c)
	if c.Login != "alice" {
		return bot.Errorf(bot.EFORBIDDEN, "%s may not decide approval %q: calls of profile %q are decided by alice", c.Login, c.ApprovalID, "deployer")
	}
	return nil
}

func (d *deciderFake) seen() []ApprovalComment {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]ApprovalComment(nil), d.comments...)
}

func TestApprovalComments(t *testing.T) {
	thread := bot.GitHubThread("octo", "hello", 7)
	tests := []struct {
		name     string
		event    string
		payload  payload
		reason   string           // of the ingress record
		decided  *ApprovalComment // what the approvals were asked, nil: nothing
		answered string           // the reply in the thread, "" none
	}{
		{
			name: "an approver approves", event: "issue_comment",
			payload: issueCommentPayload("created", person("alice"), "/approve ap_1abc\nLooks safe.", nil),
			reason:  bot.IgnoreApproval,
			decided: &ApprovalComment{Approve: true, ApprovalID: "ap_1abc", Login: "alice", Thread: thread},
		},
		{
			name: "an approver denies on a pull request review comment", event: "pull_request_review_comment",
			payload: payload{
				"action": "created", "comment": payload{"id": 8, "body": "/deny ap_1abc not on a Friday"},
				"pull_request": payload{"number": 7}, "repository": repository(), "sender": person("alice"),
				"installation": payload{"id": testInstallation},
			},
			reason:  bot.IgnoreApproval,
			decided: &ApprovalComment{Approve: false, ApprovalID: "ap_1abc", Login: "alice", Thread: thread},
		},
		{
			name: "someone else is told, once", event: "issue_comment",
			payload:  issueCommentPayload("created", person("mallory"), "/approve ap_1abc", nil),
			reason:   bot.IgnoreApproval,
			decided:  &ApprovalComment{Approve: true, ApprovalID: "ap_1abc", Login: "mallory", Thread: thread},
			answered: `🔐 Nothing changed: mallory may not decide approval "ap_1abc": calls of profile "deployer" are decided by alice`,
		},
		{
			name: "no id", event: "issue_comment",
			payload:  issueCommentPayload("created", person("alice"), "/approve", nil),
			reason:   bot.IgnoreApproval,
			answered: "🔐 Nothing changed: say which approval: /approve <id> or /deny <id>, with the id the request shows",
		},
		{
			name: "the App itself", event: "issue_comment",
			payload: issueCommentPayload("created", botUser("switchyard[bot]"), "/approve ap_1abc", nil),
			reason:  bot.IgnoreBot,
		},
		{
			name: "an allowed bot", event: "issue_comment",
			payload: issueCommentPayload("created", botUser("renovate[bot]"), "/approve ap_1abc", nil),
			reason:  bot.IgnoreBot,
		},
		{
			name: "an edit decides nothing", event: "issue_comment",
			payload: issueCommentPayload("edited", person("alice"), "/approve ap_1abc", ptr("/approve ap_0")),
			reason:  bot.IgnoreEdited,
		},
		{
			name: "approve further down is prose", event: "issue_comment",
			payload: issueCommentPayload("created", person("alice"), "Should I\n/approve ap_1abc ?", nil),
			reason:  bot.IgnoreNoRoute,
		},
		{
			name: "a word that starts the same", event: "issue_comment",
			payload: issueCommentPayload("created", person("alice"), "/approved it already", nil),
			reason:  bot.IgnoreNoRoute,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &deciderFake{}
			e := newEnv(t, func(o *WebhookOptions, _ *GateOptions) { o.Approvals = d })
			e.answering()
			code, a := e.post(tt.event, "d-1", tt.payload.bytes(t))
			require.Equal(t, http.StatusAccepted, code)
			require.Equal(t, "ignored", a.Status)
			require.Equal(t, tt.reason, a.Reason)
			require.Empty(t, e.workItems(), "an approval comment makes no work item")
			recs := e.ingress()
			require.Len(t, recs, 1)
			require.Equal(t, tt.reason, recs[0].Reason)
			if tt.decided != nil {
				require.Equal(t, []ApprovalComment{*tt.decided}, d.seen())
			} else {
				require.Empty(t, d.seen())
			}
			msgs, err := e.store.ListOutbox(context.Background(), thread.Key())
			require.NoError(t, err)
			if tt.answered == "" {
				require.Empty(t, msgs)
				return
			}
			require.Len(t, msgs, 1)
			require.Equal(t, tt.answered, msgs[0].Text)

			// A redelivery decides nothing again; another attempt by the
			// same person edits the one answer.
			code, a = e.post(tt.event, "d-1", tt.payload.bytes(t))
			require.Equal(t, http.StatusOK, code)
			require.Equal(t, "duplicate", a.Status)
			seen := len(d.seen())
			// The same comment sent again under a new delivery id is a
			// replay: nothing is decided or answered again.
			code, a = e.post(tt.event, "d-forged", tt.payload.bytes(t))
			require.Equal(t, http.StatusOK, code)
			require.Equal(t, answer{Status: "duplicate", Reason: ReasonReplayed}, a)
			require.Len(t, d.seen(), seen)
			again := tt.payload
			again["comment"].(payload)["id"] = 556 // a comment of its own
			code, _ = e.post(tt.event, "d-2", again.bytes(t))
			require.Equal(t, http.StatusAccepted, code)
			require.Len(t, d.seen(), min(seen+1, 2*seen))
			msgs, err = e.store.ListOutbox(context.Background(), thread.Key())
			require.NoError(t, err)
			require.Len(t, msgs, 1, "answered in the thread once")
			require.Equal(t, 2, msgs[0].Version)
		})
	}
}

func TestApprovalCommentWithoutApprovals(t *testing.T) {
	e := newEnv(t)
	e.answering()
	code, _ := e.post("issue_comment", "d-1", issueCommentPayload("created", person("alice"), "/deny ap_1abc", nil).bytes(t))
	require.Equal(t, http.StatusAccepted, code)
	msgs, err := e.store.ListOutbox(context.Background(), "github:octo/hello#7")
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, "🔐 Nothing changed: approvals are not set up on this Switchyard", msgs[0].Text)
}

// answering rebuilds the handler with the store as its outbox, so refused
// approval comments are answered.
func (e *env) answering() {
	e.opts.Outbox = e.store
	e.handler = NewWebhookHandler(e.opts)
}
