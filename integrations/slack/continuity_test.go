package slack

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// routerHarness is the adapter with the product's router and the intake as
// the daemon wires it: the adapter's gate, thread continuity, notices.
func routerHarness(t *testing.T) *harness {
	t.Helper()
	router, err := bot.NewRouter(bot.RoutingConfig{}, []bot.AgentInfo{
		{Name: "coder"}, {Name: "reviewer"}, {Name: "docs"}, {Name: "ops", Keywords: []string{"deploy"}}, {Name: "triage"},
	})
	require.NoError(t, err)
	store := newTestStore(t)
	gates := map[string]bot.Gate{}
	h := newHarnessWith(t, ModeHTTP, newFakeSlack(t), store, func(o *Options) {
		o.Intake = bot.NewIntake(bot.IntakeOptions{Store: store, Router: router, Gates: gates, Threads: store, Notices: store})
	})
	gates[bot.SourceSlack] = h.a.Gate()
	return h
}

// newItems returns the work items made since before, oldest first.
func (h *harness) newItems(t *testing.T, before int) []bot.WorkItem {
	t.Helper()
	items, _, _, _ := h.store.snapshot()
	return items[before:]
}

func TestThreadRepliesGoToTheThreadsAgent(t *testing.T) {
	h := routerHarness(t)
	post := func(id string, inner map[string]any) {
		t.Helper()
		require.Equal(t, http.StatusOK, h.serve(t, "/slack/events", jsonType, string(eventBody(id, inner)), nil).Code)
	}
	count := func() int {
		items, _, _, _ := h.store.snapshot()
		return len(items)
	}

	// @coder is asked in a thread and is working there.
	post("Ev1", mentionEvent("U1", "<@UBOT> @coder fix the flaky login test", "1700000100.000100", ""))
	items := h.newItems(t, 0)
	require.Len(t, items, 1)
	require.Equal(t, "coder", items[0].Agent())
	thread := "1700000100.000100"

	for _, tc := range []struct {
		name   string
		text   string
		agent  string
		kind   bot.RouteKind
		reason string
	}{
		{"a reply without a mention", "also the signup test please", "coder", bot.RouteThread,
			"thread: @coder is working here (" + items[0].ID + ")"},
		{"a keyword does not take the thread away", "and deploy it after", "coder", bot.RouteThread, ""},
		{"an agent in inline code is no request", "the `@reviewer` can look later", "coder", bot.RouteThread, ""},
		{"a quoted agent is no request", "&gt; @reviewer please check\nthat was yesterday", "coder", bot.RouteThread, ""},
		{"another agent mentioned wins", "@reviewer please check", "reviewer", bot.RouteMention, "mention @reviewer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := count()
			post("Ev-"+tc.name, msg(map[string]any{"thread_ts": thread, "ts": fmt.Sprintf("1700000200.%06d", before), "text": tc.text}))
			got := h.newItems(t, before)
			require.Len(t, got, 1)
			require.Equal(t, tc.agent, got[0].Agent())
			require.Equal(t, tc.kind, got[0].Route.Kind)
			if tc.reason != "" {
				require.Equal(t, tc.reason, got[0].Route.Reason)
			}
		})
	}

	// Quoting or showing a request elsewhere starts nothing.
	before := count()
	post("Ev-quote", mentionEvent("U1", "&gt; <@UBOT> @coder fix the flaky login test\nthat is what I wrote yesterday", "1700000300.000100", ""))
	post("Ev-code", mentionEvent("U1", "type `<@UBOT> @coder …` to ask the coder", "1700000301.000100", ""))
	require.Equal(t, before, count())
	_, ingress, _, _ := h.store.snapshot()
	require.Empty(t, ingress, "what does not concern the bot is not recorded")
}

func TestDirectMessagesCarryOnWithTheirAgent(t *testing.T) {
	h := routerHarness(t)
	dm := func(id, ts, text string) {
		t.Helper()
		inner := msg(map[string]any{"channel": "D1", "channel_type": "im", "ts": ts, "text": text})
		require.Equal(t, http.StatusOK, h.serve(t, "/slack/events", jsonType, string(eventBody(id, inner)), nil).Code)
	}
	dm("Ev1", "1700000100.000100", "@docs the README is out of date")
	dm("Ev2", "1700000200.000100", "and the CONTRIBUTING guide too")
	items, _, _, _ := h.store.snapshot()
	require.Len(t, items, 2)
	require.Equal(t, "docs", items[1].Agent())
	require.Equal(t, bot.RouteThread, items[1].Route.Kind)
	require.Equal(t, "slack:T1/D1/1700000200.000100", items[1].Thread.Key(), "the reply goes under the new message")
}

