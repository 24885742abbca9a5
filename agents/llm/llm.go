package llm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	sjson "github.com/segmentio/encoding/json"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/internal/jsonwords"
)

// Provider is one configured model. Chat sends the conversation and returns
// the model's next message: text, tool calls, or both.
type Provider interface {
	Chat(ctx context.Context, req Request) (Response, error)
}

// Role says who wrote a message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool" // the result of one tool call
)

// Message is one entry of a conversation. The system prompt is not a message;
// it travels in Request.System because the two wire formats place it
// differently.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls an assistant message makes.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID names the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// IsError marks a tool result that reports a failure or a refusal.
	IsError bool `json:"is_error,omitempty"`
}

// ToolCall is the model asking to run a tool.
type ToolCall struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// ToolDef describes a tool the model may call. Schema is a JSON schema of
// type object.
type ToolDef struct {
	Name        string
	Description string
	Schema      json.RawMessage
}

// Request is one call to a model.
type Request struct {
	System   string
	Messages []Message
	Tools    []ToolDef
	// MaxTokens caps the response; 0 uses the model's configured max_tokens.
	MaxTokens   int
	Temperature *float64
	// ReasoningEffort is passed to models that take one ("low", "medium",
	// "high"); "" leaves the provider's default.
	ReasoningEffort string
}

// Stop reasons, normalised across providers.
const (
	StopEnd       = "end"
	StopToolUse   = "tool_use"
	StopMaxTokens = "max_tokens" // cut off: a tool call in it may be cut too, and is not to be run
	StopRefusal   = "refusal"
)

// Response is the model's next message.
type Response struct {
	Text      string
	ToolCalls []ToolCall
	// Refusal is set when the model declined to answer.
	Refusal    string
	StopReason string
	Usage      Usage
}

// Usage is what a call cost, as the provider counted it.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Total is input plus output tokens.
func (u Usage) Total() int { return u.InputTokens + u.OutputTokens }

// Provider names accepted in Config.Provider.
const (
	ProviderOpenAI    = "openai"    // OpenAI or any compatible chat completions server (Ollama, vLLM, LM Studio)
	ProviderAnthropic = "anthropic" // Anthropic messages
)

// Defaults applied by New to a Config that leaves them zero.
const (
	DefaultMaxTokens  = 4096
	DefaultTimeout    = 5 * time.Minute
	DefaultMaxRetries = 3
)

// Config is one entry of the models section of the config file.
type Config struct {
	Provider string     `yaml:"provider" json:"provider"`
	BaseURL  string     `yaml:"base_url" json:"base_url,omitempty"`
	APIKey   bot.Secret `yaml:"api_key" json:"api_key,omitempty"`
	// Model is the provider's model id ("claude-sonnet-5-5", "llama3.2").
	Model string `yaml:"model" json:"model"`
	// MaxTokens caps each response.
	MaxTokens int `yaml:"max_tokens" json:"max_tokens,omitempty"`
	// Timeout bounds one HTTP attempt; retries get their own.
	Timeout time.Duration `yaml:"timeout" json:"timeout,omitempty"`
	// MaxRetries is how often the SDK retries 408, 409, 429, 5xx and
	// connection errors, waiting as Retry-After says; 0 uses
	// DefaultMaxRetries, a negative value disables retries.
	MaxRetries int `yaml:"max_retries" json:"max_retries,omitempty"`
}

// Validate reports every problem with c, each a *bot.FieldError whose Field
// is relative to the entry ("provider", "model"), joined with errors.Join;
// the config loader prefixes "models.<name>.". A password in base_url is
// not repeated.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &bot.FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	switch c.Provider {
	case ProviderOpenAI, ProviderAnthropic:
	case "":
		bad("provider", "required: openai or anthropic")
	default:
		bad("provider", "unknown provider %q (want openai or anthropic)", c.Provider)
	}
	if strings.TrimSpace(c.Model) == "" {
		bad("model", "required: the provider's model name")
	}
	if c.BaseURL != "" {
		switch u, err := url.Parse(c.BaseURL); {
		case err != nil:
			bad("base_url", "want an http or https URL, got something unparsable")
		case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
			bad("base_url", "want an http or https URL, got %q", u.Redacted())
		}
	}
	if !c.APIKey.IsSet() && c.BaseURL == "" && (c.Provider == ProviderOpenAI || c.Provider == ProviderAnthropic) {
		bad("api_key", "required for %s without a base_url", c.Provider)
	}
	if c.MaxTokens < 0 {
		bad("max_tokens", "must not be negative, got %d", c.MaxTokens)
	}
	if c.Timeout < 0 {
		bad("timeout", "must not be negative, got %s", c.Timeout)
	}
	return errors.Join(errs...)
}

// Describe says which model this is, for logs: never the key.
func (c Config) Describe() string {
	if c.BaseURL == "" {
		return fmt.Sprintf("%s %s", c.Provider, c.Model)
	}
	return fmt.Sprintf("%s %s at %s", c.Provider, c.Model, c.BaseURL)
}

