package bolt

import (
	"encoding/json"
	"path/filepath"
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
