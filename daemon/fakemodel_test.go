package daemon_test

import (
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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
)

// chatMessage is a message of a chat completions request as the OpenAI
// SDK sends it.
type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// text is the message's content, a string or a list of text parts.
func (m chatMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct{ Text string }
	_ = json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// chatRequest is what the fake model was asked.
type chatRequest struct {
	Agent    string
	System   string
	Messages []chatMessage // without the system message
}

// results are the tool results of the request by call id.
func (r chatRequest) results() map[string]string {
	out := map[string]string{}
	for _, m := range r.Messages {
		if m.Role == "tool" {
			out[m.ToolCallID] = m.text()
		}
	}
	return out
}

// last is the last message.
func (r chatRequest) last() chatMessage { return r.Messages[len(r.Messages)-1] }

// start is the index of the user message this run started from: the last
// one, after the thread's earlier conversation.
func (r chatRequest) start() int {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return i
		}
	}
	return 0
}

// first is the user message this run started from.
func (r chatRequest) first() string { return r.Messages[r.start()].text() }

// turns counts the model's answers in this run so far.
func (r chatRequest) turns() int {
	n := 0
	for _, m := range r.Messages[r.start():] {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// fakeCall is a tool call the fake model makes.
type fakeCall struct{ ID, Name, Args string }

// reply is the fake model's answer: tool calls, or text.
type reply struct {
	Text   string
	Calls  []fakeCall
	Tokens int // prompt tokens reported; 100 when zero
	Status int // an HTTP error status answered instead, when not zero
}

var promptAgent = regexp.MustCompile(`You are the "([^"]+)" agent`)

// fakeModel speaks OpenAI chat completions at the wire. script answers each
// request; it may block (until ctx ends, when the client gives up). The
// fake counts requests and how many of each agent were in flight at once.
type fakeModel struct {
	t      *testing.T
	srv    *httptest.Server
	script func(ctx context.Context, req chatRequest) reply

	mu       sync.Mutex
	requests map[string][]chatRequest
	inFlight map[string]int
	maxIn    map[string]int
	changed  chan struct{} // closed and replaced on every change
}

func newFakeModel(t *testing.T, script func(ctx context.Context, req chatRequest) reply) *fakeModel {
	f := &fakeModel{t: t, script: script, requests: map[string][]chatRequest{},
		inFlight: map[string]int{}, maxIn: map[string]int{}, changed: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeModel) url() string { return f.srv.URL + "/v1" }

func (f *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var in struct {
		Messages []chatMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &in); err != nil || len(in.Messages) < 2 {
		http.Error(w, "bad request", 400)
		return
	}
	req := chatRequest{System: in.Messages[0].text(), Messages: in.Messages[1:]}
	if m := promptAgent.FindStringSubmatch(req.System); m != nil {
		req.Agent = m[1]
	}
	f.mu.Lock()
	f.requests[req.Agent] = append(f.requests[req.Agent], req)
	f.inFlight[req.Agent]++
	f.maxIn[req.Agent] = max(f.maxIn[req.Agent], f.inFlight[req.Agent])
	f.notifyLocked()
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight[req.Agent]--
		f.notifyLocked()
		f.mu.Unlock()
	}()
	rep := f.script(r.Context(), req)
	if r.Context().Err() != nil {
		return
	}
	if rep.Status != 0 {
		http.Error(w, `{"error":{"message":"the fake model failed","type":"server_error"}}`, rep.Status)
		return
	}
	tokens := rep.Tokens
	if tokens == 0 {
		tokens = 100
	}
	w.Header().Set("Content-Type", "application/json")
	if len(rep.Calls) > 0 {
		var calls []string
		for i, c := range rep.Calls {
			id := c.ID
			if id == "" {
				id = fmt.Sprintf("call_%d_%d", len(req.Messages), i)
			}
			args, _ := json.Marshal(c.Args)
			calls = append(calls, fmt.Sprintf(`{"id":%q,"type":"function","function":{"name":%q,"arguments":%s}}`, id, c.Name, args))
		}
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"fake","choices":[{"index":0,"finish_reason":"tool_calls",
			"message":{"role":"assistant","content":null,"tool_calls":[%s]}}],"usage":{"prompt_tokens":%d,"completion_tokens":10,"total_tokens":%d}}`,
			strings.Join(calls, ","), tokens, tokens+10)
		return
	}
	text, _ := json.Marshal(rep.Text)
	fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"fake","choices":[{"index":0,"finish_reason":"stop",
		"message":{"role":"assistant","content":%s}}],"usage":{"prompt_tokens":%d,"completion_tokens":10,"total_tokens":%d}}`, text, tokens, tokens+10)
}

func (f *fakeModel) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// seen returns the requests of agent so far.
func (f *fakeModel) seen(agent string) []chatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]chatRequest(nil), f.requests[agent]...)
}

// maxInFlight is the most requests of agent the fake answered at once.
func (f *fakeModel) maxInFlight(agent string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxIn[agent]
}

