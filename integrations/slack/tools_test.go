package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

// toolsFake extends the fake Slack with the Web API methods the agent tools
// read: conversations.replies, users.info and users.lookupByEmail. It serves
// in front of the base fake, which answers every other method and keeps the
// record of calls and queued failures for all of them.
type toolsFake struct {
	*fakeSlack

	mu       sync.Mutex
	threads  map[string][]map[string]any // channel/ts of the parent -> messages, parent first
	users    map[string]map[string]any   // id -> user object
	pageSize int                         // most messages per conversations.replies page; 0 means Slack's 1000
}

func newToolsFake(t *testing.T) *toolsFake {
	t.Helper()
	fs := newFakeSlack(t)
	tf := &toolsFake{fakeSlack: fs, threads: map[string][]map[string]any{}, users: map[string]map[string]any{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/{method}", tf.serveAPI)
	mux.HandleFunc("/ws", fs.serveSocket)
	// Replaced before anyone has its address; the base server closes on its
	// own cleanup.
	fs.srv = httptest.NewServer(mux)
	t.Cleanup(fs.srv.Close)
	return tf
}

// addThread stores a thread: the parent message first, then its replies.
func (tf *toolsFake) addThread(channel string, msgs ...map[string]any) {
	tf.mu.Lock()
	defer tf.mu.Unlock()
	tf.threads[channel+"/"+msgs[0]["ts"].(string)] = msgs
}

func (tf *toolsFake) addUser(u map[string]any) {
	tf.mu.Lock()
	defer tf.mu.Unlock()
	tf.users[u["id"].(string)] = u
}

func (tf *toolsFake) serveAPI(w http.ResponseWriter, r *http.Request) {
	method := r.PathValue("method")
	switch method {
	case "conversations.replies", "users.info", "users.lookupByEmail":
	default:
		tf.fakeSlack.serveAPI(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if f := tf.record(method, r.PostForm); f != nil {
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		if f.status != 0 && f.status != http.StatusOK {
			w.WriteHeader(f.status)
			return
		}
		writeJSON(w, map[string]any{"ok": false, "error": f.code})
		return
	}
	if r.PostForm.Get("token") != "xoxb-test" {
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	tf.mu.Lock()
	defer tf.mu.Unlock()
	switch method {
	case "conversations.replies":
		tf.replies(w, r.PostForm)
	case "users.info":
		u, ok := tf.users[r.PostForm.Get("user")]
		if !ok {
			writeJSON(w, map[string]any{"ok": false, "error": "user_not_found"})
			return
		}
		writeJSON(w, map[string]any{"ok": true, "user": u})
	case "users.lookupByEmail":
		for _, u := range tf.users {
			if u["profile"].(map[string]any)["email"] == r.PostForm.Get("email") {
				writeJSON(w, map[string]any{"ok": true, "user": u})
				return
			}
		}
		writeJSON(w, map[string]any{"ok": false, "error": "users_not_found"})
	}
}

// record notes a call with the base fake and returns the failure queued for
// it, if any.
func (tf *toolsFake) record(method string, form url.Values) *fakeFailure {
	fs := tf.fakeSlack
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.calls = append(fs.calls, apiCall{Method: method, Form: form})
	if q := fs.failures[method]; len(q) > 0 {
		f := q[0]
		fs.failures[method] = q[1:]
		if !f.pass {
			return &f
		}
	}
	return nil
}

// replies pages through a thread like Slack: ts may be any message of the
// thread, oldest excludes older replies (the parent still comes first, so
// the client must not rely on oldest to drop it), cursor and has_more page.
func (tf *toolsFake) replies(w http.ResponseWriter, form url.Values) {
	channel, ts := form.Get("channel"), form.Get("ts")
	var thread []map[string]any
	for key, msgs := range tf.threads {
		if !strings.HasPrefix(key, channel+"/") {
			continue
		}
		if slices.ContainsFunc(msgs, func(m map[string]any) bool { return m["ts"] == ts }) {
			thread = msgs
		}
	}
	if thread == nil {
		writeJSON(w, map[string]any{"ok": false, "error": "thread_not_found"})
		return
	}
	list := []map[string]any{thread[0]}
	for _, m := range thread[1:] {
		// Every ts in these tests has the same length, so strings order them.
		if oldest := form.Get("oldest"); oldest == "" || m["ts"].(string) > oldest {
			list = append(list, m)
		}
	}
	limit, _ := strconv.Atoi(form.Get("limit"))
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	if tf.pageSize > 0 {
		limit = min(limit, tf.pageSize)
	}
	offset, _ := strconv.Atoi(form.Get("cursor"))
	end := min(offset+limit, len(list))
	next := ""
	if end < len(list) {
		next = strconv.Itoa(end)
	}
	writeJSON(w, map[string]any{"ok": true, "messages": list[offset:end], "has_more": next != "",
		"response_metadata": map[string]any{"next_cursor": next}})
}

const toolThreadTS = "1700000000.000100"

var (
	toolSession   = bot.SlackThread(testTeam, "C1", toolThreadTS).Key()
	githubSession = bot.GitHubThread("acme", "app", 7).Key()
)

func slackMsg(user, ts, text string) map[string]any {
	return map[string]any{"type": "message", "user": user, "text": text, "ts": ts, "thread_ts": toolThreadTS}
}

// replyTS returns the ts of the i-th reply; all have the same length.
func replyTS(i int) string { return fmt.Sprintf("%d.000200", 1700000001+i) }

func slackUser(id, name, display, real string) map[string]any {
	return map[string]any{"id": id, "team_id": testTeam, "name": name, "real_name": real,
		"tz": "Europe/Lisbon", "tz_label": "Western European Time", "tz_offset": 3600,
		"profile": map[string]any{"display_name": display, "real_name": real, "title": "SRE",
			"email": name + "@acme.example", "phone": "+351 555 0100"}}
}

// toolsHarness runs the adapter against the extended fake and calls its
// tools through a real Toolset, registered next to the core tools.
type toolsHarness struct {
	*harness
	tf *toolsFake
	ts *tools.Toolset
}

func newToolsHarness(t *testing.T, tweak func(*Options)) *toolsHarness {
	t.Helper()
	tf := newToolsFake(t)
	tf.addUser(slackUser("U1", "alice", "alice", "Alice Liddell"))
	tf.addUser(slackUser("U2", "bob", "", "Bob Dylan"))
	tf.addUser(map[string]any{"id": testBotUser, "name": "switchyard", "is_bot": true, "profile": map[string]any{"display_name": "switchyard"}})
	h := newHarnessWith(t, ModeHTTP, tf.fakeSlack, newTestStore(t), tweak)
	reg, err := tools.NewRegistry(append(tools.Core(tools.CoreOptions{}), h.a.Tools()...)...)
	require.NoError(t, err)
	return &toolsHarness{harness: h, tf: tf, ts: tools.NewToolset(reg, tools.Scope{Agent: "coder"}, tools.ToolsetOptions{})}
}

func (th *toolsHarness) call(t *testing.T, session, name, input string) tools.Result {
	t.Helper()
	res := th.ts.Execute(context.Background(),
		tools.CallContext{SessionKey: session, WorkItemID: "wi_1", JobID: "job_1"}, name, json.RawMessage(input))
	for _, secret := range []string{"xoxb-test", "xapp-test", testSecret} {
		require.NotContains(t, res.Output, secret)
	}
	return res
}

func TestSlackToolsRegisterNextToCore(t *testing.T) {
	th := newToolsHarness(t, nil)
	var names []string
	for _, info := range th.ts.Visible() {
		if !strings.HasPrefix(info.Name, "slack_") {
			continue
		}
		names = append(names, info.Name)
		require.Equal(t, tools.KindIntegration, info.Kind, "Slack tools are not core tools")
		want := map[string]tools.Permission{
			PostMessageTool: tools.PermPush, AddReactionTool: tools.PermPush,
			ReadThreadTool: tools.PermRead, LookupUserTool: tools.PermRead,
		}[info.Name]
		require.Equal(t, []tools.Permission{want}, info.Permissions, "%s declares what it needs", info.Name)
		require.NotEmpty(t, info.Description)
		var schema struct {
			Type                 string                     `json:"type"`
			Properties           map[string]json.RawMessage `json:"properties"`
			AdditionalProperties *bool                      `json:"additionalProperties"`
		}
		require.NoError(t, json.Unmarshal(info.Schema, &schema), info.Name)
		require.Equal(t, "object", schema.Type)
		require.NotNil(t, schema.AdditionalProperties, info.Name)
		require.False(t, *schema.AdditionalProperties, info.Name)
		require.NotEmpty(t, schema.Properties)
	}
	require.ElementsMatch(t, names, append(ReadTools(), WriteTools()...))
	require.ElementsMatch(t, []string{PostMessageTool, ReadThreadTool, AddReactionTool, LookupUserTool}, names)
}

func TestPostMessage(t *testing.T) {
	cases := []struct {
		name, session, input string
		allowed              []string
		channel, threadTS    string // where it must land
	}{
		{name: "current thread by default", session: toolSession, input: `{"text":"done"}`,
			channel: "C1", threadTS: toolThreadTS},
		{name: "another thread of the current channel", session: toolSession, input: `{"text":"done","thread_ts":"1700000050.000100"}`,
			channel: "C1", threadTS: "1700000050.000100"},
		{name: "a new message in another channel", session: toolSession, input: `{"text":"done","channel":"C2"}`,
			channel: "C2"},
		{name: "a thread in another channel, written as Slack writes it", session: toolSession,
			input: `{"text":"done","channel":"<#C2|deploys>","thread_ts":"1700000050.000100"}`, channel: "C2", threadTS: "1700000050.000100"},
		{name: "from a GitHub run to a named channel", session: githubSession, input: `{"text":"done","channel":"C2"}`,
			channel: "C2"},
		{name: "an allowed channel", session: githubSession, input: `{"text":"done","channel":"C2"}`, allowed: []string{"C2"},
			channel: "C2"},
		{name: "the current channel even when not listed", session: toolSession, input: `{"text":"done"}`, allowed: []string{"C2"},
			channel: "C1", threadTS: toolThreadTS},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			th := newToolsHarness(t, func(o *Options) { o.AllowedChannels = tc.allowed })
			res := th.call(t, tc.session, PostMessageTool, tc.input)
			require.False(t, res.IsError, res.Output)
			posts := th.fs.callsOf("chat.postMessage")
			require.Len(t, posts, 1)
			require.Equal(t, tc.channel, posts[0].Form.Get("channel"))
			require.Equal(t, tc.threadTS, posts[0].Form.Get("thread_ts"))
			require.Equal(t, "done", posts[0].Form.Get("text"))
			require.Contains(t, posts[0].Form.Get("metadata"), `"work_item":"wi_1"`)
			require.Contains(t, res.Output, "message ts "+posts[0].TS)
			require.Contains(t, res.Output, "channel "+tc.channel)
		})
	}
}

func TestPostMessageEscapesAndRedacts(t *testing.T) {
	th := newToolsHarness(t, nil)
	res := th.call(t, toolSession, PostMessageTool,
		`{"text":"<!channel> <!here> ping <@U1> & a < b; token xoxb-test and xoxp-123-456-abcdef"}`)
	require.False(t, res.IsError, res.Output)
	posts := th.fs.callsOf("chat.postMessage")
	require.Len(t, posts, 1)
	require.Equal(t, "&lt;!channel&gt; &lt;!here&gt; ping &lt;@U1&gt; &amp; a &lt; b; token [REDACTED] and [REDACTED]",
		posts[0].Form.Get("text"))
}

func TestPostMessageSplitsLongText(t *testing.T) {
	th := newToolsHarness(t, nil)
	text := strings.Repeat(strings.Repeat("word ", 19)+"\n", 70) // 7000 characters
	input, err := json.Marshal(map[string]string{"text": text})
	require.NoError(t, err)
	res := th.call(t, toolSession, PostMessageTool, string(input))
	require.False(t, res.IsError, res.Output)
	posts := th.fs.callsOf("chat.postMessage")
	require.Len(t, posts, 3)
	var joined strings.Builder
	for _, p := range posts {
		require.Equal(t, toolThreadTS, p.Form.Get("thread_ts"))
		require.LessOrEqual(t, utf8.RuneCountInString(p.Form.Get("text")), maxReplyRunes)
		joined.WriteString(p.Form.Get("text"))
	}
	require.Equal(t, strings.Join(strings.Fields(text), ""), strings.Join(strings.Fields(joined.String()), ""))
	require.Contains(t, res.Output, "Posted 3 messages")

	res = th.call(t, toolSession, PostMessageTool, fmt.Sprintf(`{"text":%q}`, strings.Repeat("x", maxPostRunes+1)))
	require.True(t, res.IsError)
	require.False(t, res.Refused)
	require.Contains(t, res.Output, "at most 12000")
	require.Len(t, th.fs.callsOf("chat.postMessage"), 3)
}

func TestPostMessageRefusals(t *testing.T) {
	cases := []struct {
		name, session, input string
		allowed              []string
		reason               string
	}{
		{name: "a GitHub run without a channel", session: githubSession, input: `{"text":"hi"}`,
			reason: "slack_post_message: this run is not in a Slack thread (its thread is github:acme/app#7)"},
		{name: "a local run with only thread_ts", session: "local:console", input: `{"text":"hi","thread_ts":"1700000050.000100"}`,
			reason: "not in a Slack thread"},
		{name: "a run without a thread", session: "", input: `{"text":"hi"}`,
			reason: "its thread is none"},
		{name: "a channel outside the allow list", session: toolSession, input: `{"text":"hi","channel":"C3"}`, allowed: []string{"C2", "C4"},
			reason: "channel C3 is not in slack.allowed_channels; allowed are this run's channel C1 and C2, C4"},
		{name: "from GitHub, outside the allow list", session: githubSession, input: `{"text":"hi","channel":"C3"}`, allowed: []string{"C2"},
			reason: "channel C3 is not in slack.allowed_channels; allowed are C2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			th := newToolsHarness(t, func(o *Options) { o.AllowedChannels = tc.allowed })
			res := th.call(t, tc.session, PostMessageTool, tc.input)
			require.True(t, res.Refused, res.Output)
			require.Contains(t, res.Output, tc.reason)
			require.Empty(t, th.fs.callsOf("chat.postMessage"))
		})
	}
}

func TestPostMessageInvalidInput(t *testing.T) {
	th := newToolsHarness(t, nil)
	for input, want := range map[string]string{
		`{"text":"hi","channel":"#general"}`:          `channel "#general" is not a channel id`,
		`{"text":"hi","thread_ts":"yesterday"}`:       `thread_ts "yesterday" is not a Slack message ts`,
		`{"text":"  "}`:                               "text is empty",
		`{"text":"hi","channels":"C2"}`:               `unknown field "channels"`,
		`{"text":"hi","channel":"C2","extra":true}`:   `unknown field "extra"`,
		`{"message":"hi"}`:                            `unknown field "message"`,
		`{"text":"hi","thread_ts":1700000050.000100}`: "invalid input",
	} {
		res := th.call(t, toolSession, PostMessageTool, input)
		require.True(t, res.IsError, input)
		require.False(t, res.Refused, input)
		require.Contains(t, res.Output, want, input)
	}
	require.Empty(t, th.fs.callsOf("chat.postMessage"))
}

func TestPostMessageErrorsAsText(t *testing.T) {
	cases := []struct {
		name    string
		failure fakeFailure
		want    string
	}{
		{"not in channel", fakeFailure{code: "not_in_channel"},
			"error: slack chat.postMessage: the bot is not a member of that channel; someone must invite it first (not_in_channel)"},
		{"archived", fakeFailure{code: "is_archived"}, "the channel is archived (is_archived)"},
		{"unknown code", fakeFailure{code: "fatal_error"}, "error: slack chat.postMessage: fatal_error"},
		{"server error", fakeFailure{status: http.StatusBadGateway}, "error: slack chat.postMessage: "},
		{"a code carrying a token", fakeFailure{code: "invalid_auth for xoxb-test and xoxb-9-9-leak"}, "[REDACTED]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			th := newToolsHarness(t, nil)
			th.fs.fail("chat.postMessage", tc.failure)
			res := th.call(t, toolSession, PostMessageTool, `{"text":"hi"}`)
			require.True(t, res.IsError)
			require.False(t, res.Refused)
			require.Contains(t, res.Output, tc.want)
			require.NotContains(t, res.Output, "xoxb-9-9-leak")
		})
	}
}

func TestPostMessageRateLimits(t *testing.T) {
	th := newToolsHarness(t, nil)

	// A short Retry-After is waited out once.
	th.fs.fail("chat.postMessage", fakeFailure{status: http.StatusTooManyRequests, retryAfter: "1"})
	res := th.call(t, toolSession, PostMessageTool, `{"text":"one"}`)
	require.False(t, res.IsError, res.Output)
	require.Len(t, th.fs.callsOf("chat.postMessage"), 2)

	// A long one goes back to the model, and holds the channel for the Sink
	// and the tools alike.
	th.fs.fail("chat.postMessage", fakeFailure{status: http.StatusTooManyRequests, retryAfter: "30"})
	res = th.call(t, toolSession, PostMessageTool, `{"text":"two"}`)
	require.True(t, res.IsError)
	require.Contains(t, res.Output, "rate limited by Slack; try again in 30s")
	require.Len(t, th.fs.callsOf("chat.postMessage"), 3)

	res = th.call(t, toolSession, PostMessageTool, `{"text":"three"}`)
	require.True(t, res.IsError)
	require.Contains(t, res.Output, "Slack is rate limiting channel C1; try again in")
	require.Len(t, th.fs.callsOf("chat.postMessage"), 3, "nothing sent while the channel is held")

	// Other channels are not held.
	res = th.call(t, toolSession, PostMessageTool, `{"text":"four","channel":"C2"}`)
	require.False(t, res.IsError, res.Output)
}

func TestPostMessageSharesTheSinkPacing(t *testing.T) {
	const interval = 200 * time.Millisecond
	th := newToolsHarness(t, func(o *Options) { o.ChannelInterval = interval })
	start := time.Now()
	_, err := th.a.Sink().Deliver(context.Background(), bot.OutboxMessage{Key: "wi_1/reply", Kind: bot.OutboxReply, Version: 1,
		Thread: bot.SlackThread(testTeam, "C1", toolThreadTS), Text: "summary"})
	require.NoError(t, err)
	for range 2 {
		res := th.call(t, toolSession, PostMessageTool, `{"text":"more"}`)
		require.False(t, res.IsError, res.Output)
	}
	// Three messages in one channel take at least two intervals.
	require.GreaterOrEqual(t, time.Since(start), 2*interval)
	require.Len(t, th.fs.callsOf("chat.postMessage"), 3)
}

func TestReadThread(t *testing.T) {
	th := newToolsHarness(t, nil)
	th.tf.addThread("C1",
		slackMsg("U1", toolThreadTS, "<@UBOT> @coder fix the flaky test in <https://github.com/acme/app/pull/7|PR 7> &amp; tell <#C9|ops> &lt;now&gt; <!here>"),
		map[string]any{"type": "message", "user": testBotUser, "bot_id": testBotID, "text": "On it.", "ts": replyTS(0), "thread_ts": toolThreadTS},
		map[string]any{"type": "message", "subtype": "bot_message", "username": "deploybot", "bot_id": "B9", "text": "deployed <https://ci.example/1>", "ts": replyTS(1), "thread_ts": toolThreadTS},
		map[string]any{"type": "message", "user": "U2", "text": "log attached, cc <@U1> <@U77>; my token is xoxb-123-456-abc", "ts": replyTS(2), "thread_ts": toolThreadTS,
			"files": []map[string]any{{"id": "F1", "name": "flaky.log"}}},
	)
	res := th.call(t, toolSession, ReadThreadTool, `{}`)
	require.False(t, res.IsError, res.Output)
	want := "Thread 1700000000.000100 of channel C1: 4 shown, oldest first.\n" +
		"--- 1700000000.000100 · 2023-11-14 22:13 UTC · alice (U1)\n" +
		"@switchyard (UBOT) @coder fix the flaky test in PR 7 (https://github.com/acme/app/pull/7) & tell #ops (C9) <now> @here\n" +
		"--- 1700000001.000200 · 2023-11-14 22:13 UTC · switchyard (UBOT) [this bot]\n" +
		"On it.\n" +
		"--- 1700000002.000200 · 2023-11-14 22:13 UTC · deploybot (bot B9)\n" +
		"deployed https://ci.example/1\n" +
		"--- 1700000003.000200 · 2023-11-14 22:13 UTC · Bob Dylan (U2)\n" +
		"log attached, cc @alice (U1) @U77; my token is [REDACTED]\n" +
		"[file: flaky.log]\n"
	require.Equal(t, want, res.Output)

	calls := th.fs.callsOf("conversations.replies")
	require.Len(t, calls, 1)
	require.Equal(t, "C1", calls[0].Form.Get("channel"))
	require.Equal(t, toolThreadTS, calls[0].Form.Get("ts"))
	// Names are looked up once each, including the unknown U77.
	require.Len(t, th.fs.callsOf("users.info"), 4)
}

func TestReadThreadTruncatesAndContinues(t *testing.T) {
	th := newToolsHarness(t, nil)
	th.tf.pageSize = 7 // several pages per read
	msgs := []map[string]any{slackMsg("U1", toolThreadTS, "root")}
	for i := range 30 {
		msgs = append(msgs, slackMsg("U2", replyTS(i), fmt.Sprintf("reply %d", i)))
	}
	th.tf.addThread("C1", msgs...)

	res := th.call(t, toolSession, ReadThreadTool, `{"limit":10}`)
	require.False(t, res.IsError, res.Output)
	require.Contains(t, res.Output, ": 10 shown, oldest first.")
	require.Contains(t, res.Output, "\nroot\n")
	require.Contains(t, res.Output, "reply 8\n")
	require.NotContains(t, res.Output, "reply 9\n")
	require.Contains(t, res.Output, `[truncated: more messages follow; call slack_read_thread again with the same channel and thread_ts and after_ts "`+replyTS(8)+`" to read on]`)

	res = th.call(t, toolSession, ReadThreadTool, `{"limit":10,"after_ts":"`+replyTS(8)+`"}`)
	require.False(t, res.IsError, res.Output)
	require.Contains(t, res.Output, "messages after "+replyTS(8)+": 10 shown")
	require.NotContains(t, res.Output, "root", "the parent is not repeated")
	require.Contains(t, res.Output, "\nreply 9\n")
	require.Contains(t, res.Output, "reply 18\n")
	require.Contains(t, res.Output, "[truncated")

	// The rest fits: no note.
	res = th.call(t, toolSession, ReadThreadTool, `{"after_ts":"`+replyTS(18)+`"}`)
	require.False(t, res.IsError, res.Output)
	require.Contains(t, res.Output, ": 11 shown")
	require.Contains(t, res.Output, "reply 29\n")
	require.NotContains(t, res.Output, "truncated")

	res = th.call(t, toolSession, ReadThreadTool, `{"after_ts":"`+replyTS(29)+`"}`)
	require.False(t, res.IsError, res.Output)
	require.Equal(t, "No messages after "+replyTS(29)+" in thread "+toolThreadTS+" of channel C1.", res.Output)
}

func TestReadThreadCapsSize(t *testing.T) {
	th := newToolsHarness(t, nil)
	msgs := []map[string]any{slackMsg("U1", toolThreadTS, strings.Repeat("é", 6000))}
	for i := range 60 {
		msgs = append(msgs, slackMsg("U2", replyTS(i), strings.Repeat("x", 1000)))
	}
	th.tf.addThread("C1", msgs...)
	res := th.call(t, toolSession, ReadThreadTool, `{"limit":200}`)
	require.False(t, res.IsError, res.Output)
	require.Less(t, len(res.Output), maxThreadBytes+1024)
	require.True(t, utf8.ValidString(res.Output))
	require.Contains(t, res.Output, "… [message cut: 8000 bytes not shown]")
	require.Contains(t, res.Output, "[truncated: more messages follow")
}

func TestReadThreadElsewhere(t *testing.T) {
	th := newToolsHarness(t, func(o *Options) { o.AllowedChannels = []string{"C2"} })
	th.tf.addThread("C2", map[string]any{"type": "message", "user": "U1", "text": "in C2", "ts": "1700000077.000100"},
		map[string]any{"type": "message", "user": "U2", "text": "reply in C2", "ts": "1700000078.000100", "thread_ts": "1700000077.000100"})

	// Any message of the thread names it; from GitHub too.
	for _, session := range []string{toolSession, githubSession} {
		res := th.call(t, session, ReadThreadTool, `{"channel":"C2","thread_ts":"1700000078.000100"}`)
		require.False(t, res.IsError, res.Output)
		require.Contains(t, res.Output, "reply in C2")
	}

	res := th.call(t, toolSession, ReadThreadTool, `{"channel":"C2"}`)
	require.True(t, res.IsError)
	require.False(t, res.Refused)
	require.Contains(t, res.Output, "thread_ts is required to read a thread in channel C2")

	res = th.call(t, toolSession, ReadThreadTool, `{"channel":"C3","thread_ts":"1700000078.000100"}`)
	require.True(t, res.Refused)
	require.Contains(t, res.Output, "channel C3 is not in slack.allowed_channels")

	res = th.call(t, githubSession, ReadThreadTool, `{}`)
	require.True(t, res.Refused)
	require.Contains(t, res.Output, "slack_read_thread: this run is not in a Slack thread")

	res = th.call(t, toolSession, ReadThreadTool, `{"thread_ts":"1700000099.000100"}`)
	require.True(t, res.IsError)
	require.Equal(t, "error: slack conversations.replies: no thread with that ts in that channel (thread_not_found)", res.Output)

	res = th.call(t, toolSession, ReadThreadTool, `{"limit":500}`)
	require.True(t, res.IsError)
	require.Contains(t, res.Output, "limit must be between 1 and 200")
}

func TestReadThreadNamesAreACourtesy(t *testing.T) {
	th := newToolsHarness(t, nil)
	th.tf.addThread("C1", slackMsg("U1", toolThreadTS, "hello"))
	th.fs.fail("users.info", fakeFailure{code: "ratelimited"})
	res := th.call(t, toolSession, ReadThreadTool, `{}`)
	require.False(t, res.IsError, res.Output)
	require.Contains(t, res.Output, "· U1\nhello\n")
}

func TestAddReaction(t *testing.T) {
	cases := []struct {
		name, session, input string
		failure              *fakeFailure
		channel, ts, emoji   string
		output               string
	}{
		{name: "the thread's first message by default", session: toolSession, input: `{"name":":white_check_mark:"}`,
			channel: "C1", ts: toolThreadTS, emoji: "white_check_mark", output: "Reacted with :white_check_mark: to message " + toolThreadTS + " in channel C1."},
		{name: "another message of the channel", session: toolSession, input: `{"name":"eyes","ts":"1700000050.000100"}`,
			channel: "C1", ts: "1700000050.000100", emoji: "eyes"},
		{name: "a message elsewhere", session: githubSession, input: `{"name":"thumbsup::skin-tone-3","ts":"1700000050.000100","channel":"C2"}`,
			channel: "C2", ts: "1700000050.000100", emoji: "thumbsup::skin-tone-3"},
		{name: "already reacted is success", session: toolSession, input: `{"name":"eyes"}`, failure: &fakeFailure{code: "already_reacted"},
			channel: "C1", ts: toolThreadTS, emoji: "eyes", output: "The bot had already reacted with :eyes:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			th := newToolsHarness(t, nil)
			if tc.failure != nil {
				th.fs.fail("reactions.add", *tc.failure)
			}
			res := th.call(t, tc.session, AddReactionTool, tc.input)
			require.False(t, res.IsError, res.Output)
			calls := th.fs.callsOf("reactions.add")
			require.Len(t, calls, 1)
			require.Equal(t, tc.channel, calls[0].Form.Get("channel"))
			require.Equal(t, tc.ts, calls[0].Form.Get("timestamp"))
			require.Equal(t, tc.emoji, calls[0].Form.Get("name"))
			require.Contains(t, res.Output, tc.output)
		})
	}
}

