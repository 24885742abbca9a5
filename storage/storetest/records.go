package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// The records the agent runtime, the policy and the GitHub integration keep
// beside the queue: conversations, transcripts, installations, the audit
// log and approvals.

func testConversations(t *testing.T, open Opener) {
	h := newHarness(t, open)
	ctx := h.ctx
	const thread, other = "github:acme/app#7", "slack:T1/C2/1700000000.000100"

	doc, err := h.s.LoadConversation(ctx, thread, "coder")
	require.NoError(t, err)
	require.Nil(t, doc, "nothing stored yet")
	n, err := h.s.ResetConversations(ctx, thread)
	require.NoError(t, err)
	require.Zero(t, n)

	require.NoError(t, h.s.SaveConversation(ctx, thread, "coder", []byte(`{"v":1}`)))
	require.NoError(t, h.s.SaveConversation(ctx, thread, "coder", []byte(`{"v":2}`)))
	require.NoError(t, h.s.SaveConversation(ctx, thread, "reviewer", []byte(`{"r":1}`)))
	require.NoError(t, h.s.SaveConversation(ctx, other, "coder", []byte(`{"o":1}`)))

	doc, err = h.s.LoadConversation(ctx, thread, "coder")
	require.NoError(t, err)
	require.Equal(t, `{"v":2}`, string(doc), "a save replaces, byte for byte")

	h.reopen()
	doc, err = h.s.LoadConversation(ctx, thread, "reviewer")
	require.NoError(t, err)
	require.Equal(t, `{"r":1}`, string(doc), "survives a restart")

	n, err = h.s.ResetConversations(ctx, thread)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for _, agent := range []string{"coder", "reviewer"} {
		doc, err = h.s.LoadConversation(ctx, thread, agent)
		require.NoError(t, err)
		require.Nil(t, doc)
	}
	doc, err = h.s.LoadConversation(ctx, other, "coder")
	require.NoError(t, err)
	require.Equal(t, `{"o":1}`, string(doc), "other threads keep theirs")

	require.NoError(t, h.s.SaveConversation(ctx, thread, "coder", []byte(`{"v":3}`)))
	doc, err = h.s.LoadConversation(ctx, thread, "coder")
	require.NoError(t, err)
	require.Equal(t, `{"v":3}`, string(doc), "the thread starts afresh after a reset")
}

func testTranscripts(t *testing.T, open Opener) {
	h := newHarness(t, open)
	ctx := h.ctx
	list, err := h.s.ListTranscripts(ctx, "job_1")
	require.NoError(t, err)
	require.Empty(t, list)

	// Callees finish, and are saved, before their callers; run ids do not
	// sort in that order.
	require.NoError(t, h.s.SaveTranscript(ctx, "job_1", "job_1.2", []byte(`"second callee"`)))
	require.NoError(t, h.s.SaveTranscript(ctx, "job_1", "job_1.10", []byte(`"first callee"`)))
	require.NoError(t, h.s.SaveTranscript(ctx, "job_1", "job_1", []byte(`"caller"`)))
	require.NoError(t, h.s.SaveTranscript(ctx, "job_2", "job_2", []byte(`"another job"`)))
	require.NoError(t, h.s.SaveTranscript(ctx, "job_1", "job_1.2", []byte(`"second callee, again"`)))

	list, err = h.s.ListTranscripts(ctx, "job_1")
	require.NoError(t, err)
	require.Equal(t, []string{`"second callee, again"`, `"first callee"`, `"caller"`}, docStrings(list))
	h.reopen()
	list, err = h.s.ListTranscripts(ctx, "job_2")
	require.NoError(t, err)
	require.Equal(t, []string{`"another job"`}, docStrings(list))
}

