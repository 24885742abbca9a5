package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/bot"
)

// The ledger (child runs and background tasks), budgets and run states.
// A subagent's record moves with its work item in the queue's own
// transactions (claim, release, expiry, finish), through run_children.

const (
	prefixRun  = "run_"
	prefixTask = "task_"

	cursorRuns  byte = 'r'
	cursorTasks byte = 't'
)

// pgUnit is a unit as the unit columns keep it: PostgreSQL's text holds no
// NUL, which a subagent's lane has (bot.ChildLane).
func pgUnit(u string) string { return strings.ReplaceAll(u, "\x00", "\x01") }

// dispatchUnit is the unit of d: its lane, or its thread's.
func dispatchUnit(d *bot.Dispatch) string {
	if d.Lane != "" {
		return pgUnit(d.Lane)
	}
	return unit(d.Thread, d.WorkItemID)
}

func getRun(ctx context.Context, q querier, id string, lock bool) (*bot.ChildRun, int64, error) {
	seq, ok := parseID(prefixRun, id)
	if ok {
		var doc []byte
		err := q.QueryRow(ctx, "SELECT doc FROM runs WHERE seq = $1"+forUpdate(lock), seq).Scan(&doc)
		if err == nil {
			var r bot.ChildRun
			if err := json.Unmarshal(doc, &r); err != nil {
				return nil, 0, fmt.Errorf("decode run %s: %w", id, err)
			}
			return &r, seq, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, 0, err
		}
	}
	return nil, 0, bot.Errorf(bot.ENOTFOUND, "run %q not found", id)
}

func putRun(ctx context.Context, q querier, seq int64, r *bot.ChildRun) error {
	doc, err := jsonDoc(r)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, "UPDATE runs SET status = $2, archived = $3, doc = $4 WHERE seq = $1", seq, string(r.Status), r.ArchivedAt != nil, doc)
	return err
}