func TestAddReactionRefusalsAndErrors(t *testing.T) {
	th := newToolsHarness(t, func(o *Options) { o.AllowedChannels = []string{"C2"} })
	cases := []struct {
		name, session, input string
		refused              bool
		want                 string
	}{
		{"outside Slack", githubSession, `{"name":"eyes"}`, true, "slack_add_reaction: this run is not in a Slack thread"},
		{"outside the allow list", toolSession, `{"name":"eyes","channel":"C3","ts":"1700000050.000100"}`, true, "channel C3 is not in slack.allowed_channels"},
		{"another channel needs ts", toolSession, `{"name":"eyes","channel":"C2"}`, false, "ts is required to react to a message in channel C2"},
		{"not an emoji name", toolSession, `{"name":"big smile"}`, false, `name "big smile" is not an emoji name`},
		{"an entity is not a name", toolSession, `{"name":"<!channel>"}`, false, "is not an emoji name"},
		{"bad ts", toolSession, `{"name":"eyes","ts":"now"}`, false, `ts "now" is not a Slack message ts`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := th.call(t, tc.session, AddReactionTool, tc.input)
			require.True(t, res.IsError)
			require.Equal(t, tc.refused, res.Refused, res.Output)
			require.Contains(t, res.Output, tc.want)
		})
	}
	require.Empty(t, th.fs.callsOf("reactions.add"))

	th.fs.fail("reactions.add", fakeFailure{code: "invalid_name"})
	res := th.call(t, toolSession, AddReactionTool, `{"name":"nosuchemoji"}`)
	require.Equal(t, "error: slack reactions.add: no emoji of that name in this workspace (invalid_name)", res.Output)
}