func (c Config) withDefaults() Config {
	if c.MaxTokens == 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	switch {
	case c.MaxRetries == 0:
		c.MaxRetries = DefaultMaxRetries
	case c.MaxRetries < 0:
		c.MaxRetries = 0
	}
	return c
}

// New returns the provider c configures. hc carries the requests (nil: a
// client of its own); per-attempt timeouts come from c.Timeout, not from hc.
func New(c Config, hc *http.Client) (Provider, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("model %s: %w", c.Model, err)
	}
	c = c.withDefaults()
	if hc == nil {
		hc = &http.Client{}
	}
	if c.Provider == ProviderAnthropic {
		return newAnthropic(c, hc), nil
	}
	return newOpenAI(c, hc), nil
}

// Models are the configured providers by the names agents use for them
// ("default", "fast").
type Models map[string]Provider

// Open builds a provider for every entry of cfgs.
func Open(cfgs map[string]Config, hc *http.Client) (Models, error) {
	m := make(Models, len(cfgs))
	for _, name := range sortedKeys(cfgs) {
		p, err := New(cfgs[name], hc)
		if err != nil {
			return nil, fmt.Errorf("models.%s: %w", name, err)
		}
		m[name] = p
	}
	return m, nil
}

// Model returns the provider configured under name.
func (m Models) Model(name string) (Provider, bool) {
	p, ok := m[name]
	return p, ok
}

