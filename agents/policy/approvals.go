package policy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

// DefaultApprovalTimeout is how long a call waits for a person; then it is
// denied.
const DefaultApprovalTimeout = 15 * time.Minute

// Notifier asks the thread a call came from for a decision, and tells it
// the outcome. The Slack integration answers with buttons; the local
// console with `switchyard approvals`.
type Notifier interface {
	ApprovalRequested(ctx context.Context, a bot.Approval) error
	ApprovalResolved(ctx context.Context, a bot.Approval) error
}

// requestKeeper is a Notifier that can make sure the request of an
// approval asked before was made: a run resuming its wait calls it, so a
// request the asking process died before making (or failed to make) is
// made then, and one made is left as it is.
type requestKeeper interface {
	KeepApprovalRequested(ctx context.Context, a bot.Approval) error
}

// ApproverLists says who may approve calls of a profile; Engine implements
// it.
type ApproverLists interface {
	Approvers(profile string) []string
}

// ApprovalStore keeps approvals, so a pending one outlives the process that
// asked and any replica can decide it. storage/bolt and storage/postgres
// implement it.
type ApprovalStore interface {
	// CreateApproval stores a, pending, unless an approval with a.Key is
	// pending, or decided and not taken by a run yet: then it changes
	// nothing and returns that one with created false. An empty Key
	// always creates.
	CreateApproval(ctx context.Context, a bot.Approval) (stored bot.Approval, created bool, err error)
	// GetApproval returns one approval, or ENOTFOUND.
	GetApproval(ctx context.Context, id string) (bot.Approval, error)
	// ListApprovals returns the pending approvals, oldest first, and with
	// decided also the latest limit decided ones, most recently decided
	// first, after them.
	ListApprovals(ctx context.Context, decided bool, limit int) ([]bot.Approval, error)
	// DecideApproval ends a pending approval as out says. An approval no
	// longer pending is ECONFLICT, returned with the stored approval; an
	// unknown one ENOTFOUND.
	DecideApproval(ctx context.Context, id string, out bot.ApprovalOutcome) (bot.Approval, error)
	// TakeApproval records that a run received the outcome of a decided
	// approval, so no later run takes it again.
	TakeApproval(ctx context.Context, id string) error
	// FindApproval returns the approval a run asking with key would wait
	// on (pending, or decided and not taken), or ENOTFOUND.
	FindApproval(ctx context.Context, key string) (bot.Approval, error)
}

// ApprovalOptions configure Approvals.
type ApprovalOptions struct {
	// Store keeps the approvals. Required.
	Store ApprovalStore
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
	// Keep is how many decided approvals List shows; default 100.
	Keep int
	// Decided is called with the id of every approval this process
	// decides, so other processes sharing the store can wake the run
	// waiting on it (Changed); nil tells nobody.
	Decided func(id string)
	// Poll is how often a waiting run looks at its approval in the store
	// without being told of a change; default 5s. Changed makes it look
	// at once.
	Poll   time.Duration
	Logger *slog.Logger
	Now    func() time.Time
}

// Approvals asks people to decide tool calls and waits for them. The
// approvals live in the store: a pending one survives a restart (its Slack
// buttons and CLI commands keep working, and the run that resumes the job
// waits on it instead of asking again), and a decision made through any
// process sharing the store wakes the run waiting on it.
type Approvals struct {
	opts ApprovalOptions

	mu      sync.Mutex
	waiters map[string][]chan struct{} // approval id → runs waiting on it here
}

var _ tools.Approver = (*Approvals)(nil)

