package bot_test

import (
	"strings"
	"testing"

	"github.com/switchyard/switchyard/bot"
)

func TestOutboxMessageValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  bot.OutboxMessage
		want string // "" when valid
	}{
		{"a GitHub thread", bot.OutboxMessage{Key: "wi_1/status", Thread: bot.GitHubThread("acme", "api", 7)}, ""},
		{"a Slack thread", bot.OutboxMessage{Key: "wi_1/status", Thread: bot.SlackThread("T1", "C1", "171.1")}, ""},
		{"a Slack channel's top level", bot.OutboxMessage{Key: "wi_1/status", Thread: bot.SlackThread("T1", "C1", "")}, ""},
		{"a local thread", bot.OutboxMessage{Key: "wi_1/status", Thread: bot.LocalThread("t1")}, ""},
		{"no key", bot.OutboxMessage{Thread: bot.LocalThread("t1")}, "outbox message without a key"},
		{"no thread", bot.OutboxMessage{Key: "wi_1/status"}, `outbox message "wi_1/status" has no thread`},
		{"a GitHub thread without a number", bot.OutboxMessage{Key: "wi_1/status", Thread: bot.GitHubThread("acme", "api", 0)}, "want github:<owner>/<repo>#<number>"},
		{"a Slack thread without a channel", bot.OutboxMessage{Key: "wi_1/status", Thread: bot.SlackThread("T1", "", "171.1")}, "want slack:<team>/<channel>/<thread_ts>"},
		{"a local thread with a newline", bot.OutboxMessage{Key: "wi_1/status", Thread: bot.LocalThread("a\nb")}, "no control characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.msg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || bot.ErrorCode(err) != bot.EINVALID || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an invalid-input error with %q", err, tc.want)
			}
		})
	}
}
