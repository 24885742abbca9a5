package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/daemon"
	"github.com/switchyard/switchyard/storage/bolt"
)

const (
	webhookClients    = 64
	webhookDeliveries = 6000
	// webhookRounds runs of the daemon alternate with raw runs, as in
	// BenchmarkIntakeHTTP.
	webhookRounds = 3
	webhookSecret = "bench-secret"
	// Targets: the daemon's GitHub intake against raw bbolt Batch of the
	// same records, and against the Node peer that fsyncs each delivery.
	targetRaw  = 0.5
	targetPeer = 2.0
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

// BenchmarkWebhookIntake measures GitHub webhook intake of a 28 KB
// pull_request.opened that a rule routes to an agent, through the daemon's
// own HTTP handler with every hook it installs — signature, the reader,
// the gate, routing, metrics, the log, and the one group-committed write of
// the event, its dedup keys (delivery id and signature), work item, dispatch
// and 👀 — answered 202, with 64
// clients, the process's runtime tuned as serve tunes it (TestMain). Its
// baseline is raw bbolt Batch writes of exactly the records that path writes (the 👀
// outbox entry and the counters included), in the same run. When node and
// npm are there (make bench installs the peer), the Node peer of bench/peer
// runs on the same fixture and clients, fsyncing each delivery and
// grouping fsyncs. A shared machine drifts, so each round runs raw, the
// daemon and the peers back to back; ratios are taken within a round and
// the median round is the result. Each round also runs the floor, a
// handler that only reads and verifies, and the report gives the CPU a
// delivery costs each side and how many deliveries each commit took, so a
// figure can be read against what bounds it.
func BenchmarkWebhookIntake(b *testing.B) {
	for range b.N {
		body := prOpened(b)
		settings := rawBatch
		deliveries := webhookRequests(b, body)
		records := webhookRecords(b, body, deliveries)
		peers, skipped := startPeers(b)

		setupCommits := daemonSetupCommits(b)
		raws := []rawRun{rawBatchRun(b, settings, records)}
		var rounds []webhookRound
		for range webhookRounds {
			var r webhookRound
			r.daemon = measureDaemonWebhook(b, deliveries)
			r.daemon.commits -= setupCommits
			r.rate, r.lat = r.daemon.rate, r.daemon.lat
			r.floor = measureFloor(b, deliveries)
			for _, p := range peers {
				r.peers = append(r.peers, measurePeer(b, p, deliveries))
			}
			raws = append(raws, rawBatchRun(b, settings, records))
			r.raw = (raws[len(raws)-2].rate + raws[len(raws)-1].rate) / 2
			r.rawRun = raws[len(raws)-1]
			rounds = append(rounds, r)
		}
		lines := make([]string, 0, len(rounds)+10)
		for i, r := range rounds {
			line := fmt.Sprintf("round %d: daemon %.0f deliveries/s (p50 %s, p99 %s), raw %.0f records/s (ratio %.2f)",
				i+1, r.rate, ms(r.lat.quantile(0.50)), ms(r.lat.quantile(0.99)), r.raw, r.rate/r.raw)
			for j, p := range r.peers {
				line += fmt.Sprintf(", peer %s %.0f/s (p99 %s)", peers[j].mode, p.rate, ms(p.lat.quantile(0.99)))
			}
			lines = append(lines, line)
		}
		median := func(f func(webhookRound) float64) float64 {
			v := make([]float64, len(rounds))
			for i, r := range rounds {
				v[i] = f(r)
			}
			slices.Sort(v)
			return v[len(v)/2]
		}
		rate, raw := median(func(r webhookRound) float64 { return r.rate }), median(func(r webhookRound) float64 { return r.raw })
		ratio := median(func(r webhookRound) float64 { return r.rate / r.raw })
		p99 := time.Duration(median(func(r webhookRound) float64 { return float64(r.lat.quantile(0.99)) }))
		b.ReportMetric(rate, "deliveries/s")
		b.ReportMetric(ratio, "ratio-to-raw-bbolt")
		n := float64(len(deliveries))
		perDelivery := func(f func(webhookRound) time.Duration) string {
			return ms(time.Duration(median(func(r webhookRound) float64 { return float64(f(r)) }) / n))
		}
		cpuLine := fmt.Sprintf("CPU a delivery, median of rounds: daemon %s (this process: the handler, the store and the load generator), raw Batch %s",
			perDelivery(func(r webhookRound) time.Duration { return r.daemon.cpu }), perDelivery(func(r webhookRound) time.Duration { return r.rawRun.cpu }))
		for j, p := range peers {
			if !p.measured {
				continue
			}
			cpuLine += fmt.Sprintf(", Node peer %s %s (node) + %s (the load generator)", p.mode,
				perDelivery(func(r webhookRound) time.Duration { return r.peers[j].cpu }),
				perDelivery(func(r webhookRound) time.Duration { return r.peers[j].clientCPU }))
		}
		lines = append(lines,
			fmt.Sprintf("daemon, %d clients, %d deliveries a round: median %.0f deliveries/s, p99 %s",
				webhookClients, len(deliveries), rate, ms(p99)),
			cpuLine,
			fmt.Sprintf("floor, a handler that only reads the body, checks its signature and answers 202, same clients: median %.0f deliveries/s, CPU a delivery %s (HTTP, TCP, HMAC and the load generator)",
				median(func(r webhookRound) float64 { return r.floor.rate }), perDelivery(func(r webhookRound) time.Duration { return r.floor.cpu })),
			fmt.Sprintf("commits, median of rounds: the daemon's group commit %.1f deliveries each, raw Batch %.1f records each",
				median(func(r webhookRound) float64 { return n / float64(max(r.daemon.commits, 1)) }),
				median(func(r webhookRound) float64 { return n / float64(max(r.rawRun.commits, 1)) })),
			fmt.Sprintf("baseline raw bbolt Batch of the same records, %d goroutines (MaxBatchSize %d, MaxBatchDelay %s): median %.0f records/s",
				webhookClients, settings.size, settings.delay, raw),
			fmt.Sprintf("ratio to raw bbolt, median of rounds: %.2f (target >= %.1f): %s", ratio, targetRaw, verdict(ratio >= targetRaw)),
		)
		if skipped != "" {
			lines = append(lines, skipped)
		}
		for j, p := range peers {
			peerRatio := median(func(r webhookRound) float64 { return r.rate / r.peers[j].rate })
			peerRate := median(func(r webhookRound) float64 { return r.peers[j].rate })
			peerP99 := time.Duration(median(func(r webhookRound) float64 { return float64(r.peers[j].lat.quantile(0.99)) }))
			lines = append(lines, fmt.Sprintf("Node peer (@octokit/webhooks), %s: median %.0f deliveries/s, p99 %s",
				p.what, peerRate, ms(peerP99)))
			if p.mode == "each" {
				lines = append(lines,
					fmt.Sprintf("  daemon/peer, median of rounds: %.2f (target >= %.1f): %s", peerRatio, targetPeer, verdict(peerRatio >= targetPeer)),
					fmt.Sprintf("  p99, daemon %s against the peer's %s (target: no worse): %s", ms(p99), ms(peerP99), verdict(p99 <= peerP99)))
				b.ReportMetric(peerRatio, "ratio-to-node-peer")
			} else {
				lines = append(lines, fmt.Sprintf("  daemon/peer, median of rounds: %.2f (the stretch: >= 1): %s; p99 daemon %s, peer %s",
					peerRatio, verdict(peerRatio >= 1), ms(p99), ms(peerP99)))
			}
		}
		report(b, fmt.Sprintf("GitHub webhook intake: pull_request.opened (%d KB) routed to a work item with 👀", len(body)/1024), lines...)
	}
}

type webhookRound struct {
	rate, raw float64
	lat       latencies
	daemon    daemonRun
	floor     daemonRun
	rawRun    rawRun
	peers     []peerRun
}

// daemonRun is what one run of the daemon measured: its rate and
// latencies, the process's CPU time over the run (the load generator's
// included) and the transactions the store committed.
type daemonRun struct {
	rate    float64
	lat     latencies
	cpu     time.Duration
	commits int
}

// peerRun is what one run of a Node peer measured: its rate and
// latencies, the peer's CPU time and this process's (the load generator's).
type peerRun struct {
	rate           float64
	lat            latencies
	cpu, clientCPU time.Duration
}

func ms(d time.Duration) string { return d.Round(10 * time.Microsecond).String() }

// delivery is one signed webhook request: the fixture, shared, with its
// pull request's id made the delivery's own (patch, at patchAt), since
// GitHub never signs the same body twice and the daemon acts on a body it
// has seen signed only once.
type delivery struct {
	id        string
	head      string // the request line and headers up to the body
	body      []byte
	patchAt   int
	patch     []byte
	signature string // hex, as the daemon keeps it
}

// prID is the pull request's id in the fixture, which each delivery
// replaces with another of the same width.
const prID = `"id": 279147437,`

// webhookRequests gives each delivery its own id and pull request id, and
// signs each.
func webhookRequests(b *testing.B, body []byte) []delivery {
	at := bytes.Index(body, []byte(prID))
	if at < 0 {
		b.Fatalf("the fixture has no %s", prID)
	}
	at += len(`"id": `)
	own := bytes.Clone(body)
	out := make([]delivery, webhookDeliveries)
	for i := range out {
		id := fmt.Sprintf("bench-%d", i)
		patch := fmt.Appendf(nil, "%09d", 279147437+i)
		copy(own[at:], patch)
		signature := sign(webhookSecret, own)
		out[i] = delivery{id: id, body: body, patchAt: at, patch: patch, signature: strings.TrimPrefix(signature, "sha256="),
			head: fmt.Sprintf("X-GitHub-Event: pull_request\r\nX-GitHub-Delivery: %s\r\nX-Hub-Signature-256: %s\r\n", id, signature)}
	}
	return out
}

// webhookRecords returns the records the daemon writes for each delivery,
// which the raw runs write.
func webhookRecords(b *testing.B, body []byte, deliveries []delivery) [][]bolt.Record {
	now := time.Now().UTC()
	records := make([][]bolt.Record, webhookDeliveries)
	for i := range records {
		ev := bot.Event{
			Source: bot.SourceGitHub, Kind: "github.pull_request.opened", DeliveryID: fmt.Sprintf("bench-%d", i),
			Actor: "Codertocat", Requester: bot.Requester{Source: bot.SourceGitHub, ID: "Codertocat"},
			Org: "Codertocat", Repo: "Codertocat/Hello-World", Number: 2, InstallationID: 0, Labels: []string{"bug"},
			Text: "This is a pretty simple change that we need to pull into master.", Mentions: []string{},
			Thread: bot.GitHubThread("Codertocat", "Hello-World", 2), SourceRef: "issue:2", ReceivedAt: now, Raw: body,
			Signature: deliveries[i].signature,
		}
		seq := uint64(i + 1)
		recs, err := bolt.IngestRecords(bot.IngestRequest{
			Event: ev, Route: &bot.Route{Agent: "reviewer", Kind: bot.RouteRule, Reason: `rule "review-prs" (priority 10)`, Rule: "review-prs"},
			Now: now, DedupUntil: now.Add(bot.DefaultDedupWindow), Reaction: bot.ReactionSeen,
		}, bolt.Seqs{Event: seq, WorkItem: seq, Dispatch: seq, Outbox: seq})
		if err != nil {
			b.Fatal(err)
		}
		records[i] = recs
	}
	return records
}

// webhookDaemon builds the daemon as `switchyard serve` does, from a config
// file with GitHub connected (its API is never asked: a rule, not a
// mention, routes) and a rule sending opened pull requests to the reviewer,
// logging as in production, to nowhere. It returns the daemon and the path
// of its store.
func webhookDaemon(b *testing.B) (*daemon.Daemon, string) {
	b.Helper()
	dir := b.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(filepath.Join(dir, "app.pem"), pemKey, 0o600); err != nil {
		b.Fatal(err)
	}
	cfg := fmt.Sprintf(`server: {listen: "127.0.0.1:0"}
data_dir: %s
sandbox: {mode: none}
github:
  app_id: 1
  app_slug: switchyard
  private_key_file: %s
  webhook_secret: %s
  api_url: http://127.0.0.1:1/
routing:
  rules:
    - name: review-prs
      priority: 10
      agent: reviewer
      match:
        kinds: [github.pull_request.opened]
`, filepath.Join(dir, "data"), filepath.Join(dir, "app.pem"), webhookSecret)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	setup, err := daemon.Load(context.Background(), daemon.LoadOptions{Path: path, Getenv: noModel, Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	d, err := daemon.New(context.Background(), daemon.Options{Setup: setup, Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	return d, filepath.Join(dir, "data", "switchyard.db")
}

// daemonSetupCommits is how many transactions a daemon commits building
// itself, which a run's count leaves out.
func daemonSetupCommits(b *testing.B) int {
	d, path := webhookDaemon(b)
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
	return storeTxID(b, path)
}

// storeTxID is the id of the last transaction committed to the store at
// path, which no daemon holds.
func storeTxID(b *testing.B, path string) int {
	b.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	return lastTxID(b, db)
}

// noModel is an environment without model credentials or a local Ollama:
// the benchmark runs no agent.
func noModel(name string) string {
	if name == "OLLAMA_HOST" {
		return "127.0.0.1:1"
	}
	return ""
}

// measureDaemonWebhook serves the daemon's handler on a fresh store and
// posts every delivery from webhookClients keep-alive connections. Its
// commits are all the store's, setup included.
func measureDaemonWebhook(b *testing.B, deliveries []delivery) daemonRun {
	d, path := webhookDaemon(b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: d.Handler()}
	go func() { _ = srv.Serve(ln) }()
	cpu0 := processCPU()
	rate, lat := postDeliveries(b, ln.Addr().String(), "/webhooks/github", deliveries)
	run := daemonRun{rate: rate, lat: lat, cpu: processCPU() - cpu0}
	_ = srv.Close()
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
	run.commits = storeTxID(b, path)
	return run
}

// measureFloor serves, to the same clients, a handler that does only what
// no receiver can skip: read the body, check its signature in constant
// time and answer 202. Its CPU a delivery is what the daemon cannot go
// below without the store.
func measureFloor(b *testing.B, deliveries []delivery) daemonRun {
	secret := []byte(webhookSecret)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		body.Grow(int(r.ContentLength) + bytes.MinRead)
		if _, err := body.ReadFrom(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got, err := hex.DecodeString(strings.TrimPrefix(r.Header.Get("X-Hub-Signature-256"), "sha256="))
		mac := hmac.New(sha256.New, secret)
		mac.Write(body.Bytes())
		if err != nil || !hmac.Equal(got, mac.Sum(nil)) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"status":"accepted"}`+"\n")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	cpu0 := processCPU()
	rate, lat := postDeliveries(b, ln.Addr().String(), "/", deliveries)
	return daemonRun{rate: rate, lat: lat, cpu: processCPU() - cpu0}
}

// measurePeer posts every delivery to a Node peer, measuring its CPU time
// and the load generator's.
func measurePeer(b *testing.B, p peer, deliveries []delivery) peerRun {
	cpu0, peer0 := processCPU(), p.cpu()
	rate, lat := postDeliveries(b, p.addr, "/", deliveries)
	return peerRun{rate: rate, lat: lat, cpu: p.cpu() - peer0, clientCPU: processCPU() - cpu0}
}

// postDeliveries posts every delivery to addr from webhookClients
// keep-alive connections, each answered 202, and returns the rate and
// each delivery's latency.
func postDeliveries(b *testing.B, addr, path string, deliveries []delivery) (float64, latencies) {
	lat := make(latencies, len(deliveries))
	var next atomic.Int64
	var wg sync.WaitGroup
	runtime.GC()
	start := time.Now()
	for range webhookClients {
		wg.Go(func() {
			c, err := dialClient(addr)
			if err != nil {
				b.Error(err)
				return
			}
			defer c.Close()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(deliveries) {
					return
				}
				t0 := time.Now()
				d := &deliveries[i]
				status, err := c.postWith(path, d.head, d.body, d.patchAt, d.patch)
				if err != nil {
					b.Error(err)
					return
				}
				if status != http.StatusAccepted {
					b.Errorf("delivery %s: status %d", deliveries[i].id, status)
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	return float64(len(deliveries)) / time.Since(start).Seconds(), lat
}

// peer is a running Node peer.
type peer struct {
	mode, what string
	addr       string
	pid        int
	// measured is whether the peer's CPU time can be read (Linux).
	measured bool
}

// cpu is the CPU time the peer's process has used, user and system, from
// /proc in clock ticks of 10 ms; 0 where that cannot be read.
func (p peer) cpu() time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: utime and stime are the 12th and 13th.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// startPeers starts the Node peer in both modes, for the whole benchmark.
// Without node and the peer's packages it says how to get them instead.
func startPeers(b *testing.B) ([]peer, string) {
	dir, err := filepath.Abs("peer")
	if err != nil {
		b.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "@octokit", "webhooks"))
	}
	if err != nil {
		return nil, "Node peer: skipped (it needs node and npm: `make bench` installs it with `npm ci` in bench/peer when both are on PATH)"
	}
	var out []peer
	for _, mode := range []struct{ sync, what string }{{"each", "fsync per delivery"}, {"group", "fsyncs grouped"}} {
		addr, pid, err := startPeer(b, node, dir, mode.sync)
		if err != nil {
			return out, fmt.Sprintf("Node peer, %s: could not start: %v", mode.what, err)
		}
		p := peer{mode: mode.sync, what: mode.what, addr: addr, pid: pid}
		p.measured = p.cpu() > 0
		out = append(out, p)
	}
	return out, ""
}

// startPeer starts the Node peer, stopped when the benchmark ends, and
// returns its address and process id.
func startPeer(b *testing.B, node, dir, sync string) (string, int, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "server.mjs"),
		"--secret", webhookSecret, "--file", filepath.Join(b.TempDir(), "deliveries.log"), "--sync", sync)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return "", 0, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return "", 0, err
	}
	b.Cleanup(func() { cancel(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	port, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		return "", 0, errors.Join(fmt.Errorf("the peer did not say where it listens: %q", line), err)
	}
	return "127.0.0.1:" + port, cmd.Process.Pid, nil
}
