package daemon

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/integrations/github"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
)

// A GitHub comment decides an approval as the commenter's login, only in
// the thread the approval was asked in.
func TestGitHubCommentsDecideAsTheCommenter(t *testing.T) {
	profiles := map[string]policy.ProfileConfig{
		"deployer": {Extends: "ops", Approval: []string{"bash"}, Approvers: []string{"octocat"}},
	}
	engine, err := policy.New(policy.Options{Profiles: profiles})
	require.NoError(t, err)
	approvals, err := policy.NewApprovals(policy.ApprovalOptions{Store: bolttest.Open(t, t.TempDir()), Approvers: engine, Timeout: time.Minute})
	require.NoError(t, err)
	d := &Daemon{approvals: approvals}
	g := githubApprovals{d}

	thread := bot.GitHubThread("octo", "hello", 7)
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

	ctx := context.Background()
	err = g.DecideApproval(ctx, github.ApprovalComment{Approve: true, ApprovalID: id, Login: "octocat", Thread: bot.GitHubThread("octo", "other", 1)})
	require.Equal(t, bot.EFORBIDDEN, bot.ErrorCode(err))
	require.ErrorContains(t, err, "was not asked in this thread")
	err = g.DecideApproval(ctx, github.ApprovalComment{Approve: true, ApprovalID: id, Login: "mallory", Thread: thread})
	require.Equal(t, bot.EFORBIDDEN, bot.ErrorCode(err))
	err = g.DecideApproval(ctx, github.ApprovalComment{Approve: true, ApprovalID: "ap_nope", Login: "octocat", Thread: thread})
	require.Equal(t, bot.ENOTFOUND, bot.ErrorCode(err))

	require.NoError(t, g.DecideApproval(ctx, github.ApprovalComment{Approve: true, ApprovalID: id, Login: "OctoCat", Thread: thread}))
	require.True(t, <-result)
	got, err := approvals.Get(ctx, id)
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
