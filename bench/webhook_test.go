package bench

import (
	"bufio"
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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
// the event, dedup key, work item, dispatch and 👀 — answered 202, with 64
// clients, the process's runtime tuned as serve tunes it (TestMain). Its
// baseline is raw bbolt Batch writes of exactly the records that path writes (the 👀
// outbox entry and the counters included), in the same run. When node and
// npm are there (make bench installs the peer), the Node peer of bench/peer
// runs on the same fixture and clients, fsyncing each delivery and
// grouping fsyncs. A shared machine drifts, so each round runs raw, the
// daemon and the peers back to back; ratios are taken within a round and
// the median round is the result.
func BenchmarkWebhookIntake(b *testing.B) {
	for range b.N {
		body := prOpened(b)
		settings := rawBatch
		records := webhookRecords(b, body)
		deliveries := webhookRequests(body)
		peers, skipped := startPeers(b)

		raws := []float64{measureRawBatch(b, settings, records)}
		var rounds []webhookRound
		for range webhookRounds {
			var r webhookRound
			r.rate, r.lat = measureDaemonWebhook(b, deliveries)
			for _, p := range peers {
				rate, lat := postDeliveries(b, p.addr, "/", deliveries)
				r.peers = append(r.peers, peerRun{rate: rate, lat: lat})
			}
			raws = append(raws, measureRawBatch(b, settings, records))
			r.raw = (raws[len(raws)-2] + raws[len(raws)-1]) / 2
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
		lines = append(lines,
			fmt.Sprintf("daemon, %d clients, %d deliveries a round: median %.0f deliveries/s, p99 %s",
				webhookClients, len(deliveries), rate, ms(p99)),
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
	peers     []peerRun
}

type peerRun struct {
	rate float64
	lat  latencies
}

func ms(d time.Duration) string { return d.Round(10 * time.Microsecond).String() }

// delivery is one signed webhook request.
type delivery struct {
	id   string
	head string // the request line and headers up to the body
	body []byte
}

// webhookRequests signs the fixture once and gives each delivery its own id.
func webhookRequests(body []byte) []delivery {
	signature := sign(webhookSecret, body)
	out := make([]delivery, webhookDeliveries)
	for i := range out {
		id := fmt.Sprintf("bench-%d", i)
		out[i] = delivery{id: id, body: body, head: fmt.Sprintf("X-GitHub-Event: pull_request\r\nX-GitHub-Delivery: %s\r\nX-Hub-Signature-256: %s\r\n", id, signature)}
	}
	return out
}

// webhookRecords returns the records the daemon writes for each delivery,
// which the raw runs write.
func webhookRecords(b *testing.B, body []byte) [][]bolt.Record {
	now := time.Now().UTC()
	records := make([][]bolt.Record, webhookDeliveries)
	for i := range records {
		ev := bot.Event{
			Source: bot.SourceGitHub, Kind: "github.pull_request.opened", DeliveryID: fmt.Sprintf("bench-%d", i),
			Actor: "Codertocat", Requester: bot.Requester{Source: bot.SourceGitHub, ID: "Codertocat"},
			Org: "Codertocat", Repo: "Codertocat/Hello-World", Number: 2, InstallationID: 0, Labels: []string{"bug"},
			Text: "This is a pretty simple change that we need to pull into master.", Mentions: []string{},
			Thread: bot.GitHubThread("Codertocat", "Hello-World", 2), SourceRef: "issue:2", ReceivedAt: now, Raw: body,
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
// logging as in production, to nowhere.
func webhookDaemon(b *testing.B) *daemon.Daemon {
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
	return d
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
// posts every delivery from webhookClients keep-alive connections.
func measureDaemonWebhook(b *testing.B, deliveries []delivery) (float64, latencies) {
	d := webhookDaemon(b)
	defer d.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: d.Handler()}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	return postDeliveries(b, ln.Addr().String(), "/webhooks/github", deliveries)
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
				status, err := c.postWith(path, deliveries[i].head, deliveries[i].body)
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
		addr, err := startPeer(b, node, dir, mode.sync)
		if err != nil {
			return out, fmt.Sprintf("Node peer, %s: could not start: %v", mode.what, err)
		}
		out = append(out, peer{mode: mode.sync, what: mode.what, addr: addr})
	}
	return out, ""
}

// startPeer starts the Node peer, stopped when the benchmark ends, and
// returns its address.
func startPeer(b *testing.B, node, dir, sync string) (string, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "server.mjs"),
		"--secret", webhookSecret, "--file", filepath.Join(b.TempDir(), "deliveries.log"), "--sync", sync)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return "", err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return "", err
	}
	b.Cleanup(func() { cancel(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	port, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		return "", errors.Join(fmt.Errorf("the peer did not say where it listens: %q", line), err)
	}
	return "127.0.0.1:" + port, nil
}
