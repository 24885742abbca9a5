package bolt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// TestOpenMigratesSchema1 writes a file as schema 1 laid it out — a
// pending outbox message in the old pending index, a running job whose
// lease is only in its record, with its id lists there too — and opens it:
// the message is due, the counters count it, the running job's lease
// expires in a claim, and its work items are listed.
func TestOpenMigratesSchema1(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "switchyard.db")
	now := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
	th := bot.GitHubThread("octo", "hello", 7)
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	put := func(tx *bolt.Tx, bucket string, key []byte, v any) {
		raw, ok := v.([]byte)
		if !ok {
			var err error
			raw, err = json.Marshal(v)
			require.NoError(t, err)
		}
		b, err := tx.CreateBucketIfNotExists([]byte(bucket))
		require.NoError(t, err)
		require.NoError(t, b.Put(key, raw))
	}
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		for _, name := range []string{bucketMeta, bucketEvents, bucketDedup, bucketDedupExpiry, bucketIngress, bucketIngressBy,
			bucketDeliveries, bucketWorkItems, bucketItemsByThread, bucketItemsByStatus, bucketDispatches, bucketPending,
			bucketPendingByThread, bucketJobs, bucketJobsByItem, bucketActive, bucketOutbox, bucketOutboxByThread,
			bucketOutboxPendingV1, bucketOutboxDead, bucketSchedules} {
			_, err := tx.CreateBucketIfNotExists([]byte(name))
			require.NoError(t, err)
		}
		put(tx, bucketMeta, []byte(schemaKey), []byte("1"))
		put(tx, bucketWorkItems, seqKey(1), &workItemRecord{WorkItem: bot.WorkItem{
			ID: "wi_1", Thread: th, Status: bot.StatusRunning, Route: bot.Route{Agent: "coder", Kind: bot.RouteMention, Reason: "mention @coder"},
			Source: bot.SourceGitHub, CreatedAt: now, UpdatedAt: now,
		}, Dispatch: "d_1"})
		put(tx, bucketItemsByStatus, indexKey(string(bot.StatusRunning), 1), []byte{})
		put(tx, bucketDispatches, seqKey(1), &bot.Dispatch{ID: "d_1", WorkItemID: "wi_1", Agent: "coder", Thread: th,
			Status: bot.DispatchLeased, Attempts: 1, CreatedAt: now, UpdatedAt: now})
		put(tx, bucketJobs, seqKey(1), &bot.Job{ID: "job_1", DispatchIDs: []string{"d_1"}, WorkItemIDs: []string{"wi_1"},
			Agent: "coder", Thread: th, Attempt: 1, Status: bot.JobRunning, Owner: "w1", LeaseExpires: now.Add(time.Minute), StartedAt: now})
		put(tx, bucketActive, []byte(th.Key()), seqKey(1))
		put(tx, bucketOutbox, []byte("wi_1/reaction/eyes"), &bot.OutboxMessage{Key: "wi_1/reaction/eyes", Seq: 1, Thread: th,
			WorkItemID: "wi_1", Kind: bot.OutboxReaction, Reaction: bot.ReactionSeen, Target: "comment:1", Version: 1, CreatedAt: now, UpdatedAt: now})
		put(tx, bucketOutboxByThread, indexKey(th.Key(), 1), []byte("wi_1/reaction/eyes"))
		put(tx, bucketOutboxPendingV1, seqKey(1), []byte("wi_1/reaction/eyes"))
		return tx.Bucket([]byte(bucketOutbox)).SetSequence(1)
	}))
	require.NoError(t, db.Close())

	s := openTest(t, dir)
	ctx := t.Context()
	due, err := s.Due(ctx, now, 10, nil)
	require.NoError(t, err)
	require.Len(t, due, 1)
	require.Equal(t, "wi_1/reaction/eyes", due[0].Key)
	n, err := s.OutboxWaiting(ctx, "github/octo")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	depth, err := s.QueueDepth(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, depth, "the leased dispatch")
	items, _, err := s.ListWorkItems(ctx, bot.WorkItemFilter{Job: "job_1"})
	require.NoError(t, err)
	require.Len(t, items, 1)

	// The lease, moved to jobs_active, runs out in a claim.
	c, err := s.ClaimNext(ctx, bot.ClaimRequest{Owner: "w2", Now: now.Add(2 * time.Minute), Lease: time.Minute, MaxAttempts: 3})
	require.NoError(t, err)
	require.NotNil(t, c.Job)
	require.Equal(t, []string{"wi_1"}, c.Job.WorkItemIDs)
	require.Equal(t, 2, c.Job.Attempt)
	require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
		require.Nil(t, tx.Bucket([]byte(bucketOutboxPendingV1)), "the old index is gone")
		return nil
	}))
}

