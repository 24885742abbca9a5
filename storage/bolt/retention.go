package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// Retention walks each kind of record from its oldest (records are keyed
// by sequence, so oldest first is key order) and stops at the first made
// after the cutoff: a sweep costs what it removes, plus the live records
// older than the cutoff it steps over. Each transaction removes at most
// sweepChunk records and reads at most sweepReads, so intake never waits
// long behind a sweep.
const (
	sweepChunk = 500
	sweepReads = 5000
	// metaPayloadsSwept is the sequence of the last event whose payload the
	// sweep has dealt with; events are walked from the one after it.
	metaPayloadsSwept = "payloads_swept"
)

// verdict is what a sweep does with one record.
type verdict int

const (
	keep verdict = iota // live, or not old enough yet: step over it
	drop                // old and finished: remove it with what hangs on it
	stop                // made after the cutoff: so is every later one
)

// Sweep removes what retention lets go as of now: raw payloads older than
// r.Payloads; work items finished longer than r.Records ago with their
// dispatches, jobs, transcripts, events and delivered outbox messages;
// ingress records older than that with their events; outbox messages
// delivered (or given up) longer ago; audit records older than r.Audit. A
// zero duration keeps that kind forever. Nothing live is touched: an
// unfinished work item, a running job, a pending dispatch, a message still
// to be delivered.
func (s *Store) Sweep(ctx context.Context, now time.Time, r bot.Retention) (bot.Swept, error) {
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
			n    *int
			walk func(context.Context, time.Time) (int, error)
		}{
			{&out.WorkItems, s.sweepWorkItems},
			{&out.Dispatches, s.sweepDispatches},
			{&out.Jobs, s.sweepJobs},
			{&out.Ingress, s.sweepIngress},
			{&out.Outbox, s.sweepOutbox},
		} {
			n, err := w.walk(ctx, before)
			*w.n = n
			if err != nil {
				return out, err
			}
		}
	}
	if r.Audit > 0 {
		n, err := s.PruneAudit(ctx, cutoff(r.Audit))
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

// sweepWalk walks bucket from the key after from (nil: the first), in
// transactions of at most sweepChunk removals and sweepReads reads, asking
// visit about each record. visit removes what hangs on a record it drops;
// the walk removes the record. It returns how many it dropped and where it
// stopped.
func (s *Store) sweepWalk(ctx context.Context, op, bucket string, from []byte,
	visit func(t txn, k, v []byte) (verdict, error)) (int, []byte, error) {
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, from, err
		}
		var dropped [][]byte
		done := false
		next := from
		err := s.update(op, func(t txn) error {
			dropped, next, done = nil, from, false
			b := t.bucket(bucket)
			c := b.Cursor()
			var k, v []byte
			if from == nil {
				k, v = c.First()
			} else if k, v = c.Seek(from); k != nil && bytes.Equal(k, from) {
				k, v = c.Next()
			}
			for reads := 0; ; reads++ {
				if k == nil {
					done = true
					break
				}
				if len(dropped) == sweepChunk || reads == sweepReads {
					break
				}
				verdict, err := visit(t, k, v)
				if err != nil {
					return err
				}
				if verdict == stop {
					done = true
					break
				}
				next = bytes.Clone(k)
				if verdict == drop {
					dropped = append(dropped, next)
				}
				k, v = c.Next()
			}
			for _, k := range dropped {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return total, from, err
		}
		total += len(dropped)
		from = next
		if done {
			return total, from, nil
		}
	}
}

// sweepPayloads drops the raw payloads of events received before cutoff,
// walking the events from the last one it dealt with, at most sweepChunk
// events a transaction.
func (s *Store) sweepPayloads(ctx context.Context, cutoff time.Time) (int, error) {
	total := 0
	for done := false; !done; {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		err := s.update("sweep payloads", func(t txn) error {
			meta, events, payloads := t.bucket(bucketMeta), t.bucket(bucketEvents), t.bucket(bucketPayloads)
			from := meta.Get([]byte(metaPayloadsSwept))
			c := events.Cursor()
			var k, v []byte
			if from == nil {
				k, v = c.First()
			} else if k, v = c.Seek(from); k != nil && bytes.Equal(k, from) {
				k, v = c.Next()
			}
			type old struct{ key, head []byte }
			var olds []old
			done = true
			for ; k != nil; k, v = c.Next() {
				if len(olds) == sweepChunk {
					done = false
					break
				}
				ev, err := decodeEvent(v, nil)
				if err != nil {
					return err
				}
				if !ev.ReceivedAt.Before(cutoff) {
					break
				}
				o := old{key: bytes.Clone(k)}
				if head := eventHeader(v); len(head) < len(v) {
					o.head = head // an event stored with its payload after its JSON
				}
				olds = append(olds, o)
			}
			for _, o := range olds {
				if payloads.Get(o.key) != nil || o.head != nil {
					total++
				}
				if err := payloads.Delete(o.key); err != nil {
					return err
				}
				if o.head != nil {
					if err := events.Put(o.key, o.head); err != nil {
						return err
					}
				}
			}
			if len(olds) > 0 {
				return meta.Put([]byte(metaPayloadsSwept), olds[len(olds)-1].key)
			}
			return nil
		})
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// eventHeader is an events value without a payload stored after its JSON.
func eventHeader(v []byte) []byte {
	if len(v) < 4 {
		return v
	}
	n := uint64(binary.BigEndian.Uint32(v))
	if uint64(len(v)-4) <= n {
		return v
	}
	return bytes.Clone(v[:4+n])
}

// finishedBefore reports whether a record that ended at end (updated at
// updated when it has no end) ended before cutoff.
func finishedBefore(end *time.Time, updated, cutoff time.Time) bool {
	if end != nil {
		return end.Before(cutoff)
	}
	return updated.Before(cutoff)
}

// sweepWorkItems drops work items that finished before cutoff, with their
// events, their jobs index entries and their delivered outbox messages.
func (s *Store) sweepWorkItems(ctx context.Context, cutoff time.Time) (int, error) {
	n, _, err := s.sweepWalk(ctx, "sweep work items", bucketWorkItems, nil, func(t txn, k, v []byte) (verdict, error) {
		var rec workItemRecord
		if err := unmarshal(v, &rec); err != nil {
			return keep, fmt.Errorf("decode work item %x: %w", k, err)
		}
		if !rec.CreatedAt.Before(cutoff) {
			return stop, nil
		}
		if !rec.Status.Finished() || !finishedBefore(rec.FinishedAt, rec.UpdatedAt, cutoff) {
			return keep, nil
		}
		seq := seqOf(k)
		if err := t.bucket(bucketItemsByThread).Delete(indexKey(rec.Thread.Key(), seq)); err != nil {
			return keep, err
		}
		if err := t.bucket(bucketItemsByStatus).Delete(indexKey(string(rec.Status), seq)); err != nil {
			return keep, err
		}
		if err := deletePrefix(t.bucket(bucketJobsByItem), seqKey(seq)); err != nil {
			return keep, err
		}
		if err := t.dropEvent(rec.EventRef, rec.ID); err != nil {
			return keep, err
		}
		return drop, t.dropDelivered(rec.ID + "/")
	})
	return n, err
}

// sweepDispatches drops dispatches that ended before cutoff.
func (s *Store) sweepDispatches(ctx context.Context, cutoff time.Time) (int, error) {
	n, _, err := s.sweepWalk(ctx, "sweep dispatches", bucketDispatches, nil, func(_ txn, k, v []byte) (verdict, error) {
		var d bot.Dispatch
		if err := unmarshal(v, &d); err != nil {
			return keep, fmt.Errorf("decode dispatch %x: %w", k, err)
		}
		switch {
		case !d.CreatedAt.Before(cutoff):
			return stop, nil
		case (d.Status == bot.DispatchDone || d.Status == bot.DispatchFailed) && d.UpdatedAt.Before(cutoff):
			return drop, nil
		}
		return keep, nil
	})
	return n, err
}

// sweepJobs drops jobs that ended before cutoff, with their work item
// lists, their entries in the work items' job index and their transcripts.
func (s *Store) sweepJobs(ctx context.Context, cutoff time.Time) (int, error) {
	n, _, err := s.sweepWalk(ctx, "sweep jobs", bucketJobs, nil, func(t txn, k, _ []byte) (verdict, error) {
		j, err := t.jobAt(k)
		if err != nil || j == nil {
			return keep, err
		}
		switch {
		case !j.StartedAt.Before(cutoff):
			return stop, nil
		case j.Status == bot.JobRunning || j.FinishedAt == nil || !j.FinishedAt.Before(cutoff):
			return keep, nil
		}
		seq := seqOf(k)
		for _, id := range j.WorkItemIDs {
			if wi, ok := parseID(prefixWorkItem, id); ok {
				if err := t.bucket(bucketJobsByItem).Delete(binaryPair(wi, seq)); err != nil {
					return keep, err
				}
			}
		}
		if err := t.bucket(bucketJobItems).Delete(k); err != nil {
			return keep, err
		}
		if top := t.tx.Bucket(bucketTranscripts); top != nil && top.Bucket([]byte(j.ID)) != nil {
			if err := top.DeleteBucket([]byte(j.ID)); err != nil {
				return keep, err
			}
		}
		return drop, nil
	})
	return n, err
}

// sweepIngress drops ingress records made before cutoff, with their events.
func (s *Store) sweepIngress(ctx context.Context, cutoff time.Time) (int, error) {
	n, _, err := s.sweepWalk(ctx, "sweep ingress records", bucketIngress, nil, func(t txn, k, v []byte) (verdict, error) {
		var in bot.IngressRecord
		if err := unmarshal(v, &in); err != nil {
			return keep, fmt.Errorf("decode ingress record %x: %w", k, err)
		}
		if !in.CreatedAt.Before(cutoff) {
			return stop, nil
		}
		if err := t.bucket(bucketIngressBy).Delete(indexKey(in.Reason, seqOf(k))); err != nil {
			return keep, err
		}
		return drop, t.dropEvent(in.EventRef, in.ID)
	})
	return n, err
}

// sweepOutbox drops outbox messages delivered, or given up, before cutoff.
// A message still to be delivered stays, however old.
func (s *Store) sweepOutbox(ctx context.Context, cutoff time.Time) (int, error) {
	n, _, err := s.sweepWalk(ctx, "sweep outbox", bucketOutboxBySeq, nil, func(t txn, _, key []byte) (verdict, error) {
		m, err := t.outbox(string(key))
		if bot.ErrorCode(err) == bot.ENOTFOUND {
			return drop, nil // its work item's sweep took it
		}
		if err != nil {
			return keep, err
		}
		if !m.CreatedAt.Before(cutoff) {
			return stop, nil
		}
		if m.Pending() || !m.UpdatedAt.Before(cutoff) {
			return keep, nil
		}
		return drop, t.dropOutbox(m, false)
	})
	return n, err
}

// dropEvent removes the event ref names, its payload, and the delivery
// index and dedup entries that point at id, what it made.
func (t txn) dropEvent(ref, id string) error {
	seq, ok := parseID(prefixEvent, ref)
	if !ok {
		return nil
	}
	key := seqKey(seq)
	if v := t.bucket(bucketEvents).Get(key); v != nil {
		ev, err := decodeEvent(v, nil)
		if err != nil {
			return err
		}
		if dk := ev.DedupKey(); dk != "" {
			if bytes.Equal(t.bucket(bucketDeliveries).Get([]byte(dk)), []byte(id)) {
				if err := t.bucket(bucketDeliveries).Delete([]byte(dk)); err != nil {
					return err
				}
			}
			if d := t.bucket(bucketDedup).Get([]byte(dk)); len(d) >= 8 && string(d[8:]) == id {
				expiry := append(bytes.Clone(d[:8]), dk...)
				if err := t.bucket(bucketDedupExpiry).Delete(expiry); err != nil {
					return err
				}
				if err := t.bucket(bucketDedup).Delete([]byte(dk)); err != nil {
					return err
				}
			}
		}
		if err := t.bucket(bucketEvents).Delete(key); err != nil {
			return err
		}
	}
	return t.bucket(bucketPayloads).Delete(key)
}

// dropDelivered removes the outbox messages whose keys start with prefix
// and are no longer to be delivered.
func (t txn) dropDelivered(prefix string) error {
	var drop []*bot.OutboxMessage
	c := t.bucket(bucketOutbox).Cursor()
	for k, v := c.Seek([]byte(prefix)); k != nil && strings.HasPrefix(string(k), prefix); k, v = c.Next() {
		var m bot.OutboxMessage
		if err := unmarshal(v, &m); err != nil {
			return fmt.Errorf("decode outbox/%s: %w", k, err)
		}
		if !m.Pending() {
			drop = append(drop, &m)
		}
	}
	for _, m := range drop {
		if err := t.dropOutbox(m, true); err != nil {
			return err
		}
	}
	return nil
}

// dropOutbox removes a message that is not pending and its index entries;
// its entry in outbox_by_seq too unless the caller is walking that index.
func (t txn) dropOutbox(m *bot.OutboxMessage, bySeq bool) error {
	if bySeq {
		if err := t.bucket(bucketOutboxBySeq).Delete(seqKey(m.Seq)); err != nil {
			return err
		}
	}
	if err := t.bucket(bucketOutboxByThread).Delete(indexKey(m.Thread.Key(), m.Seq)); err != nil {
		return err
	}
	if m.Dead {
		if err := t.bucket(bucketOutboxDead).Delete(seqKey(m.Seq)); err != nil {
			return err
		}
		if err := t.add(counterOutboxDead, -1); err != nil {
			return err
		}
	}
	return t.bucket(bucketOutbox).Delete([]byte(m.Key))
}

// deletePrefix removes every key of b that starts with prefix.
func deletePrefix(b *bolt.Bucket, prefix []byte) error {
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
