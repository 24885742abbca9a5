package slack

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// eventCase is one kind of event Slack sends, and what it must leave: a
// work item, an ingress record with its code, or nothing at all.
type eventCase struct {
	name    string
	inner   func(ts string) map[string]any
	item    bool
	ingress string // the ingress code, when it leaves a record
}

// botThreadTS is the thread the bot works in, in every eventCases run.
const botThreadTS = "1700000000.000001"

func eventCases() []eventCase {
	msg := func(kv ...any) func(ts string) map[string]any {
		return func(ts string) map[string]any {
			m := map[string]any{"type": "message", "channel": "C1", "channel_type": "channel", "ts": ts, "event_ts": ts}
			for i := 0; i < len(kv); i += 2 {
				m[kv[i].(string)] = kv[i+1]
			}
			if m["ts"] == "" {
				delete(m, "ts")
			}
			return m
		}
	}
	mention := func(kv ...any) func(ts string) map[string]any {
		return func(ts string) map[string]any {
			m := mentionEvent("U1", "<@UBOT> @coder look", ts, "")
			for i := 0; i < len(kv); i += 2 {
				m[kv[i].(string)] = kv[i+1]
			}
			return m
		}
	}
	edited := map[string]any{"user": "U1", "ts": "1700000999.000001"}
	return []eventCase{
		{"mention at a channel's root", mention(), true, ""},
		{"mention in a thread", mention("thread_ts", "1700000500.000001"), true, ""},
		{"mention by another bot", mention("bot_id", "BOTHER"), false, bot.IgnoreBot},
		{"mention by the bot itself", mention("user", testBotUser), false, ""},
		{"mention by the bot's id", mention("user", "", "bot_id", testBotID), false, ""},
		{"mention that was edited", mention("edited", edited), false, bot.IgnoreEdited},
		{"mention only in code", mention("text", "look at `<@UBOT>`"), false, ""},
		{"mention only in a quote", mention("text", "&gt; <@UBOT> @coder deploy"), false, ""},
		{"direct message", msg("user", "U1", "text", "hello", "channel", "D1", "channel_type", "im"), true, ""},
		{"direct message in a thread", msg("user", "U1", "text", "hello", "channel", "D1", "channel_type", "im", "thread_ts", "1700000600.000001"), true, ""},
		{"direct message mentioning the bot", msg("user", "U1", "text", "<@UBOT> hi", "channel", "D1", "channel_type", "im"), true, ""},
		{"direct message from another bot", msg("bot_id", "BOTHER", "text", "beep", "channel", "D1", "channel_type", "im"), false, bot.IgnoreBot},
		{"direct message of subtype bot_message", msg("subtype", "bot_message", "username", "ci", "text", "beep", "channel", "D1", "channel_type", "im"), false, bot.IgnoreBot},
		{"the bot's own direct message", msg("user", testBotUser, "bot_id", testBotID, "text", "reply", "channel", "D1", "channel_type", "im"), false, ""},
		{"channel message mentioning the bot", msg("user", "U1", "text", "<@UBOT> @coder look"), false, ""},
		{"channel chatter", msg("user", "U1", "text", "lunch?"), false, ""},
		{"reply in the bot's thread", msg("user", "U1", "text", "and the other test too", "thread_ts", botThreadTS), true, ""},
		{"other bot's reply in the bot's thread", msg("bot_id", "BOTHER", "text", "ci passed", "thread_ts", botThreadTS), false, bot.IgnoreBot},
		{"the bot's own reply in its thread", msg("user", testBotUser, "bot_id", testBotID, "text", "done", "thread_ts", botThreadTS), false, ""},
		{"reply in a thread the bot is not in", msg("user", "U1", "text", "hm", "thread_ts", "1700000700.000001"), false, ""},
		{"edit adding a mention", msg("subtype", "message_changed", "ts", "", "message", map[string]any{
			"type": "message", "user": "U1", "text": "<@UBOT> @coder now", "ts": "1700000800.000001", "edited": edited},
			"previous_message", map[string]any{"type": "message", "user": "U1", "text": "now", "ts": "1700000800.000001"}), false, bot.IgnoreEdited},
		{"edit in the bot's thread", msg("subtype", "message_changed", "ts", "", "message", map[string]any{
			"type": "message", "user": "U1", "text": "changed", "ts": "1700000801.000001", "thread_ts": botThreadTS, "edited": edited}), false, bot.IgnoreEdited},
		{"the bot's own edit", msg("subtype", "message_changed", "ts", "", "message", map[string]any{
			"type": "message", "user": testBotUser, "bot_id": testBotID, "text": "status", "ts": "1700000802.000001", "thread_ts": botThreadTS}), false, ""},
		{"deletion of a mention", msg("subtype", "message_deleted", "ts", "", "deleted_ts", "1700000803.000001", "previous_message", map[string]any{
			"type": "message", "user": "U1", "text": "<@UBOT> @coder go", "ts": "1700000803.000001"}), false, bot.IgnoreDeleted},
		{"deletion in a direct message", msg("subtype", "message_deleted", "ts", "", "deleted_ts", "1700000804.000001", "channel", "D1", "channel_type", "im",
			"previous_message", map[string]any{"type": "message", "user": "U1", "text": "hi", "ts": "1700000804.000001"}), false, bot.IgnoreDeleted},
		{"join with a mention", msg("subtype", "channel_join", "user", "U1", "text", "<@U1> has joined; <@UBOT>"), false, bot.IgnoreUnsupported},
		{"reaction", func(ts string) map[string]any {
			return map[string]any{"type": "reaction_added", "user": "U1", "reaction": "eyes", "item": map[string]any{"type": "message", "channel": "C1", "ts": ts}}
		}, false, ""},
	}
}

