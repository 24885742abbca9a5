package agents

import (
	"context"

	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/bot"
)

// ModelSource gives the provider configured under a model name; llm.Models
// implements it.
type ModelSource interface {
	Model(name string) (llm.Provider, bool)
}

// ConversationStore keeps the conversation of each (session key, agent)
// between runs, as an opaque document the runtime encodes. storage/bolt
// implements it.
type ConversationStore interface {
	// LoadConversation returns nil and no error when there is none.
	LoadConversation(ctx context.Context, sessionKey, agent string) ([]byte, error)
	SaveConversation(ctx context.Context, sessionKey, agent string, doc []byte) error
	// ResetConversations forgets every agent's conversation of the thread
	// and returns how many there were.
	ResetConversations(ctx context.Context, sessionKey string) (int, error)
}

// TranscriptStore keeps the transcript of each run of a job: the top-level
// run and every agent it called as a tool, keyed by correlation id.
type TranscriptStore interface {
	SaveTranscript(ctx context.Context, jobID, runID string, doc []byte) error
	// ListTranscripts returns a job's transcripts in the order they were
	// first saved.
	ListTranscripts(ctx context.Context, jobID string) ([][]byte, error)
}

// Rerouter records a handoff: the work item goes to another agent. The
// core's bot.WorkItemStore implements it and enforces bot.MaxHops, failing
// with bot.ECONFLICT beyond it.
type Rerouter interface {
	RerouteWorkItem(ctx context.Context, id string, hop bot.Hop) (*bot.WorkItem, error)
}
