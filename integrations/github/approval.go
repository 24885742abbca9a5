package github

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

	"github.com/switchyard/switchyard/bot"
)

// ApprovalComment is a comment "/approve <id>" or "/deny <id>": a person
// deciding a tool call that waits for approval. It makes no work item.
type ApprovalComment struct {
	Approve    bool
	ApprovalID string // "" when the comment names none
	// Login is the GitHub login of who commented, as GitHub signed the
	// delivery: the identity the approval is decided as.
	Login  string
	Thread bot.Thread
}

// ApprovalDecider decides approvals from comments. The daemon implements
// it over the approvals: the approval must have been asked in the
// comment's thread and Login must be one of the profile's approvers. An
// error with a bot code is told in the thread.
type ApprovalDecider interface {
	DecideApproval(ctx context.Context, c ApprovalComment) error
}

// Outbox queues egress messages; bot.OutboxStore has it.
type Outbox interface {
	Enqueue(ctx context.Context, msg bot.OutboxMessage) (bot.OutboxMessage, error)
}

// approvalLine is the first line of an approval comment; what follows the
// id (a reason, a thank-you) is the commenter's own.
var approvalLine = regexp.MustCompile(`^/(approve|deny)(?:\s+(\S+))?(?:\s|$)`)

// approvalComment reads a new comment that decides an approval. Only newly
// created comments count: an edit does not decide again.
func approvalComment(ev *bot.Event) (ApprovalComment, bool) {
	event, action := kindParts(ev.Kind)
	if !isComment(event) || action != "created" {
		return ApprovalComment{}, false
	}
	first, _, _ := strings.Cut(strings.TrimSpace(ev.Text), "\n")
	m := approvalLine.FindStringSubmatch(strings.TrimSpace(first))
	if m == nil {
		return ApprovalComment{}, false
	}
	return ApprovalComment{Approve: m[1] == "approve", ApprovalID: m[2], Login: ev.Actor, Thread: ev.Thread}, true
}

// decide hands an approval comment, already recorded, to the approvals. A
// refusal is answered in the thread, once per approval and person: the
// reply is keyed so a second attempt edits the first answer.
func (h *webhook) decide(ctx context.Context, ev *bot.Event) error {
	c, ok := approvalComment(ev)
	if !ok {
		return nil
	}
	var err error
	switch {
	case c.ApprovalID == "":
		err = bot.Errorf(bot.EINVALID, "say which approval: /approve <id> or /deny <id>, with the id the request shows")
	case h.opts.Approvals == nil:
		err = bot.Errorf(bot.EUNAVAILABLE, "approvals are not set up on this Switchyard")
	default:
		err = h.opts.Approvals.DecideApproval(ctx, c)
	}
	log := h.opts.Logger.With(slog.String("approval", c.ApprovalID), slog.String("login", c.Login), slog.Bool("approve", c.Approve))
	switch bot.ErrorCode(err) {
	case "":
		log.LogAttrs(ctx, slog.LevelInfo, "github approval decided")
		return nil
	case bot.EINTERNAL:
		// The comment is recorded; a redelivery would be a duplicate, so
		// the failure is the log's to tell.
		log.LogAttrs(ctx, slog.LevelError, "github approval comment failed", slog.String("error", err.Error()))
		return nil
	}
	log.LogAttrs(ctx, slog.LevelInfo, "github approval comment refused", slog.String("reason", bot.ErrorMessage(err)))
	if h.opts.Outbox == nil {
		return nil
	}
	if _, err := h.opts.Outbox.Enqueue(ctx, bot.OutboxMessage{
		Key:    fmt.Sprintf("approval/%s/refused/%s", c.ApprovalID, strings.ToLower(c.Login)),
		Thread: ev.Thread,
		Kind:   bot.OutboxReply,
		Text:   "🔐 Nothing changed: " + bot.ErrorMessage(err),
	}); err != nil {
		return fmt.Errorf("queue the answer to %s's approval comment: %w", c.Login, err)
	}
	if h.opts.Wake != nil {
		h.opts.Wake()
	}
	return nil
}