// addRun gives r its id and writes it.
func addRun(ctx context.Context, q querier, r *bot.ChildRun) (int64, error) {
	var seq int64
	if err := q.QueryRow(ctx, "SELECT nextval('runs_seq_seq')").Scan(&seq); err != nil {
		return 0, err
	}
	r.ID = formatID(prefixRun, seq)
	doc, err := jsonDoc(r)
	if err != nil {
		return 0, err
	}
	_, err = q.Exec(ctx, `INSERT INTO runs (seq, owner_session, owner_agent, parent_wi, status, archived, doc)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, seq, r.SessionKey, r.AgentID, r.ParentLinks.WorkItemID, string(r.Status), r.ArchivedAt != nil, doc)
	return seq, err
}

// SpawnChild writes a subagent's record with its work item and pending
// dispatch in a lane of its own, and with req.Claim leases the dispatch as
// a job of the claim's owner.
func (s *Store) SpawnChild(ctx context.Context, req bot.SpawnRequest) (bot.Spawned, error) {
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
	base := r
	var out bot.Spawned
	err := s.tx(ctx, "spawn subagent", func(tx pgx.Tx) error {
		r = base
		out = bot.Spawned{}
		if _, err := getWorkItem(ctx, tx, r.ParentLinks.WorkItemID, false); err != nil {
			return err
		}
		var wiSeq, dSeq int64
		if err := tx.QueryRow(ctx, "SELECT nextval('work_items_seq_seq'), nextval('dispatches_seq_seq')").Scan(&wiSeq, &dSeq); err != nil {
			return err
		}
		wiID, dID := formatID(prefixWorkItem, wiSeq), formatID(prefixDispatch, dSeq)
		d := bot.Dispatch{
			ID: dID, WorkItemID: wiID, Agent: r.Agent, Thread: req.Thread, Status: bot.DispatchPending,
			CreatedAt: now, UpdatedAt: now, Lane: bot.ChildLane(req.Thread, wiID),
		}
		wi := bot.WorkItem{
			ID: wiID, Thread: req.Thread, Status: bot.StatusQueued, ParentID: r.ParentLinks.WorkItemID,
			Route: bot.Route{Agent: r.Agent, Kind: bot.RouteSubagent,
				Reason: fmt.Sprintf("subagent of @%s (%s)", r.AgentID, r.ParentLinks.WorkItemID)},
			Source: req.Thread.Source, Kind: bot.KindSubagent, Actor: r.AgentID, Requester: req.Requester,
			Text: r.Task, CreatedAt: now, UpdatedAt: now,
		}
		wiDoc, err := jsonDoc(wi)
		if err != nil {
			return err
		}
		dDoc, err := jsonDoc(d)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO work_items (seq, thread, status, dispatch_seq, doc) VALUES ($1, $2, $3, $4, $5)`,
			wiSeq, req.Thread.Key(), string(bot.StatusQueued), dSeq, wiDoc); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO dispatches (seq, work_item_seq, unit, agent, status, doc) VALUES ($1, $2, $3, $4, 'pending', $5)`,
			dSeq, wiSeq, dispatchUnit(&d), d.Agent, dDoc); err != nil {
			return err
		}
		r.ChildWorkItemID, r.ChildDispatchID = wiID, dID
		seq, err := addRun(ctx, tx, &r)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO run_children (child_wi, run_seq) VALUES ($1, $2)", wiID, seq); err != nil {
			return err
		}
		out.Run = r
		if req.State != nil {
			if err := saveRunState(ctx, tx, req.State.WorkItemID, req.State.Doc); err != nil {
				return err
			}
		}
		if req.Claim == nil {
			_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", notifyChannel, bot.TopicWork+":")
			return err
		}
		claim := *req.Claim
		claim.Now = utc(claim.Now)
		if claim.Now.IsZero() {
			claim.Now = now
		}
		if out.Claim.Job, out.Claim.WorkItems, err = startJob(ctx, tx, claim, dispatchUnit(&d), d.Agent, []int64{dSeq}); err != nil {
			return err
		}
		claimed, _, err := getRun(ctx, tx, r.ID, false)
		if err != nil {
			return err
		}
		out.Run = *claimed
		return nil
	})
	if err != nil {
		return bot.Spawned{}, err
	}
	return out, nil
}

// AddRun records an agent call or a handoff.
func (s *Store) AddRun(ctx context.Context, r bot.ChildRun) (bot.ChildRun, error) {
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
	base := r
	err := s.tx(ctx, "add run", func(tx pgx.Tx) error {
		r = base
		if r.Kind != bot.RunHandoff || r.ChildWorkItemID == "" {
			_, err := addRun(ctx, tx, &r)
			return err
		}
		// A handoff moves with the work item it hands on: the latest is
		// the one its next claim and end update; one it replaces ended.
		var prevSeq int64
		err := tx.QueryRow(ctx, "SELECT run_seq FROM run_children WHERE child_wi = $1 FOR UPDATE", r.ChildWorkItemID).Scan(&prevSeq)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err == nil {
			prev, pseq, err := getRun(ctx, tx, formatID(prefixRun, prevSeq), true)
			if err != nil {
				return err
			}
			if prev.Status.Open() {
				prev.Status, prev.UpdatedAt, prev.FinishedAt = bot.RunDone, now, &now
				prev.Result = "handed on to @" + r.Agent
				if err := putRun(ctx, tx, pseq, prev); err != nil {
					return err
				}
			}
		}
		seq, err := addRun(ctx, tx, &r)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO run_children (child_wi, run_seq) VALUES ($1, $2)
			ON CONFLICT (child_wi) DO UPDATE SET run_seq = EXCLUDED.run_seq`, r.ChildWorkItemID, seq)
		return err
	})
	if err != nil {
		return bot.ChildRun{}, err
	}
	return r, nil
}

// GetRun returns one record.
func (s *Store) GetRun(ctx context.Context, id string) (*bot.ChildRun, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	r, _, err := getRun(ctx, s.pool, id, false)
	return r, s.wrap("get run", err)
}

