package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// openaiProvider speaks OpenAI chat completions. It builds the chat service
// directly rather than through openai.NewClient, which would also read
// OPENAI_API_KEY and OPENAI_BASE_URL from the environment: the config file is
// the only source, so a key meant for api.openai.com is never sent to a local
// server.
type openaiProvider struct {
	cfg  Config
	chat openai.ChatCompletionService
	// official is api.openai.com, which wants max_completion_tokens; the
	// compatible servers (Ollama, vLLM, LM Studio) understand max_tokens.
	official bool
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
	return &openaiProvider{cfg: c, chat: openai.NewChatCompletionService(opts...), official: c.BaseURL == ""}
}

func (p *openaiProvider) Chat(ctx context.Context, req Request) (Response, error) {
	params, err := p.params(req)
	if err != nil {
		return Response{}, p.fail(err)
	}
	completion, err := p.chat.New(ctx, params)
	if err != nil {
		return Response{}, p.fail(err)
	}
	if len(completion.Choices) == 0 {
		return Response{}, &Error{Provider: p.cfg.Provider, Model: p.cfg.Model, Message: "malformed response: no choices"}
	}
	choice := completion.Choices[0]
	out := Response{
		Text:    choice.Message.Content,
		Refusal: choice.Message.Refusal,
		Usage: Usage{
			InputTokens:  int(completion.Usage.PromptTokens),
			OutputTokens: int(completion.Usage.CompletionTokens),
		},
	}
	for i, tc := range choice.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		if tc.Function.Name == "" {
			return Response{}, &Error{Provider: p.cfg.Provider, Model: p.cfg.Model, Message: "malformed response: tool call without a function name"}
		}
		id := tc.ID
		if id == "" {
			// Some compatible servers leave ids out; the result must still
			// name its call when the conversation is sent back.
			id = fmt.Sprintf("call_%d", i)
		}
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: id, Name: tc.Function.Name, Input: rawArguments(tc.Function.Arguments)})
	}
	switch {
	case out.Refusal != "" || choice.FinishReason == "content_filter":
		out.StopReason = StopRefusal
	case len(out.ToolCalls) > 0:
		out.StopReason = StopToolUse
	case choice.FinishReason == "length":
		out.StopReason = StopMaxTokens
	default:
		out.StopReason = StopEnd
	}
	return out, nil
}

func (p *openaiProvider) params(req Request) (openai.ChatCompletionNewParams, error) {
	params := openai.ChatCompletionNewParams{
		Model:    p.cfg.Model,
		Messages: make([]openai.ChatCompletionMessageParamUnion, 0, len(req.Messages)+1),
	}
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
		default:
			return params, fmt.Errorf("message with unknown role %q", m.Role)
		}
	}
	for _, t := range req.Tools {
		var schema map[string]any
		if err := json.Unmarshal(t.Schema, &schema); err != nil {
			return params, fmt.Errorf("tool %s: schema: %w", t.Name, err)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        t.Name,
			Description: openai.String(t.Description),
			Parameters:  schema,
		}))
	}
	return params, nil
}

func (p *openaiProvider) fail(err error) error {
	e := &Error{Provider: p.cfg.Provider, Model: p.cfg.Model, Err: err}
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		e.StatusCode = apiErr.StatusCode
		e.Message = apiErr.Message
	} else {
		e.Message = err.Error()
	}
	return e
}

// rawArguments keeps a tool call's arguments as JSON. A model that sends
// something that is not JSON gets it back as a JSON string, which the tool
// then rejects with a message the model can act on.
func rawArguments(args string) json.RawMessage {
	switch {
	case args == "":
		return json.RawMessage("{}")
	case json.Valid([]byte(args)):
		return json.RawMessage(args)
	}
	b, _ := json.Marshal(args)
	return b
}
