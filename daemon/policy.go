package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/integrations/github"
	"github.com/switchyard/switchyard/integrations/slack"
)

// outboxNotifier tells a thread about approvals through the outbox, so the
// request reaches wherever the thread lives (local console, GitHub, Slack).
type outboxNotifier struct {
	out  bot.Outboxer
	wake func()
}

var _ policy.Notifier = outboxNotifier{}

func (n outboxNotifier) ApprovalRequested(ctx context.Context, a bot.Approval) error {
	return n.request(ctx, a, true)
}

// KeepApprovalRequested asks the thread as ApprovalRequested does unless it
// was asked: a run resuming its wait on an approval whose process died
// after storing it and before asking has the thread asked then.
func (n outboxNotifier) KeepApprovalRequested(ctx context.Context, a bot.Approval) error {
	return n.request(ctx, a, false)
}

// request asks the thread to decide a; replace says whether a message
// already there is made the request again.
func (n outboxNotifier) request(ctx context.Context, a bot.Approval, replace bool) error {
	th, err := bot.ParseThread(a.SessionKey)
	if err != nil {
		return fmt.Errorf("approval %s: %w", a.ID, err)
	}
	how := fmt.Sprintf("Approve with `switchyard approvals approve %s` or deny with `switchyard approvals deny %s`", a.ID, a.ID)
	switch th.Source {
	case bot.SourceSlack:
		how = "Approve or deny with the buttons"
	case bot.SourceGitHub:
		how = fmt.Sprintf("Approve with a comment `/approve %s` or deny with `/deny %s`", a.ID, a.ID)
	}
	text := fmt.Sprintf("🔐 %s wants to run %s (%s): %s\n%s before %s; it is denied then.",
		a.Agent, a.Tool, a.Arguments, a.Reason, how, a.ExpiresAt.Format(time.Kitchen))
	if a.Tool == agents.BudgetTool {
		// The reason is the question: "budget reached (N tokens): approve N more?"
		text = fmt.Sprintf("🔐 @%s: %s\n%s before %s; the work stops then.", a.Agent, a.Reason, how, a.ExpiresAt.Format(time.Kitchen))
	}
	return n.post(ctx, th, a, text, replace)
}

func (n outboxNotifier) ApprovalResolved(ctx context.Context, a bot.Approval) error {
	th, err := bot.ParseThread(a.SessionKey)
	if err != nil {
		return fmt.Errorf("approval %s: %w", a.ID, err)
	}
	var text string
	switch {
	case a.Tool == agents.BudgetTool && a.Status == bot.ApprovalApproved:
		text = fmt.Sprintf("🔐 %s approved by %s: @%s goes on with more budget.", a.ID, a.DecidedBy, a.Agent)
	case a.Tool == agents.BudgetTool && a.Status == bot.ApprovalRejected:
		text = fmt.Sprintf("🔐 %s denied by %s: @%s stops with what it did so far.", a.ID, a.DecidedBy, a.Agent)
	case a.Tool == agents.BudgetTool && a.Status == bot.ApprovalExpired:
		text = fmt.Sprintf("🔐 %s expired: nobody decided in time, so @%s stops with what it did so far.", a.ID, a.Agent)
	case a.Status == bot.ApprovalApproved:
		text = fmt.Sprintf("🔐 %s approved by %s: %s runs %s.", a.ID, a.DecidedBy, a.Agent, a.Tool)
	case a.Status == bot.ApprovalRejected:
		text = fmt.Sprintf("🔐 %s denied by %s: %s does not run %s.", a.ID, a.DecidedBy, a.Agent, a.Tool)
	case a.Status == bot.ApprovalExpired:
		text = fmt.Sprintf("🔐 %s expired: nobody decided in time, so %s is denied.", a.ID, a.Tool)
	default:
		text = fmt.Sprintf("🔐 %s %s: the run ended before a decision.", a.ID, a.Status)
	}
	return n.post(ctx, th, a, text, true)
}

// post writes the message of approval a, replacing what it says when
// replace is set, else only when there is none.
func (n outboxNotifier) post(ctx context.Context, th bot.Thread, a bot.Approval, text string, replace bool) error {
	// One message per approval, edited from the request to the outcome.
	msg := bot.OutboxMessage{
		Key: "approval/" + a.ID, Thread: th, WorkItemID: a.WorkItemID, Kind: bot.OutboxReply, Text: text,
		Approval: &bot.ApprovalView{
			ID: a.ID, Agent: a.Agent, Profile: a.Profile, Tool: a.Tool, Arguments: a.Arguments, Reason: a.Reason,
			State: string(a.Status), DecidedBy: a.DecidedBy, ExpiresAt: a.ExpiresAt,
		},
	}
	if replace {
		if _, err := n.out.Enqueue(ctx, msg); err != nil {
			return err
		}
	} else if _, created, err := n.out.EnqueueNew(ctx, msg); err != nil || !created {
		return err
	}
	n.wake()
	return nil
}

