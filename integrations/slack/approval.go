package slack

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/slack-go/slack"

	"github.com/switchyard/switchyard/bot"
)

// maxApprovalArgs bounds the arguments shown on a prompt; the audit log
// keeps them whole.
const maxApprovalArgs = 1500

// deliverApproval posts an approval request with Approve / Deny buttons,
// then edits it into the outcome, which drops the buttons.
func (s *Sink) deliverApproval(ctx context.Context, msg bot.OutboxMessage) (string, error) {
	opts := []slack.MsgOption{
		slack.MsgOptionText(truncateEscaped(escape(firstNonEmpty(msg.Text, "approval "+msg.Approval.ID)), maxReplyRunes), false),
		slack.MsgOptionBlocks(approvalBlocks(msg.Approval)...),
	}
	if msg.RemoteID != "" {
		return msg.RemoteID, s.update(ctx, msg.Thread.Channel, msg.RemoteID, opts)
	}
	return s.post(ctx, msg, 0, opts)
}

// approvalBlocks renders what the agent wants to run and why; while it is
// pending, the buttons and when it expires; after, who decided what.
func approvalBlocks(v *bot.ApprovalView) []slack.Block {
	var b strings.Builder
	fmt.Fprintf(&b, ":closed_lock_with_key: *%s* wants to run `%s`", escape(firstNonEmpty(v.Agent, "agent")), escape(v.Tool))
	if args := strings.TrimSpace(v.Arguments); args != "" {
		b.WriteString("\n```" + inCode(truncateEscaped(escape(args), maxApprovalArgs)) + "```")
	}
	if v.Reason != "" {
		b.WriteString("\n" + escape(v.Reason))
	}
	blocks := []slack.Block{mrkdwnSection(b.String())}

	var note string
	switch v.State {
	case "pending":
		approve := slack.NewButtonBlockElement(ActionApprove, v.ID, slack.NewTextBlockObject(slack.PlainTextType, "Approve", false, false))
		approve.Style = slack.StylePrimary
		deny := slack.NewButtonBlockElement(ActionDeny, v.ID, slack.NewTextBlockObject(slack.PlainTextType, "Deny", false, false))
		deny.Style = slack.StyleDanger
		blocks = append(blocks, slack.NewActionBlock("approval/"+v.ID, approve, deny))
		note = fmt.Sprintf("Only approvers of profile `%s` can decide; denied if nobody does by %s",
			escape(v.Profile), slackDate(v.ExpiresAt.Unix(), "{time}", v.ExpiresAt.UTC().Format("15:04 UTC")))
	case "approved":
		note = ":white_check_mark: Approved by " + mentionOf(v.DecidedBy)
	case "rejected":
		note = ":no_entry: Denied by " + mentionOf(v.DecidedBy)
	case "expired":
		note = ":hourglass: Nobody decided in time, so it was denied"
	default:
		note = ":no_entry_sign: The run ended before a decision"
	}
	note += " · `" + escape(v.ID) + "`"
	blocks = append(blocks, slack.NewContextBlock("", mrkdwnText(note)))
	return blocks
}

// inCode makes text safe inside a ``` code block: no run of three
// backticks, which would end the block early and show the rest of the
// arguments as formatted text an approver could mistake for the prompt's
// own, and none at either end, where it would join the fence.
func inCode(text string) string {
	const zwsp = "\u200b" // invisible, and breaks a run of backticks
	text = strings.ReplaceAll(text, "``", "`"+zwsp+"`")
	if strings.HasPrefix(text, "`") {
		text = zwsp + text
	}
	if strings.HasSuffix(text, "`") {
		text += zwsp
	}
	return text
}

// slackUserID matches member ids, which approver lists use for Slack users.
var slackUserID = regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`)

// mentionOf shows who decided: a Slack member as a mention, anyone else
// (the local console, the API) by name.
func mentionOf(by string) string {
	if slackUserID.MatchString(by) {
		return "<@" + by + ">"
	}
	return escape(firstNonEmpty(by, "someone"))
}

// slackDate formats a time in each reader's own time zone.
func slackDate(unix int64, format, fallback string) string {
	return fmt.Sprintf("<!date^%d^%s|%s>", unix, format, escape(fallback))
}
