package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

func testQueue(t *testing.T, open Opener) {
	t.Run("empty queue", func(t *testing.T) {
		h := newHarness(t, open)
		c := h.claim(claimReq("w1", epoch()))
		require.Nil(t, c.Job)
		require.Empty(t, c.WorkItems)
		require.Empty(t, c.Abandoned)
		require.Zero(t, h.depth())
	})

	t.Run("claim leases the oldest dispatch and marks its work item running", func(t *testing.T) {
		h := newHarness(t, open)
		th := bot.LocalThread("t1")
		wi := h.submit(th, "coder", "first")
		h.submit(bot.LocalThread("t2"), "coder", "second")

		c := h.mustClaim("w1", at(time.Minute))
		j := c.Job
		require.NotEmpty(t, j.ID)
		require.Equal(t, "coder", j.Agent)
		require.Equal(t, th, j.Thread)
		require.Equal(t, 1, j.Attempt)
		require.Equal(t, bot.JobRunning, j.Status)
		require.Equal(t, "w1", j.Owner)
		require.True(t, j.StartedAt.Equal(at(time.Minute)))
		require.True(t, j.LeaseExpires.Equal(at(2*time.Minute)))
		require.Len(t, j.DispatchIDs, 1)
		require.Equal(t, []string{wi.ID}, j.WorkItemIDs)
		require.Len(t, c.WorkItems, 1)
		require.Equal(t, wi.ID, c.WorkItems[0].ID)
		require.Equal(t, bot.StatusRunning, c.WorkItems[0].Status)
		require.Equal(t, bot.StatusRunning, h.workItem(wi.ID).Status)
		require.Equal(t, 2, h.depth(), "one leased, one pending")

		jobs := h.jobs(wi.ID)
		require.Len(t, jobs, 1)
		require.Equal(t, j.ID, jobs[0].ID)
	})

	t.Run("one job per thread, later dispatches of the same agent batched", func(t *testing.T) {
		h := newHarness(t, open)
		tt, tu := bot.LocalThread("t"), bot.LocalThread("u")
		a1 := h.submit(tt, "coder", "a1")
		a2 := h.submit(tt, "coder", "a2")
		b := h.submit(tt, "reviewer", "b")
		a3 := h.submit(tt, "coder", "a3")
		u1 := h.submit(tu, "coder", "u1")

		first := h.mustClaim("w1", epoch())
		require.Equal(t, []string{a1.ID, a2.ID, a3.ID}, first.Job.WorkItemIDs, "arrival order")
		require.Equal(t, []string{a1.ID, a2.ID, a3.ID}, ids(first.WorkItems))
		require.Len(t, first.Job.DispatchIDs, 3)
		require.Equal(t, []string{a3.ID, a2.ID, a1.ID}, ids(h.list(bot.WorkItemFilter{Job: first.Job.ID})), "a job's work items, newest first")
		require.Equal(t, []string{a3.ID, a2.ID}, ids(h.list(bot.WorkItemFilter{Job: first.Job.ID, Limit: 2})))
		page, next, err := h.s.ListWorkItems(h.ctx, bot.WorkItemFilter{Job: first.Job.ID, Limit: 2})
		require.NoError(t, err)
		require.Len(t, page, 2)
		page, next, err = h.s.ListWorkItems(h.ctx, bot.WorkItemFilter{Job: first.Job.ID, Limit: 2, Cursor: next})
		require.NoError(t, err)
		require.Equal(t, []string{a1.ID}, ids(page))
		require.Empty(t, next)
		require.Empty(t, h.list(bot.WorkItemFilter{Job: first.Job.ID, Status: bot.StatusDone}))
		_, _, err = h.s.ListWorkItems(h.ctx, bot.WorkItemFilter{Job: "job_999"})
		requireCode(t, bot.ENOTFOUND, err)
		for _, wi := range first.WorkItems {
			require.Equal(t, bot.StatusRunning, wi.Status)
		}

		// b is older than u1 but its thread is busy.
		second := h.mustClaim("w2", epoch())
		require.Equal(t, []string{u1.ID}, second.Job.WorkItemIDs)
		require.Equal(t, tu, second.Job.Thread)
		h.requireNothingToClaim(epoch())
		require.Equal(t, bot.StatusQueued, h.workItem(b.ID).Status)
		require.Equal(t, 5, h.depth())

		h.finish(first.Job, at(time.Second), "done")
		third := h.mustClaim("w1", at(time.Second))
		require.Equal(t, []string{b.ID}, third.Job.WorkItemIDs)
		require.Equal(t, "reviewer", third.Job.Agent)
		require.Equal(t, 2, h.depth())
	})

	t.Run("messages arriving during a run go to the next run together", func(t *testing.T) {
		h := newHarness(t, open)
		th := bot.LocalThread("t")
		x1 := h.submit(th, "coder", "x1")
		first := h.mustClaim("w1", epoch())
		require.Equal(t, []string{x1.ID}, first.Job.WorkItemIDs)

		x2 := h.submit(th, "coder", "x2")
		x3 := h.submit(th, "coder", "x3")
		h.requireNothingToClaim(epoch())

		h.finish(first.Job, at(time.Second), "ok")
		next := h.mustClaim("w2", at(time.Second))
		require.Equal(t, []string{x2.ID, x3.ID}, next.Job.WorkItemIDs)
		require.Equal(t, 1, next.Job.Attempt)
	})

	t.Run("threads run in parallel", func(t *testing.T) {
		h := newHarness(t, open)
		threads := []bot.Thread{bot.LocalThread("a"), bot.GitHubThread("acme", "api", 1), bot.SlackThread("T1", "C1", "1.2")}
		for _, th := range threads {
			h.submit(th, "coder", "go")
		}
		var got []bot.Thread
		for i := range threads {
			c := h.mustClaim("w"+string(rune('0'+i)), epoch())
			got = append(got, c.Job.Thread)
		}
		require.ElementsMatch(t, threads, got)
		h.requireNothingToClaim(epoch())
	})

	t.Run("many workers claiming at once run a thread's work one job at a time, each work item once", func(t *testing.T) {
		h := newHarness(t, open)
		const threads, perThread, workers = 6, 4, 12
		want := map[string]int{}
		for i := range threads {
			for j := range perThread {
				wi := h.submit(bot.LocalThread(fmt.Sprintf("busy-%d", i)), "coder", fmt.Sprintf("m%d", j))
				want[wi.ID] = 1
			}
		}
		var (
			mu      sync.Mutex
			running = map[string]bool{} // threads with a job claimed and not finished
			ran     = map[string]int{}  // work item → the jobs that held it
			overlap []string
		)
		finished := func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(ran) == len(want)
		}
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				owner := fmt.Sprintf("w%d", w)
				// Claims skip rows other claims hold: a worker finding
				// nothing tries again until everything has run.
				for idle := 0; !finished(); {
					c, err := h.s.ClaimNext(h.ctx, claimReq(owner, epoch()))
					if err != nil {
						t.Errorf("claim: %v", err)
						return
					}
					if c.Job == nil {
						if idle++; idle > 5000 {
							t.Errorf("%s found nothing to claim %d times with work left", owner, idle)
							return
						}
						time.Sleep(time.Millisecond)
						continue
					}
					key := c.Job.Thread.Key()
					mu.Lock()
					if running[key] {
						overlap = append(overlap, key)
					}
					running[key] = true
					for _, id := range c.Job.WorkItemIDs {
						ran[id]++
					}
					mu.Unlock()
					time.Sleep(time.Millisecond) // the run, while other claims go on
					mu.Lock()
					running[key] = false // before its end commits: a claim after it is no overlap
					mu.Unlock()
					if err := h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: c.Job.ID, Owner: c.Job.Owner, Now: epoch(), Success: true, Summary: "ok"}); err != nil {
						t.Errorf("finish %s: %v", c.Job.ID, err)
						return
					}
				}
			})
		}
		wg.Wait()
		require.Empty(t, overlap, "threads that had two jobs at once")
		require.Equal(t, want, ran, "each work item in one job")
		require.Equal(t, 0, h.depth())
		for id := range want {
			require.Equal(t, bot.StatusDone, h.workItem(id).Status, id)
		}
	})

	t.Run("finish with success", func(t *testing.T) {
		h := newHarness(t, open)
		th := bot.LocalThread("t")
		a := h.submit(th, "coder", "a")
		b := h.submit(th, "coder", "b")
		c := h.mustClaim("w1", epoch())

		err := h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: c.Job.ID, Owner: "w2", Now: at(time.Second), Success: true})
		requireCode(t, bot.ECONFLICT, err)

		h.finish(c.Job, at(time.Second), "all fixed")
		for _, id := range []string{a.ID, b.ID} {
			wi := h.workItem(id)
			require.Equal(t, bot.StatusDone, wi.Status)
			require.Equal(t, "all fixed", wi.Summary)
			require.Empty(t, wi.Error)
			require.NotNil(t, wi.FinishedAt)
			require.True(t, wi.FinishedAt.Equal(at(time.Second)))
			jobs := h.jobs(id)
			require.Len(t, jobs, 1)
			require.Equal(t, bot.JobSucceeded, jobs[0].Status)
			require.NotNil(t, jobs[0].FinishedAt)
		}
		require.Zero(t, h.depth())

		err = h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: c.Job.ID, Owner: "w1", Now: at(2 * time.Second), Success: true})
		requireCode(t, bot.ECONFLICT, err)
		requireCode(t, bot.ECONFLICT, h.s.RenewLease(h.ctx, c.Job.ID, "w1", at(time.Hour)))

		// The thread is free again.
		d := h.submit(th, "coder", "d")
		next := h.mustClaim("w1", at(2*time.Second))
		require.Equal(t, []string{d.ID}, next.Job.WorkItemIDs)
	})

	t.Run("finish with failure", func(t *testing.T) {
		h := newHarness(t, open)
		a := h.submit(bot.LocalThread("t"), "coder", "a")
		c := h.mustClaim("w1", epoch())
		require.NoError(t, h.s.FinishJob(h.ctx, bot.JobOutcome{
			JobID: c.Job.ID, Owner: "w1", Now: at(time.Second), Error: "model unavailable",
		}))
		wi := h.workItem(a.ID)
		require.Equal(t, bot.StatusFailed, wi.Status)
		require.Equal(t, "model unavailable", wi.Error)
		require.NotNil(t, wi.FinishedAt)
		jobs := h.jobs(a.ID)
		require.Len(t, jobs, 1)
		require.Equal(t, bot.JobFailed, jobs[0].Status)
		require.Equal(t, "model unavailable", jobs[0].Error)
		require.Zero(t, h.depth())
		h.requireNothingToClaim(at(time.Hour))
	})

	t.Run("release gives the job back without counting the attempt", func(t *testing.T) {
		h := newHarness(t, open)
		th := bot.LocalThread("t")
		a := h.submit(th, "coder", "a")
		b := h.submit(th, "coder", "b")
		c := h.mustClaim("w1", epoch())

		requireCode(t, bot.ECONFLICT, h.s.ReleaseJob(h.ctx, c.Job.ID, "w2", at(time.Second), nil))
		require.NoError(t, h.s.ReleaseJob(h.ctx, c.Job.ID, "w1", at(time.Second), nil))
		require.Equal(t, bot.StatusQueued, h.workItem(a.ID).Status)
		require.Equal(t, bot.StatusQueued, h.workItem(b.ID).Status)
		require.Equal(t, 2, h.depth())
		requireCode(t, bot.ECONFLICT, h.s.ReleaseJob(h.ctx, c.Job.ID, "w1", at(time.Second), nil))
		requireCode(t, bot.ECONFLICT, h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: c.Job.ID, Owner: "w1", Now: at(time.Second), Success: true}))

		again := h.mustClaim("w2", at(2*time.Second))
		require.Equal(t, []string{a.ID, b.ID}, again.Job.WorkItemIDs)
		require.Equal(t, 1, again.Job.Attempt)
		require.NotEqual(t, c.Job.ID, again.Job.ID)

		jobs := h.jobs(a.ID)
		require.Len(t, jobs, 2)
		require.Equal(t, bot.JobReleased, jobs[0].Status)
		require.Equal(t, bot.JobRunning, jobs[1].Status)
	})

	t.Run("cancel takes a queued work item out of the queue", func(t *testing.T) {
		h := newHarness(t, open)
		th := bot.LocalThread("t")
		a := h.submit(th, "coder", "a")
		b := h.submit(th, "coder", "b")
		who := bot.Cancelled{By: "alice", Reason: "wrong repo", At: at(time.Second)}

		wi, job, err := h.s.CancelWorkItem(h.ctx, a.ID, who)
		require.NoError(t, err)
		require.Nil(t, job, "a queued work item has no job to stop")
		require.Equal(t, bot.StatusCancelled, wi.Status)
		require.Equal(t, "cancelled by alice: wrong repo", wi.Error)
		require.NotNil(t, wi.FinishedAt)
		require.Equal(t, bot.StatusCancelled, h.workItem(a.ID).Status)
		require.Equal(t, 1, h.depth())

		// The claim finds only what was not cancelled.
		c := h.mustClaim("w1", at(2*time.Second))
		require.Equal(t, []string{b.ID}, c.Job.WorkItemIDs)
		require.Empty(t, h.jobs(a.ID))

		_, _, err = h.s.CancelWorkItem(h.ctx, a.ID, who)
		requireCode(t, bot.ECONFLICT, err)
		_, _, err = h.s.CancelWorkItem(h.ctx, "wi_404", who)
		requireCode(t, bot.ENOTFOUND, err)
	})

	t.Run("cancel of a running work item is for its worker, which ends it cancelled", func(t *testing.T) {
		h := newHarness(t, open)
		a := h.submit(bot.LocalThread("t"), "coder", "a")
		c := h.mustClaim("w1", epoch())
		who := bot.Cancelled{By: "alice", At: at(time.Second)}

		wi, job, err := h.s.CancelWorkItem(h.ctx, a.ID, who)
		require.NoError(t, err)
		require.Equal(t, bot.StatusRunning, wi.Status, "the run ends it, not the cancel")
		require.NotNil(t, job)
		require.Equal(t, c.Job.ID, job.ID)
		require.Equal(t, "w1", job.Owner)
		require.NotNil(t, job.Cancel)
		require.Equal(t, "alice", job.Cancel.By)

		// A worker that missed the notification learns it at its renewal.
		err = h.s.RenewLease(h.ctx, c.Job.ID, "w1", at(time.Hour))
		var got *bot.Cancelled
		require.ErrorAs(t, err, &got)
		require.Equal(t, "alice", got.By)
		require.True(t, got.At.Equal(at(time.Second)))

		require.NoError(t, h.s.FinishJob(h.ctx, bot.JobOutcome{
			JobID: c.Job.ID, Owner: "w1", Now: at(2 * time.Second), Cancelled: true, Error: got.Error(),
		}))
		done := h.workItem(a.ID)
		require.Equal(t, bot.StatusCancelled, done.Status)
		require.Equal(t, "cancelled by alice", done.Error)
		require.Zero(t, h.depth())
		h.requireNothingToClaim(at(time.Hour))
		_, _, err = h.s.CancelWorkItem(h.ctx, a.ID, who)
		requireCode(t, bot.ECONFLICT, err)
	})

	t.Run("missing jobs", func(t *testing.T) {
		h := newHarness(t, open)
		requireCode(t, bot.ENOTFOUND, h.s.RenewLease(h.ctx, "job_404", "w1", at(time.Hour)))
		requireCode(t, bot.ENOTFOUND, h.s.ReleaseJob(h.ctx, "job_404", "w1", epoch(), nil))
		requireCode(t, bot.ENOTFOUND, h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: "job_404", Owner: "w1", Now: epoch(), Success: true}))
	})
}

