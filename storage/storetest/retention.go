package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// testRetention: a sweep removes payloads, finished records and delivered
// messages older than their retention, with what hangs on them, and leaves
// everything live or younger; a second sweep finds nothing.
func testRetention(t *testing.T, open Opener) {
	h := newHarness(t, open)
	day := 24 * time.Hour
	r := bot.Retention{Payloads: 2 * day, Records: 10 * day, Audit: 30 * day}
	now := at(20 * day)
	thread := func(name string) bot.Thread { return bot.LocalThread(name) }

	// Finished 15 days before now: gone, with its job, event and delivered
	// messages; a message of it still to be delivered stays.
	oldDone := h.submit(thread("old"), "coder", "old and done")
	c := h.mustClaim("w1", at(time.Minute))
	h.finish(c.Job, at(5*day), "done then")
	h.enqueue(bot.OutboxMessage{Key: oldDone.ID + "/status", Thread: thread("old"), WorkItemID: oldDone.ID, Kind: bot.OutboxStatus, Text: "done", CreatedAt: at(time.Minute), UpdatedAt: at(time.Minute)})
	require.NoError(t, h.markDelivered(oldDone.ID+"/status", 1, "m1", at(5*day), at(5*day)))
	h.enqueue(bot.OutboxMessage{Key: oldDone.ID + "/reply", Thread: thread("old"), WorkItemID: oldDone.ID, Kind: bot.OutboxReply, Text: "stuck", CreatedAt: at(5 * day), UpdatedAt: at(5 * day)})

	// Finished 5 days before now: it stays.
	recent := h.ingest(routed(h.event(thread("recent"), "recent"), "docs", at(12*day))).WorkItem
	c = h.mustClaim("w1", at(12*day))
	require.Equal(t, []string{recent.ID}, c.Job.WorkItemIDs)
	h.finish(c.Job, at(15*day), "done lately")
	// Made long ago but never finished: it stays, payload gone.
	live := h.submit(thread("live"), "coder", "still queued")

	oldIngress := h.ingest(ignored(h.event(thread("i"), "bot says"), bot.IgnoreBot, at(time.Hour))).Ingress
	newIngress := h.ingest(ignored(h.event(thread("i"), "bot again"), bot.IgnoreBot, at(19*day))).Ingress
	h.enqueue(bot.OutboxMessage{Key: "notice/old", Thread: thread("n"), Kind: bot.OutboxReply, Text: "told", CreatedAt: at(time.Hour), UpdatedAt: at(time.Hour)})
	require.NoError(t, h.markDelivered("notice/old", 1, "n1", at(time.Hour), at(time.Hour)))
	h.enqueue(bot.OutboxMessage{Key: "notice/dead", Thread: thread("n"), Kind: bot.OutboxReply, Text: "never", CreatedAt: at(time.Hour), UpdatedAt: at(time.Hour)})
	require.NoError(t, h.markFailed("notice/dead", "gone", at(time.Hour), true))
	h.enqueue(bot.OutboxMessage{Key: "notice/waiting", Thread: thread("n"), Kind: bot.OutboxReply, Text: "later", CreatedAt: at(time.Hour), UpdatedAt: at(time.Hour)})
	require.NoError(t, h.s.AppendAudit(h.ctx, at(-40*day), "deny", []byte(`{"old":true}`)))
	require.NoError(t, h.s.AppendAudit(h.ctx, at(day), "deny", []byte(`{"kept":true}`)))

	swept, err := h.s.Sweep(h.ctx, now, r)
	require.NoError(t, err)
	require.Equal(t, bot.Swept{Payloads: 5, WorkItems: 1, Jobs: 1, Dispatches: 1, Ingress: 1, Outbox: 2, Audit: 1}, swept)

	_, err = h.s.GetWorkItem(h.ctx, oldDone.ID)
	requireCode(t, bot.ENOTFOUND, err)
	_, err = h.s.GetEvent(h.ctx, oldDone.EventRef)
	requireCode(t, bot.ENOTFOUND, err)
	_, err = h.s.FindDelivery(h.ctx, bot.SourceLocal, oldDone.DeliveryID)
	requireCode(t, bot.ENOTFOUND, err)
	_, err = h.s.GetOutbox(h.ctx, oldDone.ID+"/status")
	requireCode(t, bot.ENOTFOUND, err)
	require.True(t, h.outbox(oldDone.ID+"/reply").Pending(), "a message still to be delivered stays")
	_, err = h.s.FindDelivery(h.ctx, bot.SourceLocal, oldIngress.DeliveryID)
	requireCode(t, bot.ENOTFOUND, err)
	res, err := h.s.FindDelivery(h.ctx, bot.SourceLocal, newIngress.DeliveryID)
	require.NoError(t, err)
	require.Equal(t, newIngress.ID, res.Ingress.ID)
	_, err = h.s.GetOutbox(h.ctx, "notice/old")
	requireCode(t, bot.ENOTFOUND, err)
	_, err = h.s.GetOutbox(h.ctx, "notice/dead")
	requireCode(t, bot.ENOTFOUND, err)
	require.True(t, h.outbox("notice/waiting").Pending())

	require.Equal(t, bot.StatusQueued, h.workItem(live.ID).Status)
	ev, err := h.s.GetEvent(h.ctx, live.EventRef)
	require.NoError(t, err)
	require.Empty(t, ev.Raw, "its payload is past its retention")
	require.Equal(t, "still queued", ev.Text, "what was decided from it stays")
	require.Equal(t, bot.StatusDone, h.workItem(recent.ID).Status)
	require.Len(t, h.jobs(recent.ID), 1)
	ev, err = h.s.GetEvent(h.ctx, recent.EventRef)
	require.NoError(t, err)
	require.Empty(t, ev.Raw)
	audit, _, err := h.s.ListAudit(h.ctx, time.Time{}, "", 10, "")
	require.NoError(t, err)
	require.Len(t, audit, 1)
	audit, _, err = h.s.ListAudit(h.ctx, time.Time{}, "deny", 10, "")
	require.NoError(t, err)
	require.Len(t, audit, 1, "the decision index keeps up")

	require.Equal(t, 1, h.depth(), "the live work item's dispatch")
	pending, dead := h.pending()
	require.Equal(t, 2, pending)
	require.Zero(t, dead)

	swept, err = h.s.Sweep(h.ctx, now, r)
	require.NoError(t, err)
	require.Zero(t, swept, "nothing more")
	h.reopen()
	require.Equal(t, bot.StatusQueued, h.workItem(live.ID).Status)
}

