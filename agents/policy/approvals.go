package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

// DefaultApprovalTimeout is how long a call waits for a person; then it is
// denied.
const DefaultApprovalTimeout = 15 * time.Minute

// ApprovalStatus is where an approval stands.
type ApprovalStatus string

const (
	ApprovalPending   ApprovalStatus = "pending"
	ApprovalApproved  ApprovalStatus = "approved"
	ApprovalRejected  ApprovalStatus = "rejected"
	ApprovalExpired   ApprovalStatus = "expired"
	ApprovalCancelled ApprovalStatus = "cancelled"
)

// Approval is one call waiting for, or decided by, a person. Arguments are
// redacted.
type Approval struct {
	ID            string         `json:"id"`
	Status        ApprovalStatus `json:"status"`
	Tool          string         `json:"tool"`
	Arguments     string         `json:"arguments"`
	Reason        string         `json:"reason"`
	Agent         string         `json:"agent"`
	Profile       string         `json:"profile"`
	SessionKey    string         `json:"session_key"`
	WorkItemID    string         `json:"work_item_id,omitempty"`
	JobID         string         `json:"job_id,omitempty"`
	CorrelationID string         `json:"correlation_id,omitempty"`
	Approvers     []string       `json:"approvers"`
	CreatedAt     time.Time      `json:"created_at"`
	ExpiresAt     time.Time      `json:"expires_at"`
	DecidedAt     *time.Time     `json:"decided_at,omitempty"`
	DecidedBy     string         `json:"decided_by,omitempty"`
}

// Notifier asks the thread a call came from for a decision, and tells it
// the outcome. The Slack integration answers with buttons; the local
// console with `switchyard approvals`.
type Notifier interface {
	ApprovalRequested(ctx context.Context, a Approval) error
	ApprovalResolved(ctx context.Context, a Approval) error
}

// ApproverLists says who may approve calls of a profile; Engine implements
// it.
type ApproverLists interface {
	Approvers(profile string) []string
}

// ApprovalOptions configure Approvals.
type ApprovalOptions struct {
	// Approvers is required.
	Approvers ApproverLists
	// Notifier asks the thread; nil means approvals are only listed.
	Notifier Notifier
	// Audit records every decision; nil records nothing.
	Audit *Auditor
	// Redactor masks secrets in the arguments shown to approvers; nil
	// withholds the arguments.
	Redactor *bot.Redactor
	// Timeout defaults to DefaultApprovalTimeout.
	Timeout time.Duration
	// Keep is how many decided approvals List remembers; default 100.
	Keep   int
	Logger *slog.Logger
	Now    func() time.Time
}

// Approvals holds the calls waiting for a person. A waiting call blocks its
// run, so pending approvals live as long as the process that waits: after a
// restart the run is retried from its job, and asks again.
type Approvals struct {
	opts ApprovalOptions

	mu      sync.Mutex
	pending map[string]*pendingApproval
	decided []Approval // most recent last
}

type pendingApproval struct {
	Approval
	timeout  time.Duration
	done     chan struct{}
	approved bool
}

var _ tools.Approver = (*Approvals)(nil)

