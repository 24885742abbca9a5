package bolt

import (
	"path/filepath"
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
