package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
)

// treeModel speaks the chat completions wire format for a lead and its
// helpers. The lead's first message says what to do: "spawn N" spawns one
// helper a turn until N have answered, "fan N" spawns N helpers in one
// turn, "noop N" calls list_directory N times; then it answers. A helper
// answers its task after helperDelay.
type treeModel struct {
	helperDelay time.Duration
	// helper keeps the latest request a helper made: the bare model call
	// of the baseline is that request, sent again directly.
	helper *lastRequest
}

type lastRequest struct {
	mu   sync.Mutex
	body []byte
}

var (
	agentOf = regexp.MustCompile(`You are the "([^"]+)" agent`)
	orderOf = regexp.MustCompile(`(spawn|fan|noop) (\d+)`)
)

func (m treeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil || len(req.Messages) < 2 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	agent := ""
	if a := agentOf.FindStringSubmatch(fmt.Sprint(req.Messages[0].Content)); a != nil {
		agent = a[1]
	}
	var first string
	results := 0
	for _, msg := range req.Messages {
		switch {
		case msg.Role == "user" && first == "":
			first = fmt.Sprint(msg.Content)
		case msg.Role == "tool":
			results++
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if agent == "helper" {
		if m.helper != nil && r.Header.Get("X-Bench-Replay") == "" {
			m.helper.mu.Lock()
			m.helper.body = body
			m.helper.mu.Unlock()
		}
		if m.helperDelay > 0 {
			select {
			case <-time.After(m.helperDelay):
			case <-r.Context().Done():
				return
			}
		}
		answer(w, "helped")
		return
	}
	order := orderOf.FindStringSubmatch(first)
	if order == nil {
		answer(w, "nothing to do")
		return
	}
	n, _ := strconv.Atoi(order[2])
	var calls []string
	switch {
	case results >= n:
	case order[1] == "spawn":
		calls = append(calls, call(fmt.Sprintf("s%d", results), "spawn_subagent", fmt.Sprintf(`{"task":"part %d","agent":"helper"}`, results)))
	case order[1] == "noop":
		calls = append(calls, call(fmt.Sprintf("n%d", results), "list_directory", `{"path":"."}`))
	case order[1] == "fan":
		for i := range n {
			calls = append(calls, call(fmt.Sprintf("f%d", i), "spawn_subagent", fmt.Sprintf(`{"task":"part %d","agent":"helper"}`, i)))
		}
	}
	if len(calls) == 0 {
		answer(w, "all done")
		return
	}
	fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"fake",
		"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[%s]}}],
		"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, strings.Join(calls, ","))
}

func call(id, name, args string) string {
	quoted, _ := json.Marshal(args)
	return fmt.Sprintf(`{"id":%q,"type":"function","function":{"name":%q,"arguments":%s}}`, id, name, quoted)
}

func answer(w io.Writer, text string) {
	quoted, _ := json.Marshal(text)
	fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"fake",
		"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":%s}}],
		"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, quoted)
}

// treeDaemon is a daemon serving on loopback with its agents on a
// treeModel.
type treeDaemon struct {
	d      *daemon.Daemon
	model  string // the fake model's chat completions URL
	helper *lastRequest
	base   string
	token  string
	stop   func()
}

