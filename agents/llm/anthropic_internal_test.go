package llm

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/stretchr/testify/require"
)

// sdkMessageParams is req as the SDK's own params express it.
func sdkMessageParams(t *testing.T, p *anthropicProvider, req Request) anthropic.MessageNewParams {
	t.Helper()
	maxTokens := int64(p.cfg.MaxTokens)
	if req.MaxTokens > 0 {
		maxTokens = int64(req.MaxTokens)
	}
	params := anthropic.MessageNewParams{Model: p.cfg.Model, MaxTokens: maxTokens}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	if req.Temperature != nil {
		params.Temperature = anthropic.Float(*req.Temperature)
	}
	if req.ReasoningEffort != "" {
		params.OutputConfig.Effort = anthropic.OutputConfigEffort(req.ReasoningEffort)
	}
	for _, m := range req.Messages {
		var role anthropic.MessageParamRole
		var blocks []anthropic.ContentBlockParamUnion
		switch m.Role {
		case RoleUser:
			role = anthropic.MessageParamRoleUser
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
		case RoleTool:
			role = anthropic.MessageParamRoleUser
			blocks = append(blocks, anthropic.NewToolResultBlock(m.ToolCallID, m.Content, m.IsError))
		case RoleAssistant:
			role = anthropic.MessageParamRoleAssistant
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, tc.Input, tc.Name))
			}
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(params.Messages); n > 0 && params.Messages[n-1].Role == role {
			params.Messages[n-1].Content = append(params.Messages[n-1].Content, blocks...)
			continue
		}
		params.Messages = append(params.Messages, anthropic.MessageParam{Role: role, Content: blocks})
	}
	for _, tool := range req.Tools {
		var m map[string]any
		require.NoError(t, json.Unmarshal(tool.Schema, &m))
		s := anthropic.ToolInputSchemaParam{Properties: m["properties"]}
		if req, ok := m["required"].([]any); ok {
			for _, r := range req {
				s.Required = append(s.Required, r.(string))
			}
		}
		delete(m, "properties")
		delete(m, "required")
		delete(m, "type")
		if len(m) > 0 {
			s.ExtraFields = m
		}
		tp := anthropic.ToolParam{Name: tool.Name, InputSchema: s}
		if tool.Description != "" {
			tp.Description = anthropic.String(tool.Description)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &tp})
	}
	return params
}

func TestMessagesBodySaysWhatTheSDKWould(t *testing.T) {
	temp := 0.2
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"where <it> & \"that\" is"}},"required":["path"],"additionalProperties":false,"$defs":{"x":{"type":"string"}}}`)
	conversation := []Message{
		{Role: RoleUser, Content: ""},
		{Role: RoleUser, Content: "fix the <flaky> test \u2028 and binary \xff"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "read_file", Input: json.RawMessage(`{"path": "a.go"}`)}, {ID: "c2", Name: "bash", Input: json.RawMessage(`{}`)}}},
		{Role: RoleTool, ToolCallID: "c1", Content: "package a\n"},
		{Role: RoleTool, ToolCallID: "c2", Content: "exit 1", IsError: true},
		{Role: RoleAssistant, Content: "done", ToolCalls: []ToolCall{{ID: "c3", Name: "x", Input: json.RawMessage(`"a string"`)}}},
		{Role: RoleTool, ToolCallID: "c3", Content: "ok"},
		{Role: RoleAssistant, Content: "all done"},
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		req  Request
	}{
		{"plain", Config{MaxTokens: 4096}, Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}}},
		{"system, tools and a conversation", Config{MaxTokens: 4096}, Request{System: "You are the \"coder\" agent.", Messages: conversation,
			Tools: []ToolDef{{Name: "read_file", Description: "Reads a file.", Schema: schema}, {Name: "bash", Schema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}}}`)}}}},
		{"request's own max tokens, temperature, effort", Config{MaxTokens: 100}, Request{MaxTokens: 9, Temperature: &temp, ReasoningEffort: "high", Messages: conversation[:2]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Model = "claude-x"
			p := newAnthropic(tc.cfg, http.DefaultClient)
			ours, _, err := p.body(tc.req)
			require.NoError(t, err)
			theirs, err := json.Marshal(sdkMessageParams(t, p, tc.req))
			require.NoError(t, err)
			var a, b any
			require.NoError(t, json.Unmarshal(ours, &a))
			require.NoError(t, json.Unmarshal(theirs, &b))
			require.Equal(t, b, a, "ours: %s\nSDK's: %s", ours, theirs)
		})
	}
}

