package bolt

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// A job of one work item keeps its ids in its record and a batch keeps
// them once in job_items; a job of one work item written before that (its
// ids in job_items only) reads the same and keeps them through its lease
// renewals and its end; retention takes each of them whole.
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

	// Retention takes each of them whole: its record, its ids wherever
	// they were kept and its entries in the work items' job index.
	require.NoError(t, s.FinishJob(ctx, bot.JobOutcome{JobID: batch.ID, Owner: "w", Now: now, Success: true}))
	swept, err := s.Sweep(ctx, now.Add(2*time.Hour), bot.Retention{Records: time.Hour})
	require.NoError(t, err)
	require.Equal(t, 3, swept.Jobs)
	require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
		for _, name := range []string{bucketJobs, bucketJobItems, bucketJobsByItem} {
			require.Zero(t, tx.Bucket([]byte(name)).Stats().KeyN, name)
		}
		return nil
	}))
}

// jobOf returns the one job that ran a work item.
func jobOf(t *testing.T, s *Store, workItemID string) bot.Job {
	t.Helper()
	jobs, err := s.ListJobs(t.Context(), workItemID)
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	return jobs[0]
}

// A subagent spawned with a claim is stored byte for byte as one spawned
// without and then claimed by the same worker at the claim's time: every
// record, index, counter and sequence.
func TestClaimedSpawnIsStoredAsSpawnThenClaim(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	claim := bot.ClaimRequest{Owner: "w2", Now: now.Add(3 * time.Second), Lease: time.Minute, MaxAttempts: 3}
	spawn := func(t *testing.T, claimed bool) (*Store, bot.Spawned) {
		s := openTest(t, t.TempDir())
		ctx := t.Context()
		_, err := s.Ingest(ctx, bot.IngestRequest{
			Event: bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Thread: bot.LocalThread("p"), DeliveryID: "d1", Text: "go"},
			Route: &bot.Route{Agent: "coder", Kind: bot.RouteRule, Reason: "rule"}, Now: now,
		})
		require.NoError(t, err)
		c, err := s.ClaimNext(ctx, bot.ClaimRequest{Owner: "w1", Now: now, Lease: time.Minute, MaxAttempts: 3})
		require.NoError(t, err)
		parent := c.Job
		req := bot.SpawnRequest{
			Run: bot.ChildRun{
				Owner:       bot.Owner{SessionKey: parent.Thread.Key(), AgentID: "coder"},
				ParentLinks: bot.ParentLinks{WorkItemID: parent.WorkItemIDs[0], JobID: parent.ID, DispatchID: parent.DispatchIDs[0]},
				Agent:       "tester", Task: "write the tests", Depth: 1, CallID: "call_1",
			},
			Thread: parent.Thread, Now: now.Add(time.Second),
			State: &bot.RunState{WorkItemID: parent.WorkItemIDs[0], Doc: []byte(`{"turn":1}`)},
		}
		if claimed {
			req.Claim = &claim
		}
		out, err := s.SpawnChild(ctx, req)
		require.NoError(t, err)
		if !claimed {
			out.Claim, err = s.ClaimNext(ctx, claim)
			require.NoError(t, err)
			r, err := s.GetRun(ctx, out.Run.ID)
			require.NoError(t, err)
			out.Run = *r
		}
		return s, out
	}
	a, claimed := spawn(t, true)
	b, want := spawn(t, false)
	require.NotNil(t, claimed.Claim.Job)
	require.Equal(t, want, claimed)
	require.Equal(t, rawContents(t, b), rawContents(t, a))
}

// rawContents is every key, value and sequence of s's buckets, nested
// ones included, as lines.
func rawContents(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	var walk func(path string, b *bolt.Bucket) error
	walk = func(path string, b *bolt.Bucket) error {
		out = append(out, fmt.Sprintf("%s sequence %d", path, b.Sequence()))
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(fmt.Sprintf("%s/%q", path, k), b.Bucket(k))
			}
			out = append(out, fmt.Sprintf("%s/%q = %q", path, k, v))
			return nil
		})
	}
	require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(fmt.Sprintf("%q", name), b) })
	}))
	return out
}

