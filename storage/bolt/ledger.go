package bolt

import (
	"context"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// The ledger lives in one top-level bucket of its own, created by the first
// record, so files written before it existed need no migration:
//
//	ledger/runs            seq → ChildRun JSON
//	ledger/runs_by_owner   owner session key + 0x00 + seq → ""
//	ledger/runs_by_parent  parent work item id + 0x00 + seq → ""
//	ledger/runs_by_child   child work item id → seq (subagents only)
//	ledger/runs_open       seq → "" while queued or running
//	ledger/tasks           seq → BackgroundTask JSON
//	ledger/tasks_by_owner  owner session key + 0x00 + seq → ""
//	ledger/tasks_open      seq → "" while running
//	ledger/resets          session key → time of the thread's last reset
//
// A subagent's record moves with its work item in the queue's own
// transactions (claim, release, expiry, finish), through runs_by_child.
var (
	bucketLedger       = []byte("ledger")
	ledgerRuns         = []byte("runs")
	ledgerRunsByOwner  = []byte("runs_by_owner")
	ledgerRunsByParent = []byte("runs_by_parent")
	ledgerRunsByChild  = []byte("runs_by_child")
	ledgerRunsOpen     = []byte("runs_open")
	ledgerTasks        = []byte("tasks")
	ledgerTasksByOwner = []byte("tasks_by_owner")
	ledgerTasksOpen    = []byte("tasks_open")
	ledgerResets       = []byte("resets")
)

const (
	prefixRun  = "run_"
	prefixTask = "task_"

	cursorRuns  byte = 'r' // key: seq (8)
	cursorTasks byte = 't' // key: seq (8)
)

// ledger gives access to the ledger's buckets in one transaction. In a
// read-only transaction before the first record, every bucket is nil.
type ledger struct {
	t                                      txn
	runs, byOwner, byParent, byChild, open *bolt.Bucket
	tasks, tasksByOwner, tasksOpen, resets *bolt.Bucket
	present                                bool
}

func (t txn) ledger() (ledger, error) {
	l := ledger{t: t}
	top := t.tx.Bucket(bucketLedger)
	if top == nil {
		if !t.tx.Writable() {
			return l, nil
		}
		var err error
		if top, err = t.tx.CreateBucket(bucketLedger); err != nil {
			return l, fmt.Errorf("create bucket %s: %w", bucketLedger, err)
		}
	}
	buckets := []struct {
		name []byte
		b    **bolt.Bucket
	}{
		{ledgerRuns, &l.runs}, {ledgerRunsByOwner, &l.byOwner}, {ledgerRunsByParent, &l.byParent},
		{ledgerRunsByChild, &l.byChild}, {ledgerRunsOpen, &l.open}, {ledgerTasks, &l.tasks},
		{ledgerTasksByOwner, &l.tasksByOwner}, {ledgerTasksOpen, &l.tasksOpen}, {ledgerResets, &l.resets},
	}
	for _, bk := range buckets {
		b := top.Bucket(bk.name)
		if b == nil && t.tx.Writable() {
			var err error
			if b, err = top.CreateBucket(bk.name); err != nil {
				return l, fmt.Errorf("create bucket %s/%s: %w", bucketLedger, bk.name, err)
			}
		}
		*bk.b = b
	}
	l.present = l.runs != nil
	return l, nil
}

func (l ledger) run(id string) (*bot.ChildRun, uint64, error) {
	seq, ok := parseID(prefixRun, id)
	if ok && l.present {
		if raw := l.runs.Get(seqKey(seq)); raw != nil {
			var r bot.ChildRun
			if err := unmarshal(raw, &r); err != nil {
				return nil, 0, fmt.Errorf("decode run %s: %w", id, err)
			}
			return &r, seq, nil
		}
	}
	return nil, 0, bot.Errorf(bot.ENOTFOUND, "run %q not found", id)
}

// putRun stores r under seq and keeps runs_open in step with its status.
func (l ledger) putRun(seq uint64, r *bot.ChildRun) error {
	if err := putJSON(l.runs, seqKey(seq), r); err != nil {
		return err
	}
	if r.Status.Open() {
		return l.open.Put(seqKey(seq), []byte{})
	}
	return l.open.Delete(seqKey(seq))
}

// addRun allocates r's id and writes it with its indexes.
func (l ledger) addRun(r *bot.ChildRun) (uint64, error) {
	seq, err := l.runs.NextSequence()
	if err != nil {
		return 0, err
	}
	r.ID = formatID(prefixRun, seq)
	if err := l.putRun(seq, r); err != nil {
		return 0, err
	}
	if r.SessionKey != "" {
		if err := l.byOwner.Put(indexKey(r.SessionKey, seq), []byte{}); err != nil {
			return 0, err
		}
	}
	if r.ParentLinks.WorkItemID != "" {
		if err := l.byParent.Put(indexKey(r.ParentLinks.WorkItemID, seq), []byte{}); err != nil {
			return 0, err
		}
	}
	return seq, nil
}

// SpawnChild writes a subagent's record with its work item and pending
// dispatch in a lane of its own, and with req.Claim leases the dispatch as
// a job of the claim's owner.
func (s *Store) SpawnChild(ctx context.Context, req bot.SpawnRequest) (bot.Spawned, error) {
	if err := ctx.Err(); err != nil {
		return bot.Spawned{}, err
	}
	r := req.Run
	r.Kind, r.Status = bot.RunSubagent, bot.RunQueued
	if err := r.Validate(); err != nil {
		return bot.Spawned{}, err
	}
	if err := req.Validate(); err != nil {
		return bot.Spawned{}, err
	}
	if req.State != nil {
		if err := checkRunState(req.State.WorkItemID, req.State.Doc); err != nil {
			return bot.Spawned{}, err
		}
	}
	if r.ParentLinks.WorkItemID == "" {
		return bot.Spawned{}, bot.Errorf(bot.EINVALID, "spawn %s: no parent work item", r.Agent)
	}
	if req.Thread.IsZero() {
		return bot.Spawned{}, bot.Errorf(bot.EINVALID, "spawn %s: no thread", r.Agent)
	}
	now := utc(req.Now)
	if req.Now.IsZero() {
		now = utc(time.Now())
	}
	r.CreatedAt, r.UpdatedAt = now, now
	var claim bot.ClaimRequest
	if req.Claim != nil {
		claim = *req.Claim
		claim.Now = utc(claim.Now)
		if claim.Now.IsZero() {
			claim.Now = now
		}
	}
	var out bot.Spawned
	err := s.update("spawn subagent", func(t txn) error {
		out = bot.Spawned{}
		l, err := t.ledger()
		if err != nil {
			return err
		}
		if _, _, err := t.workItem(r.ParentLinks.WorkItemID); err != nil {
			return err
		}
		wiSeq, err := t.bucket(bucketWorkItems).NextSequence()
		if err != nil {
			return err
		}
		dSeq, err := t.bucket(bucketDispatches).NextSequence()
		if err != nil {
			return err
		}
		wiID, dID := formatID(prefixWorkItem, wiSeq), formatID(prefixDispatch, dSeq)
		d := &bot.Dispatch{
			ID: dID, WorkItemID: wiID, Agent: r.Agent, Thread: req.Thread, Status: bot.DispatchPending,
			CreatedAt: now, UpdatedAt: now, Lane: bot.ChildLane(req.Thread, wiID),
		}
		rec := &workItemRecord{Dispatch: dID, WorkItem: bot.WorkItem{
			ID: wiID, Thread: req.Thread, Status: bot.StatusQueued, ParentID: r.ParentLinks.WorkItemID,
			Route: bot.Route{Agent: r.Agent, Kind: bot.RouteSubagent,
				Reason: fmt.Sprintf("subagent of @%s (%s)", r.AgentID, r.ParentLinks.WorkItemID)},
			Source: req.Thread.Source, Kind: bot.KindSubagent, Actor: r.AgentID, Requester: req.Requester,
			Text: r.Task, CreatedAt: now, UpdatedAt: now,
		}}
		run := r
		run.ChildWorkItemID, run.ChildDispatchID = wiID, dID
		// A claimed child is written as its worker's job would leave it
		// (startJob), rather than queued and then leased.
		var job *bot.Job
		var jobSeq uint64
		if req.Claim != nil {
			if job, jobSeq, err = t.newJob(claim, d.Agent); err != nil {
				return err
			}
			d.Status, d.Attempts, d.UpdatedAt = bot.DispatchLeased, 1, claim.Now
			job.Thread, job.Attempt, job.Lane = d.Thread, d.Attempts, d.Lane
			job.DispatchIDs, job.WorkItemIDs = []string{dID}, []string{wiID}
			rec.Status, rec.UpdatedAt = bot.StatusRunning, claim.Now
			run.Status, run.ChildJobID, run.UpdatedAt, run.StartedAt = bot.RunRunning, job.ID, claim.Now, &claim.Now
		}
		if err := putJSON(t.bucket(bucketWorkItems), seqKey(wiSeq), rec); err != nil {
			return err
		}
		if err := t.bucket(bucketItemsByThread).Put(indexKey(req.Thread.Key(), wiSeq), []byte{}); err != nil {
			return err
		}
		if err := t.bucket(bucketItemsByStatus).Put(indexKey(string(rec.Status), wiSeq), []byte{}); err != nil {
			return err
		}
		if err := t.putDispatch(dSeq, "", d); err != nil {
			return err
		}
		seq, err := l.addRun(&run)
		if err != nil {
			return err
		}
		if err := l.byChild.Put([]byte(wiID), seqKey(seq)); err != nil {
			return err
		}
		out.Run = run
		if req.State != nil {
			if err := t.saveRunState(req.State.WorkItemID, req.State.Doc); err != nil {
				return err
			}
		}
		if job == nil {
			return t.addPending(dSeq, d)
		}
		if err := t.bucket(bucketJobsByItem).Put(binaryPair(wiSeq, jobSeq), []byte{}); err != nil {
			return err
		}
		if err := t.writeJob(jobSeq, job, dispatchUnit(d), []uint64{dSeq}, []uint64{wiSeq}); err != nil {
			return err
		}
		out.Claim.Job, out.Claim.WorkItems = job, []bot.WorkItem{rec.WorkItem}
		return nil
	})
	if err != nil {
		return bot.Spawned{}, err
	}
	return out, nil
}

// AddRun records an agent call or a handoff.
func (s *Store) AddRun(ctx context.Context, r bot.ChildRun) (bot.ChildRun, error) {
	if err := ctx.Err(); err != nil {
		return bot.ChildRun{}, err
	}
	if r.Kind == bot.RunSubagent {
		return bot.ChildRun{}, bot.Errorf(bot.EINVALID, "run of %s: a subagent is added with its work item (SpawnChild)", r.Agent)
	}
	if err := r.Validate(); err != nil {
		return bot.ChildRun{}, err
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now()
	}
	r.CreatedAt = utc(r.CreatedAt)
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = r.CreatedAt
	}
	now := r.CreatedAt
	err := s.update("add run", func(t txn) error {
		l, err := t.ledger()
		if err != nil {
			return err
		}
		if r.Kind != bot.RunHandoff || r.ChildWorkItemID == "" {
			_, err = l.addRun(&r)
			return err
		}
		// A handoff moves with the work item it hands on, as a subagent
		// with its own: the latest handoff of a work item is the one its
		// next claim and end update. One it replaces ended with this one.
		if v := l.byChild.Get([]byte(r.ChildWorkItemID)); v != nil {
			prev, pseq, err := l.run(formatID(prefixRun, seqOf(v)))
			if err != nil {
				return err
			}
			if prev.Status.Open() {
				prev.Status, prev.UpdatedAt, prev.FinishedAt = bot.RunDone, now, &now
				prev.Result = "handed on to @" + r.Agent
				if err := l.putRun(pseq, prev); err != nil {
					return err
				}
			}
		}
		seq, err := l.addRun(&r)
		if err != nil {
			return err
		}
		return l.byChild.Put([]byte(r.ChildWorkItemID), seqKey(seq))
	})
	if err != nil {
		return bot.ChildRun{}, err
	}
	return r, nil
}