func TestLookupUser(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 0, 0, time.UTC) // a Friday
	th := newToolsHarness(t, func(o *Options) { o.Now = func() time.Time { return now } })
	want := "Slack user U1\n" +
		"handle: alice\n" +
		"display name: alice\n" +
		"real name: Alice Liddell\n" +
		"title: SRE\n" +
		"time zone: Europe/Lisbon, Western European Time (UTC+01:00); local time now Fri 16:04\n"
	for _, input := range []string{`{"user":"U1"}`, `{"user":"<@U1|alice>"}`, `{"user":"@U1"}`, `{"email":"alice@acme.example"}`} {
		res := th.call(t, toolSession, LookupUserTool, input)
		require.False(t, res.IsError, res.Output)
		require.Equal(t, want, res.Output, input)
		require.NotContains(t, res.Output, "@acme.example")
		require.NotContains(t, res.Output, "555")
	}
	require.Len(t, th.fs.callsOf("users.info"), 3)
	byEmail := th.fs.callsOf("users.lookupByEmail")
	require.Len(t, byEmail, 1)
	require.Equal(t, "alice@acme.example", byEmail[0].Form.Get("email"))

	// No Slack thread is needed to look someone up.
	res := th.call(t, githubSession, LookupUserTool, `{"user":"UBOT"}`)
	require.False(t, res.IsError, res.Output)
	require.Contains(t, res.Output, "handle: switchyard\n")
	require.Contains(t, res.Output, "bot: yes\n")
}

