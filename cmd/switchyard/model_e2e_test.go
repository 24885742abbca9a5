package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeOpenAI speaks the chat completions wire format: the first request of
// a conversation gets a list_directory tool call, the next the final answer
// naming what the tool returned.
type fakeOpenAI struct {
	mu       sync.Mutex
	requests int
	// call is the tool call of the first turn; list_directory when empty.
	call, args string
	// steps, when set, are the tool calls of the first turns, one a turn,
	// instead of call; the answer then quotes every tool result.
	steps []toolStep
	// byAgent, when set, are the steps of each agent, told apart by the
	// system prompt, instead of steps.
	byAgent map[string][]toolStep
	// quick leaves out the pause before each answer, for conversations of
	// many steps nobody watches.
	quick bool
}

// agentOfPrompt finds the agent a system prompt is for.
var agentOfPrompt = regexp.MustCompile(`You are the "([^"]+)" agent`)

// chatRequest is what a fake model reads of a chat completions request:
// the agent its system prompt is for, the text of its last message and the
// tool results it carries.
type chatRequest struct {
	agent, last string
	results     []string
}

// readChat reads r as a chat completions request, or answers 400 and
// returns false.
func readChat(w http.ResponseWriter, r *http.Request) (chatRequest, bool) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return chatRequest{}, false
	}
	var out chatRequest
	if a := agentOfPrompt.FindStringSubmatch(fmt.Sprint(req.Messages[0].Content)); a != nil {
		out.agent = a[1]
	}
	for _, msg := range req.Messages {
		if msg.Role == "tool" {
			out.results = append(out.results, fmt.Sprint(msg.Content))
		}
	}
	out.last = fmt.Sprint(req.Messages[len(req.Messages)-1].Content)
	return out, true
}

// toolStep is one tool call the fake model makes.
type toolStep struct{ name, args string }

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	var results []string
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	f.mu.Lock()
	f.requests++
	f.mu.Unlock()
	// Give the status message time to show each step.
	if !f.quick {
		time.Sleep(1100 * time.Millisecond)
	}
	for _, m := range req.Messages {
		if m.Role == "tool" {
			results = append(results, fmt.Sprint(m.Content))
		}
	}
	steps := f.steps
	if f.byAgent != nil && len(req.Messages) > 0 {
		if m := agentOfPrompt.FindStringSubmatch(fmt.Sprint(req.Messages[0].Content)); m != nil {
			steps = f.byAgent[m[1]]
		}
	}
	last := req.Messages[len(req.Messages)-1]
	w.Header().Set("Content-Type", "application/json")
	if last.Role != "tool" || len(results) < len(steps) {
		name, args := f.call, f.args
		if name == "" {
			name, args = "list_directory", `{"path":"."}`
		}
		if len(results) < len(steps) {
			name, args = steps[len(results)].name, steps[len(results)].args
		}
		quoted, _ := json.Marshal(args)
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"fake",
			"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
			"tool_calls":[{"id":"call_%d","type":"function","function":{"name":%q,"arguments":%s}}]}}],
			"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, len(results)+1, name, quoted)
		return
	}
	text := "The workspace holds: " + fmt.Sprint(last.Content)
	if len(steps) > 0 {
		text = "Tool results:\n" + strings.Join(results, "\n")
	}
	answer, _ := json.Marshal(text)
	fmt.Fprintf(w, `{"id":"c2","object":"chat.completion","created":2,"model":"fake",
		"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":%s}}],
		"usage":{"prompt_tokens":20,"completion_tokens":7,"total_tokens":27}}`, answer)
}