func testRecordsRefuseBadInput(t *testing.T, open Opener) {
	h := newHarness(t, open)
	ctx := h.ctx
	requireCode(t, bot.EINVALID, h.s.SaveConversation(ctx, "", "coder", []byte("{}")))
	requireCode(t, bot.EINVALID, h.s.SaveConversation(ctx, "local:t", "", []byte("{}")))
	_, err := h.s.LoadConversation(ctx, "local:t", "")
	requireCode(t, bot.EINVALID, err)
	_, err = h.s.ResetConversations(ctx, "")
	requireCode(t, bot.EINVALID, err)
	requireCode(t, bot.EINVALID, h.s.SaveTranscript(ctx, "job_1", "", []byte("{}")))
	_, err = h.s.ListTranscripts(ctx, "")
	requireCode(t, bot.EINVALID, err)

	requireCode(t, bot.EINVALID, h.s.AppendAudit(ctx, time.Now(), "", []byte(`{}`)))
	requireCode(t, bot.EINVALID, h.s.AppendAudit(ctx, time.Now(), "de\x00ny", []byte(`{}`)))
	requireCode(t, bot.EINVALID, h.s.AppendAudit(ctx, time.Now(), "deny", nil))
	_, _, err = h.s.ListAudit(ctx, time.Time{}, "de\x00ny", 0, "")
	requireCode(t, bot.EINVALID, err)
	_, _, err = h.s.ListAudit(ctx, time.Time{}, "", 0, "not-a-cursor")
	requireCode(t, bot.EINVALID, err)

	for name, err := range map[string]error{
		"zero id":        h.s.SaveInstallation(ctx, 0, "octo", false, nil, nil),
		"repo sans name": h.s.SaveInstallation(ctx, 1, "octo", false, []string{"octo"}, nil),
		"nested repo":    h.s.SaveInstallation(ctx, 1, "octo", false, nil, []string{"octo/a/b"}),
	} {
		requireCode(t, bot.EINVALID, err)
		_ = name
	}
	_, err = h.s.InstallationForRepo(ctx, "/hello")
	requireCode(t, bot.EINVALID, err)
	id, err := h.s.InstallationForRepo(ctx, "octo/a")
	require.NoError(t, err)
	require.Zero(t, id, "a refused save wrote nothing")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, h.s.SaveConversation(cancelled, "local:t", "coder", []byte("{}")), context.Canceled)

	require.NoError(t, h.s.Close())
	_, err = h.s.LoadConversation(ctx, "local:t", "coder")
	requireCode(t, bot.EUNAVAILABLE, err)
	requireCode(t, bot.EUNAVAILABLE, h.s.AppendAudit(ctx, time.Now(), "deny", []byte(`{}`)))
}

func testInstallations(t *testing.T, open Opener) {
	h := newHarness(t, open)
	ctx := h.ctx
	id, err := h.s.InstallationForRepo(ctx, "octo/hello")
	require.NoError(t, err)
	require.Zero(t, id, "a store that never saw an installation knows none")

	require.NoError(t, h.s.SaveInstallation(ctx, 1, "octo", false, []string{"octo/Hello", "octo/world"}, nil))
	require.NoError(t, h.s.SaveInstallation(ctx, 2, "acme", false, []string{"acme/api"}, nil))
	for _, tc := range []struct {
		repo string
		want int64
	}{
		{"octo/hello", 1}, // GitHub's names compare case-insensitively
		{"OCTO/HELLO", 1},
		{"octo/world", 1},
		{"acme/api", 2},
		{"acme/other", 0},
	} {
		id, err := h.s.InstallationForRepo(ctx, tc.repo)
		require.NoError(t, err, tc.repo)
		require.Equal(t, tc.want, id, tc.repo)
	}

	// installation_repositories.removed, then the repository moving to
	// another installation (an org transferring it).
	require.NoError(t, h.s.SaveInstallation(ctx, 1, "", false, nil, []string{"octo/world"}))
	require.NoError(t, h.s.SaveInstallation(ctx, 2, "acme", false, []string{"octo/hello"}, nil))
	id, err = h.s.InstallationForRepo(ctx, "octo/world")
	require.NoError(t, err)
	require.Zero(t, id)
	id, err = h.s.InstallationForRepo(ctx, "octo/hello")
	require.NoError(t, err)
	require.EqualValues(t, 2, id)

	// Deleting installation 1 must not take the repository it lost with
	// it; deleting it twice is fine (GitHub redelivers).
	require.NoError(t, h.s.DeleteInstallation(ctx, 1))
	require.NoError(t, h.s.DeleteInstallation(ctx, 1))
	id, err = h.s.InstallationForRepo(ctx, "octo/hello")
	require.NoError(t, err)
	require.EqualValues(t, 2, id)

	h.reopen()
	id, err = h.s.InstallationForRepo(ctx, "acme/api")
	require.NoError(t, err)
	require.EqualValues(t, 2, id, "survives a restart")

	require.NoError(t, h.s.DeleteInstallation(ctx, 2))
	for _, repo := range []string{"acme/api", "octo/hello"} {
		id, err = h.s.InstallationForRepo(ctx, repo)
		require.NoError(t, err)
		require.Zero(t, id, repo)
	}
}