// NewApprovals returns an empty Approvals.
func NewApprovals(opts ApprovalOptions) (*Approvals, error) {
	if opts.Approvers == nil {
		return nil, errors.New("approvals: no approver lists")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultApprovalTimeout
	}
	if opts.Keep <= 0 {
		opts.Keep = 100
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Approvals{opts: opts, pending: map[string]*pendingApproval{}}, nil
}

// ErrApprovalTimeout is the error of a call nobody decided in time.
var ErrApprovalTimeout = errors.New("nobody approved it in time, so it is denied")

// Approve implements tools.Approver: it records the call as pending, asks
// the thread, and blocks until a person decides, the approval expires
// (denied, with ErrApprovalTimeout) or ctx ends (cancelled).
func (a *Approvals) Approve(ctx context.Context, call tools.Call, reason string) (bool, error) {
	return a.approve(ctx, call, reason, a.opts.Approvers, a.opts.Timeout)
}

// With returns the Approver of one config: its calls ask the approvers
// lists names and wait at most timeout (0: the Approvals' own), while the
// pending approvals stay in a, where the API and Slack decide them. A
// reloaded config gives its runs a new Approver; an approval already asked
// keeps its approvers and its time.
func (a *Approvals) With(lists ApproverLists, timeout time.Duration) tools.Approver {
	if timeout <= 0 {
		timeout = a.opts.Timeout
	}
	return configuredApprover{a: a, lists: lists, timeout: timeout}
}

type configuredApprover struct {
	a       *Approvals
	lists   ApproverLists
	timeout time.Duration
}

func (c configuredApprover) Approve(ctx context.Context, call tools.Call, reason string) (bool, error) {
	return c.a.approve(ctx, call, reason, c.lists, c.timeout)
}

func (a *Approvals) approve(ctx context.Context, call tools.Call, reason string, lists ApproverLists, timeout time.Duration) (bool, error) {
	now := a.opts.Now()
	args := "[withheld: no redactor configured]"
	if a.opts.Redactor != nil {
		args = a.opts.Redactor.Redact(capText(string(call.Input), maxAuditArgs))
	}
	p := &pendingApproval{
		Approval: Approval{
			ID: newID("ap", now), Status: ApprovalPending, Tool: call.Tool.Name, Arguments: args, Reason: reason,
			Agent: call.Agent, Profile: call.Profile, SessionKey: call.SessionKey, WorkItemID: call.WorkItemID,
			JobID: call.JobID, CorrelationID: call.CorrelationID, Approvers: lists.Approvers(call.Profile),
			CreatedAt: now, ExpiresAt: now.Add(timeout),
		},
		timeout: timeout,
		done:    make(chan struct{}),
	}
	if a.opts.Redactor != nil {
		p.Reason = a.opts.Redactor.Redact(p.Reason)
	}
	a.mu.Lock()
	a.pending[p.ID] = p
	snapshot := p.Approval
	a.mu.Unlock()
	a.notify(ctx, snapshot, true)

	// Waiting for a person must not hold one of the dispatcher's workers.
	var approved bool
	err := bot.Await(ctx, func() error {
		var err error
		approved, err = a.wait(ctx, p)
		return err
	})
	return approved, err
}

// wait blocks until p is decided, expires (denied, with ErrApprovalTimeout)
// or ctx ends (cancelled).
func (a *Approvals) wait(ctx context.Context, p *pendingApproval) (bool, error) {
	timer := time.NewTimer(p.timeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		if res, ok := a.end(p, ApprovalExpired); ok {
			a.finish(ctx, res)
			return false, fmt.Errorf("%w (no decision within %s)", ErrApprovalTimeout, p.timeout)
		}
	case <-ctx.Done():
		if res, ok := a.end(p, ApprovalCancelled); ok {
			// The run is gone; record the outcome without its context.
			a.finish(context.WithoutCancel(ctx), res)
			return false, ctx.Err()
		}
	}
	// A person decided, possibly racing the timer or the context.
	<-p.done
	a.mu.Lock()
	res, approved := p.Approval, p.approved
	a.mu.Unlock()
	a.finish(context.WithoutCancel(ctx), res)
	return approved, nil
}

// end ends a pending approval without a person's decision; ok is false
// when a decision came first.
func (a *Approvals) end(p *pendingApproval, status ApprovalStatus) (Approval, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p.Status != ApprovalPending {
		return Approval{}, false
	}
	now := a.opts.Now()
	p.Status, p.DecidedAt = status, &now
	delete(a.pending, p.ID)
	a.remember(p.Approval)
	close(p.done)
	return p.Approval, true
}

// remember keeps a decided approval for List; the caller holds mu.
func (a *Approvals) remember(ap Approval) {
	a.decided = append(a.decided, ap)
	if over := len(a.decided) - a.opts.Keep; over > 0 {
		a.decided = slices.Delete(a.decided, 0, over)
	}
}

// finish records how an approval ended and tells its thread.
func (a *Approvals) finish(ctx context.Context, ap Approval) {
	decision := map[ApprovalStatus]string{
		ApprovalApproved: AuditApproved, ApprovalRejected: AuditRejected,
		ApprovalExpired: AuditExpired, ApprovalCancelled: AuditCancelled,
	}[ap.Status]
	a.audit(ctx, ap, decision, ap.DecidedBy)
	a.notify(ctx, ap, false)
}

func (a *Approvals) audit(ctx context.Context, ap Approval, decision, by string) {
	if a.opts.Audit == nil {
		return
	}
	err := a.opts.Audit.Record(ctx, AuditRecord{
		Decision: decision, Rule: "approval", Reason: ap.Reason, Tool: ap.Tool, Arguments: ap.Arguments,
		Agent: ap.Agent, Profile: ap.Profile, WorkItemID: ap.WorkItemID, JobID: ap.JobID,
		SessionKey: ap.SessionKey, CorrelationID: ap.CorrelationID, ApprovalID: ap.ID, By: by,
	})
	if err != nil {
		a.opts.Logger.LogAttrs(ctx, slog.LevelError, "audit record failed", slog.String("approval", ap.ID),
			slog.String("error", err.Error()))
	}
}

func (a *Approvals) notify(ctx context.Context, ap Approval, requested bool) {
	if a.opts.Notifier == nil {
		return
	}
	var err error
	if requested {
		err = a.opts.Notifier.ApprovalRequested(ctx, ap)
	} else {
		err = a.opts.Notifier.ApprovalResolved(ctx, ap)
	}
	if err != nil {
		a.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "approval notification failed", slog.String("approval", ap.ID),
			slog.String("thread", ap.SessionKey), slog.String("error", err.Error()))
	}
}

// List returns the pending approvals, oldest first, and with all also the
// recently decided ones, newest first after them.
func (a *Approvals) List(all bool) []Approval {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Approval, 0, len(a.pending))
	for _, p := range a.pending {
		out = append(out, p.Approval)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	if all {
		for i := len(a.decided) - 1; i >= 0; i-- {
			out = append(out, a.decided[i])
		}
	}
	return out
}

