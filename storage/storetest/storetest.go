package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/admin/ui"
	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/integrations/github"
)

// Store is every store interface the daemon uses: bot's, the agent
// runtime's conversations and transcripts, the audit log and approvals of
// the policy, GitHub's installations, and what replicas sharing a store
// coordinate through (notifications, leases), the stored routing rules and
// the admin UI's sessions.
// Installed packages and skill
// settings have a suite of their own (RunSkills).
type Store interface {
	bot.Store
	agents.ConversationStore
	agents.TranscriptStore
	policy.AuditStore
	policy.ApprovalStore
	github.InstallationStore
	bot.RuleStore
	ui.SessionStore
	Notify(ctx context.Context, topic, payload string) error
	Listen(ctx context.Context, fn func(topic, payload string)) error
	HoldLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, name, holder string) error
}

// Opener opens, or reopens, the store that lives in dir (its files, or a
// database named after it). The suite closes every store it opens.
// Subtests run in parallel, each in its own directory, so open is called
// concurrently.
type Opener func(t *testing.T, dir string) Store

// Run runs the conformance suite against the stores open makes.
func Run(t *testing.T, open Opener) {
	for _, g := range []struct {
		name string
		run  func(*testing.T, Opener)
	}{
		{"Ingest", testIngest},
		{"Dedup", testDedup},
		{"Queue", testQueue},
		{"Leases", testLeases},
		{"JobEnds", testJobEnds},
		{"WorkItems", testWorkItems},
		{"Reroute", testReroute},
		{"Ingress", testIngress},
		{"Deliveries", testDeliveries},
		{"Paging", testPaging},
		{"Outbox", testOutbox},
		{"Counts", testCounts},
		{"Retention", testRetention},
		{"RetentionRace", testRetentionRace},
		{"RetentionAuditInChunks", testRetentionAuditInChunks},
		{"Schedules", testSchedules},
		{"KeysAndTimes", testKeysAndTimes},
		{"Ledger", testLedger},
		{"Budgets", testBudgets},
		{"RunStates", testRunStates},
		{"Reopen", testReopen},
		{"Lifecycle", testLifecycle},
		{"Conversations", testConversations},
		{"Transcripts", testTranscripts},
		{"RecordsRefuseBadInput", testRecordsRefuseBadInput},
		{"Installations", testInstallations},
		{"Audit", testAudit},
		{"AuditPaging", testAuditPaging},
		{"Approvals", testApprovals},
		{"ApprovalsConcurrent", testApprovalsConcurrent},
		{"Notifications", testNotifications},
		{"ReplicaLeases", testReplicaLeases},
		{"Rules", testRules},
		{"RulesConcurrent", testRulesConcurrent},
		{"AdminSessions", testAdminSessions},
		{"AdminSessionsRefuseBadInput", testAdminSessionsRefuseBadInput},
	} {
		t.Run(g.name, func(t *testing.T) {
			// Stores spend their time waiting for fsync: groups overlap.
			t.Parallel()
			g.run(t, open)
		})
	}
}

// harness is one store in its own directory, with helpers that fail the test
// on unexpected errors.
type harness struct {
	t    *testing.T
	ctx  context.Context
	open Opener
	dir  string
	s    Store
	// n makes delivery ids unique within the test.
	n atomic.Int64
}

func newHarness(t *testing.T, open Opener) *harness {
	t.Helper()
	h := &harness{t: t, ctx: t.Context(), open: open, dir: t.TempDir()}
	h.s = open(t, h.dir)
	t.Cleanup(func() { require.NoError(t, h.s.Close()) })
	return h
}

// reopen closes the store and opens its directory again.
func (h *harness) reopen() {
	h.t.Helper()
	require.NoError(h.t, h.s.Close())
	h.s = h.open(h.t, h.dir)
}

// epoch is the suite's fixed clock origin; times are in UTC so they compare
// equal after a round trip through any store.
func epoch() time.Time { return time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC) }