func docStrings(docs [][]byte) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = string(d)
	}
	return out
}

func testAudit(t *testing.T, open Opener) {
	h := newHarness(t, open)
	ctx := h.ctx
	docs, next, err := h.s.ListAudit(ctx, time.Time{}, "", 0, "")
	require.NoError(t, err)
	require.Empty(t, docs, "a store that never saw a record lists none")
	require.Empty(t, next)

	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i, d := range []string{"deny", "allow", "deny", "approved", "deny"} {
		require.NoError(t, h.s.AppendAudit(ctx, base.Add(time.Duration(i)*time.Minute), d, fmt.Appendf(nil, `{"n":%d}`, i)))
	}
	// Two records in the same instant keep their append order.
	require.NoError(t, h.s.AppendAudit(ctx, base.Add(4*time.Minute), "deny", []byte(`{"n":5}`)))

	list := func(since time.Time, decision string, limit int) []string {
		t.Helper()
		docs, _, err := h.s.ListAudit(ctx, since, decision, limit, "")
		require.NoError(t, err)
		return docStrings(docs)
	}
	require.Equal(t, []string{`{"n":5}`, `{"n":4}`, `{"n":3}`, `{"n":2}`, `{"n":1}`, `{"n":0}`}, list(time.Time{}, "", 0))
	require.Equal(t, []string{`{"n":5}`, `{"n":4}`, `{"n":2}`, `{"n":0}`}, list(time.Time{}, "deny", 0))
	require.Equal(t, []string{`{"n":5}`, `{"n":4}`, `{"n":2}`}, list(base.Add(2*time.Minute), "deny", 0), "since is inclusive")
	require.Equal(t, []string{`{"n":5}`, `{"n":4}`}, list(base.Add(time.Minute), "", 2))
	require.Empty(t, list(time.Time{}, "expired", 0))

	h.reopen()
	require.Len(t, list(time.Time{}, "", 0), 6, "the log survives a restart")
}

