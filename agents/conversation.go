package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/bot"
)

// conversationVersion is the format of stored conversations; a document of
// another version is ignored (the thread starts afresh) rather than misread.
const conversationVersion = 1

type conversationDoc struct {
	Version  int           `json:"version"`
	Agent    string        `json:"agent"`
	Messages []llm.Message `json:"messages"`
	// Since is when the run that saved it read the conversation it went on
	// from: a thread reset after that leaves the document behind.
	Since     time.Time `json:"since,omitzero"`
	UpdatedAt time.Time `json:"updated_at"`
}

// loadConversation reads the conversation of (sessionKey, agent), or none
// when the thread was reset (resetAt) after the run that saved it had read
// its own: that run worked across the reset, and what it kept is from
// before.
func (r *Runtime) loadConversation(ctx context.Context, sessionKey, agent string, resetAt time.Time) ([]llm.Message, error) {
	if r.opts.Conversations == nil || sessionKey == "" {
		return nil, nil
	}
	raw, err := r.opts.Conversations.LoadConversation(ctx, sessionKey, agent)
	if err != nil {
		return nil, fmt.Errorf("load conversation of %s with %s: %w", sessionKey, agent, err)
	}
	if raw == nil {
		return nil, nil
	}
	var doc conversationDoc
	if err := json.Unmarshal(raw, &doc); err != nil || doc.Version != conversationVersion {
		r.log.LogAttrs(ctx, slog.LevelWarn, "stored conversation unreadable; starting afresh",
			slog.String("thread", sessionKey), slog.String("agent", agent), slog.Int("version", doc.Version))
		return nil, nil
	}
	since := doc.Since
	if since.IsZero() {
		since = doc.UpdatedAt
	}
	if !resetAt.IsZero() && since.Before(resetAt) {
		r.log.LogAttrs(ctx, slog.LevelInfo, "stored conversation is from before the thread's reset; starting afresh",
			slog.String("thread", sessionKey), slog.String("agent", agent), slog.Time("reset_at", resetAt))
		return nil, nil
	}
	return doc.Messages, nil
}

// saveConversation keeps the last MaxHistory messages, redacted. A failure
// is logged, not returned: the run's answer matters more than its memory.
func (r *Runtime) saveConversation(ctx context.Context, rn *run, msgs []llm.Message) {
	if r.opts.Conversations == nil || rn.sessionKey == "" {
		return
	}
	doc := conversationDoc{
		Version:   conversationVersion,
		Agent:     rn.def.Name,
		Messages:  r.redactMessages(trimHistory(msgs, r.opts.MaxHistory)),
		Since:     rn.historyAt.UTC(),
		UpdatedAt: r.opts.Now().UTC(),
	}
	raw, err := json.Marshal(doc)
	if err == nil {
		err = r.opts.Conversations.SaveConversation(ctx, rn.sessionKey, rn.def.Name, raw)
	}
	if err != nil {
		r.log.LogAttrs(ctx, slog.LevelError, "save conversation", append(rn.attrs(), slog.String("error", err.Error()))...)
	}
}

// ResetThread forgets the conversations of every agent in the thread, so
// the next message starts afresh; it returns how many it forgot.
func (r *Runtime) ResetThread(ctx context.Context, sessionKey string) (int, error) {
	if r.opts.Conversations == nil {
		return 0, nil
	}
	n, err := r.opts.Conversations.ResetConversations(ctx, sessionKey)
	if err != nil {
		return 0, fmt.Errorf("reset conversations of %s: %w", sessionKey, err)
	}
	return n, nil
}

// trimHistory keeps at most max messages, starting at a user message: a
// tool result without the assistant call before it is rejected by both
// providers.
func trimHistory(msgs []llm.Message, max int) []llm.Message {
	if len(msgs) <= max {
		return msgs
	}
	msgs = msgs[len(msgs)-max:]
	for i, m := range msgs {
		if m.Role == llm.RoleUser {
			return msgs[i:]
		}
	}
	return nil
}

