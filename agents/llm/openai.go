package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// openaiProvider speaks OpenAI chat completions. It builds its client with
// the config's options alone rather than through openai.NewClient, which
// would also read OPENAI_API_KEY and OPENAI_BASE_URL from the environment:
// the config file is the only source, so a key meant for api.openai.com is
// never sent to a local server. Of the client, only its Options and Post are
// used.
type openaiProvider struct {
	cfg    Config
	client openai.Client
	// official is api.openai.com, which wants max_completion_tokens; the
	// compatible servers (Ollama, vLLM, LM Studio) understand max_tokens.
	official bool
	schemas  *schemas
}

func newOpenAI(c Config, hc *http.Client) *openaiProvider {
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithMaxRetries(c.MaxRetries),
		option.WithRequestTimeout(c.Timeout),
	}
	if c.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(c.BaseURL))
	} else {
		opts = append(opts, option.WithEnvironmentProduction())
	}
	if c.APIKey.IsSet() {
		opts = append(opts, option.WithAPIKey(c.APIKey.Reveal()))
	}
	return &openaiProvider{cfg: c, client: openai.Client{Options: opts}, official: c.BaseURL == "", schemas: &schemas{}}
}

func (p *openaiProvider) Chat(ctx context.Context, req Request) (Response, error) {
	body, err := p.body(req)
	if err != nil {
		return Response{}, p.cfg.failure(0, err.Error(), err)
	}
	// The SDK carries the request (authentication, retries, timeouts,
	// typed errors); the body is written and read with the types below,
	// since its own params and completion go through reflection over
	// union types: a third of a millisecond per call for a request with
	// twenty tools, paid again on every turn. The body goes as bytes to
	// Post, since the chat service's New would encode its empty params
	// by reflection as well before the body replaced them.
	var raw []byte
	if err := p.client.Post(ctx, "chat/completions", body, &raw); err != nil {
		return Response{}, p.fail(ctx, err)
	}
	return p.response(raw)
}

// response reads a chat completions response body.
func (p *openaiProvider) response(raw []byte) (Response, error) {
	var completion chatCompletion
	if err := json.Unmarshal(raw, &completion); err != nil {
		return Response{}, p.cfg.malformed(err)
	}
	if len(completion.Choices) == 0 {
		if msg := string(completion.Error.Message); msg != "" {
			// Proxies and compatible servers answer some failures with
			// 200 and an error object.
			return Response{}, p.cfg.failure(0, msg, nil)
		}
		return Response{}, p.cfg.failure(0, "malformed response: no choices", nil)
	}
	choice := completion.Choices[0]
	out := Response{
		Text:    string(choice.Message.Content),
		Refusal: string(choice.Message.Refusal),
		Usage: Usage{
			InputTokens:  int(completion.Usage.PromptTokens),
			OutputTokens: int(completion.Usage.CompletionTokens),
		},
	}
	for _, tc := range choice.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		if tc.Function.Name == "" {
			return Response{}, p.cfg.failure(0, "malformed response: tool call without a function name", nil)
		}
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Input: rawArguments(tc.Function.Arguments.text())})
	}
	// Some compatible servers leave ids out, or repeat them.
	callIDs(out.ToolCalls)
	switch {
	case out.Refusal != "" || choice.FinishReason == "content_filter":
		out.StopReason = StopRefusal
	case choice.FinishReason == "length":
		// Cut off, tool calls or not: the last call's arguments are
		// where it stopped.
		out.StopReason = StopMaxTokens
	case len(out.ToolCalls) > 0:
		out.StopReason = StopToolUse
	default:
		out.StopReason = StopEnd
	}
	return out, nil
}

// chatRequest is the body of a chat completions request.
type chatRequest struct {
	Model               string        `json:"model"`
	Messages            []chatMessage `json:"messages"`
	MaxTokens           int64         `json:"max_tokens,omitempty"`
	MaxCompletionTokens int64         `json:"max_completion_tokens,omitempty"`
	Temperature         *float64      `json:"temperature,omitempty"`
	ReasoningEffort     string        `json:"reasoning_effort,omitempty"`
	Tools               []chatTool    `json:"tools,omitempty"`
}

// chatMessage is one message of a request. Content is always sent for the
// system, user and tool roles, and for an assistant only when it wrote
// text.
type chatMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content,omitempty"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string        `json:"name"`
	Arguments chatArguments `json:"arguments"`
}

type chatTool struct {
	Type     string          `json:"type"`
	Function chatFunctionDef `json:"function"`
}

type chatFunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// chatArguments are a tool call's arguments: a JSON string on the wire.
// A server that sends them as a JSON object instead is read as if it had
// sent that object's text.
type chatArguments string

func (a chatArguments) text() string { return string(a) }

func (a *chatArguments) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*a = chatArguments(s)
		return nil
	}
	if string(b) == "null" {
		*a = ""
		return nil
	}
	*a = chatArguments(b)
	return nil
}