// TestOpenMigratesSchema2 lays out a file as schema 2 did — the pending
// outbox index holding only each message's key — with messages due, waiting
// out an edit interval or a retry, held behind an earlier one of their work
// item, delivered and dead, and opens it: Due finds what it found before,
// and the index stays in step with what comes after.
func TestOpenMigratesSchema2(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "switchyard.db")
	now := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
	ctx := t.Context()
	s, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	slack, gh := bot.SlackThread("T1", "C1", "171.1"), bot.GitHubThread("octo", "hello", 7)
	msg := func(key, wi string, th bot.Thread, next time.Time) bot.OutboxMessage {
		return bot.OutboxMessage{Key: key, Thread: th, WorkItemID: wi, Kind: bot.OutboxStatus, Text: key, NextAttemptAt: next, UpdatedAt: now}
	}
	require.NoError(t, s.EnqueueAll(ctx, []bot.OutboxMessage{
		msg("wi_1/status", "wi_1", slack, now.Add(time.Second)), // waits out its edit interval
		msg("wi_1/reply", "wi_1", slack, time.Time{}),           // behind it
		msg("wi_2/status", "wi_2", gh, time.Time{}),
		msg("wi_3/status", "wi_3", gh, time.Time{}),
		msg("wi_4/status", "wi_4", slack, time.Time{}),
		msg("wi_5/status", "wi_5", slack, time.Time{}),
		{Key: "note", Thread: slack, Kind: bot.OutboxReply, Text: "no work item", UpdatedAt: now},
	}))
	require.NoError(t, s.Record(ctx, []bot.DeliveryOutcome{
		{Key: "wi_3/status", Error: "timeout", At: now, Next: now.Add(time.Minute)},
		{Key: "wi_4/status", Delivered: true, Version: 1, RemoteID: "ts-4", At: now, Next: now.Add(time.Second)},
		{Key: "wi_5/status", Error: "channel_not_found", Dead: true, At: now, Next: now},
	}))
	_, err = s.Enqueue(ctx, msg("wi_4/status", "wi_4", slack, time.Time{})) // an edit, due after the interval
	require.NoError(t, err)
	due := func(s *Store, at time.Time) []string {
		t.Helper()
		msgs, err := s.Due(ctx, at, 10, nil)
		require.NoError(t, err)
		keys := []string{}
		for _, m := range msgs {
			keys = append(keys, m.Key)
		}
		return keys
	}
	times := []time.Time{now, now.Add(time.Second), now.Add(time.Minute)}
	var want [][]string
	for _, at := range times {
		want = append(want, due(s, at))
	}
	require.Equal(t, [][]string{
		{"wi_2/status", "note"},
		{"wi_2/status", "wi_1/status", "wi_1/reply", "wi_4/status", "note"},
		{"wi_2/status", "wi_3/status", "wi_1/status", "wi_1/reply", "wi_4/status", "note"},
	}, want)
	require.NoError(t, s.Close())

	// What schema 2 wrote: the pending index's values are the keys.
	schema2(t, path, func(tx *bolt.Tx) {
		n := 0
		require.NoError(t, tx.Bucket([]byte(bucketOutboxPending)).ForEach(func(_, _ []byte) error { n++; return nil }))
		require.Equal(t, 6, n)
	})

	s = openTest(t, dir)
	for i, at := range times {
		require.Equal(t, want[i], due(s, at), "due at %s", at)
	}
	require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
		require.Equal(t, strconv.Itoa(SchemaVersion), string(tx.Bucket([]byte(bucketMeta)).Get([]byte(schemaKey))))
		return nil
	}))
	// The index follows the messages after the migration: a failure moves
	// wi_2's status after the first minute.
	require.NoError(t, s.Record(ctx, []bot.DeliveryOutcome{{Key: "wi_2/status", Error: "timeout", At: now, Next: now.Add(2 * time.Minute)}}))
	require.Equal(t, []string{"wi_3/status", "wi_1/status", "wi_1/reply", "wi_4/status", "note"}, due(s, now.Add(time.Minute)))
}

