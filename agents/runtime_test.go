package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
)

var (
	_ agents.ConversationStore = (*bolt.Store)(nil)
	_ agents.TranscriptStore   = (*bolt.Store)(nil)
	_ agents.Rerouter          = (*bolt.Store)(nil)
	_ agents.ModelSource       = llm.Models(nil)
)

// brain is a zero-latency model in the process: think answers each agent,
// and every request is recorded per agent.
type brain struct {
	think func(ctx context.Context, agent string, req llm.Request) (llm.Response, error)
	mu    sync.Mutex
	seen  map[string][]llm.Request
}

var agentOfPrompt = regexp.MustCompile(`You are the "([^"]+)" agent`)

func newBrain(think func(ctx context.Context, agent string, req llm.Request) (llm.Response, error)) *brain {
	return &brain{think: think, seen: map[string][]llm.Request{}}
}

func (b *brain) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	agent := agentOfPrompt.FindStringSubmatch(req.System)[1]
	req.Messages = slices.Clone(req.Messages)
	b.mu.Lock()
	b.seen[agent] = append(b.seen[agent], req)
	b.mu.Unlock()
	return b.think(ctx, agent, req)
}

func (b *brain) requests(agent string) []llm.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seen[agent]
}

func call(name, input string) llm.Response {
	return llm.Response{
		ToolCalls:  []llm.ToolCall{{ID: "call_" + name, Name: name, Input: json.RawMessage(input)}},
		StopReason: llm.StopToolUse, Usage: llm.Usage{InputTokens: 10, OutputTokens: 5},
	}
}

func answer(text string) llm.Response {
	return llm.Response{Text: text, StopReason: llm.StopEnd, Usage: llm.Usage{InputTokens: 10, OutputTokens: 5}}
}

func lastMessage(req llm.Request) llm.Message { return req.Messages[len(req.Messages)-1] }

// recorder is the reporter's side of bot.Progress.
type recorder struct {
	mu     sync.Mutex
	events []bot.ProgressEvent
}

func (r *recorder) Report(_ context.Context, ev bot.ProgressEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.events {
		out = append(out, ev.Kind+" "+ev.Text)
	}
	return out
}

type fixture struct {
	rt       *agents.Runtime
	store    *bolt.Store
	registry *tools.Registry
	spaces   tools.Workspaces
}

// plainSandbox runs commands as plain processes (sandbox.mode none): these
// tests are of the runtime, agents/tools tests bash under bubblewrap.
func plainSandbox(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.New(context.Background(), sandbox.Options{Mode: sandbox.ModeNone})
	require.NoError(t, err)
	return sb
}

// newFixture runs agents on model with a real bbolt store; files are extra
// user agents.
func newFixture(t *testing.T, model llm.Provider, files map[string]string, configure ...func(*agents.RuntimeOptions)) *fixture {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agents")
	for name, src := range files {
		writeAgent(t, dir, name+".md", src)
	}
	m, err := agents.NewManager(context.Background(), agents.ManagerOptions{Dir: dir})
	require.NoError(t, err)
	store := bolttest.Open(t, t.TempDir())
	reg, err := tools.NewRegistry(tools.Core(tools.CoreOptions{BashTimeout: 20 * time.Second, Sandbox: plainSandbox(t)})...)
	require.NoError(t, err)
	opts := agents.RuntimeOptions{
		Agents:        m,
		Tools:         reg,
		Workspaces:    tools.Workspaces{Root: filepath.Join(t.TempDir(), "workspaces")},
		Conversations: store,
		Transcripts:   store,
		Rerouter:      store,
	}
	if model != nil {
		opts.Models = llm.Models{"default": model}
	}
	for _, c := range configure {
		c(&opts)
	}
	rt, err := agents.NewRuntime(opts)
	require.NoError(t, err)
	return &fixture{rt: rt, store: store, registry: reg, spaces: opts.Workspaces}
}

var thread = bot.LocalThread("t1")

func request(agent, text string) bot.RunRequest {
	return bot.RunRequest{
		Job:       bot.Job{ID: "job_1", Agent: agent, Thread: thread},
		WorkItems: []bot.WorkItem{{ID: "wi_1", Kind: bot.KindLocalMessage, Actor: "alice", Text: text, Thread: thread}},
		Agent:     agent,
		Thread:    thread,
	}
}

