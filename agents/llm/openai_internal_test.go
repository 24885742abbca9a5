package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/require"
)

// sdkParams is req as the SDK's own params express it: the request body
// Chat writes must say what the SDK would have sent.
func sdkParams(t *testing.T, p *openaiProvider, req Request) openai.ChatCompletionNewParams {
	t.Helper()
	params := openai.ChatCompletionNewParams{Model: p.cfg.Model}
	maxTokens := int64(p.cfg.MaxTokens)
	if req.MaxTokens > 0 {
		maxTokens = int64(req.MaxTokens)
	}
	if p.official {
		params.MaxCompletionTokens = openai.Int(maxTokens)
	} else {
		params.MaxTokens = openai.Int(maxTokens)
	}
	if req.Temperature != nil {
		params.Temperature = openai.Float(*req.Temperature)
	}
	if req.ReasoningEffort != "" {
		params.ReasoningEffort = shared.ReasoningEffort(req.ReasoningEffort)
	}
	if req.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		switch m.Role {
		case RoleUser:
			params.Messages = append(params.Messages, openai.UserMessage(m.Content))
		case RoleTool:
			params.Messages = append(params.Messages, openai.ToolMessage(m.Content, m.ToolCallID))
		case RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" {
				a.Content.OfString = openai.String(m.Content)
			}
			for _, tc := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: string(tc.Input)},
					},
				})
			}
			params.Messages = append(params.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		}
	}
	for _, tool := range req.Tools {
		var schema map[string]any
		require.NoError(t, json.Unmarshal(tool.Schema, &schema))
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: tool.Name, Description: openai.String(tool.Description), Parameters: schema,
		}))
	}
	return params
}

