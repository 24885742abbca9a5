package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// treeModel is a lead that spawns the helpers of parts in one turn and
// answers with their results. A helper's call hangs until the daemon dies
// while hang says so; so does the lead's call carrying results, while
// hangLead does. It counts every call.
type treeModel struct {
	parts    int
	mu       sync.Mutex
	leads    []int          // the tool results each lead request carried
	helpers  map[string]int // calls per part
	hang     func(part string, call int) bool
	hangLead bool
	hung     chan string // each call that hangs, as it starts
}

func (m *treeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, ok := readChat(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if req.agent == "helper" {
		part := partName.FindString(req.last)
		m.mu.Lock()
		m.helpers[part]++
		hang := m.hang != nil && m.hang(part, m.helpers[part])
		m.mu.Unlock()
		if hang {
			m.hung <- part
			<-r.Context().Done()
			return
		}
		chatAnswer(w, part+" done")
		return
	}
	m.mu.Lock()
	m.leads = append(m.leads, len(req.results))
	hang := m.hangLead && len(req.results) > 0
	m.hangLead = m.hangLead && !hang
	m.mu.Unlock()
	if len(req.results) == 0 {
		var calls []string
		for i := range m.parts {
			args, _ := json.Marshal(fmt.Sprintf(`{"task":"part %d","agent":"helper"}`, i))
			calls = append(calls, fmt.Sprintf(`{"id":"call_%d","type":"function","function":{"name":"spawn_subagent","arguments":%s}}`, i, args))
		}
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"fake",
			"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[%s]}}],
			"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, strings.Join(calls, ","))
		return
	}
	if hang {
		m.hung <- "lead"
		<-r.Context().Done()
		return
	}
	chatAnswer(w, "finished:\n"+strings.Join(req.results, "\n"))
}

// slowHelper reports whether r is a helper's call, leaving its body to be
// read again.
func (m *treeModel) slowHelper(r *http.Request) bool {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	return bytes.Contains(body, []byte(`You are the \"helper\" agent`))
}

func (m *treeModel) counts() (leads []int, helpers map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	helpers = map[string]int{}
	for k, v := range m.helpers {
		helpers[k] = v
	}
	return append([]int(nil), m.leads...), helpers
}

// waitHung waits for n calls to hang and returns them.
func (m *treeModel) waitHung(t *testing.T, p *daemonProc, n int) []string {
	t.Helper()
	var out []string
	for range n {
		select {
		case part := <-m.hung:
			out = append(out, part)
		case <-time.After(60 * time.Second):
			t.Fatalf("%d calls hung of %d:\n%s", len(out), n, p.log)
		}
	}
	return out
}

// threadTexts returns the texts of the messages of thread, by kind.
func threadTexts(t *testing.T, dir string, p *daemonProc, thread string) map[string][]string {
	t.Helper()
	r := run(t, dir, p.env(), "thread", thread, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var msgs []struct{ Kind, Text string }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &msgs), r.stdout)
	out := map[string][]string{}
	for _, m := range msgs {
		out[m.Kind] = append(out[m.Kind], m.Text)
	}
	return out
}

// TestKill9MidFanOutOfEightUnderTheLimit kills the daemon while the two
// children a limit of two lets a fan-out of eight start are both in their
// model calls: after the restart the lead is not asked again for its
// spawns, the two children run once more and neither is spawned again,
// the six spawns the limit refused are each made once more (refused while
// the retried children run, spawned if they ended first), no child runs
// twice, and the thread says once that the run resumed.
func TestKill9MidFanOutOfEightUnderTheLimit(t *testing.T) {
	var killed atomic.Bool
	model := &treeModel{parts: 8, helpers: map[string]int{}, hung: make(chan string, 16),
		hang: func(_ string, call int) bool { return call == 1 && !killed.Load() }}
	srv := httptest.NewServer(model)
	defer srv.Close()
	dir := treeDir(t, srv.URL, "subagents:\n  max_concurrent: 2\n")
	addr := freeAddr(t)
	p := serve(t, dir, addr)
	r := run(t, dir, p.env(), "send", "--thread", "eight", "@lead do the eight parts")
	require.Equal(t, 0, r.code, r.stderr)
	hung := model.waitHung(t, p, 2)
	require.Len(t, ownedRuns(t, dir, p, "eight"), 2)
	killed.Store(true)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.wait()

	p2 := serve(t, dir, addr)
	reply := finishedReply(t, dir, p2, "eight", 90*time.Second, nil)
	for _, part := range hung {
		require.Contains(t, reply, part+" done")
	}
	// The spawns refused before the kill are made again, under the limit
	// as it stands then: refused again while the two retried children
	// run, spawned when they ended first.
	recs := ownedRuns(t, dir, p2, "eight")
	later := len(recs) - len(hung)
	require.Equal(t, 6-later, strings.Count(reply, "max_concurrent"), "each spawn beyond the limit refused or made once:\n%s", reply)

	leads, helpers := model.counts()
	require.Equal(t, []int{0, 8}, leads, "the lead was not asked again for its spawns")
	require.Len(t, helpers, len(recs), "each child that ran has its record: %v", helpers)
	for part, calls := range helpers {
		want := 1
		if slices.Contains(hung, part) {
			want = 2 // killed mid-call, it ran once more
		}
		require.Equal(t, want, calls, part)
	}
	for _, rec := range recs {
		require.Equal(t, "done", rec.Status, rec.ID)
	}
	requireResumedOnce(t, dir, p2, "eight")
}

