package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// anthropicProvider speaks Anthropic messages. Like the OpenAI one it is
// built without the SDK's environment defaults (ANTHROPIC_API_KEY,
// ANTHROPIC_BASE_URL, profiles): what the config says is what is used.
type anthropicProvider struct {
	cfg      Config
	messages anthropic.MessageService
	schemas  *schemas
}

func newAnthropic(c Config, hc *http.Client) *anthropicProvider {
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(c.MaxRetries),
		option.WithRequestTimeout(c.Timeout),
		option.WithAPIKey(c.APIKey.Reveal()),
		option.WithMiddleware(noLongWaits),
	}
	if c.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(c.BaseURL))
	} else {
		opts = append(opts, option.WithEnvironmentProduction())
	}
	return &anthropicProvider{cfg: c, messages: anthropic.NewMessageService(opts...), schemas: &schemas{}}
}

// maxServerDelay is the longest wait a server's Retry-After gets before
// the call is tried again. The SDK waits as long as it is told, even a
// day; a longer wait fails the call at once with the server's answer, as
// the OpenAI SDK does by itself past the same two minutes.
const maxServerDelay = 2 * time.Minute

// noLongWaits marks an answer that asks for a wait longer than
// maxServerDelay as one not to retry.
func noLongWaits(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if res != nil && serverDelay(res.Header) > maxServerDelay {
		res.Header.Set("X-Should-Retry", "false")
	}
	return res, err
}

// serverDelay is the wait h asks for, as the SDK reads it: Retry-After-Ms
// in milliseconds, or Retry-After in seconds or as a date; 0 if neither.
func serverDelay(h http.Header) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		return time.Duration(s * float64(time.Second))
	}
	if at, err := time.Parse(time.RFC1123, v); err == nil {
		return time.Until(at)
	}
	return 0
}

func (p *anthropicProvider) Chat(ctx context.Context, req Request) (Response, error) {
	body, maxTokens, err := p.body(req)
	if err != nil {
		return Response{}, p.cfg.failure(0, err.Error(), err)
	}
	// As with OpenAI, the SDK carries the request and our types write and
	// read it: its params took a millisecond a call with twenty tools.
	// The params it is given name only the model and max_tokens, from
	// which it refuses a non-streaming request that could outlast its
	// limits.
	var raw []byte
	stub := anthropic.MessageNewParams{Model: p.cfg.Model, MaxTokens: maxTokens}
	if _, err := p.messages.New(ctx, stub, option.WithRequestBody("application/json", body), option.WithResponseBodyInto(&raw)); err != nil {
		return Response{}, p.fail(ctx, err)
	}
	return p.response(raw)
}

// response reads a messages response body.
func (p *anthropicProvider) response(raw []byte) (Response, error) {
	var msg anthropicMessage
	if err := json.Unmarshal(raw, &msg); err != nil {
		return Response{}, p.cfg.malformed(err)
	}
	if msg.Content == nil {
		if e := string(msg.Error.Message); e != "" {
			// An error event answered with 200, as proxies do.
			return Response{}, p.cfg.failure(0, e, nil)
		}
		return Response{}, p.cfg.failure(0, "malformed response: no content", nil)
	}
	out := Response{
		Usage: Usage{InputTokens: int(msg.Usage.InputTokens), OutputTokens: int(msg.Usage.OutputTokens)},
	}
	var text []string
	for _, block := range *msg.Content {
		switch block.Type {
		case "text":
			text = append(text, string(block.Text))
		case "tool_use":
			if block.Name == "" {
				return Response{}, p.cfg.failure(0, "malformed response: tool_use without a name", nil)
			}
			input := block.Input
			if len(input) == 0 || string(input) == "null" || !json.Valid(input) {
				input = json.RawMessage("{}")
			}
			input = utf8Input(input)
			out.ToolCalls = append(out.ToolCalls, ToolCall{ID: string(block.ID), Name: string(block.Name), Input: input})
		}
	}
	callIDs(out.ToolCalls)
	out.Text = strings.Join(text, "\n")
	switch anthropic.StopReason(msg.StopReason) {
	case anthropic.StopReasonRefusal:
		out.StopReason = StopRefusal
		out.Refusal = out.Text
		if out.Refusal == "" {
			out.Refusal = "the model declined to answer"
		}
	case anthropic.StopReasonToolUse:
		out.StopReason = StopToolUse
	case anthropic.StopReasonMaxTokens:
		out.StopReason = StopMaxTokens
	default:
		out.StopReason = StopEnd
	}
	if len(out.ToolCalls) > 0 && out.StopReason != StopMaxTokens {
		out.StopReason = StopToolUse
	}
	return out, nil
}

// anthropicMessage is what a response says that a Response needs; as
// with chatCompletion, a member of an unusual shape reads as empty, and
// only content that is missing or not a list is malformed.
type anthropicMessage struct {
	Content    *[]anthropicBlockOut `json:"content"`
	StopReason lenientText          `json:"stop_reason"`
	Usage      struct {
		InputTokens  lenientCount `json:"input_tokens"`
		OutputTokens lenientCount `json:"output_tokens"`
	} `json:"usage"`
	Error struct {
		Message lenientText `json:"message"`
	} `json:"error"`
}

