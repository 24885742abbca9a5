package slack

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/switchyard/switchyard/bot"
)

// maxReplyRunes is the size of one reply message. Slack accepts 40,000
// characters of text but folds anything past about 4,000 behind "Show more",
// and a section block takes 3,000; 3,000 keeps every part readable whole and
// leaves room for the escapes added on posting.
const maxReplyRunes = 3000

const fence = "```"

// maxReplyParts bounds the messages one reply is posted as. Every attempt
// to deliver a reply posts or edits each of its parts at the channel's
// pace (about one a second), all within the deliverer's timeout (30 s): a
// reply of more parts than fit would time out at every attempt, each one
// editing again what the last had posted, never be done, and take Slack
// down for every thread with it. Ten parts are 30,000 characters, more
// than anyone reads in a thread.
const maxReplyParts = 10

// replyParts is text split to be posted as a reply: at most maxReplyParts
// parts, the last of a longer reply saying that it is cut there.
func replyParts(text string) []string {
	parts := splitMessage(text, maxReplyRunes)
	if len(parts) <= maxReplyParts {
		return parts
	}
	parts = parts[:maxReplyParts]
	parts[len(parts)-1] = strings.TrimRight(parts[len(parts)-1], "\n") + fmt.Sprintf(
		"\n\n_(The reply is cut here: it is %s long, and Slack gets at most %d messages of it.)_",
		bot.Count(utf8.RuneCountInString(text), "character", "characters"), maxReplyParts)
	return parts
}

// splitMessage cuts text into parts of at most max runes. It cuts at line
// ends where it can, never inside a UTF-8 sequence, and prefers a line end
// outside a ``` code block; when a code block itself is too long, the part
// closes the fence and the next part reopens it, so each renders as code.
func splitMessage(text string, max int) []string {
	if max < 2*len(fence)+4 {
		max = 2*len(fence) + 4
	}
	if utf8.RuneCountInString(text) <= max {
		return []string{text}
	}
	var (
		parts   []string
		cur     strings.Builder
		curLen  int  // runes in cur
		inFence bool // cur ends inside a code block
		safe    = -1 // byte offset in cur of the last line end outside a fence
		safeLen int  // runes before safe
	)
	// Room for "\n```" when a part has to close a fence.
	budget := max - len(fence) - 1
	flush := func() {
		s := cur.String()
		if inFence {
			s = strings.TrimSuffix(s, "\n") + "\n" + fence
		}
		if strings.TrimSpace(s) != "" {
			parts = append(parts, s)
		}
		cur.Reset()
		curLen, safe, safeLen = 0, -1, 0
		if inFence {
			cur.WriteString(fence + "\n")
			curLen = len(fence) + 1
		}
	}
	for line := range strings.SplitAfterSeq(text, "\n") {
		n := utf8.RuneCountInString(line)
		if curLen+n > budget {
			if inFence && safe > 0 {
				// Cut before the code block began, so it moves whole to
				// the next part.
				s := cur.String()
				parts = append(parts, s[:safe])
				rest := s[safe:]
				cur.Reset()
				cur.WriteString(rest)
				curLen -= safeLen
				safe, safeLen = -1, 0
			}
			if curLen+n > budget && curLen > 0 {
				flush()
			}
		}
		for curLen+n > budget {
			// One line longer than a part: cut it at a space if there is
			// one near the end, else at a rune boundary.
			head := cutRunes(line, budget-curLen)
			cur.WriteString(head)
			curLen += utf8.RuneCountInString(head)
			line = line[len(head):]
			n = utf8.RuneCountInString(line)
			flush()
		}
		cur.WriteString(line)
		curLen += n
		if strings.HasPrefix(strings.TrimSpace(line), fence) {
			inFence = !inFence
		}
		if !inFence && strings.HasSuffix(line, "\n") {
			safe, safeLen = cur.Len(), curLen
		}
	}
	if curLen > 0 {
		s := cur.String()
		if strings.TrimSpace(s) != "" && !(inFence && strings.TrimSpace(s) == fence) {
			parts = append(parts, s)
		}
	}
	return parts
}

// cutRunes returns a prefix of s of at most n runes (at least one), ending
// after a space in its last fifth when there is one.
func cutRunes(s string, n int) string {
	n = max(n, 1)
	end, count := 0, 0
	for end < len(s) && count < n {
		_, size := utf8.DecodeRuneInString(s[end:])
		end += size
		count++
	}
	head := s[:end]
	if end == len(s) {
		return head
	}
	if i := strings.LastIndexFunc(head, unicode.IsSpace); i > 0 && utf8.RuneCountInString(head[i:]) < n/5 {
		_, size := utf8.DecodeRuneInString(head[i:])
		return head[:i+size]
	}
	return head
}
