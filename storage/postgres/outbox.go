package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/bot"
)

func scanOutbox(row pgx.Row) (*bot.OutboxMessage, error) {
	var doc []byte
	if err := row.Scan(&doc); err != nil {
		return nil, err
	}
	var m bot.OutboxMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, fmt.Errorf("decode outbox message: %w", err)
	}
	return &m, nil
}

func getOutbox(ctx context.Context, q querier, key string, lock bool) (*bot.OutboxMessage, error) {
	if !storable(key) {
		return nil, bot.Errorf(bot.ENOTFOUND, "outbox message %q not found", key)
	}
	m, err := scanOutbox(q.QueryRow(ctx, "SELECT doc FROM outbox WHERE key = $1"+forUpdate(lock), key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, bot.Errorf(bot.ENOTFOUND, "outbox message %q not found", key)
	}
	return m, err
}

// putOutbox writes m; a new message (insert) takes its sequence before.
func putOutbox(ctx context.Context, q querier, m *bot.OutboxMessage, insert bool) error {
	doc, err := jsonDoc(m)
	if err != nil {
		return err
	}
	sql := `UPDATE outbox SET thread = $2, destination = $9, work_item = $3, pending = $4, dead = $5, next_attempt = $6, doc = $8 WHERE key = $1 AND seq = $7`
	if insert {
		sql = `INSERT INTO outbox (key, thread, destination, work_item, pending, dead, next_attempt, seq, doc) VALUES ($1, $2, $9, $3, $4, $5, $6, $7, $8)`
	}
	_, err = q.Exec(ctx, sql, m.Key, m.Thread.Key(), m.WorkItemID, m.Pending(), m.Dead, nanos(m.NextAttemptAt), int64(m.Seq), doc, m.Thread.Destination())
	return err
}

// Enqueue creates the message of msg.Key or replaces its content, bumping
// Version; delivery state, backoff and deadness are kept.
func (s *Store) Enqueue(ctx context.Context, msg bot.OutboxMessage) (bot.OutboxMessage, error) {
	m, _, err := s.enqueue(ctx, msg, true)
	return m, err
}

// EnqueueNew creates the message of msg.Key unless the key exists.
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
	if err := msg.Validate(); err != nil {
		return bot.OutboxMessage{}, false, err
	}
	var (
		out     bot.OutboxMessage
		created bool
	)
	err := s.tx(ctx, "enqueue outbox message", func(tx pgx.Tx) error {
		var err error
		out, created, err = enqueueTx(ctx, tx, msg, replace)
		return err
	})
	if err != nil {
		return bot.OutboxMessage{}, false, err
	}
	return out, created, nil
}

// EnqueueAll enqueues each message as Enqueue does, in one transaction.
func (s *Store) EnqueueAll(ctx context.Context, msgs []bot.OutboxMessage) error {
	for i := range msgs {
		if err := msgs[i].Validate(); err != nil {
			return err
		}
	}
	if len(msgs) == 0 {
		return s.open()
	}
	return s.tx(ctx, "enqueue outbox messages", func(tx pgx.Tx) error {
		for _, m := range msgs {
			if _, _, err := enqueueTx(ctx, tx, m, true); err != nil {
				return err
			}
		}
		return nil
	})
}

// enqueueTx creates or replaces the message of msg.Key in tx.
func enqueueTx(ctx context.Context, tx pgx.Tx, msg bot.OutboxMessage, replace bool) (bot.OutboxMessage, bool, error) {
	now := msg.UpdatedAt
	if now.IsZero() {
		now = time.Now()
	}
	now = utc(now)
	// Two enqueues of a new key race to insert it: the key's advisory
	// lock orders them, so the second replaces the first's content.
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 23))", msg.Key); err != nil {
		return bot.OutboxMessage{}, false, err
	}
	prev, err := getOutbox(ctx, tx, msg.Key, true)
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
		var seq int64
		if err := tx.QueryRow(ctx, "SELECT nextval('outbox_seq')").Scan(&seq); err != nil {
			return bot.OutboxMessage{}, false, err
		}
		m.Seq = uint64(seq)
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
	if err := putOutbox(ctx, tx, &m, prev == nil); err != nil {
		return bot.OutboxMessage{}, false, err
	}
	if m.Pending() {
		if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", notifyChannel, bot.TopicOutbox+":"); err != nil {
			return bot.OutboxMessage{}, false, err
		}
	}
	return m, prev == nil, nil
}

