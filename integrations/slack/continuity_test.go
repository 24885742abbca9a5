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
