package bot_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

func TestParseMentions(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"@coder fix the flaky login test", []string{"coder"}},
		{"hey @Reviewer and @ops, look", []string{"Reviewer", "ops"}},
		{"mail ana@example.com please", nil},
		{"@ alone", nil},
		{"end with @docs.", []string{"docs"}},
		{"(@triage) please", []string{"triage"}},
		{"", nil},
		// Paths, scoped packages, teams and URLs are nobody addressed.
		{"bump @docs/theme to 2.0", nil},
		{"npm i -D @types/node @coder/cli", nil},
		{"cc @octo/reviewers", nil},
		{"see https://medium.com/@coder/why-tests-flake", nil},
		{"profile at https://mastodon.social/@coder", nil},
		{"@coder/@triage", nil},
		{"@coder, see @docs/theme", []string{"coder"}},
		{"@coder: /deploy is broken", []string{"coder"}},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, bot.ParseMentions(tt.text), tt.text)
	}
}

func TestParseCommand(t *testing.T) {
	tests := []struct {
		text, cmd, args string
	}{
		{"/deploy staging", "deploy", "staging"},
		{"/Deploy   staging now ", "deploy", "staging now"},
		{"please\n/review\nthanks", "review", ""},
		{"no command here", "", ""},
		{"a path /etc/passwd is not a command", "", ""},
		{"/etc/passwd", "", ""},
		{"/", "", ""},
	}
	for _, tt := range tests {
		cmd, args := bot.ParseCommand(tt.text)
		require.Equal(t, tt.cmd, cmd, tt.text)
		require.Equal(t, tt.args, args, tt.text)
	}
}

func TestDedupKey(t *testing.T) {
	ev := bot.Event{Source: "github", DeliveryID: "abc"}
	require.Equal(t, "github:abc", ev.DedupKey())
	require.Empty(t, (&bot.Event{Source: "local"}).DedupKey(), "no delivery id, no dedup")
}

func FuzzParseText(f *testing.F) {
	for _, s := range []string{"@coder hi", "/deploy x", "a@b", "@@", "/\n/", "@\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, m := range bot.ParseMentions(text) {
			if m == "" {
				t.Fatalf("empty mention from %q", text)
			}
		}
		cmd, _ := bot.ParseCommand(text)
		if cmd != "" && cmd[0] == '/' {
			t.Fatalf("command keeps its slash: %q", cmd)
		}
	})
}