// Paging through the audit log while records are appended skips and repeats
// none of those that were there, with or without a decision filter.
func testAuditPaging(t *testing.T, open Opener) {
	h := newHarness(t, open)
	ctx := h.ctx
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const before, during = 260, 60
	decision := func(i int) string { return []string{"deny", "allow", "needs_approval"}[i%3] }
	for i := range before {
		require.NoError(t, h.s.AppendAudit(ctx, base.Add(time.Duration(i)*time.Millisecond), decision(i), fmt.Appendf(nil, `{"n":%d}`, i)))
	}
	done := make(chan error, 1)
	go func() {
		var err error
		for i := before; i < before+during && err == nil; i++ {
			err = h.s.AppendAudit(ctx, base.Add(time.Duration(i)*time.Millisecond), decision(i), fmt.Appendf(nil, `{"n":%d}`, i))
		}
		done <- err
	}()
	pageAll := func(decision string, limit int) []string {
		t.Helper()
		var all []string
		cursor := ""
		for {
			docs, next, err := h.s.ListAudit(ctx, time.Time{}, decision, limit, cursor)
			require.NoError(t, err)
			if next != "" {
				require.Len(t, docs, limit)
			}
			all = append(all, docStrings(docs)...)
			if next == "" {
				return all
			}
			cursor = next
		}
	}
	for _, tc := range []struct {
		decision string
		limit    int
	}{{"", 29}, {"deny", 13}, {"allow", 1000}} {
		got := pageAll(tc.decision, tc.limit)
		seen := map[string]bool{}
		last := before + during
		for _, doc := range got {
			require.False(t, seen[doc], "%s twice", doc)
			seen[doc] = true
			var n int
			_, err := fmt.Sscanf(doc, `{"n":%d}`, &n)
			require.NoError(t, err)
			require.Less(t, n, last, "newest first")
			last = n
		}
		for i := range before {
			if tc.decision == "" || decision(i) == tc.decision {
				require.True(t, seen[fmt.Sprintf(`{"n":%d}`, i)], "record %d skipped (%q)", i, tc.decision)
			}
		}
	}
	require.NoError(t, <-done)
}

func approval(id, key string, created time.Time) bot.Approval {
	return bot.Approval{
		ID: id, Status: bot.ApprovalPending, Key: key, Tool: "bash", Arguments: `{"command":"kubectl apply"}`,
		Reason: "deploys need a person", Agent: "ops", Profile: "deployer", SessionKey: "slack:T1/C1/1700000000.000100",
		WorkItemID: "wi_7", JobID: "job_3", CorrelationID: "job_3", Approvers: []string{"U1", "U2"},
		CreatedAt: created, ExpiresAt: created.Add(15 * time.Minute),
	}
}

