package slack

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/switchyard/switchyard/bot"
)

// pacer spaces messages in one channel: Slack allows about one a second per
// channel and answers bursts with 429.
type pacer struct {
	interval time.Duration
	mu       sync.Mutex
	next     map[string]time.Time // channel -> earliest next send
}

func newPacer(interval time.Duration) *pacer {
	return &pacer{interval: interval, next: map[string]time.Time{}}
}

// maxPaceWait is the longest wait sleeps through. A channel held longer
// (Slack said Retry-After) answers with the delay instead, so the outbox
// moves on to other channels and comes back when it is over.
const maxPaceWait = 3 * time.Second

// errHeld is returned, wrapped in a bot.DeliveryError with the delay, for a
// channel that is held longer than maxPaceWait.
var errHeld = errors.New("channel is rate limited")

// wait reserves the channel's next slot and sleeps until it.
func (p *pacer) wait(ctx context.Context, channel string) error {
	p.mu.Lock()
	now := time.Now()
	at := p.next[channel]
	if at.Before(now) {
		at = now
	}
	if d := at.Sub(now); d > maxPaceWait {
		p.mu.Unlock()
		return &bot.DeliveryError{Err: fmt.Errorf("slack channel %s: %w", channel, errHeld), RetryAfter: d}
	}
	p.next[channel] = at.Add(p.interval)
	if len(p.next) > 4096 {
		for ch, t := range p.next {
			if t.Before(now) {
				delete(p.next, ch)
			}
		}
	}
	p.mu.Unlock()

	d := time.Until(at)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("slack channel %s: wait for a slot: %w", channel, ctx.Err())
	case <-t.C:
		return nil
	}
}

// hold keeps the channel quiet for d, after Slack said to back off.
func (p *pacer) hold(channel string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if until := time.Now().Add(d); until.After(p.next[channel]) {
		p.next[channel] = until
	}
}
