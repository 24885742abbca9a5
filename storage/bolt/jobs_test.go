package bolt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// A job of one work item keeps its ids in its record and a batch keeps
// them once in job_items; a job of one work item written before that (its
// ids in job_items only) reads the same and keeps them through its lease
// renewals and its end.
func TestJobIdsAreStoredOnce(t *testing.T) {
	s := openTest(t, t.TempDir())
	ctx := t.Context()
	now := time.Now()
	ingest := func(thread string) {
		t.Helper()
		_, err := s.Ingest(ctx, bot.IngestRequest{
			Event: bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Thread: bot.LocalThread(thread), DeliveryID: thread + now.String() + time.Now().String(), Text: "go"},
			Route: &bot.Route{Agent: "ops", Kind: bot.RouteRule, Reason: "rule"}, Now: now,
		})
		require.NoError(t, err)
	}
	claim := func() *bot.Job {
		t.Helper()
		c, err := s.ClaimNext(ctx, bot.ClaimRequest{Owner: "w", Now: now, Lease: time.Minute, MaxAttempts: 3})
		require.NoError(t, err)
		require.NotNil(t, c.Job)
		return c.Job
	}
	items := func(job *bot.Job) []byte {
		t.Helper()
		seq, ok := parseID(prefixJob, job.ID)
		require.True(t, ok)
		var v []byte
		require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
			v = append(v, tx.Bucket([]byte(bucketJobItems)).Get(seqKey(seq))...)
			return nil
		}))
		return v
	}

	ingest("one")
	one := claim()
	require.Len(t, one.WorkItemIDs, 1)
	require.Empty(t, items(one), "a job of one work item has its ids in its record")

	ingest("batch")
	ingest("batch")
	batch := claim()
	require.Len(t, batch.WorkItemIDs, 2)
	require.Len(t, items(batch), 32, "a batch has its pairs in job_items")
	require.Equal(t, *batch, jobOf(t, s, batch.WorkItemIDs[1]))

	// As a job of one work item was written before: its ids in job_items
	// and none in its record.
	ingest("older")
	older := claim()
	seq, _ := parseID(prefixJob, older.ID)
	dSeq, _ := parseID(prefixDispatch, older.DispatchIDs[0])
	wSeq, _ := parseID(prefixWorkItem, older.WorkItemIDs[0])
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
		j := *older
		j.DispatchIDs, j.WorkItemIDs = nil, nil
		if err := putJSON(tx.Bucket([]byte(bucketJobs)), seqKey(seq), &jobRecord{Job: j}); err != nil {
			return err
		}
		return tx.Bucket([]byte(bucketJobItems)).Put(seqKey(seq), binaryPair(dSeq, wSeq))
	}))
	for _, job := range []*bot.Job{one, older} {
		require.NoError(t, s.RenewLease(ctx, job.ID, "w", now.Add(time.Hour)))
		got := jobOf(t, s, job.WorkItemIDs[0])
		require.Equal(t, job.WorkItemIDs, got.WorkItemIDs, job.ID)
		require.Equal(t, job.DispatchIDs, got.DispatchIDs, job.ID)
		require.NoError(t, s.FinishJob(ctx, bot.JobOutcome{JobID: job.ID, Owner: "w", Now: now, Success: true}))
		wi, err := s.GetWorkItem(ctx, job.WorkItemIDs[0])
		require.NoError(t, err)
		require.Equal(t, bot.StatusDone, wi.Status, job.ID)
	}
}

// jobOf returns the one job that ran a work item.
func jobOf(t *testing.T, s *Store, workItemID string) bot.Job {
	t.Helper()
	jobs, err := s.ListJobs(t.Context(), workItemID)
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	return jobs[0]
}