// RunOfWorkItem returns the subagent whose work item workItemID is.
func (s *Store) RunOfWorkItem(ctx context.Context, workItemID string) (*bot.ChildRun, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	var seq int64
	err := s.pool.QueryRow(ctx, "SELECT run_seq FROM run_children WHERE child_wi = $1", workItemID).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, bot.Errorf(bot.ENOTFOUND, "work item %q is no subagent's", workItemID)
	}
	if err != nil {
		return nil, s.wrap("get run of work item", err)
	}
	r, _, err := getRun(ctx, s.pool, formatID(prefixRun, seq), false)
	return r, s.wrap("get run of work item", err)
}

// UpdateRun changes a record with edit; the kind, the id and the links
// stay as they were written.
func (s *Store) UpdateRun(ctx context.Context, id string, edit func(*bot.ChildRun) error) (*bot.ChildRun, error) {
	var out *bot.ChildRun
	err := s.tx(ctx, "update run", func(tx pgx.Tx) error {
		r, seq, err := getRun(ctx, tx, id, true)
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
		if err := putRun(ctx, tx, seq, &next); err != nil {
			return err
		}
		out = &next
		return nil
	})
	return out, err
}

// endRun ends a subagent's record as e says, unless it ended first.
func endRun(ctx context.Context, tx pgx.Tx, e bot.RunEnd, now time.Time) error {
	r, seq, err := getRun(ctx, tx, e.ID, true)
	if err != nil {
		return err
	}
	e.At = utc(e.At)
	if e.At.IsZero() {
		e.At = now
	}
	if !e.Apply(r) {
		return nil
	}
	if err := r.Validate(); err != nil {
		return err
	}
	r.UpdatedAt = now
	return putRun(ctx, tx, seq, r)
}