// awaitInFlight blocks until n requests of agent are, or have been, in
// flight at once, or ctx ends; it reports whether they were.
func (f *fakeModel) awaitInFlight(ctx context.Context, agent string, n int) bool {
	for {
		f.mu.Lock()
		ok, ch := f.maxIn[agent] >= n, f.changed
		f.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// tree is a daemon running real agents on a fake model.
type tree struct {
	*running
	d     *daemon.Daemon
	model *fakeModel
}

// treeOptions configure startTree.
type treeOptions struct {
	workers   int
	subagents config.Subagents
	agents    map[string]string // extra agent files, name → markdown
	config    func(*config.Config)
}

// agentFile is a minimal agent definition.
func agentFile(name, desc string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\nmode: tool\n---\nYou do what you are asked.\n"
}

// startTree runs a daemon whose agents (the built-in ones, lead and helper,
// and opts.agents) run on model, loaded from a config as serve loads it.
func startTree(t *testing.T, model *fakeModel, opts treeOptions) *tree {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agents")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	files := map[string]string{
		"lead":   agentFile("lead", "Leads a piece of work and splits it among helpers."),
		"helper": agentFile("helper", "Does one part of a piece of work."),
	}
	for n, src := range opts.agents {
		files[n] = src
	}
	for n, src := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n+".md"), []byte(src), 0o600))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	data := t.TempDir()
	setup, err := daemon.Load(context.Background(), daemon.LoadOptions{Getenv: noModelEnv, Override: func(c *config.Config) {
		c.DataDir, c.AgentsDir, c.Server.Listen = data, dir, ln.Addr().String()
		c.Models = map[string]config.Model{"default": {Provider: config.ProviderOpenAI, BaseURL: model.url(), Model: "fake"}}
		c.Sandbox.Mode = sandbox.ModeNone
		if opts.workers > 0 {
			c.Workers = opts.workers
		}
		if opts.subagents.MaxConcurrent > 0 {
			c.Subagents.MaxConcurrent = opts.subagents.MaxConcurrent
		}
		if opts.subagents.MaxDepth > 0 {
			c.Subagents.MaxDepth = opts.subagents.MaxDepth
		}
		if opts.subagents.Timeout > 0 {
			c.Subagents.Timeout = opts.subagents.Timeout
		}
		if opts.config != nil {
			opts.config(c)
		}
	}})
	require.NoError(t, err)
	d, err := daemon.New(t.Context(), daemon.Options{Setup: setup, ShutdownGrace: time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, ln) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
	t.Cleanup(stop)
	token, err := daemon.ReadAPIToken(data)
	require.NoError(t, err)
	r := &running{base: "http://" + ln.Addr().String(), token: token.Reveal(), stop: stop}
	require.Eventually(t, func() bool { return r.status(t, "GET", "/readyz", "") == 200 }, 5*time.Second, 10*time.Millisecond)
	return &tree{running: r, d: d, model: model}
}

// send posts a console message and returns its work item id.
func (tr *tree) send(t *testing.T, thread, text string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"thread": thread, "text": text, "user": "ana"})
	code, out := tr.do(t, "POST", "/api/v1/messages", string(body))
	require.Equal(t, http.StatusAccepted, code, string(out))
	var res struct {
		WorkItemID string `json:"work_item_id"`
	}
	require.NoError(t, json.Unmarshal(out, &res))
	return res.WorkItemID
}

// finished waits for a work item to finish and returns it.
func (tr *tree) finished(t *testing.T, id string, within time.Duration) *bot.WorkItem {
	t.Helper()
	var wi *bot.WorkItem
	require.Eventually(t, func() bool {
		var err error
		wi, err = tr.d.Store().GetWorkItem(context.Background(), id)
		require.NoError(t, err)
		return wi.Status.Finished()
	}, within, 10*time.Millisecond, "work item %s never finished", id)
	return wi
}

// children lists the subagents spawned under a work item, oldest first.
func (tr *tree) children(t *testing.T, parent string) []bot.ChildRun {
	t.Helper()
	rs, _, err := tr.d.Store().ListRuns(context.Background(), bot.RunFilter{ParentWorkItemID: parent})
	require.NoError(t, err)
	var out []bot.ChildRun
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].Kind == bot.RunSubagent {
			out = append(out, rs[i])
		}
	}
	return out
}

// messages reads the status and the reply the bot wrote for a work item in
// a console thread, once its reply is there.
func (tr *tree) messages(t *testing.T, thread, workItem string) map[string]string {
	t.Helper()
	var out map[string]string
	require.Eventually(t, func() bool {
		code, body := tr.do(t, "GET", "/api/v1/threads/"+thread+"/messages", "")
		require.Equal(t, 200, code, string(body))
		var msgs []struct{ ID, Kind, Text string }
		require.NoError(t, json.Unmarshal(body, &msgs))
		out = map[string]string{}
		for _, m := range msgs {
			if strings.HasPrefix(m.ID, workItem+"/") {
				out[m.Kind] = m.Text
			}
		}
		return out["reply"] != ""
	}, 10*time.Second, 10*time.Millisecond, "no reply to %s in %s", workItem, thread)
	return out
}

func spawnArgs(task, agent string) string {
	b, _ := json.Marshal(map[string]string{"task": task, "agent": agent})
	return string(b)
}
