package agents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchyard/switchyard/bot"
)

// Subagent limits, used when neither the config nor the agent says.
const (
	DefaultMaxConcurrent = 4
	// DefaultMaxSpawnDepth lets top-level runs spawn and their children not.
	DefaultMaxSpawnDepth = 1
	DefaultChildTimeout  = 10 * time.Minute
)

// SubagentLimits bound what a run may spawn; zero fields take the defaults.
type SubagentLimits struct {
	// MaxConcurrent is how many of a run's children may be open (queued or
	// running) at once; a spawn beyond it is refused.
	MaxConcurrent int
	// MaxDepth is how many spawns deep a tree may go below the agent that
	// spawns: 1 means its children cannot spawn.
	MaxDepth int
	// Timeout is the longest a child may take, counted from its spawn; a
	// spawn may ask for less.
	Timeout time.Duration
}

func (l SubagentLimits) withDefaults() SubagentLimits {
	if l.MaxConcurrent <= 0 {
		l.MaxConcurrent = DefaultMaxConcurrent
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxSpawnDepth
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultChildTimeout
	}
	return l
}

// over returns l with the agent's own settings in place of its fields.
func (l SubagentLimits) over(own SubagentLimits) SubagentLimits {
	if own.MaxConcurrent > 0 {
		l.MaxConcurrent = own.MaxConcurrent
	}
	if own.MaxDepth > 0 {
		l.MaxDepth = own.MaxDepth
	}
	if own.Timeout > 0 {
		l.Timeout = own.Timeout
	}
	return l
}

// Why a subagent's run was stopped, as the causes of its context.
var (
	errChildTimedOut  = errors.New("its timeout passed")
	errChildCancelled = errors.New("it was cancelled")
)

// Subagents is what the process knows of subagents beyond the ledger: the
// runs of this process (to cancel them and show what they do), who waits
// for which record to end, and the trees status messages show. The ledger
// stays the truth; this is how the process learns of changes at once. One
// serves every runtime the daemon builds, so a parent and its child meet
// across a reload of the configuration.
type Subagents struct {
	store bot.LedgerStore
	wake  func()
	now   func() time.Time
	log   *slog.Logger

	spawnMu sync.Mutex // spawns one at a time: the concurrency limit is counted, then written

	mu       sync.Mutex
	waiters  map[string][]chan struct{} // record id → closed when it may have ended
	adopters map[string]*adoption       // record id → the run waiting for exactly it, which may write its end
	// handed are the ends of finished children handed to their parent
	// (Adopt) until they are written; cancelling counts the cancels under
	// way of each record. A cancel refuses a child whose end was handed
	// over, and a child being cancelled is not handed over, so a child
	// that finished is never recorded cancelled beside a work item done.
	handed     map[string]*bot.JobEnd
	cancelling map[string]int
	live       map[string]*liveChild // subagents running in this process
	trees      map[string]*treeWatch // parent work item → the tree its run shows
	treeWait   time.Duration
}

// liveChild is a subagent running in this process.
type liveChild struct {
	cancel   context.CancelCauseFunc
	activity string
	tokens   int
}

// SubagentsOptions configure Subagents; Ledger is required.
type SubagentsOptions struct {
	Ledger bot.LedgerStore
	// Wake tells the dispatcher a subagent's work item waits; nil leaves
	// it to the dispatcher's poll.
	Wake   func()
	Logger *slog.Logger
	Now    func() time.Time
}

