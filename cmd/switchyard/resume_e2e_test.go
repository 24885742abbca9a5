package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// resumingModel speaks chat completions for a lead that runs a command,
// then spawns a helper and waits for it, then answers with what it got;
// the helper's first model call hangs until the daemon dies.
type resumingModel struct {
	mu           sync.Mutex
	leadRequests []int // the tool results each lead request carried
	helperCalls  int
	hanging      chan struct{} // closed when the helper's first call hangs
}

func (m *resumingModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, ok := readChat(w, r)
	if !ok {
		return
	}
	agent, results := req.agent, req.results
	w.Header().Set("Content-Type", "application/json")
	m.mu.Lock()
	if agent == "helper" {
		m.helperCalls++
		first := m.helperCalls == 1
		m.mu.Unlock()
		if first {
			close(m.hanging)
			<-r.Context().Done() // the daemon is killed meanwhile
			return
		}
		chatAnswer(w, "3 files")
		return
	}
	m.leadRequests = append(m.leadRequests, len(results))
	m.mu.Unlock()
	switch len(results) {
	case 0:
		chatCall(w, "bash", `{"command":"echo ran >> ran.txt"}`)
	case 1:
		chatCall(w, "spawn_subagent", `{"task":"count the files","agent":"helper"}`)
	default:
		chatAnswer(w, "finished:\n"+strings.Join(results, "\n"))
	}
}

func chatCall(w io.Writer, name, args string) {
	quoted, _ := json.Marshal(args)
	fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"fake",
		"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
		"tool_calls":[{"id":"call_%s","type":"function","function":{"name":%q,"arguments":%s}}]}}],
		"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, name, name, quoted)
}

func chatAnswer(w io.Writer, text string) {
	quoted, _ := json.Marshal(text)
	fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":2,"model":"fake",
		"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":%s}}],
		"usage":{"prompt_tokens":20,"completion_tokens":7,"total_tokens":27}}`, quoted)
}

// TestKill9MidTreeResumesTheParentFromItsLastTurn kills the daemon while a
// parent waits for its child, restarts it, and checks the parent goes on
// from where it was: its finished command is not run again, its child is
// picked up instead of spawned again, and the thread says so.
func TestKill9MidTreeResumesTheParentFromItsLastTurn(t *testing.T) {
	model := &resumingModel{hanging: make(chan struct{})}
	srv := httptest.NewServer(model)
	defer srv.Close()
	dir := treeDir(t, srv.URL, "")
	addr := freeAddr(t)
	p := serve(t, dir, addr)
	r := run(t, dir, p.env(), "send", "--thread", "kill", "@lead count the files")
	require.Equal(t, 0, r.code, r.stderr)
	select {
	case <-model.hanging:
	case <-time.After(30 * time.Second):
		t.Fatalf("the helper never started:\n%s", p.log)
	}
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.wait()
	ran := func() int {
		matches, err := filepath.Glob(filepath.Join(dir, "data", "workspaces", "*", "ran.txt"))
		require.NoError(t, err)
		require.Len(t, matches, 1)
		b, err := os.ReadFile(matches[0])
		require.NoError(t, err)
		return strings.Count(string(b), "ran\n")
	}
	require.Equal(t, 1, ran(), "the command ran before the kill")

	p2 := serve(t, dir, addr)
	var items []struct {
		ID       string `json:"id"`
		Status   string `json:"status"`
		ParentID string `json:"parent_work_item_id"`
	}
	require.Eventually(t, func() bool {
		r := run(t, dir, p2.env(), "workitems", "list", "--thread", "kill", "--json")
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &items) != nil {
			return false
		}
		for _, wi := range items {
			if wi.ParentID == "" {
				return wi.Status == "done"
			}
		}
		return false
	}, 60*time.Second, 200*time.Millisecond, "the tree did not finish after the restart:\n%s", p2.log)

	require.Equal(t, 1, ran(), "the command that had finished did not run again")
	model.mu.Lock()
	leads, helpers := model.leadRequests, model.helperCalls
	model.mu.Unlock()
	require.Equal(t, []int{0, 1, 2}, leads, "the lead was not asked again for what it had answered")
	require.Equal(t, 2, helpers, "the helper, killed mid-call, ran once more")

	r = run(t, dir, p2.env(), "runs", "list", "--owner", "kill", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var recs []struct{ ID, Status, Agent string }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &recs))
	require.Len(t, recs, 1, "the child was not spawned again: %s", r.stdout)
	require.Equal(t, "done", recs[0].Status)

	var status, reply string
	require.Eventually(t, func() bool {
		r := run(t, dir, p2.env(), "thread", "kill", "--json")
		var msgs []struct{ Kind, Text string }
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &msgs) != nil {
			return false
		}
		for _, m := range msgs {
			switch m.Kind {
			case "status":
				status = m.Text
			case "reply":
				reply = m.Text
			}
		}
		return reply != "" && strings.HasPrefix(status, "✅")
	}, 15*time.Second, 100*time.Millisecond, "no reply in the thread")
	require.Contains(t, status, "↻ resumed after a restart, after turn 2: nothing that had finished ran again; picked up again: spawn_subagent")
	require.Contains(t, reply, "finished:")
	require.Contains(t, reply, "3 files")
	require.Contains(t, reply, "spawned before the restart and awaited again, not run twice")
}