// CancelRun ends an open subagent with receipt; a queued one leaves the
// queue with its work item.
func (s *Store) CancelRun(ctx context.Context, id string, receipt bot.Receipt) (*bot.ChildRun, error) {
	now := utc(receipt.At)
	if receipt.At.IsZero() {
		now = utc(time.Now())
	}
	base := receipt
	var out *bot.ChildRun
	err := s.tx(ctx, "cancel run", func(tx pgx.Tx) error {
		receipt := base
		r, seq, err := getRun(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if !r.Status.Open() {
			return bot.Errorf(bot.ECONFLICT, "%s is %s already", id, r.Status)
		}
		if r.Kind == bot.RunSubagent && r.Status == bot.RunQueued && r.ChildDispatchID != "" {
			if err := cancelPending(ctx, tx, r.ChildDispatchID, "cancelled: "+receipt.Reason, now); err != nil {
				return err
			}
		}
		receipt.RecordID, receipt.Kind, receipt.Action = r.ID, string(r.Kind), bot.ReceiptCancelled
		receipt.PreviousStatus, receipt.Owner, receipt.Creator, receipt.At = string(r.Status), r.Owner, r.Creator, now
		r.Status, r.Receipt, r.UpdatedAt, r.FinishedAt = bot.RunCancelled, &receipt, now, &now
		if r.Error == "" {
			r.Error = "cancelled: " + receipt.Reason
		}
		if err := putRun(ctx, tx, seq, r); err != nil {
			return err
		}
		out = r
		return nil
	})
	return out, err
}

// cancelPending takes a pending dispatch out of the queue and cancels its
// work item with errText; one already claimed is left to its job.
func cancelPending(ctx context.Context, tx pgx.Tx, dispatchID, errText string, now time.Time) error {
	d, err := getDispatchID(ctx, tx, dispatchID, true)
	if err != nil || d.Status != bot.DispatchPending {
		return err
	}
	d.Status, d.LastError, d.UpdatedAt = bot.DispatchFailed, errText, now
	if err := putDispatch(ctx, tx, d); err != nil {
		return err
	}
	_, err = setItemStatus(ctx, tx, d, bot.StatusCancelled, now, func(wi *bot.WorkItem) {
		wi.Error = errText
		wi.FinishedAt = &now
	})
	return err
}

// childRun returns the record a work item runs for, locked, or nil.
func childRun(ctx context.Context, tx pgx.Tx, wi *bot.WorkItem) (*bot.ChildRun, int64, error) {
	var seq int64
	err := tx.QueryRow(ctx, "SELECT run_seq FROM run_children WHERE child_wi = $1", wi.ID).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	return getRun(ctx, tx, formatID(prefixRun, seq), true)
}

// childClaimed marks the record of a claimed work item running in jobID.
func childClaimed(ctx context.Context, tx pgx.Tx, wi *bot.WorkItem, jobID, dispatchID string, now time.Time) error {
	r, seq, err := childRun(ctx, tx, wi)
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
	return putRun(ctx, tx, seq, r)
}

// childRequeued marks the record of a work item given back queued.
func childRequeued(ctx context.Context, tx pgx.Tx, wi *bot.WorkItem, now time.Time) error {
	r, seq, err := childRun(ctx, tx, wi)
	if err != nil || r == nil || r.Status != bot.RunRunning {
		return err
	}
	r.Status, r.UpdatedAt = bot.RunQueued, now
	return putRun(ctx, tx, seq, r)
}

// childEnded ends the record of a finished work item, unless its run
// recorded how it ended first.
func childEnded(ctx context.Context, tx pgx.Tx, wi *bot.WorkItem, status bot.RunStatus, result, errText string, now time.Time) error {
	r, seq, err := childRun(ctx, tx, wi)
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
	return putRun(ctx, tx, seq, r)
}

// ListRuns pages records newest first.
func (s *Store) ListRuns(ctx context.Context, f bot.RunFilter) ([]bot.ChildRun, string, error) {
	if err := s.open(); err != nil {
		return nil, "", err
	}
	if err := f.Validate(); err != nil {
		return nil, "", err
	}
	keys, err := decodeCursor(cursorRuns, f.Cursor, 1)
	if err != nil {
		return nil, "", err
	}
	before := int64(math.MaxInt64)
	if keys != nil {
		before = keys[0]
	}
	limit := bot.ListLimit(f.Limit)
	rows, err := s.pool.Query(ctx, `SELECT seq, doc FROM runs WHERE seq < $1
		AND ($2 = '' OR owner_session = $2) AND ($3 = '' OR owner_agent = $3) AND ($4 = '' OR parent_wi = $4)
		AND ($5 = '' OR status = $5) AND (NOT $6 OR status IN ('queued', 'running')) AND (NOT $7 OR NOT archived)
		ORDER BY seq DESC LIMIT $8`,
		before, f.OwnerSessionKey, f.OwnerAgent, f.ParentWorkItemID, string(f.Status), f.Open, f.Unarchived, limit+1)
	if err != nil {
		return nil, "", s.wrap("list runs", err)
	}
	defer rows.Close()
	out := []bot.ChildRun{}
	var seqs []int64
	for rows.Next() {
		var (
			seq int64
			doc []byte
			r   bot.ChildRun
		)
		if err := rows.Scan(&seq, &doc); err != nil {
			return nil, "", s.wrap("list runs", err)
		}
		if err := json.Unmarshal(doc, &r); err != nil {
			return nil, "", fmt.Errorf("decode run %d: %w", seq, err)
		}
		out = append(out, r)
		seqs = append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return nil, "", s.wrap("list runs", err)
	}
	if len(out) > limit {
		return out[:limit], encodeCursor(cursorRuns, seqs[limit-1]), nil
	}
	return out, "", nil
}

func getTask(ctx context.Context, q querier, id string, lock bool) (*bot.BackgroundTask, int64, error) {
	seq, ok := parseID(prefixTask, id)
	if ok {
		var doc []byte
		err := q.QueryRow(ctx, "SELECT doc FROM tasks WHERE seq = $1"+forUpdate(lock), seq).Scan(&doc)
		if err == nil {
			var bt bot.BackgroundTask
			if err := json.Unmarshal(doc, &bt); err != nil {
				return nil, 0, fmt.Errorf("decode task %s: %w", id, err)
			}
			return &bt, seq, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, 0, err
		}
	}
	return nil, 0, bot.Errorf(bot.ENOTFOUND, "background task %q not found", id)
}

// AddTask records a background task and gives it its id.
func (s *Store) AddTask(ctx context.Context, bt bot.BackgroundTask) (bot.BackgroundTask, error) {
	if err := bt.Validate(); err != nil {
		return bot.BackgroundTask{}, err
	}
	if bt.CreatedAt.IsZero() {
		bt.CreatedAt = time.Now()
	}
	bt.CreatedAt = utc(bt.CreatedAt)
	bt.UpdatedAt = bt.CreatedAt
	base := bt
	err := s.tx(ctx, "add background task", func(tx pgx.Tx) error {
		bt = base
		var seq int64
		if err := tx.QueryRow(ctx, "SELECT nextval('tasks_seq_seq')").Scan(&seq); err != nil {
			return err
		}
		bt.ID = formatID(prefixTask, seq)
		doc, err := jsonDoc(bt)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO tasks (seq, owner_session, owner_agent, creator_job, status, archived, doc)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, seq, bt.SessionKey, bt.AgentID, bt.Creator.JobID, string(bt.Status), bt.ArchivedAt != nil, doc)
		return err
	})
	if err != nil {
		return bot.BackgroundTask{}, err
	}
	return bt, nil
}