// OutboxClaim is how long a message Due listed is this store's to deliver
// while its outcome is not recorded: other replicas leave it, and the
// later messages of its work item, alone until then. A replica that dies
// mid-delivery holds its messages this long; the next one to list them
// finds their Attempted mark and looks on the platform before posting
// again.
const OutboxClaim = 30 * time.Second

// dueLock is the advisory lock Due runs under: replicas list and claim
// due messages one at a time, so two never claim the same.
const dueLock = 0x5357_4f55_5442 // "SWOUTB"

// serverNanos is the server's clock in Unix nanoseconds. Claims are timed
// by it, not by the replica's: a replica whose clock runs ahead would
// otherwise find every other replica's claim run out and send its
// messages again.
const serverNanos = "(extract(epoch FROM clock_timestamp()) * 1000000000)::bigint"

// Due returns pending messages whose NextAttemptAt is not after now, in
// Seq order within each destination, at most limit of each, leaving out the
// destinations skip reports; a message of a work item with an earlier
// pending message that is not due waits for it. The messages it returns
// are claimed for this store (OutboxClaim): another replica's Due leaves
// them, and the messages of their work items after them, out until their
// outcome is recorded or the claim runs out.
func (s *Store) Due(ctx context.Context, now time.Time, limit int, skip func(destination string) bool) ([]bot.OutboxMessage, error) {
	limit = bot.ListLimit(limit)
	out := []bot.OutboxMessage{}
	err := s.tx(ctx, "due outbox messages", func(tx pgx.Tx) error {
		out = out[:0]
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(dueLock)); err != nil {
			return err
		}
		var dests []string
		rows, err := tx.Query(ctx, "SELECT DISTINCT destination FROM outbox WHERE pending")
		if err != nil {
			return err
		}
		all, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, d := range all {
			if skip == nil || !skip(d) {
				dests = append(dests, d)
			}
		}
		if len(dests) == 0 {
			return nil
		}
		// What decides is in columns, read through the pending index; only
		// the documents of the messages returned are read, as the claim
		// on them returns them.
		rows, err = tx.Query(ctx, `SELECT key, destination, work_item, next_attempt, claimed_by <> '' AND claimed_by <> $2 AND claim_until > `+serverNanos+`
			FROM outbox WHERE pending AND destination = ANY($1) ORDER BY destination, seq`, dests, s.id)
		if err != nil {
			return err
		}
		var (
			dest    string
			n       int
			waiting map[string]bool // work items with an earlier message not due yet, or another's
			keys    []string
		)
		nowNanos := nanos(now)
		for rows.Next() {
			var (
				key, d, workItem string
				next             int64
				others           bool
			)
			if err := rows.Scan(&key, &d, &workItem, &next, &others); err != nil {
				rows.Close()
				return err
			}
			if d != dest || waiting == nil {
				dest, n, waiting = d, 0, map[string]bool{}
			}
			switch {
			case n >= limit:
			case workItem != "" && waiting[workItem]:
			case others, next > nowNanos:
				if workItem != "" {
					waiting[workItem] = true
				}
			default:
				keys = append(keys, key)
				n++
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(keys) == 0 {
			return nil
		}
		rows, err = tx.Query(ctx, "UPDATE outbox SET claimed_by = $2, claim_until = "+serverNanos+" + $3 WHERE key = ANY($1) RETURNING key, doc",
			keys, s.id, OutboxClaim.Nanoseconds())
		if err != nil {
			return err
		}
		docs := make(map[string][]byte, len(keys))
		for rows.Next() {
			var (
				key string
				doc []byte
			)
			if err := rows.Scan(&key, &doc); err != nil {
				rows.Close()
				return err
			}
			docs[key] = doc
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, key := range keys {
			var m bot.OutboxMessage
			if err := json.Unmarshal(docs[key], &m); err != nil {
				return fmt.Errorf("decode outbox message %q: %w", key, err)
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// MarkAttempts records that creating deliveries of keys are about to be
// tried, in one transaction.
func (s *Store) MarkAttempts(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return s.open()
	}
	now := utc(time.Now())
	return s.tx(ctx, "mark outbox messages attempted", func(tx pgx.Tx) error {
		for _, key := range keys {
			m, err := getOutbox(ctx, tx, key, true)
			if err != nil {
				return err
			}
			if m.Attempted {
				continue
			}
			m.Attempted = true
			m.UpdatedAt = now
			if err := putOutbox(ctx, tx, m, false); err != nil {
				return err
			}
		}
		return nil
	})
}

// Record records how deliveries went, in one transaction, and gives up
// this store's claims on their messages.
func (s *Store) Record(ctx context.Context, outcomes []bot.DeliveryOutcome) error {
	if len(outcomes) == 0 {
		return s.open()
	}
	return s.tx(ctx, "record outbox deliveries", func(tx pgx.Tx) error {
		keys := make([]string, 0, len(outcomes))
		for _, o := range outcomes {
			m, err := getOutbox(ctx, tx, o.Key, true)
			if err != nil {
				return err
			}
			if err := o.Apply(m); err != nil {
				return err
			}
			if err := putOutbox(ctx, tx, m, false); err != nil {
				return err
			}
			keys = append(keys, o.Key)
		}
		_, err := tx.Exec(ctx, "UPDATE outbox SET claimed_by = '', claim_until = 0 WHERE key = ANY($1) AND claimed_by = $2", keys, s.id)
		return err
	})
}

// releaseClaims gives up every claim this store holds, when it closes.
func (s *Store) releaseClaims(ctx context.Context) {
	if _, err := s.pool.Exec(ctx, "UPDATE outbox SET claimed_by = '', claim_until = 0 WHERE claimed_by = $1", s.id); err != nil {
		s.log.Warn("release outbox claims", slog.String("error", err.Error()))
	}
}

// ListOutbox returns a thread's messages in Seq order.
func (s *Store) ListOutbox(ctx context.Context, thread string) ([]bot.OutboxMessage, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	out := []bot.OutboxMessage{}
	if thread == "" || !storable(thread) {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, "SELECT doc FROM outbox WHERE thread = $1 ORDER BY seq", thread)
	if err != nil {
		return nil, s.wrap("list outbox", err)
	}
	defer rows.Close()
	for rows.Next() {
		m, err := scanOutbox(rows)
		if err != nil {
			return nil, s.wrap("list outbox", err)
		}
		out = append(out, *m)
	}
	return out, s.wrap("list outbox", rows.Err())
}

// GetOutbox returns one message, or ENOTFOUND.
func (s *Store) GetOutbox(ctx context.Context, key string) (*bot.OutboxMessage, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	m, err := getOutbox(ctx, s.pool, key, false)
	return m, s.wrap("get outbox message", err)
}

// OutboxPending counts messages whose latest version is not shown yet, and
// dead ones.
func (s *Store) OutboxPending(ctx context.Context) (pending, dead int, err error) {
	if err := s.open(); err != nil {
		return 0, 0, err
	}
	err = s.pool.QueryRow(ctx, "SELECT count(*) FILTER (WHERE pending), count(*) FILTER (WHERE dead) FROM outbox WHERE pending OR dead").Scan(&pending, &dead)
	return pending, dead, s.wrap("count outbox", err)
}

// OutboxWaiting counts the pending messages of one destination.
func (s *Store) OutboxWaiting(ctx context.Context, destination string) (int, error) {
	if err := s.open(); err != nil {
		return 0, err
	}
	var n int
	err := s.pool.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE pending AND destination = $1", destination).Scan(&n)
	return n, s.wrap("count outbox", err)
}
