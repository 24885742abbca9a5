package bolt

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// The agent runtime's records live in two top-level buckets of their own,
// created by the first write, so files written before the runtime existed
// need no migration. The documents are opaque here; package agents encodes
// them.
//
//	agent_conversations/<session key>/<agent>  conversation document
//	agent_transcripts/<job id>/<run id>        8-byte save order + transcript document
//
// A thread's conversations share one inner bucket, so a reset drops them in
// one step; a job's transcripts share one, so listing them reads one bucket.
var (
	bucketConversations = []byte("agent_conversations")
	bucketTranscripts   = []byte("agent_transcripts")
)

// LoadConversation returns the stored conversation of (sessionKey, agent),
// or nil when there is none.
func (s *Store) LoadConversation(ctx context.Context, sessionKey, agent string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := validAgentKeys("conversation", sessionKey, agent); err != nil {
		return nil, err
	}
	var doc []byte
	err := s.view("load conversation", func(t txn) error {
		b := agentBucket(t.tx, bucketConversations, sessionKey)
		if b == nil {
			return nil
		}
		if v := b.Get([]byte(agent)); v != nil {
			doc = append([]byte(nil), v...)
		}
		return nil
	})
	return doc, err
}

// SaveConversation replaces the conversation of (sessionKey, agent).
func (s *Store) SaveConversation(ctx context.Context, sessionKey, agent string, doc []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validAgentKeys("conversation", sessionKey, agent); err != nil {
		return err
	}
	return s.update("save conversation", func(t txn) error {
		b, err := createAgentBucket(t.tx, bucketConversations, sessionKey)
		if err != nil {
			return err
		}
		return b.Put([]byte(agent), doc)
	})
}

// ResetConversations forgets every agent's conversation of sessionKey and
// returns how many it forgot. Resetting a thread without any is not an
// error.
func (s *Store) ResetConversations(ctx context.Context, sessionKey string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if sessionKey == "" {
		return 0, bot.Errorf(bot.EINVALID, "conversation: empty session key")
	}
	n := 0
	err := s.update("reset conversations", func(t txn) error {
		top := t.tx.Bucket(bucketConversations)
		if top == nil {
			return nil
		}
		b := top.Bucket([]byte(sessionKey))
		if b == nil {
			return nil
		}
		n = countKeys(b)
		return top.DeleteBucket([]byte(sessionKey))
	})
	return n, err
}

// SaveTranscript stores the transcript of run runID of job jobID. Saving a
// run again replaces its document and keeps its place in the order.
func (s *Store) SaveTranscript(ctx context.Context, jobID, runID string, doc []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validAgentKeys("transcript", jobID, runID); err != nil {
		return err
	}
	return s.update("save transcript", func(t txn) error { return t.saveTranscript(jobID, runID, doc) })
}

// saveTranscript stores doc as run runID's transcript of job jobID.
func (t txn) saveTranscript(jobID, runID string, doc []byte) error {
	b, err := createAgentBucket(t.tx, bucketTranscripts, jobID)
	if err != nil {
		return err
	}
	order := b.Get([]byte(runID))
	if len(order) < 8 {
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		order = seqKey(seq)
	}
	v := make([]byte, 0, 8+len(doc))
	v = append(append(v, order[:8]...), doc...)
	return b.Put([]byte(runID), v)
}

// ListTranscripts returns the transcripts of jobID in the order their runs
// were first saved; none is an empty list.
func (s *Store) ListTranscripts(ctx context.Context, jobID string) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if jobID == "" {
		return nil, bot.Errorf(bot.EINVALID, "transcript: empty job id")
	}
	type entry struct {
		order uint64
		doc   []byte
	}
	var entries []entry
	err := s.view("list transcripts", func(t txn) error {
		b := agentBucket(t.tx, bucketTranscripts, jobID)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if len(v) < 8 {
				return fmt.Errorf("transcript %s/%s: record too short", jobID, k)
			}
			entries = append(entries, entry{order: binary.BigEndian.Uint64(v[:8]), doc: append([]byte(nil), v[8:]...)})
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].order < entries[j].order })
	out := make([][]byte, len(entries))
	for i, e := range entries {
		out[i] = e.doc
	}
	return out, nil
}

func validAgentKeys(what, outer, inner string) error {
	if outer == "" || inner == "" {
		return bot.Errorf(bot.EINVALID, "%s: empty key (%q, %q)", what, outer, inner)
	}
	if len(outer) > bolt.MaxKeySize || len(inner) > bolt.MaxKeySize {
		return bot.Errorf(bot.ETOOLARGE, "%s: key longer than %d bytes", what, bolt.MaxKeySize)
	}
	return nil
}

// agentBucket returns top/name in a read transaction, nil until it was created.
func agentBucket(tx *bolt.Tx, top []byte, name string) *bolt.Bucket {
	b := tx.Bucket(top)
	if b == nil {
		return nil
	}
	return b.Bucket([]byte(name))
}

// createAgentBucket returns top/name, creating both as needed.
func createAgentBucket(tx *bolt.Tx, top []byte, name string) (*bolt.Bucket, error) {
	b, err := tx.CreateBucketIfNotExists(top)
	if err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", top, err)
	}
	inner, err := b.CreateBucketIfNotExists([]byte(name))
	if err != nil {
		return nil, fmt.Errorf("create bucket %s/%s: %w", top, name, err)
	}
	return inner, nil
}