// NewSubagents returns the subagents of a process.
func NewSubagents(opts SubagentsOptions) *Subagents {
	if opts.Wake == nil {
		opts.Wake = func() {}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Subagents{
		store: opts.Ledger, wake: opts.Wake, now: opts.Now, log: opts.Logger,
		waiters: map[string][]chan struct{}{}, adopters: map[string]*adoption{}, live: map[string]*liveChild{}, trees: map[string]*treeWatch{},
		handed: map[string]*bot.JobEnd{}, cancelling: map[string]int{},
		treeWait: 250 * time.Millisecond,
	}
}

// signal wakes whoever waits for record id, and the tree it is part of.
func (c *Subagents) signal(id, parentWorkItem string) {
	c.mu.Lock()
	ws := c.waiters[id]
	delete(c.waiters, id)
	c.mu.Unlock()
	for _, w := range ws {
		close(w)
	}
	c.treeChanged(parentWorkItem)
}

// subscribe returns a channel closed at the next signal of id.
func (c *Subagents) subscribe(id string) chan struct{} {
	ch := make(chan struct{})
	c.mu.Lock()
	c.waiters[id] = append(c.waiters[id], ch)
	c.mu.Unlock()
	return ch
}

func (c *Subagents) unsubscribe(id string, ch chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ws := c.waiters[id]
	if i := slices.Index(ws, ch); i >= 0 {
		c.waiters[id] = slices.Delete(ws, i, i+1)
		if len(c.waiters[id]) == 0 {
			delete(c.waiters, id)
		}
	}
}

// childPoll is how often a waiter reads the ledger besides being signalled:
// a record can end where no signal is sent (the store abandons a work item
// whose workers kept dying).
const childPoll = 2 * time.Second

// adoption is a run's offer to write the end of one child's job with its
// own next save (see Adopt): made before the child can end, so a child
// that ends at once finds it, and withdrawn when the run stops waiting.
type adoption struct {
	id   string
	ends chan *bot.JobEnd // cap 1
	// may reports whether the run has nothing else of its turn to wait
	// for, so a taken end is written at once, not held.
	may func() bool
}

// errWaiterGone is what a waiter that stopped waiting tells the job whose
// end was handed to it: the job writes its end itself.
var errWaiterGone = errors.New("the run waiting for the subagent stopped waiting")

// offer makes rec id's end offered to a run that may take it when may
// says so; the wait that follows withdraws it.
func (c *Subagents) offer(id string, may func() bool) *adoption {
	a := &adoption{id: id, ends: make(chan *bot.JobEnd, 1), may: may}
	c.mu.Lock()
	c.adopters[id] = a
	c.mu.Unlock()
	return a
}

// withdraw ends the offer; an end handed over meanwhile is returned.
func (c *Subagents) withdraw(a *adoption) *bot.JobEnd {
	c.mu.Lock()
	if c.adopters[a.id] == a {
		delete(c.adopters, a.id)
	}
	c.mu.Unlock()
	select {
	case end := <-a.ends:
		return end
	default:
		return nil
	}
}

// Adopt implements bot.DispatcherOptions.Adopt: the end of a subagent's
// job goes to its parent's run when that run waits in this process for
// exactly this child and for nothing else of its turn (one spawn a turn,
// or the last of a fan-out), so the parent writes it with its turn's
// results, a commit it makes anyway. Otherwise the job writes it.
func (c *Subagents) Adopt(_ context.Context, end *bot.JobEnd) bool {
	e := end.Outcome.Records.Run
	if e == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.adopters[e.ID]
	if a == nil || c.cancelling[e.ID] > 0 || !a.may() {
		return false
	}
	delete(c.adopters, e.ID)
	c.handed[e.ID] = end
	a.ends <- end
	return true
}

// beginCancel notes a cancel of record id under way, unless the record's
// end was handed to its parent and is not written yet: the child finished,
// and the cancel is refused as for a record that ended. The returned
// function ends the note.
func (c *Subagents) beginCancel(id string) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if end := c.handed[id]; end != nil {
		select {
		case <-end.Settled():
			delete(c.handed, id)
		default:
			return nil, bot.Errorf(bot.ECONFLICT, "%s has finished already; its end is being written with its parent's", id)
		}
	}
	c.cancelling[id]++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.cancelling[id]--; c.cancelling[id] <= 0 {
			delete(c.cancelling, id)
		}
	}, nil
}

// wait blocks until record id is no longer open, until deadline (zero: no
// deadline), or until ctx ends, and returns the record as it then is. With
// an offer to take the child's end (a), the wait withdraws it as it ends;
// when the child's job handed its end over, the record is returned as that
// end makes it, with the end, which the caller writes with its next save.
func (c *Subagents) wait(ctx context.Context, id string, deadline time.Time, a *adoption) (rec *bot.ChildRun, end *bot.JobEnd, err error) {
	var ends chan *bot.JobEnd
	if a != nil {
		ends = a.ends
		defer func() {
			late := c.withdraw(a)
			switch {
			case late == nil || end != nil:
			case err != nil || rec == nil:
				// Handed over as the wait failed: the job writes it.
				late.Written(errWaiterGone)
			default:
				rec, end = ended(rec, late), late
			}
		}()
	}
	var timer <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timer = t.C
	}
	poll := time.NewTicker(childPoll)
	defer poll.Stop()
	for {
		ch := c.subscribe(id)
		r, err := c.store.GetRun(ctx, id)
		if err != nil || !r.Status.Open() {
			c.unsubscribe(id, ch)
			return r, nil, err
		}
		select {
		case <-ch:
		case got := <-ends:
			c.unsubscribe(id, ch)
			return ended(r, got), got, nil
		case <-poll.C:
			c.unsubscribe(id, ch)
		case <-timer:
			c.unsubscribe(id, ch)
			return r, nil, nil
		case <-ctx.Done():
			c.unsubscribe(id, ch)
			return r, nil, context.Cause(ctx)
		}
	}
}

