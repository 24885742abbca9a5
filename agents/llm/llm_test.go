package llm_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/bot"
)

// wire is a fake model server: each request gets the next scripted reply,
// and every request is recorded with when it arrived.
type wire struct {
	t       *testing.T
	mu      sync.Mutex
	replies []func(w http.ResponseWriter)
	reqs    []recorded
}

type recorded struct {
	path   string
	header http.Header
	body   map[string]any
	at     time.Time
}

func newWire(t *testing.T, replies ...func(w http.ResponseWriter)) (*wire, *httptest.Server) {
	w := &wire{t: t, replies: replies}
	srv := httptest.NewServer(w)
	t.Cleanup(srv.Close)
	return w, srv
}

func (s *wire) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	s.mu.Lock()
	n := len(s.reqs)
	s.reqs = append(s.reqs, recorded{path: r.URL.Path, header: r.Header.Clone(), body: body, at: time.Now()})
	s.mu.Unlock()
	if n >= len(s.replies) {
		http.Error(w, `{"error":{"message":"unexpected request"}}`, http.StatusTeapot)
		return
	}
	s.replies[n](w)
}

func (s *wire) requests() []recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recorded(nil), s.reqs...)
}

func jsonReply(status int, body string, headers ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

const (
	openaiText = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m",
		"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"All tests pass."}}],
		"usage":{"prompt_tokens":11,"completion_tokens":4,"total_tokens":15}}`
	openaiToolCall = `{"id":"chatcmpl-2","object":"chat.completion","created":1,"model":"m",
		"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
		"tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"main.go\"}"}}]}}],
		"usage":{"prompt_tokens":20,"completion_tokens":7,"total_tokens":27}}`
	anthropicText = `{"id":"msg_1","type":"message","role":"assistant","model":"m",
		"content":[{"type":"text","text":"All tests pass."}],
		"stop_reason":"end_turn","usage":{"input_tokens":11,"output_tokens":4}}`
	anthropicToolCall = `{"id":"msg_2","type":"message","role":"assistant","model":"m",
		"content":[{"type":"text","text":"Reading it."},{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"main.go"}}],
		"stop_reason":"tool_use","usage":{"input_tokens":20,"output_tokens":7}}`
)

type flavour struct {
	name     string
	cfg      func(url string) llm.Config
	path     string
	text     string
	toolCall string
	errBody  string
}

var flavours = []flavour{
	{
		name: "openai",
		cfg: func(url string) llm.Config {
			return llm.Config{Provider: "openai", BaseURL: url + "/v1", APIKey: "sk-test-key-123456", Model: "m"}
		},
		path:     "/v1/chat/completions",
		text:     openaiText,
		toolCall: openaiToolCall,
		errBody:  `{"error":{"message":"model m does not exist","type":"invalid_request_error"}}`,
	},
	{
		name: "anthropic",
		cfg: func(url string) llm.Config {
			return llm.Config{Provider: "anthropic", BaseURL: url, APIKey: "sk-ant-test-123456", Model: "m"}
		},
		path:     "/v1/messages",
		text:     anthropicText,
		toolCall: anthropicToolCall,
		errBody:  `{"type":"error","error":{"type":"invalid_request_error","message":"model m does not exist"}}`,
	},
}

func provider(t *testing.T, f flavour, url string) llm.Provider {
	t.Helper()
	p, err := llm.New(f.cfg(url), nil)
	require.NoError(t, err)
	return p
}

func TestPlainAnswer(t *testing.T) {
	for _, f := range flavours {
		t.Run(f.name, func(t *testing.T) {
			w, srv := newWire(t, jsonReply(200, f.text))
			temp := 0.2
			res, err := provider(t, f, srv.URL).Chat(context.Background(), llm.Request{
				System:      "You are terse.",
				Messages:    []llm.Message{{Role: llm.RoleUser, Content: "run the tests"}},
				Temperature: &temp,
			})
			require.NoError(t, err)
			require.Equal(t, "All tests pass.", res.Text)
			require.Empty(t, res.ToolCalls)
			require.Equal(t, llm.StopEnd, res.StopReason)
			require.Equal(t, llm.Usage{InputTokens: 11, OutputTokens: 4}, res.Usage)

			reqs := w.requests()
			require.Len(t, reqs, 1)
			require.Equal(t, f.path, reqs[0].path)
			require.Equal(t, "m", reqs[0].body["model"])
			require.Equal(t, 0.2, reqs[0].body["temperature"])
			if f.name == "openai" {
				require.Equal(t, "Bearer sk-test-key-123456", reqs[0].header.Get("Authorization"))
				msgs := reqs[0].body["messages"].([]any)
				require.Equal(t, "system", msgs[0].(map[string]any)["role"])
				require.Equal(t, "run the tests", msgs[1].(map[string]any)["content"])
				require.EqualValues(t, llm.DefaultMaxTokens, reqs[0].body["max_tokens"])
			} else {
				require.Equal(t, "sk-ant-test-123456", reqs[0].header.Get("X-Api-Key"))
				require.Equal(t, "You are terse.", reqs[0].body["system"].([]any)[0].(map[string]any)["text"])
				require.EqualValues(t, llm.DefaultMaxTokens, reqs[0].body["max_tokens"])
			}
		})
	}
}

func TestToolCallRoundTrip(t *testing.T) {
	tools := []llm.ToolDef{{
		Name:        "read_file",
		Description: "Read a file.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`),
	}}
	for _, f := range flavours {
		t.Run(f.name, func(t *testing.T) {
			w, srv := newWire(t, jsonReply(200, f.toolCall), jsonReply(200, f.text))
			p := provider(t, f, srv.URL)
			msgs := []llm.Message{{Role: llm.RoleUser, Content: "what does main.go do?"}}
			res, err := p.Chat(context.Background(), llm.Request{Messages: msgs, Tools: tools})
			require.NoError(t, err)
			require.Equal(t, llm.StopToolUse, res.StopReason)
			require.Len(t, res.ToolCalls, 1)
			call := res.ToolCalls[0]
			require.Equal(t, "read_file", call.Name)
			require.JSONEq(t, `{"path":"main.go"}`, string(call.Input))
			require.Equal(t, 27, res.Usage.Total())

			msgs = append(msgs,
				llm.Message{Role: llm.RoleAssistant, Content: res.Text, ToolCalls: res.ToolCalls},
				llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Content: "package main"},
			)
			res, err = p.Chat(context.Background(), llm.Request{Messages: msgs, Tools: tools})
			require.NoError(t, err)
			require.Equal(t, "All tests pass.", res.Text)

			reqs := w.requests()
			require.Len(t, reqs, 2)
			sentTools := reqs[0].body["tools"].([]any)
			require.Len(t, sentTools, 1)
			second := reqs[1].body["messages"].([]any)
			if f.name == "openai" {
				fn := sentTools[0].(map[string]any)["function"].(map[string]any)
				require.Equal(t, "read_file", fn["name"])
				require.Equal(t, []any{"path"}, fn["parameters"].(map[string]any)["required"])
				require.Len(t, second, 3)
				asst := second[1].(map[string]any)
				require.Equal(t, "call_1", asst["tool_calls"].([]any)[0].(map[string]any)["id"])
				tool := second[2].(map[string]any)
				require.Equal(t, "tool", tool["role"])
				require.Equal(t, "call_1", tool["tool_call_id"])
			} else {
				tl := sentTools[0].(map[string]any)
				require.Equal(t, "read_file", tl["name"])
				schema := tl["input_schema"].(map[string]any)
				require.Equal(t, "object", schema["type"])
				require.Equal(t, false, schema["additionalProperties"])
				require.Len(t, second, 3)
				result := second[2].(map[string]any)
				require.Equal(t, "user", result["role"])
				block := result["content"].([]any)[0].(map[string]any)
				require.Equal(t, "tool_result", block["type"])
				require.Equal(t, "toolu_1", block["tool_use_id"])
			}
		})
	}
}

