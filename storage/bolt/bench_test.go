package bolt

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard/switchyard/bot"
)

// BenchmarkIngest measures intake throughput (ns/op is wall time per event
// across all callers) and the latency each caller sees (ms/ingest), with
// few and many concurrent callers (webhook and Slack handlers waiting for
// their acknowledgement), each doing some work between its events, as a
// handler reads and checks a delivery.
func BenchmarkIngest(b *testing.B) {
	raw := bytes.Repeat([]byte(`{"comment":{"body":"lorem ipsum"}}`), 32<<10/34)
	for _, callers := range []int{4, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			s, err := Open(context.Background(), filepath.Join(b.TempDir(), "switchyard.db"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			ctx := b.Context()
			var seq, waited atomic.Int64
			b.SetBytes(int64(len(raw)))
			// RunParallel starts parallelism × GOMAXPROCS goroutines.
			b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := seq.Add(1)
					// What a handler does before it ingests: read the
					// payload once.
					_ = bytes.Count(raw, []byte{'"'})
					now := time.Now()
					req := bot.IngestRequest{
						Event: bot.Event{
							Source: bot.SourceGitHub, Kind: "github.issue_comment.created",
							DeliveryID: strconv.FormatInt(i, 10), Actor: "alice", Repo: "acme/api",
							Number: int(i%100) + 1, Text: "@coder please look", Thread: bot.GitHubThread("acme", "api", int(i%100)+1),
							SourceRef: "comment:" + strconv.FormatInt(i, 10), ReceivedAt: now, Raw: raw,
						},
						Route: &bot.Route{Agent: "coder", Kind: bot.RouteMention, Reason: "mention @coder"},
						Now:   now, DedupUntil: now.Add(bot.DefaultDedupWindow), Reaction: bot.ReactionSeen,
					}
					if _, err := s.Ingest(ctx, req); err != nil {
						b.Error(err)
						return
					}
					waited.Add(int64(time.Since(now)))
				}
			})
			b.ReportMetric(float64(waited.Load())/float64(b.N)/1e6, "ms/ingest")
		})
	}
}