// ended is rec as end, a job's end handed over, leaves it.
func ended(rec *bot.ChildRun, end *bot.JobEnd) *bot.ChildRun {
	out := *rec
	end.Outcome.Records.Run.Apply(&out)
	return &out
}

// started records a subagent's run in this process; the returned function
// forgets it.
func (c *Subagents) started(rec *bot.ChildRun, cancel context.CancelCauseFunc) func() {
	c.mu.Lock()
	c.live[rec.ID] = &liveChild{cancel: cancel, activity: "starting"}
	c.mu.Unlock()
	c.treeChanged(rec.ParentLinks.WorkItemID)
	return func() {
		c.mu.Lock()
		delete(c.live, rec.ID)
		c.mu.Unlock()
	}
}

// progress notes what a running subagent does, for its parent's tree.
func (c *Subagents) progress(rec *bot.ChildRun, activity string, tokens int) {
	c.mu.Lock()
	if l := c.live[rec.ID]; l != nil {
		if activity != "" {
			l.activity = activity
		}
		if tokens > 0 {
			l.tokens = tokens
		}
	}
	c.mu.Unlock()
	c.treeChanged(rec.ParentLinks.WorkItemID)
}

// cancelLive stops a subagent running in this process; false when it runs
// nowhere here.
func (c *Subagents) cancelLive(id string, cause error) bool {
	c.mu.Lock()
	l := c.live[id]
	c.mu.Unlock()
	if l == nil {
		return false
	}
	l.cancel(cause)
	return true
}

// errNotOpen refuses to change a record that ended meanwhile.
var errNotOpen = errors.New("the record ended meanwhile")

// finish records how a subagent's run ended, unless the record ended first
// (cancelled, timed out by its parent), and wakes its waiters.
func (c *Subagents) finish(ctx context.Context, rec *bot.ChildRun, status bot.RunStatus, result, errText string, tokens int) *bot.ChildRun {
	now := c.now().UTC()
	out, err := c.store.UpdateRun(ctx, rec.ID, func(r *bot.ChildRun) error {
		r.Tokens = max(r.Tokens, tokens)
		if !r.Status.Open() {
			return nil
		}
		r.Status, r.Result, r.Error, r.FinishedAt = status, clip(result, maxResult), errText, &now
		return nil
	})
	if err != nil {
		c.log.LogAttrs(ctx, slog.LevelError, "record a subagent's end", slog.String("run", rec.ID), slog.String("error", err.Error()))
		out = rec
	}
	c.signal(rec.ID, rec.ParentLinks.WorkItemID)
	return out
}

// maxResult bounds the answer kept in a record, its ellipsis included
// within the ledger's bound; the transcript keeps it all.
const maxResult = bot.MaxLedgerText - len("…")

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// cancel ends an open record with a receipt: a queued subagent leaves the
// queue, a running one here is stopped, a handoff takes the receipt of its
// work item's cancel. by and reason go on the receipt.
func (c *Subagents) cancel(ctx context.Context, rec *bot.ChildRun, reason, by string) (*bot.ChildRun, error) {
	done, err := c.beginCancel(rec.ID)
	if err != nil {
		return nil, err
	}
	defer done()
	now := c.now().UTC()
	receipt := bot.Receipt{Reason: reason, By: by, At: now}
	var out *bot.ChildRun
	handoff := rec.Kind == bot.RunHandoff
	switch {
	case !handoff && (rec.Kind != bot.RunSubagent || rec.Status == bot.RunQueued):
		out, err = c.store.CancelRun(ctx, rec.ID, receipt)
	default:
		out, err = c.store.UpdateRun(ctx, rec.ID, func(r *bot.ChildRun) error {
			// A handoff's work item is cancelled first (see
			// CancelHandoff), and its end may close the record before
			// this: the record then takes the receipt it lacks.
			byItsWork := handoff && r.Status == bot.RunCancelled && r.Receipt == nil
			if !r.Status.Open() && !byItsWork {
				return bot.Errorf(bot.ECONFLICT, "%s is %s already", r.ID, r.Status)
			}
			receipt.RecordID, receipt.Kind, receipt.Action = r.ID, string(r.Kind), bot.ReceiptCancelled
			receipt.PreviousStatus, receipt.Owner, receipt.Creator = string(r.Status), r.Owner, r.Creator
			if byItsWork {
				receipt.PreviousStatus = string(rec.Status)
			} else {
				r.FinishedAt = &now
			}
			r.Status, r.Receipt = bot.RunCancelled, &receipt
			r.Error = "cancelled: " + reason
			return nil
		})
		if err == nil {
			c.cancelLive(rec.ID, errChildCancelled)
		}
	}
	if err != nil {
		return nil, err
	}
	c.signal(rec.ID, rec.ParentLinks.WorkItemID)
	return out, nil
}

