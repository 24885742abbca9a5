package slack

import (
	"strings"

	"github.com/switchyard/switchyard/bot"
)

// cleanText turns Slack message text into what agents and the router read:
// the bot's own mention removed, Slack's HTML escapes undone. Mentions are
// the "@name" tokens the author wrote in their own words (bot.Mrkdwn: not
// in code or quotes; Slack's <@U…>, <#C…> and <!here> entities are not agent
// names) and, when the message is addressed to the bot, a leading "name:"
// as in "@switchyard coder: fix the test".
func cleanText(text, botUser string, addressed bool) (string, []string) {
	if botUser != "" {
		// Until nothing changes: removing one mention can join the text
		// around it into another ("<@U<@U>>").
		for {
			next := removeMention(text, botUser)
			if next == text {
				break
			}
			text = next
		}
	}
	text = unescape(strings.TrimSpace(text))

	mentions := []string{}
	if addressed {
		if name, ok := prefixName(text); ok && bot.Mrkdwn.Spoken(text)[0] == text[0] {
			mentions = append(mentions, name)
		}
	}
	for _, m := range bot.Mrkdwn.Mentions(text) {
		// ParseMentions yields "" for a lone "@." or "@-".
		if m == "" || len(mentions) == 1 && strings.EqualFold(mentions[0], m) {
			continue
		}
		mentions = append(mentions, m)
	}
	return text, mentions
}

// meansUser reports whether the author of Slack text (escaped, as Slack
// sends it) addresses the user in their own words: <@U123> or <@U123|name>
// outside code and quotes.
func meansUser(text, user string) bool {
	return mentionsUser(bot.Mrkdwn.Spoken(unescape(text)), user)
}

// removeMention deletes <@user> and <@user|label> and one space after each.
func removeMention(text, user string) string {
	open := "<@" + user
	var b strings.Builder
	for {
		i := strings.Index(text, open)
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		rest := text[i+len(open):]
		end := -1
		switch {
		case strings.HasPrefix(rest, ">"):
			end = 1
		case strings.HasPrefix(rest, "|"):
			if j := strings.IndexByte(rest, '>'); j >= 0 {
				end = j + 1
			}
		}
		if end < 0 {
			// <@U12 is a prefix of a different user id, or unterminated.
			b.WriteString(text[:i+len(open)])
			text = rest
			continue
		}
		b.WriteString(text[:i])
		text = strings.TrimPrefix(rest[end:], " ")
	}
}

// prefixName recognises "name:" as the first word of text.
func prefixName(text string) (string, bool) {
	word, _, _ := strings.Cut(text, " ")
	word, _, _ = strings.Cut(word, "\n")
	name, ok := strings.CutSuffix(word, ":")
	if !ok || name == "" || len(name) > 64 {
		return "", false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return "", false
		}
	}
	return name, true
}

var (
	unescaper = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&")
	escaper   = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
)

// unescape undoes the three escapes Slack applies to message text.
func unescape(s string) string { return unescaper.Replace(s) }

// escape makes text safe to post: an agent's "<!channel>" must not ping a
// whole channel, and a stray "<" must not swallow the rest of a message.
// It also makes it plain text a person can trust: bytes that are not UTF-8
// and control characters other than line breaks and tabs show as "\uFFFD",
// as do the controls that reorder text (U+202A–U+202E, U+2066–U+2069), which could make
// an approval's arguments read otherwise than what runs; carriage returns
// are dropped.
func escape(s string) string { return escaper.Replace(plain(s)) }

// plain is s as valid UTF-8 without control characters but "\n" and "\t"
// (bot.Plain).
func plain(s string) string { return bot.Plain(s) }

// reorders reports whether r is an explicit bidirectional embedding,
// override or isolate (bot.Reorders).
func reorders(r rune) bool { return bot.Reorders(r) }
