package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// DelivererOptions configure a Deliverer.
type DelivererOptions struct {
	Store OutboxStore
	// Sinks by thread source. A message for a source with no sink dies with
	// a reason, so a misconfiguration is visible instead of retried forever.
	Sinks map[string]Sink
	// MinEditInterval spaces deliveries of one message key (status edits);
	// default 1s. Only the latest text is sent, so the last state always
	// arrives.
	MinEditInterval time.Duration
	// MaxAttempts before a message is given up; default 50, which with
	// backoff capped at MaxBackoff rides out hours of a platform outage.
	MaxAttempts int
	// MaxBackoff caps the exponential backoff; default 5m.
	MaxBackoff time.Duration
	// Poll is how often due messages are looked for without a wake; default 500ms.
	Poll time.Duration
	// Timeout bounds one delivery; default 30s.
	Timeout time.Duration
	Metrics *Metrics
	Logger  *slog.Logger
	Now     func() time.Time
}

// Deliverer sends outbox messages through their sinks, in order, with
// retries. It is owned by the goroutine that calls Run.
type Deliverer struct {
	opts DelivererOptions
	wake chan struct{}
}

// NewDeliverer returns a Deliverer.
func NewDeliverer(opts DelivererOptions) *Deliverer {
	if opts.MinEditInterval <= 0 {
		opts.MinEditInterval = time.Second
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 50
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Minute
	}
	if opts.Poll <= 0 {
		opts.Poll = 500 * time.Millisecond
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Deliverer{opts: opts, wake: make(chan struct{}, 1)}
}

// Wake makes Run look for due messages now.
func (d *Deliverer) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx is cancelled.
func (d *Deliverer) Run(ctx context.Context) error {
	t := time.NewTicker(d.opts.Poll)
	defer t.Stop()
	for {
		if _, err := d.DeliverDue(ctx); err != nil && ctx.Err() == nil {
			d.opts.Logger.LogAttrs(ctx, slog.LevelError, "outbox delivery", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-d.wake:
		case <-t.C:
		}
	}
}

// Flush delivers until nothing is due and no edit is waiting out its
// interval, or ctx ends. The daemon calls it at shutdown, after Run has
// returned (the two must not deliver at once), so the last state reaches the
// thread.
func (d *Deliverer) Flush(ctx context.Context) error {
	for {
		n, err := d.DeliverDue(ctx)
		if err != nil {
			return err
		}
		pending, _, err := d.opts.Store.OutboxPending(ctx)
		if err != nil {
			return err
		}
		if pending == 0 {
			return nil
		}
		if n == 0 {
			// Messages wait for an edit interval or a retry: give them a
			// moment, unless the caller's deadline says otherwise.
			select {
			case <-ctx.Done():
				return fmt.Errorf("flush outbox: %d message(s) still pending: %w", pending, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// DeliverDue sends every message due now and returns how many it tried.
// Messages of different sources go out in parallel; within a source, in
// order.
func (d *Deliverer) DeliverDue(ctx context.Context) (int, error) {
	due, err := d.opts.Store.Due(ctx, d.opts.Now(), 256)
	if err != nil {
		return 0, fmt.Errorf("list due outbox messages: %w", err)
	}
	bySource := map[string][]OutboxMessage{}
	for _, m := range due {
		bySource[m.Thread.Source] = append(bySource[m.Thread.Source], m)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for source, msgs := range bySource {
		wg.Go(func() {
			for _, m := range msgs {
				if ctx.Err() != nil {
					return
				}
				if err := d.deliver(ctx, source, m); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return len(due), errors.Join(errs...)
}

func (d *Deliverer) deliver(ctx context.Context, source string, m OutboxMessage) error {
	sink, ok := d.opts.Sinks[source]
	if !ok {
		err := d.opts.Store.MarkFailed(ctx, m.Key, fmt.Sprintf("no sink for %q threads is configured", source), d.opts.Now(), true)
		d.opts.Metrics.OutboxFailures.WithLabelValues(source, "true").Inc()
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	remote, err := sink.Deliver(dctx, m)
	cancel()
	now := d.opts.Now()
	if err == nil {
		next := now
		if m.Kind == OutboxStatus {
			next = now.Add(d.opts.MinEditInterval)
		}
		d.opts.Metrics.OutboxSent.WithLabelValues(source, string(m.Kind)).Inc()
		if remote == "" {
			remote = m.RemoteID
		}
		return d.opts.Store.MarkDelivered(ctx, m.Key, m.Version, remote, now, next)
	}
	if ctx.Err() != nil {
		return nil // shutting down; the message stays pending and is sent after restart
	}
	dead := false
	next := now.Add(d.backoff(m.Attempts + 1))
	if de, ok := AsDeliveryError(err); ok {
		dead = de.Permanent
		if de.RetryAfter > 0 {
			next = now.Add(de.RetryAfter)
		}
	}
	if m.Attempts+1 >= d.opts.MaxAttempts {
		dead = true
	}
	d.opts.Metrics.OutboxFailures.WithLabelValues(source, strconv.FormatBool(dead)).Inc()
	d.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "outbox delivery failed",
		slog.String("key", m.Key), slog.String("sink", source), slog.Int("attempt", m.Attempts+1),
		slog.Bool("dead", dead), slog.Time("next", next), slog.String("error", err.Error()))
	if err := d.opts.Store.MarkFailed(ctx, m.Key, err.Error(), next, dead); err != nil {
		return fmt.Errorf("record failed delivery of %s: %w", m.Key, err)
	}
	return nil
}

// backoff returns 1s, 2s, 4s ... capped at MaxBackoff.
func (d *Deliverer) backoff(attempt int) time.Duration {
	if attempt > 20 {
		return d.opts.MaxBackoff
	}
	b := time.Second << (attempt - 1)
	return min(b, d.opts.MaxBackoff)
}
