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

// DefaultMinEditInterval is the least time between two edits of one
// message, a status: Slack allows about one message update a second in a
// channel. The reporter writes a running status no more often, as an edit
// it writes sooner would never be sent.
const DefaultMinEditInterval = time.Second

// DelivererOptions configure a Deliverer.
type DelivererOptions struct {
	Store OutboxStore
	// Sinks by thread source. A message for a source with no sink dies with
	// a reason, so a misconfiguration is visible instead of retried forever.
	Sinks map[string]Sink
	// MinEditInterval spaces deliveries of one message key (status edits);
	// DefaultMinEditInterval when zero. Only the latest text is sent, so the
	// last state always arrives.
	MinEditInterval time.Duration
	// MaxAttempts before a message is given up; default 50. Attempts made
	// while its destination is down do not count.
	MaxAttempts int
	// MaxBackoff caps the exponential backoff of one message; default 5m.
	MaxBackoff time.Duration
	// Parallel is how many messages of one destination are delivered at
	// once, each of another work item; default 8.
	Parallel int
	// DownAfter is how many failures in a row, whichever messages they were
	// of, take a destination down; default 3. A destination that is down
	// gets one message tried after DownBackoff, doubling up to
	// MaxDownBackoff (defaults 1s and 30s), and nothing else until one goes
	// through.
	DownAfter      int
	DownBackoff    time.Duration
	MaxDownBackoff time.Duration
	// Poll is how often due messages are looked for without a wake; default 500ms.
	Poll time.Duration
	// Timeout bounds one delivery; default 30s.
	Timeout time.Duration
	// StopGrace is how long deliveries in flight when Run is stopped may
	// take to finish; default 1s. One still waiting then is cut short and
	// handed over (its attempt is on record, so the next start looks for
	// what it made), and Flush leaves its destination alone: a platform
	// that does not answer does not hold the shutdown.
	StopGrace time.Duration
	Metrics   *Metrics
	Logger    *slog.Logger
	Now       func() time.Time
}

// flushMargin is how much longer than an edit interval or a first retry
// Flush waits for something to come due before it leaves what is pending
// to the next start.
const flushMargin = 500 * time.Millisecond

// dueLimit bounds the messages of one destination a round delivers.
const dueLimit = 256

// Deliverer sends outbox messages through their sinks, in order, with
// retries. It is owned by the goroutine that calls Run.
//
// Each outbox message is one visible message on its platform. Before the
// Deliverer first creates a message it records the attempt (MarkAttempts);
// an attempt that may have reached the platform without its id being
// recorded (the process was killed, the request timed out, shutdown cut it
// short) makes the next delivery ask the sink's Finder for that message and
// update it instead of posting another.
//
// Deliveries go out in rounds: each round takes the due messages of one
// destination (Thread.Destination), delivers those of different work items
// in parallel, and records how they went in one transaction. Under Run
// every destination has its own rounds, so one that is slow holds back no
// other. A destination whose platform fails DownAfter times in a row
// is down: its messages wait, their attempts uncounted, while one of them
// is tried now and then; the first that goes through brings it back. One
// warning is logged when it goes down and one line when it is back.
type Deliverer struct {
	opts DelivererOptions
	wake chan struct{}

	mu    sync.Mutex
	dests map[string]*destination
	// busy are the destinations Run is delivering to: each has its own
	// round, so one whose platform is slow to answer (or hangs until the
	// timeout) holds none of the others.
	busy map[string]bool
}

// destination is what the deliverer knows of one destination's health.
type destination struct {
	name     string
	failures int       // failures in a row while up
	down     bool      // down: only a try at retryAt
	since    time.Time // when it went down
	tries    int       // failed tries while down
	retryAt  time.Time
	lastErr  string
	// held says a delivery to it was cut short when Run stopped: Flush
	// leaves it alone, its messages wait for the next start.
	held bool
	// backAt is when it last came back, after backTries tries: one that
	// goes down again soon after (a platform failing now and then) goes on
	// from that backoff instead of starting again at DownBackoff, so a
	// flapping platform is tried, and logged, at most every
	// MaxDownBackoff or so.
	backAt    time.Time
	backTries int
	carried   int // tries carried over into this time down
}

