package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/bot"
)

// sweepChunk bounds what one transaction of a sweep reads, so intake never
// waits long behind it.
const sweepChunk = 500

// Sweep removes what retention lets go as of now: raw payloads older than
// r.Payloads; work items finished longer than r.Records ago with their
// events, their jobs index rows and their delivered outbox messages;
// dispatches and jobs (with their transcripts) that ended that long ago;
// ingress records older than that with their events; outbox messages
// delivered or given up that long ago; audit records older than r.Audit.
// A zero duration keeps that kind forever. Nothing live is touched. Each
// kind is walked oldest first (by sequence) and the walk stops at the
// first record made after the cutoff, in transactions of at most
// sweepChunk records.
func (s *Store) Sweep(ctx context.Context, now time.Time, r bot.Retention) (bot.Swept, error) {
	if err := s.open(); err != nil {
		return bot.Swept{}, err
	}
	var out bot.Swept
	cutoff := func(d time.Duration) time.Time { return utc(now).Add(-d) }
	if r.Payloads > 0 {
		n, err := s.sweepPayloads(ctx, cutoff(r.Payloads))
		out.Payloads = n
		if err != nil {
			return out, err
		}
	}
	if r.Records > 0 {
		before := cutoff(r.Records)
		for _, w := range []struct {
			n     *int
			table string
			sweep sweeper
		}{
			{&out.WorkItems, "work_items", sweeper{decideWorkItem, removeWorkItem}},
			{&out.Dispatches, "dispatches", sweeper{decide: decideDispatch}},
			{&out.Jobs, "jobs", sweeper{decideJob, removeJob}},
			{&out.Ingress, "ingress", sweeper{decideIngress, removeIngress}},
			{&out.Outbox, "outbox", sweeper{decide: decideOutbox}},
		} {
			n, err := s.sweepTable(ctx, w.table, before, w.sweep)
			*w.n = n
			if err != nil {
				return out, err
			}
		}
	}
	if r.Audit > 0 {
		n, err := s.sweepAudit(ctx, cutoff(r.Audit))
		out.Audit = n
		if err != nil {
			return out, err
		}
	}
	if out != (bot.Swept{}) {
		s.log.Info("retention sweep", slog.Int("payloads", out.Payloads), slog.Int("work_items", out.WorkItems),
			slog.Int("jobs", out.Jobs), slog.Int("dispatches", out.Dispatches), slog.Int("ingress", out.Ingress),
			slog.Int("outbox", out.Outbox), slog.Int("audit", out.Audit))
	}
	return out, nil
}

// sweepAudit drops the audit records made before cutoff, oldest first, in
// statements of at most sweepChunk records, so a year of them going at
// once does not hold one long transaction.
func (s *Store) sweepAudit(ctx context.Context, cutoff time.Time) (int, error) {
	total := 0
	for {
		tag, err := s.pool.Exec(ctx, "DELETE FROM audit WHERE seq IN (SELECT seq FROM audit WHERE at < $1 ORDER BY at, seq LIMIT $2)",
			nanos(cutoff), sweepChunk)
		if err != nil {
			return total, s.wrap("sweep audit", err)
		}
		n := int(tag.RowsAffected())
		total += n
		if n < sweepChunk {
			return total, nil
		}
	}
}

