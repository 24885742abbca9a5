package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
)

// unreachableGitHub speaks enough of GitHub's REST API for the outbox —
// installation lookup, token exchange, reactions, comments — and can be
// unreachable: while down, every connection is closed unanswered. It counts
// what reached it, by what it is about, to show each message arrived once.
type unreachableGitHub struct {
	down atomic.Bool
	// hang, while set, takes every request and never answers it; hung
	// counts the requests it holds.
	hang atomic.Bool
	hung atomic.Int64

	mu        sync.Mutex
	reactions map[string]int     // comment id → reactions created
	comments  map[string]int     // outbox key (the comment's marker) → comments created
	bodies    map[int64]string   // comment id → body
	byIssue   map[string][]int64 // "repo#n" → comment ids
	nextID    int64
}

var markerRE = regexp.MustCompile(`<!-- switchyard:(\S+) -->`)

func newUnreachableGitHub() *unreachableGitHub {
	return &unreachableGitHub{reactions: map[string]int{}, comments: map[string]int{}, bodies: map[int64]string{}, byIssue: map[string][]int64{}}
}

func (g *unreachableGitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.down.Load() {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	if g.hang.Load() {
		g.hung.Add(1)
		<-r.Context().Done()
		return
	}
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == "GET" && len(parts) == 4 && parts[0] == "repos" && parts[3] == "installation":
		reply(200, map[string]any{"id": 42, "account": map[string]string{"login": parts[1]}})
	case r.Method == "POST" && len(parts) == 4 && parts[0] == "app" && parts[3] == "access_tokens":
		reply(201, map[string]any{"token": "ghs_e2e", "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	case r.Method == "POST" && len(parts) == 7 && parts[3] == "issues" && parts[4] == "comments" && parts[6] == "reactions":
		g.mu.Lock()
		g.reactions[parts[5]]++
		g.nextID++
		id := g.nextID
		g.mu.Unlock()
		reply(201, map[string]any{"id": id, "content": "eyes"})
	case r.Method == "POST" && len(parts) == 6 && parts[3] == "issues" && parts[5] == "comments":
		var c struct{ Body string }
		_ = json.NewDecoder(r.Body).Decode(&c)
		issue := parts[2] + "#" + parts[4]
		g.mu.Lock()
		g.nextID++
		id := g.nextID
		g.bodies[id] = c.Body
		g.byIssue[issue] = append(g.byIssue[issue], id)
		if m := markerRE.FindStringSubmatch(c.Body); m != nil {
			g.comments[m[1]]++
		}
		g.mu.Unlock()
		reply(201, map[string]any{"id": id, "body": c.Body})
	case r.Method == "GET" && len(parts) == 6 && parts[3] == "issues" && parts[5] == "comments":
		issue := parts[2] + "#" + parts[4]
		g.mu.Lock()
		var list []map[string]any
		for _, id := range g.byIssue[issue] {
			list = append(list, map[string]any{"id": id, "body": g.bodies[id], "user": map[string]string{"login": "switchyard[bot]", "type": "Bot"}})
		}
		g.mu.Unlock()
		reply(200, list)
	case r.Method == "PATCH" && len(parts) == 6 && parts[3] == "issues" && parts[4] == "comments":
		id, _ := strconv.ParseInt(parts[5], 10, 64)
		var c struct{ Body string }
		_ = json.NewDecoder(r.Body).Decode(&c)
		g.mu.Lock()
		g.bodies[id] = c.Body
		g.mu.Unlock()
		reply(200, map[string]any{"id": id, "body": c.Body})
	default:
		reply(404, map[string]string{"message": "Not Found"})
	}
}

func (g *unreachableGitHub) counts() (reactions, comments map[string]int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	reactions, comments = map[string]int{}, map[string]int{}
	for k, v := range g.reactions {
		reactions[k] = v
	}
	for k, v := range g.comments {
		comments[k] = v
	}
	return reactions, comments
}

// lockedLog is a daemon's output, read while it runs.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) lines() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Count(l.buf.Bytes(), []byte{'\n'})
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// cpuTime is the CPU time a process has used, from /proc/<pid>/stat.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	// The command name may hold spaces; the fields after it do not.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, err := strconv.ParseInt(fields[11], 10, 64)
	require.NoError(t, err)
	stime, err := strconv.ParseInt(fields[12], 10, 64)
	require.NoError(t, err)
	const ticks = 100 // USER_HZ
	return time.Duration(utime+stime) * time.Second / ticks
}

// startLogged starts `switchyard serve` in dir with its output in log and
// waits until it answers /healthz.
func startLogged(t *testing.T, dir, addr string, log *lockedLog) (*exec.Cmd, chan error) {
	t.Helper()
	cmd := exec.Command(binary, "serve", "--listen", addr)
	cmd.Dir = dir
	cmd.Env = hermeticEnv()
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("daemon log:\n%s", log.String())
		}
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond, "daemon not up:\n%s", log)
	return cmd, done
}

