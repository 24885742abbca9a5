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
//
// Each outbox message is one visible message on its platform. Before the
// Deliverer first creates a message it records the attempt (MarkAttempt);
// an attempt that may have reached the platform without its id being
// recorded (the process was killed, the request timed out, shutdown cut it
// short) makes the next delivery ask the sink's Finder for that message and
// update it instead of posting another.
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

// Run delivers until ctx is cancelled. A delivery in flight when ctx ends
// is finished (within Timeout), not cut short: a post the platform is
// already making is recorded, so the next start neither repeats nor has to
// look for it. Run then returns without starting another.
func (d *Deliverer) Run(ctx context.Context) error {
	t := time.NewTicker(d.opts.Poll)
	defer t.Stop()
	for {
		if _, err := d.deliverDue(ctx, context.WithoutCancel(ctx)); err != nil && ctx.Err() == nil {
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
// thread. A delivery ctx cuts short is handed over: its attempt is recorded,
// so the next start finds what it made.
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
				return fmt.Errorf("flush outbox: %s still pending: %w", Count(pending, "message", "messages"), ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// DeliverDue sends every message due now and returns how many it tried.
// Messages of different sources go out in parallel; within a source, in
// order, and a message whose delivery fails holds back the later messages
// of its work item until it is delivered.
func (d *Deliverer) DeliverDue(ctx context.Context) (int, error) {
	return d.deliverDue(ctx, ctx)
}

// deliverDue is DeliverDue; no message is started once stop ends, and calls
// to sinks run under call.
func (d *Deliverer) deliverDue(stop, call context.Context) (int, error) {
	due, err := d.opts.Store.Due(stop, d.opts.Now(), 256)
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
			held := map[string]bool{} // work items with a message that did not go out
			for _, m := range msgs {
				if stop.Err() != nil {
					return
				}
				if m.WorkItemID != "" && held[m.WorkItemID] {
					continue
				}
				ok, err := d.deliver(call, source, m)
				if !ok && m.WorkItemID != "" {
					held[m.WorkItemID] = true
				}
				if err != nil {
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

// deliver sends one message and records the outcome; ok reports whether the
// platform now shows it.
func (d *Deliverer) deliver(ctx context.Context, source string, m OutboxMessage) (ok bool, err error) {
	sink, configured := d.opts.Sinks[source]
	if !configured {
		err := d.opts.Store.MarkFailed(ctx, m.Key, fmt.Sprintf("no sink for %q threads is configured", source), d.opts.Now(), true)
		d.opts.Metrics.OutboxFailures.WithLabelValues(source, "true").Inc()
		return false, err
	}
	if m.RemoteID == "" {
		if m.Attempted {
			if err := d.adopt(ctx, source, sink, &m); err != nil {
				return false, d.failed(ctx, source, m, err)
			}
		} else {
			// Recorded before the platform sees anything: from here on a
			// crash leaves a trace the next delivery looks for.
			if err := d.opts.Store.MarkAttempt(ctx, m.Key); err != nil {
				return false, fmt.Errorf("record delivery attempt of %s: %w", m.Key, err)
			}
			m.Attempted = true
		}
	}
	dctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	remote, err := sink.Deliver(dctx, m)
	cancel()
	if err != nil {
		return false, d.failed(ctx, source, m, err)
	}
	now := d.opts.Now()
	next := now
	if m.Kind == OutboxStatus {
		next = now.Add(d.opts.MinEditInterval)
	}
	d.opts.Metrics.OutboxSent.WithLabelValues(source, string(m.Kind)).Inc()
	if remote == "" {
		remote = m.RemoteID
	}
	// The platform shows it: record that even if shutdown has begun.
	if err := d.opts.Store.MarkDelivered(context.WithoutCancel(ctx), m.Key, m.Version, remote, now, next); err != nil {
		return false, fmt.Errorf("record delivery of %s: %w", m.Key, err)
	}
	return true, nil
}

// adopt asks the sink for the message an earlier attempt of m may have
// made and, when it is there, makes m an update of it.
func (d *Deliverer) adopt(ctx context.Context, source string, sink Sink, m *OutboxMessage) error {
	f, ok := sink.(Finder)
	if !ok {
		return nil
	}
	fctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	remote, found, err := f.Find(fctx, *m)
	cancel()
	if err != nil {
		return fmt.Errorf("look for the message an earlier attempt may have posted: %w", err)
	}
	if found {
		m.RemoteID = remote
		d.opts.Metrics.OutboxFound.WithLabelValues(source).Inc()
		d.opts.Logger.LogAttrs(ctx, slog.LevelInfo, "outbox message found on the platform; updating it instead of posting again",
			slog.String("key", m.Key), slog.String("sink", source), slog.String("remote_id", remote))
	}
	return nil
}

// failed records a failed delivery: retried with backoff, or given up.
func (d *Deliverer) failed(ctx context.Context, source string, m OutboxMessage, err error) error {
	if ctx.Err() != nil {
		return nil // shutting down; the message stays pending and is sent after restart
	}
	now := d.opts.Now()
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
