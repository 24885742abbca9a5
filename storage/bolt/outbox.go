package bolt

import (
	"context"
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

// putOutbox stores m and moves it between the thread, pending and dead
// indexes according to how it differs from prev (nil for a new message).
func (t txn) putOutbox(prev, m *bot.OutboxMessage) error {
	key := []byte(m.Key)
	seq := seqKey(m.Seq)
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
	for _, idx := range []struct {
		bucket  string
		was, is bool
	}{
		{bucketOutboxPending, prev != nil && prev.Pending(), m.Pending()},
		{bucketOutboxDead, prev != nil && prev.Dead, m.Dead},
	} {
		var err error
		switch {
		case idx.is && !idx.was:
			err = t.bucket(idx.bucket).Put(seq, key)
		case idx.was && !idx.is:
			err = t.bucket(idx.bucket).Delete(seq)
		}
		if err != nil {
			return err
		}
	}
	return putJSON(t.bucket(bucketOutbox), key, m)
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

func (s *Store) enqueue(ctx context.Context, msg bot.OutboxMessage, replace bool) (bot.OutboxMessage, bool, error) {
	if err := ctx.Err(); err != nil {
		return bot.OutboxMessage{}, false, err
	}
	switch {
	case msg.Key == "":
		return bot.OutboxMessage{}, false, bot.Errorf(bot.EINVALID, "outbox message without a key")
	case msg.Thread.IsZero():
		return bot.OutboxMessage{}, false, bot.Errorf(bot.EINVALID, "outbox message %q has no thread", msg.Key)
	}
	now := msg.UpdatedAt
	if now.IsZero() {
		now = time.Now()
	}
	now = utc(now)
	var (
		out     bot.OutboxMessage
		created bool
	)
	err := s.update("enqueue outbox message", func(t txn) error {
		prev, err := t.outbox(msg.Key)
		if err != nil && bot.ErrorCode(err) != bot.ENOTFOUND {
			return err
		}
		if prev != nil && !replace {
			out, created = *prev, false
			return nil
		}
		m := msg
		m.UpdatedAt = now
		m.NextAttemptAt = utc(m.NextAttemptAt)
		if prev == nil {
			if m.Seq, err = t.bucket(bucketOutbox).NextSequence(); err != nil {
				return err
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
		out, created = m, prev == nil
		return t.putOutbox(prev, &m)
	})
	if err != nil {
		return bot.OutboxMessage{}, false, err
	}
	return out, created, nil
}

// Due returns pending messages whose NextAttemptAt is not after now, in Seq
// order. A message of a work item with an earlier pending message waits for
// it. It walks the pending index only.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]bot.OutboxMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit = listLimit(limit)
	out := []bot.OutboxMessage{}
	err := s.view("due outbox messages", func(t txn) error {
		waiting := map[string]bool{} // work items with an earlier message not due yet
		return scanAll(t.bucket(bucketOutboxPending), false, func(_, key []byte) (bool, error) {
			m, err := t.outbox(string(key))
			if err != nil {
				return false, err
			}
			switch {
			case m.WorkItemID != "" && waiting[m.WorkItemID]:
			case m.NextAttemptAt.After(now):
				if m.WorkItemID != "" {
					waiting[m.WorkItemID] = true
				}
			default:
				out = append(out, *m)
			}
			return len(out) < limit, nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// MarkAttempt records that a creating delivery of key is about to be tried.
func (s *Store) MarkAttempt(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.update("mark outbox message attempted", func(t txn) error {
		prev, err := t.outbox(key)
		if err != nil {
			return err
		}
		if prev.Attempted {
			return nil
		}
		m := *prev
		m.Attempted = true
		m.UpdatedAt = utc(time.Now())
		return t.putOutbox(prev, &m)
	})
}

// MarkDelivered records that the platform shows version of key. A version
// older than the latest leaves the message pending, since the newer content
// still has to go out; the remote id is kept either way so the next delivery
// edits the message instead of posting another.
func (s *Store) MarkDelivered(ctx context.Context, key string, version int, remoteID string, now, next time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now = utc(now)
	return s.update("mark outbox message delivered", func(t txn) error {
		prev, err := t.outbox(key)
		if err != nil {
			return err
		}
		if version < 1 || version > prev.Version {
			return bot.Errorf(bot.EINVALID, "outbox message %q has no version %d (latest %d)", key, version, prev.Version)
		}
		m := *prev
		if m.DeliveredVersion > 0 {
			m.Edits++
		}
		if version > m.DeliveredVersion {
			m.DeliveredVersion = version
		}
		if remoteID != "" {
			m.RemoteID = remoteID
		}
		m.Attempted, m.Attempts, m.LastError = false, 0, ""
		m.NextAttemptAt = utc(next)
		m.DeliveredAt = &now
		m.UpdatedAt = now
		return t.putOutbox(prev, &m)
	})
}

// MarkFailed records a failed delivery attempt.
func (s *Store) MarkFailed(ctx context.Context, key string, errText string, next time.Time, dead bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.update("mark outbox message failed", func(t txn) error {
		prev, err := t.outbox(key)
		if err != nil {
			return err
		}
		m := *prev
		m.Attempts++
		m.LastError = errText
		m.NextAttemptAt = utc(next)
		m.Dead = m.Dead || dead
		m.UpdatedAt = utc(time.Now())
		return t.putOutbox(prev, &m)
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
// dead ones.
func (s *Store) OutboxPending(ctx context.Context) (pending, dead int, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	err = s.view("count outbox", func(t txn) error {
		pending = countKeys(t.bucket(bucketOutboxPending))
		dead = countKeys(t.bucket(bucketOutboxDead))
		return nil
	})
	return pending, dead, err
}