func TestRetries(t *testing.T) {
	cases := []struct {
		name     string
		first    func(f flavour) func(http.ResponseWriter)
		minDelay time.Duration
	}{
		{
			name: "429 honours Retry-After",
			first: func(f flavour) func(http.ResponseWriter) {
				return jsonReply(429, `{"error":{"message":"slow down"}}`, "Retry-After", "1")
			},
			minDelay: 900 * time.Millisecond,
		},
		{
			name: "500 then success",
			first: func(f flavour) func(http.ResponseWriter) {
				return jsonReply(500, `{"error":{"message":"overloaded"}}`)
			},
		},
	}
	for _, tc := range cases {
		for _, f := range flavours {
			t.Run(tc.name+"/"+f.name, func(t *testing.T) {
				w, srv := newWire(t, tc.first(f), jsonReply(200, f.text))
				res, err := provider(t, f, srv.URL).Chat(context.Background(), llm.Request{
					Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}},
				})
				require.NoError(t, err)
				require.Equal(t, "All tests pass.", res.Text)
				reqs := w.requests()
				require.Len(t, reqs, 2, "one retry, no double retrying")
				require.GreaterOrEqual(t, reqs[1].at.Sub(reqs[0].at), tc.minDelay)
			})
		}
	}
}

func TestRetriesGiveUp(t *testing.T) {
	for _, f := range flavours {
		t.Run(f.name, func(t *testing.T) {
			fail := jsonReply(503, `{"error":{"message":"down for maintenance"}}`, "Retry-After", "0")
			w, srv := newWire(t, fail, fail)
			cfg := f.cfg(srv.URL)
			cfg.MaxRetries = 1
			p, err := llm.New(cfg, nil)
			require.NoError(t, err)
			_, err = p.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
			var e *llm.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, 503, e.StatusCode)
			require.Contains(t, err.Error(), "HTTP 503")
			require.Len(t, w.requests(), 2)
		})
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name   string
		reply  func(f flavour) func(http.ResponseWriter)
		status int
		want   string
	}{
		{
			name:   "not json",
			reply:  func(flavour) func(http.ResponseWriter) { return jsonReply(200, `<html>gateway</html>`) },
			status: 0,
		},
		{
			name:  "json without the payload",
			reply: func(flavour) func(http.ResponseWriter) { return jsonReply(200, `{"hello":"world"}`) },
			want:  "malformed response",
		},
		{
			name:   "truncated",
			reply:  func(f flavour) func(http.ResponseWriter) { return jsonReply(200, f.text[:40]) },
			status: 0,
		},
		{
			name:   "bad request with a message",
			reply:  func(f flavour) func(http.ResponseWriter) { return jsonReply(400, f.errBody) },
			status: 400,
			want:   "model m does not exist",
		},
	}
	for _, tc := range cases {
		for _, f := range flavours {
			t.Run(tc.name+"/"+f.name, func(t *testing.T) {
				_, srv := newWire(t, tc.reply(f))
				var err error
				require.NotPanics(t, func() {
					_, err = provider(t, f, srv.URL).Chat(context.Background(), llm.Request{
						Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}},
					})
				})
				require.Error(t, err)
				t.Logf("%v", err)
				var e *llm.Error
				require.ErrorAs(t, err, &e)
				require.Equal(t, tc.status, e.StatusCode)
				require.Contains(t, err.Error(), f.name+" model m")
				if tc.want != "" {
					require.Contains(t, err.Error(), tc.want)
				}
				require.NotContains(t, err.Error(), "test-key")
				require.NotContains(t, err.Error(), "ant-test")
			})
		}
	}
}

