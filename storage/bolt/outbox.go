package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/switchyard/switchyard/bot"
)

func (t txn) outbox(key string) (*bot.OutboxMessage, error) {
	var m bot.OutboxMessage
	found, err := t.get(bucketOutbox, []byte(key), &m)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, bot.Errorf(bot.ENOTFOUND, "outbox message %q not found", key)
	}
	return &m, nil
}

// putOutbox stores m and moves it between the seq, thread, pending and dead
// indexes and the counters according to how it differs from prev (nil for
// a new message).
func (t txn) putOutbox(prev, m *bot.OutboxMessage) error {
	key := []byte(m.Key)
	seq := seqKey(m.Seq)
	if prev == nil {
		if err := t.bucket(bucketOutboxBySeq).Put(seq, key); err != nil {
			return err
		}
	}
	if prev == nil || prev.Thread.Key() != m.Thread.Key() {
		byThread := t.bucket(bucketOutboxByThread)
		if prev != nil {
			if err := byThread.Delete(indexKey(prev.Thread.Key(), prev.Seq)); err != nil {
				return err
			}
		}
		if err := byThread.Put(indexKey(m.Thread.Key(), m.Seq), key); err != nil {
			return err
		}
	}
	wasPending, isPending := prev != nil && prev.Pending(), m.Pending()
	if wasPending && (!isPending || prev.Thread.Destination() != m.Thread.Destination()) {
		if err := t.unpend(prev); err != nil {
			return err
		}
		wasPending = false
	}
	// The pending index carries what Due decides by: a message newly
	// pending enters it, and a pending one whose next attempt or work item
	// changed has its entry rewritten.
	if isPending && (!wasPending || !prev.NextAttemptAt.Equal(m.NextAttemptAt) || prev.WorkItemID != m.WorkItemID) {
		dest := m.Thread.Destination()
		if err := t.bucket(bucketOutboxPending).Put(indexKey(dest, m.Seq), pendingOutbox(m)); err != nil {
			return err
		}
	}
	if isPending && !wasPending {
		dest := m.Thread.Destination()
		if err := t.add(counterOutboxPending, 1); err != nil {
			return err
		}
		if err := t.add(pendingAt(dest), 1); err != nil {
			return err
		}
	}
	wasDead := prev != nil && prev.Dead
	switch {
	case m.Dead && !wasDead:
		if err := t.bucket(bucketOutboxDead).Put(seq, key); err != nil {
			return err
		}
		if err := t.add(counterOutboxDead, 1); err != nil {
			return err
		}
	case wasDead && !m.Dead:
		if err := t.bucket(bucketOutboxDead).Delete(seq); err != nil {
			return err
		}
		if err := t.add(counterOutboxDead, -1); err != nil {
			return err
		}
	}
	return putJSON(t.bucket(bucketOutbox), key, m)
}

// unpend takes a pending message out of the pending index and its counters.
func (t txn) unpend(m *bot.OutboxMessage) error {
	dest := m.Thread.Destination()
	if err := t.bucket(bucketOutboxPending).Delete(indexKey(dest, m.Seq)); err != nil {
		return err
	}
	if err := t.add(counterOutboxPending, -1); err != nil {
		return err
	}
	return t.add(pendingAt(dest), -1)
}

// Enqueue creates the message of msg.Key or replaces its content, bumping
// Version. Delivery state, backoff and deadness are kept: a replaced message
// is not due before the NextAttemptAt an earlier delivery or failure set.
func (s *Store) Enqueue(ctx context.Context, msg bot.OutboxMessage) (bot.OutboxMessage, error) {
	m, _, err := s.enqueue(ctx, msg, true)
	return m, err
}

// EnqueueNew creates the message of msg.Key unless the key exists, in which
// case it changes nothing and returns the stored message. A key that exists
// is found in a read transaction: an empty write transaction still fsyncs.
func (s *Store) EnqueueNew(ctx context.Context, msg bot.OutboxMessage) (bot.OutboxMessage, bool, error) {
	if msg.Key != "" {
		if m, err := s.GetOutbox(ctx, msg.Key); err == nil {
			return *m, false, nil
		} else if bot.ErrorCode(err) != bot.ENOTFOUND {
			return bot.OutboxMessage{}, false, err
		}
	}
	return s.enqueue(ctx, msg, false)
}