// treeWatch is the status of a run that spawned: its tree is rendered
// again, at most every treeWait, whenever one of its children changes.
type treeWatch struct {
	report  func(lines []string)
	pending bool // guarded by children.mu

	mu     sync.Mutex // serialises renders: the last one is the run's final tree
	closed bool
}

// watchTree shows the tree under parentWorkItem through report until the
// returned function is called, which shows it one last time when there is
// one: a run's final status shows how its children ended.
func (c *Subagents) watchTree(parentWorkItem string, report func(lines []string)) func() {
	if parentWorkItem == "" {
		return func() {}
	}
	w := &treeWatch{report: report}
	c.mu.Lock()
	c.trees[parentWorkItem] = w
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		if c.trees[parentWorkItem] == w {
			delete(c.trees, parentWorkItem)
		}
		c.mu.Unlock()
		w.mu.Lock()
		defer w.mu.Unlock()
		w.closed = true
		if lines := c.treeLines(context.Background(), parentWorkItem); len(lines) > 0 {
			w.report(lines)
		}
	}
}

// treeChanged renders the tree of parentWorkItem again soon, if a run
// shows it.
func (c *Subagents) treeChanged(parentWorkItem string) {
	if parentWorkItem == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.trees[parentWorkItem]
	if w == nil || w.pending {
		return
	}
	w.pending = true
	time.AfterFunc(c.treeWait, func() {
		c.mu.Lock()
		w.pending = false
		c.mu.Unlock()
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.closed {
			w.report(c.treeLines(context.Background(), parentWorkItem))
		}
	})
}

// maxTreeLines bounds the tree a status message shows; the rest is counted.
const maxTreeLines = 20

// treeLines is the tree under parentWorkItem, one line per record, nested
// by indentation, newest spawns last: its agent, what it was asked, its
// status, what it is doing, its tokens and its time.
func (c *Subagents) treeLines(ctx context.Context, parentWorkItem string) []string {
	var lines []string
	total := 0
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		if depth > 4 {
			return
		}
		rs, _, err := c.store.ListRuns(ctx, bot.RunFilter{ParentWorkItemID: parent, Limit: 200})
		if err != nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "render the subagent tree", slog.String("work_item", parent), slog.String("error", err.Error()))
			return
		}
		for _, r := range slices.Backward(rs) {
			if r.Kind != bot.RunSubagent {
				continue
			}
			total++
			if len(lines) < maxTreeLines {
				lines = append(lines, strings.Repeat("  ", depth)+c.treeLine(&r))
			}
			if r.ChildWorkItemID != "" {
				walk(r.ChildWorkItemID, depth+1)
			}
		}
	}
	walk(parentWorkItem, 0)
	if total > len(lines) {
		lines = append(lines, fmt.Sprintf("…and %d more", total-len(lines)))
	}
	return lines
}

func (c *Subagents) treeLine(r *bot.ChildRun) string {
	c.mu.Lock()
	l := c.live[r.ID]
	var activity string
	tokens := r.Tokens
	if l != nil && r.Status.Open() {
		activity = l.activity
		tokens = max(tokens, l.tokens)
	}
	c.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s @%s: %s · %s", statusMark(r.Status), r.ID, r.Agent, oneLine(r.Task, 60), strings.ReplaceAll(string(r.Status), "_", " "))
	if activity != "" {
		b.WriteString(" · " + oneLine(activity, 60))
	}
	if tokens > 0 {
		b.WriteString(" · " + bot.Count(tokens, "token", "tokens"))
	}
	if d, ok := c.took(r); ok {
		b.WriteString(" · " + d)
	}
	return b.String()
}

