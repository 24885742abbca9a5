package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// testKeysAndTimes holds both stores to the same answers on the text they
// key by and the times they select by: a thread, delivery id or outbox key
// either store could not keep and read back as it is (not UTF-8, a NUL, a
// thread whose key does not parse back to it) is refused as invalid before
// anything is written, by either store; unicode of every width is kept byte
// for byte; a lookup by text no store keeps finds nothing, as for text
// nobody stored; a schedule's time keeps its nanoseconds whatever its zone, and
// one outside what Unix nanoseconds can say is clamped alike.
func testKeysAndTimes(t *testing.T, open Opener) {
	h := newHarness(t, open)
	for _, tc := range []struct {
		name string
		edit func(*bot.Event)
	}{
		{"a local thread with NUL", func(e *bot.Event) { e.Thread = bot.LocalThread("a\x00b") }},
		{"a local thread that is not UTF-8", func(e *bot.Event) { e.Thread = bot.LocalThread("caf\xe9") }},
		{"a local thread with a line break", func(e *bot.Event) { e.Thread = bot.LocalThread("a\nb") }},
		{"a local thread over 200 bytes", func(e *bot.Event) { e.Thread = bot.LocalThread(strings.Repeat("é", 101)) }},
		{"a GitHub thread without a number", func(e *bot.Event) { e.Thread = bot.GitHubThread("acme", "api", 0) }},
		{"a GitHub thread whose repository has a slash", func(e *bot.Event) { e.Thread = bot.GitHubThread("acme", "a/b", 1) }},
		{"a Slack thread without a channel", func(e *bot.Event) { e.Thread = bot.SlackThread("T1", "", "1.2") }},
		{"a Slack thread with NUL", func(e *bot.Event) { e.Thread = bot.SlackThread("T1", "C\x001", "1.2") }},
		{"a conversation that does not read back", func(e *bot.Event) { e.Conversation = bot.SlackThread("T1", "", "") }},
		{"a delivery id with NUL", func(e *bot.Event) { e.DeliveryID = "d\x001" }},
		{"a delivery id that is not UTF-8", func(e *bot.Event) { e.DeliveryID = "\xff\xfe" }},
	} {
		for _, req := range []bot.IngestRequest{
			routed(h.event(bot.LocalThread("fine"), "hello"), "coder", epoch()),
			ignored(h.event(bot.LocalThread("fine"), "hello"), bot.IgnoreNoRoute, epoch()),
		} {
			tc.edit(&req.Event)
			_, err := h.s.Ingest(h.ctx, req)
			requireCode(t, bot.EINVALID, err)
			require.NotContains(t, bot.ErrorMessage(err), "SQLSTATE", tc.name)
		}
	}
	bad := routed(h.event(bot.LocalThread("fine"), "hello"), "cod\x00er", epoch())
	_, err := h.s.Ingest(h.ctx, bad)
	requireCode(t, bot.EINVALID, err)
	ingress, _, err := h.s.ListIngress(h.ctx, bot.IngressFilter{})
	require.NoError(t, err)
	require.Empty(t, ingress, "nothing refused was kept")
	require.Equal(t, 0, h.depth(), "nothing refused was kept")
	require.Empty(t, h.list(bot.WorkItemFilter{}))
	_, err = h.s.Enqueue(h.ctx, bot.OutboxMessage{Key: "k\x00", Thread: bot.LocalThread("fine"), Kind: bot.OutboxReply, Text: "x"})
	requireCode(t, bot.EINVALID, err)
	_, err = h.s.Enqueue(h.ctx, bot.OutboxMessage{Key: "k", Thread: bot.LocalThread("\xff"), Kind: bot.OutboxReply, Text: "x"})
	requireCode(t, bot.EINVALID, err)

	// A lookup by such text finds nothing, as for text nobody stored; a
	// schedule cannot be named with it.
	for _, bad := range []string{"a\x00b", "caf\xe9", "\xff\xfe"} {
		_, err := h.s.FindDelivery(h.ctx, bot.SourceLocal, bad)
		requireCode(t, bot.ENOTFOUND, err)
		_, err = h.s.FindDelivery(h.ctx, "", bad)
		requireCode(t, bot.ENOTFOUND, err)
		_, err = h.s.GetOutbox(h.ctx, bad)
		requireCode(t, bot.ENOTFOUND, err)
		msgs, err := h.s.ListOutbox(h.ctx, "local:"+bad)
		require.NoError(t, err)
		require.Empty(t, msgs)
		require.Empty(t, h.list(bot.WorkItemFilter{Thread: "local:" + bad}))
		require.Empty(t, h.list(bot.WorkItemFilter{Conversation: "slack:T1/" + bad}))
		_, ok, err := h.s.LastFired(h.ctx, bad)
		require.NoError(t, err)
		require.False(t, ok)
		requireCode(t, bot.EINVALID, h.s.SetLastFired(h.ctx, bad, epoch()))
	}

	// Unicode of every width, and text that looks like SQL, is kept as is.
	names := []string{"ünïcødé ✓", "日本語のスレッド", "emoji 🎉👩‍💻", "e\u0301 vs \u00e9", "\u2028 \U0010FFFF", "50%_off' OR 1=1 --", strings.Repeat("ß", 100)}
	for i, name := range names {
		th := bot.LocalThread(name)
		ev := h.event(th, name)
		ev.DeliveryID = fmt.Sprintf("%s-%d", name, i)
		wi := h.ingest(routed(ev, "coder", epoch())).WorkItem
		require.Equal(t, th, wi.Thread)
		got := h.list(bot.WorkItemFilter{Thread: th.Key()})
		require.Len(t, got, 1, name)
		require.Equal(t, wi.ID, got[0].ID)
		found, err := h.s.FindDelivery(h.ctx, ev.Source, ev.DeliveryID)
		require.NoError(t, err)
		require.Equal(t, wi.ID, found.WorkItem.ID)
		again, err := h.s.Ingest(h.ctx, routed(ev, "coder", epoch()))
		require.NoError(t, err)
		require.True(t, again.Duplicate, name)
		m := h.enqueue(bot.OutboxMessage{Key: "reply/" + name, Thread: th, Kind: bot.OutboxReply, Text: name, WorkItemID: wi.ID})
		require.Equal(t, name, h.outbox(m.Key).Text)
	}
	// The thread a name is a prefix of is another thread.
	require.Len(t, h.list(bot.WorkItemFilter{Thread: bot.LocalThread("emoji").Key()}), 0)

	// Schedules: nanoseconds in any zone, and times Unix nanoseconds cannot
	// say clamped to the nearest they can.
	east, west := time.FixedZone("east", 5*3600+1800), time.FixedZone("west", -7*3600)
	for _, tc := range []struct {
		at, want time.Time
	}{
		{time.Date(2025, 3, 1, 12, 0, 0, 123456789, east), time.Date(2025, 3, 1, 6, 30, 0, 123456789, time.UTC)},
		{time.Date(2025, 3, 1, 12, 0, 0, 1, west), time.Date(2025, 3, 1, 19, 0, 0, 1, time.UTC)},
		{time.Unix(0, 0), time.Unix(0, 0).UTC()},
		{time.Time{}, time.Unix(0, 0).UTC()},
		{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(0, 0).UTC()},
		{time.Date(1600, 1, 1, 0, 0, 0, 0, east), time.Unix(0, 0).UTC()},
		{time.Date(2262, 4, 12, 0, 0, 0, 0, time.UTC), time.Date(2262, 4, 11, 23, 47, 16, 854775807, time.UTC)},
		{time.Date(9999, 12, 31, 23, 59, 59, 999999999, west), time.Date(2262, 4, 11, 23, 47, 16, 854775807, time.UTC)},
	} {
		name := "nightly " + tc.at.String()
		require.NoError(t, h.s.SetLastFired(h.ctx, name, tc.at))
		got, ok, err := h.s.LastFired(h.ctx, name)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, tc.want, got, "%s: got %s", tc.at, got)
	}
}