// GetRun returns one record.
func (s *Store) GetRun(ctx context.Context, id string) (*bot.ChildRun, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *bot.ChildRun
	err := s.view("get run", func(t txn) error {
		l, err := t.ledger()
		if err != nil {
			return err
		}
		out, _, err = l.run(id)
		return err
	})
	return out, err
}

// RunOfWorkItem returns the subagent whose work item workItemID is.
func (s *Store) RunOfWorkItem(ctx context.Context, workItemID string) (*bot.ChildRun, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *bot.ChildRun
	err := s.view("get run of work item", func(t txn) error {
		l, err := t.ledger()
		if err != nil {
			return err
		}
		if l.present {
			if v := l.byChild.Get([]byte(workItemID)); v != nil {
				out, _, err = l.run(formatID(prefixRun, seqOf(v)))
				return err
			}
		}
		return bot.Errorf(bot.ENOTFOUND, "work item %q is no subagent's", workItemID)
	})
	return out, err
}

// UpdateRun changes a record with edit. The kind, the id and the links
// stay as they were written.
func (s *Store) UpdateRun(ctx context.Context, id string, edit func(*bot.ChildRun) error) (*bot.ChildRun, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *bot.ChildRun
	err := s.update("update run", func(t txn) error {
		l, err := t.ledger()
		if err != nil {
			return err
		}
		r, seq, err := l.run(id)
		if err != nil {
			return err
		}
		next := *r
		next.Skills, next.Ceilings = slices.Clone(r.Skills), slices.Clone(r.Ceilings)
		if err := edit(&next); err != nil {
			return err
		}
		next.ID, next.Kind, next.Owner, next.ParentLinks = r.ID, r.Kind, r.Owner, r.ParentLinks
		next.ChildWorkItemID = r.ChildWorkItemID
		if err := next.Validate(); err != nil {
			return err
		}
		next.UpdatedAt = utc(time.Now())
		if err := l.putRun(seq, &next); err != nil {
			return err
		}
		out = &next
		return nil
	})
	return out, err
}