// chatServer speaks OpenAI chat completions: a user message as the last
// message gets a list_directory call, a tool result the final answer, which
// quotes what the tool returned.
func chatServer(t *testing.T) (*httptest.Server, func() []map[string]any) {
	var mu sync.Mutex
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v1/chat/completions", r.URL.Path)
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		require.NoError(t, json.Unmarshal(raw, &body))
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		msgs := body["messages"].([]any)
		last := msgs[len(msgs)-1].(map[string]any)
		w.Header().Set("Content-Type", "application/json")
		if last["role"] == "tool" {
			content, _ := json.Marshal("The workspace holds: " + strings.TrimSpace(last["content"].(string)))
			fmt.Fprintf(w, `{"id":"c2","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop",
				"message":{"role":"assistant","content":%s}}],"usage":{"prompt_tokens":200,"completion_tokens":20,"total_tokens":220}}`, content)
			return
		}
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls",
			"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"list_directory","arguments":"{}"}}]}}],
			"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110}}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(bodies)
	}
}

func TestRunAgainstOpenAICompatibleServer(t *testing.T) {
	srv, bodies := chatServer(t)
	model, err := llm.New(llm.Config{Provider: "openai", BaseURL: srv.URL + "/v1", Model: "local-model"}, nil)
	require.NoError(t, err)
	f := newFixture(t, model, nil)
	ws, err := f.spaces.Dir(thread.Key())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(ws, "README.md"), []byte("# app\n"), 0o644))

	ctx := context.Background()
	req := request("coder", "@coder list the files")
	req.Continuation = bot.Continuation{SessionKey: thread.Key(), Agent: "coder", Earlier: []bot.EarlierWork{
		{ID: "wi_0", Agent: "coder", Status: bot.StatusDone, Text: "set up the repo", Summary: "created the skeleton"},
	}}
	progress := &recorder{}
	res, err := f.rt.Run(ctx, req, progress)
	require.NoError(t, err)
	require.Equal(t, bot.RunResult{
		Status: bot.ResultSuccess, Reply: "The workspace holds: README.md (6 bytes)", TokensUsed: 330, TurnsUsed: 2,
	}, res)
	require.Equal(t, []string{
		"turn_started turn 1",
		"tool_called listing files",
		"tool_finished list_directory done",
		"turn_started turn 2",
	}, progress.lines())

	sent := bodies()
	require.Len(t, sent, 2)
	msgs := sent[0]["messages"].([]any)
	system := msgs[0].(map[string]any)["content"].(string)
	require.Contains(t, system, "You are the coder agent of Switchyard")  // instructions
	require.Contains(t, system, "Tools:\n- bash: ")                       // tools...
	require.Contains(t, system, "- agent_reviewer: Reviews code changes") // ...and agents apart
	require.NotContains(t, system, "agent_ops", "ops works by handoff")   //
	require.Contains(t, system, "handoff_to gives this whole work item")  //
	require.Contains(t, system, "created the skeleton")                   // the continuation
	require.Equal(t, "[local.message from @alice]\n@coder list the files", msgs[1].(map[string]any)["content"])
	require.Len(t, sent[0]["tools"].([]any), 6+3+1, "core tools, the tool-mode agents but coder, handoff_to")

	transcripts, err := f.rt.Transcripts(ctx, "job_1")
	require.NoError(t, err)
	require.Len(t, transcripts, 1)
	require.Equal(t, "job_1", transcripts[0].RunID)
	require.Equal(t, "coder", transcripts[0].Agent)
	require.Equal(t, "default", transcripts[0].Model)
	require.Len(t, transcripts[0].Messages, 4)
	require.Equal(t, bot.ResultSuccess, transcripts[0].Response.Status)

	// A follow-up in the thread continues the conversation.
	req = request("coder", "and again")
	req.Job.ID = "job_2"
	_, err = f.rt.Run(ctx, req, nil)
	require.NoError(t, err)
	third := bodies()[2]["messages"].([]any)
	require.Len(t, third, 1+4+1, "system, the first run's four messages, the new one")
	require.Equal(t, "[local.message from @alice]\nand again", third[5].(map[string]any)["content"])

	// Reset forgets it.
	n, err := f.rt.ResetThread(ctx, thread.Key())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	req.Job.ID = "job_3"
	_, err = f.rt.Run(ctx, req, nil)
	require.NoError(t, err)
	require.Len(t, bodies()[4]["messages"].([]any), 2)
}

