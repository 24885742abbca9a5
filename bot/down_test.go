package bot_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// downSink is a platform that can be unreachable, per account.
type downSink struct {
	mu        sync.Mutex
	down      map[string]bool // owner → unreachable
	tries     map[string]int  // key → deliveries tried
	delivered map[string]int  // key → deliveries that went through
}

func newDownSink() *downSink {
	return &downSink{down: map[string]bool{}, tries: map[string]int{}, delivered: map[string]int{}}
}

func (s *downSink) Deliver(_ context.Context, m bot.OutboxMessage) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries[m.Key]++
	if s.down[m.Thread.Owner] {
		return "", errors.New("dial tcp: connection refused")
	}
	s.delivered[m.Key]++
	return "r-" + m.Key, nil
}

func (s *downSink) setDown(owner string, down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down[owner] = down
}

func (s *downSink) totals() (tries int, delivered map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.tries {
		tries += n
	}
	out := map[string]int{}
	for k, n := range s.delivered {
		out[k] = n
	}
	return tries, out
}

// logLines counts what a test's deliverer logs, by level.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) at(level string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if strings.Contains(line, "level="+level+" ") {
			out = append(out, line)
		}
	}
	return out
}

// An account whose platform is down: after three failures in a row its
// messages wait, attempts uncounted, while one is tried at 1 s, 2 s, 4 s …;
// another account's messages go on; one warning when it goes down, one line
// when it is back, and then every message is delivered once.
func TestADestinationThatIsDownWaitsWithOneSharedBackoff(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	sink := newDownSink()
	sink.setDown("acme", true)
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	logs := &logLines{}
	metrics := bot.NewMetrics(prometheus.NewRegistry())
	d := bot.NewDeliverer(bot.DelivererOptions{
		Store: store, Sinks: map[string]bot.Sink{bot.SourceGitHub: sink}, Metrics: metrics,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Now:    func() time.Time { return now },
	})
	const waiting = 40
	for i := range waiting {
		for _, owner := range []string{"acme", "beta"} {
			th := bot.GitHubThread(owner, "api", i+1)
			_, err := store.Enqueue(ctx, bot.OutboxMessage{
				Key: fmt.Sprintf("%s/wi_%d/reaction/eyes", owner, i), Thread: th, WorkItemID: fmt.Sprintf("%s-wi_%d", owner, i),
				Kind: bot.OutboxReaction, Reaction: bot.ReactionSeen, Target: "issue:1",
			})
			require.NoError(t, err)
		}
	}

	_, err := d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"github/acme": "dial tcp: connection refused"}, d.Down())
	require.Equal(t, 0.0, testutil.ToFloat64(metrics.SinkUp.WithLabelValues("github/acme")))
	require.Equal(t, 1.0, testutil.ToFloat64(metrics.SinkUp.WithLabelValues("github/beta")))
	tries, delivered := sink.totals()
	require.Len(t, delivered, waiting, "beta's messages went out")
	acmeTries := tries - waiting
	require.LessOrEqual(t, acmeTries, 8+3, "a round stops trying once three failed in a row")
	n, err := store.OutboxWaiting(ctx, "github/acme")
	require.NoError(t, err)
	require.Equal(t, waiting, n)
	for i := range waiting {
		m, err := store.GetOutbox(ctx, fmt.Sprintf("acme/wi_%d/reaction/eyes", i))
		require.NoError(t, err)
		require.Zero(t, m.Attempts, "the platform's failures are not the message's")
	}

	// While it is down: nothing until its time, then one message a try.
	for _, step := range []time.Duration{500 * time.Millisecond, 600 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second} {
		before, _ := sink.totals()
		now = now.Add(step)
		_, err := d.DeliverDue(ctx)
		require.NoError(t, err)
		after, _ := sink.totals()
		require.LessOrEqual(t, after-before, 1, "at most one try a round while down")
	}
	tries, _ = sink.totals()
	require.Less(t, tries-waiting-acmeTries, 5, "1 s, 2 s, 4 s: three tries in 8 s")
	require.Len(t, logs.at("WARN"), 1, "one warning")
	require.Contains(t, logs.at("WARN")[0], "github/acme is down")
	require.Contains(t, logs.at("WARN")[0], fmt.Sprintf("waiting=%d", waiting))

	// Flushing at shutdown does not wait for it.
	flushed := make(chan error, 1)
	go func() { flushed <- d.Flush(ctx) }()
	select {
	case err := <-flushed:
		require.NoError(t, err)
	case <-time.After(2 * time.Second):
		t.Fatal("flush waited for a destination that is down")
	}

	// Back: the next try goes through and the rest follows, once each.
	sink.setDown("acme", false)
	infoBefore := len(logs.at("INFO"))
	now = now.Add(30 * time.Second)
	for range 5 {
		_, err := d.DeliverDue(ctx)
		require.NoError(t, err)
	}
	_, delivered = sink.totals()
	require.Len(t, delivered, 2*waiting)
	for k, n := range delivered {
		require.Equal(t, 1, n, k)
	}
	require.Empty(t, d.Down())
	require.Equal(t, 1.0, testutil.ToFloat64(metrics.SinkUp.WithLabelValues("github/acme")))
	back := logs.at("INFO")[infoBefore:]
	require.Len(t, back, 1, "one line when it is back")
	require.Contains(t, back[0], "github/acme is back")
	require.Len(t, logs.at("WARN"), 1)
	pending, dead, err := store.OutboxPending(ctx)
	require.NoError(t, err)
	require.Zero(t, pending)
	require.Zero(t, dead)
}

