package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

func testSchedules(t *testing.T, open Opener) {
	h := newHarness(t, open)
	_, ok, err := h.s.LastFired(h.ctx, "nightly")
	require.NoError(t, err)
	require.False(t, ok)

	require.NoError(t, h.s.SetLastFired(h.ctx, "nightly", at(time.Hour)))
	require.NoError(t, h.s.SetLastFired(h.ctx, "hourly", at(2*time.Hour)))
	require.NoError(t, h.s.SetLastFired(h.ctx, "nightly", at(25*time.Hour)))
	for name, want := range map[string]time.Time{"nightly": at(25 * time.Hour), "hourly": at(2 * time.Hour)} {
		got, ok, err := h.s.LastFired(h.ctx, name)
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, want.Equal(got), "%s: got %s, want %s", name, got, want)
	}
}

// testReopen closes a store with work in every state and checks that the
// reopened store carries on where it stopped.
func testReopen(t *testing.T, open Opener) {
	h := newHarness(t, open)
	tt, tu, tv := bot.LocalThread("t"), bot.LocalThread("u"), bot.LocalThread("v")
	dup := h.event(tt, "dup")
	done := h.ingest(routed(dup, "coder", epoch())).WorkItem
	running := h.submit(tu, "coder", "running")
	waiting := h.submit(tu, "coder", "waiting")
	queued := h.submit(tv, "docs", "queued")
	ign := h.ingest(ignored(h.event(tt, "bot"), bot.IgnoreBot, epoch())).Ingress

	c1 := h.mustClaim("w1", epoch())
	require.Equal(t, []string{done.ID}, c1.Job.WorkItemIDs)
	h.finish(c1.Job, at(time.Second), "fixed")
	c2 := h.mustClaim("w1", at(time.Second))
	require.Equal(t, []string{running.ID, waiting.ID}, c2.Job.WorkItemIDs)

	h.enqueue(statusMsg("s", tt, "v1"))
	require.NoError(t, h.markDelivered("s", 1, "ts-1", epoch(), epoch()))
	h.enqueue(statusMsg("s", tt, "v2"))
	h.enqueue(statusMsg("r", tt, "reply"))
	require.NoError(t, h.s.SetLastFired(h.ctx, "nightly", at(time.Hour)))

	before := h.list(bot.WorkItemFilter{})
	beforeJobs := h.jobs(running.ID)
	beforeOutbox, err := h.s.ListOutbox(h.ctx, tt.Key())
	require.NoError(t, err)

	h.reopen()

	require.Equal(t, before, h.list(bot.WorkItemFilter{}))
	require.Equal(t, beforeJobs, h.jobs(running.ID))
	afterOutbox, err := h.s.ListOutbox(h.ctx, tt.Key())
	require.NoError(t, err)
	require.Equal(t, beforeOutbox, afterOutbox)
	require.Equal(t, []string{"s", "r"}, h.due(at(time.Second), 10))
	last, ok, err := h.s.LastFired(h.ctx, "nightly")
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, last.Equal(at(time.Hour)))
	in, _, err := h.s.ListIngress(h.ctx, bot.IngressFilter{})
	require.NoError(t, err)
	require.Equal(t, []bot.IngressRecord{*ign}, in)

	// Dedup keys survive.
	res := h.ingest(routed(dup, "coder", at(time.Minute)))
	require.True(t, res.Duplicate)
	require.Equal(t, done.ID, res.WorkItem.ID)

	// The running job still holds its thread and can be finished.
	require.Equal(t, 3, h.depth())
	c3 := h.mustClaim("w2", at(2*time.Second))
	require.Equal(t, []string{queued.ID}, c3.Job.WorkItemIDs)
	h.requireNothingToClaim(at(2 * time.Second))
	h.finish(c2.Job, at(3*time.Second), "ok")
	require.Equal(t, bot.StatusDone, h.workItem(waiting.ID).Status)

	// New records do not reuse ids.
	fresh := h.submit(tt, "coder", "fresh")
	for _, wi := range before {
		require.NotEqual(t, wi.ID, fresh.ID)
	}
	ev, err := h.s.GetEvent(h.ctx, done.EventRef)
	require.NoError(t, err)
	require.Equal(t, dup.Raw, ev.Raw)
}

func testLifecycle(t *testing.T, open Opener) {
	h := newHarness(t, open)
	require.NoError(t, h.s.Ping(h.ctx))
	require.NoError(t, h.s.Close())
	require.NoError(t, h.s.Close(), "Close is idempotent")
	require.Error(t, h.s.Ping(h.ctx))
	_, err := h.s.GetWorkItem(h.ctx, "wi_1")
	require.Error(t, err)
}