func TestNoModel(t *testing.T) {
	f := newFixture(t, nil, map[string]string{
		"fancy": "---\nname: fancy\ndescription: Uses a named model.\nmodel: fast\n---\n",
	})
	progress := &recorder{}
	res, err := f.rt.Run(context.Background(), request("coder", "hi"), progress)
	require.NoError(t, err)
	require.Equal(t, bot.ResultError, res.Status)
	require.Equal(t, `agent "coder" has no model: set models.default in config.yaml (see config.example.yaml)`, res.Reply)
	require.Equal(t, res.Reply, res.Error)
	require.Empty(t, progress.lines())

	res, err = f.rt.Run(context.Background(), request("fancy", "hi"), nil)
	require.NoError(t, err)
	require.Equal(t, `agent "fancy" uses model "fast", which is not configured: add models.fast to config.yaml (see config.example.yaml)`, res.Reply)

	res, err = f.rt.Run(context.Background(), request("nobody", "hi"), nil)
	require.NoError(t, err)
	require.Equal(t, bot.ResultError, res.Status)
	require.Contains(t, res.Reply, `agent "nobody" is not defined (agents: builder, coder, docs, fancy, ops, reviewer, triage)`)
}

func TestToolRefusalsReachTheModel(t *testing.T) {
	bound, err := tools.NewCommand(tools.CommandSpec{
		Name: "execute_sql", Package: "db-tools", Command: "sh", Args: []string{"-c", "touch sql-ran"}, RequiredAgent: "dba",
		Permissions: []tools.Permission{tools.PermExec}, Sandbox: plainSandbox(t),
	})
	require.NoError(t, err)
	steps := []llm.Response{
		call("bash", `{"command":"touch bash-ran"}`),
		call("execute_sql", `{"query":"drop table users"}`),
		call("write_file", `{"path":"../../escaped","content":"x"}`),
		call("read_file", `{"path":"/etc/passwd"}`),
		answer("could not do it"),
	}
	model := newBrain(func(_ context.Context, _ string, req llm.Request) (llm.Response, error) {
		return steps[(len(req.Messages)-1)/2], nil
	})
	f := newFixture(t, model, map[string]string{
		"reader": "---\nname: reader\ndescription: Reads.\ntools: [read_file, write_file, execute_sql]\n---\n",
	})
	require.NoError(t, f.registry.Register(bound))
	progress := &recorder{}
	res, err := f.rt.Run(context.Background(), request("reader", "try everything"), progress)
	require.NoError(t, err)
	require.Equal(t, "could not do it", res.Reply)

	reqs := model.requests("reader")
	require.Len(t, reqs, 5)
	var results []string
	for _, r := range reqs[1:] {
		m := lastMessage(r)
		require.Equal(t, llm.RoleTool, m.Role)
		require.True(t, m.IsError)
		results = append(results, m.Content)
	}
	require.Equal(t, []string{
		`refused: tool "bash" is not in the tools list of agent "reader"`,
		`refused: tool "execute_sql" may only be called by agent "dba" (required_agent), not by "reader"`,
		`refused: path "../../escaped" is outside the workspace`,
		`refused: path "/etc/passwd" is absolute; use a path relative to the workspace`,
	}, results)
	ws, err := f.spaces.Dir(thread.Key())
	require.NoError(t, err)
	for _, marker := range []string{"bash-ran", "sql-ran", "../../escaped"} {
		require.NoFileExists(t, filepath.Join(ws, marker))
	}
	require.Contains(t, progress.lines(), "tool_finished execute_sql refused")
}