func testApprovals(t *testing.T, open Opener) {
	h := newHarness(t, open)
	ctx := h.ctx
	list, err := h.s.ListApprovals(ctx, true, 0)
	require.NoError(t, err)
	require.Empty(t, list)
	_, err = h.s.GetApproval(ctx, "ap_nope")
	requireCode(t, bot.ENOTFOUND, err)

	a := approval("ap_1", "wi_7/ops/bash/aa", epoch())
	_, err = h.s.FindApproval(ctx, a.Key)
	requireCode(t, bot.ENOTFOUND, err)
	got, created, err := h.s.CreateApproval(ctx, a)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, a, got)
	// A run resumed after a crash finds the approval its call waits on.
	found, err := h.s.FindApproval(ctx, a.Key)
	require.NoError(t, err)
	require.Equal(t, a, found)

	// The run that resumes the job after a restart asks with the same key:
	// it gets the pending approval, not a new one.
	h.reopen()
	again := approval("ap_2", a.Key, at(time.Minute))
	got, created, err = h.s.CreateApproval(ctx, again)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, a, got)
	// Another call (another key), and one without a key, are new.
	b := approval("ap_3", "wi_7/ops/bash/bb", at(2*time.Minute))
	_, created, err = h.s.CreateApproval(ctx, b)
	require.NoError(t, err)
	require.True(t, created)
	c := approval("ap_4", "", at(3*time.Minute))
	_, created, err = h.s.CreateApproval(ctx, c)
	require.NoError(t, err)
	require.True(t, created)
	_, created, err = h.s.CreateApproval(ctx, approval("ap_5", "", at(4*time.Minute)))
	require.NoError(t, err)
	require.True(t, created, "no key never matches")

	list, err = h.s.ListApprovals(ctx, false, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"ap_1", "ap_3", "ap_4", "ap_5"}, approvalIDs(list), "pending, oldest first")

	// A person decides: once.
	decided, err := h.s.DecideApproval(ctx, "ap_1", bot.ApprovalOutcome{Status: bot.ApprovalApproved, By: "U1", At: at(5 * time.Minute)})
	require.NoError(t, err)
	require.Equal(t, bot.ApprovalApproved, decided.Status)
	require.Equal(t, "U1", decided.DecidedBy)
	require.True(t, at(5*time.Minute).Equal(*decided.DecidedAt))
	require.False(t, decided.Taken)
	stale, err := h.s.DecideApproval(ctx, "ap_1", bot.ApprovalOutcome{Status: bot.ApprovalRejected, By: "U2", At: at(6 * time.Minute)})
	requireCode(t, bot.ECONFLICT, err)
	require.Equal(t, bot.ApprovalApproved, stale.Status, "the conflict says what was decided")
	_, err = h.s.DecideApproval(ctx, "ap_nope", bot.ApprovalOutcome{Status: bot.ApprovalApproved, By: "U1", At: at(6 * time.Minute)})
	requireCode(t, bot.ENOTFOUND, err)
	_, err = h.s.DecideApproval(ctx, "ap_3", bot.ApprovalOutcome{Status: bot.ApprovalPending, At: at(6 * time.Minute)})
	requireCode(t, bot.EINVALID, err)

	// Decided while no run waited (the daemon was down): the resumed run
	// asking with the key takes that decision, and only it does.
	got, created, err = h.s.CreateApproval(ctx, approval("ap_6", a.Key, at(7*time.Minute)))
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, "ap_1", got.ID)
	require.Equal(t, bot.ApprovalApproved, got.Status)
	found, err = h.s.FindApproval(ctx, a.Key)
	require.NoError(t, err)
	require.Equal(t, bot.ApprovalApproved, found.Status, "a decision no run took is found")
	require.NoError(t, h.s.TakeApproval(ctx, "ap_1"))
	_, err = h.s.FindApproval(ctx, a.Key)
	requireCode(t, bot.ENOTFOUND, err) // a taken decision is not found again
	_, err = h.s.FindApproval(ctx, "")
	requireCode(t, bot.ENOTFOUND, err) // no key never matches
	require.NoError(t, h.s.TakeApproval(ctx, "ap_1"), "taking twice is harmless")
	requireCode(t, bot.ECONFLICT, h.s.TakeApproval(ctx, "ap_3"))
	requireCode(t, bot.ENOTFOUND, h.s.TakeApproval(ctx, "ap_nope"))
	got, created, err = h.s.CreateApproval(ctx, approval("ap_7", a.Key, at(8*time.Minute)))
	require.NoError(t, err)
	require.True(t, created, "a taken decision is not given out again")
	require.Equal(t, "ap_7", got.ID)

	// Ended by the run itself: taken at once.
	ended, err := h.s.DecideApproval(ctx, "ap_3", bot.ApprovalOutcome{Status: bot.ApprovalExpired, At: at(9 * time.Minute), Taken: true})
	require.NoError(t, err)
	require.True(t, ended.Taken)
	require.Empty(t, ended.DecidedBy)

	list, err = h.s.ListApprovals(ctx, true, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"ap_4", "ap_5", "ap_7", "ap_3", "ap_1"}, approvalIDs(list), "pending oldest first, then decided newest first")
	list, err = h.s.ListApprovals(ctx, true, 1)
	require.NoError(t, err)
	require.Equal(t, []string{"ap_4", "ap_5", "ap_7", "ap_3"}, approvalIDs(list), "limit bounds the decided ones")
	h.reopen()
	got, err = h.s.GetApproval(ctx, "ap_1")
	require.NoError(t, err)
	require.True(t, got.Taken)
	require.Equal(t, bot.ApprovalApproved, got.Status)
}

func approvalIDs(list []bot.Approval) []string {
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.ID
	}
	return out
}

