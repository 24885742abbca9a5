package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// clockCheck is how often the daemon measures its host's clock against the
// database server's again.
const clockCheck = time.Minute

// clockWarn is how far a host's clock may be from the server's before the
// daemon says so.
const clockWarn = time.Second

// serverClock is a store whose server keeps the time the replicas sharing
// it decide by.
type serverClock interface {
	ClockOffset(ctx context.Context, host func() time.Time) (time.Duration, error)
}

// clock is the time the daemon decides by (leases, claims, schedules,
// what it records): this host's clock, moved onto the database server's
// when replicas share one, so replicas whose clocks disagree still agree
// on when a lease runs out.
type clock struct {
	host   func() time.Time
	offset atomic.Int64 // how far the server's clock is ahead of host's, in nanoseconds
}

func newClock(host func() time.Time) *clock {
	if host == nil {
		host = time.Now
	}
	return &clock{host: host}
}

// Now is the host's time moved by the offset last measured.
func (c *clock) Now() time.Time { return c.host().Add(time.Duration(c.offset.Load())) }

// measure reads the offset from the server again, and says so when the
// host's clock is far from the server's and was not before.
func (c *clock) measure(ctx context.Context, s serverClock, log *slog.Logger) error {
	offset, err := s.ClockOffset(ctx, c.host)
	if err != nil {
		return fmt.Errorf("read the database server's clock: %w", err)
	}
	prev := time.Duration(c.offset.Swap(int64(offset)))
	if far(offset) && !far(prev) {
		log.Warn("this host's clock is not the database server's; leases, claims and schedules keep the server's time",
			slog.Duration("server_ahead_by", offset.Round(time.Millisecond)))
	}
	return nil
}

// follow measures the offset every clockCheck until ctx ends; a failure
// keeps the last offset (the store's own errors say the server is away).
func (c *clock) follow(ctx context.Context, s serverClock, log *slog.Logger) {
	t := time.NewTicker(clockCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := c.measure(ctx, s, log); err != nil && ctx.Err() == nil {
			log.Debug("clock check", slog.String("error", err.Error()))
		}
	}
}

func far(d time.Duration) bool { return d >= clockWarn || d <= -clockWarn }
