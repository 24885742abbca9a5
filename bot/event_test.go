package bot_test

import (
	"strings"
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

// An event a person describes to have it explained is refused for what no
// source sends, each problem naming its field.
func TestCheckDescribed(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   bot.Event
		want []string
	}{
		{"console message", bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Text: "hi"}, nil},
		{"no source", bot.Event{Text: "hi"}, nil},
		{"no kind", bot.Event{Source: bot.SourceGitHub, Repo: "acme/api", Number: 7}, nil},
		{"every source's kind", bot.Event{Source: bot.SourceSchedule, Kind: bot.KindScheduleTick}, nil},
		{"unknown source", bot.Event{Source: "jira"}, []string{`source: unknown source "jira": want local, github, slack or schedule`}},
		{"kind of another source", bot.Event{Source: bot.SourceSlack, Kind: "github.issues.opened"},
			[]string{`kind: "github.issues.opened" is not an event of slack: want slack.…, such as slack.app_mention`}},
		{"kind that only starts like the source", bot.Event{Source: bot.SourceLocal, Kind: "localmessage"},
			[]string{`kind: "localmessage" is not an event of local: want local.…, such as local.message`}},
		{"negative number", bot.Event{Source: bot.SourceGitHub, Number: -1}, []string{"number: want a positive issue or pull request number, got -1"}},
		{"repository without owner", bot.Event{Source: bot.SourceGitHub, Repo: "api"}, []string{`repo: want owner/name, such as acme/api, got "api"`}},
		{"repository with an empty owner", bot.Event{Source: bot.SourceGitHub, Repo: "/api"}, []string{`repo: want owner/name, such as acme/api, got "/api"`}},
		{"repository too deep", bot.Event{Source: bot.SourceGitHub, Repo: "a/b/c"}, []string{`repo: want owner/name, such as acme/api, got "a/b/c"`}},
		{"all at once", bot.Event{Source: "x", Number: -2, Repo: "r"}, []string{
			`source: unknown source "x": want local, github, slack or schedule`,
			"number: want a positive issue or pull request number, got -2",
			`repo: want owner/name, such as acme/api, got "r"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.ev.CheckDescribed()
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, strings.Join(tc.want, "\n"))
			require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
		})
	}
}