// NewDeliverer returns a Deliverer.
func NewDeliverer(opts DelivererOptions) *Deliverer {
	if opts.MinEditInterval <= 0 {
		opts.MinEditInterval = DefaultMinEditInterval
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 50
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Minute
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 8
	}
	if opts.DownAfter <= 0 {
		opts.DownAfter = 3
	}
	if opts.DownBackoff <= 0 {
		opts.DownBackoff = time.Second
	}
	if opts.MaxDownBackoff <= 0 {
		opts.MaxDownBackoff = 30 * time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = 500 * time.Millisecond
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = time.Second
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
	return &Deliverer{opts: opts, wake: make(chan struct{}, 1), dests: map[string]*destination{}, busy: map[string]bool{}}
}

// Wake makes Run look for due messages now.
func (d *Deliverer) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// leftAlone returns the destinations Flush does not deliver to: those down
// and those held when Run stopped.
func (d *Deliverer) leftAlone() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for name, ds := range d.dests {
		if ds.down || ds.held {
			out = append(out, name)
		}
	}
	return out
}

// Down returns the destinations that are down, with the last error of each.
func (d *Deliverer) Down() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out map[string]string
	for name, ds := range d.dests {
		if ds.down {
			if out == nil {
				out = map[string]string{}
			}
			out[name] = ds.lastErr
		}
	}
	return out
}

