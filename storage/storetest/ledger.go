package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// spawn writes a subagent of the job that runs parent, owned by the
// parent's thread and agent.
func (h *harness) spawn(parent *bot.WorkItem, job *bot.Job, agent, task string, now time.Time) bot.ChildRun {
	h.t.Helper()
	r, err := h.s.SpawnChild(h.ctx, bot.SpawnRequest{
		Run: bot.ChildRun{
			Owner:          bot.Owner{SessionKey: parent.Thread.Key(), AgentID: parent.Route.Agent, SandboxName: "ws-1"},
			Creator:        bot.Creator{JobID: job.ID, DispatchID: job.DispatchIDs[0], WorkItemID: parent.ID},
			ParentLinks:    bot.ParentLinks{WorkItemID: parent.ID, JobID: job.ID, DispatchID: job.DispatchIDs[0]},
			RootWorkItemID: parent.ID, Agent: agent, Task: task, Depth: 1, CallID: "call_" + task,
			Ceilings: []bot.Ceiling{{Profile: "read-only", Reason: "requested by @alice"}},
		},
		Thread: parent.Thread, Requester: bot.Requester{Source: bot.SourceLocal, ID: "alice"}, Now: now,
	})
	require.NoError(h.t, err)
	require.Nil(h.t, r.Claim.Job, "nothing claimed without asking")
	return r.Run
}

// childRunning submits a work item to coder, claims its job, spawns a
// tester with task and has another worker claim the child's job.
func (h *harness) childRunning(task string) (parent *bot.WorkItem, r bot.ChildRun, child bot.Claim) {
	h.t.Helper()
	parent = h.submit(bot.LocalThread("p"), "coder", "x")
	r = h.spawn(parent, h.mustClaim("w1", epoch()).Job, "tester", task, epoch())
	return parent, r, h.mustClaim("w2", epoch())
}

func (h *harness) run(id string) *bot.ChildRun {
	h.t.Helper()
	r, err := h.s.GetRun(h.ctx, id)
	require.NoError(h.t, err)
	return r
}

func (h *harness) runs(f bot.RunFilter) []bot.ChildRun {
	h.t.Helper()
	rs, _, err := h.s.ListRuns(h.ctx, f)
	require.NoError(h.t, err)
	return rs
}

