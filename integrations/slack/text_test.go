package slack

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestCleanText(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		addressed bool
		text      string
		mentions  []string
	}{
		{"mention and agent", "<@UBOT> @coder fix the flaky test", true, "@coder fix the flaky test", []string{"coder"}},
		{"labelled mention", "<@UBOT|switchyard> @coder go", true, "@coder go", []string{"coder"}},
		{"prefix form", "<@UBOT> coder: fix it", true, "coder: fix it", []string{"coder"}},
		{"prefix and the same agent again", "<@UBOT> coder: ask @coder", true, "coder: ask @coder", []string{"coder"}},
		{"prefix then another agent", "<@UBOT> coder: ask @reviewer", true, "coder: ask @reviewer", []string{"coder", "reviewer"}},
		{"prefix only when addressed", "coder: fix it", false, "coder: fix it", []string{}},
		{"a link is not a prefix", "<@UBOT> <https://example.com/x>", true, "<https://example.com/x>", []string{}},
		{"a bare scheme is not a prefix", "<@UBOT> https://example.com/x", true, "https://example.com/x", []string{}},
		{"mention in the middle", "hey <@UBOT> can @docs help?", true, "hey can @docs help?", []string{"docs"}},
		{"other users are not agents", "<@UBOT> ask <@U7> and <!here> in <#C1|ops>", true, "ask <@U7> and <!here> in <#C1|ops>", []string{}},
		{"a similar user id stays", "<@UBOT2> hi", true, "<@UBOT2> hi", []string{}},
		{"escapes undone", "<@UBOT> a &lt;b&gt; &amp;&amp; c", true, "a <b> && c", []string{}},
		{"e-mail is not a mention", "<@UBOT> mail ann@example.com", true, "mail ann@example.com", []string{}},
		{"unterminated entity", "<@UBOT> @coder <@U7", true, "@coder <@U7", []string{"coder"}},
		{"agent in inline code", "<@UBOT> the `@coder` agent is busy", true, "the `@coder` agent is busy", []string{}},
		{"agent in a pre block", "<@UBOT> run ```@coder deploy```", true, "run ```@coder deploy```", []string{}},
		{"agent in a quote", "<@UBOT> see\n&gt; @coder fix the build\n@docs?", true, "see\n> @coder fix the build\n@docs?", []string{"docs"}},
		{"prefix in a quote", "<@UBOT> &gt; coder: fix it", true, "> coder: fix it", []string{}},
		{"prefix in code", "<@UBOT> `coder:` fix it", true, "`coder:` fix it", []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text, mentions := cleanText(tc.in, "UBOT", tc.addressed)
			require.Equal(t, tc.text, text)
			require.Equal(t, tc.mentions, mentions)
		})
	}
}

func TestSplitMessage(t *testing.T) {
	t.Run("short text is one part", func(t *testing.T) {
		require.Equal(t, []string{"hello"}, splitMessage("hello", 100))
	})
	t.Run("splits on line ends", func(t *testing.T) {
		text := strings.Repeat("0123456789\n", 30) // 330 runes
		parts := splitMessage(text, 100)
		require.Greater(t, len(parts), 3)
		for _, p := range parts {
			require.LessOrEqual(t, utf8.RuneCountInString(p), 100)
			require.True(t, strings.HasSuffix(p, "\n"), "part %q ends mid-line", p)
		}
		require.Equal(t, text, strings.Join(parts, ""))
	})
	t.Run("never inside a rune", func(t *testing.T) {
		text := strings.Repeat("日本語のテキスト😀", 50) // one long line
		parts := splitMessage(text, 64)
		for _, p := range parts {
			require.True(t, utf8.ValidString(p))
			require.LessOrEqual(t, utf8.RuneCountInString(p), 64)
		}
		require.Equal(t, text, strings.Join(parts, ""))
	})
	t.Run("long words break at spaces", func(t *testing.T) {
		text := strings.Repeat("word ", 60)
		for _, p := range splitMessage(text, 64) {
			require.True(t, strings.HasSuffix(p, " ") || p == strings.TrimSpace(p), "part %q", p)
		}
	})
	t.Run("a code block moves whole when it fits", func(t *testing.T) {
		code := "```\n" + strings.Repeat("x := 1\n", 8) + "```\n"
		text := strings.Repeat("prose line\n", 6) + code + "after\n"
		parts := splitMessage(text, 90)
		var found bool
		for _, p := range parts {
			require.Equal(t, 0, strings.Count(p, "```")%2, "part %q", p)
			if strings.Contains(p, code) {
				found = true
			}
		}
		require.True(t, found, "the code block was cut: %q", parts)
	})
	t.Run("a long code block is closed and reopened", func(t *testing.T) {
		text := "intro\n```go\n" + strings.Repeat("fmt.Println(42)\n", 40) + "```\nend\n"
		parts := splitMessage(text, 120)
		require.Greater(t, len(parts), 2)
		for _, p := range parts {
			require.LessOrEqual(t, utf8.RuneCountInString(p), 120)
			require.Equal(t, 0, strings.Count(p, "```")%2, "part %q", p)
		}
		require.Equal(t, 40, strings.Count(strings.Join(parts, ""), "fmt.Println(42)"))
	})
}