// endRun ends a subagent's record as e says, unless it ended first, and
// returns the record as it then stands.
func (t txn) endRun(e bot.RunEnd, now time.Time) (*bot.ChildRun, error) {
	l, err := t.ledger()
	if err != nil {
		return nil, err
	}
	r, seq, err := l.run(e.ID)
	if err != nil {
		return nil, err
	}
	e.At = utc(e.At)
	if e.At.IsZero() {
		e.At = now
	}
	if !e.Apply(r) {
		return r, nil
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	r.UpdatedAt = now
	return r, l.putRun(seq, r)
}

// CancelRun ends an open subagent with receipt; a queued one leaves the
// queue with its work item.
func (s *Store) CancelRun(ctx context.Context, id string, receipt bot.Receipt) (*bot.ChildRun, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := utc(receipt.At)
	if receipt.At.IsZero() {
		now = utc(time.Now())
	}
	var out *bot.ChildRun
	err := s.update("cancel run", func(t txn) error {
		l, err := t.ledger()
		if err != nil {
			return err
		}
		r, seq, err := l.run(id)
		if err != nil {
			return err
		}
		if !r.Status.Open() {
			return bot.Errorf(bot.ECONFLICT, "%s is %s already", id, r.Status)
		}
		if r.Kind == bot.RunSubagent && r.Status == bot.RunQueued && r.ChildDispatchID != "" {
			if err := t.cancelPending(r.ChildDispatchID, "cancelled: "+receipt.Reason, now); err != nil {
				return err
			}
		}
		receipt.RecordID, receipt.Kind, receipt.Action = r.ID, string(r.Kind), bot.ReceiptCancelled
		receipt.PreviousStatus, receipt.Owner, receipt.Creator, receipt.At = string(r.Status), r.Owner, r.Creator, now
		r.Status, r.Receipt, r.UpdatedAt, r.FinishedAt = bot.RunCancelled, &receipt, now, &now
		if r.Error == "" {
			r.Error = "cancelled: " + receipt.Reason
		}
		if err := l.putRun(seq, r); err != nil {
			return err
		}
		out = r
		return nil
	})
	return out, err
}

// cancelPending takes a pending dispatch out of the queue and cancels its
// work item with errText. A dispatch already claimed is left to its job.
func (t txn) cancelPending(dispatchID, errText string, now time.Time) error {
	d, seq, err := t.dispatch(dispatchID)
	if err != nil || d.Status != bot.DispatchPending {
		return err
	}
	if err := t.removePending(seq, d); err != nil {
		return err
	}
	d.Status, d.LastError, d.UpdatedAt = bot.DispatchFailed, errText, now
	if err := t.putDispatch(seq, bot.DispatchPending, d); err != nil {
		return err
	}
	_, err = t.setItemStatus(d, bot.StatusCancelled, now, func(wi *bot.WorkItem) {
		wi.Error = errText
		wi.FinishedAt = &now
	})
	return err
}

// childRun returns the record a work item runs for: a subagent's, or the
// latest handoff's.
func (t txn) childRun(wi *bot.WorkItem) (ledger, *bot.ChildRun, uint64, error) {
	if t.tx.Bucket(bucketLedger) == nil {
		return ledger{}, nil, 0, nil
	}
	l, err := t.ledger()
	if err != nil || !l.present {
		return l, nil, 0, err
	}
	v := l.byChild.Get([]byte(wi.ID))
	if v == nil {
		return l, nil, 0, nil
	}
	r, seq, err := l.run(formatID(prefixRun, seqOf(v)))
	return l, r, seq, err
}

// childClaimed marks the record of a claimed work item running in jobID.
func (t txn) childClaimed(wi *bot.WorkItem, jobID, dispatchID string, now time.Time) error {
	l, r, seq, err := t.childRun(wi)
	if err != nil || r == nil || !r.Status.Open() {
		return err
	}
	r.Status, r.ChildJobID, r.UpdatedAt = bot.RunRunning, jobID, now
	if r.ChildDispatchID == "" {
		r.ChildDispatchID = dispatchID
	}
	if r.StartedAt == nil {
		r.StartedAt = &now
	}
	return l.putRun(seq, r)
}

// childRequeued marks the record of a work item given back queued.
func (t txn) childRequeued(wi *bot.WorkItem, now time.Time) error {
	l, r, seq, err := t.childRun(wi)
	if err != nil || r == nil || r.Status != bot.RunRunning {
		return err
	}
	r.Status, r.UpdatedAt = bot.RunQueued, now
	return l.putRun(seq, r)
}

// childEnded ends the record of a finished work item, unless its run
// recorded how it ended first.
func (t txn) childEnded(wi *bot.WorkItem, status bot.RunStatus, result, errText string, now time.Time) error {
	l, r, seq, err := t.childRun(wi)
	if err != nil || r == nil || !r.Status.Open() {
		return err
	}
	r.Status, r.UpdatedAt, r.FinishedAt = status, now, &now
	if r.Result == "" {
		r.Result = bot.CapLedgerText(result)
	}
	if r.Error == "" {
		r.Error = errText
	}
	return l.putRun(seq, r)
}

// ListRuns pages records newest first through the narrowest index the
// filter allows, checking the rest of the filter per record.
func (s *Store) ListRuns(ctx context.Context, f bot.RunFilter) ([]bot.ChildRun, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if err := f.Validate(); err != nil {
		return nil, "", err
	}
	before, err := decodeCursor(cursorRuns, f.Cursor, 8)
	if err != nil {
		return nil, "", err
	}
	p := &pager{limit: bot.ListLimit(f.Limit)}
	out := []bot.ChildRun{}
	err = s.view("list runs", func(t txn) error {
		l, err := t.ledger()
		if err != nil || !l.present {
			return err
		}
		add := func(seq uint64) (bool, error) {
			var r bot.ChildRun
			raw := l.runs.Get(seqKey(seq))
			if raw == nil {
				return true, nil
			}
			if err := unmarshal(raw, &r); err != nil {
				return false, fmt.Errorf("decode run %d: %w", seq, err)
			}
			if !runMatches(&r, f) {
				return true, nil
			}
			ok, goOn := p.take(seqKey(seq))
			if ok {
				out = append(out, r)
			}
			return goOn, nil
		}
		// What is open is little beside everything a parent or an owner
		// ever started, which only grows: open records are found by their
		// own index whatever else the filter says.
		bucket, prefix := l.runs, []byte(nil)
		switch {
		case f.Open || f.Status.Open():
			bucket = l.open
		case f.ParentWorkItemID != "":
			bucket, prefix = l.byParent, indexPrefix(f.ParentWorkItemID)
		case f.OwnerSessionKey != "":
			bucket, prefix = l.byOwner, indexPrefix(f.OwnerSessionKey)
		}
		return scanBefore(bucket, prefix, 8, before, func(k, _ []byte) (bool, error) {
			return add(seqOf(k[len(prefix):]))
		})
	})
	if err != nil {
		return nil, "", err
	}
	return out, p.next(cursorRuns), nil
}

func runMatches(r *bot.ChildRun, f bot.RunFilter) bool {
	switch {
	case f.OwnerSessionKey != "" && r.SessionKey != f.OwnerSessionKey,
		f.OwnerAgent != "" && r.AgentID != f.OwnerAgent,
		f.ParentWorkItemID != "" && r.ParentLinks.WorkItemID != f.ParentWorkItemID,
		f.Status != "" && r.Status != f.Status,
		f.Open && !r.Status.Open(),
		f.Unarchived && r.ArchivedAt != nil:
		return false
	}
	return true
}

func (l ledger) task(id string) (*bot.BackgroundTask, uint64, error) {
	seq, ok := parseID(prefixTask, id)
	if ok && l.present {
		if raw := l.tasks.Get(seqKey(seq)); raw != nil {
			var bt bot.BackgroundTask
			if err := unmarshal(raw, &bt); err != nil {
				return nil, 0, fmt.Errorf("decode task %s: %w", id, err)
			}
			return &bt, seq, nil
		}
	}
	return nil, 0, bot.Errorf(bot.ENOTFOUND, "background task %q not found", id)
}

func (l ledger) putTask(seq uint64, bt *bot.BackgroundTask) error {
	if err := putJSON(l.tasks, seqKey(seq), bt); err != nil {
		return err
	}
	if bt.Status.Open() {
		return l.tasksOpen.Put(seqKey(seq), []byte{})
	}
	return l.tasksOpen.Delete(seqKey(seq))
}

// AddTask records a background task and gives it its id.
func (s *Store) AddTask(ctx context.Context, bt bot.BackgroundTask) (bot.BackgroundTask, error) {
	if err := ctx.Err(); err != nil {
		return bot.BackgroundTask{}, err
	}
	if err := bt.Validate(); err != nil {
		return bot.BackgroundTask{}, err
	}
	if bt.CreatedAt.IsZero() {
		bt.CreatedAt = time.Now()
	}
	bt.CreatedAt = utc(bt.CreatedAt)
	bt.UpdatedAt = bt.CreatedAt
	err := s.update("add background task", func(t txn) error {
		l, err := t.ledger()
		if err != nil {
			return err
		}
		seq, err := l.tasks.NextSequence()
		if err != nil {
			return err
		}
		bt.ID = formatID(prefixTask, seq)
		if err := l.putTask(seq, &bt); err != nil {
			return err
		}
		return l.tasksByOwner.Put(indexKey(bt.SessionKey, seq), []byte{})
	})
	if err != nil {
		return bot.BackgroundTask{}, err
	}
	return bt, nil
}

// GetTask returns one background task.
func (s *Store) GetTask(ctx context.Context, id string) (*bot.BackgroundTask, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *bot.BackgroundTask
	err := s.view("get background task", func(t txn) error {
		l, err := t.ledger()
		if err != nil {
			return err
		}
		out, _, err = l.task(id)
		return err
	})
	return out, err
}

// UpdateTask changes a background task with edit; its id, owner and
// creator stay as written.
func (s *Store) UpdateTask(ctx context.Context, id string, edit func(*bot.BackgroundTask) error) (*bot.BackgroundTask, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *bot.BackgroundTask
	err := s.update("update background task", func(t txn) error {
		l, err := t.ledger()
		if err != nil {
			return err
		}
		bt, seq, err := l.task(id)
		if err != nil {
			return err
		}
		next := *bt
		if err := edit(&next); err != nil {
			return err
		}
		next.ID, next.Owner, next.Creator = bt.ID, bt.Owner, bt.Creator
		if err := next.Validate(); err != nil {
			return err
		}
		next.UpdatedAt = utc(time.Now())
		if err := l.putTask(seq, &next); err != nil {
			return err
		}
		out = &next
		return nil
	})
	return out, err
}

// ListTasks pages background tasks newest first.
func (s *Store) ListTasks(ctx context.Context, f bot.TaskFilter) ([]bot.BackgroundTask, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	before, err := decodeCursor(cursorTasks, f.Cursor, 8)
	if err != nil {
		return nil, "", err
	}
	p := &pager{limit: bot.ListLimit(f.Limit)}
	out := []bot.BackgroundTask{}
	err = s.view("list background tasks", func(t txn) error {
		l, err := t.ledger()
		if err != nil || !l.present {
			return err
		}
		bucket, prefix := l.tasks, []byte(nil)
		switch {
		case f.OwnerSessionKey != "":
			bucket, prefix = l.tasksByOwner, indexPrefix(f.OwnerSessionKey)
		case f.Open:
			bucket = l.tasksOpen
		}
		return scanBefore(bucket, prefix, 8, before, func(k, _ []byte) (bool, error) {
			seq := seqOf(k[len(prefix):])
			raw := l.tasks.Get(seqKey(seq))
			if raw == nil {
				return true, nil
			}
			var bt bot.BackgroundTask
			if err := unmarshal(raw, &bt); err != nil {
				return false, fmt.Errorf("decode task %d: %w", seq, err)
			}
			switch {
			case f.OwnerSessionKey != "" && bt.SessionKey != f.OwnerSessionKey,
				f.OwnerAgent != "" && bt.AgentID != f.OwnerAgent,
				f.CreatorJobID != "" && bt.Creator.JobID != f.CreatorJobID,
				f.Open && !bt.Status.Open(),
				f.Unarchived && bt.ArchivedAt != nil:
				return true, nil
			}
			ok, goOn := p.take(seqKey(seq))
			if ok {
				out = append(out, bt)
			}
			return goOn, nil
		})
	})
	if err != nil {
		return nil, "", err
	}
	return out, p.next(cursorTasks), nil
}

// MarkThreadReset records the time of a thread's reset.
func (s *Store) MarkThreadReset(ctx context.Context, sessionKey string, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if sessionKey == "" {
		return bot.Errorf(bot.EINVALID, "reset: empty session key")
	}
	if len(sessionKey) > bolt.MaxKeySize {
		return bot.Errorf(bot.ETOOLARGE, "reset: session key longer than %d bytes", bolt.MaxKeySize)
	}
	return s.update("mark thread reset", func(t txn) error {
		l, err := t.ledger()
		if err != nil {
			return err
		}
		return l.resets.Put([]byte(sessionKey), timeKey(at))
	})
}

// ThreadResetAt returns when the thread was last reset.
func (s *Store) ThreadResetAt(ctx context.Context, sessionKey string) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	var at time.Time
	err := s.view("thread reset", func(t txn) error {
		l, err := t.ledger()
		if err != nil || !l.present {
			return err
		}
		if v := l.resets.Get([]byte(sessionKey)); len(v) == 8 {
			at = decodeTime(v)
		}
		return nil
	})
	return at, err
}
