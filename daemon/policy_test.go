package daemon

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/integrations/github"
	"github.com/switchyard/switchyard/integrations/slack"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
)

// fakeGitHubPermissions speaks the GitHub REST calls a permission lookup
// makes (the repository's installation, an installation token, a
// collaborator's permission); a login it does not know is not a
// collaborator, one listed in broken gets a 502.
type fakeGitHubPermissions struct {
	mu     sync.Mutex
	perms  map[string]string // login → permission on every repository
	broken map[string]bool
}

func (f *fakeGitHubPermissions) set(login, perm string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.perms[strings.ToLower(login)] = perm
}

func (f *fakeGitHubPermissions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/access_tokens"):
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"token":"ghs_fakeInstallationToken","expires_at":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	case len(parts) == 4 && parts[0] == "repos" && parts[3] == "installation":
		fmt.Fprintf(w, `{"id":1,"account":{"login":%q}}`, parts[1])
	case len(parts) == 6 && parts[3] == "collaborators" && parts[5] == "permission":
		login := strings.ToLower(parts[4]) // logins are case-insensitive
		if f.broken[login] {
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, `{"message":"Server Error"}`)
			return
		}
		perm, ok := f.perms[login]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"message":"Not Found"}`)
			return
		}
		fmt.Fprintf(w, `{"permission":%q,"role_name":%q,"user":{"login":%q}}`, perm, perm, login)
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message":"Not Found"}`)
	}
}

func fakeAppClient(t *testing.T, api http.Handler) *github.Client {
	t.Helper()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	client, err := github.NewClient(github.ClientOptions{
		AppID: 1, APIURL: srv.URL + "/",
		PrivateKey: bot.Secret(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})),
	})
	require.NoError(t, err)
	return client
}

// A GitHub comment decides an approval as the commenter's login, only in
// the thread the approval was asked in, and only for a commenter who has
// the permission asking for work needs, as GitHub says at that moment:
// approver lists mix GitHub logins with Slack member ids and token names,
// and anyone may comment on a public repository under a login that spells
// one of them.
func TestGitHubCommentsDecideAsTheCommenter(t *testing.T) {
	profiles := map[string]policy.ProfileConfig{
		"deployer": {Extends: "ops", Approval: []string{"bash"}, Approvers: []string{"octocat", "U0123ABCD", "flaky"}},
	}
	engine, err := policy.New(policy.Options{Profiles: profiles})
	require.NoError(t, err)
	store := bolttest.Open(t, t.TempDir())
	auditor, err := policy.NewAuditor(store, bot.NewRedactor())
	require.NoError(t, err)
	approvals, err := policy.NewApprovals(policy.ApprovalOptions{Store: store, Approvers: engine, Audit: auditor, Timeout: time.Minute})
	require.NoError(t, err)
	api := &fakeGitHubPermissions{
		perms:  map[string]string{"octocat": "write", "mallory": "admin", "u0123abcd": "read"},
		broken: map[string]bool{"flaky": true},
	}
	gate := github.NewGate(github.GateOptions{Client: fakeAppClient(t, api), MinPermission: github.PermissionWrite})
	d := &Daemon{approvals: approvals, ghGate: gate}
	g := githubApprovals{d}

	thread := bot.GitHubThread("octo", "hello", 7)
	id, result := askToDeploy(t, approvals, thread)

	ctx := context.Background()
	comment := func(login string, th bot.Thread) error {
		return g.DecideApproval(ctx, github.ApprovalComment{Approve: true, ApprovalID: id, Login: login, Thread: th})
	}
	err = comment("octocat", bot.GitHubThread("octo", "other", 1))
	require.Equal(t, bot.EFORBIDDEN, bot.ErrorCode(err))
	require.ErrorContains(t, err, "was not asked in this thread")
	err = comment("mallory", thread)
	require.Equal(t, bot.EFORBIDDEN, bot.ErrorCode(err), "an admin who is not an approver")
	err = g.DecideApproval(ctx, github.ApprovalComment{Approve: true, ApprovalID: "ap_nope", Login: "octocat", Thread: thread})
	require.Equal(t, bot.ENOTFOUND, bot.ErrorCode(err))

	// A stranger whose login spells a Slack member id on the list.
	err = comment("U0123ABCD", thread)
	require.Equal(t, bot.EFORBIDDEN, bot.ErrorCode(err))
	require.EqualError(t, err, `U0123ABCD may not decide approval "`+id+`": @U0123ABCD has read permission on octo/hello, and deciding an approval there needs write (github.min_permission)`)
	// A lookup that fails decides nothing.
	err = comment("flaky", thread)
	require.Equal(t, bot.EUNAVAILABLE, bot.ErrorCode(err))
	require.ErrorContains(t, err, "could not look up @flaky's permission on octo/hello")
	// A demotion counts at once, whatever the cache remembers.
	_, err = gate.Permission(ctx, &bot.Event{Repo: "octo/hello", Actor: "octocat", Thread: thread})
	require.NoError(t, err)
	api.set("octocat", "read")
	err = comment("octocat", thread)
	require.Equal(t, bot.EFORBIDDEN, bot.ErrorCode(err))
	require.ErrorContains(t, err, "@octocat has read permission on octo/hello")

	got, err := approvals.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, bot.ApprovalPending, got.Status, "nothing was decided")
	recs, _, err := auditor.List(ctx, policy.AuditFilter{Decision: policy.AuditNotApprover})
	require.NoError(t, err)
	var reasons []string
	for _, r := range recs {
		reasons = append(reasons, r.Reason)
	}
	require.Len(t, reasons, 3, "mallory, U0123ABCD and the demoted octocat are on the record")
	require.Contains(t, strings.Join(reasons, "\n"), "@U0123ABCD has read permission on octo/hello")

	api.set("octocat", "maintain")
	require.NoError(t, comment("OctoCat", thread))
	require.True(t, <-result)
	got, err = approvals.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "OctoCat", got.DecidedBy)

	err = githubApprovals{&Daemon{}}.DecideApproval(ctx, github.ApprovalComment{ApprovalID: id, Login: "octocat", Thread: thread})
	require.Equal(t, bot.EUNAVAILABLE, bot.ErrorCode(err))
}

