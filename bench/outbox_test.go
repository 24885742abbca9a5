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
)

// outboxWaiting and outboxDue are the outbox the deliverer's look for due
// messages is measured on: status edits waiting out their edit interval in
// many threads at once, and a few messages due now.
const (
	outboxWaiting = 1000
	outboxDue     = 10
)

// BenchmarkOutboxDue measures the deliverer's look for due messages
// (Store.Due, which runs on every wake: every enqueue wakes the deliverer)
// on an outbox holding 1,000 status edits not due yet, of as many work
// items in Slack and GitHub threads, and 10 messages due now, against the
// same look on an outbox holding only the 10 due messages. The target: the
// waiting messages cost at most 5× the look at the due ones alone.
func BenchmarkOutboxDue(b *testing.B) {
	ctx := context.Background()
	now := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	full := openOutbox(b, now, true)
	alone := openOutbox(b, now, false)
	look := func(s *bolt.Store) []string {
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
	if got, want := look(full), look(alone); !slices.Equal(got, want) || len(want) != outboxDue {
		b.Fatalf("setup: due among the waiting %v, alone %v", got, want)
	}
	const rounds, runs = 7, 200
	for range b.N {
		var base, with latencies
		for range rounds {
			t0 := time.Now()
			for range runs {
				look(alone)
			}
			base = append(base, time.Since(t0)/runs)
			t0 = time.Now()
			for range runs {
				look(full)
			}
			with = append(with, time.Since(t0)/runs)
		}
		b0, w := base.quantile(0.5), with.quantile(0.5)
		ratio := float64(w) / float64(b0)
		b.ReportMetric(float64(w.Nanoseconds()), "due-ns/look")
		b.ReportMetric(ratio, "ratio")
		report(b, fmt.Sprintf("outbox: due messages among %d waiting ones (bbolt)", outboxWaiting),
			fmt.Sprintf("a look finding %d due among %d waiting: %s (median of %d rounds)", outboxDue, outboxWaiting, w, rounds),
			fmt.Sprintf("baseline, the same look on an outbox of the %d due alone: %s", outboxDue, b0),
			fmt.Sprintf("ratio %.1f× (target ≤ 5×): %s", ratio, verdict(ratio <= 5)),
		)
	}
}

// openOutbox opens a store holding outboxDue messages due at now and, with
// waiting, outboxWaiting status edits not due before a second later, of one
// work item each, the due ones spread among them, in Slack and GitHub
// threads. The due messages are the same either way.
func openOutbox(b *testing.B, now time.Time, waiting bool) *bolt.Store {
	b.Helper()
	ctx := context.Background()
	s, err := bolt.Open(ctx, filepath.Join(b.TempDir(), "switchyard.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	total := outboxWaiting + outboxDue
	every := total / outboxDue
	var msgs []bot.OutboxMessage
	for i := range total {
		th := bot.SlackThread("T1", fmt.Sprintf("C%d", i%7), fmt.Sprintf("1700000000.%06d", i))
		if i%2 == 1 {
			th = bot.GitHubThread("acme", "api", i)
		}
		due := i%every == every/2
		if !due && !waiting {
			continue
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
		if err := s.EnqueueAll(ctx, chunk); err != nil {
			b.Fatal(err)
		}
	}
	return s
}