// sinkUp reads switchyard_sink_up for a destination: 1, 0, or -1 when it
// is not exported yet.
func sinkUp(addr, destination string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	prefix := `switchyard_sink_up{sink="` + destination + `"} `
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// appDir serves github as the GitHub API and returns a data directory
// whose config connects a GitHub App to it, with more config after.
func appDir(t *testing.T, github http.Handler, more string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: github}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "app.pem"), pemKey, 0o600))
	cfg := fmt.Sprintf(`github:
  app_id: 1
  app_slug: switchyard
  private_key_file: ./app.pem
  webhook_secret: e2e-secret
  api_url: http://%s/
`, ln.Addr()) + more
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	return dir
}

// TestAnUnreachableGitHubCostsLittle is the acceptance test of a platform
// that is down: with GitHub unreachable and 100,000 messages waiting for
// it, the idle daemon uses under 5 % of a core and logs under 100 lines a
// minute; SIGTERM stops it within 2 s; once GitHub is back, every message
// is delivered, once.
func TestAnUnreachableGitHubCostsLittle(t *testing.T) {
	const (
		issues    = 1000
		reactions = 90_000
		statuses  = 10_000
		window    = 12 * time.Second
	)
	fake := newUnreachableGitHub()
	fake.down.Store(true)
	dir := appDir(t, fake, "")

	// 100,000 messages wait for GitHub, written straight into the store:
	// 👀 on 90,000 comments and 10,000 status comments, on 1,000 issues.
	store := bolttest.Open(t, filepath.Join(dir, "data"))
	var msgs []bot.OutboxMessage
	flush := func() {
		require.NoError(t, store.EnqueueAll(t.Context(), msgs))
		msgs = msgs[:0]
	}
	for i := range reactions + statuses {
		th := bot.GitHubThread("acme", "api", i%issues+1)
		wi := fmt.Sprintf("wi_%d", i+1)
		m := bot.OutboxMessage{Key: bot.ReactionKey(wi, bot.ReactionSeen), Thread: th, WorkItemID: wi,
			Kind: bot.OutboxReaction, Reaction: bot.ReactionSeen, Target: fmt.Sprintf("comment:%d", 1_000_000+i)}
		if i >= reactions {
			m = bot.OutboxMessage{Key: wi + "/status", Thread: th, WorkItemID: wi, Kind: bot.OutboxStatus,
				Text: "⏳ triage is working on " + wi}
		}
		msgs = append(msgs, m)
		if len(msgs) == 5000 {
			flush()
		}
	}
	require.NoError(t, store.Close())

	// Down: the daemon notices, says so once, and then costs little.
	addr := freeAddr(t)
	log := &lockedLog{}
	cmd, done := startLogged(t, dir, addr, log)
	require.Eventually(t, func() bool { return sinkUp(addr, "github/acme") == 0 }, 20*time.Second, 100*time.Millisecond,
		"github/acme never went down")
	lines0, cpu0, at0 := log.lines(), cpuTime(t, cmd.Process.Pid), time.Now()
	time.Sleep(window)
	lines1, cpu1, at1 := log.lines(), cpuTime(t, cmd.Process.Pid), time.Now()
	elapsed := at1.Sub(at0)
	share := float64(cpu1-cpu0) / float64(elapsed)
	perMinute := float64(lines1-lines0) * float64(time.Minute) / float64(elapsed)
	t.Logf("while GitHub was down, with %d messages waiting: %.2f%% of a core (%s of CPU in %s), %.0f log lines a minute",
		reactions+statuses, 100*share, cpu1-cpu0, elapsed.Round(time.Millisecond), perMinute)
	require.Less(t, share, 0.05, "CPU of the idle daemon")
	require.Less(t, perMinute, 100.0, "log lines a minute")
	require.Equal(t, 1, strings.Count(log.String(), "github/acme is down"), "one warning")

	// SIGTERM while it is down: out within 2 s.
	stop := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-done:
		require.NoError(t, err, "exit status 0")
	case <-time.After(5 * time.Second):
		t.Fatal("the daemon did not stop within 5 s of SIGTERM")
	}
	took := time.Since(stop)
	t.Logf("SIGTERM to exit: %s", took.Round(time.Millisecond))
	require.Less(t, took, 2*time.Second)

	// Started again while GitHub is still down, then GitHub comes back:
	// everything is delivered, once.
	addr = freeAddr(t)
	log = &lockedLog{}
	_, _ = startLogged(t, dir, addr, log)
	require.Eventually(t, func() bool { return sinkUp(addr, "github/acme") == 0 }, 20*time.Second, 100*time.Millisecond)
	fake.down.Store(false)
	back := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		r, c := fake.counts()
		if len(r) == reactions && len(c) == statuses {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after %s: %d of %d reactions and %d of %d comments", time.Since(back).Round(time.Second), len(r), reactions, len(c), statuses)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("GitHub back: %d messages delivered in %s", reactions+statuses, time.Since(back).Round(time.Millisecond))
	r, c := fake.counts()
	for k, n := range r {
		require.Equal(t, 1, n, "reactions on comment %s", k)
	}
	for k, n := range c {
		require.Equal(t, 1, n, "comments of %s", k)
	}
	require.Eventually(t, func() bool {
		v, ok := metric(t, addr, "switchyard_outbox_pending")
		return ok && v == 0
	}, 10*time.Second, 100*time.Millisecond)
	require.Equal(t, 1, strings.Count(log.String(), "github/acme is back"))
}