type anthropicBlockOut struct {
	Type  lenientText     `json:"type"`
	Text  lenientText     `json:"text"`
	ID    lenientText     `json:"id"`
	Name  lenientText     `json:"name"`
	Input json.RawMessage `json:"input"`
}

// The request body of the messages API.
type (
	anthropicRequest struct {
		Model        string             `json:"model"`
		MaxTokens    int64              `json:"max_tokens"`
		System       []anthropicText    `json:"system,omitempty"`
		Temperature  *float64           `json:"temperature,omitempty"`
		OutputConfig *anthropicEffort   `json:"output_config,omitempty"`
		Messages     []anthropicTurn    `json:"messages"`
		Tools        []anthropicToolDef `json:"tools,omitempty"`
	}
	anthropicEffort struct {
		Effort string `json:"effort"`
	}
	anthropicTurn struct {
		Role    string `json:"role"`
		Content []any  `json:"content"` // anthropicText, anthropicToolUse, anthropicToolResult
	}
	anthropicText struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	anthropicToolUse struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	anthropicToolResult struct {
		Type      string          `json:"type"`
		ToolUseID string          `json:"tool_use_id"`
		IsError   bool            `json:"is_error"`
		Content   []anthropicText `json:"content,omitempty"`
	}
	anthropicToolDef struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
)

func textBlock(s string) anthropicText { return anthropicText{Type: "text", Text: s} }

// body is req as a messages request body, and the max_tokens it asks for.
// A tool's schema goes as it is: the SDK's params left out the
// input_schema of a tool whose schema had no properties, which the API
// refuses.
func (p *anthropicProvider) body(req Request) ([]byte, int64, error) {
	r, err := p.request(req)
	if err != nil {
		return nil, 0, err
	}
	if b, ok := p.schemas.withTools(r, req, appendAnthropicTool); ok {
		return b, r.MaxTokens, nil
	}
	b, err := encodeBody(withAnthropicTools(r, req.Tools), req.Tools)
	if err != nil {
		return nil, 0, err
	}
	return b, r.MaxTokens, nil
}

// request is req as a messages request, its tools aside.
func (p *anthropicProvider) request(req Request) (anthropicRequest, error) {
	r := anthropicRequest{Model: p.cfg.Model, MaxTokens: p.cfg.maxTokens(req), Temperature: req.Temperature, Messages: make([]anthropicTurn, 0, len(req.Messages))}
	if req.System != "" {
		r.System = []anthropicText{textBlock(req.System)}
	}
	if req.ReasoningEffort != "" {
		r.OutputConfig = &anthropicEffort{Effort: req.ReasoningEffort}
	}
	// Anthropic wants alternating user and assistant turns, with tool
	// results as blocks of a user turn: consecutive messages that map to the
	// same role are merged.
	for _, m := range req.Messages {
		var role string
		var blocks []any
		switch m.Role {
		case RoleUser:
			role = "user"
			if m.Content != "" {
				blocks = append(blocks, textBlock(m.Content))
			}
		case RoleTool:
			role = "user"
			res := anthropicToolResult{Type: "tool_result", ToolUseID: m.ToolCallID, IsError: m.IsError}
			if m.Content != "" {
				// The API refuses an empty text block; a result without
				// content is a result that said nothing.
				res.Content = []anthropicText{textBlock(m.Content)}
			}
			blocks = append(blocks, res)
		case RoleAssistant:
			role = "assistant"
			if m.Content != "" {
				blocks = append(blocks, textBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				input := tc.Input
				if len(input) == 0 {
					input = json.RawMessage("{}")
				}
				blocks = append(blocks, anthropicToolUse{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: input})
			}
		default:
			return anthropicRequest{}, fmt.Errorf("message with unknown role %q", m.Role)
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role {
			r.Messages[n-1].Content = append(r.Messages[n-1].Content, blocks...)
			continue
		}
		r.Messages = append(r.Messages, anthropicTurn{Role: role, Content: blocks})
	}
	return r, nil
}

// withAnthropicTools is r with tools.
func withAnthropicTools(r anthropicRequest, tools []ToolDef) anthropicRequest {
	for _, t := range tools {
		r.Tools = append(r.Tools, anthropicToolDef{Name: t.Name, Description: t.Description, InputSchema: t.Schema})
	}
	return r
}

// appendAnthropicTool writes t as the encoder writes its
// anthropicToolDef, with schema as its input_schema.
func appendAnthropicTool(b []byte, t ToolDef, schema []byte) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, t.Name)
	if t.Description != "" {
		b = append(b, `,"description":`...)
		b = appendString(b, t.Description)
	}
	b = append(b, `,"input_schema":`...)
	b = append(b, schema...)
	return append(b, '}')
}

func (p *anthropicProvider) fail(ctx context.Context, err error) error {
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		var body struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal([]byte(apiErr.RawJSON()), &body)
		return p.cfg.failure(apiErr.StatusCode, body.Error.Message, err)
	}
	return p.cfg.unanswered(ctx, err)
}