func TestSendWaitRunsAToolCallAgainstAModelServer(t *testing.T) {
	fake := &fakeOpenAI{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf("models:\n  default:\n    provider: openai\n    base_url: %s/v1\n    model: fake-model\n", srv.URL)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	p := serve(t, dir, freeAddr(t))

	r := run(t, dir, p.env(), "send", "--wait", "--thread", "files", "@coder list the files")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "coder (mention @coder)")
	require.Contains(t, r.stdout, "The workspace holds:")
	fake.mu.Lock()
	require.Equal(t, 2, fake.requests, "one tool call, then the answer")
	fake.mu.Unlock()

	r = run(t, dir, p.env(), "thread", "files", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var msgs []struct {
		ID, Kind, Text string
		Edits          int
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &msgs))
	require.Len(t, msgs, 2, "one status message and the reply: %s", r.stdout)
	require.Equal(t, "status", msgs[0].Kind)
	require.GreaterOrEqual(t, msgs[0].Edits, 1, "the status message was edited in place as the agent worked")
	require.True(t, strings.HasPrefix(msgs[0].Text, "✅ coder finished"), msgs[0].Text)
	require.Equal(t, "reply", msgs[1].Kind)
	require.Contains(t, msgs[1].Text, "The workspace holds:")
}

func TestSendWaitWithNoModelExits1(t *testing.T) {
	dir := t.TempDir()
	p := serve(t, dir, freeAddr(t))
	r := run(t, dir, p.env(), "send", "--wait", "@coder list the files")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stdout, `agent "coder" has no model: set models.default in config.yaml (see config.example.yaml)`)
}

func TestAgentsListShowsSources(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "agents"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "agents", "coder.md"), []byte(
		"---\nname: coder\ndescription: Our own coder, tuned for this team.\nprofile: contributor\n---\nYou write Go the way this team does.\n"), 0o600))
	p := serve(t, dir, freeAddr(t))
	r := run(t, dir, p.env(), "agents", "list", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var list []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	sources := map[string]any{}
	for _, a := range list {
		require.ElementsMatch(t, []string{"name", "description", "source", "model", "profile", "mode", "tools"}, keysOf(a))
		sources[a["name"].(string)] = a["source"]
	}
	require.Equal(t, "user", sources["coder"])
	require.Equal(t, "builtin", sources["ops"])

	r = run(t, dir, p.env(), "agents", "show", "coder")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "You write Go the way this team does.")
	r = run(t, dir, p.env(), "agents", "show", "nobody")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, `no agent "nobody"`)
}

func TestDeniedToolCallIsAuditedWithoutSecrets(t *testing.T) {
	const secret = "sk-test-SECRETVALUE1234567890"
	fake := &fakeOpenAI{call: "write_file", args: `{"path":"notes.txt","content":"key ` + secret + `"}`}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf("models:\n  default:\n    provider: openai\n    base_url: %s/v1\n    model: fake\n    api_key: %s\n", srv.URL, secret)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	p := serve(t, dir, freeAddr(t))

	// The reviewer is read-only: writing a file is denied before it runs.
	r := run(t, dir, p.env(), "send", "--wait", "--thread", "audit", "@reviewer write notes")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	_, err := os.Stat(filepath.Join(dir, "data", "workspaces"))
	if err == nil {
		matches, _ := filepath.Glob(filepath.Join(dir, "data", "workspaces", "*", "notes.txt"))
		require.Empty(t, matches, "nothing executed")
	}

	r = run(t, dir, p.env(), "audit", "--decision", "deny", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var page struct {
		Items []struct{ Decision, Tool, Agent, Profile, Rule, Arguments string }
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &page))
	recs := page.Items
	require.NotEmpty(t, recs)
	require.Equal(t, "deny", recs[0].Decision)
	require.Equal(t, "write_file", recs[0].Tool)
	require.Equal(t, "reviewer", recs[0].Agent)
	require.Equal(t, "read-only", recs[0].Profile)
	require.NotContains(t, r.stdout, "SECRETVALUE", "no secret in the audit log")
	r = run(t, dir, p.env(), "approvals", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "no approvals waiting")
}

