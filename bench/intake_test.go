package bench

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	// intakeRounds HTTP runs alternate with raw runs (one more raw run
	// than HTTP runs, so each HTTP run has one before and one after it).
	intakeRounds = 3
)

// builtinAgents is the roster the default config routes to.
var builtinAgents = []bot.AgentInfo{
	{Name: "coder"}, {Name: "reviewer"}, {Name: "ops", Keywords: []string{"deploy"}}, {Name: "triage"}, {Name: "docs"},
}

// messageText is a chat message of a realistic size (about 1 KB).
func messageText(i int) string {
	return fmt.Sprintf("@coder please look at request %d: ", i) + strings.Repeat("the login test is flaky again ", 34)
}

// BenchmarkIntakeHTTP measures the local console's full intake path —
// HTTP request over TCP, JSON decode, routing, dedup and the bbolt commit,
// answered 202 — with 64 concurrent clients, against raw bbolt Batch writes
// of the same records laid out as the store lays them out, from as many
// goroutines, with the store's own batch settings.
//
// A shared machine drifts (other processes, the disk's write cache), so
// HTTP runs alternate with raw runs; each HTTP run is compared with the mean
// of the raw runs either side of it, and the median of those ratios is the
// result.
func BenchmarkIntakeHTTP(b *testing.B) {
	for range b.N {
		settings := rawBatch
		bodies, records := intakeMessages(b)
		raws := []float64{measureRawBatch(b, settings, records)}
		var runs []intakeRun
		for range intakeRounds {
			rate, lat := measureIntakeHTTP(b, bodies)
			raws = append(raws, measureRawBatch(b, settings, records))
			raw := (raws[len(raws)-2] + raws[len(raws)-1]) / 2
			runs = append(runs, intakeRun{rate: rate, raw: raw, ratio: rate / raw, lat: lat})
		}
		lines := make([]string, 0, len(runs)+3)
		for i, r := range runs {
			lines = append(lines, fmt.Sprintf("run %d: HTTP %.0f req/s (p50 %s, p99 %s), raw %.0f records/s: ratio %.2f",
				i+1, r.rate, r.lat.quantile(0.50).Round(time.Microsecond), r.lat.quantile(0.99).Round(time.Microsecond), r.raw, r.ratio))
		}
		med := slices.SortedFunc(slices.Values(runs), func(a, b intakeRun) int { return cmp.Compare(a.ratio, b.ratio) })[len(runs)/2]
		b.ReportMetric(med.rate, "req/s")
		b.ReportMetric(med.ratio, "ratio-to-raw-bbolt")
		report(b, "intake: full HTTP path vs raw bbolt Batch", append(lines,
			fmt.Sprintf("HTTP intake, %d clients, %d requests a run: median run %.0f req/s, p50 %s, p99 %s",
				intakeClients, intakeRequests, med.rate, med.lat.quantile(0.50).Round(time.Microsecond), med.lat.quantile(0.99).Round(time.Microsecond)),
			fmt.Sprintf("baseline raw bbolt Batch of the same records, %d goroutines (MaxBatchSize %d, MaxBatchDelay %s): %.0f records/s",
				intakeClients, settings.size, settings.delay, med.raw),
			fmt.Sprintf("median ratio %.2f (target >= 0.5): %s", med.ratio, verdict(med.ratio >= 0.5)),
		)...)
	}
}

type intakeRun struct {
	rate, raw, ratio float64
	lat              latencies
}

type batchSettings struct {
	size  int
	delay time.Duration
}

// rawBatch is how the raw baseline calls bbolt's Batch: at most 32 calls
// a batch, 2 ms after the first, the settings under which Batch served 64
// concurrent clients best (bbolt's own 1000 and 10 ms make every caller of
// a partly full batch wait the whole 10 ms).
var rawBatch = batchSettings{size: 32, delay: 2 * time.Millisecond}

// intakeMessages returns the request bodies the HTTP runs post and the
// records the store writes for them, which the raw runs write.
func intakeMessages(b *testing.B) ([][]byte, [][]bolt.Record) {
	b.Helper()
	now := time.Now().UTC()
	bodies := make([][]byte, intakeRequests)
	records := make([][]bolt.Record, intakeRequests)
	for i := range intakeRequests {
		msg := local.MessageRequest{Thread: fmt.Sprintf("t%d", i%500), Text: messageText(i), User: "bench", ID: fmt.Sprintf("bench-%d", i)}
		var err error
		if bodies[i], err = json.Marshal(msg); err != nil {
			b.Fatal(err)
		}
		ev := bot.Event{
			Source: bot.SourceLocal, Kind: bot.KindLocalMessage, DeliveryID: msg.ID, Actor: msg.User,
			Text: msg.Text, Thread: bot.LocalThread(msg.Thread), ReceivedAt: now,
		}
		ev.FillFromText()
		seq := uint64(i + 1)
		records[i], err = bolt.IngestRecords(bot.IngestRequest{
			Event: ev, Route: &bot.Route{Agent: "coder", Kind: bot.RouteMention, Reason: "mention @coder"}, Now: now, DedupUntil: now.Add(bot.DefaultDedupWindow),
		}, bolt.Seqs{Event: seq, WorkItem: seq, Dispatch: seq})
		if err != nil {
			b.Fatal(err)
		}
	}
	return bodies, records
}