// TestOpenSchema2WithAStrayPendingEntry opens a schema 2 file whose pending
// outbox index names a message that is not there: the migration fails
// naming it, and the file is left at schema 2, as it was.
func TestOpenSchema2WithAStrayPendingEntry(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "switchyard.db")
	s, err := Open(t.Context(), path, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		require.NoError(t, tx.Bucket([]byte(bucketOutboxPending)).Put(indexKey("slack", 1), []byte("wi_9/status")))
		return tx.Bucket([]byte(bucketMeta)).Put([]byte(schemaKey), []byte("2"))
	}))
	require.NoError(t, db.Close())

	_, err = Open(t.Context(), path, Options{})
	require.ErrorContains(t, err, `migrate to schema 3: the pending outbox index names a message it cannot read: outbox message "wi_9/status" not found`)
	db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		require.Equal(t, "2", string(tx.Bucket([]byte(bucketMeta)).Get([]byte(schemaKey))))
		require.Equal(t, []byte("wi_9/status"), tx.Bucket([]byte(bucketOutboxPending)).Get(indexKey("slack", 1)))
		return nil
	}))
}

// schema2 lays out the file at path as schema 2 did: the pending outbox
// index's values are the messages' keys. corrupt, if set, changes the
// file further in the same transaction.
func schema2(t *testing.T, path string, corrupt func(tx *bolt.Tx)) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketOutboxPending))
		entries := map[string][]byte{}
		require.NoError(t, b.ForEach(func(k, v []byte) error {
			_, _, key, err := splitPendingOutbox(v)
			entries[string(k)] = bytes.Clone(key)
			return err
		}))
		for k, key := range entries {
			require.NoError(t, b.Put([]byte(k), key))
		}
		if corrupt != nil {
			corrupt(tx)
		}
		return tx.Bucket([]byte(bucketMeta)).Put([]byte(schemaKey), []byte("2"))
	}))
	require.NoError(t, db.Close())
}

// TestOpenMigratesThousandsOfPendingMessages opens a schema 2 file with
// 5,000 messages waiting, of 300 work items across seven channels, due at
// different times: every one is delivered exactly once, each work item's
// in order within its channel, and the file checks out.
func TestOpenMigratesThousandsOfPendingMessages(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "switchyard.db")
	ctx := t.Context()
	now := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
	s, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	const total = 5000
	var msgs []bot.OutboxMessage
	for i := range total {
		wi := fmt.Sprintf("wi_%d", i%300)
		msgs = append(msgs, bot.OutboxMessage{Key: fmt.Sprintf("%s/m%d", wi, i), WorkItemID: wi,
			Thread: bot.SlackThread("T1", fmt.Sprintf("C%d", i%7), fmt.Sprintf("%d.1", i%300)),
			Kind:   bot.OutboxReply, Text: "x", NextAttemptAt: now.Add(time.Duration((i*7)%5) * time.Second), UpdatedAt: now})
	}
	require.NoError(t, s.EnqueueAll(ctx, msgs))
	require.NoError(t, s.Close())
	schema2(t, path, nil)

	s = openTest(t, dir)
	delivered := map[string]bool{}
	last := map[string]uint64{} // channel and work item → seq delivered last
	for at := now; at.Before(now.Add(6 * time.Second)); at = at.Add(time.Second) {
		for {
			due, err := s.Due(ctx, at, 1000, nil)
			require.NoError(t, err)
			if len(due) == 0 {
				break
			}
			var outcomes []bot.DeliveryOutcome
			for _, m := range due {
				require.False(t, delivered[m.Key], "%s delivered twice", m.Key)
				delivered[m.Key] = true
				queue := m.Thread.Channel + "/" + m.WorkItemID
				require.Greater(t, m.Seq, last[queue], "%s out of order", m.Key)
				last[queue] = m.Seq
				outcomes = append(outcomes, bot.DeliveryOutcome{Key: m.Key, Delivered: true, Version: m.Version, RemoteID: "ts", At: at, Next: at})
			}
			require.NoError(t, s.Record(ctx, outcomes))
		}
	}
	require.Len(t, delivered, total)
	pending, dead, err := s.OutboxPending(ctx)
	require.NoError(t, err)
	require.Zero(t, pending)
	require.Zero(t, dead)
}

