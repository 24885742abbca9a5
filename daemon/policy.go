package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt"
)

// RunnerDeps is what the agent runtime is built from inside the daemon.
type RunnerDeps struct {
	Store *bolt.Store
	// Tools are the agent tools of the connected platforms (GitHub, Slack),
	// offered beside the core ones.
	Tools []tools.Tool
	// Notifier asks a call's thread for an approval and tells it the
	// outcome, through the outbox.
	Notifier policy.Notifier
}

// Runtime is what NewRunner builds: the runner, and the policy services the
// API exposes (nil when not configured).
type Runtime struct {
	Runner    bot.Runner
	Audit     *policy.Auditor
	Approvals *policy.Approvals
}

// outboxNotifier tells a thread about approvals through the outbox, so the
// request reaches wherever the thread lives (local console, GitHub, Slack).
type outboxNotifier struct {
	out  bot.Outboxer
	wake func()
}

var _ policy.Notifier = outboxNotifier{}

func (n outboxNotifier) ApprovalRequested(ctx context.Context, a policy.Approval) error {
	text := fmt.Sprintf("🔐 %s wants to run %s (%s): %s\nApprove with `switchyard approvals approve %s` or deny with `switchyard approvals deny %s` before %s; it is denied then.",
		a.Agent, a.Tool, a.Arguments, a.Reason, a.ID, a.ID, a.ExpiresAt.Format(time.Kitchen))
	return n.post(ctx, a, text)
}

func (n outboxNotifier) ApprovalResolved(ctx context.Context, a policy.Approval) error {
	text := fmt.Sprintf("🔐 %s: %s of %s by %s", a.ID, a.Status, a.Tool, firstNonEmpty(a.DecidedBy, "timeout"))
	return n.post(ctx, a, text)
}

func (n outboxNotifier) post(ctx context.Context, a policy.Approval, text string) error {
	th, err := bot.ParseThread(a.SessionKey)
	if err != nil {
		return fmt.Errorf("approval %s: %w", a.ID, err)
	}
	// One message per approval, edited from the request to the outcome.
	if _, err := n.out.Enqueue(ctx, bot.OutboxMessage{
		Key: "approval/" + a.ID, Thread: th, WorkItemID: a.WorkItemID, Kind: bot.OutboxReply, Text: text,
	}); err != nil {
		return err
	}
	n.wake()
	return nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// auditLog shows the audit log to the admin API.
type auditLog struct{ a *policy.Auditor }

func (l auditLog) ListAudit(ctx context.Context, since time.Time, decision string, limit int) (any, error) {
	recs, err := l.a.List(ctx, policy.AuditFilter{Since: since, Decision: decision, Limit: limit})
	if recs == nil {
		recs = []policy.AuditRecord{}
	}
	return recs, err
}

// approvalDesk shows pending approvals to the admin API.
type approvalDesk struct{ a *policy.Approvals }

func (d approvalDesk) ListApprovals(all bool) any {
	list := d.a.List(all)
	if list == nil {
		list = []policy.Approval{}
	}
	return list
}

func (d approvalDesk) DecideApproval(ctx context.Context, id string, approve bool, by string) (any, error) {
	return d.a.Decide(ctx, id, approve, by)
}