// Run delivers until ctx is cancelled. Each destination has rounds of its
// own, so one that is slow or hangs holds back no other. A delivery in
// flight when ctx ends gets StopGrace to finish, not cut short at once: a
// post the platform is already making is recorded, so the next start
// neither repeats nor has to look for it. One that takes longer is cut
// short and handed over (see StopGrace). A try of a destination that is
// down is cut short at once. Run then returns without starting another.
func (d *Deliverer) Run(ctx context.Context) error {
	t := time.NewTicker(d.opts.Poll)
	defer t.Stop()
	call, cut := context.WithCancel(context.WithoutCancel(ctx))
	defer cut()
	var rounds sync.WaitGroup
	defer d.stopRounds(ctx, &rounds, cut)
	for {
		if err := d.startRounds(ctx, call, &rounds); err != nil && ctx.Err() == nil {
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

// startRounds starts a round for every destination with messages due that
// has none under way; when a round ends having tried something, Run looks
// again at once.
func (d *Deliverer) startRounds(stop, call context.Context, rounds *sync.WaitGroup) error {
	due, err := d.due(stop, true)
	if err != nil {
		return err
	}
	for name, msgs := range due {
		d.mu.Lock()
		d.busy[name] = true
		d.mu.Unlock()
		rounds.Go(func() {
			n, err := d.deliverTo(stop, call, name, msgs)
			d.mu.Lock()
			delete(d.busy, name)
			d.mu.Unlock()
			if err != nil && stop.Err() == nil {
				d.opts.Logger.LogAttrs(stop, slog.LevelError, "outbox delivery", slog.String("destination", name), slog.String("error", err.Error()))
			}
			if n > 0 && err == nil {
				d.Wake() // a round that tried something: more may be due
			}
		})
	}
	return nil
}

// stopRounds waits StopGrace for the rounds under way, then cuts their
// deliveries short and marks their destinations held.
func (d *Deliverer) stopRounds(ctx context.Context, rounds *sync.WaitGroup, cut context.CancelFunc) {
	done := make(chan struct{})
	go func() {
		rounds.Wait()
		close(done)
	}()
	grace := time.NewTimer(d.opts.StopGrace)
	defer grace.Stop()
	select {
	case <-done:
		return
	case <-grace.C:
	}
	d.mu.Lock()
	var held []string
	for name := range d.busy {
		if ds := d.dests[name]; ds != nil {
			ds.held = true
			held = append(held, name)
		}
	}
	d.mu.Unlock()
	cut()
	<-done
	for _, name := range held {
		d.opts.Logger.LogAttrs(ctx, slog.LevelInfo, name+" did not answer in time as the deliverer stopped; its messages are sent after the next start",
			slog.String("destination", name), slog.Duration("waited", d.opts.StopGrace))
	}
}

// Flush delivers until nothing is due and no edit is waiting out its
// interval, or ctx ends. The daemon calls it at shutdown, after Run has
// returned (the two must not deliver at once), so the last state reaches the
// thread. Destinations that are down are not tried: their messages wait
// for the next start. Nor is a long retry waited for: once nothing has come
// due for longer than an edit interval or a first failure's backoff (and a
// moment), what is still pending waits out a longer backoff or a
// platform's Retry-After, and is sent after the next start. A delivery ctx
// cuts short is handed over: its attempt is recorded, so the next start
// finds what it made.
func (d *Deliverer) Flush(ctx context.Context) error {
	idle := time.Now()
	for {
		n, err := d.deliverDue(ctx, ctx, false)
		if err != nil {
			return err
		}
		if n > 0 {
			idle = time.Now()
		}
		pending, _, err := d.opts.Store.OutboxPending(ctx)
		if err != nil {
			return err
		}
		waiting := 0
		for _, name := range d.leftAlone() {
			w, err := d.opts.Store.OutboxWaiting(ctx, name)
			if err != nil {
				return err
			}
			pending -= w
			waiting += w
		}
		retrying := n == 0 && time.Since(idle) > max(d.opts.MinEditInterval, d.backoff(1))+flushMargin
		if pending <= 0 || retrying {
			if waiting > 0 {
				d.opts.Logger.LogAttrs(ctx, slog.LevelInfo, "outbox messages wait for their destination to come back; they are sent after the next start",
					slog.Int("messages", waiting))
			}
			if retrying {
				d.opts.Logger.LogAttrs(ctx, slog.LevelInfo, "outbox messages wait to be tried again; they are sent after the next start",
					slog.Int("messages", pending))
			}
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
// Messages of different destinations go out in parallel, and within one
// those of different work items; a work item's messages go out in order, and
// one whose delivery fails holds back the later messages of its work item
// until it is delivered.
func (d *Deliverer) DeliverDue(ctx context.Context) (int, error) {
	return d.deliverDue(ctx, ctx, true)
}

// deliverDue is DeliverDue; no message is started once stop ends, and calls
// to sinks run under call. Without probe, destinations that are down (or
// held when Run stopped) are left alone.
func (d *Deliverer) deliverDue(stop, call context.Context, probe bool) (int, error) {
	byDest, err := d.due(stop, probe)
	if err != nil {
		return 0, err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		n    int
	)
	for name, msgs := range byDest {
		wg.Go(func() {
			tried, err := d.deliverTo(stop, call, name, msgs)
			mu.Lock()
			defer mu.Unlock()
			n += tried
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	return n, errors.Join(errs...)
}

// due returns the messages due now by destination, leaving out the
// destinations with a round under way and those down, but for a try
// whose time has come when probe is set.
func (d *Deliverer) due(ctx context.Context, probe bool) (map[string][]OutboxMessage, error) {
	now := d.opts.Now()
	due, err := d.opts.Store.Due(ctx, now, dueLimit, func(name string) bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.busy[name] {
			return true
		}
		ds := d.dests[name]
		return ds != nil && (ds.held && !probe || ds.down && (!probe || now.Before(ds.retryAt)))
	})
	if err != nil {
		return nil, fmt.Errorf("list due outbox messages: %w", err)
	}
	byDest := map[string][]OutboxMessage{}
	for _, m := range due {
		name := m.Thread.Destination()
		byDest[name] = append(byDest[name], m)
	}
	return byDest, nil
}

// attempt is one delivery of a round.
type attempt struct {
	outcome DeliveryOutcome
	// failure says the platform failed (unreachable, a server error): it
	// counts towards taking the destination down.
	failure bool
	// hold is how long the platform asked every message of the
	// destination to wait (an account's rate limit): it takes the
	// destination down at once, until then.
	hold time.Duration
	err  error
}

// deliverTo delivers one round of a destination's due messages, in Seq
// order per work item, and records how they went.
func (d *Deliverer) deliverTo(stop, call context.Context, name string, msgs []OutboxMessage) (int, error) {
	source := msgs[0].Thread.Source
	sink, configured := d.opts.Sinks[source]
	if !configured {
		now := d.opts.Now()
		outcomes := make([]DeliveryOutcome, len(msgs))
		for i, m := range msgs {
			outcomes[i] = DeliveryOutcome{Key: m.Key, Error: fmt.Sprintf("no sink for %q threads is configured", source), Dead: true, At: now, Next: now}
		}
		return len(msgs), d.record(call, source, outcomes)
	}
	d.mu.Lock()
	ds := d.dests[name]
	if ds == nil {
		ds = &destination{name: name}
		d.dests[name] = ds
		d.opts.Metrics.SinkUp.WithLabelValues(name).Set(1)
	}
	trying := ds.down
	d.mu.Unlock()
	if trying {
		return d.try(stop, source, sink, ds, msgs[0])
	}

	var creating []string
	for _, m := range msgs {
		if m.RemoteID == "" && !m.Attempted && m.Kind != OutboxReaction {
			creating = append(creating, m.Key)
		}
	}
	// Recorded before the platform sees anything, in one transaction for
	// the round: from here on a crash leaves a trace the next delivery
	// looks for. A message the round does not get to (shutdown, its
	// destination going down) is looked for once before it is created.
	if err := d.opts.Store.MarkAttempts(call, creating); err != nil {
		return 0, fmt.Errorf("record delivery attempts to %s: %w", name, err)
	}

	// Each thread's messages are one queue, delivered one after another in
	// the order they were first enqueued, so a thread reads in order
	// however many work items it has, and so does a work item; threads run
	// in parallel. A failure holds back the rest of its work item, not its
	// thread.
	var queues [][]OutboxMessage
	index := map[string]int{}
	join := queueOf(msgs)
	for _, m := range msgs {
		id := join(m)
		i, ok := index[id]
		if !ok {
			i = len(queues)
			index[id] = i
			queues = append(queues, nil)
		}
		queues[i] = append(queues[i], m)
	}
	var (
		mu       sync.Mutex
		attempts []attempt
		wentDown bool
		hold     time.Duration
		work     = make(chan []OutboxMessage)
		wg       sync.WaitGroup
	)
	for range min(d.opts.Parallel, len(queues)) {
		wg.Go(func() {
			for q := range work {
				failed := map[string]bool{} // work items with a message that failed
				for _, m := range q {
					mu.Lock()
					halt := wentDown
					mu.Unlock()
					if halt || stop.Err() != nil {
						break
					}
					item := m.WorkItemID
					if item == "" {
						item = "\x00" + m.Key
					}
					if failed[item] {
						continue // the rest of its work item waits for it
					}
					a := d.deliver(call, sink, m)
					mu.Lock()
					switch {
					case a.hold > 0:
						hold = max(hold, a.hold)
						if !wentDown {
							wentDown = true
							ds.lastErr = a.err.Error()
						}
					case a.err == nil || !a.failure:
						ds.failures = 0
					default:
						if ds.failures++; ds.failures >= d.opts.DownAfter && !wentDown {
							wentDown = true
							ds.lastErr = a.err.Error()
						}
					}
					attempts = append(attempts, a)
					mu.Unlock()
					if a.err != nil {
						failed[item] = true
					}
				}
			}
		})
	}
	for _, q := range queues {
		work <- q
	}
	close(work)
	wg.Wait()

	outcomes := make([]DeliveryOutcome, 0, len(attempts))
	for _, a := range attempts {
		if (a.failure || a.hold > 0) && wentDown {
			continue // the platform's fault, not the message's: no attempt counted
		}
		if a.outcome.Key == "" {
			continue // cut short by shutdown: the message stays as it is
		}
		outcomes = append(outcomes, a.outcome)
	}
	err := d.record(call, source, outcomes)
	if wentDown {
		d.goDown(call, ds, source, hold)
	}
	return len(attempts), err
}

// queueOf returns which queue of a round each of msgs goes in: messages
// of one thread share one, and so do those of one work item (a work item
// reports in one thread, but nothing makes it), so a queue is what one
// thread or one work item holds, joined.
func queueOf(msgs []OutboxMessage) func(OutboxMessage) string {
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		p, ok := parent[x]
		if !ok || p == x {
			return x
		}
		r := find(p)
		parent[x] = r
		return r
	}
	thread := func(m OutboxMessage) string { return "t\x00" + m.Thread.Key() }
	for _, m := range msgs {
		if m.WorkItemID == "" {
			continue
		}
		a, b := find(thread(m)), find("w\x00"+m.WorkItemID)
		if a != b {
			parent[b] = a
		}
	}
	return func(m OutboxMessage) string { return find(thread(m)) }
}

// try delivers one message of a destination that is down, when its time has
// come, under stop: shutdown does not wait for it. Any answer from the
// platform other than a failure brings the destination back.
func (d *Deliverer) try(stop context.Context, source string, sink Sink, ds *destination, m OutboxMessage) (int, error) {
	if m.RemoteID == "" && !m.Attempted && m.Kind != OutboxReaction {
		if err := d.opts.Store.MarkAttempts(stop, []string{m.Key}); err != nil {
			return 0, fmt.Errorf("record delivery attempt of %s: %w", m.Key, err)
		}
	}
	a := d.deliver(stop, sink, m)
	now := d.opts.Now()
	if stop.Err() != nil {
		return 1, nil
	}
	if a.failure || a.hold > 0 {
		d.mu.Lock()
		ds.tries++
		ds.lastErr = a.err.Error()
		ds.retryAt = now.Add(d.downBackoff(ds.tries + 1))
		if a.hold > 0 {
			ds.retryAt = now.Add(a.hold)
		}
		d.mu.Unlock()
		d.opts.Logger.LogAttrs(stop, slog.LevelDebug, "destination still down",
			slog.String("destination", ds.name), slog.Int("tries", ds.tries), slog.String("error", a.err.Error()))
		return 1, nil
	}
	err := d.record(context.WithoutCancel(stop), source, []DeliveryOutcome{a.outcome})
	d.mu.Lock()
	downFor, tries := now.Sub(ds.since).Round(time.Second), ds.tries+1-ds.carried
	ds.backAt, ds.backTries = now, ds.tries+1
	ds.down, ds.failures, ds.tries, ds.lastErr = false, 0, 0, ""
	d.mu.Unlock()
	d.opts.Metrics.SinkUp.WithLabelValues(ds.name).Set(1)
	waiting, werr := d.opts.Store.OutboxWaiting(stop, ds.name)
	if werr != nil {
		waiting = -1
	}
	d.opts.Logger.LogAttrs(stop, slog.LevelInfo, ds.name+" is back: delivering what waited",
		slog.String("destination", ds.name), slog.Duration("down_for", downFor),
		slog.Int("tries", tries), slog.Int("waiting", waiting))
	d.Wake()
	return 1, err
}

// goDown takes a destination down after DownAfter failures in a row, or
// for hold when its platform asked every message of it to wait that long.
func (d *Deliverer) goDown(ctx context.Context, ds *destination, source string, hold time.Duration) {
	now := d.opts.Now()
	d.mu.Lock()
	ds.down, ds.since, ds.tries = true, now, 0
	if !ds.backAt.IsZero() && now.Sub(ds.backAt) < d.opts.MaxDownBackoff {
		ds.tries = ds.backTries // down again soon after it came back
	}
	ds.carried = ds.tries
	ds.retryAt = now.Add(max(d.downBackoff(ds.tries+1), hold))
	lastErr := ds.lastErr
	d.mu.Unlock()
	d.opts.Metrics.SinkUp.WithLabelValues(ds.name).Set(0)
	waiting, err := d.opts.Store.OutboxWaiting(ctx, ds.name)
	if err != nil {
		waiting = -1
	}
	why := slog.Int("failures", d.opts.DownAfter)
	if hold > 0 {
		why = slog.Duration("retry_after", hold)
	}
	d.opts.Logger.LogAttrs(ctx, slog.LevelWarn, ds.name+" is down: its messages wait and one is tried now and then",
		slog.String("destination", ds.name), slog.String("sink", source), why,
		slog.Int("waiting", waiting), slog.Duration("max_wait", max(d.opts.MaxDownBackoff, hold)), slog.String("error", lastErr))
}

// deliver sends one message and says how it went.
func (d *Deliverer) deliver(ctx context.Context, sink Sink, m OutboxMessage) attempt {
	source := m.Thread.Source
	if m.RemoteID == "" && m.Attempted {
		if err := d.adopt(ctx, source, sink, &m); err != nil {
			return d.failed(ctx, m, err)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	remote, err := sink.Deliver(dctx, m)
	cancel()
	if err != nil {
		return d.failed(ctx, m, err)
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
	return attempt{outcome: DeliveryOutcome{Key: m.Key, Delivered: true, Version: m.Version, RemoteID: remote, At: now, Next: next}}
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

// failed says how a failed delivery is recorded: retried with backoff, or
// given up. A failure with no word from the platform (unreachable, a server
// error) counts towards taking its destination down.
func (d *Deliverer) failed(ctx context.Context, m OutboxMessage, err error) attempt {
	if ctx.Err() != nil {
		// Shutting down: the message stays pending and is sent after restart.
		return attempt{err: err}
	}
	now := d.opts.Now()
	dead, failure, hold := false, true, time.Duration(0)
	next := now.Add(d.backoff(m.Attempts + 1))
	if de, ok := AsDeliveryError(err); ok && (de.Permanent || de.RetryAfter > 0) {
		dead, failure = de.Permanent, false
		if de.RetryAfter > 0 {
			next = now.Add(de.RetryAfter)
		}
		if de.RetryAfter > 0 && de.Destination && !de.Permanent {
			hold = de.RetryAfter
		}
	}
	if m.Attempts+1 >= d.opts.MaxAttempts {
		dead = true
	}
	return attempt{
		outcome: DeliveryOutcome{Key: m.Key, Error: err.Error(), Dead: dead, At: now, Next: next},
		failure: failure, hold: hold, err: err,
	}
}

// record stores a round's outcomes of messages of source, counting and
// logging what failed: a message given up at WARN, a failure that is
// retried at DEBUG (its destination going down is logged instead).
func (d *Deliverer) record(ctx context.Context, source string, outcomes []DeliveryOutcome) error {
	if len(outcomes) == 0 {
		return nil
	}
	for _, o := range outcomes {
		if o.Delivered {
			continue
		}
		d.opts.Metrics.OutboxFailures.WithLabelValues(source, strconv.FormatBool(o.Dead)).Inc()
		if o.Dead {
			d.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "outbox message given up",
				slog.String("key", o.Key), slog.String("sink", source), slog.String("error", o.Error))
		} else {
			d.opts.Logger.LogAttrs(ctx, slog.LevelDebug, "outbox delivery failed; trying again later",
				slog.String("key", o.Key), slog.String("sink", source), slog.Time("next", o.Next), slog.String("error", o.Error))
		}
	}
	if err := d.opts.Store.Record(context.WithoutCancel(ctx), outcomes); err != nil {
		return fmt.Errorf("record %s: %w", Count(len(outcomes), "delivery", "deliveries"), err)
	}
	return nil
}

// backoff returns 1s, 2s, 4s ... capped at MaxBackoff.
func (d *Deliverer) backoff(attempt int) time.Duration {
	return doubling(time.Second, attempt, d.opts.MaxBackoff)
}

// downBackoff is how long a destination that is down waits before its
// try number n: DownBackoff, doubling, capped at MaxDownBackoff.
func (d *Deliverer) downBackoff(n int) time.Duration {
	return doubling(d.opts.DownBackoff, n, d.opts.MaxDownBackoff)
}

// doubling is base doubled n-1 times, capped.
func doubling(base time.Duration, n int, capped time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < capped; i++ {
		d *= 2
	}
	return min(d, capped)
}
