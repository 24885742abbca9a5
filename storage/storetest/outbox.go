package storetest

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

func statusMsg(key string, thread bot.Thread, text string) bot.OutboxMessage {
	return bot.OutboxMessage{
		Key: key, Thread: thread, WorkItemID: "wi_1", Kind: bot.OutboxStatus, Text: text,
		Status:    &bot.StatusView{WorkItemID: "wi_1", Agent: "coder", State: "running", Activity: text, Started: epoch(), Updated: epoch()},
		CreatedAt: epoch(), UpdatedAt: epoch(),
	}
}

func (h *harness) enqueue(m bot.OutboxMessage) bot.OutboxMessage {
	h.t.Helper()
	out, err := h.s.Enqueue(h.ctx, m)
	require.NoError(h.t, err)
	return out
}

func (h *harness) outbox(key string) *bot.OutboxMessage {
	h.t.Helper()
	m, err := h.s.GetOutbox(h.ctx, key)
	require.NoError(h.t, err)
	return m
}

func (h *harness) due(now time.Time, limit int) []string {
	h.t.Helper()
	msgs, err := h.s.Due(h.ctx, now, limit, nil)
	require.NoError(h.t, err)
	keys := make([]string, len(msgs))
	for i, m := range msgs {
		require.True(h.t, m.Pending())
		keys[i] = m.Key
	}
	return keys
}

// dueBy is due's keys by destination.
func (h *harness) dueBy(now time.Time, limit int) map[string][]string {
	h.t.Helper()
	msgs, err := h.s.Due(h.ctx, now, limit, nil)
	require.NoError(h.t, err)
	out := map[string][]string{}
	for _, m := range msgs {
		require.True(h.t, m.Pending())
		dest := m.Thread.Destination()
		out[dest] = append(out[dest], m.Key)
	}
	return out
}

// markDelivered records that version of key is shown as remoteID.
func (h *harness) markDelivered(key string, version int, remoteID string, now, next time.Time) error {
	return h.s.Record(h.ctx, []bot.DeliveryOutcome{{Key: key, Delivered: true, Version: version, RemoteID: remoteID, At: now, Next: next}})
}

// markFailed records a failed attempt of key.
func (h *harness) markFailed(key, errText string, next time.Time, dead bool) error {
	return h.s.Record(h.ctx, []bot.DeliveryOutcome{{Key: key, Error: errText, Dead: dead, At: next, Next: next}})
}

func (h *harness) pending() (int, int) {
	h.t.Helper()
	p, d, err := h.s.OutboxPending(h.ctx)
	require.NoError(h.t, err)
	return p, d
}