// TestOpenRefusesACorruptSchema2PendingIndex opens schema 2 files whose
// pending outbox index says what the messages do not: each is refused with
// a message naming the entry, and left exactly as it was.
func TestOpenRefusesACorruptSchema2PendingIndex(t *testing.T) {
	now := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
	th := bot.SlackThread("T1", "C1", "171.1")
	dest := th.Destination()
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, b *bolt.Bucket)
		want    string
	}{
		{"an entry of a delivered message", func(t *testing.T, b *bolt.Bucket) {
			require.NoError(t, b.Put(indexKey(dest, 1), []byte("wi_1/delivered")))
		}, `names message "wi_1/delivered", which is not pending (delivered or dead)`},
		{"an entry of a dead message", func(t *testing.T, b *bolt.Bucket) {
			require.NoError(t, b.Put(indexKey(dest, 2), []byte("wi_1/dead")))
		}, `names message "wi_1/dead", which is not pending (delivered or dead)`},
		{"an entry at another seq", func(t *testing.T, b *bolt.Bucket) {
			require.NoError(t, b.Delete(indexKey(dest, 3)))
			require.NoError(t, b.Put(indexKey(dest, 9), []byte("wi_1/pending")))
		}, `names message "wi_1/pending" at ` + dest + ` seq 9, where it is at ` + dest + ` seq 3`},
		{"an entry at another destination", func(t *testing.T, b *bolt.Bucket) {
			require.NoError(t, b.Put(indexKey("github/octo", 3), []byte("wi_1/pending")))
		}, `names message "wi_1/pending" at github/octo seq 3, where it is at ` + dest + ` seq 3`},
		{"an entry of no message", func(t *testing.T, b *bolt.Bucket) {
			require.NoError(t, b.Put(indexKey(dest, 7), []byte("wi_9/status")))
		}, `outbox message "wi_9/status" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "switchyard.db")
			ctx := t.Context()
			s, err := Open(ctx, path, Options{})
			require.NoError(t, err)
			msg := func(key string) bot.OutboxMessage {
				return bot.OutboxMessage{Key: key, Thread: th, WorkItemID: "wi_1", Kind: bot.OutboxReply, Text: key, UpdatedAt: now}
			}
			require.NoError(t, s.EnqueueAll(ctx, []bot.OutboxMessage{msg("wi_1/delivered"), msg("wi_1/dead"), msg("wi_1/pending")}))
			require.NoError(t, s.Record(ctx, []bot.DeliveryOutcome{
				{Key: "wi_1/delivered", Delivered: true, Version: 1, RemoteID: "ts-1", At: now, Next: now},
				{Key: "wi_1/dead", Error: "channel_not_found", Dead: true, At: now, Next: now},
			}))
			require.NoError(t, s.Close())
			schema2(t, path, func(tx *bolt.Tx) { tc.corrupt(t, tx.Bucket([]byte(bucketOutboxPending))) })
			before := dumpFile(t, path)

			_, err = Open(ctx, path, Options{})
			require.ErrorContains(t, err, "migrate to schema 3: the pending outbox index ")
			require.ErrorContains(t, err, tc.want)
			require.Equal(t, before, dumpFile(t, path), "the file is left as it was")
		})
	}
}

// dumpFile is every bucket's keys and values of the file at path.
func dumpFile(t *testing.T, path string) map[string]string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	out := map[string]string{}
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				out[string(name)+"\x00"+string(k)] = string(v)
				return nil
			})
		})
	}))
	return out
}
