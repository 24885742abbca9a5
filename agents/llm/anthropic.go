package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// anthropicProvider speaks Anthropic messages. Like the OpenAI one it is
// built without the SDK's environment defaults (ANTHROPIC_API_KEY,
// ANTHROPIC_BASE_URL, profiles): what the config says is what is used.
type anthropicProvider struct {
	cfg      Config
	messages anthropic.MessageService
}

func newAnthropic(c Config, hc *http.Client) *anthropicProvider {
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(c.MaxRetries),
		option.WithRequestTimeout(c.Timeout),
		option.WithAPIKey(c.APIKey.Reveal()),
	}
	if c.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(c.BaseURL))
	} else {
		opts = append(opts, option.WithEnvironmentProduction())
	}
	return &anthropicProvider{cfg: c, messages: anthropic.NewMessageService(opts...)}
}

func (p *anthropicProvider) Chat(ctx context.Context, req Request) (Response, error) {
	params, err := p.params(req)
	if err != nil {
		return Response{}, p.fail(err)
	}
	msg, err := p.messages.New(ctx, params)
	if err != nil {
		return Response{}, p.fail(err)
	}
	if !msg.JSON.Content.Valid() {
		return Response{}, &Error{Provider: p.cfg.Provider, Model: p.cfg.Model, Message: "malformed response: no content"}
	}
	out := Response{
		Usage: Usage{InputTokens: int(msg.Usage.InputTokens), OutputTokens: int(msg.Usage.OutputTokens)},
	}
	var text []string
	for _, block := range msg.Content {
		switch block.Type {
		case "text":
			text = append(text, block.Text)
		case "tool_use":
			if block.Name == "" {
				return Response{}, &Error{Provider: p.cfg.Provider, Model: p.cfg.Model, Message: "malformed response: tool_use without a name"}
			}
			input := block.Input
			if len(input) == 0 || !json.Valid(input) {
				input = json.RawMessage("{}")
			}
			out.ToolCalls = append(out.ToolCalls, ToolCall{ID: block.ID, Name: block.Name, Input: input})
		}
	}
	out.Text = strings.Join(text, "\n")
	switch msg.StopReason {
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
	if len(out.ToolCalls) > 0 {
		out.StopReason = StopToolUse
	}
	return out, nil
}

func (p *anthropicProvider) params(req Request) (anthropic.MessageNewParams, error) {
	maxTokens := int64(p.cfg.MaxTokens)
	if req.MaxTokens > 0 {
		maxTokens = int64(req.MaxTokens)
	}
	params := anthropic.MessageNewParams{
		Model:     p.cfg.Model,
		MaxTokens: maxTokens,
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	if req.Temperature != nil {
		params.Temperature = anthropic.Float(*req.Temperature)
	}
	if req.ReasoningEffort != "" {
		params.OutputConfig.Effort = anthropic.OutputConfigEffort(req.ReasoningEffort)
	}
	// Anthropic wants alternating user and assistant turns, with tool
	// results as blocks of a user turn: consecutive messages that map to the
	// same role are merged.
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
		default:
			return params, fmt.Errorf("message with unknown role %q", m.Role)
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
	for _, t := range req.Tools {
		schema, err := anthropicSchema(t.Schema)
		if err != nil {
			return params, fmt.Errorf("tool %s: schema: %w", t.Name, err)
		}
		tool := anthropic.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tool.Description = anthropic.String(t.Description)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &tool})
	}
	return params, nil
}

// anthropicSchema splits a JSON schema into the SDK's typed fields and keeps
// the rest (descriptions, additionalProperties, $defs) as extra fields.
func anthropicSchema(raw json.RawMessage) (anthropic.ToolInputSchemaParam, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return anthropic.ToolInputSchemaParam{}, err
	}
	s := anthropic.ToolInputSchemaParam{Properties: m["properties"]}
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				s.Required = append(s.Required, name)
			}
		}
	}
	delete(m, "properties")
	delete(m, "required")
	delete(m, "type")
	if len(m) > 0 {
		s.ExtraFields = m
	}
	return s, nil
}

func (p *anthropicProvider) fail(err error) error {
	e := &Error{Provider: p.cfg.Provider, Model: p.cfg.Model, Err: err}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		e.StatusCode = apiErr.StatusCode
		var body struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(apiErr.RawJSON()), &body) == nil {
			e.Message = body.Error.Message
		}
	} else {
		e.Message = err.Error()
	}
	return e
}
