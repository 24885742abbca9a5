package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/bot"
)

// querier is a transaction or the pool.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func forUpdate(lock bool) string {
	if lock {
		return " FOR UPDATE"
	}
	return ""
}

// workItemRow is a work item with the columns it is kept by: its sequence
// and the dispatch that carries it now. A job only changes the work items
// whose current dispatch it runs, so a hand-off during a run is not undone
// when the run ends.
type workItemRow struct {
	bot.WorkItem
	seq, dispatch int64
}

const workItemCols = "seq, coalesce(event_seq, 0), coalesce(dispatch_seq, 0), doc"

func scanWorkItem(row pgx.Row) (*workItemRow, error) {
	var (
		r   workItemRow
		ev  int64
		doc []byte
	)
	if err := row.Scan(&r.seq, &ev, &r.dispatch, &doc); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(doc, &r.WorkItem); err != nil {
		return nil, fmt.Errorf("decode work item %d: %w", r.seq, err)
	}
	r.ID = formatID(prefixWorkItem, r.seq)
	if ev > 0 {
		r.EventRef = formatID(prefixEvent, ev)
	}
	return &r, nil
}

func getWorkItem(ctx context.Context, q querier, id string, lock bool) (*workItemRow, error) {
	seq, ok := parseID(prefixWorkItem, id)
	if ok {
		r, err := scanWorkItem(q.QueryRow(ctx, "SELECT "+workItemCols+" FROM work_items WHERE seq = $1"+forUpdate(lock), seq))
		if err == nil || !errors.Is(err, pgx.ErrNoRows) {
			return r, err
		}
	}
	return nil, bot.Errorf(bot.ENOTFOUND, "work item %q not found", id)
}

func putWorkItem(ctx context.Context, q querier, r *workItemRow) error {
	doc, err := json.Marshal(&r.WorkItem)
	if err != nil {
		return fmt.Errorf("encode work item: %w", err)
	}
	_, err = q.Exec(ctx, "UPDATE work_items SET thread = $2, status = $3, dispatch_seq = $4, doc = $5 WHERE seq = $1",
		r.seq, r.Thread.Key(), string(r.Status), r.dispatch, doc)
	return err
}

// dispatchRow is a dispatch and its sequence.
type dispatchRow struct {
	bot.Dispatch
	seq int64
}

func getDispatch(ctx context.Context, q querier, seq int64, lock bool) (*dispatchRow, error) {
	var (
		r     dispatchRow
		wiSeq int64
		doc   []byte
	)
	err := q.QueryRow(ctx, "SELECT seq, work_item_seq, doc FROM dispatches WHERE seq = $1"+forUpdate(lock), seq).Scan(&r.seq, &wiSeq, &doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, bot.Errorf(bot.ENOTFOUND, "dispatch %q not found", formatID(prefixDispatch, seq))
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(doc, &r.Dispatch); err != nil {
		return nil, fmt.Errorf("decode dispatch %d: %w", seq, err)
	}
	r.ID, r.WorkItemID = formatID(prefixDispatch, r.seq), formatID(prefixWorkItem, wiSeq)
	return &r, nil
}

func getDispatchID(ctx context.Context, q querier, id string, lock bool) (*dispatchRow, error) {
	seq, ok := parseID(prefixDispatch, id)
	if !ok {
		return nil, bot.Errorf(bot.ENOTFOUND, "dispatch %q not found", id)
	}
	return getDispatch(ctx, q, seq, lock)
}

func putDispatch(ctx context.Context, q querier, d *dispatchRow) error {
	doc, err := json.Marshal(&d.Dispatch)
	if err != nil {
		return fmt.Errorf("encode dispatch: %w", err)
	}
	_, err = q.Exec(ctx, "UPDATE dispatches SET agent = $2, status = $3, doc = $4 WHERE seq = $1", d.seq, d.Agent, string(d.Status), doc)
	return err
}

// jobRow is a job and its sequence.
type jobRow struct {
	bot.Job
	seq  int64
	unit string
}

func getJob(ctx context.Context, q querier, id string, lock bool) (*jobRow, error) {
	seq, ok := parseID(prefixJob, id)
	if ok {
		var (
			r   jobRow
			doc []byte
		)
		err := q.QueryRow(ctx, "SELECT seq, unit, doc FROM jobs WHERE seq = $1"+forUpdate(lock), seq).Scan(&r.seq, &r.unit, &doc)
		if err == nil {
			if err := json.Unmarshal(doc, &r.Job); err != nil {
				return nil, fmt.Errorf("decode job %d: %w", seq, err)
			}
			r.ID = formatID(prefixJob, r.seq)
			return &r, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, err
		}
	}
	return nil, bot.Errorf(bot.ENOTFOUND, "job %q not found", id)
}

func putJob(ctx context.Context, q querier, j *jobRow) error {
	doc, err := json.Marshal(&j.Job)
	if err != nil {
		return fmt.Errorf("encode job: %w", err)
	}
	_, err = q.Exec(ctx, "UPDATE jobs SET status = $2, owner = $3, lease_expires = $4, doc = $5 WHERE seq = $1",
		j.seq, string(j.Status), j.Owner, nanos(j.LeaseExpires), doc)
	return err
}

func getIngress(ctx context.Context, q querier, seq int64) (*bot.IngressRecord, error) {
	var (
		ev  int64
		doc []byte
	)
	err := q.QueryRow(ctx, "SELECT event_seq, doc FROM ingress WHERE seq = $1", seq).Scan(&ev, &doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, bot.Errorf(bot.ENOTFOUND, "ingress record %q not found", formatID(prefixIngress, seq))
	}
	if err != nil {
		return nil, err
	}
	return decodeIngress(seq, ev, doc)
}

func decodeIngress(seq, ev int64, doc []byte) (*bot.IngressRecord, error) {
	var in bot.IngressRecord
	if err := json.Unmarshal(doc, &in); err != nil {
		return nil, fmt.Errorf("decode ingress record %d: %w", seq, err)
	}
	in.ID, in.EventRef = formatID(prefixIngress, seq), formatID(prefixEvent, ev)
	return &in, nil
}
