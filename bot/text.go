package bot

import (
	"bytes"
	"strings"
	"unicode"
)

// Markup is how a source writes text, as far as telling what a person says
// from what they show or quote: "@coder" in a code block, a quoted line or
// an e-mail reply's quote is not a request to the coder, and a "/deploy" in
// a code block is not a command.
type Markup uint8

const (
	// Markdown is GitHub-flavoured Markdown, which GitHub and the local
	// console write: code spans, fenced code blocks (``` and ~~~), block
	// quotes (lines starting with >), HTML comments (<!-- -->), and the
	// "On … wrote:" line an e-mail reply keeps above the quote. A quote is
	// its ">" lines: the line after one is the author's again.
	Markdown Markup = iota
	// Mrkdwn is Slack's markup, unescaped (&gt; read as >): code spans on a
	// line, ``` pre blocks anywhere in the text, lines starting with > and
	// >>>, which quotes the rest of the message. Slack's <…> entities (<@U…>
	// users, <#C…> channels, links) are not "@name" mentions either.
	Mrkdwn
)

// MarkupOf returns the markup a source's text is written in.
func MarkupOf(source string) Markup {
	if source == SourceSlack {
		return Mrkdwn
	}
	return Markdown
}

// Spoken returns text with everything the author did not say in their own
// words blanked: code, quotes and comments are replaced by spaces, byte for
// byte, with line breaks kept, so positions and lines in the result are
// those of text. Text without any markup is returned as it is.
func (m Markup) Spoken(text string) string {
	if !strings.ContainsAny(text, "`~><") && (m != Markdown || !mayIndentCode(text)) {
		return text
	}
	b := []byte(text)
	m.blankBlocks(b)
	if m == Mrkdwn {
		blankPre(b)
	}
	blankSpans(b, m == Markdown)
	if m == Markdown {
		blankComments(b)
		blankHTMLCode(b)
	}
	return string(b)
}

// Mentions returns the "@name" tokens of what the author says (see Spoken
// and ParseMentions).
func (m Markup) Mentions(text string) []string {
	s := m.Spoken(text)
	if m == Mrkdwn && strings.IndexByte(s, '<') >= 0 {
		b := []byte(s)
		blankEntities(b)
		s = string(b)
	}
	return ParseMentions(s)
}

// Command returns the first command of what the author says (see Spoken
// and ParseCommand), with its arguments as written.
func (m Markup) Command(text string) (command, args string) {
	name, from, to := parseCommand(m.Spoken(text))
	if name == "" {
		return "", ""
	}
	return name, strings.TrimSpace(text[from:to])
}

func blank(b []byte, from, to int) {
	for i := from; i < to; i++ {
		if b[i] != '\n' {
			b[i] = ' '
		}
	}
}

// line is a line of b: [start, end), end at the '\n' or len(b).
type line struct{ start, end int }

func lines(b []byte) []line {
	var out []line
	start := 0
	for i, c := range b {
		if c == '\n' {
			out = append(out, line{start, i})
			start = i + 1
		}
	}
	return append(out, line{start, len(b)})
}

// indent returns the offset of the first byte after up to three spaces, or
// -1 when a fourth space (an indented code line in Markdown) or nothing
// follows.
func indent(b []byte, l line) int {
	i := l.start
	for i < l.end && b[i] == ' ' && i-l.start < 3 {
		i++
	}
	if i == l.end || b[i] == ' ' {
		return -1
	}
	return i
}

// afterListMarkers returns where a line's content starts after the
// Markdown list markers at b[at:end] ("- ", "* ", "+ ", "1. ", "2) ", and
// nested ones, "- - "), or at when there are none.
func afterListMarkers(b []byte, at, end int) int {
	for {
		i := at
		switch {
		case i < end && (b[i] == '-' || b[i] == '*' || b[i] == '+'):
			i++
		default:
			j := i
			for j < end && j-i < 9 && b[j] >= '0' && b[j] <= '9' {
				j++
			}
			if j == i || j == end || b[j] != '.' && b[j] != ')' {
				return at
			}
			i = j + 1
		}
		if i == end || b[i] != ' ' && b[i] != '\t' {
			return at
		}
		for i < end && (b[i] == ' ' || b[i] == '\t') {
			i++
		}
		if i == end {
			return at
		}
		at = i
	}
}