// The administrator the built-in profiles' calls are decided by is the
// identity of the daemon's own API token.
func TestBuiltinProfilesAreDecidedByTheAdministrator(t *testing.T) {
	require.Equal(t, config.AdminIdentity, policy.AdminApprover)
}

// A Slack click is signed and can be captured and sent again within
// Slack's five minutes: an approver's Approve replayed, or their Deny
// replayed after it, changes nothing once the approval is decided; the
// decision and the audit log keep the first click.
func TestReplayedSlackClicksChangeNothing(t *testing.T) {
	profiles := map[string]policy.ProfileConfig{"deployer": {Extends: "ops", Approval: []string{"bash"}, Approvers: []string{"U0123ABCD"}}}
	engine, err := policy.New(policy.Options{Profiles: profiles})
	require.NoError(t, err)
	store := bolttest.Open(t, t.TempDir())
	auditor, err := policy.NewAuditor(store, bot.NewRedactor())
	require.NoError(t, err)
	approvals, err := policy.NewApprovals(policy.ApprovalOptions{Store: store, Approvers: engine, Audit: auditor, Timeout: time.Minute})
	require.NoError(t, err)
	s := slackApprovals{&Daemon{approvals: approvals}}

	thread := bot.SlackThread("T1", "C1", "1700000000.000100")
	id, result := askToDeploy(t, approvals, thread)

	ctx := context.Background()
	click := func(approve bool) error {
		return s.DecideApproval(ctx, slack.ApprovalClick{Approve: approve, ApprovalID: id, User: "U0123ABCD", Team: "T1", Channel: "C1",
			MessageTS: "1700000001.000100", ThreadTS: thread.ThreadTS})
	}
	require.NoError(t, click(true))
	require.True(t, <-result)
	for range 3 {
		require.Equal(t, bot.ECONFLICT, bot.ErrorCode(click(true)), "the same click again")
	}
	require.Equal(t, bot.ECONFLICT, bot.ErrorCode(click(false)), "their Deny, captured before and sent after")
	got, err := approvals.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, bot.ApprovalApproved, got.Status)
	recs, _, err := auditor.List(ctx, policy.AuditFilter{Decision: policy.AuditApproved})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	for _, d := range []string{policy.AuditRejected, policy.AuditNotApprover} {
		recs, _, err := auditor.List(ctx, policy.AuditFilter{Decision: d})
		require.NoError(t, err)
		require.Empty(t, recs, d)
	}
}