// A message that fails while its destination is up is retried on its own
// backoff, its attempts counted, and never takes the destination down.
func TestAMessageThatFailsAloneKeepsItsOwnBackoff(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	now := time.Now()
	p := &orderSink{fail: map[string]int{"wi_1/status": 100}}
	d := bot.NewDeliverer(bot.DelivererOptions{Store: store, Sinks: map[string]bot.Sink{bot.SourceSlack: p}, Now: func() time.Time { return now }})
	for i := range 5 {
		enqueue(t, store, fmt.Sprintf("wi_%d/status", i+1), fmt.Sprintf("wi_%d", i+1), bot.OutboxStatus, "working")
	}
	for range 6 {
		_, err := d.DeliverDue(ctx)
		require.NoError(t, err)
		for i := 2; i <= 5; i++ {
			enqueue(t, store, fmt.Sprintf("wi_%d/status", i), fmt.Sprintf("wi_%d", i), bot.OutboxStatus, fmt.Sprintf("at %s", now))
		}
		now = now.Add(time.Minute)
	}
	require.Empty(t, d.Down(), "the others went through")
	m, err := store.GetOutbox(ctx, "wi_1/status")
	require.NoError(t, err)
	require.Equal(t, 6, m.Attempts)
	require.False(t, m.Dead)
}

// hangSink is a platform that takes requests and never answers: each
// delivery waits until its context ends.
type hangSink struct {
	started chan string
	mu      sync.Mutex
	calls   int
}

func (s *hangSink) Deliver(ctx context.Context, m bot.OutboxMessage) (string, error) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	s.started <- m.Key
	<-ctx.Done()
	return "", ctx.Err()
}

// quickSink answers at once and says what it delivered.
type quickSink struct{ delivered chan string }

func (s *quickSink) Deliver(_ context.Context, m bot.OutboxMessage) (string, error) {
	s.delivered <- m.Key
	return "r-" + m.Key, nil
}