// Every kind of reply a thread gets in a week, as Slack sends it: what a
// person writes there goes to the thread's agent unless they ask another
// agent in their own words; what they only show, quote or link, another
// person's name, an edit, a bot's or the bot's own message asks nothing.
func TestEveryKindOfThreadReply(t *testing.T) {
	h := routerHarness(t)
	post := func(id string, inner map[string]any) {
		t.Helper()
		require.Equal(t, http.StatusOK, h.serve(t, "/slack/events", jsonType, string(eventBody(id, inner)), nil).Code)
	}
	const thread = "1700000100.000100"
	post("Ev1", mentionEvent("U1", "<@UBOT> @coder fix the flaky login test", thread, ""))
	require.Len(t, h.newItems(t, 0), 1)
	const mpimThread = "1700000110.000100"
	post("Ev2", map[string]any{"type": "app_mention", "user": "U1", "text": "<@UBOT> @docs update the README",
		"ts": mpimThread, "channel": "G1", "channel_type": "mpim", "event_ts": mpimThread})
	require.Len(t, h.newItems(t, 0), 2)

	for i, tc := range []struct {
		name   string
		fields map[string]any
		agent  string // "" when no work item is made
		kind   bot.RouteKind
		record string // the ingress code when no work item is made but a record is kept
	}{
		{"a plain reply", map[string]any{"text": "also the signup test"}, "coder", bot.RouteThread, ""},
		{"a reply naming another person", map[string]any{"text": "<@U2> can you review after?"}, "coder", bot.RouteThread, ""},
		{"a reply with a link labelled like an agent", map[string]any{"text": "see <https://example.com/x|@reviewer>"}, "coder", bot.RouteThread, ""},
		{"a reply with an e-mail address", map[string]any{"text": "mail ops@reviewer.io when done"}, "coder", bot.RouteThread, ""},
		{"an agent's name inside a word", map[string]any{"text": "the team@reviewer thing"}, "coder", bot.RouteThread, ""},
		{"an agent in a pre block", map[string]any{"text": "run\n```\n@reviewer check\n```"}, "coder", bot.RouteThread, ""},
		{"an agent in a >>> quote", map[string]any{"text": "&gt;&gt;&gt; @reviewer check this\nand this"}, "coder", bot.RouteThread, ""},
		{"a reply also sent to the channel", map[string]any{"subtype": "thread_broadcast", "text": "also the signup test"}, "coder", bot.RouteThread, ""},
		{"a file shared in the thread", map[string]any{"subtype": "file_share", "text": "here is the log"}, "coder", bot.RouteThread, ""},
		{"another agent asked", map[string]any{"text": "@reviewer please check"}, "reviewer", bot.RouteMention, ""},
		{"another bot's reply", map[string]any{"user": nil, "bot_id": "BOTHER", "text": "ci passed @reviewer"}, "", "", bot.IgnoreBot},
		{"the bot's own reply", map[string]any{"user": testBotUser, "bot_id": testBotID, "text": "done"}, "", "", ""},
		{"an edited reply", map[string]any{"subtype": "message_changed", "ts": nil, "message": map[string]any{
			"type": "message", "user": "U1", "text": "@reviewer now", "ts": "1700000400.000001", "thread_ts": thread,
			"edited": map[string]any{"user": "U1", "ts": "1700000401.000001"}}}, "", "", bot.IgnoreEdited},
		{"a reply in a group DM's thread", map[string]any{"channel": "G1", "channel_type": "mpim", "thread_ts": mpimThread, "text": "and the CHANGELOG"},
			"docs", bot.RouteThread, ""},
		{"a group DM message outside the thread", map[string]any{"channel": "G1", "channel_type": "mpim", "thread_ts": nil, "text": "lunch?"}, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items0, ingress0, _, _ := h.store.snapshot()
			fields := map[string]any{"thread_ts": thread, "ts": fmt.Sprintf("1700000200.%06d", i+1)}
			for k, v := range tc.fields {
				fields[k] = v
			}
			post(fmt.Sprintf("EvReply%d", i), msg(fields))
			items, ingress, _, _ := h.store.snapshot()
			made, recorded := items[len(items0):], ingress[len(ingress0):]
			if tc.agent == "" {
				require.Empty(t, made)
				if tc.record == "" {
					require.Empty(t, recorded)
				} else {
					require.Len(t, recorded, 1)
					require.Equal(t, tc.record, recorded[0].Reason)
				}
				return
			}
			require.Len(t, made, 1)
			require.Equal(t, tc.agent, made[0].Agent())
			require.Equal(t, tc.kind, made[0].Route.Kind)
			require.Empty(t, recorded)
		})
	}
}