func TestPolicyCheckExitCodes(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(
		"profiles:\n  careful:\n    extends: contributor\n    approval: [\"make deploy\"]\n    approvers: [alice]\n"), 0o600))
	tests := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"--profile", "read-only", "--", "bash", `{"command":"ls -la"}`}, 0, "allow"},
		{[]string{"--profile", "read-only", "--", "bash", `{"command":"ls; rm -rf /"}`}, 3, "deny"},
		{[]string{"--profile", "contributor", "--", "write_file", `{"path":"a.txt","content":"x"}`}, 0, "allow"},
		{[]string{"--profile", "careful", "--", "bash", `{"command":"make deploy"}`}, 4, "needs_approval"},
		{[]string{"--profile", "nosuch", "--", "bash", `{"command":"ls"}`}, 2, ""},
		{[]string{"--profile", "read-only", "--", "bash", `not json`}, 2, ""},
		// Integration tools need what they declare, whatever their name says.
		{[]string{"--profile", "contributor", "--", "github_merge_pull_request", `{}`}, 3, "needs the merge permission"},
		{[]string{"--profile", "maintainer", "--", "github_merge_pull_request", `{}`}, 0, "allow"},
		{[]string{"--profile", "read-only", "--", "slack_post_message", `{"text":"hi"}`}, 3, "needs the push permission"},
		{[]string{"--profile", "read-only", "--", "agent_coder", `{"task":"x"}`}, 0, "allow"},
		{[]string{"--profile", "ops", "--", "github_delete_everything", `{}`}, 2, ""},
	}
	for _, tt := range tests {
		r := run(t, dir, nil, append([]string{"policy", "check", "--workspace", dir}, tt.args...)...)
		require.Equal(t, tt.code, r.code, "%v: %s %s", tt.args, r.stdout, r.stderr)
		require.Contains(t, r.stdout, tt.out)
	}
	r := run(t, dir, nil, "policy", "profiles", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	for _, name := range []string{"read-only", "contributor", "maintainer", "ops", "careful"} {
		require.Contains(t, r.stdout, `"`+name+`"`)
	}
}

func TestApprovalInTheLocalConsole(t *testing.T) {
	fake := &fakeOpenAI{call: "write_file", args: `{"path":"approved.txt","content":"ok"}`}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	const anaToken, bobToken = "ana-token-0123456789", "bob-token-0123456789"
	cfg := fmt.Sprintf("models:\n  default:\n    provider: openai\n    base_url: %s/v1\n    model: fake\n"+
		"profiles:\n  careful:\n    extends: contributor\n    approval: [write_file]\n    approvers: [ana]\n"+
		"server:\n  api_tokens:\n    - {name: ana, token: %s}\n    - {name: bob, token: %s}\n", srv.URL, anaToken, bobToken)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "agents"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "agents", "scribe.md"), []byte(
		"---\nname: scribe\ndescription: Writes files, carefully.\nprofile: careful\n---\nYou write files.\n"), 0o600))
	p := serve(t, dir, freeAddr(t))

	r := run(t, dir, p.env(), "send", "--thread", "ap", "@scribe write it")
	require.Equal(t, 0, r.code, r.stderr)

	var pending []struct{ ID, Tool, Status string }
	require.Eventually(t, func() bool {
		r := run(t, dir, p.env(), "approvals", "list", "--json")
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &pending) == nil && len(pending) == 1
	}, 15*time.Second, 100*time.Millisecond)
	require.Equal(t, "write_file", pending[0].Tool)
	// The thread is asked.
	require.Eventually(t, func() bool {
		r := run(t, dir, p.env(), "thread", "ap")
		return strings.Contains(r.stdout, "approvals approve "+pending[0].ID)
	}, 5*time.Second, 100*time.Millisecond)

	// The admin's token (the daemon's file) cannot speak for ana ...
	r = run(t, dir, p.env(), "approvals", "approve", pending[0].ID, "--by", "ana")
	require.Equal(t, 1, r.code, "the admin cannot approve as ana")
	require.Contains(t, r.stderr, `you are authenticated as "admin" and cannot decide approval "`+pending[0].ID+`" as "ana"`)
	require.Contains(t, r.stderr, "HTTP 403")
	// ... nor decide as itself, not being an approver; nor may bob.
	r = run(t, dir, p.env(), "approvals", "approve", pending[0].ID)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "admin may not decide")
	bob := append(p.env(), "SWITCHYARD_API_TOKEN="+bobToken)
	r = run(t, dir, bob, "approvals", "approve", pending[0].ID)
	require.Equal(t, 1, r.code, "a stranger cannot approve")
	require.Contains(t, r.stderr, "bob may not decide")
	// ana's own token decides as ana.
	ana := append(p.env(), "SWITCHYARD_API_TOKEN="+anaToken)
	r = run(t, dir, ana, "approvals", "approve", pending[0].ID)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "approved by ana")

	require.Eventually(t, func() bool {
		r := run(t, dir, p.env(), "workitems", "list", "--thread", "ap", "--json")
		var list []struct{ Status string }
		return json.Unmarshal([]byte(r.stdout), &list) == nil && len(list) == 1 && list[0].Status == "done"
	}, 15*time.Second, 100*time.Millisecond)
	matches, err := filepath.Glob(filepath.Join(dir, "data", "workspaces", "*", "approved.txt"))
	require.NoError(t, err)
	require.Len(t, matches, 1, "the approved call ran")

	r = run(t, dir, p.env(), "audit", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var page struct {
		Items []struct{ Decision, By string }
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &page))
	recs := page.Items
	var got []string
	for _, rec := range recs {
		if rec.By != "" {
			got = append(got, rec.Decision+" by "+rec.By)
		}
	}
	require.Equal(t, []string{"approved by ana", "not_approver by bob", "not_approver by admin", "wrong_identity by admin"}, got,
		"every attempt is on the record, newest first")
}