func TestContextCancelled(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(block); srv.Close() })
	for _, f := range flavours {
		t.Run(f.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err := provider(t, f, srv.URL).Chat(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
			require.ErrorIs(t, err, context.DeadlineExceeded)
		})
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name  string
		cfg   llm.Config
		field string
	}{
		{"ok openai", llm.Config{Provider: "openai", APIKey: "k", Model: "gpt"}, ""},
		{"ok local server without key", llm.Config{Provider: "openai", BaseURL: "http://127.0.0.1:8000/v1", Model: "qwen"}, ""},
		{"no provider", llm.Config{Model: "x"}, "provider"},
		{"ollama is openai-compatible", llm.Config{Provider: "ollama", Model: "x"}, "provider"},
		{"unknown provider", llm.Config{Provider: "bard", Model: "x"}, "provider"},
		{"no model", llm.Config{Provider: "openai", APIKey: "k"}, "model"},
		{"bad url", llm.Config{Provider: "openai", BaseURL: "localhost:8000", Model: "x"}, "base_url"},
		{"anthropic needs key", llm.Config{Provider: "anthropic", Model: "x"}, "api_key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			var fe *bot.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tc.field, fe.Field)
		})
	}
}

func TestConfigNeverPrintsKey(t *testing.T) {
	cfg := llm.Config{Provider: "anthropic", APIKey: "sk-ant-secret-value", Model: "m"}
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.NotContains(t, string(b), "secret-value")
	require.NotContains(t, cfg.Describe(), "secret-value")
}

