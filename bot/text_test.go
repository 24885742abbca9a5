package bot_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

func TestMentionsAPersonMeant(t *testing.T) {
	tests := []struct {
		name   string
		markup bot.Markup
		text   string
		want   []string
	}{
		{"plain", bot.Markdown, "@coder fix the flaky test", []string{"coder"}},
		{"inline code", bot.Markdown, "the `@coder` agent is busy, ask @docs", []string{"docs"}},
		{"double backticks", bot.Markdown, "see ``@coder ` here`` and @ops", []string{"ops"}},
		{"unclosed backtick is text", bot.Markdown, "a ` then @ops", []string{"ops"}},
		{"escaped backtick is text", bot.Markdown, "a \\`@ops\\` b", []string{"ops"}},
		{"code span over a line break", bot.Markdown, "`a\n@coder` and @ops", []string{"ops"}},
		{"code span stops at a blank line", bot.Markdown, "`a\n\n@coder` and @ops", []string{"coder", "ops"}},
		{"fenced block", bot.Markdown, "run this:\n```sh\n@coder deploy\n```\n@ops please", []string{"ops"}},
		{"tilde fence", bot.Markdown, "~~~\n@coder\n~~~\n@ops", []string{"ops"}},
		{"longer closing fence", bot.Markdown, "````\n@coder\n```\n@reviewer\n`````\n@ops", []string{"ops"}},
		{"unclosed fence runs to the end", bot.Markdown, "```\n@coder\n@ops", nil},
		{"indented fence", bot.Markdown, "   ```\n@coder\n   ```\n@ops", []string{"ops"}},
		{"four spaces are no fence", bot.Markdown, "    ```\n@coder", []string{"coder"}},
		{"quoted line", bot.Markdown, "> @coder fix the build\nagreed, @reviewer?", []string{"reviewer"}},
		{"quote in a list item", bot.Markdown, "- > @coder fix the build\n* >@ops\n1. > @docs\n2) > @triage\n- - > @x\n- @reviewer", []string{"reviewer"}},
		{"list items are said", bot.Markdown, "- @coder\n* @ops\n10. @docs\n- a > @triage\n-> @x", []string{"coder", "ops", "docs", "triage", "x"}},
		{"Slack lists do not quote", bot.Mrkdwn, "- > @coder", []string{"coder"}},
		{"nested quote", bot.Markdown, ">> @coder\n> @ops\n@docs", []string{"docs"}},
		{"indented quote", bot.Markdown, "  > @coder\n@docs", []string{"docs"}},
		{"e-mail reply", bot.Markdown, "Sounds good.\n\nOn Tue, Mar 5, 2024 at 10:00 AM Jane Doe <notifications@github.com>\nwrote:\n\n> @coder fix the flaky test\n> — Reply to this email directly", nil},
		{"e-mail reply on one line", bot.Markdown, "@docs too\n\nOn Mon, @ana wrote:\n> @coder go", []string{"docs"}},
		{"'On' without a quote is text", bot.Markdown, "On Monday @ops wrote:\nthe plan", []string{"ops"}},
		{"HTML comment", bot.Markdown, "<!-- @reviewer will check -->\n@coder go", []string{"coder"}},
		{"unclosed HTML comment", bot.Markdown, "@coder <!-- @ops", []string{"coder"}},
		{"mention after a code span", bot.Markdown, "`x`@coder", []string{"coder"}},
		{"Slack inline code", bot.Mrkdwn, "`@coder` is busy, @docs?", []string{"docs"}},
		{"Slack pre block inline", bot.Mrkdwn, "look ```@coder deploy``` @ops", []string{"ops"}},
		{"Slack pre block over lines", bot.Mrkdwn, "look ```\n@coder\n\n@reviewer``` @ops", []string{"ops"}},
		{"Slack code span stays on its line", bot.Mrkdwn, "`a\n@coder` b", []string{"coder"}},
		{"Slack quote", bot.Mrkdwn, "> @coder fix it\n@docs", []string{"docs"}},
		{"Slack quotes the rest", bot.Mrkdwn, "@docs\n>>> @coder\n@ops", []string{"docs"}},
		{"Slack entities are no names", bot.Mrkdwn, "<@U7> and <!subteam^S1|@oncall> and <mailto:a@b.c|@x> ask @ops", []string{"ops"}},
		{"Slack < that opens nothing", bot.Mrkdwn, "1 < 2 and @ops > 3", []string{"ops"}},
		{"Markdown keeps HTML-ish text", bot.Markdown, "<@coder>", []string{"coder"}},
		{"indented code at the top", bot.Markdown, "    @coder deploy\n\n@ops", []string{"ops"}},
		{"indented code after a blank line", bot.Markdown, "try this:\n\n    @coder deploy\n\n    @reviewer\nthanks @ops", []string{"ops"}},
		{"tab-indented code", bot.Markdown, "\t@coder\n@ops", []string{"ops"}},
		{"an indented line continuing a paragraph is text", bot.Markdown, "please\n    @coder fix it", []string{"coder"}},
		{"HTML code", bot.Markdown, "<code>@coder</code> is busy, @ops?", []string{"ops"}},
		{"HTML pre over lines", bot.Markdown, "<PRE lang=\"sh\">\n@coder deploy\n</pre>\n@ops", []string{"ops"}},
		{"HTML blockquote", bot.Markdown, "<blockquote>@coder fix it</blockquote>\n@ops", []string{"ops"}},
		{"HTML kbd", bot.Markdown, "press <kbd>@coder</kbd> @ops", []string{"ops"}},
		{"unclosed HTML code runs to the end", bot.Markdown, "@ops <code>@coder", []string{"ops"}},
		{"a tag that only starts like one is text", bot.Markdown, "<codec> @coder", []string{"coder"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.markup.Mentions(tt.text))
		})
	}
}

