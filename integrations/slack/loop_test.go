package slack

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// What the bot posts comes back to it as events: its replies, status
// edits, deletions, broadcasts and files, in direct messages, in its own
// threads and in channels, naming it by its user id, its bot id or both,
// even mentioning itself or an agent. Over every such shape none is stored
// or acted on, so the bot never answers itself.
func TestTheBotsOwnMessagesNeverComeBack(t *testing.T) {
	h := newHarness(t, ModeHTTP, nil)
	h.store.seed(t, bot.SlackThread(testTeam, "C1", botThreadTS), "coder", "fix it")
	before, ingressBefore, _, _ := h.store.snapshot()

	type author struct{ user, botID any }
	authors := []author{{testBotUser, testBotID}, {testBotUser, nil}, {nil, testBotID}, {"", testBotID}, {testBotUser, ""}}
	texts := []string{"coder · running", "<@" + testBotUser + "> @coder fix it", "@coder done", "/deploy staging"}
	places := []map[string]any{
		{"channel": "D1", "channel_type": "im"},
		{"channel": "C1", "channel_type": "channel", "thread_ts": botThreadTS},
		{"channel": "C1", "channel_type": "channel"},
	}
	n := 0
	for _, a := range authors {
		for _, text := range texts {
			for _, place := range places {
				own := func(ts string) map[string]any {
					m := map[string]any{"type": "message", "text": text, "ts": ts}
					if a.user != nil {
						m["user"] = a.user
					}
					if a.botID != nil {
						m["bot_id"] = a.botID
					}
					for k, v := range place {
						if k != "channel" && k != "channel_type" {
							m[k] = v
						}
					}
					return m
				}
				outer := func(inner map[string]any, kv ...any) map[string]any {
					m := map[string]any{"type": "message", "event_ts": inner["ts"]}
					for k, v := range place {
						m[k] = v
					}
					for i := 0; i < len(kv); i += 2 {
						m[kv[i].(string)] = kv[i+1]
					}
					return m
				}
				for _, shape := range []string{"posted", "bot_message", "thread_broadcast", "file_share", "me_message", "edited", "deleted", "mention"} {
					n++
					ts := fmt.Sprintf("1700002%03d.%06d", n/1000, n%1000)
					var ev map[string]any
					switch shape {
					case "posted":
						ev = outer(own(ts))
						for k, v := range own(ts) {
							ev[k] = v
						}
					case "bot_message", "thread_broadcast", "file_share", "me_message":
						ev = outer(own(ts), "subtype", shape)
						for k, v := range own(ts) {
							ev[k] = v
						}
					case "edited":
						ev = outer(own(ts), "subtype", "message_changed", "ts", ts+"1", "message", own(ts), "previous_message", own(ts))
					case "deleted":
						ev = outer(own(ts), "subtype", "message_deleted", "ts", ts+"1", "deleted_ts", ts, "previous_message", own(ts))
					case "mention":
						ev = own(ts)
						ev["type"], ev["channel"] = "app_mention", place["channel"]
					}
					w := h.serve(t, "/slack/events", jsonType, string(eventBody(fmt.Sprintf("EvOwn%d", n), ev)), nil)
					require.Equal(t, http.StatusOK, w.Code)
					items, ingress, _, _ := h.store.snapshot()
					require.Len(t, items, len(before), "%s by %v in %v: %q", shape, a, place, text)
					require.Len(t, ingress, len(ingressBefore), "%s by %v in %v: %q", shape, a, place, text)
				}
			}
		}
	}
	t.Logf("%d of the bot's own messages", n)
	require.Empty(t, h.fs.callsOf("chat.postMessage"))
	require.Empty(t, h.fs.callsOf("reactions.add"))
}
