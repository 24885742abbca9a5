package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt"
	"github.com/switchyard/switchyard/storage/postgres"
	"github.com/switchyard/switchyard/storage/postgres/pgtest"
)

// outboxWaiting and outboxDue are the outbox the deliverer's look for due
// messages is measured on: status edits waiting out their edit interval in
// many threads at once, and a few messages due now.
const (
	outboxWaiting = 1000
	outboxDue     = 10
)

// dueStore is what the benchmark asks of a store: to be filled, and its
// due messages.
type dueStore interface {
	EnqueueAll(ctx context.Context, msgs []bot.OutboxMessage) error
	Due(ctx context.Context, now time.Time, limit int, skip func(destination string) bool) ([]bot.OutboxMessage, error)
}

// BenchmarkOutboxDue measures the deliverer's look for due messages
// (Store.Due, which runs on every wake: every enqueue wakes the deliverer)
// on an outbox holding 1,000 status edits not due yet, of as many work
// items in Slack and GitHub threads, and 10 messages due now, against the
// same look on an outbox holding only the 10 due messages, on bbolt and on
// PostgreSQL. The target, on bbolt: the waiting messages cost at most 5×
// the look at the due ones alone. PostgreSQL's figure is recorded.
func BenchmarkOutboxDue(b *testing.B) {
	now := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	pg, err := pgtest.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pg.Stop)
	openBolt := func() dueStore {
		s, err := bolt.Open(context.Background(), filepath.Join(b.TempDir(), "switchyard.db"), bolt.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
	openPostgres := func() dueStore {
		dsn, err := pg.NewDatabase(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		s, err := postgres.Open(context.Background(), dsn, postgres.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
	for range b.N {
		w, base := measureDue(b, now, openBolt)
		ratio := float64(w) / float64(base)
		b.ReportMetric(float64(w.Nanoseconds()), "due-ns/look")
		b.ReportMetric(ratio, "ratio")
		lines := []string{
			fmt.Sprintf("bbolt: a look finding %d due among %d waiting: %s", outboxDue, outboxWaiting, w),
			fmt.Sprintf("  baseline, the same look on an outbox of the %d due alone: %s", outboxDue, base),
			fmt.Sprintf("  ratio %.1f× (target ≤ 5×): %s", ratio, verdict(ratio <= 5)),
		}
		if pg.Available() {
			w, base := measureDue(b, now, openPostgres)
			b.ReportMetric(float64(w)/float64(base), "ratio-postgres")
			lines = append(lines,
				fmt.Sprintf("PostgreSQL: a look finding %d due among %d waiting: %s", outboxDue, outboxWaiting, w),
				fmt.Sprintf("  baseline, the same look on an outbox of the %d due alone: %s", outboxDue, base),
				fmt.Sprintf("  ratio %.1f× (recorded, not targeted)", float64(w)/float64(base)))
		} else {
			lines = append(lines, "PostgreSQL: skipped, no server: install PostgreSQL (Debian: apt-get install postgresql) or set "+pgtest.EnvDSN)
		}
		report(b, fmt.Sprintf("outbox: due messages among %d waiting ones", outboxWaiting),
			append(lines, "each figure the median of 7 rounds of 100 looks, the two outboxes in turn")...)
	}
}

// measureDue fills two stores open makes, one with the waiting and the due
// messages, one with the due ones alone, checks that both find the same
// due messages, and returns the median time of a look on each.
func measureDue(b *testing.B, now time.Time, open func() dueStore) (withWaiting, alone time.Duration) {
	b.Helper()
	ctx := context.Background()
	full, only := open(), open()
	fillOutbox(b, full, now, true)
	fillOutbox(b, only, now, false)
	look := func(s dueStore) []string {
		msgs, err := s.Due(ctx, now, 256, nil)
		if err != nil {
			b.Fatal(err)
		}
		keys := make([]string, len(msgs))
		for i, m := range msgs {
			keys[i] = m.Key
		}
		return keys
	}
	if got, want := look(full), look(only); !slices.Equal(got, want) || len(want) != outboxDue {
		b.Fatalf("setup: due among the waiting %v, alone %v", got, want)
	}
	const rounds, runs = 7, 100
	var base, with latencies
	for range rounds {
		t0 := time.Now()
		for range runs {
			look(only)
		}
		base = append(base, time.Since(t0)/runs)
		t0 = time.Now()
		for range runs {
			look(full)
		}
		with = append(with, time.Since(t0)/runs)
	}
	return with.quantile(0.5), base.quantile(0.5)
}

// fillOutbox enqueues outboxDue messages due at now and, with waiting,
// outboxWaiting status edits not due before a second later, of one work
// item each, the due ones spread among them, in Slack and GitHub threads.
// The due messages are the same either way.
func fillOutbox(b *testing.B, s dueStore, now time.Time, waiting bool) {
	b.Helper()
	total := outboxWaiting + outboxDue
	every := total / outboxDue
	var msgs []bot.OutboxMessage
	for i := range total {
		due := i%every == every/2
		if !due && !waiting {
			continue
		}
		th := bot.SlackThread("T1", fmt.Sprintf("C%d", i%7), fmt.Sprintf("1700000000.%06d", i))
		if i%2 == 1 {
			th = bot.GitHubThread("acme", "api", i)
		}
		wi := fmt.Sprintf("wi_%d", i+1)
		m := bot.OutboxMessage{
			Key: wi + "/status", Thread: th, WorkItemID: wi, Kind: bot.OutboxStatus,
			Text: "🔄 @coder is running: reading bot/deliver.go (2m 10s)",
			Status: &bot.StatusView{WorkItemID: wi, Agent: "coder", State: "running", Activity: "reading bot/deliver.go",
				Rights: "read-write: requested by @alice, write access", Skills: []string{"go", "git"},
				Started: now.Add(-2 * time.Minute), Updated: now},
			CreatedAt: now.Add(-2 * time.Minute), UpdatedAt: now,
		}
		if !due {
			// An edit waiting out the edit interval after the last one.
			m.NextAttemptAt = now.Add(time.Second)
		}
		msgs = append(msgs, m)
	}
	for chunk := range slices.Chunk(msgs, 100) {
		if err := s.EnqueueAll(context.Background(), chunk); err != nil {
			b.Fatal(err)
		}
	}
}