func TestLookupUserErrors(t *testing.T) {
	th := newToolsHarness(t, nil)
	for input, want := range map[string]string{
		`{}`:                                  "give user (an id such as U0123ABCD) or email",
		`{"user":"U1","email":"a@b.example"}`: "give user or email, not both",
		`{"user":"alice"}`:                    `user "alice" is not a user id`,
		`{"email":"not an address"}`:          `email "not an address" is not an email address`,
		`{"user":"U404"}`:                     "error: slack users.info: no Slack user with that id (user_not_found)",
		`{"email":"nobody@acme.example"}`:     "error: slack users.lookupByEmail: no Slack user with that email address (users_not_found)",
		`{"name":"alice"}`:                    `unknown field "name"`,
	} {
		res := th.call(t, toolSession, LookupUserTool, input)
		require.True(t, res.IsError, input)
		require.False(t, res.Refused, input)
		require.Contains(t, res.Output, want, input)
	}

	th.fs.fail("users.lookupByEmail", fakeFailure{code: "missing_scope"})
	res := th.call(t, toolSession, LookupUserTool, `{"email":"alice@acme.example"}`)
	require.True(t, res.IsError)
	require.Contains(t, res.Output, "lacks the users:read.email scope")
}

func TestPlainText(t *testing.T) {
	names := map[string]string{"U1": "alice"}
	for in, want := range map[string]string{
		"plain &lt;b&gt; &amp; c":                                 "plain <b> & c",
		"<@U1> and <@U2> and <@U3|carol>":                         "@alice (U1) and @U2 and @carol (U3)",
		"<#C1> <#C2|general>":                                     "#C1 #general (C2)",
		"<!here> <!channel|channel> <!everyone>":                  "@here @channel @everyone",
		"<!subteam^S1|@oncall> <!subteam^S2>":                     "@oncall @S2",
		"<!date^1392734382^{date_num}|Feb 18, 2014>":              "Feb 18, 2014",
		"<https://example.com> <https://example.com|example.com>": "https://example.com https://example.com",
		"<https://x.example/a?b=1&amp;c=2|the docs>":              "the docs (https://x.example/a?b=1&c=2)",
		"<mailto:a@b.example|a@b.example>":                        "a@b.example",
		"unterminated <@U1":                                       "unterminated <@U1",
		"<>":                                                      "",
	} {
		require.Equal(t, want, plainText(in, names), in)
	}
}