// TestEveryEventIsActedOnOnceWhateverRoutesItTakes sends each kind of
// event Slack sends over HTTP, then again as Slack's retries do (over
// HTTP with X-Slack-Retry-Num and each X-Slack-Retry-Reason, and over
// Socket Mode with retry_attempt), and over Socket Mode first for a twin:
// each leaves what it should (a work item, an ingress record with its
// reason, or nothing) exactly once.
func TestEveryEventIsActedOnOnceWhateverRoutesItTakes(t *testing.T) {
	h := newHarness(t, ModeSocket, nil)
	// The bot has work in botThreadTS.
	h.store.seed(t, bot.SlackThread(testTeam, "C1", botThreadTS), "coder", "fix it")
	cases := eventCases()
	reasons := []string{"http_timeout", "http_error", "too_many_connections", "unknown_error", ""}
	var envelopes int
	deliverHTTP := func(body []byte, retry int, reason string) {
		t.Helper()
		var header http.Header
		if retry > 0 {
			header = http.Header{"X-Slack-Retry-Num": {fmt.Sprint(retry)}, "X-Slack-Retry-Reason": {reason}}
		}
		require.Equal(t, http.StatusOK, h.serve(t, "/slack/events", jsonType, string(body), header).Code)
	}
	deliverSocket := func(body []byte, retry int) {
		t.Helper()
		envelopes++
		id := fmt.Sprintf("env-%d", envelopes)
		h.fs.sendEnvelope(id, "events_api", body, retry)
		require.Equal(t, id, h.fs.nextAck(t).EnvelopeID)
	}

	for i, tc := range cases {
		for _, first := range []string{"http", "socket"} {
			t.Run(tc.name+" first over "+first, func(t *testing.T) {
				ts := fmt.Sprintf("1700001%03d.%06d", i, len(first))
				body := eventBody(fmt.Sprintf("Ev%d%s", i, first), tc.inner(ts))
				items0, ingress0, _, _ := h.store.snapshot()
				if first == "http" {
					deliverHTTP(body, 0, "")
				} else {
					deliverSocket(body, 0)
				}
				items1, ingress1, _, _ := h.store.snapshot()
				made := len(items1) - len(items0)
				recorded := ingress1[len(ingress0):]
				if tc.item {
					require.Equal(t, 1, made, "a work item")
					require.Empty(t, recorded)
				} else {
					require.Zero(t, made, "no work item")
					if tc.ingress == "" {
						require.Empty(t, recorded, "nothing stored")
					} else {
						require.Len(t, recorded, 1)
						require.Equal(t, tc.ingress, recorded[0].Reason, recorded[0].Detail)
					}
				}

				for retry := 1; retry <= 3; retry++ {
					for _, reason := range reasons {
						deliverHTTP(body, retry, reason)
					}
					deliverSocket(body, retry)
				}
				items2, ingress2, _, _ := h.store.snapshot()
				require.Len(t, items2, len(items1), "a retry made a work item")
				require.Len(t, ingress2, len(ingress1), "a retry made an ingress record")
			})
		}
	}
}