// took is how long a record has run, or ran.
func (c *Subagents) took(r *bot.ChildRun) (string, bool) {
	if r.StartedAt == nil {
		return "", false
	}
	end := c.now()
	if r.FinishedAt != nil {
		end = *r.FinishedAt
	}
	return bot.Ago(end.Sub(*r.StartedAt)), true
}

func statusMark(s bot.RunStatus) string {
	switch s {
	case bot.RunQueued:
		return "⏸"
	case bot.RunRunning:
		return "⏳"
	case bot.RunDone:
		return "✅"
	case bot.RunCancelled:
		return "🚫"
	case bot.RunTimedOut:
		return "⌛"
	}
	return "❌"
}

// Await waits until record id ends or timeout passes (zero: no limit),
// holding no worker when called from a run, and returns the record as it
// then is: open when the wait timed out.
func (c *Subagents) Await(ctx context.Context, id string, timeout time.Duration) (*bot.ChildRun, error) {
	var deadline time.Time
	if timeout > 0 {
		deadline = c.now().Add(timeout)
	}
	var out *bot.ChildRun
	err := bot.Await(ctx, func() error {
		var err error
		out, _, err = c.wait(ctx, id, deadline, nil)
		return err
	})
	return out, err
}

// Cancel ends an open record with a receipt saying who and why: a queued
// subagent leaves the queue, a running one here is stopped. ECONFLICT when
// it has ended already.
func (c *Subagents) Cancel(ctx context.Context, id, reason, by string) (*bot.ChildRun, error) {
	rec, err := c.store.GetRun(ctx, id)
	if err != nil {
		return nil, err
	}
	if !rec.Status.Open() {
		return nil, bot.Errorf(bot.ECONFLICT, "%s is %s already", id, rec.Status)
	}
	return c.cancel(ctx, rec, reason, by)
}

// CancelHandoff gives the receipt of a cancel to the handoff rec, read
// open before the work item it handed on was cancelled: that work item's
// end may have closed the record meanwhile, without one. ECONFLICT when it
// ended otherwise.
func (c *Subagents) CancelHandoff(ctx context.Context, rec *bot.ChildRun, reason, by string) (*bot.ChildRun, error) {
	if rec.Kind != bot.RunHandoff || !rec.Status.Open() {
		return nil, bot.Errorf(bot.EINVALID, "%s is no open handoff", rec.ID)
	}
	return c.cancel(ctx, rec, reason, by)
}

// CloseOwned cancels every open subagent sessionKey owns and, with
// archive, archives every other record it owns that is not archived yet, so
// that nothing of it is carried over again. Each gets a receipt, returned
// in the order of the records. Agent calls and handoffs are archived, never
// cancelled: the first ran inside a job, the second is the work item of the
// agent it went to.
func (c *Subagents) CloseOwned(ctx context.Context, sessionKey, reason, by string, archive bool) ([]bot.Receipt, error) {
	var out []bot.Receipt
	f := bot.RunFilter{OwnerSessionKey: sessionKey, Unarchived: true, Limit: 1000}
	if !archive {
		f.Open = true
	}
	for {
		rs, next, err := c.store.ListRuns(ctx, f)
		if err != nil {
			return out, err
		}
		for _, rec := range rs {
			if rec.Kind == bot.RunSubagent && rec.Status.Open() {
				closed, err := c.cancel(ctx, &rec, reason, by)
				switch {
				case err == nil:
					rec = *closed
					out = append(out, *closed.Receipt)
				case bot.ErrorCode(err) != bot.ECONFLICT:
					return out, err
				}
			}
			if !archive {
				continue
			}
			now := c.now().UTC()
			archived, err := c.store.UpdateRun(ctx, rec.ID, func(r *bot.ChildRun) error {
				if r.ArchivedAt != nil {
					return errNotOpen
				}
				r.ArchivedAt = &now
				if r.Receipt == nil {
					r.Receipt = &bot.Receipt{RecordID: r.ID, Kind: string(r.Kind), Action: bot.ReceiptArchived,
						PreviousStatus: string(r.Status), Reason: reason, By: by, Owner: r.Owner, Creator: r.Creator, At: now}
				}
				return nil
			})
			switch {
			case err == nil && archived.Receipt.Action == bot.ReceiptArchived:
				out = append(out, *archived.Receipt)
			case err != nil && !errors.Is(err, errNotOpen):
				return out, err
			}
		}
		if next == "" {
			return out, nil
		}
		f.Cursor = next
	}
}