// GetTask returns one background task.
func (s *Store) GetTask(ctx context.Context, id string) (*bot.BackgroundTask, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	bt, _, err := getTask(ctx, s.pool, id, false)
	return bt, s.wrap("get background task", err)
}

// UpdateTask changes a background task with edit; its id, owner and
// creator stay as written.
func (s *Store) UpdateTask(ctx context.Context, id string, edit func(*bot.BackgroundTask) error) (*bot.BackgroundTask, error) {
	var out *bot.BackgroundTask
	err := s.tx(ctx, "update background task", func(tx pgx.Tx) error {
		bt, seq, err := getTask(ctx, tx, id, true)
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
		doc, err := jsonDoc(next)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE tasks SET status = $2, archived = $3, doc = $4 WHERE seq = $1",
			seq, string(next.Status), next.ArchivedAt != nil, doc); err != nil {
			return err
		}
		out = &next
		return nil
	})
	return out, err
}

// ListTasks pages background tasks newest first.
func (s *Store) ListTasks(ctx context.Context, f bot.TaskFilter) ([]bot.BackgroundTask, string, error) {
	if err := s.open(); err != nil {
		return nil, "", err
	}
	keys, err := decodeCursor(cursorTasks, f.Cursor, 1)
	if err != nil {
		return nil, "", err
	}
	before := int64(math.MaxInt64)
	if keys != nil {
		before = keys[0]
	}
	limit := bot.ListLimit(f.Limit)
	rows, err := s.pool.Query(ctx, `SELECT seq, doc FROM tasks WHERE seq < $1
		AND ($2 = '' OR owner_session = $2) AND ($3 = '' OR owner_agent = $3) AND ($4 = '' OR creator_job = $4)
		AND (NOT $5 OR status = 'running') AND (NOT $6 OR NOT archived)
		ORDER BY seq DESC LIMIT $7`, before, f.OwnerSessionKey, f.OwnerAgent, f.CreatorJobID, f.Open, f.Unarchived, limit+1)
	if err != nil {
		return nil, "", s.wrap("list background tasks", err)
	}
	defer rows.Close()
	out := []bot.BackgroundTask{}
	var seqs []int64
	for rows.Next() {
		var (
			seq int64
			doc []byte
			bt  bot.BackgroundTask
		)
		if err := rows.Scan(&seq, &doc); err != nil {
			return nil, "", s.wrap("list background tasks", err)
		}
		if err := json.Unmarshal(doc, &bt); err != nil {
			return nil, "", fmt.Errorf("decode task %d: %w", seq, err)
		}
		out = append(out, bt)
		seqs = append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return nil, "", s.wrap("list background tasks", err)
	}
	if len(out) > limit {
		return out[:limit], encodeCursor(cursorTasks, seqs[limit-1]), nil
	}
	return out, "", nil
}