// sweepPayloads drops the raw payloads of events received before cutoff.
// Events whose payload is gone are not read again (the index holds those
// with one only).
func (s *Store) sweepPayloads(ctx context.Context, cutoff time.Time) (int, error) {
	total := 0
	for {
		var (
			n    int
			done bool
		)
		err := s.tx(ctx, "sweep payloads", func(tx pgx.Tx) error {
			n, done = 0, true
			rows, err := tx.Query(ctx, "SELECT seq, header FROM events WHERE raw IS NOT NULL ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED", sweepChunk)
			if err != nil {
				return err
			}
			var old []int64
			read := 0
			for rows.Next() {
				read++
				var (
					seq    int64
					header []byte
					ev     bot.Event
				)
				if err := rows.Scan(&seq, &header); err != nil {
					rows.Close()
					return err
				}
				if err := json.Unmarshal(header, &ev); err != nil {
					rows.Close()
					return fmt.Errorf("decode event %d: %w", seq, err)
				}
				if !ev.ReceivedAt.Before(cutoff) {
					break
				}
				old = append(old, seq)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			if len(old) == 0 {
				return nil
			}
			tag, err := tx.Exec(ctx, "UPDATE events SET raw = NULL WHERE seq = ANY($1)", old)
			n, done = int(tag.RowsAffected()), len(old) < read || read < sweepChunk
			return err
		})
		total += n
		if err != nil || done {
			return total, err
		}
	}
}

// A sweeper says of one record (its sequence and document) whether to keep
// it, to drop it, or to stop: it was made after the cutoff, and so was
// every later one. Its remove, when set, deletes what hangs on a record it
// drops, in the transaction that drops it.
type sweeper struct {
	decide func(seq int64, doc []byte, cutoff time.Time) (verdict, error)
	remove func(ctx context.Context, tx pgx.Tx, seq int64) error
}

type verdict int

const (
	keep verdict = iota
	drop
	stop
)

// sweepTable walks table by sequence (outbox: by its seq column, keyed by
// key) in transactions of at most sweepChunk records. The walk reads
// without locks, so intake and claims never wait for it; the records it
// would drop are then locked (those another transaction holds are passed
// over this time) and decided again on what they hold now, so a record made
// live meanwhile (a finished work item handed on again, a delivered message
// enqueued anew) is never removed.
func (s *Store) sweepTable(ctx context.Context, table string, cutoff time.Time, sw sweeper) (int, error) {
	total := 0
	from := int64(0)
	for {
		var (
			n    int
			done bool
			last int64
		)
		err := s.tx(ctx, "sweep "+strings.ReplaceAll(table, "_", " "), func(tx pgx.Tx) error {
			n, done, last = 0, true, from
			recs, err := sweepRead(ctx, tx, "SELECT seq, doc FROM "+table+" WHERE seq > $1 ORDER BY seq LIMIT $2", from, sweepChunk)
			if err != nil {
				return err
			}
			done = len(recs) < sweepChunk
			var candidates []int64
			for _, r := range recs {
				v, err := sw.decide(r.seq, r.doc, cutoff)
				if err != nil {
					return err
				}
				if v == stop {
					done = true
					break
				}
				last = r.seq
				if v == drop {
					candidates = append(candidates, r.seq)
				}
			}
			if len(candidates) == 0 {
				return nil
			}
			locked, err := sweepRead(ctx, tx, "SELECT seq, doc FROM "+table+" WHERE seq = ANY($1) ORDER BY seq FOR UPDATE SKIP LOCKED", candidates)
			if err != nil {
				return err
			}
			var dropped []int64
			for _, r := range locked {
				if v, err := sw.decide(r.seq, r.doc, cutoff); err != nil || v != drop {
					if err != nil {
						return err
					}
					continue
				}
				if sw.remove != nil {
					if err := sw.remove(ctx, tx, r.seq); err != nil {
						return err
					}
				}
				dropped = append(dropped, r.seq)
			}
			if len(dropped) == 0 {
				return nil
			}
			tag, err := tx.Exec(ctx, "DELETE FROM "+table+" WHERE seq = ANY($1)", dropped)
			n = int(tag.RowsAffected())
			return err
		})
		total += n
		from = last
		if err != nil || done {
			return total, err
		}
	}
}

// sweepRecord is one record a sweep reads.
type sweepRecord struct {
	seq int64
	doc []byte
}

func sweepRead(ctx context.Context, tx pgx.Tx, sql string, args ...any) ([]sweepRecord, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sweepRecord
	for rows.Next() {
		var r sweepRecord
		if err := rows.Scan(&r.seq, &r.doc); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// finishedBefore reports whether a record that ended at end (updated at
// updated when it has no end) ended before cutoff.
func finishedBefore(end *time.Time, updated, cutoff time.Time) bool {
	if end != nil {
		return end.Before(cutoff)
	}
	return updated.Before(cutoff)
}

func decideWorkItem(seq int64, doc []byte, cutoff time.Time) (verdict, error) {
	var wi bot.WorkItem
	if err := json.Unmarshal(doc, &wi); err != nil {
		return keep, fmt.Errorf("decode work item %d: %w", seq, err)
	}
	switch {
	case !wi.CreatedAt.Before(cutoff):
		return stop, nil
	case !wi.Status.Finished() || !finishedBefore(wi.FinishedAt, wi.UpdatedAt, cutoff):
		return keep, nil
	}
	return drop, nil
}

// removeWorkItem deletes what hangs on a work item: its jobs' index rows,
// its delivered outbox messages and its event.
func removeWorkItem(ctx context.Context, tx pgx.Tx, seq int64) error {
	id := formatID(prefixWorkItem, seq)
	if _, err := tx.Exec(ctx, "DELETE FROM job_work_items WHERE work_item_seq = $1", seq); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "DELETE FROM outbox WHERE starts_with(key, $1) AND NOT pending", id+"/"); err != nil {
		return err
	}
	return dropEvent(ctx, tx, id)
}

// dropEvent removes the event that made id, with the dedup and delivery
// index rows that point at id.
func dropEvent(ctx context.Context, tx pgx.Tx, id string) error {
	table := "work_items"
	if strings.HasPrefix(id, prefixIngress) {
		table = "ingress"
	}
	seq, _ := parseID(strings.SplitAfter(id, "_")[0], id)
	if _, err := tx.Exec(ctx, "DELETE FROM events WHERE seq = (SELECT event_seq FROM "+table+" WHERE seq = $1)", seq); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "DELETE FROM deliveries WHERE ref = $1", id); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "DELETE FROM dedup WHERE ref = $1", id)
	return err
}