func startTreeDaemon(b *testing.B, model treeModel, workers, maxConcurrent int) *treeDaemon {
	b.Helper()
	if model.helper == nil {
		model.helper = &lastRequest{}
	}
	srv := httptest.NewServer(model)
	b.Cleanup(srv.Close)
	dir := filepath.Join(b.TempDir(), "agents")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		b.Fatal(err)
	}
	for name, desc := range map[string]string{"lead": "Leads a piece of work.", "helper": "Does one part of it."} {
		src := "---\nname: " + name + "\ndescription: " + desc + "\nmode: tool\nmax_turns: 40\n---\nYou do what you are asked.\n"
		if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(src), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	data := b.TempDir()
	env := func(name string) string {
		if name == "OLLAMA_HOST" {
			return "127.0.0.1:1"
		}
		return ""
	}
	setup, err := daemon.Load(context.Background(), daemon.LoadOptions{Getenv: env, Override: func(c *config.Config) {
		c.DataDir, c.AgentsDir, c.Server.Listen = data, dir, ln.Addr().String()
		c.Models = map[string]config.Model{"default": {Provider: config.ProviderOpenAI, BaseURL: srv.URL + "/v1", Model: "fake"}}
		c.Sandbox.Mode = sandbox.ModeNone
		c.Workers = workers
		c.Subagents.MaxConcurrent = maxConcurrent
	}})
	if err != nil {
		b.Fatal(err)
	}
	d, err := daemon.New(context.Background(), daemon.Options{Setup: setup, ShutdownGrace: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, ln) }()
	token, err := daemon.ReadAPIToken(data)
	if err != nil {
		b.Fatal(err)
	}
	bd := &treeDaemon{d: d, model: srv.URL + "/v1/chat/completions", helper: model.helper, base: "http://" + ln.Addr().String(), token: token.Reveal()}
	var once sync.Once
	bd.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				b.Error(err)
			}
		})
	}
	b.Cleanup(bd.stop)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if resp, err := http.Get(bd.base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("the daemon did not get ready")
		}
	}
	return bd
}