// A click names where its prompt is, and a prompt is asked in its own
// thread: a click naming an approval asked in another thread, of the same
// channel or another, or in another workspace, decides nothing, whoever
// clicks; the approver's click in the approval's own thread decides it.
func TestSlackClicksDecideOnlyWhereTheApprovalWasAsked(t *testing.T) {
	profiles := map[string]policy.ProfileConfig{"deployer": {Extends: "ops", Approval: []string{"bash"}, Approvers: []string{"U0123ABCD"}}}
	engine, err := policy.New(policy.Options{Profiles: profiles})
	require.NoError(t, err)
	store := bolttest.Open(t, t.TempDir())
	auditor, err := policy.NewAuditor(store, bot.NewRedactor())
	require.NoError(t, err)
	approvals, err := policy.NewApprovals(policy.ApprovalOptions{Store: store, Approvers: engine, Audit: auditor, Timeout: time.Minute})
	require.NoError(t, err)
	s := slackApprovals{&Daemon{approvals: approvals}}

	thread := bot.SlackThread("T1", "C1", "1700000000.000100")
	id, result := askToDeploy(t, approvals, thread)
	ctx := context.Background()
	for _, c := range []struct{ name, user, team, channel, threadTS string }{
		{"another thread of the channel", "U0123ABCD", "T1", "C1", "1700000999.000100"},
		{"the channel's top level, under another message", "U0123ABCD", "T1", "C1", "1700000001.000100"},
		{"another channel", "U0123ABCD", "T1", "C2", thread.ThreadTS},
		{"another workspace", "U0123ABCD", "T2", "C1", thread.ThreadTS},
		{"someone who is no approver, in its thread", "UMALLORY1", "T1", "C1", thread.ThreadTS},
	} {
		err := s.DecideApproval(ctx, slack.ApprovalClick{Approve: true, ApprovalID: id, User: c.user, Team: c.team, Channel: c.channel,
			MessageTS: "1700001000.000100", ThreadTS: c.threadTS})
		require.Equal(t, bot.EFORBIDDEN, bot.ErrorCode(err), c.name)
		got, err := approvals.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, bot.ApprovalPending, got.Status, c.name)
	}
	require.NoError(t, s.DecideApproval(ctx, slack.ApprovalClick{Approve: true, ApprovalID: id, User: "U0123ABCD", Team: "T1", Channel: "C1",
		MessageTS: "1700000001.000100", ThreadTS: thread.ThreadTS}))
	require.True(t, <-result)
}

// askToDeploy has the deployer ops agent ask in thread to run make deploy,
// and returns the approval's id once it waits, and where the answer the
// agent gets arrives.
func askToDeploy(t *testing.T, approvals *policy.Approvals, thread bot.Thread) (string, <-chan bool) {
	t.Helper()
	info, ok := tools.CoreInfo(tools.Bash)
	require.True(t, ok)
	result := make(chan bool, 1)
	go func() {
		ok, _ := approvals.Approve(context.Background(), tools.Call{
			CallContext: tools.CallContext{Scope: tools.Scope{Agent: "ops", Profile: "deployer"}, SessionKey: thread.Key()},
			Tool:        info, Input: json.RawMessage(`{"command":"make deploy"}`),
		}, "deploys need a person")
		result <- ok
	}()
	var id string
	require.Eventually(t, func() bool {
		if l, err := approvals.List(t.Context(), false); err == nil && len(l) == 1 {
			id = l[0].ID
		}
		return id != ""
	}, 10*time.Second, 5*time.Millisecond)
	return id, result
}

// The thread's message of an approval: the request makes it, the outcome
// replaces it, and a resumed run's making sure of the request adds it only
// when it is not there, never asking again over a request or an outcome.
func TestAnApprovalsMessageIsMadeOnceAndKeptByAResumedRun(t *testing.T) {
	store := bolttest.Open(t, t.TempDir())
	ctx := context.Background()
	n := outboxNotifier{out: store, wake: func() {}}
	ap := bot.Approval{ID: "ap_1", Status: bot.ApprovalPending, Tool: "bash", Agent: "ops", Arguments: "kubectl apply",
		SessionKey: bot.LocalThread("ship").Key(), ExpiresAt: time.Date(2030, 1, 1, 15, 4, 0, 0, time.UTC)}
	message := func() *bot.OutboxMessage {
		t.Helper()
		m, err := store.GetOutbox(ctx, "approval/"+ap.ID)
		if bot.ErrorCode(err) == bot.ENOTFOUND {
			return nil
		}
		require.NoError(t, err)
		return m
	}

	// The process that asked died before asking: the resumed run asks.
	require.Nil(t, message())
	require.NoError(t, n.KeepApprovalRequested(ctx, ap))
	asked := message()
	require.NotNil(t, asked)
	require.Contains(t, asked.Text, "wants to run bash")
	require.Equal(t, "pending", asked.Approval.State)

	// Asked already: nothing changes.
	require.NoError(t, n.KeepApprovalRequested(ctx, ap))
	require.Equal(t, asked, message())

	// Decided: the outcome replaces the request, and a resumed run does
	// not ask over it.
	decided := ap
	decided.Status, decided.DecidedBy = bot.ApprovalApproved, "alice"
	require.NoError(t, n.ApprovalResolved(ctx, decided))
	outcome := message()
	require.Contains(t, outcome.Text, "approved by alice")
	require.NoError(t, n.KeepApprovalRequested(ctx, ap))
	require.Equal(t, outcome, message())
}