func TestParseThreadRef(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{"slack:T1/C1/1700000000.000100", "slack:T1/C1/1700000000.000100", true},
		{"https://acme.slack.com/archives/C9/p1700000000000200", "slack:T1/C9/1700000000.000200", true},
		{"<https://acme.slack.com/archives/C9/p1700000000000200?thread_ts=1700000000.000100&amp;cid=C9>", "slack:T1/C9/1700000000.000100", true},
		{"<https://acme.slack.com/archives/C9/p1700000000000200|link>", "slack:T1/C9/1700000000.000200", true},
		{"slack:T1/C1", "", false},
		{"github:o/r#1", "", false},
		{"https://example.com/nothing", "", false},
		{"", "", false},
	}
	for _, tc := range tests {
		th, ok := parseThreadRef(tc.in, "T1")
		require.Equal(t, tc.ok, ok, tc.in)
		if ok {
			require.Equal(t, tc.want, th.Key(), tc.in)
		}
	}
}

func TestTruncateEscaped(t *testing.T) {
	require.Equal(t, "abc", truncateEscaped("abc", 10))
	got := truncateEscaped(strings.Repeat("a", 7)+"&amp;tail", 10)
	require.Equal(t, "aaaaaaa…", got, "no half entity left behind")
	require.LessOrEqual(t, utf8.RuneCountInString(truncateEscaped(strings.Repeat("é", 50), 10)), 10)
}

func FuzzCleanText(f *testing.F) {
	for _, s := range []string{"<@UBOT> @coder fix the flaky test", "<@UBOT|x> coder: go", "<@UBOT", "<<@UBOT>>", "@", "a:", "&lt;&amp;"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, in string, addressed bool) {
		text, mentions := cleanText(in, "UBOT", addressed)
		require.NotNil(t, mentions)
		if utf8.ValidString(in) {
			require.True(t, utf8.ValidString(text))
		}
		require.NotContains(t, text, "<@UBOT>")
		for _, m := range mentions {
			require.NotEmpty(t, m)
		}
	})
}

func FuzzSplitMessage(f *testing.F) {
	f.Add(strings.Repeat("line\n", 100), 50)
	f.Add("```\n"+strings.Repeat("code\n", 100)+"```\n", 40)
	f.Add(strings.Repeat("日本語😀", 100), 17)
	f.Add("", 10)
	f.Fuzz(func(t *testing.T, text string, n int) {
		if n < 1 || n > 5000 || !utf8.ValidString(text) {
			return
		}
		parts := splitMessage(text, n)
		limit := max(n, 2*len(fence)+4)
		for _, p := range parts {
			require.LessOrEqual(t, utf8.RuneCountInString(p), limit)
			require.True(t, utf8.ValidString(p))
		}
		if !strings.Contains(text, "`") {
			squash := func(s string) string { return strings.Join(strings.Fields(s), "") }
			require.Equal(t, squash(text), squash(strings.Join(parts, "")))
		}
	})
}

// FuzzEscape: whatever text a model or a person writes, what is posted
// makes no Slack entity, is UTF-8 without control characters but line
// breaks and tabs or controls that reorder text, and reads back as the
// text made plain.
func FuzzEscape(f *testing.F) {
	for _, s := range hostileTexts() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := escape(in)
		require.True(t, utf8.ValidString(out))
		require.NotContains(t, out, "<")
		require.NotContains(t, out, ">")
		for _, r := range out {
			require.False(t, unicode.IsControl(r) && r != '\n' && r != '\t', "%U", r)
			require.False(t, reorders(r), "%U", r)
		}
		require.Equal(t, plain(in), unescape(out))
		require.Equal(t, plain(in), plain(plain(in)))
	})
}
