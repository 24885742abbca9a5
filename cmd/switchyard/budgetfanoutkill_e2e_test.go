package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// cappedFanOutModel is a lead that spawns four helpers in one turn and
// answers with what they said; the first helper call hangs until the
// daemon dies, 15 tokens a call.
type cappedFanOutModel struct {
	mu           sync.Mutex
	leadRequests []int          // the tool results each lead request carried
	parts        map[string]int // calls per helper's part
	hung         string         // the part whose call hung
	hanging      chan struct{}
}

// partName finds the part a helper was asked to do in its task.
var partName = regexp.MustCompile(`part \d+`)

func (m *cappedFanOutModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, ok := readChat(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if req.agent == "helper" {
		part := partName.FindString(req.last)
		m.mu.Lock()
		m.parts[part]++
		first := m.hung == ""
		if first {
			m.hung = part
		}
		m.mu.Unlock()
		if first {
			close(m.hanging)
			<-r.Context().Done()
			return
		}
		chatAnswer(w, part+" done")
		return
	}
	m.mu.Lock()
	m.leadRequests = append(m.leadRequests, len(req.results))
	m.mu.Unlock()
	if len(req.results) == 0 {
		quoted := func(s string) string { b, _ := json.Marshal(s); return string(b) }
		var calls []string
		for i := range 4 {
			calls = append(calls, fmt.Sprintf(`{"id":"call_%d","type":"function","function":{"name":"spawn_subagent","arguments":%s}}`,
				i, quoted(fmt.Sprintf(`{"task":"part %d","agent":"helper"}`, i))))
		}
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"fake",
			"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[%s]}}],
			"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, strings.Join(calls, ","))
		return
	}
	chatAnswer(w, "finished:\n"+strings.Join(req.results, "\n"))
}

// TestKill9WhileHelpersWaitForRoomUnderTheCapRunsNothingTwice kills the
// daemon while one helper's call is under way and the others wait for
// room under the tree's cap: after the restart the tree asks again, is
// approved from the CLI, and finishes with every helper done, the lead's
// answered turn not asked again and no helper's call made twice but the
// one the kill cut.
func TestKill9WhileHelpersWaitForRoomUnderTheCapRunsNothingTwice(t *testing.T) {
	model := &cappedFanOutModel{parts: map[string]int{}, hanging: make(chan struct{})}
	srv := httptest.NewServer(model)
	defer srv.Close()
	dir := treeDir(t, srv.URL, "budgets:\n  tree:\n    tokens: 30\n")
	addr := freeAddr(t)
	p := serve(t, dir, addr)
	r := run(t, dir, p.env(), "send", "--thread", "capped", "@lead do the parts")
	require.Equal(t, 0, r.code, r.stderr)
	select {
	case <-model.hanging:
	case <-time.After(30 * time.Second):
		t.Fatalf("no helper called the model:\n%s", p.log)
	}
	require.Eventually(t, func() bool { return len(ownedRuns(t, dir, p, "capped")) == 4 }, 30*time.Second, 50*time.Millisecond,
		"the helpers were never spawned:\n%s", p.log)
	model.mu.Lock()
	require.Len(t, model.parts, 1, "a helper called the model beside the one under way, where two calls reach the cap")
	model.mu.Unlock()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.wait()

	p2 := serve(t, dir, addr)
	reply := finishedReply(t, dir, p2, "capped", 90*time.Second, func() {
		r := run(t, dir, p2.env(), "approvals", "list", "--json")
		require.Equal(t, 0, r.code, r.stderr)
		var pending []struct{ ID, Tool string }
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &pending), r.stdout)
		for _, a := range pending {
			require.Equal(t, "budget", a.Tool)
			r := run(t, dir, p2.env(), "approvals", "approve", a.ID)
			require.Equal(t, 0, r.code, r.stderr)
		}
	})
	for i := range 4 {
		require.Contains(t, reply, fmt.Sprintf("part %d done", i))
	}

	model.mu.Lock()
	leads, parts, hung := model.leadRequests, model.parts, model.hung
	model.mu.Unlock()
	require.Equal(t, []int{0, 4}, leads, "the lead was not asked again for the turn it had answered")
	for part, calls := range parts {
		if part == hung {
			require.Equal(t, 2, calls, "the helper the kill cut calls once more")
			continue
		}
		require.Equal(t, 1, calls, "%s called the model twice", part)
	}
	recs := ownedRuns(t, dir, p2, "capped")
	require.Len(t, recs, 4, "no helper was spawned again")
	for _, r := range recs {
		require.Equal(t, "done", r.Status, r.ID)
	}
}