func testOutbox(t *testing.T, open Opener) {
	th := bot.SlackThread("T1", "C1", "171.1")

	t.Run("enqueue creates version 1 and assigns seq", func(t *testing.T) {
		h := newHarness(t, open)
		a := h.enqueue(statusMsg("wi_1/status", th, "queued"))
		require.Equal(t, 1, a.Version)
		require.Zero(t, a.DeliveredVersion)
		require.NotZero(t, a.Seq)
		require.True(t, a.Pending())
		require.Equal(t, "queued", a.Text)
		require.Equal(t, "queued", a.Status.Activity)
		require.Equal(t, a, *h.outbox("wi_1/status"))

		b := h.enqueue(bot.OutboxMessage{Key: "wi_1/eyes", Thread: th, Kind: bot.OutboxReaction, Reaction: bot.ReactionSeen, Target: "171.1"})
		require.Greater(t, b.Seq, a.Seq)
		require.Equal(t, bot.ReactionSeen, b.Reaction)
		require.Equal(t, "171.1", b.Target)
		require.Equal(t, []string{a.Key, b.Key}, h.due(epoch(), 10))
		p, d := h.pending()
		require.Equal(t, 2, p)
		require.Zero(t, d)
	})

	t.Run("a next attempt beyond what nanoseconds hold waits, one before 1970 is due", func(t *testing.T) {
		// A platform that asks for a wait of centuries (a rate limit
		// reset in the year 5000) is waited for, not taken as due now.
		h := newHarness(t, open)
		far := bot.OutboxMessage{Key: "far", Thread: th, Kind: bot.OutboxReply, Text: "x", NextAttemptAt: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}
		farther := far
		farther.Key, farther.NextAttemptAt = "farther", time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
		old := far
		old.Key, old.NextAttemptAt = "old", time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
		h.enqueue(far)
		h.enqueue(farther)
		h.enqueue(old)
		require.Equal(t, []string{"old"}, h.due(epoch(), 10))
		require.Equal(t, []string{"old"}, h.due(time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC), 10))
	})

	t.Run("enqueue of a known key edits it in place", func(t *testing.T) {
		h := newHarness(t, open)
		first := h.enqueue(statusMsg("k", th, "queued"))
		h.enqueue(statusMsg("other", th, "x"))
		second := h.enqueue(statusMsg("k", th, "running"))
		require.Equal(t, 2, second.Version)
		require.Equal(t, first.Seq, second.Seq)
		require.Equal(t, "running", second.Text)
		require.Equal(t, "running", second.Status.Activity)
		require.True(t, second.CreatedAt.Equal(first.CreatedAt))
		require.Equal(t, []string{"k", "other"}, h.due(epoch(), 10), "seq order is kept")
		p, _ := h.pending()
		require.Equal(t, 2, p)
	})

	t.Run("due respects NextAttemptAt, seq order and limit", func(t *testing.T) {
		h := newHarness(t, open)
		for _, k := range []string{"a", "b", "c", "d"} {
			m := statusMsg(k, th, k)
			m.WorkItemID = "wi_" + k // unrelated messages: none waits for another
			if k == "b" {
				m.NextAttemptAt = at(time.Minute)
			}
			h.enqueue(m)
		}
		require.Equal(t, []string{"a", "c", "d"}, h.due(epoch(), 10))
		require.Equal(t, []string{"a", "c"}, h.due(epoch(), 2))
		require.Equal(t, []string{"a", "b", "c", "d"}, h.due(at(time.Minute), 10))
	})

	t.Run("a work item's messages go out in order", func(t *testing.T) {
		h := newHarness(t, open)
		msg := func(key, wi string, kind bot.OutboxKind) bot.OutboxMessage {
			return bot.OutboxMessage{Key: key, Thread: th, WorkItemID: wi, Kind: kind, Text: key, Reaction: "eyes", Target: "171.1"}
		}
		h.enqueue(msg("wi_1/reaction/eyes", "wi_1", bot.OutboxReaction))
		h.enqueue(msg("wi_1/status", "wi_1", bot.OutboxStatus))
		h.enqueue(msg("wi_2/status", "wi_2", bot.OutboxStatus))
		h.enqueue(msg("wi_1/reply", "wi_1", bot.OutboxReply))
		h.enqueue(bot.OutboxMessage{Key: "note", Thread: th, Kind: bot.OutboxReply, Text: "no work item"})
		require.Equal(t, []string{"wi_1/reaction/eyes", "wi_1/status", "wi_2/status", "wi_1/reply", "note"}, h.due(epoch(), 10),
			"due messages come in the order they were first enqueued")

		// The reaction failed and waits for its retry: the rest of its work
		// item waits with it, other messages do not.
		require.NoError(t, h.markFailed("wi_1/reaction/eyes", "timeout", at(time.Second), false))
		require.Equal(t, []string{"wi_2/status", "note"}, h.due(epoch(), 10))
		require.Equal(t, []string{"wi_1/reaction/eyes", "wi_1/status", "wi_2/status", "wi_1/reply", "note"}, h.due(at(time.Second), 10))

		// A status edit waiting out its interval holds back the reply that
		// follows it; an edit keeps the message's place.
		require.NoError(t, h.markDelivered("wi_1/reaction/eyes", 1, "r", at(time.Second), at(time.Second)))
		require.NoError(t, h.markDelivered("wi_1/status", 1, "ts-1", at(time.Second), at(2*time.Second)))
		h.enqueue(msg("wi_1/status", "wi_1", bot.OutboxStatus))
		require.Equal(t, []string{"wi_2/status", "note"}, h.due(at(time.Second), 10))
		require.Equal(t, []string{"wi_1/status", "wi_2/status", "wi_1/reply", "note"}, h.due(at(2*time.Second), 10))

		// A dead message holds nothing back.
		require.NoError(t, h.markFailed("wi_1/status", "gone", at(time.Hour), true))
		require.Equal(t, []string{"wi_2/status", "wi_1/reply", "note"}, h.due(at(2*time.Second), 10))
	})

	t.Run("due finds the due messages among many waiting ones", func(t *testing.T) {
		h := newHarness(t, open)
		threads := []bot.Thread{th, bot.GitHubThread("acme", "api", 1), bot.LocalThread("console")}
		msg := func(key, wi string, thread bot.Thread, next time.Time) bot.OutboxMessage {
			m := statusMsg(key, thread, key)
			m.WorkItemID, m.Status.WorkItemID, m.NextAttemptAt = wi, wi, next
			return m
		}
		// 300 status edits of as many work items wait out their edit
		// interval; every 30th is due now. Each of the ten due ones has a
		// reply after it, and so do five waiting ones, whose replies wait
		// behind them.
		var msgs []bot.OutboxMessage
		for i := range 300 {
			key, wi := fmt.Sprintf("wi_%d/status", i), fmt.Sprintf("wi_%d", i)
			next := at(time.Second)
			if i%30 == 7 {
				next = time.Time{}
			}
			msgs = append(msgs, msg(key, wi, threads[i%3], next))
		}
		for i := 7; i < 300; i += 30 {
			msgs = append(msgs, msg(fmt.Sprintf("wi_%d/reply", i), fmt.Sprintf("wi_%d", i), threads[i%3], time.Time{}))
		}
		for i := 10; i < 300; i += 60 {
			msgs = append(msgs, msg(fmt.Sprintf("wi_%d/reply", i), fmt.Sprintf("wi_%d", i), threads[i%3], time.Time{}))
		}
		require.NoError(t, h.s.EnqueueAll(h.ctx, msgs))
		// want is what is due at now, in seq order per destination: every
		// message not after now and not behind a message of its work item
		// that is pending and not due, among those pending.
		want := func(now time.Time, limit int, gone ...string) map[string][]string {
			out := map[string][]string{}
			waiting := map[string]bool{}
			for _, m := range msgs {
				dest := m.Thread.Destination()
				stored := h.outbox(m.Key)
				switch {
				case !stored.Pending(), slices.Contains(gone, m.Key), len(out[dest]) >= limit:
				case waiting[m.WorkItemID]:
				case stored.NextAttemptAt.After(now):
					waiting[m.WorkItemID] = true
				default:
					out[dest] = append(out[dest], m.Key)
				}
			}
			return out
		}
		require.Len(t, slices.Concat(slices.Collect(maps.Values(h.dueBy(epoch(), 256)))...), 20, "the due statuses and their replies")
		require.Equal(t, want(epoch(), 256), h.dueBy(epoch(), 256))
		require.Equal(t, want(epoch(), 2), h.dueBy(epoch(), 2), "the limit counts what is due, per destination")
		require.Len(t, slices.Concat(slices.Collect(maps.Values(h.dueBy(at(time.Second), 256)))...), 315)
		require.Equal(t, want(at(time.Second), 256), h.dueBy(at(time.Second), 256))

		// A failure moves a due message's next attempt: it and its reply
		// wait for the retry.
		require.NoError(t, h.markFailed("wi_37/status", "timeout", at(time.Minute), false))
		require.NotContains(t, h.due(at(time.Second), 256), "wi_37/status")
		require.NotContains(t, h.due(at(time.Second), 256), "wi_37/reply")
		require.Equal(t, want(at(time.Second), 256), h.dueBy(at(time.Second), 256))
		require.Contains(t, h.due(at(time.Minute), 256), "wi_37/reply")

		// Enqueueing new content keeps a later next attempt and takes a
		// later one it is given.
		h.enqueue(msg("wi_67/status", "wi_67", threads[67%3], at(2*time.Second)))
		h.enqueue(msg("wi_0/status", "wi_0", threads[0], time.Time{}))
		require.NotContains(t, h.due(at(time.Second), 256), "wi_67/status")
		require.NotContains(t, h.due(at(time.Second), 256), "wi_67/reply")
		require.NotContains(t, h.due(epoch(), 256), "wi_0/status", "its edit interval still runs")
		require.Equal(t, want(epoch(), 256), h.dueBy(epoch(), 256))
		require.Equal(t, want(at(2*time.Second), 256), h.dueBy(at(2*time.Second), 256))

		// A waiting message enqueued under another work item no longer
		// holds back its former work item's messages, and holds back its
		// new one's.
		require.NotContains(t, h.due(epoch(), 256), "wi_10/reply")
		moved := msg("wi_10/status", "wi_7", threads[10%3], at(time.Second))
		h.enqueue(moved)
		msgs[10] = moved
		require.Contains(t, h.due(epoch(), 256), "wi_10/reply")
		require.NotContains(t, h.due(epoch(), 256), "wi_7/reply")
		require.Equal(t, want(epoch(), 256), h.dueBy(epoch(), 256))

		// A dead message is never due and holds nothing back, even when its
		// content is replaced.
		require.NoError(t, h.markFailed("wi_70/status", "channel_not_found", at(time.Second), true))
		h.enqueue(msg("wi_70/status", "wi_70", threads[70%3], time.Time{}))
		require.NotContains(t, h.due(at(time.Hour), 256), "wi_70/status")
		require.Contains(t, h.due(epoch(), 256), "wi_70/reply")
		require.Equal(t, want(epoch(), 256), h.dueBy(epoch(), 256))

		// Delivered messages leave the look; the rest is as it was after a
		// restart.
		for _, key := range h.due(epoch(), 256) {
			require.NoError(t, h.markDelivered(key, h.outbox(key).Version, "r-"+key, epoch(), at(time.Second)))
		}
		require.Empty(t, h.due(epoch(), 256))
		h.reopen()
		require.Equal(t, want(at(time.Second), 256), h.dueBy(at(time.Second), 256))
		require.Equal(t, want(at(time.Hour), 256), h.dueBy(at(time.Hour), 256))
		p, d := h.pending()
		require.Equal(t, len(slices.Concat(slices.Collect(maps.Values(h.dueBy(at(time.Hour), 256)))...)), p)
		require.Equal(t, 1, d)
	})

	t.Run("enqueue new never replaces", func(t *testing.T) {
		h := newHarness(t, open)
		first, created, err := h.s.EnqueueNew(h.ctx, statusMsg("k", th, "first"))
		require.NoError(t, err)
		require.True(t, created)
		require.Equal(t, 1, first.Version)
		require.Equal(t, *h.outbox("k"), first)

		again, created, err := h.s.EnqueueNew(h.ctx, statusMsg("k", th, "second"))
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, first, again, "the stored message, unchanged")
		require.Equal(t, "first", h.outbox("k").Text)

		_, _, err = h.s.EnqueueNew(h.ctx, bot.OutboxMessage{Thread: th, Text: "no key"})
		requireCode(t, bot.EINVALID, err)
	})

	t.Run("a status of a run that lost its job does not undo a later one", func(t *testing.T) {
		status := func(state string, attempt int) bot.OutboxMessage {
			m := statusMsg("wi_1/status", th, fmt.Sprintf("%s (attempt %d)", state, attempt))
			m.Status.State, m.Status.Attempt = state, attempt
			return m
		}
		steps := []struct {
			msg  bot.OutboxMessage
			all  bool   // with EnqueueAll, as a run's end is written
			want string // the stored text after it
		}{
			{status("running", 1), false, "running (attempt 1)"},
			{status("running", 2), false, "running (attempt 2)"}, // another replica took the job over
			{status("running", 1), false, "running (attempt 2)"}, // the first has not noticed yet
			{status("done", 2), true, "done (attempt 2)"},
			{status("running", 1), false, "done (attempt 2)"},
			{status("failed", 1), true, "done (attempt 2)"},
			{status("running", 2), false, "done (attempt 2)"},    // its own late refresh
			{status("running", 3), false, "running (attempt 3)"}, // run again after its end was not recorded
			{status("failed", 0), false, "failed (attempt 0)"},   // given up: its workers kept dying
			{status("running", 4), false, "failed (attempt 0)"},
			{status("done", 3), true, "failed (attempt 0)"},
		}
		h := newHarness(t, open)
		for i, s := range steps {
			if s.all {
				require.NoError(t, h.s.EnqueueAll(h.ctx, []bot.OutboxMessage{s.msg}))
			} else {
				got := h.enqueue(s.msg)
				require.Equal(t, s.want, got.Text, "step %d: Enqueue returns what is stored", i)
			}
			require.Equal(t, s.want, h.outbox("wi_1/status").Text, "step %d", i)
		}
	})

	t.Run("an attempt is recorded until a delivery succeeds", func(t *testing.T) {
		h := newHarness(t, open)
		opener := bot.OutboxMessage{Key: "slack/command/trig-1", Thread: bot.SlackThread("T1", "C1", ""), Kind: bot.OutboxOpener,
			Text: "ran /deploy", Payload: []byte(`{"command":"/deploy"}`)}
		h.enqueue(opener)
		require.False(t, h.outbox(opener.Key).Attempted)
		require.NoError(t, h.s.MarkAttempts(h.ctx, []string{opener.Key}))
		require.NoError(t, h.s.MarkAttempts(h.ctx, []string{opener.Key}), "marking twice is harmless")
		m := h.outbox(opener.Key)
		require.True(t, m.Attempted)
		require.True(t, m.Pending())
		require.Equal(t, bot.SlackThread("T1", "C1", ""), m.Thread, "a channel's top level round-trips")
		require.Equal(t, opener.Payload, m.Payload)

		// It survives a failure, a new version and a restart.
		require.NoError(t, h.markFailed(opener.Key, "timeout", epoch(), false))
		h.enqueue(opener)
		h.reopen()
		m = h.outbox(opener.Key)
		require.True(t, m.Attempted)
		require.Equal(t, 2, m.Version)

		require.NoError(t, h.markDelivered(opener.Key, 2, "1700.1", epoch(), epoch()))
		m = h.outbox(opener.Key)
		require.False(t, m.Attempted)
		require.Equal(t, "1700.1", m.RemoteID)
		msgs, err := h.s.ListOutbox(h.ctx, "slack:T1/C1")
		require.NoError(t, err)
		require.Len(t, msgs, 1)

		requireCode(t, bot.ENOTFOUND, h.s.MarkAttempts(h.ctx, []string{"nope"}))
	})

	t.Run("delivery of the latest version", func(t *testing.T) {
		h := newHarness(t, open)
		h.enqueue(statusMsg("k", th, "queued"))
		require.NoError(t, h.markDelivered("k", 1, "ts-1", at(time.Second), at(3*time.Second)))
		m := h.outbox("k")
		require.False(t, m.Pending())
		require.Equal(t, 1, m.DeliveredVersion)
		require.Equal(t, "ts-1", m.RemoteID)
		require.Zero(t, m.Edits)
		require.NotNil(t, m.DeliveredAt)
		require.True(t, m.DeliveredAt.Equal(at(time.Second)))
		require.Empty(t, h.due(at(time.Hour), 10))
		p, d := h.pending()
		require.Zero(t, p)
		require.Zero(t, d)

		// An edit is pending again, but not before the throttle allows.
		edit := h.enqueue(statusMsg("k", th, "running"))
		require.Equal(t, 2, edit.Version)
		require.Equal(t, 1, edit.DeliveredVersion)
		require.Equal(t, "ts-1", edit.RemoteID)
		require.Empty(t, h.due(at(2*time.Second), 10))
		require.Equal(t, []string{"k"}, h.due(at(3*time.Second), 10))

		require.NoError(t, h.markDelivered("k", 2, "ts-1", at(3*time.Second), at(5*time.Second)))
		m = h.outbox("k")
		require.False(t, m.Pending())
		require.Equal(t, 2, m.DeliveredVersion)
		require.Equal(t, 1, m.Edits)
	})

	t.Run("delivery of a stale version keeps the message pending", func(t *testing.T) {
		h := newHarness(t, open)
		h.enqueue(statusMsg("k", th, "queued"))
		h.enqueue(statusMsg("k", th, "running"))
		require.NoError(t, h.markDelivered("k", 1, "ts-1", at(time.Second), at(2*time.Second)))
		m := h.outbox("k")
		require.True(t, m.Pending())
		require.Equal(t, 1, m.DeliveredVersion)
		require.Equal(t, "ts-1", m.RemoteID, "the next delivery edits instead of posting again")
		require.Zero(t, m.Edits)
		require.Equal(t, "running", m.Text)
		require.Empty(t, h.due(at(time.Second), 10))
		require.Equal(t, []string{"k"}, h.due(at(2*time.Second), 10))
		p, _ := h.pending()
		require.Equal(t, 1, p)

		require.NoError(t, h.markDelivered("k", 2, "ts-1", at(2*time.Second), at(3*time.Second)))
		m = h.outbox("k")
		require.False(t, m.Pending())
		require.Equal(t, 1, m.Edits)
	})

	t.Run("failed attempts back off and reset on delivery", func(t *testing.T) {
		h := newHarness(t, open)
		h.enqueue(statusMsg("k", th, "queued"))
		require.NoError(t, h.markFailed("k", "rate limited", at(time.Minute), false))
		require.NoError(t, h.markFailed("k", "timeout", at(2*time.Minute), false))
		m := h.outbox("k")
		require.Equal(t, 2, m.Attempts)
		require.Equal(t, "timeout", m.LastError)
		require.True(t, m.NextAttemptAt.Equal(at(2*time.Minute)))
		require.False(t, m.Dead)
		require.True(t, m.Pending())
		require.Empty(t, h.due(at(time.Minute), 10))

		// A new version does not skip the backoff.
		h.enqueue(statusMsg("k", th, "running"))
		require.Empty(t, h.due(at(time.Minute), 10))
		require.Equal(t, []string{"k"}, h.due(at(2*time.Minute), 10))

		require.NoError(t, h.markDelivered("k", 2, "ts-1", at(2*time.Minute), at(2*time.Minute)))
		m = h.outbox("k")
		require.Zero(t, m.Attempts)
		require.Empty(t, m.LastError)
	})

	t.Run("dead messages stay dead", func(t *testing.T) {
		h := newHarness(t, open)
		h.enqueue(statusMsg("k", th, "queued"))
		h.enqueue(statusMsg("live", th, "x"))
		require.NoError(t, h.markFailed("k", "channel_not_found", at(time.Minute), true))
		m := h.outbox("k")
		require.True(t, m.Dead)
		require.False(t, m.Pending())
		require.Equal(t, 1, m.Attempts)
		require.Equal(t, []string{"live"}, h.due(at(time.Hour), 10))
		p, d := h.pending()
		require.Equal(t, 1, p)
		require.Equal(t, 1, d)

		again := h.enqueue(statusMsg("k", th, "running"))
		require.True(t, again.Dead)
		require.Equal(t, 2, again.Version)
		require.Equal(t, []string{"live"}, h.due(at(time.Hour), 10))
		p, d = h.pending()
		require.Equal(t, 1, p)
		require.Equal(t, 1, d)
	})

	t.Run("list by thread in seq order", func(t *testing.T) {
		h := newHarness(t, open)
		other := bot.GitHubThread("acme", "api", 1)
		h.enqueue(statusMsg("a", th, "a"))
		h.enqueue(statusMsg("x", other, "x"))
		h.enqueue(statusMsg("b", th, "b"))
		h.enqueue(statusMsg("c", th, "c"))
		require.NoError(t, h.markDelivered("b", 1, "r", epoch(), epoch()))
		require.NoError(t, h.markFailed("c", "gone", epoch(), true))
		h.enqueue(statusMsg("a", th, "a2"))

		msgs, err := h.s.ListOutbox(h.ctx, th.Key())
		require.NoError(t, err)
		var keys []string
		for _, m := range msgs {
			keys = append(keys, m.Key)
			require.Equal(t, th, m.Thread)
		}
		require.Equal(t, []string{"a", "b", "c"}, keys)
		require.Equal(t, "a2", msgs[0].Text)

		msgs, err = h.s.ListOutbox(h.ctx, "local:nobody")
		require.NoError(t, err)
		require.Empty(t, msgs)
	})

	t.Run("unknown and invalid messages", func(t *testing.T) {
		h := newHarness(t, open)
		_, err := h.s.GetOutbox(h.ctx, "nope")
		requireCode(t, bot.ENOTFOUND, err)
		requireCode(t, bot.ENOTFOUND, h.markDelivered("nope", 1, "r", epoch(), epoch()))
		requireCode(t, bot.ENOTFOUND, h.markFailed("nope", "x", epoch(), false))
		_, err = h.s.Enqueue(h.ctx, bot.OutboxMessage{Thread: th, Text: "no key"})
		requireCode(t, bot.EINVALID, err)
	})
}