// TestModelRepeatingTheKeyNeverShowsIt runs an agent against a model
// server that answers 401 repeating the key it was sent, as servers do: the
// reply says the call was refused, and neither it, the thread nor the
// daemon's log holds the key.
func TestModelRepeatingTheKeyNeverShowsIt(t *testing.T) {
	const key = "sk-proj-e2eKEYrepeated0123456789abcdefghijklmnop"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s.","type":"invalid_request_error","code":"invalid_api_key"}}`, got)
	}))
	defer srv.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf("models:\n  default:\n    provider: openai\n    base_url: %s/v1\n    model: fake\n    api_key: %s\n", srv.URL, key)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	p := serve(t, dir, freeAddr(t))

	r := run(t, dir, p.env(), "send", "--wait", "--thread", "keyed", "@coder list the files")
	require.Contains(t, r.stdout+r.stderr, "HTTP 401 Unauthorized", "the reply says the model refused the key")
	require.NotContains(t, r.stdout+r.stderr, key)
	r = run(t, dir, p.env(), "thread", "keyed", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, key)

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait())
	require.NotContains(t, p.log.String(), key)
}

// TestModelFailuresReadOnceInTheThread runs an agent against a model server
// that stops an answer at max_tokens, and one that never answers within the
// model's timeout: the reply says what went wrong once, in words, followed
// by what the agent got to say, and send --wait exits 1.
func TestModelFailuresReadOnceInTheThread(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, ok := readChat(w, r)
		if !ok {
			return
		}
		if strings.Contains(req.last, "slow") {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"fake",
			"choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":"The fix is to"}}],
			"usage":{"prompt_tokens":20,"completion_tokens":7,"total_tokens":27}}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf("models:\n  default:\n    provider: openai\n    base_url: %s/v1\n    model: fake\n    timeout: 1s\n", srv.URL)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	p := serve(t, dir, freeAddr(t))

	const cutOff = "the answer was cut off at the model's max_tokens; raise max_tokens of the model in config.yaml"
	cases := []struct {
		thread, text, reply, summary, error string
	}{
		{
			thread: "cut", text: "@coder fix the build",
			reply:   "coder could not finish wi_1: " + cutOff + "\n\nThe fix is to",
			summary: "The fix is to", error: cutOff,
		},
		{
			thread: "slow", text: "@coder slow down",
			reply: "coder could not finish wi_2: model call failed: openai model fake: no answer within the model's timeout (1s)",
			error: "model call failed: openai model fake: no answer within the model's timeout (1s)",
		},
	}
	for _, tc := range cases {
		r := run(t, dir, p.env(), "send", "--wait", "--thread", tc.thread, tc.text)
		require.Equal(t, 1, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
		require.True(t, strings.HasSuffix(r.stdout, tc.reply+"\n"), r.stdout)

		r = run(t, dir, p.env(), "thread", tc.thread, "--json")
		require.Equal(t, 0, r.code, r.stderr)
		var msgs []struct{ ID, Kind, Text string }
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &msgs))
		require.Len(t, msgs, 2, r.stdout)
		require.Equal(t, "reply", msgs[1].Kind)
		require.Equal(t, tc.reply, msgs[1].Text)

		id := strings.TrimSuffix(msgs[1].ID, "/reply")
		r = run(t, dir, p.env(), "workitems", "show", id, "--json")
		require.Equal(t, 0, r.code, r.stderr)
		var wi struct{ Status, Summary, Error string }
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &wi))
		require.Equal(t, "failed", wi.Status)
		require.Equal(t, tc.error, wi.Error)
		if tc.summary != "" {
			require.Equal(t, tc.summary, wi.Summary, "the work item's summary is what the agent said, its error apart")
		}
	}
}