// requireResumedOnce checks that the thread says once, in its status
// message, that the run resumed after a restart.
func requireResumedOnce(t *testing.T, dir string, p *daemonProc, thread string) {
	t.Helper()
	var texts map[string][]string
	require.Eventually(t, func() bool {
		texts = threadTexts(t, dir, p, thread)
		return len(texts["status"]) > 0 && strings.HasPrefix(texts["status"][len(texts["status"])-1], "✅")
	}, 15*time.Second, 100*time.Millisecond, "the status never said the tree finished")
	all := strings.Join(append(texts["status"], texts["reply"]...), "\n")
	require.Equal(t, 1, strings.Count(all, "resumed after a restart"), "the thread says once that the run resumed:\n%s", all)
}

// TestKill9AfterAChildEndedBeforeItsParentWentOn kills the daemon after a
// child answered and its end was saved with the parent's results, while
// the parent's next model call is under way: after the restart the parent
// is asked again with the child's result, and the child does not run
// again.
func TestKill9AfterAChildEndedBeforeItsParentWentOn(t *testing.T) {
	model := &treeModel{parts: 1, helpers: map[string]int{}, hung: make(chan string, 4), hangLead: true}
	srv := httptest.NewServer(model)
	defer srv.Close()
	dir := treeDir(t, srv.URL, "")
	addr := freeAddr(t)
	p := serve(t, dir, addr)
	r := run(t, dir, p.env(), "send", "--thread", "ended", "@lead do the part")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, []string{"lead"}, model.waitHung(t, p, 1))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.wait()

	p2 := serve(t, dir, addr)
	reply := finishedReply(t, dir, p2, "ended", time.Minute, nil)
	require.Contains(t, reply, "part 0 done")
	leads, helpers := model.counts()
	require.Equal(t, []int{0, 1, 1}, leads, "the lead was asked again only for the call the kill cut")
	require.Equal(t, map[string]int{"part 0": 1}, helpers, "the child that had ended did not run again")
	recs := ownedRuns(t, dir, p2, "ended")
	require.Len(t, recs, 1, "the child was not spawned again")
	require.Equal(t, "done", recs[0].Status)
	requireResumedOnce(t, dir, p2, "ended")
}

// TestKill9WithAChildSpawnedButNotStarted kills the daemon, with one
// worker, while the first child of a fan-out is in its model call and the
// second, spawned and committed, waits for the worker: after the restart
// the first runs once more, the second runs once, neither is spawned
// again, and the lead goes on from its spawns.
func TestKill9WithAChildSpawnedButNotStarted(t *testing.T) {
	calls := 0 // of every helper, under the model's lock
	model := &treeModel{parts: 2, helpers: map[string]int{}, hung: make(chan string, 4),
		hang: func(string, int) bool { calls++; return calls == 1 }}
	srv := httptest.NewServer(model)
	defer srv.Close()
	dir := treeDir(t, srv.URL, "workers: 1\n")
	addr := freeAddr(t)
	p := serve(t, dir, addr)
	r := run(t, dir, p.env(), "send", "--thread", "queued", "@lead do both parts")
	require.Equal(t, 0, r.code, r.stderr)
	hung := model.waitHung(t, p, 1)
	require.Len(t, ownedRuns(t, dir, p, "queued"), 2, "both children were spawned")
	_, helpers := model.counts()
	require.Len(t, helpers, 1, "one worker runs one child at a time")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.wait()

	p2 := serve(t, dir, addr)
	reply := finishedReply(t, dir, p2, "queued", 90*time.Second, nil)
	require.Contains(t, reply, "part 0 done")
	require.Contains(t, reply, "part 1 done")
	leads, helpers := model.counts()
	require.Equal(t, []int{0, 2}, leads, "the lead was not asked again for its spawns")
	for part, calls := range helpers {
		want := 1
		if part == hung[0] {
			want = 2
		}
		require.Equal(t, want, calls, "%s: calls", part)
	}
	recs := ownedRuns(t, dir, p2, "queued")
	require.Len(t, recs, 2, "no child was spawned again")
	for _, rec := range recs {
		require.Equal(t, "done", rec.Status, rec.ID)
	}
	requireResumedOnce(t, dir, p2, "queued")
}

