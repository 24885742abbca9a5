package bolt

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// TestCheckFindsTheOutboxOutOfStep changes a store's file behind its back
// in the ways the pending outbox index can fall out of step with the
// messages: Check finds each, naming the message.
func TestCheckFindsTheOutboxOutOfStep(t *testing.T) {
	now := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
	th := bot.SlackThread("T1", "C1", "171.1")
	dest := th.Destination()
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, tx *bolt.Tx)
		want   string
	}{
		{"a pending message out of the index", func(t *testing.T, tx *bolt.Tx) {
			require.NoError(t, tx.Bucket([]byte(bucketOutboxPending)).Delete(indexKey(dest, 2)))
		}, `pending outbox message "wi_1/pending" is not in the pending index`},
		{"an entry with another next attempt", func(t *testing.T, tx *bolt.Tx) {
			m := &bot.OutboxMessage{Key: "wi_1/pending", WorkItemID: "wi_1", NextAttemptAt: now.Add(time.Hour)}
			require.NoError(t, tx.Bucket([]byte(bucketOutboxPending)).Put(indexKey(dest, 2), pendingOutbox(m)))
		}, `the pending index's entry of outbox message "wi_1/pending" does not say when it is due or its work item`},
		{"an entry with another work item", func(t *testing.T, tx *bolt.Tx) {
			m := &bot.OutboxMessage{Key: "wi_1/pending", WorkItemID: "wi_2"}
			require.NoError(t, tx.Bucket([]byte(bucketOutboxPending)).Put(indexKey(dest, 2), pendingOutbox(m)))
		}, `the pending index's entry of outbox message "wi_1/pending" does not say when it is due or its work item`},
		{"an entry of a delivered message", func(t *testing.T, tx *bolt.Tx) {
			m := &bot.OutboxMessage{Key: "wi_1/delivered", WorkItemID: "wi_1"}
			require.NoError(t, tx.Bucket([]byte(bucketOutboxPending)).Put(indexKey(dest, 1), pendingOutbox(m)))
		}, "the pending outbox index holds 2 messages; a scan finds 1 message pending"},
		{"a message that cannot be read", func(t *testing.T, tx *bolt.Tx) {
			require.NoError(t, tx.Bucket([]byte(bucketOutbox)).Put([]byte("wi_1/delivered"), []byte("{not json")))
		}, "decode outbox/wi_1/delivered: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "switchyard.db")
			ctx := t.Context()
			s, err := Open(ctx, path, Options{})
			require.NoError(t, err)
			msg := func(key string) bot.OutboxMessage {
				return bot.OutboxMessage{Key: key, Thread: th, WorkItemID: "wi_1", Kind: bot.OutboxReply, Text: key, UpdatedAt: now}
			}
			require.NoError(t, s.EnqueueAll(ctx, []bot.OutboxMessage{msg("wi_1/delivered"), msg("wi_1/pending")}))
			require.NoError(t, s.Record(ctx, []bot.DeliveryOutcome{{Key: "wi_1/delivered", Delivered: true, Version: 1, RemoteID: "ts-1", At: now, Next: now}}))
			require.NoError(t, s.db.View(Check), "the file checks out before it is changed")
			require.NoError(t, s.db.Update(func(tx *bolt.Tx) error { tc.change(t, tx); return nil }))
			err = s.db.View(Check)
			require.ErrorContains(t, err, tc.want)
			require.NoError(t, s.Close())
		})
	}
}

// TestDuePassesOverAnEntryItCannotRead holds Due to go on delivering the
// other messages, of its destination and of the others, when one pending
// entry or its message cannot be read, and to say so once in the log.
func TestDuePassesOverAnEntryItCannotRead(t *testing.T) {
	now := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
	a, b := bot.SlackThread("T1", "C1", "171.1"), bot.SlackThread("T1", "C2", "171.2")
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, tx *bolt.Tx)
	}{
		{"an index entry cut short", func(t *testing.T, tx *bolt.Tx) {
			require.NoError(t, tx.Bucket([]byte(bucketOutboxPending)).Put(indexKey(a.Destination(), 1), []byte{1, 2}))
		}},
		{"a message that is not JSON", func(t *testing.T, tx *bolt.Tx) {
			require.NoError(t, tx.Bucket([]byte(bucketOutbox)).Put([]byte("wi_1/reply"), []byte("{not json")))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logged logBuffer
			s, err := Open(t.Context(), filepath.Join(t.TempDir(), "switchyard.db"), Options{Logger: logged.logger()})
			require.NoError(t, err)
			defer s.Close()
			ctx := t.Context()
			msg := func(th bot.Thread, wi string) bot.OutboxMessage {
				return bot.OutboxMessage{Key: wi + "/reply", Thread: th, WorkItemID: wi, Kind: bot.OutboxReply, Text: wi, UpdatedAt: now}
			}
			require.NoError(t, s.EnqueueAll(ctx, []bot.OutboxMessage{msg(a, "wi_1"), msg(a, "wi_2"), msg(b, "wi_3")}))
			require.NoError(t, s.db.Update(func(tx *bolt.Tx) error { tc.change(t, tx); return nil }))
			for range 3 {
				due, err := s.Due(ctx, now, 10, nil)
				require.NoError(t, err)
				var keys []string
				for _, m := range due {
					keys = append(keys, m.Key)
				}
				require.Equal(t, []string{"wi_2/reply", "wi_3/reply"}, keys)
			}
			require.Equal(t, 1, strings.Count(logged.String(), "outbox message passed over"), logged.String())
		})
	}
}

// logBuffer keeps what a store logs.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }
