package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

func newTestSink(t *testing.T, interval time.Duration) (*Sink, *fakeSlack) {
	t.Helper()
	fs := newFakeSlack(t)
	api := slack.New("xoxb-test", slack.OptionAPIURL(fs.apiURL()))
	return NewSink(api, SinkOptions{ChannelInterval: interval, BotID: func() string { return testBotID }}), fs
}

var thread = bot.SlackThread(testTeam, "C1", "1700000001.000100")

func statusMsg() bot.OutboxMessage {
	started := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	return bot.OutboxMessage{Key: "wi_7/status", Thread: thread, WorkItemID: "wi_7", Kind: bot.OutboxStatus, Version: 1,
		Status: &bot.StatusView{WorkItemID: "wi_7", Agent: "coder", State: "running", Activity: "reading <main.go>",
			Started: started, Updated: started.Add(83 * time.Second), Children: []string{"reviewer: checking tests"},
			Skills: []string{"release-notes"}}}
}

func TestSinkPostsThenUpdatesStatus(t *testing.T) {
	s, fs := newTestSink(t, time.Millisecond)
	ctx := context.Background()

	id, err := s.Deliver(ctx, statusMsg())
	require.NoError(t, err)
	posts := fs.callsOf("chat.postMessage")
	require.Len(t, posts, 1)
	require.Equal(t, posts[0].Form.Get("ts"), "")
	require.Equal(t, "C1", posts[0].Form.Get("channel"))
	require.Equal(t, "1700000001.000100", posts[0].Form.Get("thread_ts"))
	require.Equal(t, posts[0].TS, id)
	require.Equal(t, "coder · running: reading &lt;main.go&gt; (1m23s)", posts[0].Form.Get("text"))
	blocks := posts[0].Form.Get("blocks")
	for _, want := range []string{"*coder* · running", "reading \\u0026lt;main.go\\u0026gt;", "reviewer: checking tests", ":jigsaw: release-notes", "1m23s", "wi_7"} {
		require.Contains(t, blocks, want)
	}
	var parsed []map[string]any
	require.NoError(t, json.Unmarshal([]byte(blocks), &parsed))
	require.Equal(t, []any{"section", "section", "context"}, []any{parsed[0]["type"], parsed[1]["type"], parsed[2]["type"]})
	require.Contains(t, posts[0].Form.Get("metadata"), "wi_7/status")

	next := statusMsg()
	next.RemoteID, next.Version, next.Status.State, next.Status.Activity = id, 2, "done", "finished"
	id2, err := s.Deliver(ctx, next)
	require.NoError(t, err)
	require.Equal(t, id, id2)
	updates := fs.callsOf("chat.update")
	require.Len(t, updates, 1)
	require.Equal(t, id, updates[0].Form.Get("ts"))
	require.Equal(t, "C1", updates[0].Form.Get("channel"))
	require.Contains(t, updates[0].Form.Get("blocks"), "finished")
	require.Len(t, fs.callsOf("chat.postMessage"), 1, "an update posts nothing new")
}

func TestSinkReaction(t *testing.T) {
	s, fs := newTestSink(t, time.Millisecond)
	msg := bot.OutboxMessage{Key: "wi_7/seen", Thread: thread, Kind: bot.OutboxReaction, Reaction: bot.ReactionSeen, Target: "1700000001.000100", Version: 1}
	id, err := s.Deliver(context.Background(), msg)
	require.NoError(t, err)
	require.NotEmpty(t, id)
	calls := fs.callsOf("reactions.add")
	require.Len(t, calls, 1)
	require.Equal(t, "eyes", calls[0].Form.Get("name"))
	require.Equal(t, "C1", calls[0].Form.Get("channel"))
	require.Equal(t, "1700000001.000100", calls[0].Form.Get("timestamp"))

	// Someone (or a crash between post and bookkeeping) added it already.
	fs.fail("reactions.add", fakeFailure{code: "already_reacted"})
	_, err = s.Deliver(context.Background(), msg)
	require.NoError(t, err)

	msg.Target = ""
	_, err = s.Deliver(context.Background(), msg)
	de, ok := bot.AsDeliveryError(err)
	require.True(t, ok)
	require.True(t, de.Permanent)
}

func TestSinkErrors(t *testing.T) {
	tests := []struct {
		name       string
		failure    fakeFailure
		permanent  bool
		retryAfter time.Duration
	}{
		{"rate limited", fakeFailure{status: http.StatusTooManyRequests, retryAfter: "7"}, false, 7 * time.Second},
		{"channel gone", fakeFailure{code: "channel_not_found"}, true, 0},
		{"not in channel", fakeFailure{code: "not_in_channel"}, true, 0},
		{"token refused", fakeFailure{code: "invalid_auth"}, false, 0},
		{"token revoked", fakeFailure{code: "token_revoked"}, false, 0},
		{"too long", fakeFailure{code: "msg_too_long"}, true, 0},
		{"slack down", fakeFailure{status: http.StatusServiceUnavailable}, false, 0},
		{"internal error", fakeFailure{code: "internal_error"}, false, 0},
		{"bad request", fakeFailure{status: http.StatusBadRequest}, true, 0},
		{"rate limited without Retry-After", fakeFailure{status: http.StatusTooManyRequests}, false, time.Second},
		{"rate limited with a negative Retry-After", fakeFailure{status: http.StatusTooManyRequests, retryAfter: "-5"}, false, time.Second},
		{"rate limited in the body", fakeFailure{code: "ratelimited"}, false, time.Second},
		{"blocks too long", fakeFailure{code: "msg_blocks_too_long"}, true, 0},
		{"text not in a charset Slack reads", fakeFailure{code: "invalid_charset"}, true, 0},
		{"a token of the wrong kind", fakeFailure{code: "not_allowed_token_type"}, true, 0},
		{"archived", fakeFailure{code: "is_archived"}, true, 0},
		{"fatal error", fakeFailure{code: "fatal_error"}, false, 0},
		{"service unavailable in the body", fakeFailure{code: "service_unavailable"}, false, 0},
		{"bad gateway", fakeFailure{status: http.StatusBadGateway}, false, 0},
		{"gateway timeout", fakeFailure{status: http.StatusGatewayTimeout}, false, 0},
		{"request timeout", fakeFailure{status: http.StatusRequestTimeout}, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, fs := newTestSink(t, time.Millisecond)
			fs.fail("chat.postMessage", tc.failure)
			_, err := s.Deliver(context.Background(), statusMsg())
			require.Error(t, err)
			require.NotContains(t, err.Error(), "xoxb-test")
			de, ok := bot.AsDeliveryError(err)
			if !tc.permanent && tc.retryAfter == 0 {
				if ok {
					require.False(t, de.Permanent)
					require.Zero(t, de.RetryAfter)
				}
				return
			}
			require.True(t, ok, "want a DeliveryError, got %v", err)
			require.Equal(t, tc.permanent, de.Permanent)
			require.Equal(t, tc.retryAfter, de.RetryAfter)
		})
	}
}

func TestSinkRejectsOtherThreads(t *testing.T) {
	s, _ := newTestSink(t, time.Millisecond)
	_, err := s.Deliver(context.Background(), bot.OutboxMessage{Key: "k", Thread: bot.LocalThread("t1"), Kind: bot.OutboxReply, Text: "hi"})
	de, ok := bot.AsDeliveryError(err)
	require.True(t, ok)
	require.True(t, de.Permanent)
}

func longReply() string {
	var b strings.Builder
	b.WriteString("Summary of the fix <!channel> & friends:\n\n")
	for i := range 120 {
		b.WriteString("- step ")
		b.WriteString(strings.Repeat("é", 5))
		b.WriteString(" ")
		b.WriteString(strings.Repeat("word ", 10))
		b.WriteString(string(rune('a' + i%26)))
		b.WriteString("\n")
	}
	b.WriteString("```go\n")
	for range 40 {
		b.WriteString("fmt.Println(\"a line of code that is fairly long\")\n")
	}
	b.WriteString("```\nDone.\n")
	return b.String()
}

func TestSinkSplitsLongReply(t *testing.T) {
	s, fs := newTestSink(t, time.Millisecond)
	text := longReply()
	require.Greater(t, utf8.RuneCountInString(text), 2*maxReplyRunes)
	msg := bot.OutboxMessage{Key: "wi_7/reply", Thread: thread, Kind: bot.OutboxReply, Text: text, Version: 1}
	id, err := s.Deliver(context.Background(), msg)
	require.NoError(t, err)

	posts := fs.callsOf("chat.postMessage")
	require.GreaterOrEqual(t, len(posts), 3)
	var ts []string
	var joined strings.Builder
	for i, p := range posts {
		ts = append(ts, p.TS)
		require.Equal(t, "1700000001.000100", p.Form.Get("thread_ts"))
		require.JSONEq(t, fmt.Sprintf(`{"event_type":"switchyard_outbox","event_payload":{"key":"wi_7/reply","part":%d}}`, i), p.Form.Get("metadata"))
		part := unescape(p.Form.Get("text"))
		require.LessOrEqual(t, utf8.RuneCountInString(part), maxReplyRunes)
		require.True(t, utf8.ValidString(part))
		require.Equal(t, 0, strings.Count(part, "```")%2, "every part renders its code as code")
		joined.WriteString(part)
	}
	require.Equal(t, strings.Join(ts, " "), id, "the reply is known by all its messages")
	require.Contains(t, posts[0].Form.Get("text"), "&lt;!channel&gt; &amp; friends", "agent text cannot ping a channel")
	require.Equal(t, strings.Count(text, "fmt.Println"), strings.Count(joined.String(), "fmt.Println"))
	require.True(t, strings.HasSuffix(joined.String(), "Done.\n"))

	// A shorter version edits the parts it keeps and deletes the rest.
	msg.Text, msg.Version, msg.RemoteID = "Shorter now.", 2, id
	id2, err := s.Deliver(context.Background(), msg)
	require.NoError(t, err)
	require.Equal(t, ts[0], id2)
	require.Len(t, fs.callsOf("chat.update"), 1)
	require.Len(t, fs.callsOf("chat.delete"), len(ts)-1)
	shown := fs.shown("wi_7/reply")
	require.Len(t, shown, 1)
	require.Equal(t, "Shorter now.", shown[0].Text)
}

// TestSinkResumesSplitReplyAfterFailure: the second part of a long reply is
// rate limited; the outbox's retry finds the part already posted and posts
// only the rest.
func TestSinkResumesSplitReplyAfterFailure(t *testing.T) {
	s, fs := newTestSink(t, time.Millisecond)
	store := newTestStore(t)
	ctx := context.Background()
	now := time.Now()
	d := bot.NewDeliverer(bot.DelivererOptions{Store: store, Sinks: map[string]bot.Sink{bot.SourceSlack: s}, Now: func() time.Time { return now }})
	msg := bot.OutboxMessage{Key: "wi_7/reply", Thread: thread, Kind: bot.OutboxReply, Text: longReply()}
	parts := len(splitMessage(msg.Text, maxReplyRunes))
	require.Greater(t, parts, 2)
	_, err := store.Enqueue(ctx, msg)
	require.NoError(t, err)

	// The first part goes out, the second is rate limited.
	fs.fail("chat.postMessage", fakeFailure{pass: true})
	fs.fail("chat.postMessage", fakeFailure{status: http.StatusTooManyRequests, retryAfter: "1"})
	_, err = d.DeliverDue(ctx)
	require.NoError(t, err)
	m, err := store.GetOutbox(ctx, msg.Key)
	require.NoError(t, err)
	require.True(t, m.Pending())
	require.Equal(t, 1, m.Attempts)

	now = now.Add(time.Second)
	_, err = d.DeliverDue(ctx)
	require.NoError(t, err)
	posts := fs.callsOf("chat.postMessage")
	require.Len(t, posts, parts+1, "every part once, plus the refused attempt")
	require.Contains(t, posts[0].Form.Get("text"), "Summary of the fix")
	require.NotContains(t, posts[2].Form.Get("text"), "Summary of the fix")
	require.Len(t, fs.shown(msg.Key), parts)
	m, err = store.GetOutbox(ctx, msg.Key)
	require.NoError(t, err)
	require.False(t, m.Pending())
	require.Len(t, strings.Fields(m.RemoteID), parts)
	require.Equal(t, posts[0].TS, strings.Fields(m.RemoteID)[0])
}

// TestSinkEditThatGrowsAReplyResumes: a delivered one-part reply is edited
// into a long one; the third part fails, and the retry finds the part the
// failed try added instead of posting it again.
func TestSinkEditThatGrowsAReplyResumes(t *testing.T) {
	fs := newFakeSlack(t)
	api := slack.New("xoxb-test", slack.OptionAPIURL(fs.apiURL()))
	s := NewSink(api, SinkOptions{ChannelInterval: time.Millisecond, BotID: func() string { return testBotID }})
	ctx := context.Background()
	msg := bot.OutboxMessage{Key: "wi_7/reply", Thread: thread, Kind: bot.OutboxReply, Text: "short", Version: 1, CreatedAt: time.Now()}
	id, err := s.Deliver(ctx, msg)
	require.NoError(t, err)

	msg.Text, msg.Version, msg.RemoteID = longReply(), 2, id
	parts := len(splitMessage(msg.Text, maxReplyRunes))
	require.Greater(t, parts, 2)
	fs.fail("chat.postMessage", fakeFailure{pass: true})
	fs.fail("chat.postMessage", fakeFailure{code: "internal_error"})
	_, err = s.Deliver(ctx, msg)
	require.Error(t, err)
	got, err := s.Deliver(ctx, msg)
	require.NoError(t, err)
	require.Len(t, strings.Fields(got), parts)
	require.Equal(t, id, strings.Fields(got)[0])
	require.Len(t, fs.shown("wi_7/reply"), parts, "every part shown once")
}

// TestSinkFindsWhatItPosted: Find reads the thread with its metadata and
// returns what this bot posted for the key, parts in order, and nothing for
// reactions, other keys or other bots.
func TestSinkFindsWhatItPosted(t *testing.T) {
	fs := newFakeSlack(t)
	api := slack.New("xoxb-test", slack.OptionAPIURL(fs.apiURL()))
	s := NewSink(api, SinkOptions{ChannelInterval: time.Millisecond, BotID: func() string { return testBotID }})
	ctx := context.Background()
	status := statusMsg()
	status.CreatedAt = time.Now()
	_, found, err := s.Find(ctx, status)
	require.NoError(t, err)
	require.False(t, found)

	id, err := s.Deliver(ctx, status)
	require.NoError(t, err)
	got, found, err := s.Find(ctx, status)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, id, got)
	replies := fs.callsOf("conversations.replies")
	require.Equal(t, "1", replies[len(replies)-1].Form.Get("include_all_metadata"))
	require.Equal(t, thread.ThreadTS, replies[len(replies)-1].Form.Get("ts"))

	other := status
	other.Key = "wi_8/status"
	_, found, err = s.Find(ctx, other)
	require.NoError(t, err)
	require.False(t, found, "another key")

	someoneElse := NewSink(api, SinkOptions{BotID: func() string { return "BOTHER" }})
	_, found, err = someoneElse.Find(ctx, status)
	require.NoError(t, err)
	require.False(t, found, "another bot's message is not ours to adopt")

	before := len(fs.callsOf("conversations.replies"))
	_, found, err = s.Find(ctx, bot.OutboxMessage{Key: "wi_7/reaction/eyes", Thread: thread, Kind: bot.OutboxReaction})
	require.NoError(t, err)
	require.False(t, found, "reactions are never looked for")
	require.Len(t, fs.callsOf("conversations.replies"), before)
}

