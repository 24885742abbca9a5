package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/integrations/local"
	"github.com/switchyard/switchyard/storage/bolt"
)

const (
	intakeClients  = 64
	intakeRequests = 20000
)

// builtinAgents is the roster the default config routes to.
var builtinAgents = []bot.AgentInfo{
	{Name: "coder"}, {Name: "reviewer"}, {Name: "ops", Keywords: []string{"deploy"}}, {Name: "triage"}, {Name: "docs"},
}

// messageText is a chat message of a realistic size (about 1 KB).
func messageText(i int) string {
	return fmt.Sprintf("@coder please look at request %d: ", i) + string(bytes.Repeat([]byte("the login test is flaky again "), 34))
}

// BenchmarkIntakeHTTP measures the local console's full intake path —
// HTTP request, JSON decode, routing, dedup and the bbolt commit, answered
// 202 — with 64 concurrent clients, against raw bbolt Batch writes of the
// same records laid out as the store lays them out, with the store's own
// batch settings.
func BenchmarkIntakeHTTP(b *testing.B) {
	for range b.N {
		// The baseline runs before and after the HTTP run and its mean is
		// used, so drift of the disk during the run does not favour either.
		settings := storeBatchSettings(b)
		rawBefore := measureRawBatch(b, settings)
		httpRate, lat := measureIntakeHTTP(b)
		rawAfter := measureRawBatch(b, settings)
		rawRate := (rawBefore + rawAfter) / 2
		ratio := httpRate / rawRate
		b.ReportMetric(httpRate, "req/s")
		b.ReportMetric(ratio, "ratio-to-raw-bbolt")
		report(b, "intake: full HTTP path vs raw bbolt Batch",
			fmt.Sprintf("HTTP intake, %d clients, %d requests: %.0f req/s, p50 %s, p99 %s",
				intakeClients, intakeRequests, httpRate, lat.quantile(0.50).Round(time.Microsecond), lat.quantile(0.99).Round(time.Microsecond)),
			fmt.Sprintf("baseline raw bbolt Batch of the same records (MaxBatchSize %d, MaxBatchDelay %s): %.0f records/s (before %.0f, after %.0f)",
				settings.size, settings.delay, rawRate, rawBefore, rawAfter),
			fmt.Sprintf("ratio %.2f (target >= 0.5): %s", ratio, verdict(ratio >= 0.5)),
		)
	}
}

type batchSettings struct {
	size  int
	delay time.Duration
}

// storeBatchSettings reads the batch settings a store opens with.
func storeBatchSettings(b *testing.B) batchSettings {
	store, err := bolt.Open(filepath.Join(b.TempDir(), "settings.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	size, delay := store.BatchSettings()
	return batchSettings{size, delay}
}

func measureIntakeHTTP(b *testing.B) (float64, latencies) {
	b.Helper()
	store, err := bolt.Open(filepath.Join(b.TempDir(), "switchyard.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	router, err := config.Default().Compile(builtinAgents)
	if err != nil {
		b.Fatal(err)
	}
	intake := bot.NewIntake(bot.IntakeOptions{Store: store, Router: router})
	mux := http.NewServeMux()
	local.New(intake, store, nil).Mount(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: intakeClients}}

	bodies := make([][]byte, intakeRequests)
	for i := range bodies {
		bodies[i], _ = json.Marshal(local.MessageRequest{
			Thread: fmt.Sprintf("t%d", i%500), Text: messageText(i), User: "bench", ID: fmt.Sprintf("bench-%d", i),
		})
	}
	lat := make(latencies, intakeRequests)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range intakeClients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= intakeRequests {
					return
				}
				t0 := time.Now()
				resp, err := client.Post(srv.URL+"/api/v1/messages", "application/json", bytes.NewReader(bodies[i]))
				if err != nil {
					b.Error(err)
					return
				}
				// Drain the body so the connection is reused.
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
	elapsed := time.Since(start)
	return float64(intakeRequests) / elapsed.Seconds(), lat
}

// measureRawBatch writes, with raw bbolt Batch calls from as many
// goroutines as the HTTP run had clients, exactly the records the store
// writes for the same messages.
func measureRawBatch(b *testing.B, s batchSettings) float64 {
	b.Helper()
	db, err := bbolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.MaxBatchSize, db.MaxBatchDelay = s.size, s.delay
	if err := db.Update(func(tx *bbolt.Tx) error {
		for _, name := range bolt.Buckets() {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	records := make([][]bolt.Record, intakeRequests)
	for i := range records {
		ev := bot.Event{
			Source: bot.SourceLocal, Kind: bot.KindLocalMessage, DeliveryID: fmt.Sprintf("bench-%d", i), Actor: "bench",
			Text: messageText(i), Thread: bot.LocalThread(fmt.Sprintf("t%d", i%500)), ReceivedAt: now,
		}
		ev.FillFromText()
		seq := uint64(i + 1)
		recs, err := bolt.IngestRecords(bot.IngestRequest{
			Event: ev, Route: &bot.Route{Agent: "coder", Reason: "mention @coder"}, Now: now, DedupUntil: now.Add(bot.DefaultDedupWindow),
		}, bolt.Seqs{Event: seq, WorkItem: seq, Dispatch: seq})
		if err != nil {
			b.Fatal(err)
		}
		records[i] = recs
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range intakeClients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= intakeRequests {
					return
				}
				err := db.Batch(func(tx *bbolt.Tx) error {
					for _, r := range records[i] {
						if err := tx.Bucket(r.Bucket).Put(r.Key, r.Value); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(intakeRequests) / time.Since(start).Seconds()
}