// Names returns the configured names, sorted.
func (m Models) Names() []string { return sortedKeys(m) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Error is a failed model call. Message is the provider's own explanation
// when it sent one; it never contains the API key.
type Error struct {
	Provider   string
	Model      string
	StatusCode int // 0 when no HTTP response arrived or it could not be read
	Message    string
	Err        error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s model %s", e.Provider, e.Model)
	if e.StatusCode != 0 {
		msg += fmt.Sprintf(": HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// failure is a failed call to the model c configures. The message is the
// server's or the transport's: it is masked with c's key and every
// credential shape, since a server may repeat the key it was given ("invalid
// x-api-key sk-…").
func (c Config) failure(status int, msg string, err error) *Error {
	return &Error{Provider: c.Provider, Model: c.Model, StatusCode: status, Message: bot.NewRedactor(c.APIKey).Redact(msg), Err: err}
}

// unanswered is a call that got no answer it could read: the server could
// not be reached, kept silent past the model's timeout or stopped in the
// middle of its answer. It is said in words, not in Go's ("Post
// \"http://…\": dial tcp …: connect: connection refused", "context deadline
// exceeded"); the address is the model's own, never its key. ctx is the
// caller's: a call it stopped is said to be stopped, not timed out.
func (c Config) unanswered(ctx context.Context, err error) *Error {
	var ue *url.Error
	var op *net.OpError
	var ne net.Error
	var msg string
	switch {
	case ctx.Err() != nil:
		msg = "stopped before it answered"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		msg = fmt.Sprintf("no answer within the model's timeout (%s)", c.Timeout)
	case errors.Is(err, io.ErrUnexpectedEOF):
		msg = "the answer was cut off before its end"
	case errors.As(err, &op) && op.Op == "dial" && errors.As(err, &ue):
		host := ue.URL
		if u, perr := url.Parse(ue.URL); perr == nil {
			host = u.Host
		}
		msg = fmt.Sprintf("cannot connect to %s: %s", host, httpapi.Unreachable(err))
	default:
		msg = httpapi.Unreachable(err)
	}
	return c.failure(0, msg, err)
}

// malformed is a failure for an answer that cannot be read: err is what
// the JSON decoder said, which names a Go type where the answer had a
// member of the wrong shape, so that is said in the answer's words.
func (c Config) malformed(err error) *Error {
	var typeErr *json.UnmarshalTypeError
	msg := err.Error()
	if errors.As(err, &typeErr) {
		if typeErr.Field == "" {
			msg = fmt.Sprintf("the body is %s, not an object", jsonwords.Got(typeErr.Value))
		} else {
			msg = fmt.Sprintf("%s is %s where %s belongs", typeErr.Field, jsonwords.Got(typeErr.Value), jsonwords.Want(typeErr.Type))
		}
	}
	return c.failure(0, "malformed response: "+msg, err)
}

// utf8Input is a tool call's input, which is JSON, in valid UTF-8: the
// JSON reader keeps the bytes of a raw member as they came, and input
// that is not UTF-8 would reach the tool as it came and be sent back to
// the model in a body that is not JSON. Strings with bytes that are not
// UTF-8 have them replaced with U+FFFD, as in every other member.
func utf8Input(in json.RawMessage) json.RawMessage {
	if utf8.Valid(in) {
		return in
	}
	d := json.NewDecoder(bytes.NewReader(in))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return json.RawMessage("{}")
	}
	out, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("{}")
	}
	return out
}

// callIDs gives each call of one answer an id of its own: a call without
// one, or with the id of an earlier call of the answer, gets a new one.
// A result names its call by id, and a spawned subagent is found again by
// its call's id, so an id is never reused: new ones are random, since a
// server that leaves ids out leaves them out on every turn.
func callIDs(calls []ToolCall) {
	seen := make(map[string]bool, len(calls))
	for i := range calls {
		if calls[i].ID == "" || seen[calls[i].ID] {
			calls[i].ID = "call_" + rand.Text()
		}
		seen[calls[i].ID] = true
	}
}

// maxTokens is the max_tokens a request asks for: its own, or the model's.
func (c Config) maxTokens(req Request) int64 {
	if req.MaxTokens > 0 {
		return int64(req.MaxTokens)
	}
	return int64(c.MaxTokens)
}

// bodyFlags are how the encoder writes a request body: as sjson.Marshal
// does, HTML characters in strings escaped.
const bodyFlags = sjson.EscapeHTML | sjson.SortMapKeys

// schemas remembers each tool schema as a request body writes it (checked,
// compacted, <, > and & escaped), by its text: an agent's tools go with
// every call of every run, the same few schemas each time, and reading
// each again costs more than the rest of the body. It holds at most
// maxSchemaBytes of texts, answers and entries (schemaEntryBytes each),
// and starts again when full. It is safe for concurrent use.
type schemas struct {
	mu    sync.RWMutex
	m     map[string][]byte
	bytes int
}

const (
	maxSchemaBytes = 1 << 20
	// schemaEntryBytes is what an entry costs besides its text and answer:
	// its slot in the map and the headers of both.
	schemaEntryBytes = 64
)

// encoded is schema as the encoder writes it, or false where the encoder
// refuses it or it is not valid JSON (validSchema).
func (s *schemas) encoded(schema json.RawMessage) ([]byte, bool) {
	if len(schema) == 0 || len(schema) > maxSchemaBytes/16 {
		// Nil and empty would be one key; neither is worth remembering,
		// nor is a schema larger than a few.
		if !validSchema(schema) {
			return nil, false
		}
		b, err := sjson.Append(nil, schema, bodyFlags)
		return b, err == nil
	}
	s.mu.RLock()
	b, ok := s.m[string(schema)]
	s.mu.RUnlock()
	if ok {
		return b, true
	}
	if !validSchema(schema) {
		return nil, false
	}
	b, err := sjson.Append(nil, schema, bodyFlags)
	if err != nil {
		return nil, false
	}
	// The answer is up to six times the text (\u003c for <).
	n := len(schema) + len(b) + schemaEntryBytes
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || s.bytes+n > maxSchemaBytes {
		s.m, s.bytes = map[string][]byte{}, 0
	}
	if _, ok := s.m[string(schema)]; !ok {
		s.m[string(schema)] = b
		s.bytes += n
	}
	return b, true
}

// withTools writes body, req as a request body without tools whose last
// member would be "tools", and then req's tools as that member, each
// written by tool with its schema as the encoder writes it: the bytes
// encodeBody writes for body with its tools. False means a schema the
// encoder refuses, or a body it cannot write: encodeBody then says why.
func (s *schemas) withTools(body any, req Request, tool func(b []byte, t ToolDef, schema []byte) []byte) ([]byte, bool) {
	tools := req.Tools
	b, err := sjson.Append(make([]byte, 0, req.size()), body, bodyFlags)
	if err != nil || len(b) < 3 || b[len(b)-1] != '}' {
		return nil, false
	}
	if len(tools) == 0 {
		return b, true
	}
	b = append(b[:len(b)-1], `,"tools":[`...)
	for i, t := range tools {
		schema, ok := s.encoded(t.Schema)
		if !ok {
			return nil, false
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = tool(b, t, schema)
	}
	return append(b, "]}"...), true
}

// size is about how long req is as a request body, escapes aside.
func (req Request) size() int {
	n := 512 + len(req.System)
	for _, m := range req.Messages {
		n += 64 + len(m.Content) + len(m.ToolCallID)
		for _, c := range m.ToolCalls {
			n += 64 + len(c.ID) + len(c.Name) + len(c.Input)
		}
	}
	for _, t := range req.Tools {
		n += 64 + len(t.Name) + len(t.Description) + len(t.Schema)
	}
	return n
}

// appendString appends s as the encoder writes a string.
func appendString(b []byte, s string) []byte {
	b, _ = sjson.Append(b, s, bodyFlags) // a string always encodes
	return b
}

// encodeBody writes a provider's request body. Tool schemas are checked
// here, on the path a body takes when one of them is refused (the schemas
// remembered were checked once, when first written); a bad one is named.
func encodeBody(body any, tools []ToolDef) ([]byte, error) {
	for _, t := range tools {
		if !validSchema(t.Schema) {
			return nil, fmt.Errorf("tool %s: schema: not valid JSON", t.Name)
		}
	}
	b, err := sjson.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode the request: %w", err)
	}
	return b, nil
}

// validSchema reports whether a tool's schema is one JSON value: the
// encoder writes a raw value's first and drops what follows it, so
// '{"type":"object"}}' would go as '{"type":"object"}'. A nil schema goes
// as null.
func validSchema(schema json.RawMessage) bool {
	return schema == nil || json.Valid(schema)
}