func TestCommandsAPersonMeant(t *testing.T) {
	tests := []struct {
		name      string
		markup    bot.Markup
		text      string
		cmd, args string
	}{
		{"plain", bot.Markdown, "/deploy staging", "deploy", "staging"},
		{"arguments keep their code", bot.Markdown, "/deploy `staging` now", "deploy", "`staging` now"},
		{"in a fenced block", bot.Markdown, "```\n/deploy prod\n```", "", ""},
		{"in a quote", bot.Markdown, "> /deploy prod\nthat was last week", "", ""},
		{"after a quote", bot.Markdown, "> /deploy prod\n/review", "review", ""},
		{"in inline code", bot.Markdown, "`/deploy prod`", "", ""},
		{"Slack quote", bot.Mrkdwn, "> /deploy prod", "", ""},
		{"Slack pre block", bot.Mrkdwn, "```/deploy prod```\n/docs readme", "docs", "readme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, args := tt.markup.Command(tt.text)
			require.Equal(t, tt.cmd, cmd)
			require.Equal(t, tt.args, args)
		})
	}
}

func TestFillFromTextReadsTheSourcesMarkup(t *testing.T) {
	ev := &bot.Event{Source: bot.SourceSlack, Text: "<@U7> look\n>>> @coder /deploy"}
	ev.FillFromText()
	require.Empty(t, ev.Mentions)
	require.Empty(t, ev.Command)

	ev = &bot.Event{Source: bot.SourceGitHub, Text: "> @coder fix\n\n@reviewer `@ops`"}
	ev.FillFromText()
	require.Equal(t, []string{"reviewer"}, ev.Mentions)
}

// fixtureTexts returns the message texts and bodies of the GitHub and Slack
// payloads in testdata, with the markup their source writes.
func fixtureTexts(t testing.TB) map[string]bot.Markup {
	t.Helper()
	out := map[string]bot.Markup{}
	for dir, m := range map[string]bot.Markup{"github": bot.Markdown, "slack": bot.Mrkdwn} {
		root := filepath.Join("..", "testdata", dir)
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
				return err
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			var v any
			if json.Unmarshal(raw, &v) != nil {
				return nil // not every file is one JSON document
			}
			collectTexts(v, func(s string) { out[s] = m })
			return nil
		})
		require.NoError(t, err)
	}
	require.NotEmpty(t, out)
	return out
}

func collectTexts(v any, add func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "body" || k == "text") && s != "" {
				add(s)
			}
			collectTexts(x, add)
		}
	case []any:
		for _, x := range v {
			collectTexts(x, add)
		}
	}
}

// Every text of the real payloads in testdata reads without surprise: what
// the author says keeps its positions and lines, and the mentions found are
// ones a plain scan finds too.
func TestFixtureTextsParse(t *testing.T) {
	for text, m := range fixtureTexts(t) {
		spoken := m.Spoken(text)
		require.Len(t, spoken, len(text))
		require.Equal(t, strings.Count(text, "\n"), strings.Count(spoken, "\n"))
		requireSubsequence(t, m.Mentions(text), bot.ParseMentions(text), text)
		m.Command(text)
	}
}

// The parser never panics, keeps every byte's position and every line
// break, finds only mentions a plain scan would find too, and never one
// inside a fenced block. The payloads in testdata seed it.
func FuzzMarkup(f *testing.F) {
	for text, m := range fixtureTexts(f) {
		f.Add(text, "", "", m == bot.Mrkdwn)
	}
	for _, s := range []string{
		"@coder hi", "`@x`", "```\n@x\n```", "> @x", "On a wrote:\n> @x", "<!-- @x", "a ```b``` @c",
		"<@U1|@x>", ">>> @x", "~~~~\n@x\n~~~", "\\`@x`", "`` ` ``@y", "@a\n\n`b\n\n`@c",
	} {
		f.Add(s, "", "@tail", false)
		f.Add(s, "@before", "", true)
	}
	f.Fuzz(func(t *testing.T, text, prefix, suffix string, slack bool) {
		m := bot.Markdown
		if slack {
			m = bot.Mrkdwn
		}
		spoken := m.Spoken(text)
		require.Len(t, spoken, len(text))
		for i := range len(text) {
			if text[i] == '\n' || spoken[i] == '\n' {
				require.Equal(t, text[i], spoken[i], "line break %d of %q", i, text)
			}
			if spoken[i] != text[i] {
				require.Equal(t, byte(' '), spoken[i])
			}
		}
		requireSubsequence(t, m.Mentions(text), bot.ParseMentions(text), text)
		m.Command(text)

		// A mention inside a fenced block is never found, whatever
		// surrounds the block.
		clean := func(s string) string { return strings.NewReplacer("`", "", "~", "").Replace(s) }
		body := strings.ReplaceAll(clean(text), "@", "")
		doc := clean(prefix) + "\n```\n" + body + " @zzfenced\n```\n" + suffix
		for _, name := range m.Mentions(doc) {
			require.NotEqual(t, "zzfenced", name, "%q", doc)
		}
	})
}

func requireSubsequence(t *testing.T, sub, of []string, text string) {
	t.Helper()
	i := 0
	for _, s := range sub {
		for i < len(of) && of[i] != s {
			i++
		}
		require.Less(t, i, len(of), "mention %q of %q is not in the plain scan %q", s, text, of)
		i++
	}
}