// testRetentionRace: a work item finished long ago that a person hands on
// to another agent while a sweep removes old records is either gone before
// the handoff (which then says not found) or queued again afterwards with
// its event: a sweep never removes one the handoff made live, which a
// worker would then claim without a record of it. On PostgreSQL the sweep
// and the handoffs run on different connections, as on two replicas.
func testRetentionRace(t *testing.T, open Opener) {
	h := newHarness(t, open)
	const n = 300
	var ids []string
	for i := range n {
		ids = append(ids, h.submit(bot.LocalThread(fmt.Sprint("t", i)), "coder", "fix it").ID)
	}
	for range n {
		c := h.mustClaim("w", epoch())
		h.finish(c.Job, at(time.Minute), "done")
	}
	day := 24 * time.Hour
	now := at(100 * day)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		handed   []string
		swept    bot.Swept
		sweepErr error
	)
	wg.Go(func() { swept, sweepErr = h.s.Sweep(h.ctx, now, bot.Retention{Records: 90 * day}) })
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				_, err := h.s.RerouteWorkItem(h.ctx, ids[i], bot.Hop{To: "docs", Reason: "again", At: now})
				if bot.ErrorCode(err) == bot.ENOTFOUND {
					continue
				}
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				handed = append(handed, ids[i])
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.NoError(t, sweepErr)
	require.Equal(t, n, len(handed)+swept.WorkItems, "each work item either handed on or swept")
	for _, id := range handed {
		wi := h.workItem(id)
		require.Equal(t, bot.StatusQueued, wi.Status)
		_, err := h.s.GetEvent(h.ctx, wi.EventRef)
		require.NoError(t, err, "the event of %s", id)
	}
	require.Equal(t, len(handed), h.depth())
}

// testRetentionAuditInChunks: more audit records than one sweep
// transaction takes all go, oldest first, and the younger one stays.
func testRetentionAuditInChunks(t *testing.T, open Opener) {
	h := newHarness(t, open)
	day := 24 * time.Hour
	const old = 1101 // more than two transactions of a sweep
	for i := range old {
		require.NoError(t, h.s.AppendAudit(h.ctx, at(time.Duration(i)*time.Second), "allow", []byte(`{"old":true}`)))
	}
	require.NoError(t, h.s.AppendAudit(h.ctx, at(39*day), "allow", []byte(`{"kept":true}`)))
	swept, err := h.s.Sweep(h.ctx, at(40*day), bot.Retention{Audit: 30 * day})
	require.NoError(t, err)
	require.Equal(t, bot.Swept{Audit: old}, swept)
	left, _, err := h.s.ListAudit(h.ctx, time.Time{}, "", 10, "")
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.JSONEq(t, `{"kept":true}`, string(left[0]))
}