// EnqueueAll enqueues msgs as Enqueue does, in one transaction.
func (s *Store) EnqueueAll(ctx context.Context, msgs []bot.OutboxMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, m := range msgs {
		if err := m.Validate(); err != nil {
			return err
		}
	}
	return s.update("enqueue outbox messages", func(t txn) error {
		for _, m := range msgs {
			if _, _, err := t.enqueue(m, true); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Store) enqueue(ctx context.Context, msg bot.OutboxMessage, replace bool) (bot.OutboxMessage, bool, error) {
	if err := ctx.Err(); err != nil {
		return bot.OutboxMessage{}, false, err
	}
	if err := msg.Validate(); err != nil {
		return bot.OutboxMessage{}, false, err
	}
	var (
		out     bot.OutboxMessage
		created bool
	)
	err := s.update("enqueue outbox message", func(t txn) error {
		var err error
		out, created, err = t.enqueue(msg, replace)
		return err
	})
	if err != nil {
		return bot.OutboxMessage{}, false, err
	}
	return out, created, nil
}

func (t txn) enqueue(msg bot.OutboxMessage, replace bool) (bot.OutboxMessage, bool, error) {
	now := msg.UpdatedAt
	if now.IsZero() {
		now = time.Now()
	}
	now = utc(now)
	prev, err := t.outbox(msg.Key)
	if err != nil && bot.ErrorCode(err) != bot.ENOTFOUND {
		return bot.OutboxMessage{}, false, err
	}
	if prev != nil && (!replace || !msg.Replaces(prev)) {
		return *prev, false, nil
	}
	m := msg
	m.UpdatedAt = now
	m.NextAttemptAt = utc(m.NextAttemptAt)
	if prev == nil {
		if m.Seq, err = t.bucket(bucketOutbox).NextSequence(); err != nil {
			return bot.OutboxMessage{}, false, err
		}
		m.Version = 1
		m.DeliveredVersion, m.RemoteID, m.Edits = 0, "", 0
		m.Attempted, m.Attempts, m.LastError, m.Dead = false, 0, "", false
		m.DeliveredAt = nil
		if m.CreatedAt.IsZero() {
			m.CreatedAt = now
		}
		m.CreatedAt = utc(m.CreatedAt)
	} else {
		m.Seq, m.CreatedAt = prev.Seq, prev.CreatedAt
		m.Version = prev.Version + 1
		m.DeliveredVersion, m.RemoteID, m.Edits, m.DeliveredAt = prev.DeliveredVersion, prev.RemoteID, prev.Edits, prev.DeliveredAt
		m.Attempted, m.Attempts, m.LastError, m.Dead = prev.Attempted, prev.Attempts, prev.LastError, prev.Dead
		if prev.NextAttemptAt.After(m.NextAttemptAt) {
			m.NextAttemptAt = prev.NextAttemptAt
		}
	}
	if err := t.putOutbox(prev, &m); err != nil {
		return bot.OutboxMessage{}, false, err
	}
	return m, prev == nil, nil
}

// Due returns pending messages whose NextAttemptAt is not after now, in Seq
// order within each destination, at most limit of each, leaving out the
// destinations skip reports. A message of a work item with an earlier
// pending message waits for it. It walks the pending index only, which
// holds each message's next attempt and work item, so it reads only the
// messages it returns; a skipped destination costs one seek.
func (s *Store) Due(ctx context.Context, now time.Time, limit int, skip func(destination string) bool) ([]bot.OutboxMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit = bot.ListLimit(limit)
	nowKey := timeKey(now)
	out := []bot.OutboxMessage{}
	err := s.view("due outbox messages", func(t txn) error {
		c := t.bucket(bucketOutboxPending).Cursor()
		k, v := c.First()
		for k != nil {
			if len(k) < 9 || k[len(k)-9] != 0 {
				k, v = c.Next()
				continue
			}
			dest := k[:len(k)-9]
			prefix := append(append([]byte(nil), dest...), 0)
			next := append(append([]byte(nil), dest...), 1) // the first key past the destination
			if skip != nil && skip(string(dest)) {
				k, v = c.Seek(next)
				continue
			}
			var waiting map[string]bool // work items with an earlier message not due yet
			n := 0
			for ; k != nil && bytes.HasPrefix(k, prefix) && n < limit; k, v = c.Next() {
				at, workItem, key, err := splitPendingOutbox(v)
				if err != nil {
					s.passOver(k, fmt.Errorf("the pending outbox entry of %s at seq %d: %w", dest, seqOf(k[len(k)-8:]), err))
					continue
				}
				switch {
				case len(workItem) > 0 && waiting[string(workItem)]:
				case bytes.Compare(at, nowKey) > 0:
					if len(workItem) > 0 {
						if waiting == nil {
							waiting = map[string]bool{}
						}
						waiting[string(workItem)] = true
					}
				default:
					m, err := t.outbox(string(key))
					if err != nil {
						s.passOver(k, fmt.Errorf("the pending outbox message of %s at seq %d: %w", dest, seqOf(k[len(k)-8:]), err))
						continue
					}
					out = append(out, *m)
					n++
				}
			}
			if k != nil && bytes.HasPrefix(k, prefix) {
				k, v = c.Seek(next)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// pendingOutbox is m's value in the pending index: its next attempt
// (timeKey, so byte order is time order), its work item's id after its
// length (uvarint), and its key.
func pendingOutbox(m *bot.OutboxMessage) []byte {
	return appendPendingOutbox(make([]byte, 0, 8+binary.MaxVarintLen16+len(m.WorkItemID)+len(m.Key)), m.NextAttemptAt, m.WorkItemID, m.Key)
}

func appendPendingOutbox[K string | []byte](b []byte, next time.Time, workItem string, key K) []byte {
	b = appendTimeKey(b, next)
	b = binary.AppendUvarint(b, uint64(len(workItem)))
	b = append(b, workItem...)
	return append(b, key...)
}

// splitPendingOutbox reads a pending index value in place.
func splitPendingOutbox(v []byte) (next, workItem, key []byte, err error) {
	if len(v) < 9 {
		return nil, nil, nil, fmt.Errorf("%d bytes, too short", len(v))
	}
	n, w := binary.Uvarint(v[8:])
	if w <= 0 || n > uint64(len(v)-8-w) {
		return nil, nil, nil, errors.New("work item id of a bad length")
	}
	rest := v[8+w:]
	return v[:8], rest[:n], rest[n:], nil
}

// passOver logs, once per entry, that Due cannot read the pending entry
// at key and goes on without it: one corrupt entry must not stop the
// delivery of every other message.
func (s *Store) passOver(key []byte, err error) {
	if _, seen := s.unreadable.LoadOrStore(string(key), true); !seen {
		s.log.Error("outbox message passed over: it cannot be read (switchyard storage compact checks the file)", slog.String("error", err.Error()))
	}
}

// MarkAttempts records, in one transaction, that creating deliveries of
// keys are about to be tried.
func (s *Store) MarkAttempts(ctx context.Context, keys []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	now := utc(time.Now())
	return s.update("mark outbox messages attempted", func(t txn) error {
		for _, key := range keys {
			prev, err := t.outbox(key)
			if err != nil {
				return err
			}
			if prev.Attempted {
				continue
			}
			m := *prev
			m.Attempted = true
			m.UpdatedAt = now
			if err := t.putOutbox(prev, &m); err != nil {
				return err
			}
		}
		return nil
	})
}

// Record records how deliveries went, in one transaction. A delivered
// version older than the latest leaves the message pending, since the newer
// content still has to go out; the remote id is kept either way so the next
// delivery edits the message instead of posting another.
func (s *Store) Record(ctx context.Context, outcomes []bot.DeliveryOutcome) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(outcomes) == 0 {
		return nil
	}
	return s.update("record outbox deliveries", func(t txn) error {
		for _, o := range outcomes {
			prev, err := t.outbox(o.Key)
			if err != nil {
				return err
			}
			m := *prev
			if err := o.Apply(&m); err != nil {
				return err
			}
			if err := t.putOutbox(prev, &m); err != nil {
				return err
			}
		}
		return nil
	})
}

// ListOutbox returns a thread's messages in Seq order.
func (s *Store) ListOutbox(ctx context.Context, thread string) ([]bot.OutboxMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := []bot.OutboxMessage{}
	err := s.view("list outbox", func(t txn) error {
		if thread == "" {
			return nil
		}
		p := append([]byte(thread), 0)
		return scanPrefix(t.bucket(bucketOutboxByThread), p, 8, false, func(_, key []byte) (bool, error) {
			m, err := t.outbox(string(key))
			if err != nil {
				return false, err
			}
			out = append(out, *m)
			return true, nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetOutbox returns one message, or ENOTFOUND.
func (s *Store) GetOutbox(ctx context.Context, key string) (*bot.OutboxMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var m *bot.OutboxMessage
	err := s.view("get outbox message", func(t txn) error {
		var err error
		m, err = t.outbox(key)
		return err
	})
	return m, err
}

// OutboxPending counts messages whose latest version is not shown yet, and
// dead ones, from their counters.
func (s *Store) OutboxPending(ctx context.Context) (pending, dead int, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	err = s.view("count outbox", func(t txn) error {
		pending = int(t.count(counterOutboxPending))
		dead = int(t.count(counterOutboxDead))
		return nil
	})
	return pending, dead, err
}

// OutboxWaiting counts the pending messages of one destination, from its
// counter.
func (s *Store) OutboxWaiting(ctx context.Context, destination string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n := 0
	err := s.view("count outbox", func(t txn) error {
		n = int(t.count(pendingAt(destination)))
		return nil
	})
	return n, err
}