// TestAChildLongerThanTheLeaseKeepsItsJob runs a child whose model call
// takes several times the dispatch lease: its worker renews the lease of
// the child's own lane, so the child is neither stopped nor run again.
func TestAChildLongerThanTheLeaseKeepsItsJob(t *testing.T) {
	model := &treeModel{parts: 1, helpers: map[string]int{}, hung: make(chan string, 4),
		hang: func(string, int) bool { return false }}
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" && model.slowHelper(r) {
			select {
			case <-time.After(4 * time.Second):
			case <-r.Context().Done():
				return
			}
		}
		model.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(slow)
	defer srv.Close()
	dir := treeDir(t, srv.URL, "dispatch:\n  lease: 1s\n")
	addr := freeAddr(t)
	p := serve(t, dir, addr)
	r := run(t, dir, p.env(), "send", "--thread", "long", "@lead do the long part")
	require.Equal(t, 0, r.code, r.stderr)
	reply := finishedReply(t, dir, p, "long", time.Minute, nil)
	require.Contains(t, reply, "part 0 done")
	_, helpers := model.counts()
	require.Equal(t, map[string]int{"part 0": 1}, helpers, "the child ran once")
	recs := ownedRuns(t, dir, p, "long")
	require.Len(t, recs, 1)
	require.Equal(t, "done", recs[0].Status)
}

// TestKill9TwiceMidChild kills the daemon twice while the same child is in
// its model call: after the second restart the lead goes on from its
// spawn, the child is spawned once and runs to its end, and the thread
// says once that the run resumed.
func TestKill9TwiceMidChild(t *testing.T) {
	model := &treeModel{parts: 1, helpers: map[string]int{}, hung: make(chan string, 4),
		hang: func(_ string, call int) bool { return call <= 2 }}
	srv := httptest.NewServer(model)
	defer srv.Close()
	dir := treeDir(t, srv.URL, "")
	addr := freeAddr(t)
	p := serve(t, dir, addr)
	r := run(t, dir, p.env(), "send", "--thread", "twice", "@lead do the part")
	require.Equal(t, 0, r.code, r.stderr)
	for range 2 {
		model.waitHung(t, p, 1)
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
		_ = p.wait()
		p = serve(t, dir, addr)
	}
	reply := finishedReply(t, dir, p, "twice", time.Minute, nil)
	require.Contains(t, reply, "part 0 done")
	leads, helpers := model.counts()
	require.Equal(t, []int{0, 1}, leads, "the lead was not asked again for its spawn")
	require.Equal(t, map[string]int{"part 0": 3}, helpers, "the child ran once more after each kill")
	recs := ownedRuns(t, dir, p, "twice")
	require.Len(t, recs, 1, "the child was not spawned again")
	require.Equal(t, "done", recs[0].Status)
	requireResumedOnce(t, dir, p, "twice")
}

// TestKill9StopsTheCommandItInterrupted kills the daemon while an agent's
// command runs without a sandbox: the command dies with the daemon rather
// than go on alone, and after the restart the agent is told it was
// interrupted and not run again.
func TestKill9StopsTheCommandItInterrupted(t *testing.T) {
	var mu sync.Mutex
	var leads []int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, ok := readChat(w, r)
		if !ok {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		mu.Lock()
		leads = append(leads, len(req.results))
		mu.Unlock()
		if len(req.results) == 0 {
			chatCall(w, "bash", `{"command":"echo started > started.txt; sleep 3; echo ran >> ran.txt"}`)
			return
		}
		chatAnswer(w, "finished:\n"+strings.Join(req.results, "\n"))
	}))
	defer srv.Close()
	dir := treeDir(t, srv.URL, "")
	addr := freeAddr(t)
	p := serve(t, dir, addr)
	r := run(t, dir, p.env(), "send", "--thread", "cmd", "@lead run it")
	require.Equal(t, 0, r.code, r.stderr)
	workspaceFile := func(name string) string { return filepath.Join(dir, "data", "workspaces", "*", name) }
	require.Eventually(t, func() bool {
		m, _ := filepath.Glob(workspaceFile("started.txt"))
		return len(m) == 1
	}, 30*time.Second, 20*time.Millisecond, "the command never started")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.wait()

	// Longer than the command would have taken.
	time.Sleep(5 * time.Second)
	m, err := filepath.Glob(workspaceFile("ran.txt"))
	require.NoError(t, err)
	require.Empty(t, m, "the command went on after the daemon died")

	p2 := serve(t, dir, addr)
	reply := finishedReply(t, dir, p2, "cmd", time.Minute, nil)
	require.Contains(t, reply, "interrupted")
	mu.Lock()
	require.Equal(t, []int{0, 1}, leads, "the lead was asked again only with the interrupted result")
	mu.Unlock()
	m, err = filepath.Glob(workspaceFile("ran.txt"))
	require.NoError(t, err)
	require.Empty(t, m, "the command was not run again")
}