func TestRequestBodySaysWhatTheSDKWould(t *testing.T) {
	temp, zero := 0.3, 0.0
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"where <it> & \"that\" is"},"n":{"type":["integer","string"]}},"required":["path"],"additionalProperties":false}`)
	conversation := []Message{
		{Role: RoleUser, Content: "fix the <flaky> test & report \u2028 back"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "read_file", Input: json.RawMessage(`{"path": "a.go"}`)}, {ID: "c2", Name: "bash", Input: json.RawMessage(`{}`)}}},
		{Role: RoleTool, ToolCallID: "c1", Content: "package a\n"},
		{Role: RoleTool, ToolCallID: "c2", Content: "binary \xff\xfe output\x00 and \U0001F600"},
		{Role: RoleAssistant, Content: "done", ToolCalls: []ToolCall{{ID: "c3", Name: "x", Input: json.RawMessage(`"not an object"`)}}},
		{Role: RoleAssistant, Content: "all done"},
		{Role: RoleUser, Content: ""},
	}
	for _, tc := range []struct {
		name     string
		official bool
		cfg      Config
		req      Request
	}{
		{"plain", false, Config{MaxTokens: 4096}, Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}}},
		{"system, tools and a conversation", false, Config{MaxTokens: 4096},
			Request{System: "You are the \"coder\" agent.", Messages: conversation, Tools: []ToolDef{{Name: "read_file", Description: "Reads a file.", Schema: schema}, {Name: "bash", Description: "", Schema: json.RawMessage(`{"type":"object"}`)}}}},
		{"official endpoint", true, Config{MaxTokens: 100}, Request{System: "s", Messages: conversation[:1]}},
		{"request's own max tokens", false, Config{MaxTokens: 100}, Request{MaxTokens: 7, Messages: conversation[:1]}},
		{"temperature and reasoning", false, Config{MaxTokens: 100}, Request{Temperature: &temp, ReasoningEffort: "high", Messages: conversation[:1]}},
		{"temperature zero", false, Config{MaxTokens: 100}, Request{Temperature: &zero, Messages: conversation[:1]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Model = "some-model"
			p := newOpenAI(tc.cfg, http.DefaultClient)
			p.official = tc.official
			ours, err := p.body(tc.req)
			require.NoError(t, err)
			theirs, err := json.Marshal(sdkParams(t, p, tc.req))
			require.NoError(t, err)
			var a, b any
			require.NoError(t, json.Unmarshal(ours, &a))
			require.NoError(t, json.Unmarshal(theirs, &b))
			require.Equal(t, b, a, "ours: %s\nSDK's: %s", ours, theirs)
		})
	}
}

func TestRequestBodyRefuses(t *testing.T) {
	p := newOpenAI(Config{Model: "m", MaxTokens: 10}, http.DefaultClient)
	_, err := p.body(Request{Messages: []Message{{Role: "narrator", Content: "x"}}})
	require.ErrorContains(t, err, `unknown role "narrator"`)
	_, err = p.body(Request{Messages: []Message{{Role: RoleUser, Content: "x"}}, Tools: []ToolDef{{Name: "broken", Schema: json.RawMessage(`{"type":`)}}})
	require.ErrorContains(t, err, "tool broken: schema")
}

// BenchmarkRequestBody measures writing a helper's request (a system
// prompt and twenty tools, 15 KB) for each provider, against the SDK's
// params doing the same.
func BenchmarkRequestBody(b *testing.B) {
	var tools []ToolDef
	for i := range 20 {
		tools = append(tools, ToolDef{Name: fmt.Sprintf("tool_%d", i), Description: strings.Repeat("does a thing. ", 10),
			Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"` + strings.Repeat("the path of it ", 20) + `"},"n":{"type":"integer"}},"required":["path"],"additionalProperties":false}`)})
	}
	req := Request{System: strings.Repeat("You are the helper agent. ", 150), Tools: tools, Messages: []Message{{Role: RoleUser, Content: "part 1"}}}
	t := &testing.T{}
	oa := newOpenAI(Config{Model: "m", MaxTokens: 4096}, http.DefaultClient)
	an := newAnthropic(Config{Model: "m", MaxTokens: 4096}, http.DefaultClient)
	for _, bc := range []struct {
		name string
		body func() ([]byte, error)
	}{
		{"openai/ours", func() ([]byte, error) { return oa.body(req) }},
		{"openai/sdk", func() ([]byte, error) { return json.Marshal(sdkParams(t, oa, req)) }},
		{"anthropic/ours", func() ([]byte, error) { b, _, err := an.body(req); return b, err }},
		{"anthropic/sdk", func() ([]byte, error) { return json.Marshal(sdkMessageParams(t, an, req)) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := bc.body(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestResponseArgumentsAsObject(t *testing.T) {
	p := newOpenAI(Config{Model: "m", MaxTokens: 10}, http.DefaultClient)
	res, err := p.response([]byte(`{"choices":[{"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
		"tool_calls":[{"id":"a","type":"function","function":{"name":"t","arguments":{"path":"x"}}},
		{"id":"b","type":"function","function":{"name":"t","arguments":"{\"path\":\"y\"}"}},
		{"id":"c","type":"function","function":{"name":"t","arguments":null}},
		{"id":"d","type":"function","function":{"name":"t","arguments":"not json"}}]}}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`))
	require.NoError(t, err)
	require.Equal(t, StopToolUse, res.StopReason)
	require.Equal(t, Usage{InputTokens: 3, OutputTokens: 2}, res.Usage)
	var inputs []string
	for _, c := range res.ToolCalls {
		inputs = append(inputs, string(c.Input))
	}
	require.Equal(t, []string{`{"path":"x"}`, `{"path":"y"}`, `{}`, `"not json"`}, inputs)
}

func TestResponseOfCompatibleServers(t *testing.T) {
	p := newOpenAI(Config{Model: "m", MaxTokens: 10}, http.DefaultClient)
	for _, tc := range []struct {
		name, body string
		want       Response
	}{
		{"content as parts", `{"choices":[{"finish_reason":"stop","message":{"content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]}}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
			Response{Text: "one\ntwo", StopReason: StopEnd, Usage: Usage{InputTokens: 1, OutputTokens: 2}}},
		{"counts as floats and strings", `{"choices":[{"finish_reason":"stop","message":{"content":"x"}}],"usage":{"prompt_tokens":12.0,"completion_tokens":"3"}}`,
			Response{Text: "x", StopReason: StopEnd, Usage: Usage{InputTokens: 12, OutputTokens: 3}}},
		{"nulls everywhere", `{"choices":[{"finish_reason":null,"message":{"content":null,"refusal":null,"tool_calls":null}}],"usage":null}`,
			Response{StopReason: StopEnd}},
		{"odd shapes read as empty", `{"choices":[{"finish_reason":7,"message":{"content":{"a":1},"refusal":false,"tool_calls":"none"}}],"usage":{"prompt_tokens":-4,"completion_tokens":[1]}}`,
			Response{StopReason: StopEnd}},
		{"an entry that is not a call is skipped", `{"choices":[{"finish_reason":"tool_calls","message":{"tool_calls":[3,{"id":"a","function":{"name":"t","arguments":"{}"}}]}}]}`,
			Response{StopReason: StopToolUse, ToolCalls: []ToolCall{{ID: "a", Name: "t", Input: json.RawMessage("{}")}}}},
		{"cut off", `{"choices":[{"finish_reason":"length","message":{"content":"par"}}]}`, Response{Text: "par", StopReason: StopMaxTokens}},
		{"cut off in a tool call", `{"choices":[{"finish_reason":"length","message":{"content":"par","tool_calls":[{"id":"a","function":{"name":"write_file","arguments":"{\"path\":\"a.md\",\"content\":\"hal"}}]}}]}`,
			Response{Text: "par", StopReason: StopMaxTokens, ToolCalls: []ToolCall{{ID: "a", Name: "write_file", Input: json.RawMessage(`"{\"path\":\"a.md\",\"content\":\"hal"`)}}}},
		{"refused", `{"choices":[{"finish_reason":"stop","message":{"refusal":"no"}}]}`, Response{Refusal: "no", StopReason: StopRefusal}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := p.response([]byte(tc.body))
			require.NoError(t, err)
			require.Equal(t, tc.want, res)
		})
	}
	for _, body := range []string{`not json`, `{"choices":{}}`, `{"choices":[]}`, `{"choices":[1]}`} {
		_, err := p.response([]byte(body))
		require.ErrorContains(t, err, "malformed response", body)
	}
}

// FuzzResponse holds the reader of a completion to never panic, to give
// every tool call an id of its own and arguments that are JSON in UTF-8,
// and to read counts that add up.
func FuzzResponse(f *testing.F) {
	for _, seed := range []string{
		`{"choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
		`{"choices":[{"finish_reason":"tool_calls","message":{"tool_calls":[{"id":"x","type":"function","function":{"name":"n","arguments":"{\"a\":1}"}}]}}]}`,
		`{"choices":[{"message":{"tool_calls":[{"function":{"name":"n","arguments":{"a":[1,{"b":null}]}}}]}}]}`,
		`{"choices":[]}`, `null`, `[]`, `{"choices":[{"message":{"refusal":"no"}}]}`,
	} {
		f.Add([]byte(seed))
	}
	p := newOpenAI(Config{Model: "m", MaxTokens: 10}, http.DefaultClient)
	f.Fuzz(func(t *testing.T, raw []byte) {
		res, err := p.response(raw)
		if err != nil {
			return
		}
		checkAnswer(t, res, raw)
	})
}

// checkAnswer holds an answer a reader accepted to what the runtime relies
// on: every tool call has a name and an id of its own, and arguments that
// are JSON in UTF-8; the tokens counted are never negative.
func checkAnswer(t *testing.T, res Response, raw []byte) {
	t.Helper()
	ids := map[string]bool{}
	for _, c := range res.ToolCalls {
		if c.ID == "" || ids[c.ID] || c.Name == "" || !json.Valid(c.Input) || !utf8.Valid(c.Input) {
			t.Fatalf("tool call %+v from %s", c, raw)
		}
		ids[c.ID] = true
	}
	if res.Usage.Total() < 0 {
		t.Fatalf("usage %+v from %s", res.Usage, raw)
	}
}

// BenchmarkOpenAIChat measures a helper's call (a system prompt and ten
// tools) against a local server that answers at once: what the provider
// spends around the exchange, the server's part included.
func BenchmarkOpenAIChat(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"done"}}],"usage":{"prompt_tokens":10,"completion_tokens":2}}`)
	}))
	defer srv.Close()
	var tools []ToolDef
	for i := range 10 {
		tools = append(tools, ToolDef{Name: fmt.Sprintf("tool_%d", i), Description: "Does a thing.",
			Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"the path"}},"required":["path"]}`)})
	}
	req := Request{System: strings.Repeat("You are the helper agent. ", 50), Tools: tools, Messages: []Message{{Role: RoleUser, Content: "part 1"}}}
	p, err := New(Config{Provider: ProviderOpenAI, Model: "m", BaseURL: srv.URL, MaxTokens: 4096}, srv.Client())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := p.Chat(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
