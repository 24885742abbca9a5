package slack

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/switchyard/switchyard/bot"
)

// maxChildrenShown bounds the child runs listed in a status message.
const maxChildrenShown = 10

func stateEmoji(state string) string {
	switch state {
	case "queued":
		return ":hourglass_flowing_sand:"
	case "running":
		return ":gear:"
	case "paused":
		return ":double_vertical_bar:"
	case "done":
		return ":white_check_mark:"
	case "failed":
		return ":x:"
	case "cancelled":
		return ":no_entry_sign:"
	}
	return ":speech_balloon:"
}

// statusBlocks renders the living status message: the agent and its state,
// what it is doing now, its open child runs, and how long it has been at it.
func statusBlocks(msg bot.OutboxMessage) []slack.Block {
	v := msg.Status
	if v == nil {
		text := msg.Text
		if strings.TrimSpace(text) == "" {
			text = "…"
		}
		return []slack.Block{mrkdwnSection(escape(text))}
	}
	head := fmt.Sprintf("%s *%s* · %s", stateEmoji(v.State), escape(firstNonEmpty(v.Agent, "agent")), escape(firstNonEmpty(v.State, "working")))
	if v.Activity != "" {
		head += "\n" + escape(v.Activity)
	}
	blocks := []slack.Block{mrkdwnSection(head)}
	if len(v.Children) > 0 {
		var b strings.Builder
		b.WriteString("*Subagents*")
		for i, c := range v.Children {
			if i == maxChildrenShown {
				fmt.Fprintf(&b, "\n…and %d more", len(v.Children)-i)
				break
			}
			b.WriteString("\n• " + escape(c))
		}
		blocks = append(blocks, mrkdwnSection(b.String()))
	}
	if v.Resumed != "" {
		blocks = append(blocks, mrkdwnSection(":repeat: "+escape(v.Resumed)))
	}
	if v.Summary != "" {
		blocks = append(blocks, mrkdwnSection(escape(v.Summary)))
	}
	var ctx []string
	// A context element holds 3,000 characters, as a section does: the
	// parts that can be long get a third each, so the elapsed time and the
	// work item's id always show.
	if len(v.Skills) > 0 {
		ctx = append(ctx, ":jigsaw: "+truncateEscaped(escape(strings.Join(v.Skills, " · ")), maxContextPart))
	}
	if v.Rights != "" {
		ctx = append(ctx, ":lock: "+truncateEscaped(escape(v.Rights), maxContextPart))
	}
	if d, ok := elapsed(v); ok {
		ctx = append(ctx, ":stopwatch: "+d)
	}
	if id := firstNonEmpty(v.WorkItemID, msg.WorkItemID); id != "" {
		ctx = append(ctx, "`"+escape(id)+"`")
	}
	if len(ctx) > 0 {
		blocks = append(blocks, slack.NewContextBlock("", mrkdwnText(strings.Join(ctx, " · "))))
	}
	return blocks
}

// statusFallback is the status message as plain text, for notifications and
// clients without Block Kit.
func statusFallback(msg bot.OutboxMessage) string {
	v := msg.Status
	if v == nil || msg.Text != "" {
		return firstNonEmpty(msg.Text, "…")
	}
	s := firstNonEmpty(v.Agent, "agent") + " · " + firstNonEmpty(v.State, "working")
	if v.Activity != "" {
		s += ": " + v.Activity
	}
	if d, ok := elapsed(v); ok {
		s += " (" + d + ")"
	}
	return s
}

// elapsed is the time from start to the view's last update. The view is a
// snapshot, so the message shows how long the work had taken when it was
// written, not a clock that stops when edits stop.
func elapsed(v *bot.StatusView) (string, bool) {
	if v.Started.IsZero() || v.Updated.Before(v.Started) {
		return "", false
	}
	return v.Updated.Sub(v.Started).Round(time.Second).String(), true
}

func mrkdwnSection(text string) *slack.SectionBlock {
	return slack.NewSectionBlock(mrkdwnText(text), nil, nil)
}

// maxTextObject is the most characters Slack takes in a text object (a
// section's text, a context element); a longer one is invalid_blocks, and
// the whole message is refused. maxContextPart is a third of it.
const (
	maxTextObject  = 3000
	maxContextPart = maxTextObject / 3
)

// mrkdwnText is a mrkdwn text object of escaped text, shortened to what
// Slack takes. It is verbatim:
// otherwise Slack parses the plain text itself, and "@channel", "@here"
// or "#general" that a model or a person wrote would become a real
// mention or link. The entities the bot writes itself (<@U…>, <!date…>)
// are still rendered.
func mrkdwnText(text string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, truncateEscaped(text, maxTextObject), false, true)
}

// truncateEscaped shortens escaped text to max runes without leaving half
// an &amp; entity at the end.
func truncateEscaped(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	cut, n := 0, 0
	for i := range s {
		if n == max-1 {
			cut = i
			break
		}
		n++
	}
	s = s[:cut]
	if i := strings.LastIndexByte(s, '&'); i >= 0 && i >= len(s)-4 && !strings.Contains(s[i:], ";") {
		s = s[:i]
	}
	return s + "…"
}
