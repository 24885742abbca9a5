package slack

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// botThread is a thread the bot already works in.
const botThread = "1700000000.000001"

func msg(fields map[string]any) map[string]any {
	m := map[string]any{"type": "message", "user": "U1", "text": "hello", "ts": "1700000050.000100", "channel": "C1",
		"channel_type": "channel", "event_ts": "1700000050.000100"}
	for k, v := range fields {
		if v == nil {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	return m
}

// What an event makes.
type outcome int

const (
	actDrop   outcome = iota // nothing is stored
	actIngest                // a work item
	actIgnore                // an ingress record with a reason
)

func TestEventsAddressedToTheBot(t *testing.T) {
	type want struct {
		act      outcome
		kind     string
		reason   string
		thread   string
		mentions []string
		text     string
	}
	tests := []struct {
		name  string
		inner map[string]any
		want  want
	}{
		{"direct message", msg(map[string]any{"channel": "D1", "channel_type": "im", "text": "what broke last night?"}),
			want{act: actIngest, kind: bot.KindSlackMessage, thread: "slack:T1/D1/1700000050.000100", mentions: []string{}, text: "what broke last night?"}},
		{"direct message naming an agent", msg(map[string]any{"channel": "D1", "channel_type": "im", "text": "reviewer: look at #42"}),
			want{act: actIngest, kind: bot.KindSlackMessage, thread: "slack:T1/D1/1700000050.000100", mentions: []string{"reviewer"}, text: "reviewer: look at #42"}},
		{"direct message with escapes", msg(map[string]any{"channel": "D1", "channel_type": "im", "text": "is 1 &lt; 2 &amp;&amp; <@U7> around?"}),
			want{act: actIngest, kind: bot.KindSlackMessage, thread: "slack:T1/D1/1700000050.000100", mentions: []string{}, text: "is 1 < 2 && <@U7> around?"}},
		{"reply in a bot thread", msg(map[string]any{"thread_ts": botThread, "text": "@docs also update the README"}),
			want{act: actIngest, kind: bot.KindSlackMessage, thread: "slack:T1/C1/" + botThread, mentions: []string{"docs"}, text: "@docs also update the README"}},
		{"reply in another thread", msg(map[string]any{"thread_ts": "1700000000.999999"}), want{act: actDrop}},
		{"channel chatter", msg(nil), want{act: actDrop}},
		{"channel message mentioning the bot comes as app_mention too", msg(map[string]any{"text": "<@UBOT> hi"}), want{act: actDrop}},
		{"bot thread reply mentioning the bot comes as app_mention too", msg(map[string]any{"thread_ts": botThread, "text": "<@UBOT> more"}), want{act: actDrop}},
		{"edit in a DM", msg(map[string]any{"channel": "D1", "channel_type": "im", "subtype": "message_changed", "user": nil, "ts": "1700000051.000100",
			"message":          map[string]any{"type": "message", "user": "U1", "text": "fixed typo", "ts": "1700000050.000100"},
			"previous_message": map[string]any{"type": "message", "user": "U1", "text": "fixd typo", "ts": "1700000050.000100"}}),
			want{act: actIgnore, kind: bot.KindSlackMessage, reason: bot.IgnoreEdited, thread: "slack:T1/D1/1700000050.000100"}},
		{"deletion in a bot thread", msg(map[string]any{"subtype": "message_deleted", "user": nil, "deleted_ts": "1700000050.000100",
			"previous_message": map[string]any{"type": "message", "user": "U1", "text": "oops", "ts": "1700000050.000100", "thread_ts": botThread}}),
			want{act: actIgnore, kind: bot.KindSlackMessage, reason: bot.IgnoreDeleted, thread: "slack:T1/C1/" + botThread}},
		{"another bot in a DM", msg(map[string]any{"channel": "D1", "channel_type": "im", "subtype": "bot_message", "user": nil, "bot_id": "B9"}),
			want{act: actIgnore, kind: bot.KindSlackMessage, reason: bot.IgnoreBot, thread: "slack:T1/D1/1700000050.000100"}},
		{"another bot in a bot thread", msg(map[string]any{"thread_ts": botThread, "user": "U8", "bot_id": "B8"}),
			want{act: actIgnore, kind: bot.KindSlackMessage, reason: bot.IgnoreBot, thread: "slack:T1/C1/" + botThread}},
		{"the bot's own post", msg(map[string]any{"thread_ts": botThread, "user": testBotUser, "bot_id": testBotID}), want{act: actDrop}},
		{"the bot's own status edit", msg(map[string]any{"subtype": "message_changed", "user": nil,
			"message": map[string]any{"type": "message", "bot_id": testBotID, "text": "coder · running", "ts": "1700000040.000100", "thread_ts": botThread}}),
			want{act: actDrop}},
		{"housekeeping in a DM", msg(map[string]any{"channel": "D1", "channel_type": "im", "subtype": "huddle_thread"}),
			want{act: actIgnore, kind: bot.KindSlackMessage, reason: bot.IgnoreUnsupported, thread: "slack:T1/D1/1700000050.000100"}},
		{"mention", mentionEvent("U1", "<@UBOT> coder: fix it", "1700000052.000100", ""),
			want{act: actIngest, kind: bot.KindSlackMention, thread: "slack:T1/C1/1700000052.000100", mentions: []string{"coder"}, text: "coder: fix it"}},
		{"mention of several agents", mentionEvent("U1", "<@UBOT> @coder and @reviewer: pair on <#C5|ops> with <@U7>", "1700000052.000100", ""),
			want{act: actIngest, kind: bot.KindSlackMention, thread: "slack:T1/C1/1700000052.000100", mentions: []string{"coder", "reviewer"},
				text: "@coder and @reviewer: pair on <#C5|ops> with <@U7>"}},
		{"mention with a command", mentionEvent("U1", "<@UBOT> /deploy staging", "1700000052.000100", ""),
			want{act: actIngest, kind: bot.KindSlackMention, thread: "slack:T1/C1/1700000052.000100", mentions: []string{}, text: "/deploy staging"}},
		{"mention by a bot", func() map[string]any {
			m := mentionEvent("U8", "<@UBOT> ping", "1700000052.000100", "")
			m["bot_id"] = "B8"
			return m
		}(), want{act: actIgnore, kind: bot.KindSlackMention, reason: bot.IgnoreBot, thread: "slack:T1/C1/1700000052.000100"}},
		{"edited mention", func() map[string]any {
			m := mentionEvent("U1", "<@UBOT> @coder fix it", "1700000052.000100", "")
			m["edited"] = map[string]any{"user": "U1", "ts": "1700000060.000000"}
			return m
		}(), want{act: actIgnore, kind: bot.KindSlackMention, reason: bot.IgnoreEdited, thread: "slack:T1/C1/1700000052.000100"}},
		{"mention only in a quote", mentionEvent("U1", "&gt; <@UBOT> @coder fix the flaky test\nthat was yesterday", "1700000052.000100", ""),
			want{act: actDrop}},
		{"mention only in code", mentionEvent("U1", "type `<@UBOT> @coder help` to ask", "1700000052.000100", ""),
			want{act: actDrop}},
		{"quoted mention in a bot thread is a reply there", msg(map[string]any{"thread_ts": botThread, "text": "&gt; <@UBOT> @reviewer look\nthanks"}),
			want{act: actIngest, kind: bot.KindSlackMessage, thread: "slack:T1/C1/" + botThread, mentions: []string{}, text: "> @reviewer look\nthanks"}},
		{"reaction", map[string]any{"type": "reaction_added", "user": "U1", "reaction": "eyes",
			"item": map[string]any{"type": "message", "channel": "C1", "ts": botThread}}, want{act: actDrop}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, ModeHTTP, nil)
			h.store.seed(t, bot.SlackThread(testTeam, "C1", botThread), "coder", "an earlier request")
			body := string(eventBody(fmt.Sprintf("EvT%d", i), tc.inner))
			require.Equal(t, http.StatusOK, h.serve(t, "/slack/events", jsonType, body, nil).Code)

			items, ingress, events, _ := h.store.snapshot()
			switch tc.want.act {
			case actDrop:
				require.Empty(t, events)
				require.Len(t, items, 1)
				require.Empty(t, ingress)
				return
			case actIngest:
				require.Len(t, items, 2)
				require.Empty(t, ingress)
			case actIgnore:
				require.Len(t, items, 1)
				require.Len(t, ingress, 1)
				require.Equal(t, tc.want.reason, ingress[0].Reason)
			}
			require.Len(t, events, 1)
			ev := events[0]
			require.Equal(t, tc.want.kind, ev.Kind)
			require.Equal(t, tc.want.thread, ev.Thread.Key())
			require.Equal(t, fmt.Sprintf("EvT%d", i), ev.DeliveryID)
			if tc.want.act == actIngest {
				require.Equal(t, tc.want.mentions, ev.Mentions)
				require.Equal(t, tc.want.text, ev.Text)
			}
		})
	}
}

func TestMentionCommandRoutesByCommand(t *testing.T) {
	h := newHarness(t, ModeHTTP, nil)
	body := string(eventBody("EvC", mentionEvent("U1", "<@UBOT> /deploy staging", "1700000053.000100", "")))
	require.Equal(t, http.StatusOK, h.serve(t, "/slack/events", jsonType, body, nil).Code)
	items, _, events, _ := h.store.snapshot()
	require.Equal(t, "ops", items[0].Agent())
	require.Equal(t, "deploy", events[0].Command)
	require.Equal(t, "staging", events[0].Args)
}
