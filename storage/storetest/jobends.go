package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// endMessages are what a run's end tells wi's thread: its final status of
// attempt, its reply and its reaction.
func endMessages(wi *bot.WorkItem, attempt int, state, reply string) []bot.OutboxMessage {
	return []bot.OutboxMessage{{
		Key: wi.ID + "/status", Thread: wi.Thread, WorkItemID: wi.ID, Kind: bot.OutboxStatus, Text: state + ": " + reply,
		Status: &bot.StatusView{WorkItemID: wi.ID, Agent: "coder", State: state, Activity: reply, Started: epoch(), Updated: epoch(), Attempt: attempt},
	}, {
		Key: wi.ID + "/reply", Thread: wi.Thread, WorkItemID: wi.ID, Kind: bot.OutboxReply, Text: reply,
	}, {
		Key: bot.ReactionKey(wi.ID, bot.ReactionSuccess), Thread: wi.Thread, WorkItemID: wi.ID, Kind: bot.OutboxReaction,
		Reaction: bot.ReactionSuccess, Target: "ref",
	}}
}

// outboxTexts are the texts the outbox holds for thread, by key, with the
// version of each.
func (h *harness) outboxTexts(thread bot.Thread) map[string]string {
	h.t.Helper()
	msgs, err := h.s.ListOutbox(h.ctx, thread.Key())
	require.NoError(h.t, err)
	out := map[string]string{}
	for _, m := range msgs {
		out[m.Key] = m.Text
	}
	return out
}