// MarkThreadReset records the time of a thread's reset.
func (s *Store) MarkThreadReset(ctx context.Context, sessionKey string, at time.Time) error {
	if err := s.open(); err != nil {
		return err
	}
	if sessionKey == "" {
		return bot.Errorf(bot.EINVALID, "reset: empty session key")
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO thread_resets (session_key, at) VALUES ($1, $2)
		ON CONFLICT (session_key) DO UPDATE SET at = EXCLUDED.at`, sessionKey, nanos(at))
	return s.wrap("mark thread reset", err)
}

// ThreadResetAt returns when the thread was last reset, zero if never.
func (s *Store) ThreadResetAt(ctx context.Context, sessionKey string) (time.Time, error) {
	if err := s.open(); err != nil {
		return time.Time{}, err
	}
	var n int64
	err := s.pool.QueryRow(ctx, "SELECT at FROM thread_resets WHERE session_key = $1", sessionKey).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, s.wrap("thread reset", err)
	}
	return fromNanos(n), nil
}

func validBudgetKey(key string) error {
	if key == "" || len(key) > 32<<10 {
		return bot.Errorf(bot.EINVALID, "budget key %q: want 1-%d bytes", key, 32<<10)
	}
	return nil
}

// lockSpend returns key's spending, its row created and locked.
func lockSpend(ctx context.Context, tx pgx.Tx, key string) (bot.Spend, error) {
	sp := bot.Spend{Key: key}
	empty, err := jsonDoc(sp)
	if err != nil {
		return sp, err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO budgets (key, doc) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING", key, empty); err != nil {
		return sp, err
	}
	var doc []byte
	if err := tx.QueryRow(ctx, "SELECT doc FROM budgets WHERE key = $1 FOR UPDATE", key).Scan(&doc); err != nil {
		return sp, err
	}
	if err := json.Unmarshal(doc, &sp); err != nil {
		return sp, fmt.Errorf("decode budget %s: %w", key, err)
	}
	return sp, nil
}

func putSpend(ctx context.Context, tx pgx.Tx, sp *bot.Spend) error {
	doc, err := jsonDoc(sp)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "UPDATE budgets SET doc = $2 WHERE key = $1", sp.Key, doc)
	return err
}

// AddUsage adds one call's usage to every key of u in one transaction.
// Keys are locked in order, so replicas counting at once never deadlock.
func (s *Store) AddUsage(ctx context.Context, u bot.Usage) error {
	if err := checkUsage(u); err != nil {
		return err
	}
	return s.tx(ctx, "add usage", func(tx pgx.Tx) error { return addUsage(ctx, tx, u) })
}

// checkUsage checks u's keys.
func checkUsage(u bot.Usage) error {
	if err := u.Validate(); err != nil {
		return err
	}
	for _, k := range u.Keys {
		if err := validBudgetKey(k); err != nil {
			return err
		}
	}
	return nil
}

// addUsage adds u to each of its keys, locked in order, so replicas
// counting at once never deadlock.
func addUsage(ctx context.Context, tx pgx.Tx, u bot.Usage) error {
	at := utc(u.At)
	if u.At.IsZero() {
		at = utc(time.Now())
	}
	keys := slices.Clone(u.Keys)
	slices.Sort(keys)
	for _, k := range keys {
		sp, err := lockSpend(ctx, tx, k)
		if err != nil {
			return err
		}
		sp.Count(u, at)
		if err := putSpend(ctx, tx, &sp); err != nil {
			return err
		}
	}
	return nil
}

// Spent returns the spending of each key, in order.
func (s *Store) Spent(ctx context.Context, keys []string) ([]bot.Spend, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	out := make([]bot.Spend, len(keys))
	for i, k := range keys {
		out[i] = bot.Spend{Key: k}
	}
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, "SELECT key, doc FROM budgets WHERE key = ANY($1)", keys)
	if err != nil {
		return nil, s.wrap("read budgets", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			key string
			doc []byte
		)
		if err := rows.Scan(&key, &doc); err != nil {
			return nil, s.wrap("read budgets", err)
		}
		var sp bot.Spend
		if err := json.Unmarshal(doc, &sp); err != nil {
			return nil, fmt.Errorf("decode budget %s: %w", key, err)
		}
		for i, k := range keys {
			if k == key {
				out[i] = sp
			}
		}
	}
	return out, s.wrap("read budgets", rows.Err())
}

// SpentUnder returns the spending of the keys under prefix, in key order
// (COLLATE "C": byte order, as bbolt keeps it).
func (s *Store) SpentUnder(ctx context.Context, prefix string, limit int) ([]bot.Spend, bool, error) {
	if err := s.open(); err != nil {
		return nil, false, err
	}
	limit = bot.ListLimit(limit)
	rows, err := s.pool.Query(ctx, "SELECT key, doc FROM budgets WHERE key >= $1 AND starts_with(key, $1) ORDER BY key LIMIT $2", prefix, limit+1)
	if err != nil {
		return nil, false, s.wrap("read budgets", err)
	}
	defer rows.Close()
	var out []bot.Spend
	for rows.Next() {
		var (
			key string
			doc []byte
		)
		if err := rows.Scan(&key, &doc); err != nil {
			return nil, false, s.wrap("read budgets", err)
		}
		var sp bot.Spend
		if err := json.Unmarshal(doc, &sp); err != nil {
			return nil, false, fmt.Errorf("decode budget %s: %w", key, err)
		}
		out = append(out, sp)
	}
	if err := rows.Err(); err != nil {
		return nil, false, s.wrap("read budgets", err)
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// GrantBudget adds g to what key may spend and returns its spending.
func (s *Store) GrantBudget(ctx context.Context, key string, g bot.Grant) (bot.Spend, error) {
	if err := validBudgetKey(key); err != nil {
		return bot.Spend{}, err
	}
	if g.Tokens < 0 || g.Cost < 0 || g.Seconds < 0 {
		return bot.Spend{}, bot.Errorf(bot.EINVALID, "budget grant of %s: negative amounts", key)
	}
	var out bot.Spend
	err := s.tx(ctx, "grant budget", func(tx pgx.Tx) error {
		sp, err := lockSpend(ctx, tx, key)
		if err != nil {
			return err
		}
		sp.GrantedTokens += g.Tokens
		sp.GrantedCost += g.Cost
		sp.GrantedSeconds += g.Seconds
		if !g.At.IsZero() {
			sp.Updated = utc(g.At)
		}
		out = sp
		return putSpend(ctx, tx, &sp)
	})
	return out, err
}

func validRunStateKey(workItemID string) error {
	if workItemID == "" {
		return bot.Errorf(bot.EINVALID, "run state: work item id %q: want 1-%d bytes", workItemID, 32<<10)
	}
	return nil
}

// SaveRunState keeps the state of the run of workItemID.
func (s *Store) SaveRunState(ctx context.Context, workItemID string, doc []byte) error {
	if err := s.open(); err != nil {
		return err
	}
	if err := checkRunState(workItemID, doc); err != nil {
		return err
	}
	return s.wrap("save run state", saveRunState(ctx, s.pool, workItemID, doc))
}

func checkRunState(workItemID string, doc []byte) error {
	if err := validRunStateKey(workItemID); err != nil {
		return err
	}
	if len(doc) == 0 {
		return bot.Errorf(bot.EINVALID, "run state of %s: empty document", workItemID)
	}
	return nil
}

// saveRunState replaces the state of the run of workItemID.
func saveRunState(ctx context.Context, db querier, workItemID string, doc []byte) error {
	_, err := db.Exec(ctx, `INSERT INTO run_states (work_item, doc) VALUES ($1, $2)
		ON CONFLICT (work_item) DO UPDATE SET doc = EXCLUDED.doc`, workItemID, doc)
	return err
}

// LoadRunState returns the state of the run of workItemID, nil when none.
func (s *Store) LoadRunState(ctx context.Context, workItemID string) ([]byte, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	if err := validRunStateKey(workItemID); err != nil {
		return nil, err
	}
	var doc []byte
	err := s.pool.QueryRow(ctx, "SELECT doc FROM run_states WHERE work_item = $1", workItemID).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return doc, s.wrap("load run state", err)
}

// DeleteRunState forgets the state of the run of workItemID.
func (s *Store) DeleteRunState(ctx context.Context, workItemID string) error {
	if err := s.open(); err != nil {
		return err
	}
	if err := validRunStateKey(workItemID); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, "DELETE FROM run_states WHERE work_item = $1", workItemID)
	return s.wrap("delete run state", err)
}