// relay makes each agent call the next of next (first turn) and then answer
// with what it got back; an agent without a next answers at once.
func relay(next map[string]string) func(context.Context, string, llm.Request) (llm.Response, error) {
	return func(_ context.Context, agent string, req llm.Request) (llm.Response, error) {
		last := lastMessage(req)
		if last.Role == llm.RoleTool {
			return answer(agent + " got: " + last.Content), nil
		}
		if n, ok := next[agent]; ok {
			return call("agent_"+n, fmt.Sprintf(`{"task":"help %s","context":"from %s"}`, agent, agent)), nil
		}
		return answer(agent + " did it"), nil
	}
}

func chainAgents(names ...string) map[string]string {
	files := map[string]string{}
	for _, n := range names {
		files[n] = fmt.Sprintf("---\nname: %s\ndescription: Agent %s.\n---\nYou are %s.\n", n, n, n)
	}
	return files
}

func TestAgentAsTool(t *testing.T) {
	model := newBrain(relay(map[string]string{"a": "b"}))
	f := newFixture(t, model, chainAgents("a", "b"))
	progress := &recorder{}
	res, err := f.rt.Run(context.Background(), request("a", "do the thing"), progress)
	require.NoError(t, err)
	require.Equal(t, bot.ResultSuccess, res.Status)
	require.Equal(t, `a got: {"status":"success","content":"b did it","tokens_used":15,"turns_used":1}`, res.Reply)
	require.Equal(t, 15+15+15, res.TokensUsed, "the callee's tokens count against the caller")
	require.Equal(t, 2, res.TurnsUsed)

	// The callee sees its task and the invocation context, not a's history.
	b := model.requests("b")
	require.Len(t, b, 1)
	require.Len(t, b[0].Messages, 1)
	require.Equal(t, "Task from the a agent:\nhelp a\n\nContext:\nfrom a\n\n"+
		"The request that started this work, for reference:\n[local.message from @alice]\ndo the thing\n", b[0].Messages[0].Content)
	require.Contains(t, b[0].System, `You were called by the "a" agent`)
	require.Contains(t, progress.lines(), "tool_called asking @b: help a")
	require.Contains(t, progress.lines(), "turn_started @b: turn 1")

	transcripts, err := f.rt.Transcripts(context.Background(), "job_1")
	require.NoError(t, err)
	require.Len(t, transcripts, 2)
	require.Equal(t, []string{"job_1.1", "job_1"}, []string{transcripts[0].RunID, transcripts[1].RunID})
	require.Equal(t, "job_1", transcripts[0].ParentRunID)
	require.Equal(t, "b", transcripts[0].Agent)
}

func TestAgentChainsBounded(t *testing.T) {
	cases := []struct {
		name   string
		next   map[string]string
		depth  int
		refuse string // the tool result the last caller gets
		caller string
		never  string // an agent that must not have run
	}{
		{
			name:   "deeper than the limit",
			next:   map[string]string{"a": "b", "b": "c", "c": "d", "d": "e"},
			depth:  3,
			caller: "d",
			refuse: "refused: agent chain too deep: a → b → c → d → e would be 4 calls deep, the limit is 3",
			never:  "e",
		},
		{
			name:   "at the limit",
			next:   map[string]string{"a": "b", "b": "c"},
			depth:  2,
			caller: "c",
		},
		{
			name:   "cycle",
			next:   map[string]string{"a": "b", "b": "c", "c": "a"},
			depth:  5,
			caller: "c",
			refuse: `refused: cycle: a → b → c → a; "a" is already working on this request further up the chain`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			model := newBrain(relay(tc.next))
			f := newFixture(t, model, chainAgents("a", "b", "c", "d", "e"), func(o *agents.RuntimeOptions) { o.MaxDepth = tc.depth })
			res, err := f.rt.Run(context.Background(), request("a", "go"), nil)
			require.NoError(t, err)
			require.Equal(t, bot.ResultSuccess, res.Status, "a refusal is a result the caller works with")
			if tc.never != "" {
				require.Empty(t, model.requests(tc.never))
			}
			reqs := model.requests(tc.caller)
			if tc.refuse == "" {
				require.Len(t, reqs, 1, "the last agent answers directly")
				return
			}
			require.Len(t, reqs, 2)
			got := lastMessage(reqs[1])
			require.True(t, got.IsError)
			require.True(t, strings.HasPrefix(got.Content, tc.refuse), got.Content)
		})
	}
}