// run sends text to a thread of its own and waits until its work item has
// finished; it returns the work item and how long it took by the daemon's
// own record, from its intake to its end. The record's times rather than
// the wait's own: a waiter that looks often enough to time the run itself
// takes CPU from the daemon it times on a machine of two cores, and one
// that looks seldom rounds the time up.
func (bd *treeDaemon) run(b *testing.B, thread, text string) (string, time.Duration) {
	b.Helper()
	body, _ := json.Marshal(map[string]string{"thread": thread, "text": text})
	req, err := http.NewRequest(http.MethodPost, bd.base+"/api/v1/messages", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bd.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	var res struct {
		WorkItemID string `json:"work_item_id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusAccepted {
		b.Fatalf("send: %d %v", resp.StatusCode, err)
	}
	ctx := context.Background()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(2 * time.Millisecond) {
		wi, err := bd.d.Store().GetWorkItem(ctx, res.WorkItemID)
		if err != nil {
			b.Fatal(err)
		}
		if wi.Status.Finished() {
			if wi.Status != bot.StatusDone || wi.FinishedAt == nil {
				b.Fatalf("%s ended %s at %v", wi.ID, wi.Status, wi.FinishedAt)
			}
			return wi.ID, wi.FinishedAt.Sub(wi.CreatedAt)
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s did not finish", wi.ID)
		}
	}
}

// children returns the records of what the work item's run spawned.
func (bd *treeDaemon) children(b *testing.B, workItem string) []bot.ChildRun {
	b.Helper()
	rs, _, err := bd.d.Store().ListRuns(context.Background(), bot.RunFilter{ParentWorkItemID: workItem, Limit: 100})
	if err != nil {
		b.Fatal(err)
	}
	return rs
}

func median(l latencies) time.Duration { return l.quantile(0.5) }

// modelCall is one helper's model call made directly, as the baseline of
// what the model itself costs a child: the latest request a helper sent,
// its system prompt and tools included, sent again as it was.
func (bd *treeDaemon) modelCall(b *testing.B) time.Duration {
	b.Helper()
	bd.helper.mu.Lock()
	body := bd.helper.body
	bd.helper.mu.Unlock()
	if body == nil {
		b.Fatal("no helper has called the model yet")
	}
	req, err := http.NewRequest(http.MethodPost, bd.model, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Bench-Replay", "1")
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return time.Since(t0)
}

// BenchmarkSubagentSpawnOverhead measures what spawning costs per child
// beyond the model: a lead that spawns 8 helpers one a turn (each helper
// answering with one model call) against the same lead making a
// list_directory call where each spawn was, in the same daemon; the
// difference per child, less one model call made directly (the child's
// own), is the ledger's records, the child's work item, dispatch and job,
// a worker claiming it, the child's run, and the parent waking; the
// children's records say how much of it their own lives took. Target:
// under 1 ms a child.
func BenchmarkSubagentSpawnOverhead(b *testing.B) {
	const (
		children = 8
		rounds   = 15
	)
	for range b.N {
		bd := startTreeDaemon(b, treeModel{}, 4, 4)
		bd.run(b, "warm", fmt.Sprintf("@lead spawn %d", children))
		var tree, base, model, lives latencies
		for i := range rounds {
			_, d := bd.run(b, fmt.Sprintf("b%d", i), fmt.Sprintf("@lead noop %d", children))
			base = append(base, d)
			id, d := bd.run(b, fmt.Sprintf("t%d", i), fmt.Sprintf("@lead spawn %d", children))
			rs := bd.children(b, id)
			if len(rs) != children {
				b.Fatalf("%d children, want %d", len(rs), children)
			}
			for _, r := range rs {
				if r.FinishedAt == nil {
					b.Fatalf("%s has not ended", r.ID)
				}
				lives = append(lives, r.FinishedAt.Sub(r.CreatedAt))
			}
			tree = append(tree, d)
			for range children {
				model = append(model, bd.modelCall(b))
			}
		}
		perChild := (median(tree)-median(base))/children - median(model)
		b.ReportMetric(float64(perChild.Nanoseconds()), "overhead-ns/child")
		report(b, "subagents: spawn overhead per child, excluding the model",
			fmt.Sprintf("a lead spawning %d helpers one a turn: %s (median of %d)", children, median(tree), rounds),
			fmt.Sprintf("baseline, the same lead calling list_directory instead: %s; a helper's model call alone (its request sent again directly): %s", median(base), median(model)),
			fmt.Sprintf("a child's life by its record, from its spawn to the end of its run: %s (median; the spawn's commit and "+
				"its model call in it, the commit of its end and its parent waking not)", median(lives)),
			fmt.Sprintf("overhead %s per child = %.3f of the 1ms target: %s", perChild,
				float64(perChild)/float64(time.Millisecond), verdict(perChild < time.Millisecond)),
		)
		bd.stop()
	}
}

// BenchmarkSubagentFanOut measures 8 helpers spawned in one turn, each
// whose model call takes 200 ms, with max_concurrent 8: the wall time from
// the first spawn to the last child's end as a ratio to the slowest single
// child (its own run, from start to end) in the same tree. Target: under
// 1.5.
func BenchmarkSubagentFanOut(b *testing.B) {
	const (
		children = 8
		rounds   = 5
	)
	for range b.N {
		bd := startTreeDaemon(b, treeModel{helperDelay: 200 * time.Millisecond}, children+1, children)
		var ratios []float64
		var walls, slowests latencies
		for i := range rounds {
			id, _ := bd.run(b, fmt.Sprintf("f%d", i), fmt.Sprintf("@lead fan %d", children))
			rs := bd.children(b, id)
			if len(rs) != children {
				b.Fatalf("%d children, want %d", len(rs), children)
			}
			var first, last time.Time
			var slowest time.Duration
			for _, r := range rs {
				if r.StartedAt == nil || r.FinishedAt == nil || r.Status != bot.RunDone {
					b.Fatalf("%s: %s, started %v, finished %v", r.ID, r.Status, r.StartedAt, r.FinishedAt)
				}
				if first.IsZero() || r.CreatedAt.Before(first) {
					first = r.CreatedAt
				}
				if r.FinishedAt.After(last) {
					last = *r.FinishedAt
				}
				slowest = max(slowest, r.FinishedAt.Sub(*r.StartedAt))
			}
			wall := last.Sub(first)
			walls, slowests = append(walls, wall), append(slowests, slowest)
			ratios = append(ratios, float64(wall)/float64(slowest))
		}
		slices.Sort(ratios)
		ratio := ratios[len(ratios)/2]
		b.ReportMetric(ratio, "wall/slowest")
		report(b, fmt.Sprintf("subagents: %d children in one turn, 200 ms model calls, max_concurrent %d", children, children),
			fmt.Sprintf("wall time, first spawn to last end: %s (median of %d)", median(walls), rounds),
			fmt.Sprintf("slowest single child: %s; serial would be %s", median(slowests), time.Duration(children)*median(slowests)),
			fmt.Sprintf("ratio %.3f (median) of the 1.5 target: %s", ratio, verdict(ratio < 1.5)),
		)
		bd.stop()
	}
}