func TestCompareTS(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		sign int
	}{
		{"1700000000.000100", "1700000000.000100", 0},
		{"1700000000.000100", "1700000000.000200", -1},
		{"1700000001.000000", "1700000000.999999", 1},
		{"999999999.9", "1000000000.0", -1},
		{"1700000000.1", "1700000000.000100", 1},
		{"1700000000.1", "1700000000.100000", 0},
	} {
		got := compareTS(tc.a, tc.b)
		require.Equal(t, tc.sign, sign(got), "%s vs %s", tc.a, tc.b)
		require.Equal(t, -tc.sign, sign(compareTS(tc.b, tc.a)), "%s vs %s", tc.b, tc.a)
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func FuzzPlainText(f *testing.F) {
	for _, s := range []string{"<@U1> hi", "<#C1|general>", "<!here>", "<https://a.example|a>", "&lt;&amp;&gt;", "<<@U1>>", "<", "<|>", "<!subteam^>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := plainText(in, map[string]string{"U1": "alice"})
		if utf8.ValidString(in) {
			require.True(t, utf8.ValidString(out))
		}
		if !strings.Contains(in, "<") {
			require.Equal(t, unescape(in), out)
		}
		for _, id := range mentionedUsers(in) {
			require.Regexp(t, `^[UW][A-Z0-9]+$`, id)
		}
	})
}