func TestHandoff(t *testing.T) {
	ctx := context.Background()
	model := newBrain(func(_ context.Context, agent string, req llm.Request) (llm.Response, error) {
		if last := lastMessage(req); last.Role == llm.RoleTool {
			return answer("handoff failed: " + last.Content), nil
		}
		return call("handoff_to", `{"agent":"@coder","reason":"this needs a code change"}`), nil
	})
	f := newFixture(t, model, nil)
	now := time.Now()
	ingested, err := f.store.Ingest(ctx, bot.IngestRequest{
		Event: bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, DeliveryID: "d1", Text: "the login page crashes", Thread: thread},
		Route: &bot.Route{Agent: "triage", Kind: bot.RouteDefault, Reason: "default"}, Now: now, DedupUntil: now.Add(time.Hour),
	})
	require.NoError(t, err)
	wi := ingested.WorkItem

	req := request("triage", wi.Text)
	req.WorkItems[0].ID = wi.ID
	res, err := f.rt.Run(ctx, req, nil)
	require.NoError(t, err)
	require.Equal(t, bot.ResultSuccess, res.Status)
	require.Equal(t, "Handed off to @coder: this needs a code change", res.Reply)
	got, err := f.store.GetWorkItem(ctx, wi.ID)
	require.NoError(t, err)
	require.Equal(t, "coder", got.Route.Agent)
	require.Len(t, got.Hops, 1)
	require.Equal(t, bot.Hop{From: "triage", To: "coder", Reason: "this needs a code change", At: got.Hops[0].At,
		Ceilings: []bot.Ceiling{{Profile: "read-only", Reason: "handed off by @triage, read-only"}}}, got.Hops[0],
		"the hop keeps the rights of the run that handed off")

	// The core's hop limit holds: the third handoff back and forth is the
	// last.
	for _, to := range []string{"triage", "coder"} {
		_, err := f.store.RerouteWorkItem(ctx, wi.ID, bot.Hop{To: to, Reason: "ping-pong"})
		require.NoError(t, err)
	}
	req.Job.ID = "job_2"
	res, err = f.rt.Run(ctx, req, nil)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(res.Reply, "handoff failed: refused: handoff refused: work item "+wi.ID+" was handed off 3 times already (limit 3)"), res.Reply)
	got, err = f.store.GetWorkItem(ctx, wi.ID)
	require.NoError(t, err)
	require.Len(t, got.Hops, 3)
}

