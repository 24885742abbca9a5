package storetest

import (
	"testing"
	"time"

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