func (r *Runtime) redactMessages(msgs []llm.Message) []llm.Message {
	out := make([]llm.Message, len(msgs))
	for i, m := range msgs {
		m.Content = r.redactor.Redact(m.Content)
		if len(m.ToolCalls) > 0 {
			calls := make([]llm.ToolCall, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				c.Input = r.redactJSON(c.Input)
				calls[j] = c
			}
			m.ToolCalls = calls
		}
		out[i] = m
	}
	return out
}

// redactJSON masks secrets inside a tool call's input, keeping it JSON.
func (r *Runtime) redactJSON(raw json.RawMessage) json.RawMessage {
	return r.redactor.RedactJSON(raw)
}

// Transcript is the record of one run of one agent in a job, secrets
// masked: the top-level run's RunID is the job id, an agent it called as a
// tool has the caller's RunID plus ".n".
type Transcript struct {
	JobID       string `json:"job_id"`
	RunID       string `json:"run_id"`
	ParentRunID string `json:"parent_run_id,omitempty"`
	Agent       string `json:"agent"`
	SessionKey  string `json:"session_key,omitempty"`
	Model       string `json:"model"`
	System      string `json:"system"`
	// Earlier is how many messages of the thread's conversation preceded
	// this run; Messages are this run's own.
	Earlier    int           `json:"earlier_messages"`
	Messages   []llm.Message `json:"messages"`
	Response   AgentResponse `json:"response"`
	StartedAt  time.Time     `json:"started_at"`
	FinishedAt time.Time     `json:"finished_at"`
}

func (r *Runtime) saveTranscript(ctx context.Context, rn *run, out outcome, resp AgentResponse, earlier int, started time.Time) {
	if r.opts.Transcripts == nil || rn.jobID == "" {
		return
	}
	t, err := r.transcript(rn, out, resp, earlier, started)
	if err == nil {
		err = r.opts.Transcripts.SaveTranscript(ctx, t.JobID, t.RunID, t.Doc)
	}
	if err != nil {
		r.log.LogAttrs(ctx, slog.LevelError, "save transcript", append(rn.attrs(), slog.String("error", err.Error()))...)
	}
}

// transcript is rn's transcript, redacted, as it is stored.
func (r *Runtime) transcript(rn *run, out outcome, resp AgentResponse, earlier int, started time.Time) (bot.Transcript, error) {
	t := Transcript{
		JobID: rn.jobID, RunID: rn.correlationID, ParentRunID: rn.parentID, Agent: rn.def.Name,
		SessionKey: rn.sessionKey, Model: out.model, System: r.redactor.Redact(out.system), Earlier: earlier,
		Messages: r.redactMessages(out.messages), Response: resp,
		StartedAt: started.UTC(), FinishedAt: r.opts.Now().UTC(),
	}
	raw, err := json.Marshal(t)
	if err != nil {
		return bot.Transcript{}, fmt.Errorf("encode the transcript: %w", err)
	}
	return bot.Transcript{JobID: rn.jobID, RunID: rn.correlationID, Doc: raw}, nil
}

// Transcripts returns the transcripts of a job's runs, in the order they
// were saved (callees before their callers finish).
func (r *Runtime) Transcripts(ctx context.Context, jobID string) ([]Transcript, error) {
	if r.opts.Transcripts == nil {
		return nil, nil
	}
	docs, err := r.opts.Transcripts.ListTranscripts(ctx, jobID)
	if err != nil {
		return nil, fmt.Errorf("transcripts of %s: %w", jobID, err)
	}
	out := make([]Transcript, 0, len(docs))
	for _, d := range docs {
		var t Transcript
		if err := json.Unmarshal(d, &t); err != nil {
			return nil, fmt.Errorf("transcript of %s: %w", jobID, err)
		}
		out = append(out, t)
	}
	return out, nil
}