// Slack takes a post and never answers (its delivery would wait for the
// whole timeout): GitHub's messages go out meanwhile, the reverse holds
// too, and a stop does not wait for the platform that hangs. Its message
// is handed over to the next start, its attempt on record and uncounted,
// and the flush at shutdown leaves it alone.
func TestAPlatformThatHangsHoldsNoOtherNorTheShutdown(t *testing.T) {
	for _, hung := range []string{bot.SourceSlack, bot.SourceGitHub} {
		t.Run(hung+" hangs", func(t *testing.T) {
			store := openStore(t, t.TempDir())
			hang := &hangSink{started: make(chan string, 8)}
			quick := &quickSink{delivered: make(chan string, 8)}
			threads := map[string]bot.Thread{bot.SourceSlack: slackThread, bot.SourceGitHub: bot.GitHubThread("octo", "hello", 7)}
			other := bot.SourceGitHub
			if hung == bot.SourceGitHub {
				other = bot.SourceSlack
			}
			logs := &logLines{}
			d := bot.NewDeliverer(bot.DelivererOptions{
				Store: store, Sinks: map[string]bot.Sink{hung: hang, other: quick}, Timeout: time.Hour,
				Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
			})
			put := func(source, key string) {
				t.Helper()
				_, err := store.Enqueue(context.Background(), bot.OutboxMessage{Key: key, Thread: threads[source], WorkItemID: key, Kind: bot.OutboxReply, Text: "done"})
				require.NoError(t, err)
				d.Wake()
			}
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			stopped := make(chan error, 1)
			go func() { stopped <- d.Run(ctx) }()

			put(hung, "hung/wi_1/reply")
			require.Equal(t, "hung/wi_1/reply", <-hang.started)
			for i := range 3 {
				key := fmt.Sprintf("other/wi_%d/reply", i)
				put(other, key)
				select {
				case got := <-quick.delivered:
					require.Equal(t, key, got)
				case <-time.After(20 * time.Second):
					t.Fatalf("%s's message waited for %s, which hangs", other, hung)
				}
			}

			stop()
			select {
			case err := <-stopped:
				require.NoError(t, err)
			case <-time.After(20 * time.Second):
				t.Fatalf("the deliverer's stop waited for %s, which hangs", hung)
			}
			flushCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			require.NoError(t, d.Flush(flushCtx), "the flush leaves the platform that hung alone")
			hang.mu.Lock()
			require.Equal(t, 1, hang.calls, "tried once")
			hang.mu.Unlock()
			m, err := store.GetOutbox(context.Background(), "hung/wi_1/reply")
			require.NoError(t, err)
			require.True(t, m.Pending())
			require.True(t, m.Attempted, "handed over: the next start looks for it before posting")
			require.Zero(t, m.Attempts)
			require.Len(t, logs.at("INFO"), 2, "one line for the hang at the stop, one for what waits")
		})
	}
}

// retryLaterSink asks to be tried again later for the keys in wait, as
// Slack does for a channel it rate-limits, and delivers the rest.
type retryLaterSink struct {
	wait      map[string]time.Duration
	mu        sync.Mutex
	delivered []string
}

