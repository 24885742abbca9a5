package bench

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/integrations/github"
	"github.com/switchyard/switchyard/storage/bolt"
)

const (
	webhookClients    = 64
	webhookDeliveries = 10000
)

// prOpened is a real 28 KB pull_request.opened delivery.
func prOpened(b *testing.B) []byte {
	b.Helper()
	body, err := os.ReadFile(filepath.Join("..", "testdata", "github", "pull_request", "opened.payload.json"))
	if err != nil {
		b.Fatalf("the GitHub fixtures live in testdata/github: %v", err)
	}
	return body
}

func sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// BenchmarkWebhookIntake measures GitHub webhook intake — signature check,
// normalisation, routing and the bbolt commit, answered 202 — for
// pull_request.opened with 64 concurrent deliveries, against raw bbolt Batch
// writes of the same records (the 28 KB payload included) with the store's
// batch settings, in the same run.
func BenchmarkWebhookIntake(b *testing.B) {
	for range b.N {
		body := prOpened(b)
		settings := storeBatchSettings(b)
		rawBefore := measureRawWebhook(b, settings, body)
		rate, lat := measureWebhookHTTP(b, body)
		rawAfter := measureRawWebhook(b, settings, body)
		raw := (rawBefore + rawAfter) / 2
		ratio := rate / raw
		b.ReportMetric(rate, "deliveries/s")
		b.ReportMetric(ratio, "ratio-to-raw-bbolt")
		report(b, fmt.Sprintf("GitHub webhook intake: pull_request.opened (%d KB) vs raw bbolt Batch", len(body)/1024),
			fmt.Sprintf("webhook intake, %d concurrent deliveries, %d in all: %.0f deliveries/s, p50 %s, p99 %s",
				webhookClients, webhookDeliveries, rate, lat.quantile(0.5).Round(time.Microsecond), lat.quantile(0.99).Round(time.Microsecond)),
			fmt.Sprintf("baseline raw bbolt Batch of the same records (MaxBatchSize %d, MaxBatchDelay %s): %.0f records/s (before %.0f, after %.0f)",
				settings.size, settings.delay, raw, rawBefore, rawAfter),
			fmt.Sprintf("ratio %.2f", ratio),
		)
	}
}

// webhookRouter routes opened pull requests to the reviewer, as a team's
// rule would, so every delivery makes a work item.
func webhookRouter(b *testing.B) *bot.Router {
	r, err := bot.NewRouter(bot.RoutingConfig{Rules: []bot.Rule{{
		Name: "review-prs", Priority: 10, Agent: "reviewer", Match: bot.Match{Kinds: []string{"github.pull_request.opened"}},
	}}}, builtinAgents)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

func measureWebhookHTTP(b *testing.B, body []byte) (float64, latencies) {
	store, err := bolt.Open(context.Background(), filepath.Join(b.TempDir(), "switchyard.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	router := webhookRouter(b)
	gate := github.NewGate(github.GateOptions{})
	intake := bot.NewIntake(bot.IntakeOptions{Store: store, Router: router, Gates: map[string]bot.Gate{bot.SourceGitHub: gate}})
	const secret = "bench-secret"
	h := github.NewWebhookHandler(github.WebhookOptions{
		Secret: secret, Intake: intake, Gate: gate, Installations: store,
		NeedsPaths: router.NeedsPaths,
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: webhookClients}}
	signature := sign(secret, body)

	lat := make(latencies, webhookDeliveries)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range webhookClients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= webhookDeliveries {
					return
				}
				req, _ := http.NewRequest("POST", srv.URL+"/webhooks/github", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-GitHub-Event", "pull_request")
				req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("bench-%d", i))
				req.Header.Set("X-Hub-Signature-256", signature)
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	return float64(webhookDeliveries) / time.Since(start).Seconds(), lat
}

func measureRawWebhook(b *testing.B, s batchSettings, body []byte) float64 {
	now := time.Now().UTC()
	records := make([][]bolt.Record, webhookDeliveries)
	for i := range records {
		ev := bot.Event{
			Source: bot.SourceGitHub, Kind: "github.pull_request.opened", DeliveryID: fmt.Sprintf("bench-%d", i),
			Actor: "Codertocat", Org: "Codertocat", Repo: "Codertocat/Hello-World", Number: 2,
			Thread: bot.GitHubThread("Codertocat", "Hello-World", 2), SourceRef: "issue:2", ReceivedAt: now, Raw: body,
		}
		seq := uint64(i + 1)
		recs, err := bolt.IngestRecords(bot.IngestRequest{
			Event: ev, Route: &bot.Route{Agent: "reviewer", Kind: bot.RouteRule, Reason: `rule "review-prs" (priority 10)`, Rule: "review-prs"},
			Now: now, DedupUntil: now.Add(bot.DefaultDedupWindow),
		}, bolt.Seqs{Event: seq, WorkItem: seq, Dispatch: seq})
		if err != nil {
			b.Fatal(err)
		}
		records[i] = recs
	}
	return measureRawBatch(b, s, records)
}