// Get returns one approval, pending or recently decided.
func (a *Approvals) Get(id string) (Approval, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.pending[id]; ok {
		return p.Approval, nil
	}
	for _, d := range a.decided {
		if d.ID == id {
			return d, nil
		}
	}
	return Approval{}, bot.Errorf(bot.ENOTFOUND, "approval %q not found", id)
}

// Grant approves a pending call on behalf of by.
func (a *Approvals) Grant(ctx context.Context, id, by string) (Approval, error) {
	return a.Decide(ctx, ApprovalDecision{ID: id, Approve: true, By: by})
}

// Reject denies a pending call on behalf of by.
func (a *Approvals) Reject(ctx context.Context, id, by string) (Approval, error) {
	return a.Decide(ctx, ApprovalDecision{ID: id, By: by})
}

// ApprovalDecision is a person's answer to a pending approval.
type ApprovalDecision struct {
	ID      string
	Approve bool
	// By is who decides, as they authenticated: a Slack member id, a
	// GitHub login, an API token's name. Never what a request says about
	// itself.
	By string
	// Claimed is who the request said decides (the API's "by"), "" when
	// it said nothing. A claim other than By is refused and audited.
	Claimed string
}

// Decide records a person's decision. It is refused (bot.EFORBIDDEN, and
// audited) when it comes from inside an agent's run — a tool call's context
// — whoever it names, when the request claims to be someone other than who
// authenticated, and when By is not one of the profile's approvers. An
// approval already decided or expired is a bot.ECONFLICT, an unknown one
// bot.ENOTFOUND.
func (a *Approvals) Decide(ctx context.Context, d ApprovalDecision) (Approval, error) {
	if err := ctx.Err(); err != nil {
		return Approval{}, err
	}
	id, by := d.ID, strings.TrimSpace(d.By)
	if cc, ok := tools.CallFrom(ctx); ok {
		// An agent's run never decides an approval, its own or another's,
		// however the request reached here.
		a.refused(ctx, id, AuditFromRun, "agent "+cc.Agent, fmt.Sprintf("decided from inside a run of agent %q (job %s)", cc.Agent, cc.JobID))
		return Approval{}, bot.Errorf(bot.EFORBIDDEN, "approval %q cannot be decided from inside an agent's run", id)
	}
	if by == "" {
		return Approval{}, bot.Errorf(bot.EINVALID, "approval %q: who decides is required", id)
	}
	if claimed := strings.TrimSpace(d.Claimed); claimed != "" && !strings.EqualFold(claimed, by) {
		a.refused(ctx, id, AuditWrongIdentity, by, fmt.Sprintf("authenticated as %q, asked to decide as %q", by, claimed))
		return Approval{}, bot.Errorf(bot.EFORBIDDEN,
			"you are authenticated as %q and cannot decide approval %q as %q: leave out by, or use %s's own token", by, id, claimed, claimed)
	}
	a.mu.Lock()
	p, ok := a.pending[id]
	if ok && !mayApprove(p.Approvers, by) {
		refused := p.Approval
		a.mu.Unlock()
		// Someone tried to decide who may not: nothing changes, but it is
		// on the record.
		a.audit(ctx, refused, AuditNotApprover, by)
		who := "nobody"
		if len(refused.Approvers) > 0 {
			who = strings.Join(refused.Approvers, ", ")
		}
		return Approval{}, bot.Errorf(bot.EFORBIDDEN, "%s may not decide approval %q: calls of profile %q are decided by %s", by, id, refused.Profile, who)
	}
	defer a.mu.Unlock()
	if !ok {
		for _, d := range a.decided {
			if d.ID == id {
				who := ""
				if d.DecidedBy != "" {
					who = " by " + d.DecidedBy
				}
				return d, bot.Errorf(bot.ECONFLICT, "approval %q is already %s%s", id, d.Status, who)
			}
		}
		return Approval{}, bot.Errorf(bot.ENOTFOUND, "approval %q not found (it may have expired)", id)
	}
	now := a.opts.Now()
	p.Status = ApprovalRejected
	if d.Approve {
		p.Status = ApprovalApproved
	}
	p.approved, p.DecidedBy, p.DecidedAt = d.Approve, by, &now
	delete(a.pending, id)
	a.remember(p.Approval)
	close(p.done)
	return p.Approval, nil
}

// refused records an attempt to decide approval id that was refused before
// the approver list was asked.
func (a *Approvals) refused(ctx context.Context, id, decision, by, reason string) {
	ap, err := a.Get(id)
	if err != nil {
		ap = Approval{ID: id}
	}
	ap.Reason = reason
	a.audit(ctx, ap, decision, by)
}

func mayApprove(approvers []string, by string) bool {
	for _, a := range approvers {
		if a == AnyApprover || strings.EqualFold(a, by) {
			return true
		}
	}
	return false
}