func runIDs(rs []bot.ChildRun) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func testLedger(t *testing.T, open Opener) {
	t.Run("a subagent is a record, a work item and a dispatch in a lane of its own", func(t *testing.T) {
		h := newHarness(t, open)
		th := bot.LocalThread("tree")
		parent := h.submit(th, "coder", "fix it")
		claim := h.mustClaim("w1", epoch())
		job := claim.Job

		r := h.spawn(parent, job, "tester", "write the tests", at(time.Second))
		require.NotEmpty(t, r.ID)
		require.Equal(t, bot.RunSubagent, r.Kind)
		require.Equal(t, bot.RunQueued, r.Status)
		require.Equal(t, parent.ID, r.ParentLinks.WorkItemID)
		require.Equal(t, job.ID, r.ParentLinks.JobID)
		require.Equal(t, job.DispatchIDs[0], r.ParentLinks.DispatchID)
		require.NotEmpty(t, r.ChildWorkItemID)
		require.NotEmpty(t, r.ChildDispatchID)
		require.Empty(t, r.ChildJobID, "no job before a worker claims it")
		require.True(t, r.CreatedAt.Equal(at(time.Second)))

		wi := h.workItem(r.ChildWorkItemID)
		require.Equal(t, parent.ID, wi.ParentID)
		require.True(t, wi.IsChild())
		require.Equal(t, "tester", wi.Route.Agent)
		require.Equal(t, bot.RouteSubagent, wi.Route.Kind)
		require.Equal(t, th, wi.Thread)
		require.Equal(t, bot.StatusQueued, wi.Status)
		require.Equal(t, "write the tests", wi.Text)
		require.Equal(t, "alice", wi.Requester.ID)

		got, err := h.s.RunOfWorkItem(h.ctx, wi.ID)
		require.NoError(t, err)
		require.Equal(t, r.ID, got.ID)
		_, err = h.s.RunOfWorkItem(h.ctx, parent.ID)
		requireCode(t, bot.ENOTFOUND, err)

		// The parent's job holds the thread; the child runs beside it.
		child := h.mustClaim("w2", at(2*time.Second))
		require.Equal(t, []string{wi.ID}, child.Job.WorkItemIDs)
		require.Equal(t, "tester", child.Job.Agent)
		require.NotEmpty(t, child.Job.Lane)
		rec := h.run(r.ID)
		require.Equal(t, bot.RunRunning, rec.Status)
		require.Equal(t, child.Job.ID, rec.ChildJobID)
		require.NotNil(t, rec.StartedAt)

		// A child that runs long renews the lease of its own lane, beside
		// its parent's on the thread, and keeps its job.
		require.NoError(t, h.s.RenewLease(h.ctx, child.Job.ID, "w2", at(time.Hour)))
		require.NoError(t, h.s.RenewLease(h.ctx, job.ID, "w1", at(time.Hour)))
		h.requireNothingToClaim(at(30 * time.Minute))

		// A later message in the thread still waits for the parent.
		h.submit(th, "coder", "and another thing")
		h.requireNothingToClaim(at(3 * time.Second))

		h.finish(child.Job, at(4*time.Second), "42 tests written")
		rec = h.run(r.ID)
		require.Equal(t, bot.RunDone, rec.Status)
		require.Equal(t, "42 tests written", rec.Result)
		require.NotNil(t, rec.FinishedAt)
		require.Equal(t, bot.StatusDone, h.workItem(wi.ID).Status)

		// The parent is still running: finishing the child freed only its lane.
		h.requireNothingToClaim(at(5 * time.Second))
		h.finish(job, at(6*time.Second), "done")
		next := h.mustClaim("w1", at(7*time.Second))
		require.Equal(t, th, next.Job.Thread)
		require.Empty(t, next.Job.Lane)
	})

	t.Run("a spawn may save its run's state and lease its child for a worker in the same transaction, and a worker that dies before the child starts only delays it", func(t *testing.T) {
		h := newHarness(t, open)
		th := bot.LocalThread("tree")
		parent := h.submit(th, "coder", "fix it")
		job := h.mustClaim("w1", epoch()).Job
		claim := claimReq("w2", at(time.Second))
		spawned, err := h.s.SpawnChild(h.ctx, bot.SpawnRequest{
			Run: bot.ChildRun{
				Owner:       bot.Owner{SessionKey: th.Key(), AgentID: "coder"},
				ParentLinks: bot.ParentLinks{WorkItemID: parent.ID, JobID: job.ID, DispatchID: job.DispatchIDs[0]},
				Agent:       "tester", Task: "write the tests", Depth: 1,
			},
			Thread: th, Now: at(time.Second), Claim: &claim,
			State: &bot.RunState{WorkItemID: parent.ID, Doc: []byte(`{"turn":1}`)},
		})
		require.NoError(t, err)
		r, child := spawned.Run, spawned.Claim
		doc, err := h.s.LoadRunState(h.ctx, parent.ID)
		require.NoError(t, err)
		require.JSONEq(t, `{"turn":1}`, string(doc), "the spawning run's state is saved with its child")
		require.NotNil(t, child.Job)
		require.Equal(t, "w2", child.Job.Owner)
		require.Equal(t, "tester", child.Job.Agent)
		require.Equal(t, []string{r.ChildWorkItemID}, child.Job.WorkItemIDs)
		require.Equal(t, []string{r.ChildDispatchID}, child.Job.DispatchIDs)
		require.Equal(t, 1, child.Job.Attempt)
		require.NotEmpty(t, child.Job.Lane)
		require.Len(t, child.WorkItems, 1)
		require.Equal(t, bot.StatusRunning, child.WorkItems[0].Status)
		require.Equal(t, bot.RunRunning, r.Status, "the record is running in its job")
		require.Equal(t, child.Job.ID, r.ChildJobID)
		require.True(t, r.StartedAt.Equal(at(time.Second)))
		require.Equal(t, *h.run(r.ID), r)
		require.Equal(t, bot.StatusRunning, h.workItem(r.ChildWorkItemID).Status)
		require.Equal(t, 2, h.depth(), "the parent's and the child's dispatches are leased")
		h.requireNothingToClaim(at(2 * time.Second))

		// The worker died before the child started: its lease runs out and
		// the child is claimed again, as any work whose worker died.
		require.NoError(t, h.s.RenewLease(h.ctx, job.ID, "w1", at(time.Hour)))
		again := h.mustClaim("w3", at(2*time.Minute))
		require.Equal(t, []string{r.ChildWorkItemID}, again.Job.WorkItemIDs)
		require.Equal(t, 2, again.Job.Attempt)
		rec := h.run(r.ID)
		require.Equal(t, bot.RunRunning, rec.Status)
		require.Equal(t, again.Job.ID, rec.ChildJobID)
		h.finish(again.Job, at(3*time.Minute), "42 tests written")
		require.Equal(t, bot.RunDone, h.run(r.ID).Status)
		requireCode(t, bot.ECONFLICT, h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: child.Job.ID, Owner: "w2", Now: at(3 * time.Minute), Success: true}))

		bad := claimReq("", at(time.Second))
		_, err = h.s.SpawnChild(h.ctx, bot.SpawnRequest{
			Run:    bot.ChildRun{Owner: bot.Owner{SessionKey: th.Key(), AgentID: "coder"}, ParentLinks: bot.ParentLinks{WorkItemID: parent.ID}, Agent: "tester", Task: "x"},
			Thread: th, Now: at(time.Second), Claim: &bad, State: &bot.RunState{WorkItemID: parent.ID, Doc: []byte(`{"turn":2}`)},
		})
		requireCode(t, bot.EINVALID, err)
		_, err = h.s.SpawnChild(h.ctx, bot.SpawnRequest{
			Run:    bot.ChildRun{Owner: bot.Owner{SessionKey: th.Key(), AgentID: "coder"}, ParentLinks: bot.ParentLinks{WorkItemID: parent.ID}, Agent: "tester", Task: "x"},
			Thread: th, Now: at(time.Second), State: &bot.RunState{WorkItemID: parent.ID},
		})
		requireCode(t, bot.EINVALID, err)
		require.Len(t, h.runs(bot.RunFilter{ParentWorkItemID: parent.ID}), 1, "a refused spawn writes nothing")
		doc, err = h.s.LoadRunState(h.ctx, parent.ID)
		require.NoError(t, err)
		require.JSONEq(t, `{"turn":1}`, string(doc))
	})

	t.Run("what the run recorded wins over the job's end", func(t *testing.T) {
		h := newHarness(t, open)
		_, r, child := h.childRunning("slow")
		_, err := h.s.UpdateRun(h.ctx, r.ID, func(c *bot.ChildRun) error {
			c.Status, c.Error, c.Tokens = bot.RunTimedOut, "timed out after 1s", 1234
			return nil
		})
		require.NoError(t, err)
		require.NoError(t, h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: child.Job.ID, Owner: "w2", Now: epoch(), Error: "stopped"}))
		rec := h.run(r.ID)
		require.Equal(t, bot.RunTimedOut, rec.Status)
		require.Equal(t, "timed out after 1s", rec.Error)
		require.Equal(t, 1234, rec.Tokens)
		require.Equal(t, bot.StatusFailed, h.workItem(r.ChildWorkItemID).Status)
	})

	t.Run("a job's end ends the latest record of its work item, though its run ended an earlier one", func(t *testing.T) {
		h := newHarness(t, open)
		_, r, child := h.childRunning("deploy")
		// A handoff of the child's work item replaces its record while its
		// job runs; the run still ends the record it started with.
		hand, err := h.s.AddRun(h.ctx, bot.ChildRun{Kind: bot.RunHandoff, Owner: bot.Owner{SessionKey: "local:p", AgentID: "tester"},
			ParentLinks:     bot.ParentLinks{WorkItemID: r.ChildWorkItemID, JobID: child.Job.ID, DispatchID: child.Job.DispatchIDs[0]},
			ChildWorkItemID: r.ChildWorkItemID, Agent: "ops", Task: "theirs", Status: bot.RunRunning, CreatedAt: epoch()})
		require.NoError(t, err)
		require.NoError(t, h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: child.Job.ID, Owner: "w2", Now: at(2 * time.Second), Success: true, Summary: "deployed",
			Records: bot.JobRecords{Run: &bot.RunEnd{ID: r.ID, Status: bot.RunDone, Result: "deployed", Tokens: 15, At: at(time.Second)}}}))
		rec := h.run(r.ID)
		require.Equal(t, bot.RunDone, rec.Status)
		require.Equal(t, "handed on to @ops", rec.Result, "the record ended first keeps its end")
		require.Equal(t, 15, rec.Tokens)
		rec = h.run(hand.ID)
		require.Equal(t, bot.RunDone, rec.Status, "the handoff's record ends with the job")
		require.Equal(t, "deployed", rec.Result)
		require.Equal(t, bot.StatusDone, h.workItem(r.ChildWorkItemID).Status)
	})

	t.Run("a child cancelled as it finished ends its work item cancelled with its record", func(t *testing.T) {
		for _, adopted := range []bool{false, true} {
			h := newHarness(t, open)
			parent, r, child := h.childRunning("quick")
			_, err := h.s.UpdateRun(h.ctx, r.ID, func(c *bot.ChildRun) error {
				c.Status, c.Error = bot.RunCancelled, "cancelled: not needed"
				c.Receipt = &bot.Receipt{RecordID: c.ID, Kind: string(c.Kind), Action: bot.ReceiptCancelled, Reason: "not needed", By: "ana", At: epoch()}
				return nil
			})
			require.NoError(t, err)
			out := bot.JobOutcome{JobID: child.Job.ID, Owner: "w2", Now: epoch(), Success: true, Summary: "helped",
				Records: bot.JobRecords{Run: &bot.RunEnd{ID: r.ID, Status: bot.RunDone, Result: "helped", Tokens: 15, At: at(time.Second)}}}
			if adopted {
				require.NoError(t, h.s.SaveRunStateWithEnds(h.ctx, bot.RunState{WorkItemID: parent.ID, Doc: []byte(`{"turn":1}`)}, []bot.JobOutcome{out}))
			} else {
				require.NoError(t, h.s.FinishJob(h.ctx, out))
			}
			rec := h.run(r.ID)
			require.Equal(t, bot.RunCancelled, rec.Status)
			require.Equal(t, 15, rec.Tokens, "its tokens are counted all the same")
			wi := h.workItem(r.ChildWorkItemID)
			require.Equal(t, bot.StatusCancelled, wi.Status, "adopted: %v", adopted)
			require.Equal(t, "cancelled: not needed", wi.Error)
		}
	})

	t.Run("a child's end is written with its job's: usage, transcript and record in one transaction", func(t *testing.T) {
		h := newHarness(t, open)
		parent, r, child := h.childRunning("one call")
		tree := bot.TreeBudgetKey(parent.ID)
		recs := bot.JobRecords{
			Usage:      &bot.Usage{Keys: []string{tree}, Tokens: 15, Cost: 0.5, At: at(time.Second)},
			Transcript: &bot.Transcript{JobID: child.Job.ID, RunID: child.Job.ID, Doc: []byte(`{"said":"helped"}`)},
			Run:        &bot.RunEnd{ID: r.ID, ParentWorkItemID: parent.ID, Status: bot.RunDone, Result: "helped", Tokens: 15, At: at(time.Second)},
		}

		// Held by another worker: nothing of it is written.
		requireCode(t, bot.ECONFLICT, h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: child.Job.ID, Owner: "w9", Now: at(time.Second), Success: true, Records: recs}))
		require.Equal(t, bot.RunRunning, h.run(r.ID).Status)
		spent, err := h.s.Spent(h.ctx, []string{tree})
		require.NoError(t, err)
		require.Zero(t, spent[0].Calls)
		docs, err := h.s.ListTranscripts(h.ctx, child.Job.ID)
		require.NoError(t, err)
		require.Empty(t, docs)

		// Bad records are refused before anything is written.
		bad := recs
		bad.Run = &bot.RunEnd{ID: r.ID, Status: bot.RunRunning}
		requireCode(t, bot.EINVALID, h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: child.Job.ID, Owner: "w2", Now: at(time.Second), Success: true, Records: bad}))
		require.Equal(t, bot.RunRunning, h.run(r.ID).Status)

		require.NoError(t, h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: child.Job.ID, Owner: "w2", Now: at(2 * time.Second), Success: true,
			Summary: "helped", Records: recs}))
		rec := h.run(r.ID)
		require.Equal(t, bot.RunDone, rec.Status)
		require.Equal(t, "helped", rec.Result)
		require.Equal(t, 15, rec.Tokens)
		require.True(t, rec.FinishedAt.Equal(at(time.Second)), "the record ended when its run did: %v", rec.FinishedAt)
		require.Equal(t, bot.StatusDone, h.workItem(r.ChildWorkItemID).Status)
		spent, err = h.s.Spent(h.ctx, []string{tree})
		require.NoError(t, err)
		require.EqualValues(t, 15, spent[0].Tokens)
		require.EqualValues(t, 1, spent[0].Calls)
		docs, err = h.s.ListTranscripts(h.ctx, child.Job.ID)
		require.NoError(t, err)
		require.Equal(t, []string{`{"said":"helped"}`}, docStrings(docs))
	})

	t.Run("a run's state and its children's job ends are saved in one transaction, or nothing of them is", func(t *testing.T) {
		h := newHarness(t, open)
		parent := h.submit(bot.LocalThread("p"), "coder", "x")
		job := h.mustClaim("w1", epoch()).Job
		r1 := h.spawn(parent, job, "tester", "one", epoch())
		c1 := h.mustClaim("w2", epoch())
		r2 := h.spawn(parent, job, "tester", "two", epoch())
		c2 := h.mustClaim("w3", epoch())
		tree := bot.TreeBudgetKey(parent.ID)
		endOf := func(r bot.ChildRun, c bot.Claim, owner, said string) bot.JobOutcome {
			return bot.JobOutcome{JobID: c.Job.ID, Owner: owner, Now: at(2 * time.Second), Success: true, Summary: said,
				Records: bot.JobRecords{
					Usage:      &bot.Usage{Keys: []string{tree}, Tokens: 15, At: at(time.Second)},
					Transcript: &bot.Transcript{JobID: c.Job.ID, RunID: c.Job.ID, Doc: []byte(`{"said":"` + said + `"}`)},
					Run:        &bot.RunEnd{ID: r.ID, ParentWorkItemID: parent.ID, Status: bot.RunDone, Result: said, Tokens: 15, At: at(time.Second)},
				}}
		}
		state := func(doc string) bot.RunState { return bot.RunState{WorkItemID: parent.ID, Doc: []byte(doc)} }
		requireNothing := func() {
			t.Helper()
			doc, err := h.s.LoadRunState(h.ctx, parent.ID)
			require.NoError(t, err)
			require.Nil(t, doc, "no state saved")
			for _, r := range []bot.ChildRun{r1, r2} {
				require.Equal(t, bot.RunRunning, h.run(r.ID).Status)
				require.Equal(t, bot.StatusRunning, h.workItem(r.ChildWorkItemID).Status)
			}
			spent, err := h.s.Spent(h.ctx, []string{tree})
			require.NoError(t, err)
			require.Zero(t, spent[0].Calls)
			for _, c := range []bot.Claim{c1, c2} {
				docs, err := h.s.ListTranscripts(h.ctx, c.Job.ID)
				require.NoError(t, err)
				require.Empty(t, docs)
			}
		}

		// One end whose job another worker holds fails the whole save.
		requireCode(t, bot.ECONFLICT, h.s.SaveRunStateWithEnds(h.ctx, state(`{"turn":1}`),
			[]bot.JobOutcome{endOf(r1, c1, "w2", "one done"), endOf(r2, c2, "w9", "two done")}))
		requireNothing()
		// So do an unknown job, records that are not valid and a state
		// without a document.
		unknown := endOf(r1, c1, "w2", "one done")
		unknown.JobID = "job_404"
		requireCode(t, bot.ENOTFOUND, h.s.SaveRunStateWithEnds(h.ctx, state(`{"turn":1}`), []bot.JobOutcome{unknown}))
		bad := endOf(r1, c1, "w2", "one done")
		bad.Records.Run = &bot.RunEnd{ID: r1.ID, Status: bot.RunQueued}
		requireCode(t, bot.EINVALID, h.s.SaveRunStateWithEnds(h.ctx, state(`{"turn":1}`), []bot.JobOutcome{bad}))
		requireCode(t, bot.EINVALID, h.s.SaveRunStateWithEnds(h.ctx, state(""), []bot.JobOutcome{endOf(r1, c1, "w2", "one done")}))
		requireNothing()

		// Both held: the state and both ends are there together.
		require.NoError(t, h.s.SaveRunStateWithEnds(h.ctx, state(`{"turn":2}`),
			[]bot.JobOutcome{endOf(r1, c1, "w2", "one done"), endOf(r2, c2, "w3", "two done")}))
		doc, err := h.s.LoadRunState(h.ctx, parent.ID)
		require.NoError(t, err)
		require.JSONEq(t, `{"turn":2}`, string(doc))
		for i, r := range []bot.ChildRun{r1, r2} {
			said := []string{"one done", "two done"}[i]
			rec := h.run(r.ID)
			require.Equal(t, bot.RunDone, rec.Status)
			require.Equal(t, said, rec.Result)
			require.Equal(t, 15, rec.Tokens)
			wi := h.workItem(r.ChildWorkItemID)
			require.Equal(t, bot.StatusDone, wi.Status)
			require.Equal(t, said, wi.Summary)
		}
		spent, err := h.s.Spent(h.ctx, []string{tree})
		require.NoError(t, err)
		require.EqualValues(t, 2, spent[0].Calls)
		require.EqualValues(t, 30, spent[0].Tokens)
		docs, err := h.s.ListTranscripts(h.ctx, c2.Job.ID)
		require.NoError(t, err)
		require.Equal(t, []string{`{"said":"two done"}`}, docStrings(docs))
		// The job ended: its end is written once.
		requireCode(t, bot.ECONFLICT, h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: c1.Job.ID, Owner: "w2", Now: at(3 * time.Second), Success: true}))
		require.Equal(t, 1, h.depth(), "only the parent's dispatch is leased")

		// Without ends it is SaveRunState.
		require.NoError(t, h.s.SaveRunStateWithEnds(h.ctx, state(`{"turn":3}`), nil))
		doc, err = h.s.LoadRunState(h.ctx, parent.ID)
		require.NoError(t, err)
		require.JSONEq(t, `{"turn":3}`, string(doc))
	})

	t.Run("what a run left is written alone when its job does not end, and a record that ended first keeps its end", func(t *testing.T) {
		h := newHarness(t, open)
		parent, r, child := h.childRunning("cancelled")
		_, err := h.s.UpdateRun(h.ctx, r.ID, func(c *bot.ChildRun) error {
			c.Status, c.Error = bot.RunCancelled, "cancelled: not needed"
			return nil
		})
		require.NoError(t, err)
		tree := bot.TreeBudgetKey(parent.ID)
		require.NoError(t, h.s.SaveJobRecords(h.ctx, bot.JobRecords{
			Usage: &bot.Usage{Keys: []string{tree}, Tokens: 7, At: at(time.Second)},
			Run:   &bot.RunEnd{ID: r.ID, Status: bot.RunFailed, Error: "cancelled: shutting down", Tokens: 7, At: at(time.Second)},
		}))
		rec := h.run(r.ID)
		require.Equal(t, bot.RunCancelled, rec.Status)
		require.Equal(t, "cancelled: not needed", rec.Error)
		require.Equal(t, 7, rec.Tokens, "its tokens are counted all the same")
		spent, err := h.s.Spent(h.ctx, []string{tree})
		require.NoError(t, err)
		require.EqualValues(t, 7, spent[0].Tokens)
		require.Equal(t, bot.StatusRunning, h.workItem(child.Job.WorkItemIDs[0]).Status, "the job goes on as it was")
		requireCode(t, bot.ENOTFOUND, h.s.SaveJobRecords(h.ctx, bot.JobRecords{Run: &bot.RunEnd{ID: "run_999", Status: bot.RunDone}}))
	})

	t.Run("released and expired children go back to the queue; abandoned ones are interrupted", func(t *testing.T) {
		h := newHarness(t, open)
		parent := h.submit(bot.LocalThread("p"), "coder", "x")
		job := h.mustClaim("w1", epoch()).Job
		r := h.spawn(parent, job, "tester", "t", epoch())
		c1 := h.mustClaim("w2", epoch())
		require.NoError(t, h.s.ReleaseJob(h.ctx, c1.Job.ID, "w2", at(time.Second), nil))
		require.Equal(t, bot.RunQueued, h.run(r.ID).Status)

		// The parent keeps renewing; the child's worker dies three times.
		for i := range 3 {
			now := at(time.Duration(2+2*i) * time.Minute)
			require.NoError(t, h.s.RenewLease(h.ctx, job.ID, "w1", now.Add(time.Hour)))
			c := h.mustClaim(fmt.Sprintf("w%d", 3+i), now)
			require.Equal(t, []string{r.ChildWorkItemID}, c.Job.WorkItemIDs)
			require.Equal(t, bot.RunRunning, h.run(r.ID).Status)
		}
		c := h.claim(claimReq("w9", at(time.Hour)))
		require.Nil(t, c.Job)
		require.Len(t, c.Abandoned, 1)
		rec := h.run(r.ID)
		require.Equal(t, bot.RunInterrupted, rec.Status)
		require.Contains(t, rec.Error, "lease expired after 3 attempts")
	})

	t.Run("cancelling a queued child takes it out of the queue with a receipt", func(t *testing.T) {
		h := newHarness(t, open)
		parent := h.submit(bot.LocalThread("p"), "coder", "x")
		job := h.mustClaim("w1", epoch()).Job
		r := h.spawn(parent, job, "tester", "t", epoch())
		rec, err := h.s.CancelRun(h.ctx, r.ID, bot.Receipt{Reason: "thread reset", By: "admin", At: at(time.Second)})
		require.NoError(t, err)
		require.Equal(t, bot.RunCancelled, rec.Status)
		require.NotNil(t, rec.Receipt)
		require.Equal(t, bot.Receipt{
			RecordID: r.ID, Kind: "subagent", Action: bot.ReceiptCancelled, PreviousStatus: "queued",
			Reason: "thread reset", By: "admin", Owner: r.Owner, Creator: r.Creator, At: at(time.Second),
		}, *rec.Receipt)
		require.Equal(t, bot.StatusCancelled, h.workItem(r.ChildWorkItemID).Status)
		h.requireNothingToClaim(at(2 * time.Second))
		_, err = h.s.CancelRun(h.ctx, r.ID, bot.Receipt{Reason: "again"})
		requireCode(t, bot.ECONFLICT, err)
		_, err = h.s.CancelRun(h.ctx, "run_404", bot.Receipt{Reason: "x"})
		requireCode(t, bot.ENOTFOUND, err)
	})

	t.Run("a job ended as cancelled cancels its work item", func(t *testing.T) {
		h := newHarness(t, open)
		parent := h.submit(bot.LocalThread("p"), "coder", "x")
		job := h.mustClaim("w1", epoch()).Job
		r := h.spawn(parent, job, "tester", "t", epoch())
		c := h.mustClaim("w2", epoch())
		require.NoError(t, h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: c.Job.ID, Owner: "w2", Now: epoch(), Cancelled: true, Error: "cancelled by coder"}))
		require.Equal(t, bot.StatusCancelled, h.workItem(r.ChildWorkItemID).Status)
		require.Equal(t, bot.RunCancelled, h.run(r.ID).Status)
	})

	t.Run("agent calls and handoffs are records without a work item to start", func(t *testing.T) {
		h := newHarness(t, open)
		parent := h.submit(bot.LocalThread("p"), "coder", "x")
		job := h.mustClaim("w1", epoch()).Job
		links := bot.ParentLinks{WorkItemID: parent.ID, JobID: job.ID, DispatchID: job.DispatchIDs[0]}
		owner := bot.Owner{SessionKey: "local:p", AgentID: "coder"}
		call, err := h.s.AddRun(h.ctx, bot.ChildRun{Kind: bot.RunAgentCall, Owner: owner, ParentLinks: links,
			Agent: "reviewer", Task: "look", Status: bot.RunRunning, CreatedAt: epoch()})
		require.NoError(t, err)
		require.NotEmpty(t, call.ID)
		hop, err := h.s.AddRun(h.ctx, bot.ChildRun{Kind: bot.RunHandoff, Owner: owner, ParentLinks: links,
			ChildWorkItemID: parent.ID, ChildDispatchID: "d_9", Agent: "ops", Task: "deploy", Status: bot.RunDone})
		require.NoError(t, err)
		require.NotEqual(t, call.ID, hop.ID)
		require.Equal(t, []string{hop.ID, call.ID}, runIDs(h.runs(bot.RunFilter{ParentWorkItemID: parent.ID})))

		_, err = h.s.AddRun(h.ctx, bot.ChildRun{Kind: bot.RunSubagent, Owner: owner, Agent: "x", Status: bot.RunQueued})
		requireCode(t, bot.EINVALID, err)
		_, err = h.s.AddRun(h.ctx, bot.ChildRun{Kind: bot.RunAgentCall, Agent: "x", Status: bot.RunQueued})
		requireCode(t, bot.EINVALID, err)
		_, err = h.s.AddRun(h.ctx, bot.ChildRun{Kind: "other", Owner: owner, Agent: "x", Status: bot.RunQueued})
		requireCode(t, bot.EINVALID, err)

		upd, err := h.s.UpdateRun(h.ctx, call.ID, func(r *bot.ChildRun) error {
			r.Status, r.Result, r.Tokens = bot.RunDone, "looks fine", 99
			r.Owner.SessionKey, r.ParentLinks.WorkItemID = "local:other", "wi_999" // ignored
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, bot.RunDone, upd.Status)
		require.Equal(t, "local:p", upd.SessionKey)
		require.Equal(t, parent.ID, upd.ParentLinks.WorkItemID)
		_, err = h.s.UpdateRun(h.ctx, call.ID, func(r *bot.ChildRun) error {
			r.Status = bot.RunFailed
			return errors.New("refused by edit")
		})
		require.EqualError(t, err, "update run: refused by edit")
		require.Equal(t, bot.RunDone, h.run(call.ID).Status)
		_, err = h.s.UpdateRun(h.ctx, call.ID, func(r *bot.ChildRun) error { r.Status = "weird"; return nil })
		requireCode(t, bot.EINVALID, err)
		_, err = h.s.GetRun(h.ctx, "run_404")
		requireCode(t, bot.ENOTFOUND, err)
		_, err = h.s.GetRun(h.ctx, "wi_1")
		requireCode(t, bot.ENOTFOUND, err)
	})

	t.Run("a handoff moves with the work item it hands on", func(t *testing.T) {
		h := newHarness(t, open)
		wi := h.submit(bot.LocalThread("h"), "triage", "deploy please")
		j1 := h.mustClaim("w1", epoch()).Job
		handoff := func(from, to string, job *bot.Job, now time.Time) bot.ChildRun {
			_, err := h.s.RerouteWorkItem(h.ctx, wi.ID, bot.Hop{From: from, To: to, Reason: "theirs", At: now})
			require.NoError(t, err)
			r, err := h.s.AddRun(h.ctx, bot.ChildRun{Kind: bot.RunHandoff, Owner: bot.Owner{SessionKey: "local:h", AgentID: from},
				ParentLinks:     bot.ParentLinks{WorkItemID: wi.ID, JobID: job.ID, DispatchID: job.DispatchIDs[0]},
				ChildWorkItemID: wi.ID, Agent: to, Task: "theirs", Status: bot.RunQueued, CreatedAt: now})
			require.NoError(t, err)
			return r
		}
		first := handoff("triage", "ops", j1, at(time.Second))
		h.finish(j1, at(2*time.Second), "handed off")
		require.Equal(t, bot.RunQueued, h.run(first.ID).Status, "the handing job's end is not the handoff's")

		j2 := h.mustClaim("w2", at(3*time.Second)).Job
		rec := h.run(first.ID)
		require.Equal(t, bot.RunRunning, rec.Status)
		require.Equal(t, j2.ID, rec.ChildJobID)
		require.Equal(t, j2.DispatchIDs[0], rec.ChildDispatchID)

		second := handoff("ops", "coder", j2, at(4*time.Second))
		rec = h.run(first.ID)
		require.Equal(t, bot.RunDone, rec.Status)
		require.Equal(t, "handed on to @coder", rec.Result)
		h.finish(j2, at(5*time.Second), "handed off again")
		j3 := h.mustClaim("w3", at(6*time.Second)).Job
		h.finish(j3, at(7*time.Second), "deployed")
		rec = h.run(second.ID)
		require.Equal(t, bot.RunDone, rec.Status)
		require.Equal(t, "deployed", rec.Result)
		require.Equal(t, j3.ID, rec.ChildJobID)
	})

	t.Run("listing by owner, agent, status and openness, paged newest first", func(t *testing.T) {
		h := newHarness(t, open)
		p1 := h.submit(bot.LocalThread("a"), "coder", "x")
		j1 := h.mustClaim("w1", epoch()).Job
		p2 := h.submit(bot.LocalThread("b"), "ops", "y")
		j2 := h.mustClaim("w2", epoch()).Job
		var a []bot.ChildRun
		for i := range 5 {
			a = append(a, h.spawn(p1, j1, "tester", fmt.Sprintf("a%d", i), at(time.Duration(i)*time.Second)))
		}
		b := h.spawn(p2, j2, "tester", "b0", epoch())
		_, err := h.s.UpdateRun(h.ctx, a[1].ID, func(r *bot.ChildRun) error { r.Status = bot.RunDone; return nil })
		require.NoError(t, err)

		require.Equal(t, []string{a[4].ID, a[3].ID, a[2].ID, a[1].ID, a[0].ID}, runIDs(h.runs(bot.RunFilter{OwnerSessionKey: "local:a"})))
		require.Equal(t, []string{b.ID}, runIDs(h.runs(bot.RunFilter{OwnerSessionKey: "local:b", OwnerAgent: "ops"})))
		require.Empty(t, h.runs(bot.RunFilter{OwnerSessionKey: "local:b", OwnerAgent: "coder"}))
		require.Equal(t, []string{a[1].ID}, runIDs(h.runs(bot.RunFilter{Status: bot.RunDone})))
		require.Equal(t, []string{b.ID, a[4].ID, a[3].ID, a[2].ID, a[0].ID}, runIDs(h.runs(bot.RunFilter{Open: true})))
		require.Len(t, h.runs(bot.RunFilter{}), 6)

		var paged []string
		f := bot.RunFilter{OwnerSessionKey: "local:a", Limit: 2}
		for range 10 {
			rs, next, err := h.s.ListRuns(h.ctx, f)
			require.NoError(t, err)
			paged = append(paged, runIDs(rs)...)
			if next == "" {
				break
			}
			f.Cursor = next
		}
		require.Equal(t, runIDs(h.runs(bot.RunFilter{OwnerSessionKey: "local:a"})), paged)
		_, _, err = h.s.ListRuns(h.ctx, bot.RunFilter{Cursor: "bogus"})
		requireCode(t, bot.EINVALID, err)
		_, _, err = h.s.ListRuns(h.ctx, bot.RunFilter{Status: "sleeping"})
		requireCode(t, bot.EINVALID, err)
	})

	t.Run("background tasks", func(t *testing.T) {
		h := newHarness(t, open)
		owner := bot.Owner{SessionKey: "local:a", AgentID: "coder", SandboxName: "local_a-0123"}
		add := func(o bot.Owner, job, cmd string) bot.BackgroundTask {
			bt, err := h.s.AddTask(h.ctx, bot.BackgroundTask{
				Owner: o, Creator: bot.Creator{JobID: job, DispatchID: "d_1", WorkItemID: "wi_1"}, Agent: o.AgentID,
				Command: cmd, CleanupOnRunEnd: true, Status: bot.TaskRunning, LogFile: "/data/tasks/x.log", CreatedAt: epoch(),
			})
			require.NoError(t, err)
			return bt
		}
		t1 := add(owner, "job_1", "npm run dev")
		t2 := add(owner, "job_2", "watch make")
		t3 := add(bot.Owner{SessionKey: "local:b", AgentID: "ops"}, "job_3", "sleep 100")
		require.NotEqual(t, t1.ID, t2.ID)
		got, err := h.s.GetTask(h.ctx, t1.ID)
		require.NoError(t, err)
		require.Equal(t, t1, *got)

		code := 0
		up, err := h.s.UpdateTask(h.ctx, t2.ID, func(bt *bot.BackgroundTask) error {
			bt.Status, bt.ExitCode, bt.FinishedAt = bot.TaskExited, &code, &bt.CreatedAt
			bt.Owner.SessionKey = "local:elsewhere" // ignored
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, bot.TaskExited, up.Status)
		require.Equal(t, "local:a", up.SessionKey)

		list := func(f bot.TaskFilter) []string {
			ts, _, err := h.s.ListTasks(h.ctx, f)
			require.NoError(t, err)
			out := []string{}
			for _, bt := range ts {
				out = append(out, bt.ID)
			}
			return out
		}
		require.Equal(t, []string{t2.ID, t1.ID}, list(bot.TaskFilter{OwnerSessionKey: "local:a"}))
		require.Equal(t, []string{t1.ID}, list(bot.TaskFilter{OwnerSessionKey: "local:a", Open: true}))
		require.Equal(t, []string{t3.ID, t1.ID}, list(bot.TaskFilter{Open: true}))
		require.Equal(t, []string{t2.ID}, list(bot.TaskFilter{CreatorJobID: "job_2"}))
		require.Empty(t, list(bot.TaskFilter{OwnerSessionKey: "local:b", OwnerAgent: "coder"}))

		_, err = h.s.AddTask(h.ctx, bot.BackgroundTask{Command: "x", Status: bot.TaskRunning})
		requireCode(t, bot.EINVALID, err)
		_, err = h.s.AddTask(h.ctx, bot.BackgroundTask{Owner: owner, Status: bot.TaskRunning})
		requireCode(t, bot.EINVALID, err)
		_, err = h.s.GetTask(h.ctx, "task_404")
		requireCode(t, bot.ENOTFOUND, err)
	})

	t.Run("thread resets", func(t *testing.T) {
		h := newHarness(t, open)
		at0, err := h.s.ThreadResetAt(h.ctx, "local:a")
		require.NoError(t, err)
		require.True(t, at0.IsZero())
		require.NoError(t, h.s.MarkThreadReset(h.ctx, "local:a", at(time.Minute)))
		got, err := h.s.ThreadResetAt(h.ctx, "local:a")
		require.NoError(t, err)
		require.True(t, got.Equal(at(time.Minute)), got)
		requireCode(t, bot.EINVALID, h.s.MarkThreadReset(h.ctx, "", epoch()))
	})

	t.Run("the ledger survives a reopen", func(t *testing.T) {
		h := newHarness(t, open)
		parent := h.submit(bot.LocalThread("p"), "coder", "x")
		job := h.mustClaim("w1", epoch()).Job
		r := h.spawn(parent, job, "tester", "t", epoch())
		h.reopen()
		require.Equal(t, r, *h.run(r.ID))
		require.Equal(t, []string{r.ID}, runIDs(h.runs(bot.RunFilter{Open: true})))
	})
}

func testBudgets(t *testing.T, open Opener) {
	t.Run("usage adds up per key and grants extend it", func(t *testing.T) {
		h := newHarness(t, open)
		tree := bot.TreeBudgetKey("wi_1")
		day := bot.DailyBudgetKey(epoch(), bot.BudgetAgent, "coder")
		require.Equal(t, "day/2025-03-04/agent/coder", day)
		require.NoError(t, h.s.AddUsage(h.ctx, bot.Usage{Keys: []string{tree, day}, Tokens: 100, Cost: 0.5, At: epoch()}))
		require.NoError(t, h.s.AddUsage(h.ctx, bot.Usage{Keys: []string{tree}, Tokens: 50, At: at(time.Minute)}))
		sp, err := h.s.Spent(h.ctx, []string{day, "tree/none", tree})
		require.NoError(t, err)
		require.Len(t, sp, 3)
		require.Equal(t, bot.Spend{Key: day, Tokens: 100, Cost: 0.5, Calls: 1, Since: epoch(), Updated: epoch()}, sp[0])
		require.Equal(t, bot.Spend{Key: "tree/none"}, sp[1])
		require.Equal(t, int64(150), sp[2].Tokens)
		require.Equal(t, int64(2), sp[2].Calls)
		require.True(t, sp[2].Since.Equal(epoch()))
		require.True(t, sp[2].Updated.Equal(at(time.Minute)))

		g, err := h.s.GrantBudget(h.ctx, tree, bot.Grant{Tokens: 1000, Seconds: 60, At: at(2 * time.Minute)})
		require.NoError(t, err)
		require.Equal(t, int64(1000), g.GrantedTokens)
		g, err = h.s.GrantBudget(h.ctx, tree, bot.Grant{Tokens: 1000, Cost: 2})
		require.NoError(t, err)
		require.Equal(t, int64(2000), g.GrantedTokens)
		require.Equal(t, 2.0, g.GrantedCost)
		require.Equal(t, int64(60), g.GrantedSeconds)
		require.Equal(t, int64(150), g.Tokens)

		h.reopen()
		sp, err = h.s.Spent(h.ctx, []string{tree})
		require.NoError(t, err)
		require.Equal(t, int64(2000), sp[0].GrantedTokens)

		requireCode(t, bot.EINVALID, h.s.AddUsage(h.ctx, bot.Usage{Keys: []string{""}, Tokens: 1}))
		requireCode(t, bot.EINVALID, h.s.AddUsage(h.ctx, bot.Usage{Keys: []string{tree}, Tokens: -1}))
		_, err = h.s.GrantBudget(h.ctx, tree, bot.Grant{Tokens: -5})
		requireCode(t, bot.EINVALID, err)
	})

	t.Run("the keys under a prefix are listed in key order, a page at a time", func(t *testing.T) {
		h := newHarness(t, open)
		day := func(kind, name string) string { return bot.DailyBudgetKey(epoch(), kind, name) }
		for i, name := range []string{"triage", "coder", "docs", "coder-2"} {
			require.NoError(t, h.s.AddUsage(h.ctx, bot.Usage{Keys: []string{day(bot.BudgetAgent, name), day(bot.BudgetRepo, "o/r")}, Tokens: 10 * (i + 1), At: epoch()}))
		}
		// Neither another day's, another kind's, nor a key the prefix
		// only begins (agent/ against agent-x/) is listed.
		require.NoError(t, h.s.AddUsage(h.ctx, bot.Usage{Keys: []string{
			bot.DailyBudgetKey(at(24*time.Hour), bot.BudgetAgent, "coder"), "day/2025-03-04/agentx/coder", bot.TreeBudgetKey("wi_1"),
		}, Tokens: 1, At: epoch()}))
		keys := func(sp []bot.Spend) []string {
			var out []string
			for _, s := range sp {
				out = append(out, s.Key)
			}
			return out
		}
		prefix := "day/2025-03-04/agent/"
		sp, more, err := h.s.SpentUnder(h.ctx, prefix, 0)
		require.NoError(t, err)
		require.False(t, more)
		require.Equal(t, []string{prefix + "coder", prefix + "coder-2", prefix + "docs", prefix + "triage"}, keys(sp))
		require.Equal(t, int64(20), sp[0].Tokens)
		require.Equal(t, int64(1), sp[0].Calls)
		sp, more, err = h.s.SpentUnder(h.ctx, prefix, 3)
		require.NoError(t, err)
		require.True(t, more)
		require.Len(t, sp, 3)
		sp, _, err = h.s.SpentUnder(h.ctx, "day/2025-03-04/repo/", 0)
		require.NoError(t, err)
		require.Len(t, sp, 1)
		require.Equal(t, int64(100), sp[0].Tokens)
		sp, more, err = h.s.SpentUnder(h.ctx, "day/1999-01-01/", 0)
		require.NoError(t, err)
		require.False(t, more)
		require.Empty(t, sp)
	})
}

func testRunStates(t *testing.T, open Opener) {
	t.Run("saved, replaced, loaded after a reopen, deleted", func(t *testing.T) {
		h := newHarness(t, open)
		doc, err := h.s.LoadRunState(h.ctx, "wi_1")
		require.NoError(t, err)
		require.Nil(t, doc)
		require.NoError(t, h.s.SaveRunState(h.ctx, "wi_1", []byte(`{"turn":1}`)))
		require.NoError(t, h.s.SaveRunState(h.ctx, "wi_1", []byte(`{"turn":2}`)))
		require.NoError(t, h.s.SaveRunState(h.ctx, "wi_2", []byte(`{"turn":7}`)))
		h.reopen()
		doc, err = h.s.LoadRunState(h.ctx, "wi_1")
		require.NoError(t, err)
		require.JSONEq(t, `{"turn":2}`, string(doc))
		require.NoError(t, h.s.DeleteRunState(h.ctx, "wi_1"))
		require.NoError(t, h.s.DeleteRunState(h.ctx, "wi_1"))
		doc, err = h.s.LoadRunState(h.ctx, "wi_1")
		require.NoError(t, err)
		require.Nil(t, doc)
		doc, err = h.s.LoadRunState(h.ctx, "wi_2")
		require.NoError(t, err)
		require.JSONEq(t, `{"turn":7}`, string(doc))
		requireCode(t, bot.EINVALID, h.s.SaveRunState(h.ctx, "", []byte("x")))
		requireCode(t, bot.EINVALID, h.s.SaveRunState(h.ctx, "wi_3", nil))
	})
}