// slackApprovals decides approvals from Approve / Deny clicks in Slack. The
// Slack adapter is built before the agent runtime, so the approvals are
// looked up when a click comes, not when it is made.
type slackApprovals struct{ d *Daemon }

var _ slack.ApprovalDecider = slackApprovals{}

func (s slackApprovals) DecideApproval(ctx context.Context, c slack.ApprovalClick) error {
	ap := s.d.approvals
	if ap == nil {
		return bot.Errorf(bot.EUNAVAILABLE, "approvals are not set up on this Switchyard")
	}
	a, err := ap.Get(ctx, c.ApprovalID)
	if err != nil {
		return err
	}
	// A prompt is decided where it was asked: a click elsewhere is forged
	// or stale. The prompt is a reply in its thread, so a click that names
	// a thread names that one.
	th, err := bot.ParseThread(a.SessionKey)
	if err != nil || th.Source != bot.SourceSlack || th.Channel != c.Channel || (c.Team != "" && th.Team != c.Team) {
		return bot.Errorf(bot.EFORBIDDEN, "approval %q was not asked in this channel", c.ApprovalID)
	}
	if c.ThreadTS != "" && c.ThreadTS != th.ThreadTS {
		return bot.Errorf(bot.EFORBIDDEN, "approval %q was not asked in this thread", c.ApprovalID)
	}
	// Slack members are named by their member id in approver lists; the
	// click is the clicker's, as Slack signed it.
	_, err = ap.Decide(ctx, policy.ApprovalDecision{ID: c.ApprovalID, Approve: c.Approve, By: c.User})
	return err
}

// githubApprovals decides approvals from "/approve <id>" and "/deny <id>"
// comments, as the commenter's GitHub login. Like a click, a comment is
// honoured only in the thread the request was asked in.
type githubApprovals struct{ d *Daemon }

var _ github.ApprovalDecider = githubApprovals{}

func (g githubApprovals) DecideApproval(ctx context.Context, c github.ApprovalComment) error {
	ap := g.d.approvals
	if ap == nil {
		return bot.Errorf(bot.EUNAVAILABLE, "approvals are not set up on this Switchyard")
	}
	a, err := ap.Get(ctx, c.ApprovalID)
	if err != nil {
		return err
	}
	if a.SessionKey != c.Thread.Key() {
		return bot.Errorf(bot.EFORBIDDEN, "approval %q was not asked in this thread", c.ApprovalID)
	}
	// Approver lists mix GitHub logins with Slack member ids and API token
	// names, and anyone may comment on a public repository under a login
	// that spells one of them ("admin", "U0123ABCD"): a comment decides
	// only for a person with the permission asking for work needs, as
	// GitHub says now, not minutes ago.
	gate := g.d.ghGate
	if gate == nil {
		return bot.Errorf(bot.EUNAVAILABLE, "approvals from GitHub comments need the GitHub App, which is not set up")
	}
	th := c.Thread
	repo := th.Owner + "/" + th.Repo
	perm, err := gate.PermissionNow(ctx, &bot.Event{Repo: repo, Actor: c.Login, Thread: th})
	if err != nil {
		return bot.Errorf(bot.EUNAVAILABLE, "could not look up @%s's permission on %s, so nothing was decided; comment again later", c.Login, repo)
	}
	refused := ""
	if min := gate.MinPermission(); !perm.AtLeast(min) {
		refused = fmt.Sprintf("@%s has %s permission on %s, and deciding an approval there needs %s (github.min_permission)", c.Login, perm, repo, min)
	}
	_, err = ap.Decide(ctx, policy.ApprovalDecision{ID: c.ApprovalID, Approve: c.Approve, By: c.Login, Refused: refused})
	return err
}

// auditLog shows the audit log to the admin API.
type auditLog struct{ a *policy.Auditor }

func (l auditLog) ListAudit(ctx context.Context, since time.Time, decision string, limit int, cursor string) (any, string, error) {
	recs, next, err := l.a.List(ctx, policy.AuditFilter{Since: since, Decision: decision, Limit: limit, Cursor: cursor})
	if recs == nil {
		recs = []policy.AuditRecord{}
	}
	return recs, next, err
}

// approvalDesk shows pending approvals to the admin API.
type approvalDesk struct{ a *policy.Approvals }

func (d approvalDesk) ListApprovals(ctx context.Context, all bool) (any, error) {
	list, err := d.a.List(ctx, all)
	if list == nil {
		list = []bot.Approval{}
	}
	return list, err
}

func (d approvalDesk) DecideApproval(ctx context.Context, id string, approve bool, by, claimed string) (any, error) {
	return d.a.Decide(ctx, policy.ApprovalDecision{ID: id, Approve: approve, By: by, Claimed: claimed})
}

// requesters completes requesters through the integration of their source;
// those of other sources come back as they are.
type requesters map[string]agents.RequesterResolver

var _ agents.RequesterResolver = requesters{}

func (rs requesters) ResolveRequester(ctx context.Context, r bot.Requester, th bot.Thread) (bot.Requester, error) {
	if res, ok := rs[r.Source]; ok {
		return res.ResolveRequester(ctx, r, th)
	}
	return r, nil
}