func (s *retryLaterSink) Deliver(_ context.Context, m bot.OutboxMessage) (string, error) {
	if w, ok := s.wait[m.Key]; ok {
		return "", &bot.DeliveryError{Err: errors.New("slack chat.postMessage: ratelimited"), RetryAfter: w}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delivered = append(s.delivered, m.Key)
	return "r-" + m.Key, nil
}

// The flush at shutdown sends what it can and does not wait out a retry:
// a message the platform asked to try again in a minute is left to the
// next start.
func TestTheFlushDoesNotWaitForARetry(t *testing.T) {
	store := openStore(t, t.TempDir())
	p := &retryLaterSink{wait: map[string]time.Duration{"wi_1/reply": time.Minute}}
	logs := &logLines{}
	d := bot.NewDeliverer(bot.DelivererOptions{Store: store, Sinks: map[string]bot.Sink{bot.SourceSlack: p},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	enqueue(t, store, "wi_1/reply", "wi_1", bot.OutboxReply, "rate limited")
	enqueue(t, store, "wi_3/status", "wi_3", bot.OutboxStatus, "working")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, d.Flush(ctx), "what waits for a retry is left to the next start")
	require.Equal(t, []string{"wi_3/status"}, p.delivered)
	m, err := store.GetOutbox(context.Background(), "wi_1/reply")
	require.NoError(t, err)
	require.True(t, m.Pending())
	require.False(t, m.Dead)
	require.Empty(t, d.Down(), "a channel's rate limit is not its platform down")
	require.Len(t, logs.at("INFO"), 1)
	require.Contains(t, logs.at("INFO")[0], "messages=1")
}

// slowSink is a platform that answers some work items' messages slowly,
// can be unreachable, and keeps what each thread shows in order.
type slowSink struct {
	slow  map[string]time.Duration // work item → how long its messages take
	mu    sync.Mutex
	down  bool
	shown map[string][]string // thread → keys, in the order they were posted
}

func (s *slowSink) Deliver(ctx context.Context, m bot.OutboxMessage) (string, error) {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down {
		return "", errors.New("dial tcp: connection refused")
	}
	select {
	case <-time.After(s.slow[m.WorkItemID]):
	case <-ctx.Done():
		return "", ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shown[m.Thread.Key()] = append(s.shown[m.Thread.Key()], m.Key)
	return "r-" + m.Key, nil
}

// Two requests in one issue wait while GitHub is down; when it is back,
// the issue shows their messages in the order they were written, though
// one request's messages take GitHub longer to post than the other's.
func TestAThreadReadsInOrderWhenItsPlatformComesBack(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	sink := &slowSink{slow: map[string]time.Duration{"wi_1": 30 * time.Millisecond}, down: true, shown: map[string][]string{}}
	now := time.Now()
	d := bot.NewDeliverer(bot.DelivererOptions{Store: store, Sinks: map[string]bot.Sink{bot.SourceGitHub: sink}, Now: func() time.Time { return now }})
	issue := bot.GitHubThread("octo", "hello", 7)
	var want []string
	for _, m := range []struct{ key, item string }{
		{"wi_1/status", "wi_1"}, {"wi_2/status", "wi_2"}, {"wi_1/reply", "wi_1"}, {"wi_2/reply", "wi_2"},
		{"wi_3/status", "wi_3"}, {"wi_1/reaction/rocket", "wi_1"}, {"wi_3/reply", "wi_3"}, {"wi_2/reaction/rocket", "wi_2"},
	} {
		kind := bot.OutboxReply
		if strings.HasSuffix(m.key, "/status") {
			kind = bot.OutboxStatus
		}
		_, err := store.Enqueue(ctx, bot.OutboxMessage{Key: m.key, Thread: issue, WorkItemID: m.item, Kind: kind, Text: m.key})
		require.NoError(t, err)
		want = append(want, m.key)
	}
	_, err := d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Contains(t, d.Down(), "github/octo")

	sink.mu.Lock()
	sink.down = false
	sink.mu.Unlock()
	for range 5 {
		now = now.Add(time.Minute)
		_, err := d.DeliverDue(ctx)
		require.NoError(t, err)
	}
	require.Empty(t, d.Down())
	require.Equal(t, want, sink.shown[issue.Key()])
}

// flappingSink fails three deliveries in a row, then takes one, and again.
type flappingSink struct {
	mu sync.Mutex
	n  int
}

func (s *flappingSink) Deliver(_ context.Context, m bot.OutboxMessage) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	if s.n%4 != 0 {
		return "", errors.New("502 Bad Gateway")
	}
	return "r-" + m.Key, nil
}

// A platform that fails now and then, often enough to go down again soon
// after each time it comes back: the wait between tries goes on growing
// instead of starting again at a second each time, so ten minutes of it
// log a few dozen lines, not one pair a second.
func TestAFlappingPlatformIsNotLoggedAtEveryFlap(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	logs := &logLines{}
	d := bot.NewDeliverer(bot.DelivererOptions{
		Store: store, Sinks: map[string]bot.Sink{bot.SourceGitHub: &flappingSink{}}, Parallel: 1, MaxAttempts: 1000,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Now:    func() time.Time { return now },
	})
	for i := range 500 {
		_, err := store.Enqueue(ctx, bot.OutboxMessage{Key: fmt.Sprintf("wi_%d/reply", i), Thread: bot.GitHubThread("acme", "api", i+1),
			WorkItemID: fmt.Sprintf("wi_%d", i), Kind: bot.OutboxReply, Text: "done"})
		require.NoError(t, err)
	}
	for range 600 {
		_, err := d.DeliverDue(ctx)
		require.NoError(t, err)
		now = now.Add(time.Second)
	}
	warns := len(logs.at("WARN"))
	t.Logf("%d warnings and %d lines in 10 minutes of flapping", warns, len(logs.at("WARN"))+len(logs.at("INFO")))
	require.Greater(t, warns, 1, "it went down more than once")
	require.LessOrEqual(t, warns, 40, "at most a warning every 30 s or so, after the first few")
}