// testApprovalsConcurrent decides one approval from many places at once, as
// replicas do when two people click: exactly one decision wins.
func testApprovalsConcurrent(t *testing.T, open Opener) {
	h := newHarness(t, open)
	_, _, err := h.s.CreateApproval(h.ctx, approval("ap_1", "k", epoch()))
	require.NoError(t, err)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins []string
	)
	for i := range 8 {
		wg.Go(func() {
			by := fmt.Sprintf("U%d", i)
			_, err := h.s.DecideApproval(h.ctx, "ap_1", bot.ApprovalOutcome{Status: bot.ApprovalApproved, By: by, At: at(time.Minute)})
			if err == nil {
				mu.Lock()
				wins = append(wins, by)
				mu.Unlock()
				return
			}
			require.Equal(t, bot.ECONFLICT, bot.ErrorCode(err), "error %v", err)
		})
	}
	wg.Wait()
	require.Len(t, wins, 1)
	got, err := h.s.GetApproval(h.ctx, "ap_1")
	require.NoError(t, err)
	require.Equal(t, wins[0], got.DecidedBy)
}

// testNotifications: what one process tells the store reaches its
// listeners.
func testNotifications(t *testing.T, open Opener) {
	h := newHarness(t, open)
	ctx, cancel := context.WithCancel(h.ctx)
	got := make(chan [2]string, 16)
	done := make(chan error, 1)
	go func() {
		done <- h.s.Listen(ctx, func(topic, payload string) {
			if topic != bot.TopicResync {
				got <- [2]string{topic, payload}
			}
		})
	}()
	// The listener may need a moment to start: notify until it hears.
	deadline := time.After(20 * time.Second)
	var first [2]string
	for first == ([2]string{}) {
		require.NoError(t, h.s.Notify(h.ctx, bot.TopicApproval, "ap_1"))
		select {
		case first = <-got:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatal("no notification arrived")
		}
	}
	require.Equal(t, [2]string{bot.TopicApproval, "ap_1"}, first)
	requireCode(t, bot.EINVALID, h.s.Notify(h.ctx, "", "x"))
	require.NoError(t, h.s.Notify(h.ctx, bot.TopicConfig, "replica-b"))
	for {
		select {
		case n := <-got:
			if n == ([2]string{bot.TopicConfig, "replica-b"}) {
				cancel()
				require.NoError(t, <-done, "Listen ends without an error when its context does")
				return
			}
		case <-deadline:
			t.Fatal("the second notification did not arrive")
		}
	}
}

// testReplicaLeases: one holder at a time, taken over once it expires.
func testReplicaLeases(t *testing.T, open Opener) {
	h := newHarness(t, open)
	hold := func(holder string, now time.Time) bool {
		t.Helper()
		ok, err := h.s.HoldLease(h.ctx, "slack-socket", holder, now, 30*time.Second)
		require.NoError(t, err)
		return ok
	}
	require.True(t, hold("a", epoch()))
	require.False(t, hold("b", at(time.Second)), "held by a")
	require.True(t, hold("a", at(20*time.Second)), "a renews")
	require.False(t, hold("b", at(45*time.Second)), "a's renewal holds until 50s")
	require.True(t, hold("b", at(51*time.Second)), "expired: b takes over")
	require.False(t, hold("a", at(52*time.Second)))
	require.NoError(t, h.s.ReleaseLease(h.ctx, "slack-socket", "a"), "releasing what one does not hold changes nothing")
	require.False(t, hold("a", at(53*time.Second)))
	require.NoError(t, h.s.ReleaseLease(h.ctx, "slack-socket", "b"))
	require.True(t, hold("a", at(54*time.Second)), "released: free at once")
	ok, err := h.s.HoldLease(h.ctx, "other", "b", at(54*time.Second), 30*time.Second)
	require.NoError(t, err)
	require.True(t, ok, "leases are per name")
	_, err = h.s.HoldLease(h.ctx, "", "b", epoch(), time.Second)
	requireCode(t, bot.EINVALID, err)
}
