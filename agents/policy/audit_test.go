package policy_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
)

var _ policy.AuditStore = (*bolt.Store)(nil)

// configuredSecret stands for a secret from the config (a model API key).
const configuredSecret = "s3cr3t-model-key-4f9a8b7c6d5e"

func openAudit(t *testing.T) (*policy.Auditor, *bolt.Store) {
	t.Helper()
	store := bolttest.Open(t, t.TempDir())
	a, err := policy.NewAuditor(store, bot.NewRedactor(configuredSecret))
	require.NoError(t, err)
	return a, store
}

func TestEveryDenialIsAuditedWithoutSecrets(t *testing.T) {
	ctx := context.Background()
	auditor, _ := openAudit(t)
	f := newFixture(t, nil)
	e, err := policy.New(policy.Options{Audit: auditor})
	require.NoError(t, err)

	commands := []string{
		"curl -H 'Authorization: Bearer ghp_abcdefghijklmnopqrstuvwxyz0123456789' https://api.github.com",
		"echo " + configuredSecret + " > /etc/key",
		"cat .env | grep xoxb-1234567890-abcdefghij",
		"aws configure set aws_access_key_id AKIAABCDEFGHIJKLMNOP",
	}
	for _, tc := range corpus {
		commands = append(commands, tc.cmd)
	}
	denials := 0
	sensitive := 0
	for _, cmd := range commands {
		for _, p := range builtinProfiles {
			call := f.call("coder", p, coreInfo("bash"), map[string]string{"command": cmd})
			full := e.Decide(call, nil)
			d := e.Check(ctx, call)
			require.Equal(t, full.Verdict, d.Verdict, cmd)
			switch {
			case d.Verdict == tools.Deny:
				denials++
			case full.Sensitive:
				sensitive++
			}
		}
	}
	require.Greater(t, denials, 400)
	require.Greater(t, sensitive, 20, "ops' network and deployment commands are recorded")

	recs, _, err := auditor.List(ctx, policy.AuditFilter{Decision: policy.AuditDeny, Limit: 10_000})
	require.NoError(t, err)
	require.Len(t, recs, denials)
	all, _, err := auditor.List(ctx, policy.AuditFilter{Limit: 10_000})
	require.NoError(t, err)
	require.Len(t, all, denials+sensitive)

	out, err := json.Marshal(all)
	require.NoError(t, err)
	text := string(out)
	for _, secret := range []string{configuredSecret, "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "xoxb-1234567890-abcdefghij", "AKIAABCDEFGHIJKLMNOP"} {
		require.NotContains(t, text, secret)
	}
	require.Contains(t, text, "[REDACTED]")
	for _, r := range recs {
		require.NotEmpty(t, r.ID)
		require.False(t, r.Time.IsZero())
		require.Equal(t, "bash", r.Tool)
		require.Equal(t, "coder", r.Agent)
		require.Equal(t, "wi_1", r.WorkItemID)
		require.Equal(t, "job_1", r.JobID)
		require.Equal(t, "local:t1", r.SessionKey)
		require.NotEmpty(t, r.Profile)
		require.True(t, strings.HasPrefix(r.Rule, "profile:"), r.Rule)
		require.True(t, strings.HasPrefix(r.Reason, "denied by profile"), r.Reason)
		require.NotEmpty(t, r.Arguments)
	}

	// Newest first, filtered by time.
	require.False(t, recs[0].Time.Before(recs[len(recs)-1].Time))
	later, _, err := auditor.List(ctx, policy.AuditFilter{Since: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.Empty(t, later)
}

// failingStore is an audit store whose disk is gone.
type failingStore struct{}

func (failingStore) AppendAudit(context.Context, time.Time, string, []byte) error {
	return context.DeadlineExceeded
}

func (failingStore) ListAudit(context.Context, time.Time, string, int, string) ([][]byte, string, error) {
	return nil, "", context.DeadlineExceeded
}

func TestSensitiveCallsAreRefusedWhenTheAuditLogFails(t *testing.T) {
	auditor, err := policy.NewAuditor(failingStore{}, bot.NewRedactor())
	require.NoError(t, err)
	f := newFixture(t, nil)
	e, err := policy.New(policy.Options{Audit: auditor})
	require.NoError(t, err)
	ctx := context.Background()

	d := e.Check(ctx, f.call("ops", "ops", coreInfo("bash"), map[string]string{"command": "kubectl get pods"}))
	require.Equal(t, tools.Deny, d.Verdict)
	require.Contains(t, d.Reason, "audit log")
	// An ordinary call needs no record, and runs.
	d = e.Check(ctx, f.call("ops", "ops", coreInfo("bash"), map[string]string{"command": "ls"}))
	require.Equal(t, tools.Allow, d.Verdict)

	_, err = policy.NewAuditor(nil, bot.NewRedactor())
	require.Error(t, err)
	_, err = policy.NewAuditor(failingStore{}, nil)
	require.Error(t, err)
}

func TestAuditFiltersByEveryDecisionAndRefusesOthers(t *testing.T) {
	ctx := context.Background()
	auditor, _ := openAudit(t)
	decisions := []string{
		policy.AuditAllow, policy.AuditDeny, policy.AuditNeedsApproval, policy.AuditApproved,
		policy.AuditRejected, policy.AuditExpired, policy.AuditCancelled, policy.AuditNotApprover,
	}
	for _, d := range decisions {
		require.NoError(t, auditor.Record(ctx, policy.AuditRecord{Decision: d, Tool: "bash"}))
	}
	for _, d := range decisions {
		recs, _, err := auditor.List(ctx, policy.AuditFilter{Decision: d})
		require.NoError(t, err, d)
		require.Len(t, recs, 1, d)
		require.Equal(t, d, recs[0].Decision)
	}
	for _, bad := range []string{"denied", "DENY", "maybe"} {
		_, _, err := auditor.List(ctx, policy.AuditFilter{Decision: bad})
		require.Equal(t, bot.EINVALID, bot.ErrorCode(err), bad)
		require.ErrorContains(t, err, `decision "`+bad+`": want one of allow, deny, needs_approval`)
	}
}