// TestAToolCallCutOffAtMaxTokensNeverRuns runs an agent whose model stops
// at max_tokens in the middle of a write_file call: nothing is written, the
// reply says the answer was cut off, and the thread's next message reaches
// the model as a conversation it takes (each call answered, as chat
// completions servers require).
func TestAToolCallCutOffAtMaxTokensNeverRuns(t *testing.T) {
	var mu sync.Mutex
	var requests int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role       string `json:"role"`
				ToolCallID string `json:"tool_call_id"`
				ToolCalls  []struct {
					ID string `json:"id"`
				} `json:"tool_calls"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		requests++
		mu.Unlock()
		answered := map[string]bool{}
		for _, m := range req.Messages {
			answered[m.ToolCallID] = true
		}
		for _, m := range req.Messages {
			for _, c := range m.ToolCalls {
				if !answered[c.ID] {
					w.WriteHeader(http.StatusBadRequest)
					fmt.Fprintf(w, `{"error":{"message":"tool call %s has no answer"}}`, c.ID)
					return
				}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if len(req.Messages) > 2 {
			fmt.Fprint(w, `{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Started over."}}]}`)
			return
		}
		fmt.Fprint(w, `{"choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":"Writing the notes.",
			"tool_calls":[{"id":"call_1","type":"function","function":{"name":"write_file","arguments":"{\"path\":\"notes.md\",\"content\":\"the first ha"}}]}}]}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf("models:\n  default:\n    provider: openai\n    base_url: %s/v1\n    model: fake\n", srv.URL)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	p := serve(t, dir, freeAddr(t))

	r := run(t, dir, p.env(), "send", "--wait", "--thread", "notes", "@coder write the notes")
	require.Equal(t, 1, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.True(t, strings.HasSuffix(r.stdout, "coder could not finish wi_1: the answer was cut off at the model's max_tokens; "+
		"raise max_tokens of the model in config.yaml\n\nWriting the notes.\n"), r.stdout)
	mu.Lock()
	require.Equal(t, 1, requests, "the cut call was not answered back to the model as if it had been refused")
	mu.Unlock()
	written, err := filepath.Glob(filepath.Join(dir, "data", "workspaces", "*", "notes.md"))
	require.NoError(t, err)
	require.Empty(t, written)

	r = run(t, dir, p.env(), "send", "--wait", "--thread", "notes", "try again")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.True(t, strings.HasSuffix(r.stdout, "Started over.\n"), r.stdout)
}

// Ctrl-C on send --wait stops the waiting, not the work: it says so in
// words, with the command that follows the work item, and exits 1.
func TestInterruptedSendWaitSaysTheWorkGoesOn(t *testing.T) {
	asked, done := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case asked <- struct{}{}:
		default:
		}
		select { // a model that takes its time
		case <-r.Context().Done():
		case <-done:
		}
	}))
	defer srv.Close()
	defer close(done)
	dir := t.TempDir()
	cfg := fmt.Sprintf("models:\n  default:\n    provider: openai\n    base_url: %s/v1\n    model: fake\n", srv.URL)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	p := serve(t, dir, freeAddr(t))

	cmd := exec.Command(binary, "send", "--wait", "--thread", "slow", "@coder look")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), p.env()...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	<-asked // the work item is running and send waits for it
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	err := cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, 1, exit.ExitCode())
	require.Equal(t, "wi_1 in local:slow → coder (mention @coder)\n", stdout.String())
	require.Equal(t, "switchyard: stopped waiting for wi_1; it goes on: switchyard workitems show wi_1\n", stderr.String())

	r := run(t, dir, p.env(), "workitems", "show", "wi_1", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"status": "running"`)
}