// chatCompletion is what a response says that a Response needs. Compatible
// servers differ in details the SDK's reader let pass (content as a list
// of parts, token counts as floats, a null where a string belongs), so
// each member that does not have its usual shape is read as empty rather
// than failing the call; only a body that is not JSON, or whose choices
// are not a list, is malformed.
type chatCompletion struct {
	Choices []struct {
		FinishReason lenientText `json:"finish_reason"`
		Message      struct {
			Content   lenientText  `json:"content"`
			Refusal   lenientText  `json:"refusal"`
			ToolCalls lenientCalls `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     lenientCount `json:"prompt_tokens"`
		CompletionTokens lenientCount `json:"completion_tokens"`
	} `json:"usage"`
	Error struct {
		Message lenientText `json:"message"`
	} `json:"error"`
}

// lenientText is a string, the text of a list of parts ({"type":"text",
// "text":…}, joined), or empty for anything else.
type lenientText string

func (t *lenientText) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*t = lenientText(s)
		return nil
	}
	var parts []struct {
		Text string `json:"text"`
	}
	*t = ""
	if json.Unmarshal(b, &parts) == nil {
		var texts []string
		for _, p := range parts {
			if p.Text != "" {
				texts = append(texts, p.Text)
			}
		}
		*t = lenientText(strings.Join(texts, "\n"))
	}
	return nil
}

// lenientCount is a token count: a number (integral or not) or a numeric
// string, at most maxCount; anything else is 0.
type lenientCount int64

// maxCount bounds a token count a server reports, so that adding up the
// counts of a run cannot overflow into a negative total that no token
// limit or budget would stop.
const maxCount = math.MaxInt32

func (c *lenientCount) UnmarshalJSON(b []byte) error {
	*c = 0
	var n json.Number
	if json.Unmarshal(b, &n) != nil {
		var s string
		if json.Unmarshal(b, &s) != nil {
			return nil
		}
		n = json.Number(s)
	}
	if i, err := n.Int64(); err == nil {
		*c = lenientCount(min(max(i, 0), maxCount))
	} else if f, err := n.Float64(); err == nil && f >= 0 {
		*c = lenientCount(min(f, maxCount))
	}
	return nil
}

// lenientCalls are the tool calls of a message; a member that is not a
// list reads as none, and an entry that is not a call is skipped.
type lenientCalls []chatToolCall

func (l *lenientCalls) UnmarshalJSON(b []byte) error {
	*l = nil
	var raws []json.RawMessage
	if json.Unmarshal(b, &raws) != nil {
		return nil
	}
	for _, raw := range raws {
		var c struct {
			ID       lenientText `json:"id"`
			Type     lenientText `json:"type"`
			Function struct {
				Name      lenientText   `json:"name"`
				Arguments chatArguments `json:"arguments"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &c) != nil {
			continue
		}
		*l = append(*l, chatToolCall{ID: string(c.ID), Type: string(c.Type),
			Function: chatFunction{Name: string(c.Function.Name), Arguments: c.Function.Arguments}})
	}
	return nil
}

// body is req as a chat completions request body.
func (p *openaiProvider) body(req Request) ([]byte, error) {
	r, err := p.request(req)
	if err != nil {
		return nil, err
	}
	if b, ok := p.schemas.withTools(r, req, appendChatTool); ok {
		return b, nil
	}
	return encodeBody(withChatTools(r, req.Tools), req.Tools)
}

// request is req as a chat completions request, its tools aside.
func (p *openaiProvider) request(req Request) (chatRequest, error) {
	r := chatRequest{Model: p.cfg.Model, Messages: make([]chatMessage, 0, len(req.Messages)+1), Temperature: req.Temperature,
		ReasoningEffort: req.ReasoningEffort}
	maxTokens := p.cfg.maxTokens(req)
	// api.openai.com wants max_completion_tokens; the compatible servers
	// (Ollama, vLLM, LM Studio) understand max_tokens.
	if p.official {
		r.MaxCompletionTokens = maxTokens
	} else {
		r.MaxTokens = maxTokens
	}
	if req.System != "" {
		r.Messages = append(r.Messages, chatMessage{Role: "system", Content: &req.System})
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		switch m.Role {
		case RoleUser:
			r.Messages = append(r.Messages, chatMessage{Role: "user", Content: &m.Content})
		case RoleTool:
			r.Messages = append(r.Messages, chatMessage{Role: "tool", Content: &m.Content, ToolCallID: m.ToolCallID})
		case RoleAssistant:
			a := chatMessage{Role: "assistant"}
			if m.Content != "" {
				a.Content = &m.Content
			}
			for _, tc := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, chatToolCall{ID: tc.ID, Type: "function",
					Function: chatFunction{Name: tc.Name, Arguments: chatArguments(tc.Input)}})
			}
			r.Messages = append(r.Messages, a)
		default:
			return chatRequest{}, fmt.Errorf("message with unknown role %q", m.Role)
		}
	}
	return r, nil
}

// withChatTools is r with tools.
func withChatTools(r chatRequest, tools []ToolDef) chatRequest {
	for _, t := range tools {
		r.Tools = append(r.Tools, chatTool{Type: "function", Function: chatFunctionDef{Name: t.Name, Description: t.Description, Parameters: t.Schema}})
	}
	return r
}

// appendChatTool writes t as the encoder writes its chatTool, with schema
// as its parameters.
func appendChatTool(b []byte, t ToolDef, schema []byte) []byte {
	b = append(b, `{"type":"function","function":{"name":`...)
	b = appendString(b, t.Name)
	b = append(b, `,"description":`...)
	b = appendString(b, t.Description)
	b = append(b, `,"parameters":`...)
	b = append(b, schema...)
	return append(b, "}}"...)
}

func (p *openaiProvider) fail(ctx context.Context, err error) error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		return p.cfg.failure(apiErr.StatusCode, apiErr.Message, err)
	}
	return p.cfg.unanswered(ctx, err)
}

// rawArguments keeps a tool call's arguments as JSON. A model that sends
// something that is not JSON gets it back as a JSON string, which the tool
// then rejects with a message the model can act on.
func rawArguments(args string) json.RawMessage {
	switch {
	case args == "":
		return json.RawMessage("{}")
	case json.Valid([]byte(args)):
		return utf8Input(json.RawMessage(args))
	}
	b, _ := json.Marshal(args)
	return b
}