// GitHub takes requests and answers none, so the daemon cannot know yet
// that it is down (a delivery waits up to 30 s): SIGTERM still stops it
// within 2 s, and after a restart with GitHub answering again each
// message is posted once.
func TestAGitHubThatHangsDoesNotHoldTheShutdown(t *testing.T) {
	const statuses = 20
	fake := newUnreachableGitHub()
	fake.hang.Store(true)
	dir := appDir(t, fake, "")
	store := bolttest.Open(t, filepath.Join(dir, "data"))
	var msgs []bot.OutboxMessage
	for i := range statuses {
		wi := fmt.Sprintf("wi_%d", i+1)
		msgs = append(msgs, bot.OutboxMessage{Key: wi + "/status", Thread: bot.GitHubThread("acme", "api", i+1), WorkItemID: wi,
			Kind: bot.OutboxStatus, Text: "⏳ triage is working on " + wi})
	}
	require.NoError(t, store.EnqueueAll(t.Context(), msgs))
	require.NoError(t, store.Close())

	log := &lockedLog{}
	cmd, done := startLogged(t, dir, freeAddr(t), log)
	require.Eventually(t, func() bool { return fake.hung.Load() > 0 }, 20*time.Second, 20*time.Millisecond, "nothing reached GitHub")
	stop := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-done:
		require.NoError(t, err, "exit status 0")
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon did not stop within 20 s of SIGTERM")
	}
	took := time.Since(stop)
	t.Logf("SIGTERM to exit with GitHub hanging: %s", took.Round(time.Millisecond))
	require.Less(t, took, 2*time.Second)

	fake.hang.Store(false)
	_, _ = startLogged(t, dir, freeAddr(t), &lockedLog{})
	require.Eventually(t, func() bool {
		_, c := fake.counts()
		return len(c) == statuses
	}, 60*time.Second, 100*time.Millisecond, "every status posted")
	_, c := fake.counts()
	for k, n := range c {
		require.Equal(t, 1, n, "comments of %s", k)
	}
}

// Slack is unreachable while GitHub answers: GitHub's messages go out,
// Slack goes down once (switchyard_sink_up{sink="slack"} 0) with its
// messages waiting, and SIGTERM stops the daemon within 2 s.
func TestSlackDownHoldsNeitherGitHubNorTheShutdown(t *testing.T) {
	const each = 20
	fake := newUnreachableGitHub()
	slackLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	slackAddr := slackLn.Addr().String()
	require.NoError(t, slackLn.Close()) // nothing listens there: connection refused
	dir := appDir(t, fake, fmt.Sprintf(`slack:
  mode: http
  bot_token: xoxb-e2e
  signing_secret: %s
  api_url: http://%s/api/
`, e2eSigningSecret, slackAddr))
	store := bolttest.Open(t, filepath.Join(dir, "data"))
	var msgs []bot.OutboxMessage
	for i := range each {
		wi := fmt.Sprintf("wi_%d", i+1)
		msgs = append(msgs,
			bot.OutboxMessage{Key: wi + "/reply", Thread: bot.SlackThread("T1", "C1", fmt.Sprintf("1700000000.%06d", i+1)), WorkItemID: wi,
				Kind: bot.OutboxReply, Text: "done " + wi},
			bot.OutboxMessage{Key: "gh_" + wi + "/status", Thread: bot.GitHubThread("acme", "api", i+1), WorkItemID: "gh_" + wi,
				Kind: bot.OutboxStatus, Text: "⏳ triage is working on " + wi})
	}
	require.NoError(t, store.EnqueueAll(t.Context(), msgs))
	require.NoError(t, store.Close())

	addr := freeAddr(t)
	log := &lockedLog{}
	cmd, done := startLogged(t, dir, addr, log)
	require.Eventually(t, func() bool {
		_, c := fake.counts()
		return len(c) == each
	}, 30*time.Second, 100*time.Millisecond, "GitHub's messages go out while Slack is down")
	require.Eventually(t, func() bool { return sinkUp(addr, "slack") == 0 }, 30*time.Second, 100*time.Millisecond, "slack never went down")
	require.Equal(t, 1.0, sinkUp(addr, "github/acme"))
	// One warning for the outbox (and one of its own for the events the
	// adapter cannot take while Slack does not answer auth.test).
	require.Equal(t, 1, strings.Count(log.String(), "slack is down: its messages wait"), "one warning")

	stop := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-done:
		require.NoError(t, err, "exit status 0")
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon did not stop within 20 s of SIGTERM")
	}
	took := time.Since(stop)
	t.Logf("SIGTERM to exit with Slack down: %s", took.Round(time.Millisecond))
	require.Less(t, took, 2*time.Second)
}