func isBlank(b []byte, l line) bool {
	for _, c := range b[l.start:l.end] {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// blankBlocks blanks the line-shaped parts: quoted lines, Slack's >>>,
// Markdown's fenced code blocks and e-mail reply headers.
func (m Markup) blankBlocks(b []byte) {
	ls := lines(b)
	quoted := make([]bool, len(ls))
	var fence byte
	fenceLen := 0
	// An indented code block starts after a blank line (or at the top) and
	// goes on over blank lines while its lines are indented.
	afterBlank, inIndented := true, false
	for i, l := range ls {
		if m == Markdown && fence == 0 {
			switch {
			case isBlank(b, l):
				afterBlank = true
				continue
			case codeIndent(b, l) && (afterBlank || inIndented):
				blank(b, l.start, l.end)
				inIndented, afterBlank = true, false
				continue
			}
			inIndented, afterBlank = false, false
		}
		if fence != 0 {
			at := indent(b, l)
			closing := at >= 0 && run(b[at:l.end], fence) >= fenceLen && isBlank(b, line{at + run(b[at:l.end], fence), l.end})
			blank(b, l.start, l.end)
			if closing {
				fence = 0
			}
			continue
		}
		at := indent(b, l)
		if at < 0 {
			continue
		}
		if m == Markdown {
			if c := b[at]; c == '`' || c == '~' {
				if n := run(b[at:l.end], c); n >= 3 && (c == '~' || bytes.IndexByte(b[at+n:l.end], '`') < 0) {
					fence, fenceLen = c, n
					blank(b, l.start, l.end)
					continue
				}
			}
		}
		if m == Markdown {
			// A quote can be a list item's content: "- > @coder fix".
			at = afterListMarkers(b, at, l.end)
		}
		if b[at] == '>' {
			if m == Mrkdwn && bytes.HasPrefix(b[at:l.end], []byte(">>>")) {
				blank(b, l.start, len(b))
				return
			}
			quoted[i] = true
			blank(b, l.start, l.end)
		}
	}
	if m == Markdown {
		blankReplyHeaders(b, ls, quoted)
	}
}

// mayIndentCode reports whether a line of text starts with four spaces or
// a tab.
func mayIndentCode(text string) bool {
	return strings.HasPrefix(text, "    ") || strings.HasPrefix(text, "\t") ||
		strings.Contains(text, "\n    ") || strings.Contains(text, "\n\t")
}

// codeIndent reports whether l starts with four columns of spaces or a tab,
// which makes it an indented code line in Markdown.
func codeIndent(b []byte, l line) bool {
	for i := l.start; i < l.end && i-l.start < 4; i++ {
		switch b[i] {
		case '\t':
			return true
		case ' ':
		default:
			return false
		}
	}
	return l.end-l.start >= 4
}

// run counts the leading bytes of s equal to c.
func run(s []byte, c byte) int {
	n := 0
	for n < len(s) && s[n] == c {
		n++
	}
	return n
}

// blankReplyHeaders blanks the "On <date>, <someone> wrote:" line (wrapped
// over at most three lines) that e-mail clients put above a quote, as
// GitHub keeps it in comments made by replying to a notification.
func blankReplyHeaders(b []byte, ls []line, quoted []bool) {
	for i := range ls {
		if !quoted[i] || i > 0 && quoted[i-1] {
			continue
		}
		j := i - 1
		for j >= 0 && isBlank(b, ls[j]) {
			j--
		}
		if j < 0 || !bytes.HasSuffix(bytes.TrimSpace(b[ls[j].start:ls[j].end]), []byte("wrote:")) {
			continue
		}
		for k := j; k >= 0 && k > j-3 && !isBlank(b, ls[k]); k-- {
			if bytes.HasPrefix(bytes.TrimSpace(b[ls[k].start:ls[k].end]), []byte("On ")) {
				blank(b, ls[k].start, ls[j].end)
				break
			}
		}
	}
}

// blankPre blanks Slack's ``` pre blocks, which open and close anywhere;
// an unclosed ``` is shown as it is.
func blankPre(b []byte) {
	for i := 0; i+3 <= len(b); {
		open := indexFrom(b, i, "```")
		if open < 0 {
			return
		}
		end := indexFrom(b, open+3, "```")
		if end < 0 {
			return
		}
		blank(b, open, end+3)
		i = end + 3
	}
}

func indexFrom(b []byte, from int, sub string) int {
	if from > len(b) {
		return -1
	}
	i := bytes.Index(b[from:], []byte(sub))
	if i < 0 {
		return -1
	}
	return from + i
}

// blankSpans blanks code spans: a run of backticks up to the next run of
// as many. Markdown spans may continue over line breaks within a
// paragraph, never past a blank line; Slack's stay on their line. A run
// without its match is shown as it is, as is a backslash-escaped one.
func blankSpans(b []byte, markdown bool) {
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := run(b[i:], '`')
		if i > 0 && b[i-1] == '\\' {
			i += n
			continue
		}
		end := closingRun(b, i+n, n, markdown)
		if end < 0 {
			i += n
			continue
		}
		blank(b, i, end+n)
		i = end + n
	}
}

// closingRun finds the next run of exactly n backticks from from, within
// the span's reach, or -1.
func closingRun(b []byte, from, n int, markdown bool) int {
	newline := false
	for j := from; j < len(b); {
		switch c := b[j]; {
		case c == '\n':
			if !markdown {
				return -1
			}
			if newline {
				return -1 // a blank line ends the paragraph
			}
			newline = true
			j++
		case c == '`':
			k := run(b[j:], '`')
			if k == n {
				return j
			}
			newline = false
			j += k
		case c == ' ' || c == '\t' || c == '\r':
			j++
		default:
			newline = false
			j++
		}
	}
	return -1
}

// blankComments blanks HTML comments, which GitHub does not show: issue and
// pull request templates are full of them. An unclosed comment runs to the
// end, as GitHub renders it.
func blankComments(b []byte) {
	for i := 0; ; {
		open := indexFrom(b, i, "<!--")
		if open < 0 {
			return
		}
		end := indexFrom(b, open+4, "-->")
		if end < 0 {
			blank(b, open, len(b))
			return
		}
		blank(b, open, end+3)
		i = end + 3
	}
}

// htmlCode are the HTML elements GitHub renders as code or as a quote.
var htmlCode = [...]string{"code", "pre", "blockquote", "kbd", "samp", "tt"}

// blankHTMLCode blanks the HTML elements Markdown may carry that show code
// or quote (<code>, <pre>, <blockquote>, <kbd>, <samp>, <tt>), tags
// included, matched case-insensitively; one left open runs to the end.
func blankHTMLCode(b []byte) {
	if bytes.IndexByte(b, '<') < 0 {
		return
	}
	lower := bytes.ToLower(b)
	for i := 0; i < len(b); i++ {
		if lower[i] != '<' {
			continue
		}
		for _, tag := range htmlCode {
			rest := lower[i+1:]
			if !bytes.HasPrefix(rest, []byte(tag)) || len(rest) == len(tag) {
				continue
			}
			if c := rest[len(tag)]; c != '>' && c != ' ' && c != '\t' && c != '\n' && c != '/' {
				continue
			}
			end := len(b)
			if j := bytes.Index(lower[i:], []byte("</"+tag)); j >= 0 {
				end = i + j + len("</"+tag)
				if k := bytes.IndexByte(lower[end:], '>'); k >= 0 {
					end += k + 1
				}
			}
			blank(b, i, end)
			i = end - 1
			break
		}
	}
}

// blankEntities blanks Slack's entities: <@U…>, <#C…>, <!here>,
// <!subteam^…>, <https://…|label>, <mailto:…>, each up to the first > on its
// line, or to the end of the line when it is cut off. A < that opens none
// of them is text.
func blankEntities(b []byte) {
	for i := 0; i < len(b); i++ {
		if b[i] != '<' || i+1 == len(b) || !opensEntity(b[i+1:]) {
			continue
		}
		j := i + 1
		for j < len(b) && b[j] != '\n' && b[j] != '>' {
			j++
		}
		end := j
		if j < len(b) && b[j] == '>' {
			end = j + 1
		}
		blank(b, i, end)
		i = end - 1
	}
}

func opensEntity(s []byte) bool {
	switch s[0] {
	case '@', '#', '!':
		return true
	}
	// A link: a scheme of letters, then ":".
	for i, c := range s {
		switch {
		case c == ':':
			return i > 0
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		default:
			return false
		}
	}
	return false
}

// Plain is s as text a person can trust, wherever it is shown: valid UTF-8
// (other bytes show as "\uFFFD"), without control characters but "\n" and
// "\t" ("\uFFFD" too; carriage returns are dropped), and without the
// controls that reorder text (Reorders), which could make an approval's
// arguments read otherwise than what runs.
func Plain(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r == '\r':
			return -1
		case unicode.IsControl(r) || Reorders(r):
			return '\uFFFD'
		}
		return r
	}, s)
}

// Reorders reports whether r is an explicit bidirectional embedding,
// override or isolate (U+202A–U+202E, U+2066–U+2069). The marks
// right-to-left text needs (U+200E, U+200F) are not.
func Reorders(r rune) bool { return r >= '\u202A' && r <= '\u202E' || r >= '\u2066' && r <= '\u2069' }
