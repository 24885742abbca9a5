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

// budgetModel is a lead that runs a command twice, then answers with what
// it got; each call is 15 tokens.
type budgetModel struct {
	mu       sync.Mutex
	requests []int // the tool results each request carried
}

func (m *budgetModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var results []string
	for _, msg := range req.Messages {
		if msg.Role == "tool" {
			results = append(results, fmt.Sprint(msg.Content))
		}
	}
	m.mu.Lock()
	m.requests = append(m.requests, len(results))
	m.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if len(results) < 2 {
		chatCall(w, "bash", `{"command":"echo ran >> ran.txt"}`)
		return
	}
	chatAnswer(w, "finished: "+strings.Join(results, " | "))
}

// TestATreePausedAtItsBudgetSurvivesAKill9 pauses a tree at its budget,
// kills the daemon, restarts it and approves more from the CLI: the run
// goes on from the call it had not made, asked once, nothing run again.
func TestATreePausedAtItsBudgetSurvivesAKill9(t *testing.T) {
	model := &budgetModel{}
	srv := httptest.NewServer(model)
	defer srv.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf("models:\n  default:\n    provider: openai\n    base_url: %s/v1\n    model: fake\nsandbox:\n  mode: none\n"+
		"budgets:\n  tree:\n    tokens: 30\n", srv.URL)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "agents"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "agents", "lead.md"), []byte(
		"---\nname: lead\ndescription: Leads a piece of work.\n---\nYou do what you are asked.\n"), 0o600))
	addr := freeAddr(t)
	p := serve(t, dir, addr)
	r := run(t, dir, p.env(), "send", "--thread", "paused", "@lead run it twice")
	require.Equal(t, 0, r.code, r.stderr)

	type approval struct{ ID, Tool, Reason, Status string }
	pending := func(p *daemonProc) []approval {
		r := run(t, dir, p.env(), "approvals", "list", "--json")
		require.Equal(t, 0, r.code, r.stderr)
		var out []approval
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
		return out
	}
	var asked []approval
	require.Eventually(t, func() bool {
		asked = pending(p)
		return len(asked) == 1
	}, 30*time.Second, 100*time.Millisecond, "the tree never asked for more:\n%s", p.log)
	require.Equal(t, "budget", asked[0].Tool)
	require.Equal(t, "budget reached (30 tokens): approve 30 more?", asked[0].Reason)

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.wait()

	p2 := serve(t, dir, addr)
	// The resumed run waits on the same question: one approval, asked once.
	var again []approval
	require.Eventually(t, func() bool {
		again = pending(p2)
		return len(again) >= 1
	}, 30*time.Second, 100*time.Millisecond, "the resumed tree does not wait on an approval:\n%s", p2.log)
	require.Len(t, again, 1, "asked once: %v", again)
	r = run(t, dir, p2.env(), "approvals", "approve", again[0].ID)
	require.Equal(t, 0, r.code, r.stderr)

	var reply string
	require.Eventually(t, func() bool {
		r := run(t, dir, p2.env(), "thread", "paused", "--json")
		var msgs []struct{ Kind, Text string }
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &msgs) != nil {
			return false
		}
		for _, m := range msgs {
			if m.Kind == "reply" && strings.HasPrefix(m.Text, "finished: ") {
				reply = m.Text
			}
		}
		return reply != ""
	}, 60*time.Second, 100*time.Millisecond, "no reply after the approval:\n%s", p2.log)

	model.mu.Lock()
	requests := model.requests
	model.mu.Unlock()
	require.Equal(t, []int{0, 1, 2}, requests, "no model call was made twice")
	matches, err := filepath.Glob(filepath.Join(dir, "data", "workspaces", "*", "ran.txt"))
	require.NoError(t, err)
	require.Len(t, matches, 1)
	b, err := os.ReadFile(matches[0])
	require.NoError(t, err)
	require.Equal(t, "ran\nran\n", string(b), "each command ran once")
}