func measureIntakeHTTP(b *testing.B, bodies [][]byte) (float64, latencies) {
	b.Helper()
	store, err := bolt.Open(context.Background(), filepath.Join(b.TempDir(), "switchyard.db"), bolt.Options{})
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
	addr := srv.Listener.Addr().String()

	lat := make(latencies, len(bodies))
	var next atomic.Int64
	var wg sync.WaitGroup
	// The previous run's garbage is collected now, not during this run.
	runtime.GC()
	start := time.Now()
	for range intakeClients {
		wg.Go(func() {
			c, err := dialClient(addr)
			if err != nil {
				b.Error(err)
				return
			}
			defer c.Close()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(bodies) {
					return
				}
				t0 := time.Now()
				status, err := c.post("/api/v1/messages", bodies[i])
				if err != nil {
					b.Error(err)
					return
				}
				if status != http.StatusAccepted {
					b.Errorf("status %d", status)
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	return float64(len(bodies)) / time.Since(start).Seconds(), lat
}

// client is one keep-alive HTTP/1.1 connection, like a webhook sender's.
// It writes requests itself and reads answers with http.ReadResponse rather
// than going through http.Client: the load generator shares the machine's
// two cores with the server, and http.Client's two goroutines per
// connection and per-request header maps cost about as much CPU as the
// server spends outside the store, which the raw baseline, calling Batch
// directly, does not pay. The server side is untouched: net/http over TCP,
// the console's handler, the intake and the store.
type client struct {
	conn net.Conn
	r    *bufio.Reader
	req  []byte
	host string
}

func dialClient(addr string) (*client, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return &client{conn: conn, r: bufio.NewReader(conn), host: addr}, nil
}

func (c *client) post(path string, body []byte) (int, error) {
	return c.postWith(path, "", body, 0, nil)
}

// postWith posts body with further header lines, each ending in CRLF.
// patch, when set, is written over the body from byte patchAt on, as it is
// sent: many requests can share one large body and still differ.
func (c *client) postWith(path, headers string, body []byte, patchAt int, patch []byte) (int, error) {
	c.req = fmt.Appendf(c.req[:0], "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n",
		path, c.host, headers, len(body))
	c.req = append(c.req, body...)
	copy(c.req[len(c.req)-len(body)+patchAt:], patch)
	if _, err := c.conn.Write(c.req); err != nil {
		return 0, fmt.Errorf("post %s: %w", path, err)
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return 0, fmt.Errorf("post %s: %w", path, err)
	}
	// Read the whole answer, so the next one starts where it should.
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, fmt.Errorf("post %s: %w", path, err)
	}
	return resp.StatusCode, nil
}

func (c *client) Close() error { return c.conn.Close() }

// measureRawBatch writes, with raw bbolt Batch calls from as many
// goroutines as the HTTP run has clients, exactly the records the store
// writes for the same messages, into a fresh file laid out like the store's.
func measureRawBatch(b *testing.B, s batchSettings, records [][]bolt.Record) float64 {
	b.Helper()
	return rawBatchRun(b, s, records).rate
}

// rawRun is what one raw run measured: its rate, the process's CPU time
// over the run, and the transactions it committed.
type rawRun struct {
	rate    float64
	cpu     time.Duration
	commits int
}

// rawBatchRun is measureRawBatch with the run's CPU time and commits.
func rawBatchRun(b *testing.B, s batchSettings, records [][]bolt.Record) rawRun {
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
	var next atomic.Int64
	var wg sync.WaitGroup
	first := lastTxID(b, db)
	runtime.GC()
	cpu0 := processCPU()
	start := time.Now()
	for range intakeClients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(records) {
					return
				}
				err := db.Batch(func(tx *bbolt.Tx) error {
					for _, r := range records[i] {
						if err := tx.Bucket([]byte(r.Bucket)).Put(r.Key, r.Value); err != nil {
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
	rate := float64(len(records)) / time.Since(start).Seconds()
	return rawRun{rate: rate, cpu: processCPU() - cpu0, commits: lastTxID(b, db) - first}
}

// lastTxID is the id of the last transaction db committed: each commit
// takes the next.
func lastTxID(b *testing.B, db *bbolt.DB) int {
	b.Helper()
	var id int
	if err := db.View(func(tx *bbolt.Tx) error { id = tx.ID(); return nil }); err != nil {
		b.Fatal(err)
	}
	return id
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
