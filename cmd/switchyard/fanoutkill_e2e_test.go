package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fanOutModel is a lead that spawns a quick and a slow helper in one turn
// and answers with what they said; the slow helper's first call hangs
// until the daemon dies.
type fanOutModel struct {
	mu           sync.Mutex
	leadRequests []int // the tool results each lead request carried
	quick, slow  int   // the helpers' calls
	hanging      chan struct{}
}

func (m *fanOutModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, ok := readChat(w, r)
	if !ok {
		return
	}
	agent, results := req.agent, req.results
	w.Header().Set("Content-Type", "application/json")
	if agent == "helper" {
		task := req.last
		m.mu.Lock()
		if strings.Contains(task, "quick") {
			m.quick++
			m.mu.Unlock()
			chatAnswer(w, "quick part done")
			return
		}
		m.slow++
		first := m.slow == 1
		m.mu.Unlock()
		if first {
			close(m.hanging)
			<-r.Context().Done()
			return
		}
		chatAnswer(w, "slow part done")
		return
	}
	m.mu.Lock()
	m.leadRequests = append(m.leadRequests, len(results))
	m.mu.Unlock()
	if len(results) == 0 {
		quoted := func(s string) string { b, _ := json.Marshal(s); return string(b) }
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"fake",
			"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[
			{"id":"call_quick","type":"function","function":{"name":"spawn_subagent","arguments":%s}},
			{"id":"call_slow","type":"function","function":{"name":"spawn_subagent","arguments":%s}}]}}],
			"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`,
			quoted(`{"task":"the quick part","agent":"helper"}`), quoted(`{"task":"the slow part","agent":"helper"}`))
		return
	}
	chatAnswer(w, "finished:\n"+strings.Join(results, "\n"))
}

// TestKill9MidFanOutRunsNoChildTwice kills the daemon while one child of a
// fan-out has answered and the other is mid-call: after the restart the
// answered child is not run again, the other runs once more, and the
// parent goes on from its saved turn.
func TestKill9MidFanOutRunsNoChildTwice(t *testing.T) {
	model := &fanOutModel{hanging: make(chan struct{})}
	srv := httptest.NewServer(model)
	defer srv.Close()
	dir := treeDir(t, srv.URL, "")
	addr := freeAddr(t)
	p := serve(t, dir, addr)
	r := run(t, dir, p.env(), "send", "--thread", "fan", "@lead do both parts")
	require.Equal(t, 0, r.code, r.stderr)
	select {
	case <-model.hanging:
	case <-time.After(30 * time.Second):
		t.Fatalf("the slow helper never started:\n%s", p.log)
	}
	require.Eventually(t, func() bool {
		for _, r := range ownedRuns(t, dir, p, "fan") {
			if r.Task == "the quick part" {
				return r.Status == "done"
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "the quick child's end was never written:\n%s", p.log)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.wait()

	p2 := serve(t, dir, addr)
	reply := finishedReply(t, dir, p2, "fan", time.Minute, nil)
	require.Contains(t, reply, "quick part done")
	require.Contains(t, reply, "slow part done")

	model.mu.Lock()
	leads, quick, slow := model.leadRequests, model.quick, model.slow
	model.mu.Unlock()
	require.Equal(t, []int{0, 2}, leads, "the lead was not asked again for the turn it had answered")
	require.Equal(t, 1, quick, "the child that had answered did not run again")
	require.Equal(t, 2, slow, "the child killed mid-call ran once more")
	recs := ownedRuns(t, dir, p2, "fan")
	require.Len(t, recs, 2, "no child was spawned again")
	for _, r := range recs {
		require.Equal(t, "done", r.Status, r.ID)
	}
}

// runRec is a ledger record as `runs list --json` prints it.
type runRec struct{ ID, Status, Task string }

// ownedRuns lists, through the CLI of the daemon p, the ledger records the
// thread owner owns.
func ownedRuns(t *testing.T, dir string, p *daemonProc, owner string) []runRec {
	t.Helper()
	r := run(t, dir, p.env(), "runs", "list", "--owner", owner, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var out []runRec
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
	return out
}

// finishedReply waits, up to within, for the reply of the daemon p in
// thread that says "finished:", and returns it; each, when given, runs
// before every look.
func finishedReply(t *testing.T, dir string, p *daemonProc, thread string, within time.Duration, each func()) string {
	t.Helper()
	var reply string
	require.Eventually(t, func() bool {
		if each != nil {
			each()
		}
		r := run(t, dir, p.env(), "thread", thread, "--json")
		var msgs []struct{ Kind, Text string }
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &msgs) != nil {
			return false
		}
		for _, m := range msgs {
			if m.Kind == "reply" && strings.HasPrefix(m.Text, "finished:") {
				reply = m.Text
			}
		}
		return reply != ""
	}, within, 100*time.Millisecond, "the tree did not finish after the restart:\n%s", p.log)
	return reply
}