func at(d time.Duration) time.Time { return epoch().Add(d) }

func (h *harness) event(thread bot.Thread, text string) bot.Event {
	return bot.Event{
		Source: thread.Source, Kind: bot.KindLocalMessage, DeliveryID: fmt.Sprintf("d-%d", h.n.Add(1)),
		Actor: "alice", Text: text, Thread: thread, ReceivedAt: epoch(),
		Raw: []byte(fmt.Sprintf(`{"text":%q}`, text)),
	}
}

func routed(ev bot.Event, agent string, now time.Time) bot.IngestRequest {
	return bot.IngestRequest{
		Event: ev, Route: &bot.Route{Agent: agent, Kind: bot.RouteMention, Reason: "mention @" + agent},
		Now: now, DedupUntil: now.Add(time.Hour),
	}
}

func ignored(ev bot.Event, code string, now time.Time) bot.IngestRequest {
	return bot.IngestRequest{
		Event: ev, Ignore: &bot.IngressReason{Code: code, Detail: "because " + code},
		Now: now, DedupUntil: now.Add(time.Hour),
	}
}

func (h *harness) ingest(req bot.IngestRequest) bot.IngestResult {
	h.t.Helper()
	res, err := h.s.Ingest(h.ctx, req)
	require.NoError(h.t, err)
	return res
}

// submit ingests a new routed event and returns its work item.
func (h *harness) submit(thread bot.Thread, agent, text string) *bot.WorkItem {
	h.t.Helper()
	res := h.ingest(routed(h.event(thread, text), agent, epoch()))
	require.False(h.t, res.Duplicate)
	require.NotNil(h.t, res.WorkItem)
	return res.WorkItem
}

func (h *harness) workItem(id string) *bot.WorkItem {
	h.t.Helper()
	wi, err := h.s.GetWorkItem(h.ctx, id)
	require.NoError(h.t, err)
	return wi
}

func claimReq(owner string, now time.Time) bot.ClaimRequest {
	return bot.ClaimRequest{Owner: owner, Now: now, Lease: time.Minute, MaxAttempts: 3}
}

func (h *harness) claim(req bot.ClaimRequest) bot.Claim {
	h.t.Helper()
	c, err := h.s.ClaimNext(h.ctx, req)
	require.NoError(h.t, err)
	return c
}

// mustClaim claims and requires a job.
func (h *harness) mustClaim(owner string, now time.Time) bot.Claim {
	h.t.Helper()
	c := h.claim(claimReq(owner, now))
	require.NotNil(h.t, c.Job, "expected a job to claim")
	return c
}

func (h *harness) requireNothingToClaim(now time.Time) {
	h.t.Helper()
	c := h.claim(claimReq("idle-worker", now))
	require.Nil(h.t, c.Job, "expected nothing claimable")
}

func (h *harness) finish(job *bot.Job, now time.Time, summary string) {
	h.t.Helper()
	require.NoError(h.t, h.s.FinishJob(h.ctx, bot.JobOutcome{
		JobID: job.ID, Owner: job.Owner, Now: now, Success: true, Summary: summary,
	}))
}

func (h *harness) depth() int {
	h.t.Helper()
	n, err := h.s.QueueDepth(h.ctx)
	require.NoError(h.t, err)
	return n
}

func (h *harness) list(f bot.WorkItemFilter) []bot.WorkItem {
	h.t.Helper()
	items, _, err := h.s.ListWorkItems(h.ctx, f)
	require.NoError(h.t, err)
	return items
}

func (h *harness) jobs(workItemID string) []bot.Job {
	h.t.Helper()
	jobs, err := h.s.ListJobs(h.ctx, workItemID)
	require.NoError(h.t, err)
	return jobs
}

func requireCode(t *testing.T, code string, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, bot.ErrorCode(err), "error %q", err)
}

func ids(items []bot.WorkItem) []string {
	out := make([]string, len(items))
	for i, wi := range items {
		out[i] = wi.ID
	}
	return out
}

func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}
