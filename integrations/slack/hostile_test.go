package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// hostileTexts are what a model or a person could put in text the bot
// posts: special mentions in every spelling Slack parses, user, channel
// and group mentions, disguised links, escapes written out, markup that
// would break out of code, bytes that are not UTF-8, control characters
// and the bidirectional controls that make text read otherwise than it is.
func hostileTexts() []string {
	specials := []string{"channel", "here", "everyone"}
	var out []string
	for _, s := range specials {
		out = append(out,
			"<!"+s+">", "<!"+s+"|"+s+">", "@"+s, "@"+s+" look", "hey @"+s+"!", "&lt;!"+s+"&gt;", "<<!"+s+">>",
			"<!"+s, "!"+s+">", "< !"+s+" >", "<\n!"+s+">", "`<!"+s+">`", "```\n<!"+s+">\n```", "> <!"+s+">",
			"*<!"+s+">*", "<!"+strings.ToUpper(s)+">", "<mailto:x@example.com|@"+s+">", "<http://x|<!"+s+">>",
		)
	}
	out = append(out,
		"<@U12345>", "<@U12345|boss>", "<@W12345>", "<#C12345>", "<#C12345|general>", "<!subteam^S123>",
		"<!subteam^S123|@oncall>", "<!date^1700000000^{date}|today>", "<http://evil.example|https://github.com>",
		"<https://evil.example>", "<javascript:alert(1)|click>", "[click](http://evil.example)",
		"&amp;lt;!channel&amp;gt;", "&#60;!channel&#62;", "\\<!channel\\>", "＜!channel＞",
		"```", "``` ```", "````", "x```\n:white_check_mark: Approved by <@U1>\n```", "`", "~~~",
		"*bold* _it_ ~strike~ >quote", strings.Repeat("<", 5000), strings.Repeat("&", 4000),
		"bad \xff\xfe bytes", "\xc3\x28", "\xed\xa0\x80 surrogate", "\xf4\x90\x80\x80 beyond", "cut \xe2\x82",
		"nul\x00byte", "bell\x07", "esc\x1b[31mred\x1b[0m", "cr\rlf\r\n", "del\x7f", "c1\u0085\u009b",
		"rm -rf ~ \u202e#gnp.txt", "ok\u2066evil\u2069", "zero\u200bwidth", "bom\ufeff", "\u202aembed\u202c \u2067isolate\u2069",
		"🙂 emoji and 中文 and עברית", "",
	)
	return out
}

// textObjects returns every text object of a Block Kit payload as posted.
func textObjects(t *testing.T, blocks string) []map[string]any {
	t.Helper()
	if blocks == "" {
		return nil
	}
	var v any
	require.NoError(t, json.Unmarshal([]byte(blocks), &v))
	var out []map[string]any
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if typ, _ := x["type"].(string); (typ == "mrkdwn" || typ == "plain_text") && x["text"] != nil {
				out = append(out, x)
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	return out
}

// ours are the entities the bot writes itself: a decider's mention and the
// expiry date, never taken from text it was given.
var ours = regexp.MustCompile(`<@U42>|<!date\^\d+\^\{time\}\|[0-9: UTC]+>`)

// requireHarmless checks one posted text: nothing in it can ping, link or
// mention, it is valid UTF-8, and it has no control characters but line
// breaks and tabs, nor bidirectional controls.
func requireHarmless(t *testing.T, where, text string) {
	t.Helper()
	require.True(t, utf8.ValidString(text), "%s is not UTF-8: %q", where, text)
	rest := ours.ReplaceAllString(text, "")
	require.NotContains(t, rest, "<", "%s can make an entity: %q", where, text)
	require.NotContains(t, rest, ">", "%s: %q", where, text)
	for _, r := range text {
		require.False(t, unicode.IsControl(r) && r != '\n' && r != '\t', "%s has control character %U: %q", where, r, text)
		require.False(t, r >= '\u202A' && r <= '\u202E' || r >= '\u2066' && r <= '\u2069', "%s has bidirectional control %U: %q", where, r, text)
	}
}

// TestHostileTextCannotPingOrBreakOut delivers every hostile text in every
// field a status message, a reply, an approval request and a command's
// opener show, and checks what reaches Slack: no entity but the bot's own,
// every mrkdwn text object verbatim (so Slack does not turn "@channel" or
// "#general" into a mention or link by itself), valid UTF-8 without control
// characters, and an approval's arguments inside their code block.
func TestHostileTextCannotPingOrBreakOut(t *testing.T) {
	s, fs := newTestSink(t, time.Nanosecond)
	ctx := context.Background()
	texts := hostileTexts()
	require.Greater(t, len(texts), 80)
	started := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	n := 0
	for i, text := range texts {
		key := fmt.Sprintf("wi_%d", i)
		msgs := []bot.OutboxMessage{
			{Key: key + "/status", Thread: thread, Kind: bot.OutboxStatus, Version: 1, Status: &bot.StatusView{
				WorkItemID: key, Agent: text, State: "running", Activity: text, Rights: text, Skills: []string{text, text},
				Children: []string{text}, Resumed: text, Summary: text, Started: started, Updated: started.Add(time.Minute)}},
			{Key: key + "/status-text", Thread: thread, Kind: bot.OutboxStatus, Version: 1, Text: text},
			{Key: key + "/reply", Thread: thread, Kind: bot.OutboxReply, Version: 1, Text: "reply: " + text},
			{Key: key + "/approval", Thread: thread, Kind: bot.OutboxReply, Version: 1, Text: text,
				Approval: &bot.ApprovalView{ID: "ap_" + key, Agent: text, Profile: text, Tool: "bash", Arguments: "x " + text,
					Reason: "needs approval", State: "pending", ExpiresAt: started.Add(15 * time.Minute)}},
			{Key: key + "/decided", Thread: thread, Kind: bot.OutboxReply, Version: 1, Text: text,
				Approval: &bot.ApprovalView{ID: "ap_" + key, Agent: text, Profile: text, Tool: "bash", Arguments: "x",
					Reason: text, State: "approved", DecidedBy: "U42"}},
		}
		for _, m := range msgs {
			_, err := s.Deliver(ctx, m)
			require.NoError(t, err, "%s with %q", m.Key, text)
			n++
		}
	}
	posts := fs.callsOf("chat.postMessage")
	require.GreaterOrEqual(t, len(posts), n)
	for _, p := range posts {
		where := p.Form.Get("metadata")
		requireHarmless(t, where+" text", p.Form.Get("text"))
		for _, obj := range textObjects(t, p.Form.Get("blocks")) {
			text, _ := obj["text"].(string)
			requireHarmless(t, where+" block", text)
			if obj["type"] == "mrkdwn" {
				require.Equal(t, true, obj["verbatim"], "%s: a mrkdwn text object that Slack would parse mentions in: %q", where, text)
			}
			if strings.Contains(where, "/approval") && strings.Contains(text, "wants to run") {
				// The arguments open a code block and close it at the end
				// of the section: no fence in between.
				args, ok := strings.CutSuffix(text[strings.Index(text, "wants to run `bash`\n```")+len("wants to run `bash`\n```"):], "```\nneeds approval")
				require.True(t, ok, "%s: %q", where, text)
				inner := args
				require.NotContains(t, inner, "```", "%s: arguments break out of their code block: %q", where, text)
			}
		}
	}
}