func TestSinkPacesAChannel(t *testing.T) {
	s, fs := newTestSink(t, 100*time.Millisecond)
	start := time.Now()
	for i := range 3 {
		msg := bot.OutboxMessage{Key: "k" + string(rune('0'+i)), Thread: thread, Kind: bot.OutboxReply, Text: "part", Version: 1}
		_, err := s.Deliver(context.Background(), msg)
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
	require.Len(t, fs.callsOf("chat.postMessage"), 3)

	// A channel Slack told to back off answers with the delay instead of
	// holding the outbox, and another channel is not held up by it.
	s.pace.hold("C1", time.Hour)
	_, err := s.Deliver(context.Background(), bot.OutboxMessage{Key: "held", Thread: thread, Kind: bot.OutboxReply, Text: "x", Version: 1})
	de, ok := bot.AsDeliveryError(err)
	require.True(t, ok)
	require.Greater(t, de.RetryAfter, 59*time.Minute)
	require.Len(t, fs.callsOf("chat.postMessage"), 3)
	other := bot.OutboxMessage{Key: "o", Thread: bot.SlackThread(testTeam, "C2", "1.2"), Kind: bot.OutboxReply, Text: "hi", Version: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = s.Deliver(ctx, other)
	require.NoError(t, err)
}

func approvalMsg(state, by string) bot.OutboxMessage {
	return bot.OutboxMessage{Key: "approval/ap_1", Thread: thread, WorkItemID: "wi_7", Kind: bot.OutboxReply, Version: 1,
		Text: "🔐 ops wants to run bash",
		Approval: &bot.ApprovalView{ID: "ap_1", Agent: "ops", Profile: "deployer", Tool: "bash",
			Arguments: `{"command":"kubectl apply -f app.yaml"}`, Reason: `command "kubectl apply" needs approval`,
			State: state, DecidedBy: by, ExpiresAt: time.Date(2026, 1, 2, 3, 19, 0, 0, time.UTC)}}
}

// TestSinkApprovalPromptThenOutcome checks the Block Kit of an approval
// request against golden files (SWITCHYARD_UPDATE_GOLDEN=1 rewrites them):
// the buttons while it waits, then the same message edited into who
// decided, without buttons.
func TestSinkApprovalPromptThenOutcome(t *testing.T) {
	s, fs := newTestSink(t, time.Millisecond)
	ctx := context.Background()

	id, err := s.Deliver(ctx, approvalMsg("pending", ""))
	require.NoError(t, err)
	posts := fs.callsOf("chat.postMessage")
	require.Len(t, posts, 1)
	require.Equal(t, "1700000001.000100", posts[0].Form.Get("thread_ts"), "asked in the thread")
	requireGoldenJSON(t, "testdata/approval_pending.json", posts[0].Form.Get("blocks"))

	decided := approvalMsg("approved", "U42")
	decided.RemoteID, decided.Version = id, 2
	_, err = s.Deliver(ctx, decided)
	require.NoError(t, err)
	updates := fs.callsOf("chat.update")
	require.Len(t, updates, 1, "the prompt is edited, not posted again")
	require.Equal(t, id, updates[0].Form.Get("ts"))
	requireGoldenJSON(t, "testdata/approval_approved.json", updates[0].Form.Get("blocks"))
	require.NotContains(t, updates[0].Form.Get("blocks"), ActionApprove, "no buttons once decided")

	for state, want := range map[string]string{
		"rejected": "Denied by ana", "expired": "Nobody decided in time", "cancelled": "The run ended before a decision",
	} {
		blocks, err := json.Marshal(approvalBlocks(approvalMsg(state, "ana").Approval))
		require.NoError(t, err)
		require.Contains(t, string(blocks), want, state)
	}
}

func requireGoldenJSON(t *testing.T, path, got string) {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(got), &v))
	pretty, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	pretty = append(pretty, '\n')
	if os.Getenv("SWITCHYARD_UPDATE_GOLDEN") != "" {
		require.NoError(t, os.WriteFile(path, pretty, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file missing: run with SWITCHYARD_UPDATE_GOLDEN=1")
	require.Equal(t, string(want), string(pretty))
}

// TestSinkAdoptsNothingPlantedInTheThread: messages in the thread whose
// metadata names the key, written by a person, another app or a bot
// without an id, are never taken for the bot's own; so a crash cannot
// turn someone else's message into the reply the bot then edits, or a
// part of it.
func TestSinkAdoptsNothingPlantedInTheThread(t *testing.T) {
	fs := newFakeSlack(t)
	api := slack.New("xoxb-test", slack.OptionAPIURL(fs.apiURL()))
	s := NewSink(api, SinkOptions{ChannelInterval: time.Millisecond, BotID: func() string { return testBotID }})
	ctx := context.Background()
	reply := bot.OutboxMessage{Key: "wi_7/reply", Thread: thread, WorkItemID: "wi_7", Kind: bot.OutboxReply, Version: 1,
		Text: longReply(), CreatedAt: time.Now()}
	plant := func(botID string, part any) {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		fs.nextTS++
		fs.messages = append(fs.messages, &fakeMessage{Channel: thread.Channel, ThreadTS: thread.ThreadTS,
			TS: fmt.Sprintf("%d.%06d", fs.epoch, fs.nextTS), Text: "planted", BotID: botID,
			Metadata: map[string]any{"event_type": outboxMetadata, "event_payload": map[string]any{"key": reply.Key, "part": part}}})
	}
	for _, botID := range []string{"", "BOTHER"} {
		for _, part := range []any{0, 1, -1, 999, 1e9, "0", nil} {
			plant(botID, part)
		}
	}
	_, found, err := s.Find(ctx, reply)
	require.NoError(t, err)
	require.False(t, found, "nothing in the thread is the bot's")

	// The bot's own first part is found, and none of the planted ones
	// joins it.
	first := splitMessage(reply.Text, maxReplyRunes)[0]
	ts, err := s.post(ctx, reply, 0, []slack.MsgOption{slack.MsgOptionText(escape(first), false)})
	require.NoError(t, err)
	got, found, err := s.Find(ctx, reply)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, ts, got)
}

// TestSinkCutsAReplyTooLongForSlack: a reply of 48 parts' worth is posted as
// maxReplyParts messages, the text's beginning in order, the last saying it
// is cut there and how long the whole is; an edit and a retry after an
// interrupted post keep to the same messages.
func TestSinkCutsAReplyTooLongForSlack(t *testing.T) {
	s, fs := newTestSink(t, time.Nanosecond)
	line := strings.Repeat("word ", 100) + "\n"
	text := strings.Repeat(line, 240)
	require.Len(t, splitMessage(text, maxReplyRunes), 48)
	msg := bot.OutboxMessage{Key: "wi_7/reply", Thread: thread, Kind: bot.OutboxReply, Text: text, Version: 1, CreatedAt: time.Now()}
	id, err := s.Deliver(context.Background(), msg)
	require.NoError(t, err)
	require.Len(t, strings.Fields(id), maxReplyParts)
	shown := fs.shown("wi_7/reply")
	require.Len(t, shown, maxReplyParts)
	var joined strings.Builder
	for _, m := range shown[:maxReplyParts-1] {
		joined.WriteString(m.Text)
	}
	last := shown[maxReplyParts-1].Text
	body, note, ok := strings.Cut(last, "\n\n_(")
	require.True(t, ok, "the last part says the reply is cut: %q", last)
	joined.WriteString(body)
	require.True(t, strings.HasPrefix(text, joined.String()), "the parts are the reply's beginning")
	require.Equal(t, "The reply is cut here: it is 120240 characters long, and Slack gets at most 10 messages of it.)_", note)

	// Delivered again, as after an interrupted post or an edit: the same
	// messages, and no more.
	msg.Attempted = true
	found, ok, err := s.Find(context.Background(), msg)
	require.NoError(t, err)
	require.True(t, ok)
	msg.RemoteID, msg.Version = found, 2
	_, err = s.Deliver(context.Background(), msg)
	require.NoError(t, err)
	require.Len(t, fs.callsOf("chat.postMessage"), maxReplyParts)
	require.Len(t, fs.shown("wi_7/reply"), maxReplyParts)
}