func TestLimitsAndFailures(t *testing.T) {
	looping := func(_ context.Context, _ string, req llm.Request) (llm.Response, error) {
		r := call("list_directory", `{}`)
		r.Text = fmt.Sprintf("still looking (%d)", len(req.Messages))
		return r, nil
	}
	blocking := func(ctx context.Context, _ string, _ llm.Request) (llm.Response, error) {
		<-ctx.Done()
		return llm.Response{}, &llm.Error{Provider: "openai", Model: "m", Err: ctx.Err()}
	}
	cases := []struct {
		name     string
		front    string
		think    func(context.Context, string, llm.Request) (llm.Response, error)
		cancel   bool
		status   string
		reply    string
		err      string // when the reply is what the agent said before it
		progress string
	}{
		{
			name: "max_turns", front: "max_turns: 2", think: looping, status: bot.ResultError,
			reply: "still looking (3)", err: "stopped: reached max_turns (2) before a final answer",
			progress: "limit_reached stopped: reached max_turns (2) before a final answer",
		},
		{
			name: "max_tokens", front: "max_tokens: 25", think: looping, status: bot.ResultError,
			reply: "still looking (3)", err: "stopped: used 30 tokens, over max_tokens (25), before a final answer",
		},
		{
			name: "time_budget", front: "time_budget: 200ms", think: blocking, status: bot.ResultError,
			reply:    "stopped: time_budget (200ms) used up before a final answer",
			progress: "limit_reached stopped: time_budget (200ms) used up before a final answer",
		},
		{
			name: "job cancelled", think: blocking, cancel: true, status: bot.ResultError,
			reply: "cancelled: context canceled",
		},
		{
			name: "model refuses", status: bot.ResultRefused, reply: "I can't help with that.",
			think: func(context.Context, string, llm.Request) (llm.Response, error) {
				return llm.Response{Refusal: "I can't help with that.", StopReason: llm.StopRefusal}, nil
			},
		},
		{
			name: "model fails", status: bot.ResultError, reply: "model call failed: openai model m: HTTP 401 Unauthorized: bad key",
			think: func(context.Context, string, llm.Request) (llm.Response, error) {
				return llm.Response{}, &llm.Error{Provider: "openai", Model: "m", StatusCode: 401, Message: "bad key"}
			},
		},
		{
			name: "answer cut off", status: bot.ResultError,
			reply: "The fix is to", err: "the answer was cut off at the model's max_tokens; raise max_tokens of the model in config.yaml",
			think: func(context.Context, string, llm.Request) (llm.Response, error) {
				return llm.Response{Text: "The fix is to", StopReason: llm.StopMaxTokens}, nil
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, newBrain(tc.think), map[string]string{
				"worker": "---\nname: worker\ndescription: Works.\n" + tc.front + "\n---\n",
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			progress := &recorder{}
			res, err := f.rt.Run(ctx, request("worker", "go"), progress)
			require.NoError(t, err)
			require.Equal(t, tc.status, res.Status)
			require.Equal(t, tc.reply, res.Reply)
			if tc.err != "" {
				require.Equal(t, tc.err, res.Error)
			}
			if tc.progress != "" {
				require.Contains(t, progress.lines(), tc.progress)
			}
		})
	}
}

func TestSecretsRedacted(t *testing.T) {
	const configured = "configured-secret-value"
	const token = "ghp_0123456789abcdefghijABCDEFGHIJ"
	model := newBrain(func(_ context.Context, _ string, req llm.Request) (llm.Response, error) {
		if lastMessage(req).Role == llm.RoleTool {
			return answer("found " + token + " and " + configured), nil
		}
		return call("bash", `{"command":"echo `+configured+`"}`), nil
	})
	f := newFixture(t, model, nil, func(o *agents.RuntimeOptions) { o.Redactor = bot.NewRedactor(configured) })
	progress := &recorder{}
	res, err := f.rt.Run(context.Background(), request("coder", "what is the key?"), progress)
	require.NoError(t, err)
	require.Equal(t, "found [REDACTED] and [REDACTED]", res.Reply)

	// The model never reads the secret the tool printed ...
	require.Equal(t, "[REDACTED]\n", lastMessage(model.requests("coder")[1]).Content)
	// ... the status message does not show the command's secret ...
	require.Contains(t, progress.lines(), "tool_called running `echo [REDACTED]`")
	require.NotContains(t, strings.Join(progress.lines(), "\n"), configured)
	// ... and nothing stored keeps it.
	conv, err := f.store.LoadConversation(context.Background(), thread.Key(), "coder")
	require.NoError(t, err)
	docs, err := f.store.ListTranscripts(context.Background(), "job_1")
	require.NoError(t, err)
	require.Len(t, docs, 1)
	for _, stored := range [][]byte{conv, docs[0]} {
		require.NotContains(t, string(stored), configured)
		require.NotContains(t, string(stored), token)
		require.Contains(t, string(stored), "[REDACTED]")
		require.True(t, json.Valid(stored))
	}
}

func TestSeveralWorkItemsAnsweredTogether(t *testing.T) {
	model := newBrain(func(context.Context, string, llm.Request) (llm.Response, error) { return answer("both done"), nil })
	f := newFixture(t, model, nil)
	req := request("coder", "first")
	req.WorkItems = append(req.WorkItems, bot.WorkItem{ID: "wi_2", Kind: bot.KindSlackMessage, Actor: "bob", Text: "second"})
	_, err := f.rt.Run(context.Background(), req, nil)
	require.NoError(t, err)
	require.Equal(t, "Several messages arrived in this thread; answer them together.\n\n"+
		"1. [local.message from @alice]\nfirst\n\n2. [slack.message from @bob]\nsecond\n",
		model.requests("coder")[0].Messages[0].Content)
}

func TestInvoke(t *testing.T) {
	model := newBrain(relay(nil))
	f := newFixture(t, model, nil)
	resp := f.rt.Invoke(context.Background(), "reviewer", "review main.go", agents.InvocationContext{
		ConversationSummary: "a PR adding retries", UserMessage: "@reviewer please", CorrelationID: "corr-1",
	}, thread.Key(), nil)
	require.Equal(t, agents.AgentResponse{Status: bot.ResultSuccess, Content: "reviewer did it", TokensUsed: 15, TurnsUsed: 1}, resp)
	require.Contains(t, model.requests("reviewer")[0].Messages[0].Content, "a PR adding retries")

	resp = f.rt.Invoke(context.Background(), "ghost", "x", agents.InvocationContext{}, "", nil)
	require.Equal(t, bot.ResultError, resp.Status)
	require.Equal(t, `agent "ghost" is not defined`, resp.Error)
}

// approvalPolicy wants every write_file approved.
type approvalPolicy struct{}

func (approvalPolicy) Check(_ context.Context, call tools.Call) tools.Decision {
	if call.Tool.Name == "write_file" {
		return tools.Decision{Verdict: tools.NeedsApproval, Reason: "write_file needs approval"}
	}
	return tools.Decision{Verdict: tools.Allow}
}

type approveAll struct{}

func (approveAll) Approve(context.Context, tools.Call, string) (bool, error) { return true, nil }

func TestStatusSaysTheRunWaitsForAnApproval(t *testing.T) {
	steps := []llm.Response{call("write_file", `{"path":"a.txt","content":"x"}`), answer("written")}
	model := newBrain(func(_ context.Context, _ string, req llm.Request) (llm.Response, error) {
		return steps[(len(req.Messages)-1)/2], nil
	})
	f := newFixture(t, model, nil, func(o *agents.RuntimeOptions) {
		o.Policy, o.Approver = approvalPolicy{}, approveAll{}
	})
	progress := &recorder{}
	res, err := f.rt.Run(context.Background(), request("coder", "write it"), progress)
	require.NoError(t, err)
	require.Equal(t, "written", res.Reply)
	lines := progress.lines()
	i := slices.Index(lines, "note waiting for a person to approve write_file")
	require.GreaterOrEqual(t, i, 0, "%q", lines)
	require.Contains(t, lines[i+1:], "tool_finished write_file done")
}

// An answer cut off at max_tokens in the middle of a tool call runs none of
// its calls (a file's content may be half there), ends the run saying so,
// and answers each call in the conversation, so the thread's next message
// is sent to the model as a conversation it takes.
func TestToolCallsOfAnAnswerCutOffNeverRun(t *testing.T) {
	model := newBrain(func(_ context.Context, _ string, req llm.Request) (llm.Response, error) {
		if len(req.Messages) > 1 {
			return answer("started over"), nil
		}
		r := call("write_file", `{"path":"notes.md","content":"the first half"}`)
		r.Text, r.StopReason = "Writing the notes.", llm.StopMaxTokens
		return r, nil
	})
	f := newFixture(t, model, nil)
	res, err := f.rt.Run(context.Background(), request("coder", "write the notes"), &recorder{})
	require.NoError(t, err)
	require.Equal(t, bot.ResultError, res.Status)
	require.Equal(t, "the answer was cut off at the model's max_tokens; raise max_tokens of the model in config.yaml", res.Error)
	require.Equal(t, "Writing the notes.", res.Reply)
	dir, err := f.spaces.Dir(thread.Key())
	require.NoError(t, err)
	require.NoFileExists(t, filepath.Join(dir, "notes.md"))

	res, err = f.rt.Run(context.Background(), request("coder", "try again"), &recorder{})
	require.NoError(t, err)
	require.Equal(t, "started over", res.Reply)
	sent := model.requests("coder")[1].Messages
	require.Len(t, sent, 4, "the question, the cut answer, its call answered, the next question")
	require.Equal(t, llm.RoleTool, sent[2].Role)
	require.Equal(t, "call_write_file", sent[2].ToolCallID)
	require.True(t, sent[2].IsError)
	require.Equal(t, "not executed: the answer was cut off at max_tokens before the call was complete", sent[2].Content)
}
