package slack

import (
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// health is whether the adapter takes Slack's events now. It starts down
// ("connecting"); the adapter logs each change once, a WARN when Slack goes
// down and an INFO when it is back, never once per retry.
type health struct {
	log *slog.Logger

	mu     sync.Mutex
	up     bool
	failed bool   // down because something failed, not because it is starting
	reason string // why it is down
	wasUp  bool   // it has been up before
}

func newHealth(log *slog.Logger) *health {
	return &health{log: log, reason: "connecting"}
}

// setReconnecting records that a connection that was up is being opened
// again. That is no failure, and most often a routine refresh Slack asks
// for every few hours, so it is logged at debug; a failure while
// reconnecting is reported as any other (setDown), and then the connection
// coming back too.
func (h *health) setReconnecting(reason string) {
	h.mu.Lock()
	was := h.up
	if was {
		h.up, h.reason = false, reason
	}
	h.mu.Unlock()
	if was {
		h.log.Debug("slack reconnecting", slog.String("reason", reason))
	}
}

// get reports whether Slack's events reach the adapter and, when not,
// why.
func (h *health) get() (bool, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.up, h.reason
}

// setUp records that events flow again.
func (h *health) setUp(attrs ...any) {
	h.mu.Lock()
	was, wasUp, failed := h.up, h.wasUp, h.failed
	h.up, h.failed, h.reason, h.wasUp = true, false, "", true
	h.mu.Unlock()
	switch {
	case was:
	case !wasUp:
		h.log.Info("slack connected", attrs...)
	case failed:
		h.log.Info("slack is back", attrs...)
	default:
		h.log.Debug("slack reconnected", attrs...)
	}
}

// setDown records that events do not flow, and why.
func (h *health) setDown(reason string) {
	h.mu.Lock()
	already := h.failed && !h.up
	h.up, h.failed, h.reason = false, true, reason
	h.mu.Unlock()
	if already {
		h.log.Debug("slack still down; retrying", slog.String("reason", reason))
		return
	}
	h.log.Warn("slack is down; retrying until it is back", slog.String("reason", reason))
}

// backoff is a capped exponential delay with jitter: each wait is between
// half and all of the current step, so many daemons retrying at once spread
// out.
type backoff struct {
	first, max, step time.Duration
}

func newBackoff(first, max time.Duration) *backoff {
	return &backoff{first: first, max: max, step: first}
}

// next returns the wait before the next attempt and doubles the step.
func (b *backoff) next() time.Duration {
	d := b.step/2 + rand.N(b.step/2+1)
	b.step = min(2*b.step, b.max)
	return d
}

// reset starts over after a success.
func (b *backoff) reset() { b.step = b.first }