func testLeases(t *testing.T, open Opener) {
	t.Run("renewed lease holds the thread", func(t *testing.T) {
		h := newHarness(t, open)
		a := h.submit(bot.LocalThread("t"), "coder", "a")
		c := h.mustClaim("w1", epoch()) // lease until +1m

		requireCode(t, bot.ECONFLICT, h.s.RenewLease(h.ctx, c.Job.ID, "w2", at(10*time.Minute)))
		require.NoError(t, h.s.RenewLease(h.ctx, c.Job.ID, "w1", at(10*time.Minute)))
		h.requireNothingToClaim(at(5 * time.Minute))

		jobs := h.jobs(a.ID)
		require.Len(t, jobs, 1)
		require.True(t, jobs[0].LeaseExpires.Equal(at(10*time.Minute)))
		require.Equal(t, bot.JobRunning, jobs[0].Status)
		h.finish(c.Job, at(6*time.Minute), "ok")
	})

	t.Run("expired lease is reclaimed, then abandoned after max attempts", func(t *testing.T) {
		h := newHarness(t, open)
		th := bot.LocalThread("t")
		a := h.submit(th, "coder", "a")
		req := func(owner string, now time.Time) bot.ClaimRequest {
			return bot.ClaimRequest{Owner: owner, Now: now, Lease: time.Minute, MaxAttempts: 2}
		}

		first := h.claim(req("w1", epoch()))
		require.NotNil(t, first.Job)
		require.Equal(t, 1, first.Job.Attempt)
		// Still leased: nothing to claim.
		require.Nil(t, h.claim(req("w2", at(30*time.Second))).Job)

		second := h.claim(req("w2", at(2*time.Minute)))
		require.NotNil(t, second.Job, "an expired lease is claimable again")
		require.Empty(t, second.Abandoned)
		require.Equal(t, 2, second.Job.Attempt)
		require.Equal(t, "w2", second.Job.Owner)
		require.Equal(t, []string{a.ID}, second.Job.WorkItemIDs)
		require.Equal(t, bot.StatusRunning, h.workItem(a.ID).Status)

		// The dead worker no longer holds its job.
		requireCode(t, bot.ECONFLICT, h.s.RenewLease(h.ctx, first.Job.ID, "w1", at(time.Hour)))
		requireCode(t, bot.ECONFLICT, h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: first.Job.ID, Owner: "w1", Now: at(2 * time.Minute), Success: true}))
		jobs := h.jobs(a.ID)
		require.Len(t, jobs, 2)
		require.Equal(t, bot.JobExpired, jobs[0].Status)
		require.Equal(t, bot.JobRunning, jobs[1].Status)

		third := h.claim(req("w3", at(10*time.Minute)))
		require.Nil(t, third.Job)
		require.Len(t, third.Abandoned, 1)
		gone := third.Abandoned[0]
		require.Equal(t, a.ID, gone.ID)
		require.Equal(t, bot.StatusFailed, gone.Status)
		require.Equal(t, "lease expired after 2 attempts (worker died)", gone.Error)
		require.NotNil(t, gone.FinishedAt)

		wi := h.workItem(a.ID)
		require.Equal(t, bot.StatusFailed, wi.Status)
		require.Equal(t, gone.Error, wi.Error)
		jobs = h.jobs(a.ID)
		require.Len(t, jobs, 2)
		require.Equal(t, bot.JobExpired, jobs[1].Status)
		require.Zero(t, h.depth())

		// Abandoned once only; the thread takes new work.
		fourth := h.claim(req("w3", at(11*time.Minute)))
		require.Nil(t, fourth.Job)
		require.Empty(t, fourth.Abandoned)
		b := h.submit(th, "coder", "b")
		fifth := h.claim(req("w3", at(12*time.Minute)))
		require.NotNil(t, fifth.Job)
		require.Equal(t, []string{b.ID}, fifth.Job.WorkItemIDs)
	})

	t.Run("the claim that gives a work item up writes what tells its thread", func(t *testing.T) {
		h := newHarness(t, open)
		th := bot.LocalThread("t")
		a := h.submit(th, "coder", "a")
		h.mustClaim("w1", epoch())
		// The reaction is there already: it stays as it was.
		h.enqueue(bot.OutboxMessage{Key: a.ID + "/reaction/x", Thread: th, WorkItemID: a.ID, Kind: bot.OutboxReaction,
			Reaction: "x", Target: "m1", CreatedAt: epoch(), UpdatedAt: epoch()})
		h.enqueue(bot.OutboxMessage{Key: a.ID + "/status", Thread: th, WorkItemID: a.ID, Kind: bot.OutboxStatus,
			Text: "working", CreatedAt: epoch(), UpdatedAt: epoch()})
		req := claimReq("w2", at(5*time.Minute))
		req.MaxAttempts = 1
		req.Abandon = func(wi bot.WorkItem) []bot.OutboxMessage {
			return []bot.OutboxMessage{
				{Key: wi.ID + "/status", Thread: wi.Thread, WorkItemID: wi.ID, Kind: bot.OutboxStatus, Text: "failed: " + wi.Error},
				{Key: wi.ID + "/reply", Thread: wi.Thread, WorkItemID: wi.ID, Kind: bot.OutboxReply, Text: "could not finish"},
				{Key: wi.ID + "/reaction/x", Thread: wi.Thread, WorkItemID: wi.ID, Kind: bot.OutboxReaction, Reaction: "x", Target: "m1"},
			}
		}
		next := h.claim(req)
		require.Equal(t, []string{a.ID}, ids(next.Abandoned))
		status := h.outbox(a.ID + "/status")
		require.Equal(t, "failed: lease expired after 1 attempt (worker died)", status.Text)
		require.Equal(t, 2, status.Version, "the status is replaced")
		require.Equal(t, "could not finish", h.outbox(a.ID+"/reply").Text)
		require.Equal(t, 1, h.outbox(a.ID+"/reaction/x").Version, "a reaction is written once")
		pending, _ := h.pending()
		require.Equal(t, 3, pending)

		// Given up once: a later claim tells nothing more.
		require.Empty(t, h.claim(req).Abandoned)
		require.Equal(t, 2, h.outbox(a.ID+"/status").Version)
	})

	t.Run("expiry frees the thread for work that waited", func(t *testing.T) {
		h := newHarness(t, open)
		th := bot.LocalThread("t")
		h.submit(th, "coder", "a")
		c := h.mustClaim("w1", epoch())
		b := h.submit(th, "reviewer", "b")
		h.requireNothingToClaim(at(30 * time.Second))

		req := claimReq("w2", at(5*time.Minute))
		req.MaxAttempts = 1
		next := h.claim(req)
		require.Len(t, next.Abandoned, 1)
		require.Equal(t, c.Job.WorkItemIDs, ids(next.Abandoned))
		require.NotNil(t, next.Job)
		require.Equal(t, []string{b.ID}, next.Job.WorkItemIDs)
	})
}