func testJobEnds(t *testing.T, open Opener) {
	t.Run("a job's end tells its thread in its own transaction, and a run that lost the job tells nothing", func(t *testing.T) {
		h := newHarness(t, open)
		th := bot.LocalThread("t")
		wi := h.submit(th, "coder", "a")
		first := h.claim(bot.ClaimRequest{Owner: "w1", Now: epoch(), Lease: time.Second, MaxAttempts: 3})
		require.NotNil(t, first.Job)
		// w1 was paused past its lease: w2 takes the job over and ends it.
		second := h.mustClaim("w2", at(time.Minute))
		require.Equal(t, 2, second.Job.Attempt)
		require.NoError(t, h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: second.Job.ID, Owner: "w2", Now: at(2 * time.Minute),
			Success: true, Summary: "from w2", Messages: endMessages(wi, 2, "done", "from w2")}))
		want := map[string]string{wi.ID + "/status": "done: from w2", wi.ID + "/reply": "from w2", wi.ID + "/reaction/white_check_mark": ""}
		require.Equal(t, want, h.outboxTexts(th))

		// w1's run ends after: refused, and none of its messages is written.
		requireCode(t, bot.ECONFLICT, h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: first.Job.ID, Owner: "w1", Now: at(3 * time.Minute),
			Error: "it broke", Messages: endMessages(wi, 1, "failed", "from w1")}))
		require.Equal(t, want, h.outboxTexts(th))
		require.Equal(t, "from w2", h.workItem(wi.ID).Summary)
		msgs, err := h.s.ListOutbox(h.ctx, th.Key())
		require.NoError(t, err)
		for _, m := range msgs {
			require.Equal(t, 1, m.Version, "%s was written once", m.Key)
		}
	})

	t.Run("a failed end of a job a person cancelled is refused with the cancel, writing nothing", func(t *testing.T) {
		h := newHarness(t, open)
		th := bot.LocalThread("t")
		wi := h.submit(th, "coder", "a")
		c := h.mustClaim("w1", epoch())
		_, job, err := h.s.CancelWorkItem(h.ctx, wi.ID, bot.Cancelled{By: "ana", Reason: "wrong repo", At: at(time.Second)})
		require.NoError(t, err)
		require.NotNil(t, job)

		err = h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: c.Job.ID, Owner: "w1", Now: at(2 * time.Second),
			Error: "the model server is down", Messages: endMessages(wi, 1, "failed", "could not finish")})
		var cancelled *bot.Cancelled
		require.ErrorAs(t, err, &cancelled)
		require.Equal(t, "cancelled by ana: wrong repo", cancelled.Error())
		require.Equal(t, bot.StatusRunning, h.workItem(wi.ID).Status, "nothing was written")
		require.Empty(t, h.outboxTexts(th))

		require.NoError(t, h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: c.Job.ID, Owner: "w1", Now: at(3 * time.Second),
			Cancelled: true, Error: cancelled.Error(), Messages: endMessages(wi, 1, "cancelled", "stopped")}))
		got := h.workItem(wi.ID)
		require.Equal(t, bot.StatusCancelled, got.Status)
		require.Equal(t, "cancelled by ana: wrong repo", got.Error)
		require.Equal(t, "stopped", h.outboxTexts(th)[wi.ID+"/reply"])
	})

	t.Run("a job given back at shutdown tells its thread in the same transaction", func(t *testing.T) {
		h := newHarness(t, open)
		th := bot.LocalThread("t")
		wi := h.submit(th, "coder", "a")
		c := h.mustClaim("w1", epoch())
		paused := endMessages(wi, 1, "paused", "resumes after the restart")[:1]
		requireCode(t, bot.ECONFLICT, h.s.ReleaseJob(h.ctx, c.Job.ID, "w2", at(time.Second), paused))
		require.Empty(t, h.outboxTexts(th), "a worker that does not hold the job tells nothing")
		require.NoError(t, h.s.ReleaseJob(h.ctx, c.Job.ID, "w1", at(time.Second), paused))
		require.Equal(t, map[string]string{wi.ID + "/status": "paused: resumes after the restart"}, h.outboxTexts(th))
		require.Equal(t, bot.StatusQueued, h.workItem(wi.ID).Status)
	})

	t.Run("a job a person cancelled is not given back at shutdown", func(t *testing.T) {
		h := newHarness(t, open)
		th := bot.LocalThread("t")
		wi := h.submit(th, "coder", "a")
		c := h.mustClaim("w1", epoch())
		_, _, err := h.s.CancelWorkItem(h.ctx, wi.ID, bot.Cancelled{By: "ana", At: at(time.Second)})
		require.NoError(t, err)
		var cancelled *bot.Cancelled
		paused := endMessages(wi, 1, "paused", "resumes after the restart")[:1]
		require.ErrorAs(t, h.s.ReleaseJob(h.ctx, c.Job.ID, "w1", at(2*time.Second), paused), &cancelled)
		require.Equal(t, "ana", cancelled.By)
		require.Equal(t, bot.StatusRunning, h.workItem(wi.ID).Status, "nothing was written")
		require.Empty(t, h.outboxTexts(th), "the thread never reads that the work resumes")
		require.NoError(t, h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: c.Job.ID, Owner: "w1", Now: at(3 * time.Second),
			Cancelled: true, Error: cancelled.Error()}))
		require.Equal(t, bot.StatusCancelled, h.workItem(wi.ID).Status)
		h.requireNothingToClaim(at(time.Hour))
	})

	t.Run("a job a person cancelled whose worker then died is not run again", func(t *testing.T) {
		h := newHarness(t, open)
		th := bot.LocalThread("t")
		wi := h.submit(th, "coder", "a")
		h.mustClaim("w1", epoch())
		_, _, err := h.s.CancelWorkItem(h.ctx, wi.ID, bot.Cancelled{By: "ana", Reason: "not needed", At: at(time.Second)})
		require.NoError(t, err)
		// w1 dies (kill -9) before its renewal learns of the cancel; the
		// next claim finds its lease expired.
		told := func(wi bot.WorkItem) []bot.OutboxMessage { return endMessages(&wi, 0, string(wi.Status), wi.Error) }
		c := h.claim(bot.ClaimRequest{Owner: "w2", Now: at(time.Hour), Lease: time.Minute, MaxAttempts: 3, Abandon: told})
		require.Nil(t, c.Job, "the cancelled work is not run again")
		require.Len(t, c.Abandoned, 1)
		got := h.workItem(wi.ID)
		require.Equal(t, bot.StatusCancelled, got.Status)
		require.Equal(t, "cancelled by ana: not needed", got.Error)
		require.Equal(t, "cancelled by ana: not needed", h.outboxTexts(th)[wi.ID+"/reply"])
		require.Zero(t, h.depth())
	})

	t.Run("a run that succeeded before a person's cancel reached it keeps its result", func(t *testing.T) {
		h := newHarness(t, open)
		th := bot.LocalThread("t")
		wi := h.submit(th, "coder", "a")
		c := h.mustClaim("w1", epoch())
		_, _, err := h.s.CancelWorkItem(h.ctx, wi.ID, bot.Cancelled{By: "ana", At: at(time.Second)})
		require.NoError(t, err)
		require.NoError(t, h.s.FinishJob(h.ctx, bot.JobOutcome{JobID: c.Job.ID, Owner: "w1", Now: at(2 * time.Second),
			Success: true, Summary: "done", Messages: endMessages(wi, 1, "done", "done")}))
		require.Equal(t, bot.StatusDone, h.workItem(wi.ID).Status)
		require.Equal(t, "done", h.outboxTexts(th)[wi.ID+"/reply"])
	})
}
