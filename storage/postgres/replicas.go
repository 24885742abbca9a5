package postgres

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/bot"
)

func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// maxPayload keeps a notification under PostgreSQL's 8,000 bytes.
const maxPayload = 7000

// Notify tells every replica listening on the database, this one too:
// NOTIFY on the switchyard channel, delivered when the statement commits.
func (s *Store) Notify(ctx context.Context, topic, payload string) error {
	if err := s.open(); err != nil {
		return err
	}
	if topic == "" || strings.Contains(topic, ":") {
		return bot.Errorf(bot.EINVALID, "notification topic %q: want a word without a colon", topic)
	}
	if len(payload) > maxPayload {
		return bot.Errorf(bot.ETOOLARGE, "notification of %s: payload of %d bytes (at most %d)", topic, len(payload), maxPayload)
	}
	_, err := s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", notifyChannel, topic+":"+payload)
	return s.wrap("notify", err)
}

// Listen holds a connection of its own that LISTENs on the switchyard
// channel and calls fn with each notification until ctx ends. A lost
// connection is made again after a pause, and fn is called with
// bot.TopicResync, since notifications sent meanwhile are lost. The pause
// grows while connecting fails, and starts again from its shortest once a
// connection listened: a replica whose connection is cut now and then
// listens again at once each time.
func (s *Store) Listen(ctx context.Context, fn func(topic, payload string)) error {
	const shortest = 100 * time.Millisecond
	backoff := shortest
	for first := true; ; first = false {
		if err := s.open(); err != nil {
			return err
		}
		listened, err := s.listen(ctx, fn, !first)
		if ctx.Err() != nil {
			return nil
		}
		if listened {
			backoff = shortest
		}
		why := connErrorText(err)
		s.deaf.Store(&why)
		s.log.Warn("notifications from the other replicas interrupted; listening again",
			slog.String("database", s.where), slog.String("error", connErrorText(err)), slog.Duration("retry_in", backoff))
		select {
		case <-ctx.Done():
			return nil
		case <-s.closed:
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// NotificationsDown says why this replica does not hear the other
// replicas' notifications now (its listening connection was lost and is
// not back yet), or "" while it does. Meanwhile everything that listens
// polls: what the others tell reaches it late, never not at all.
func (s *Store) NotificationsDown() string {
	if why := s.deaf.Load(); why != nil {
		return *why
	}
	return ""
}

func connErrorText(err error) string {
	if err == nil {
		return "connection closed"
	}
	return connError(err)
}

// listen listens on one connection until it is lost or ctx ends; listened
// reports whether it got as far as listening.
func (s *Store) listen(ctx context.Context, fn func(topic, payload string), resync bool) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.cfg.ConnConfig.Copy())
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return false, err
	}
	// The connection ends with the store, too.
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.closed:
			cancel()
		case <-lctx.Done():
		}
	}()
	s.deaf.Store(nil)
	if resync {
		fn(bot.TopicResync, "")
	}
	for {
		n, err := conn.WaitForNotification(lctx)
		if err != nil {
			return true, err
		}
		topic, payload, _ := strings.Cut(n.Payload, ":")
		fn(topic, payload)
	}
}

// HoldLease takes or renews the lease called name for holder until
// now+ttl: one statement, which takes it when it is free, expired or
// holder's already.
func (s *Store) HoldLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error) {
	if err := s.open(); err != nil {
		return false, err
	}
	if name == "" || holder == "" || ttl <= 0 {
		return false, bot.Errorf(bot.EINVALID, "lease %q for %q: a name, a holder and a positive time are required", name, holder)
	}
	var held bool
	err := s.pool.QueryRow(ctx, `WITH t AS (
		INSERT INTO leases AS l (name, holder, until) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until
		WHERE l.holder = EXCLUDED.holder OR l.until <= $4
		RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM t)`, name, holder, nanos(now.Add(ttl)), nanos(now)).Scan(&held)
	return held, s.wrap("hold lease", err)
}

// ReleaseLease gives up holder's lease called name, if it has it.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	if err := s.open(); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, "DELETE FROM leases WHERE name = $1 AND holder = $2", name, holder)
	return s.wrap("release lease", err)
}

// ClockOffset measures how far the server's clock is ahead of host, the
// clock of the replica asking: the server's time is read between two
// readings of host and set against their middle, on the quickest of a few
// round trips. Replicas that move their times by it keep the server's
// time, whatever their own clocks say.
func (s *Store) ClockOffset(ctx context.Context, host func() time.Time) (time.Duration, error) {
	if err := s.open(); err != nil {
		return 0, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, s.wrap("read the server's clock", err)
	}
	defer conn.Release()
	var (
		offset time.Duration
		best   = time.Duration(-1)
	)
	for range 3 {
		var micros int64
		before := host()
		err := conn.QueryRow(ctx, "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint").Scan(&micros)
		after := host()
		if err != nil {
			return 0, s.wrap("read the server's clock", err)
		}
		if rtt := after.Sub(before); best < 0 || rtt < best {
			best = rtt
			offset = time.UnixMicro(micros).Sub(before.Add(rtt / 2))
		}
	}
	return offset, nil
}