func TestOpen(t *testing.T) {
	m, err := llm.Open(map[string]llm.Config{
		"default": {Provider: "anthropic", APIKey: "k", Model: "claude"},
		"fast":    {Provider: "openai", BaseURL: "http://127.0.0.1:1/v1", Model: "small"},
	}, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"default", "fast"}, m.Names())
	_, ok := m.Model("fast")
	require.True(t, ok)

	_, err = llm.Open(map[string]llm.Config{"broken": {Provider: "openai"}}, nil)
	require.ErrorContains(t, err, "models.broken")
}

func TestDetect(t *testing.T) {
	ollama := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/api/tags", r.URL.Path)
		_, _ = io.WriteString(w, `{"models":[{"name":"qwen2.5-coder:7b","model":"qwen2.5-coder:7b"},{"name":"llama3.2:latest"}]}`)
	}))
	t.Cleanup(ollama.Close)
	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"models":[]}`)
	}))
	t.Cleanup(empty.Close)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	cases := []struct {
		name     string
		env      map[string]string
		ok       bool
		provider string
		model    string
		baseURL  string
	}{
		{"anthropic first", map[string]string{"ANTHROPIC_API_KEY": "sk-ant-x", "OPENAI_API_KEY": "sk-x", "OLLAMA_HOST": ollama.URL}, true, "anthropic", "claude-sonnet-5-5", ""},
		{"anthropic model override", map[string]string{"ANTHROPIC_API_KEY": "sk-ant-x", "ANTHROPIC_MODEL": "claude-haiku-5-5"}, true, "anthropic", "claude-haiku-5-5", ""},
		{"openai with base url", map[string]string{"OPENAI_API_KEY": "sk-x", "OPENAI_BASE_URL": "http://vllm:8000/v1", "OLLAMA_HOST": ollama.URL}, true, "openai", "gpt-5.5", "http://vllm:8000/v1"},
		{"ollama first model", map[string]string{"OLLAMA_HOST": ollama.URL}, true, "openai", "qwen2.5-coder:7b", ollama.URL + "/v1"},
		{"ollama without models", map[string]string{"OLLAMA_HOST": empty.URL}, false, "", "", ""},
		{"nothing answers", map[string]string{"OLLAMA_HOST": strings.TrimPrefix(closed.URL, "http://")}, false, "", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, desc, ok := llm.Detect(context.Background(), func(k string) string { return tc.env[k] }, nil)
			require.Equal(t, tc.ok, ok, desc)
			require.NotEmpty(t, desc)
			require.NotContains(t, desc, "sk-")
			if !ok {
				require.True(t, strings.HasPrefix(desc, "no model configured: "), desc)
				require.Equal(t, 1, strings.Count(desc, tc.env["OLLAMA_HOST"]), "the address once: %s", desc)
				require.NotContains(t, desc, "dial tcp", "no Go error chain: %s", desc)
				return
			}
			require.Equal(t, tc.provider, cfg.Provider)
			require.Equal(t, tc.model, cfg.Model)
			require.Equal(t, tc.baseURL, cfg.BaseURL)
			require.NoError(t, cfg.Validate())
			require.Contains(t, desc, "the default model is ")
			require.Equal(t, 1, strings.Count(desc, tc.model), desc)
			if tc.env["OLLAMA_HOST"] == "" || tc.env["ANTHROPIC_API_KEY"]+tc.env["OPENAI_API_KEY"] != "" {
				require.Contains(t, desc, tc.provider+" "+tc.model)
			}
		})
	}
}

func TestToolCallWithoutID(t *testing.T) {
	_, srv := newWire(t, jsonReply(200, `{"id":"x","object":"chat.completion","created":1,"model":"m",
		"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant",
		"tool_calls":[{"type":"function","function":{"name":"bash","arguments":"not json"}}]}}]}`))
	res, err := provider(t, flavours[0], srv.URL).Chat(context.Background(), llm.Request{
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}},
	})
	require.NoError(t, err)
	require.Len(t, res.ToolCalls, 1)
	require.Equal(t, "bash", res.ToolCalls[0].Name)
	require.Equal(t, json.RawMessage(`"not json"`), res.ToolCalls[0].Input)
	require.True(t, strings.HasPrefix(res.ToolCalls[0].ID, "call_"), res.ToolCalls[0].ID)
}

// TestOpenAIRequestAsTheSDKSendsIt: the body goes through the SDK as it
// is, with the SDK's headers, the key only where the config sets one, and
// the SDK's retries counted in them.
func TestOpenAIRequestAsTheSDKSendsIt(t *testing.T) {
	for _, tc := range []struct {
		name, key, auth string
	}{
		{"a local server without a key", "", ""},
		{"a key", "sk-test-key-123456", "Bearer sk-test-key-123456"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, srv := newWire(t, jsonReply(500, `{"error":{"message":"busy"}}`), jsonReply(200, openaiText))
			p, err := llm.New(llm.Config{Provider: llm.ProviderOpenAI, BaseURL: srv.URL + "/v1", APIKey: bot.Secret(tc.key),
				Model: "m", MaxRetries: 1, Timeout: 30 * time.Second}, nil)
			require.NoError(t, err)
			res, err := p.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi <there>"}}})
			require.NoError(t, err)
			require.Equal(t, "All tests pass.", res.Text)
			reqs := w.requests()
			require.Len(t, reqs, 2)
			for i, r := range reqs {
				require.Equal(t, "/v1/chat/completions", r.path)
				require.Equal(t, tc.auth, r.header.Get("Authorization"))
				require.Equal(t, "application/json", r.header.Get("Content-Type"))
				require.Equal(t, "application/json", r.header.Get("Accept"))
				require.Equal(t, "30", r.header.Get("X-Stainless-Timeout"))
				require.Equal(t, []string{"0", "1"}[i], r.header.Get("X-Stainless-Retry-Count"))
				require.Equal(t, "hi <there>", r.body["messages"].([]any)[0].(map[string]any)["content"])
			}
		})
	}
}

// TestProvidersReadNoEnvironment: the config is the only source of a
// provider's key, address and headers; the SDKs' environment variables
// (a key meant for the hosted API, another server's address) are never
// used, whatever they hold.
func TestProvidersReadNoEnvironment(t *testing.T) {
	trap, trapSrv := newWire(t)
	for _, kv := range [][2]string{
		{"OPENAI_API_KEY", "sk-env-secret"}, {"OPENAI_BASE_URL", trapSrv.URL + "/v1"}, {"OPENAI_ORG_ID", "org-env"},
		{"OPENAI_PROJECT_ID", "proj-env"}, {"OPENAI_WEBHOOK_SECRET", "whsec-env"},
		{"ANTHROPIC_API_KEY", "sk-ant-env-secret"}, {"ANTHROPIC_AUTH_TOKEN", "tok-env-secret"}, {"ANTHROPIC_BASE_URL", trapSrv.URL},
	} {
		t.Setenv(kv[0], kv[1])
	}
	for _, f := range flavours {
		for _, keyless := range []bool{false, true} {
			if keyless && f.name != "openai" {
				continue // only a local OpenAI-compatible server goes without a key
			}
			w, srv := newWire(t, jsonReply(200, f.text))
			cfg := f.cfg(srv.URL)
			if keyless {
				cfg.APIKey = ""
			}
			p, err := llm.New(cfg, nil)
			require.NoError(t, err)
			_, err = p.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
			require.NoError(t, err, f.name)
			reqs := w.requests()
			require.Len(t, reqs, 1, f.name)
			h := reqs[0].header
			for name, vs := range h {
				for _, v := range vs {
					require.NotContains(t, v, "env", "%s: header %s", f.name, name)
				}
			}
			switch {
			case f.name == "anthropic":
				require.Equal(t, cfg.APIKey.Reveal(), h.Get("X-Api-Key"))
				require.Empty(t, h.Get("Authorization"))
			case keyless:
				require.Empty(t, h.Get("Authorization"), "keyless")
			default:
				require.Equal(t, "Bearer "+cfg.APIKey.Reveal(), h.Get("Authorization"))
			}
		}
	}
	require.Empty(t, trap.requests(), "nothing goes to the address in the environment")
}