func decideDispatch(seq int64, doc []byte, cutoff time.Time) (verdict, error) {
	var d bot.Dispatch
	if err := json.Unmarshal(doc, &d); err != nil {
		return keep, fmt.Errorf("decode dispatch %d: %w", seq, err)
	}
	switch {
	case !d.CreatedAt.Before(cutoff):
		return stop, nil
	case (d.Status == bot.DispatchDone || d.Status == bot.DispatchFailed) && d.UpdatedAt.Before(cutoff):
		return drop, nil
	}
	return keep, nil
}

func decideJob(seq int64, doc []byte, cutoff time.Time) (verdict, error) {
	var j bot.Job
	if err := json.Unmarshal(doc, &j); err != nil {
		return keep, fmt.Errorf("decode job %d: %w", seq, err)
	}
	switch {
	case !j.StartedAt.Before(cutoff):
		return stop, nil
	case j.Status == bot.JobRunning || j.FinishedAt == nil || !j.FinishedAt.Before(cutoff):
		return keep, nil
	}
	return drop, nil
}

// removeJob deletes a job's index rows and transcripts.
func removeJob(ctx context.Context, tx pgx.Tx, seq int64) error {
	if _, err := tx.Exec(ctx, "DELETE FROM job_work_items WHERE job_seq = $1", seq); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "DELETE FROM transcripts WHERE job_id = $1", formatID(prefixJob, seq))
	return err
}

func decideIngress(seq int64, doc []byte, cutoff time.Time) (verdict, error) {
	var in bot.IngressRecord
	if err := json.Unmarshal(doc, &in); err != nil {
		return keep, fmt.Errorf("decode ingress record %d: %w", seq, err)
	}
	if !in.CreatedAt.Before(cutoff) {
		return stop, nil
	}
	return drop, nil
}

// removeIngress deletes an ingress record's event.
func removeIngress(ctx context.Context, tx pgx.Tx, seq int64) error {
	return dropEvent(ctx, tx, formatID(prefixIngress, seq))
}

func decideOutbox(seq int64, doc []byte, cutoff time.Time) (verdict, error) {
	var m bot.OutboxMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		return keep, fmt.Errorf("decode outbox message %d: %w", seq, err)
	}
	switch {
	case !m.CreatedAt.Before(cutoff):
		return stop, nil
	case m.Pending() || !m.UpdatedAt.Before(cutoff):
		return keep, nil
	}
	return drop, nil
}
