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
			{&out.WorkItems, "work_items", sweepWorkItem},
			{&out.Dispatches, "dispatches", sweepDispatch},
			{&out.Jobs, "jobs", sweepJob},
			{&out.Ingress, "ingress", sweepIngress},
			{&out.Outbox, "outbox", sweepOutbox},
		} {
			n, err := s.sweepTable(ctx, w.table, before, w.sweep)
			*w.n = n
			if err != nil {
				return out, err
			}
		}
	}
	if r.Audit > 0 {
		tag, err := s.pool.Exec(ctx, "DELETE FROM audit WHERE at < $1", cutoff(r.Audit).UnixNano())
		if err != nil {
			return out, s.wrap("sweep audit", err)
		}
		out.Audit = int(tag.RowsAffected())
	}
	if out != (bot.Swept{}) {
		s.log.Info("retention sweep", slog.Int("payloads", out.Payloads), slog.Int("work_items", out.WorkItems),
			slog.Int("jobs", out.Jobs), slog.Int("dispatches", out.Dispatches), slog.Int("ingress", out.Ingress),
			slog.Int("outbox", out.Outbox), slog.Int("audit", out.Audit))
	}
	return out, nil
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

// A sweeper looks at one record (its sequence and document) and says
// whether to keep it, to drop it (removing what hangs on it in tx first),
// or to stop: it was made after the cutoff, and so was every later one.
type sweeper func(ctx context.Context, tx pgx.Tx, seq int64, doc []byte, cutoff time.Time) (verdict, error)

type verdict int

const (
	keep verdict = iota
	drop
	stop
)

// sweepTable walks table by sequence (outbox: by its seq column, keyed by
// key) in transactions of at most sweepChunk records.
func (s *Store) sweepTable(ctx context.Context, table string, cutoff time.Time, visit sweeper) (int, error) {
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
			rows, err := tx.Query(ctx, "SELECT seq, doc FROM "+table+" WHERE seq > $1 ORDER BY seq LIMIT $2", from, sweepChunk)
			if err != nil {
				return err
			}
			type rec struct {
				seq int64
				doc []byte
			}
			var recs []rec
			for rows.Next() {
				var r rec
				if err := rows.Scan(&r.seq, &r.doc); err != nil {
					rows.Close()
					return err
				}
				recs = append(recs, r)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			done = len(recs) < sweepChunk
			var dropped []int64
			for _, r := range recs {
				v, err := visit(ctx, tx, r.seq, r.doc, cutoff)
				if err != nil {
					return err
				}
				if v == stop {
					done = true
					break
				}
				last = r.seq
				if v == drop {
					dropped = append(dropped, r.seq)
				}
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

// finishedBefore reports whether a record that ended at end (updated at
// updated when it has no end) ended before cutoff.
func finishedBefore(end *time.Time, updated, cutoff time.Time) bool {
	if end != nil {
		return end.Before(cutoff)
	}
	return updated.Before(cutoff)
}

func sweepWorkItem(ctx context.Context, tx pgx.Tx, seq int64, doc []byte, cutoff time.Time) (verdict, error) {
	var wi bot.WorkItem
	if err := json.Unmarshal(doc, &wi); err != nil {
		return keep, fmt.Errorf("decode work item %d: %w", seq, err)
	}
	if !wi.CreatedAt.Before(cutoff) {
		return stop, nil
	}
	if !wi.Status.Finished() || !finishedBefore(wi.FinishedAt, wi.UpdatedAt, cutoff) {
		return keep, nil
	}
	id := formatID(prefixWorkItem, seq)
	if _, err := tx.Exec(ctx, "DELETE FROM job_work_items WHERE work_item_seq = $1", seq); err != nil {
		return keep, err
	}
	if _, err := tx.Exec(ctx, "DELETE FROM outbox WHERE starts_with(key, $1) AND NOT pending", id+"/"); err != nil {
		return keep, err
	}
	return drop, dropEvent(ctx, tx, id)
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

func sweepDispatch(_ context.Context, _ pgx.Tx, seq int64, doc []byte, cutoff time.Time) (verdict, error) {
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

func sweepJob(ctx context.Context, tx pgx.Tx, seq int64, doc []byte, cutoff time.Time) (verdict, error) {
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
	if _, err := tx.Exec(ctx, "DELETE FROM job_work_items WHERE job_seq = $1", seq); err != nil {
		return keep, err
	}
	_, err := tx.Exec(ctx, "DELETE FROM transcripts WHERE job_id = $1", formatID(prefixJob, seq))
	return drop, err
}

func sweepIngress(ctx context.Context, tx pgx.Tx, seq int64, doc []byte, cutoff time.Time) (verdict, error) {
	var in bot.IngressRecord
	if err := json.Unmarshal(doc, &in); err != nil {
		return keep, fmt.Errorf("decode ingress record %d: %w", seq, err)
	}
	if !in.CreatedAt.Before(cutoff) {
		return stop, nil
	}
	return drop, dropEvent(ctx, tx, formatID(prefixIngress, seq))
}

func sweepOutbox(_ context.Context, _ pgx.Tx, seq int64, doc []byte, cutoff time.Time) (verdict, error) {
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
