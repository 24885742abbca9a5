package llm_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/llm"
)

// oddAnswer is the answer of f's flavour.
func oddAnswer(f flavour, openai, anthropic string) string {
	if f.name == "openai" {
		return openai
	}
	return anthropic
}

func chatOnce(t *testing.T, f flavour, reply func(http.ResponseWriter)) (llm.Response, []recorded, error) {
	t.Helper()
	w, srv := newWire(t, reply, reply, reply, reply)
	cfg := f.cfg(srv.URL)
	cfg.MaxRetries = 2
	p, err := llm.New(cfg, nil)
	require.NoError(t, err)
	// The deadline only keeps a call that would wait for a day from
	// hanging the test; every case ends long before it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var res llm.Response
	require.NotPanics(t, func() {
		res, err = p.Chat(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	})
	return res, w.requests(), err
}

func TestFailuresKeepTheirMeaning(t *testing.T) {
	cases := []struct {
		name      string
		status    int
		openai    string
		anthropic string
		headers   []string
		want      string // in the error
		requests  int
	}{
		{
			name: "the key repeated in a 401", status: 401,
			openai:    `{"error":{"message":"Incorrect API key provided: sk-test-key-123456. You can find your key at platform.","type":"invalid_request_error"}}`,
			anthropic: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key: sk-ant-test-123456"}}`,
			want:      "HTTP 401 Unauthorized", requests: 1,
		},
		{
			name: "an error object answered with 200", status: 200,
			openai:    `{"error":{"message":"upstream model is overloaded","code":502}}`,
			anthropic: `{"type":"error","error":{"type":"overloaded_error","message":"upstream model is overloaded"}}`,
			want:      "upstream model is overloaded", requests: 1,
		},
		{
			name: "a list where an object belongs", status: 200, openai: `[]`, anthropic: `[]`,
			want: "malformed response: the body is a list, not an object", requests: 1,
		},
		{
			name: "a member of the wrong shape", status: 200,
			openai:    `{"choices":[{"message":7}]}`,
			anthropic: `{"content":[1]}`,
			want:      "malformed response: ", requests: 1,
		},
		{
			name: "a wait of a day asked for", status: 429, headers: []string{"Retry-After", "86400"},
			openai: `{"error":{"message":"quota used up for today"}}`, anthropic: `{"type":"error","error":{"type":"rate_limit_error","message":"quota used up for today"}}`,
			want: "HTTP 429 Too Many Requests: quota used up for today", requests: 1,
		},
		{
			name: "a wait until a far date asked for", status: 503, headers: []string{"Retry-After", "Wed, 21 Oct 2099 07:28:00 GMT"},
			openai: `{"error":{"message":"down for maintenance"}}`, anthropic: `{"type":"error","error":{"type":"api_error","message":"down for maintenance"}}`,
			want: "HTTP 503 Service Unavailable: down for maintenance", requests: 1,
		},
		{
			name: "a short wait asked for", status: 429, headers: []string{"Retry-After-Ms", "10"},
			openai: `{"error":{"message":"slow down"}}`, anthropic: `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`,
			want: "HTTP 429 Too Many Requests: slow down", requests: 3,
		},
	}
	for _, tc := range cases {
		for _, f := range flavours {
			t.Run(tc.name+"/"+f.name, func(t *testing.T) {
				_, reqs, err := chatOnce(t, f, jsonReply(tc.status, oddAnswer(f, tc.openai, tc.anthropic), tc.headers...))
				var e *llm.Error
				require.ErrorAs(t, err, &e)
				require.NotErrorIs(t, err, context.DeadlineExceeded)
				require.Contains(t, err.Error(), tc.want)
				require.Len(t, reqs, tc.requests)
				key := f.cfg("http://x").APIKey.Reveal()
				require.NotContains(t, err.Error(), key)
				require.NotContains(t, e.Message, key)
				require.NotContains(t, err.Error(), "Go ")
				require.NotContains(t, err.Error(), "llm.")
			})
		}
	}
}

func TestTokenCountsCannotOverflow(t *testing.T) {
	const huge = "9223372036854775807"
	for _, f := range flavours {
		t.Run(f.name, func(t *testing.T) {
			res, _, err := chatOnce(t, f, jsonReply(200, oddAnswer(f,
				`{"choices":[{"finish_reason":"stop","message":{"content":"x"}}],"usage":{"prompt_tokens":`+huge+`,"completion_tokens":`+huge+`}}`,
				`{"content":[{"type":"text","text":"x"}],"stop_reason":"end_turn","usage":{"input_tokens":`+huge+`,"output_tokens":1e300}}`)))
			require.NoError(t, err)
			// A run adds these up; the sum stays a count its token limit
			// and budgets stop.
			total := 0
			for range 1000 {
				total += res.Usage.Total()
			}
			require.Positive(t, res.Usage.InputTokens)
			require.Positive(t, res.Usage.OutputTokens)
			require.Positive(t, total)
		})
	}
}

func TestToolCallIDsAreTheirOwn(t *testing.T) {
	for _, f := range flavours {
		t.Run(f.name, func(t *testing.T) {
			answer := oddAnswer(f,
				`{"choices":[{"finish_reason":"tool_calls","message":{"tool_calls":[
					{"id":"call_1","type":"function","function":{"name":"a","arguments":"{}"}},
					{"type":"function","function":{"name":"b","arguments":"{}"}},
					{"id":"call_1","type":"function","function":{"name":"c","arguments":"{}"}},
					{"id":"","type":"function","function":{"name":"d","arguments":"{}"}}]}}]}`,
				`{"content":[
					{"type":"tool_use","id":"call_1","name":"a","input":{}},
					{"type":"tool_use","name":"b","input":{}},
					{"type":"tool_use","id":"call_1","name":"c","input":{}},
					{"type":"tool_use","id":"","name":"d","input":{}}],"stop_reason":"tool_use"}`)
			made := map[string]bool{} // the ids given to calls the server left without one of their own
			for range 2 {             // two turns of a server that leaves ids out
				res, _, err := chatOnce(t, f, jsonReply(200, answer))
				require.NoError(t, err)
				require.Len(t, res.ToolCalls, 4)
				require.Equal(t, "call_1", res.ToolCalls[0].ID, "the first call keeps its id")
				for _, c := range res.ToolCalls[1:] {
					require.NotEmpty(t, c.ID)
					require.NotEqual(t, "call_1", c.ID)
					require.False(t, made[c.ID], "%s: id %s given before", c.Name, c.ID)
					made[c.ID] = true
				}
			}
		})
	}
}

func TestToolInputNotUTF8ReachesTheToolAsJSON(t *testing.T) {
	for _, f := range flavours {
		t.Run(f.name, func(t *testing.T) {
			res, _, err := chatOnce(t, f, jsonReply(200, oddAnswer(f,
				"{\"choices\":[{\"finish_reason\":\"tool_calls\",\"message\":{\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"bash\",\"arguments\":\"{\\\"command\\\":\\\"echo \xff\xfe\\\",\\\"n\\\":12345678901234567890}\"}}]}}]}",
				"{\"content\":[{\"type\":\"tool_use\",\"id\":\"c1\",\"name\":\"bash\",\"input\":{\"command\":\"echo \xff\xfe\",\"n\":12345678901234567890}}],\"stop_reason\":\"tool_use\"}")))
			require.NoError(t, err)
			require.Len(t, res.ToolCalls, 1)
			in := res.ToolCalls[0].Input
			require.True(t, utf8.Valid(in) && json.Valid(in), "%q", in)
			require.JSONEq(t, `{"command":"echo \ufffd\ufffd","n":12345678901234567890}`, string(in))

			// Sent back, the conversation is a body of JSON.
			var body []byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ = io.ReadAll(r.Body)
				jsonReply(200, f.text)(w)
			}))
			t.Cleanup(srv.Close)
			_, err = provider(t, f, srv.URL).Chat(context.Background(), llm.Request{Messages: []llm.Message{
				{Role: llm.RoleUser, Content: "hi"},
				{Role: llm.RoleAssistant, ToolCalls: res.ToolCalls},
				{Role: llm.RoleTool, ToolCallID: "c1", Content: "ok"},
			}})
			require.NoError(t, err)
			require.True(t, utf8.Valid(body), "%q", body)
			require.True(t, json.Valid(body))
		})
	}
}