// A daemon killed right after it spawned a child for a worker of its own:
// reopened, the child's lease is over at once, the next claim runs it
// again, as its second attempt, and its end closes its record; nothing
// runs it a third time.
func TestClaimedChildAfterACrash(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	ctx := t.Context()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	claimAt := func(owner string, at time.Time) bot.ClaimRequest {
		return bot.ClaimRequest{Owner: owner, Now: at, Lease: time.Minute, MaxAttempts: 3}
	}
	_, err := s.Ingest(ctx, bot.IngestRequest{
		Event: bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Thread: bot.LocalThread("p"), DeliveryID: "d1", Text: "go"},
		Route: &bot.Route{Agent: "coder", Kind: bot.RouteRule, Reason: "rule"}, Now: now,
	})
	require.NoError(t, err)
	c, err := s.ClaimNext(ctx, claimAt("w1", now))
	require.NoError(t, err)
	parent := c.Job
	claim := claimAt("w2", now)
	spawned, err := s.SpawnChild(ctx, bot.SpawnRequest{
		Run: bot.ChildRun{
			Owner:       bot.Owner{SessionKey: parent.Thread.Key(), AgentID: "coder"},
			ParentLinks: bot.ParentLinks{WorkItemID: parent.WorkItemIDs[0], JobID: parent.ID, DispatchID: parent.DispatchIDs[0]},
			Agent:       "tester", Task: "write the tests", Depth: 1,
		},
		Thread: parent.Thread, Now: now, Claim: &claim,
	})
	require.NoError(t, err)
	child := spawned.Run.ChildWorkItemID
	require.Equal(t, bot.RunRunning, spawned.Run.Status)

	require.NoError(t, s.Close())
	s = openTest(t, dir)
	n, err := s.ExpireOrphanedLeases(ctx, now.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, 2, n, "the parent's and the child's leases")

	var again *bot.Job
	for range 2 {
		c, err := s.ClaimNext(ctx, claimAt("w3", now.Add(2*time.Second)))
		require.NoError(t, err)
		require.NotNil(t, c.Job)
		if c.Job.WorkItemIDs[0] == child {
			again = c.Job
		}
	}
	require.NotNil(t, again, "the child is claimed again")
	require.Equal(t, 2, again.Attempt)
	require.Equal(t, []string{spawned.Run.ChildDispatchID}, again.DispatchIDs)
	rec, err := s.RunOfWorkItem(ctx, child)
	require.NoError(t, err)
	require.Equal(t, bot.RunRunning, rec.Status)
	require.Equal(t, again.ID, rec.ChildJobID)

	require.NoError(t, s.FinishJob(ctx, bot.JobOutcome{JobID: again.ID, Owner: "w3", Now: now.Add(3 * time.Second), Success: true, Summary: "written",
		Records: bot.JobRecords{Run: &bot.RunEnd{ID: rec.ID, Status: bot.RunDone, Result: "written", At: now.Add(3 * time.Second)}}}))
	rec, err = s.RunOfWorkItem(ctx, child)
	require.NoError(t, err)
	require.Equal(t, bot.RunDone, rec.Status)
	wi, err := s.GetWorkItem(ctx, child)
	require.NoError(t, err)
	require.Equal(t, bot.StatusDone, wi.Status)
	jobs, err := s.ListJobs(ctx, child)
	require.NoError(t, err)
	require.Len(t, jobs, 2, "the job the crash left and the one that ran it")
	c, err = s.ClaimNext(ctx, claimAt("w4", now.Add(time.Hour)))
	require.NoError(t, err)
	if c.Job != nil {
		require.NotEqual(t, child, c.Job.WorkItemIDs[0], "the child is not run a third time")
	}
}
