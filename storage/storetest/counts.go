package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// testCounts checks the counts gauges read (queue depth, pending and dead
// outbox messages, a destination's waiting messages) against what the
// listings show, after each kind of change.
func testCounts(t *testing.T, open Opener) {
	h := newHarness(t, open)
	gh := bot.GitHubThread("Acme", "api", 7)
	other := bot.GitHubThread("beta", "web", 1)
	local := bot.LocalThread("t")
	threads := []bot.Thread{gh, other, local}

	// What the listings say.
	requireCounts := func(step string) {
		t.Helper()
		depth := 0
		for _, st := range []bot.WorkStatus{bot.StatusQueued, bot.StatusRunning} {
			depth += len(h.list(bot.WorkItemFilter{Status: st, Limit: 1000}))
		}
		require.Equal(t, depth, h.depth(), "%s: queue depth against queued and running work items", step)
		pending, dead := 0, 0
		waiting := map[string]int{}
		for _, th := range threads {
			msgs, err := h.s.ListOutbox(h.ctx, th.Key())
			require.NoError(t, err)
			for _, m := range msgs {
				if m.Pending() {
					pending++
					waiting[th.Destination()]++
				}
				if m.Dead {
					dead++
				}
			}
		}
		p, d := h.pending()
		require.Equal(t, pending, p, "%s: pending outbox messages", step)
		require.Equal(t, dead, d, "%s: dead outbox messages", step)
		for _, th := range threads {
			n, err := h.s.OutboxWaiting(h.ctx, th.Destination())
			require.NoError(t, err)
			require.Equal(t, waiting[th.Destination()], n, "%s: messages waiting for %s", step, th.Destination())
		}
	}
	requireCounts("empty")

	ev := h.event(gh, "@coder look")
	ev.SourceRef = "comment:1"
	req := routed(ev, "coder", epoch())
	req.Reaction = bot.ReactionSeen
	wi := h.ingest(req).WorkItem
	require.Equal(t, "github/acme", gh.Destination(), "a GitHub account's destination is its owner, in lower case")
	require.Equal(t, []string{wi.ID + "/reaction/eyes"}, h.due(epoch(), 10))
	h.submit(gh, "coder", "second")
	h.submit(local, "docs", "third")
	requireCounts("ingested")

	c := h.mustClaim("w1", epoch())
	requireCounts("claimed")
	h.finish(c.Job, at(time.Second), "done")
	requireCounts("finished")

	h.enqueue(statusMsg("s1", other, "working"))
	h.enqueue(statusMsg("s2", local, "working"))
	requireCounts("enqueued")
	require.NoError(t, h.markDelivered(wi.ID+"/reaction/eyes", 1, "r1", epoch(), epoch()))
	require.NoError(t, h.markFailed("s1", "gone", epoch(), true))
	requireCounts("delivered and given up")

	// A destination skipped costs nothing and hides nothing else.
	h.enqueue(statusMsg("s3", gh, "working"))
	got := h.due(at(time.Minute), 10)
	require.ElementsMatch(t, []string{"s2", "s3"}, got)
	msgs, err := h.s.Due(h.ctx, at(time.Minute), 10, func(dest string) bool { return dest == "github/acme" })
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, "s2", msgs[0].Key)

	h.reopen()
	requireCounts("reopened")
}