// The API refuses an empty text block, which the SDK's params sent for a
// tool that printed nothing: such a result goes without content.
func TestMessagesBodySendsNoEmptyTextBlock(t *testing.T) {
	p := newAnthropic(Config{Model: "m", MaxTokens: 10}, http.DefaultClient)
	body, _, err := p.body(Request{System: "s", Messages: []Message{
		{Role: RoleUser, Content: "go"},
		{Role: RoleAssistant, Content: "", ToolCalls: []ToolCall{{ID: "t1", Name: "bash", Input: json.RawMessage(`{}`)}}},
		{Role: RoleTool, ToolCallID: "t1", Content: ""},
		{Role: RoleUser, Content: ""},
	}})
	require.NoError(t, err)
	require.NotContains(t, string(body), `"text":""`)
	var got struct {
		Messages []struct {
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(body, &got))
	require.Len(t, got.Messages, 3)
	require.Equal(t, map[string]any{"type": "tool_result", "tool_use_id": "t1", "is_error": false}, got.Messages[2].Content[0])
}

func TestMessagesBodyKeepsASchemaWithoutProperties(t *testing.T) {
	p := newAnthropic(Config{Model: "m", MaxTokens: 10}, http.DefaultClient)
	body, _, err := p.body(Request{Messages: []Message{{Role: RoleUser, Content: "x"}}, Tools: []ToolDef{{Name: "ping", Schema: json.RawMessage(`{"type":"object"}`)}}})
	require.NoError(t, err)
	var got struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(body, &got))
	require.Len(t, got.Tools, 1)
	require.JSONEq(t, `{"type":"object"}`, string(got.Tools[0].InputSchema))
}

func TestMessagesResponse(t *testing.T) {
	p := newAnthropic(Config{Model: "m", MaxTokens: 10}, http.DefaultClient)
	for _, tc := range []struct {
		name, body string
		want       Response
	}{
		{"text", `{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":4}}`,
			Response{Text: "a\nb", StopReason: StopEnd, Usage: Usage{InputTokens: 3, OutputTokens: 4}}},
		{"tool use", `{"content":[{"type":"tool_use","id":"t1","name":"bash","input":{"command":"ls"}},{"type":"tool_use","id":"t2","name":"x","input":null}],"stop_reason":"tool_use"}`,
			Response{StopReason: StopToolUse, ToolCalls: []ToolCall{{ID: "t1", Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)}, {ID: "t2", Name: "x", Input: json.RawMessage(`{}`)}}}},
		{"refusal", `{"content":[],"stop_reason":"refusal"}`, Response{StopReason: StopRefusal, Refusal: "the model declined to answer"}},
		{"cut off", `{"content":[{"type":"text","text":"par"}],"stop_reason":"max_tokens","usage":{"input_tokens":1.0,"output_tokens":"2"}}`,
			Response{Text: "par", StopReason: StopMaxTokens, Usage: Usage{InputTokens: 1, OutputTokens: 2}}},
		{"cut off in a tool call", `{"content":[{"type":"text","text":"par"},{"type":"tool_use","id":"t1","name":"write_file","input":{"path":"a.md"}}],"stop_reason":"max_tokens"}`,
			Response{Text: "par", StopReason: StopMaxTokens, ToolCalls: []ToolCall{{ID: "t1", Name: "write_file", Input: json.RawMessage(`{"path":"a.md"}`)}}}},
		{"odd shapes", `{"content":[{"type":"text","text":7},{"type":"thinking","thinking":"hm"}],"stop_reason":null,"usage":null}`, Response{Text: "", StopReason: StopEnd}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := p.response([]byte(tc.body))
			require.NoError(t, err)
			require.Equal(t, tc.want, res)
		})
	}
	for _, body := range []string{`not json`, `{}`, `{"content":null}`, `{"content":{}}`, `{"content":[{"type":"tool_use","input":{}}]}`} {
		_, err := p.response([]byte(body))
		require.ErrorContains(t, err, "malformed response", body)
	}
}

// FuzzMessagesResponse holds the reader of a messages answer to never
// panic, to give every tool call an id of its own and arguments that are
// JSON in UTF-8, and to read counts that add up.
func FuzzMessagesResponse(f *testing.F) {
	for _, seed := range []string{
		`{"content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`,
		`{"content":[{"type":"tool_use","id":"x","name":"n","input":{"a":[1,{"b":null}]}}],"stop_reason":"tool_use"}`,
		`{"content":[]}`, `null`, `[]`,
	} {
		f.Add([]byte(seed))
	}
	p := newAnthropic(Config{Model: "m", MaxTokens: 10}, http.DefaultClient)
	f.Fuzz(func(t *testing.T, raw []byte) {
		res, err := p.response(raw)
		if err != nil {
			return
		}
		checkAnswer(t, res, raw)
	})
}