// TestTransportFailuresSaidInWords: a model server that cannot be reached,
// that never answers within the model's timeout or that stops in the middle
// of its answer fails the call with what happened, in words: never Go's
// "Post \"http://…\": dial tcp …" or "context deadline exceeded".
func TestTransportFailuresSaidInWords(t *testing.T) {
	hang := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"cut`)
		w.(http.Flusher).Flush()
		time.Sleep(2 * time.Second)
	}
	cut := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "500")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"cut`)
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	cases := []struct {
		name  string
		reply func(http.ResponseWriter)
		url   string
		want  string
	}{
		{name: "no answer within the timeout", reply: hang, want: "no answer within the model's timeout (200ms)"},
		{name: "the answer cut off", reply: cut, want: "the answer was cut off before its end"},
		{name: "nothing listening", url: closed.URL, want: "cannot connect to " + strings.TrimPrefix(closed.URL, "http://") + ": connection refused"},
	}
	for _, tc := range cases {
		for _, f := range flavours {
			t.Run(tc.name+"/"+f.name, func(t *testing.T) {
				url := tc.url
				if url == "" {
					_, srv := newWire(t, tc.reply, tc.reply, tc.reply)
					url = srv.URL
				}
				cfg := f.cfg(url)
				cfg.Timeout, cfg.MaxRetries = 200*time.Millisecond, -1
				p, err := llm.New(cfg, nil)
				require.NoError(t, err)
				_, err = p.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
				var e *llm.Error
				require.ErrorAs(t, err, &e)
				require.Equal(t, f.name+" model m: "+tc.want, err.Error())
			})
		}
	}
}