// NewApprovals returns Approvals over the store.
func NewApprovals(opts ApprovalOptions) (*Approvals, error) {
	if opts.Store == nil {
		return nil, errors.New("approvals: no store")
	}
	if opts.Approvers == nil {
		return nil, errors.New("approvals: no approver lists")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultApprovalTimeout
	}
	if opts.Keep <= 0 {
		opts.Keep = 100
	}
	if opts.Poll <= 0 {
		opts.Poll = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Approvals{opts: opts, waiters: map[string][]chan struct{}{}}, nil
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

func (c configuredApprover) Waiting(ctx context.Context, call tools.Call) (bool, error) {
	return c.a.Waiting(ctx, call)
}

// approvalKey names a call for the work item it serves, so the run that
// resumes a job after a restart finds the approval the job asked for.
// Calls outside a work item get no key and always ask.
func approvalKey(call tools.Call) string {
	if call.WorkItemID == "" {
		return ""
	}
	sum := sha256.Sum256(savedInput(call.Input))
	return call.WorkItemID + "/" + call.Agent + "/" + call.Tool.Name + "/" + hex.EncodeToString(sum[:16])
}

// savedInput is a call's input as a run's saved state gives it back to the
// run that resumes the job: encoding/json writes it compact, with <, > and
// & escaped. The key is made of that form, so a call the model wrote with
// spaces, or a command with a redirection, finds its approval again after
// a restart rather than asking anew.
func savedInput(in json.RawMessage) []byte {
	var compact bytes.Buffer
	if err := json.Compact(&compact, in); err != nil {
		return in
	}
	var escaped bytes.Buffer
	json.HTMLEscape(&escaped, compact.Bytes())
	return escaped.Bytes()
}

// Waiting reports whether call has an approval no run has acted on yet:
// asked and pending, or decided and not taken. Such a call never ran, so a
// run resumed after a crash makes it again, and it finds that approval
// (and a decision made meanwhile) instead of being reported interrupted.
func (a *Approvals) Waiting(ctx context.Context, call tools.Call) (bool, error) {
	key := approvalKey(call)
	if key == "" {
		return false, nil
	}
	_, err := a.opts.Store.FindApproval(ctx, key)
	switch {
	case err == nil:
		return true, nil
	case bot.ErrorCode(err) == bot.ENOTFOUND:
		return false, nil
	}
	return false, fmt.Errorf("find the approval of %s: %w", call.Tool.Name, err)
}

func (a *Approvals) approve(ctx context.Context, call tools.Call, reason string, lists ApproverLists, timeout time.Duration) (bool, error) {
	now := a.opts.Now()
	args := "[withheld: no redactor configured]"
	if a.opts.Redactor != nil {
		args = a.opts.Redactor.Redact(capText(string(call.Input), maxAuditArgs))
		reason = a.opts.Redactor.Redact(reason)
	}
	ap := bot.Approval{
		ID: newID("ap", now), Status: bot.ApprovalPending, Key: approvalKey(call), Tool: call.Tool.Name,
		Arguments: args, Reason: reason, Agent: call.Agent, Profile: call.Profile, SessionKey: call.SessionKey,
		WorkItemID: call.WorkItemID, JobID: call.JobID, CorrelationID: call.CorrelationID,
		Approvers: lists.Approvers(call.Profile), CreatedAt: now.UTC(), ExpiresAt: now.Add(timeout).UTC(),
	}
	stored, created, err := a.opts.Store.CreateApproval(ctx, ap)
	if err != nil {
		return false, fmt.Errorf("record the approval: %w", err)
	}
	wake := a.watch(stored.ID)
	defer a.unwatch(stored.ID, wake)
	if created {
		a.notify(ctx, stored, true)
	} else {
		a.opts.Logger.LogAttrs(ctx, slog.LevelInfo, "waiting on the approval asked before", slog.String("approval", stored.ID),
			slog.String("status", string(stored.Status)), slog.String("work_item", stored.WorkItemID))
		if k, ok := a.opts.Notifier.(requestKeeper); ok && stored.Status == bot.ApprovalPending {
			if err := k.KeepApprovalRequested(ctx, stored); err != nil {
				a.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "approval notification failed", slog.String("approval", stored.ID),
					slog.String("thread", stored.SessionKey), slog.String("error", err.Error()))
			}
		}
	}

	// Waiting for a person must not hold one of the dispatcher's workers.
	var approved bool
	err = bot.Await(ctx, func() error {
		var err error
		approved, err = a.wait(ctx, stored.ID, wake)
		return err
	})
	return approved, err
}

// watch registers a run waiting here on approval id.
func (a *Approvals) watch(id string) chan struct{} {
	ch := make(chan struct{}, 1)
	a.mu.Lock()
	a.waiters[id] = append(a.waiters[id], ch)
	a.mu.Unlock()
	return ch
}

func (a *Approvals) unwatch(id string, ch chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	list := a.waiters[id]
	for i, c := range list {
		if c == ch {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(a.waiters, id)
	} else {
		a.waiters[id] = list
	}
}

// Changed tells the runs waiting here on approval id that it may have been
// decided elsewhere (another process sharing the store).
func (a *Approvals) Changed(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ch := range a.waiters[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// ChangedAll makes every run waiting here look at its approval again, after
// notifications from other processes may have been missed.
func (a *Approvals) ChangedAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, list := range a.waiters {
		for _, ch := range list {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// wait blocks until approval id is decided, expires (denied, with
// ErrApprovalTimeout) or ctx ends. A run whose job is handed back
// (shutdown, a lease taken over) leaves the approval pending for the run
// that resumes the job; a run that ends otherwise cancels it.
func (a *Approvals) wait(ctx context.Context, id string, wake <-chan struct{}) (bool, error) {
	poll := time.NewTicker(a.opts.Poll)
	defer poll.Stop()
	for {
		cur, err := a.opts.Store.GetApproval(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return a.ended(ctx, id)
			}
			return false, fmt.Errorf("read approval %s: %w", id, err)
		}
		switch cur.Status {
		case bot.ApprovalApproved, bot.ApprovalRejected:
			a.take(ctx, cur)
			return cur.Status == bot.ApprovalApproved, nil
		case bot.ApprovalExpired:
			a.take(ctx, cur)
			return false, fmt.Errorf("%w (no decision by %s)", ErrApprovalTimeout, cur.ExpiresAt.Format(time.RFC3339))
		case bot.ApprovalCancelled:
			a.take(ctx, cur)
			return false, fmt.Errorf("approval %s was cancelled", id)
		}
		left := cur.ExpiresAt.Sub(a.opts.Now())
		if left <= 0 {
			res, err := a.opts.Store.DecideApproval(ctx, id, bot.ApprovalOutcome{Status: bot.ApprovalExpired, At: a.opts.Now(), Taken: true})
			if bot.ErrorCode(err) == bot.ECONFLICT {
				continue // decided just now: read it again
			}
			if err != nil {
				return false, fmt.Errorf("expire approval %s: %w", id, err)
			}
			a.finish(ctx, res)
			return false, fmt.Errorf("%w (no decision within %s)", ErrApprovalTimeout, cur.ExpiresAt.Sub(cur.CreatedAt).Round(time.Second))
		}
		timer := time.NewTimer(left)
		select {
		case <-wake:
		case <-poll.C:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return a.ended(ctx, id)
		}
		timer.Stop()
	}
}

// ended handles the end of a run's context while it waits on approval id.
func (a *Approvals) ended(ctx context.Context, id string) (bool, error) {
	if bot.HandedBack(ctx) {
		// The job runs again (after a restart, or on the worker that took
		// it over) and that run waits on this approval.
		return false, ctx.Err()
	}
	bg := context.WithoutCancel(ctx)
	res, err := a.opts.Store.DecideApproval(bg, id, bot.ApprovalOutcome{Status: bot.ApprovalCancelled, At: a.opts.Now(), Taken: true})
	if err == nil {
		a.finish(bg, res)
	} else if bot.ErrorCode(err) != bot.ECONFLICT {
		a.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "cancel approval", slog.String("approval", id), slog.String("error", err.Error()))
	}
	return false, ctx.Err()
}

// take records that this run received a decision.
func (a *Approvals) take(ctx context.Context, ap bot.Approval) {
	if ap.Taken {
		return
	}
	if err := a.opts.Store.TakeApproval(context.WithoutCancel(ctx), ap.ID); err != nil {
		a.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "record that the run received the approval's outcome",
			slog.String("approval", ap.ID), slog.String("error", err.Error()))
	}
}

// finish records how an approval ended and tells its thread.
func (a *Approvals) finish(ctx context.Context, ap bot.Approval) {
	decision := map[bot.ApprovalStatus]string{
		bot.ApprovalApproved: AuditApproved, bot.ApprovalRejected: AuditRejected,
		bot.ApprovalExpired: AuditExpired, bot.ApprovalCancelled: AuditCancelled,
	}[ap.Status]
	a.audit(ctx, ap, decision, ap.DecidedBy)
	a.notify(ctx, ap, false)
}

func (a *Approvals) audit(ctx context.Context, ap bot.Approval, decision, by string) {
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

func (a *Approvals) notify(ctx context.Context, ap bot.Approval, requested bool) {
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
func (a *Approvals) List(ctx context.Context, all bool) ([]bot.Approval, error) {
	list, err := a.opts.Store.ListApprovals(ctx, all, a.opts.Keep)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	return list, nil
}

// Get returns one approval, pending or decided.
func (a *Approvals) Get(ctx context.Context, id string) (bot.Approval, error) {
	ap, err := a.opts.Store.GetApproval(ctx, id)
	if err != nil && bot.ErrorCode(err) == bot.ENOTFOUND {
		return bot.Approval{}, bot.Errorf(bot.ENOTFOUND, "approval %q not found", id)
	}
	return ap, err
}

// Grant approves a pending call on behalf of by.
func (a *Approvals) Grant(ctx context.Context, id, by string) (bot.Approval, error) {
	return a.Decide(ctx, ApprovalDecision{ID: id, Approve: true, By: by})
}

// Reject denies a pending call on behalf of by.
func (a *Approvals) Reject(ctx context.Context, id, by string) (bot.Approval, error) {
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
	// Refused, when set, is why the source found that By may not decide
	// whatever the approver list says (a GitHub commenter without the
	// permission on the repository that asking for work needs): the
	// attempt is refused and audited as not_approver with this reason.
	Refused string
}

// Decide records a person's decision, tells the thread and wakes the run
// waiting on it, wherever it runs. It is refused (bot.EFORBIDDEN, and
// audited) when it comes from inside an agent's run — a tool call's context
// — whoever it names, when the request claims to be someone other than who
// authenticated, and when By is not one of the profile's approvers. An
// approval already decided or expired is a bot.ECONFLICT, an unknown one
// bot.ENOTFOUND.
func (a *Approvals) Decide(ctx context.Context, d ApprovalDecision) (bot.Approval, error) {
	if err := ctx.Err(); err != nil {
		return bot.Approval{}, err
	}
	id, by := d.ID, strings.TrimSpace(d.By)
	if cc, ok := tools.CallFrom(ctx); ok {
		// An agent's run never decides an approval, its own or another's,
		// however the request reached here.
		a.refused(ctx, id, AuditFromRun, "agent "+cc.Agent, fmt.Sprintf("decided from inside a run of agent %q (job %s)", cc.Agent, cc.JobID))
		return bot.Approval{}, bot.Errorf(bot.EFORBIDDEN, "approval %q cannot be decided from inside an agent's run", id)
	}
	if by == "" {
		return bot.Approval{}, bot.Errorf(bot.EINVALID, "approval %q: who decides is required", id)
	}
	if claimed := strings.TrimSpace(d.Claimed); claimed != "" && !strings.EqualFold(claimed, by) {
		a.refused(ctx, id, AuditWrongIdentity, by, fmt.Sprintf("authenticated as %q, asked to decide as %q", by, claimed))
		return bot.Approval{}, bot.Errorf(bot.EFORBIDDEN,
			"you are authenticated as %q and cannot decide approval %q as %q: leave out by, or use %s's own token", by, id, claimed, claimed)
	}
	cur, err := a.Get(ctx, id)
	if err != nil {
		if bot.ErrorCode(err) == bot.ENOTFOUND {
			return bot.Approval{}, bot.Errorf(bot.ENOTFOUND, "approval %q not found (it may have expired)", id)
		}
		return bot.Approval{}, err
	}
	if cur.Status != bot.ApprovalPending {
		return cur, alreadyDecided(cur)
	}
	if d.Refused != "" {
		refused := cur
		refused.Reason = d.Refused
		a.audit(ctx, refused, AuditNotApprover, by)
		return bot.Approval{}, bot.Errorf(bot.EFORBIDDEN, "%s may not decide approval %q: %s", by, id, d.Refused)
	}
	if !mayApprove(cur.Approvers, by) {
		// Someone tried to decide who may not: nothing changes, but it is
		// on the record.
		a.audit(ctx, cur, AuditNotApprover, by)
		who := "nobody"
		if len(cur.Approvers) > 0 {
			who = strings.Join(cur.Approvers, ", ")
		}
		return bot.Approval{}, bot.Errorf(bot.EFORBIDDEN, "%s may not decide approval %q: calls of profile %q are decided by %s", by, id, cur.Profile, who)
	}
	now := a.opts.Now()
	out := bot.ApprovalOutcome{Status: bot.ApprovalRejected, By: by, At: now}
	if d.Approve {
		out.Status = bot.ApprovalApproved
	}
	if !now.Before(cur.ExpiresAt) {
		// Its time ran out while no run was waiting on it (the daemon was
		// down): it is denied, as it would have been.
		out = bot.ApprovalOutcome{Status: bot.ApprovalExpired, At: now}
	}
	res, err := a.opts.Store.DecideApproval(ctx, id, out)
	if err != nil {
		if bot.ErrorCode(err) == bot.ECONFLICT {
			return res, alreadyDecided(res)
		}
		return bot.Approval{}, fmt.Errorf("decide approval %s: %w", id, err)
	}
	a.finish(context.WithoutCancel(ctx), res)
	a.Changed(id)
	if a.opts.Decided != nil {
		a.opts.Decided(id)
	}
	if res.Status == bot.ApprovalExpired {
		return res, alreadyDecided(res)
	}
	return res, nil
}

func alreadyDecided(ap bot.Approval) error {
	who := ""
	if ap.DecidedBy != "" {
		who = " by " + ap.DecidedBy
	}
	return bot.Errorf(bot.ECONFLICT, "approval %q is already %s%s", ap.ID, ap.Status, who)
}

// refused records an attempt to decide approval id that was refused before
// the approver list was asked.
func (a *Approvals) refused(ctx context.Context, id, decision, by, reason string) {
	ap, err := a.Get(ctx, id)
	if err != nil {
		ap = bot.Approval{ID: id}
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
