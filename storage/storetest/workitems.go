package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

func testWorkItems(t *testing.T, open Opener) {
	t.Run("missing work item", func(t *testing.T) {
		h := newHarness(t, open)
		wi := h.submit(bot.LocalThread("t"), "coder", "a")
		for _, id := range []string{"", "nope", wi.ID + "0", wi.EventRef} {
			_, err := h.s.GetWorkItem(h.ctx, id)
			requireCode(t, bot.ENOTFOUND, err)
			_, err = h.s.ListJobs(h.ctx, id)
			requireCode(t, bot.ENOTFOUND, err)
			_, err = h.s.RerouteWorkItem(h.ctx, id, bot.Hop{From: "coder", To: "docs", At: epoch()})
			requireCode(t, bot.ENOTFOUND, err)
		}
	})

	t.Run("list newest first with thread and status filters", func(t *testing.T) {
		h := newHarness(t, open)
		tt, tu := bot.LocalThread("t"), bot.GitHubThread("acme", "api", 3)
		var all, inT, inU []string
		add := func(i int) {
			th, list := tt, &inT
			if i%2 == 1 {
				th, list = tu, &inU
			}
			wi := h.submit(th, "coder", fmt.Sprint(i))
			all = append(all, wi.ID)
			*list = append(*list, wi.ID)
		}
		// The first work item of t finishes, the first of u runs, the rest
		// wait.
		add(0)
		add(1)
		first := h.mustClaim("w1", epoch())
		h.finish(first.Job, at(time.Second), "ok")
		second := h.mustClaim("w1", at(time.Second))
		require.Equal(t, tu, second.Job.Thread)
		for i := 2; i < 6; i++ {
			add(i)
		}

		for _, tc := range []struct {
			name   string
			filter bot.WorkItemFilter
			want   []string
		}{
			{"all", bot.WorkItemFilter{}, reversed(all)},
			{"limit", bot.WorkItemFilter{Limit: 2}, reversed(all)[:2]},
			{"thread", bot.WorkItemFilter{Thread: tt.Key()}, reversed(inT)},
			{"thread with limit", bot.WorkItemFilter{Thread: tu.Key(), Limit: 1}, reversed(inU)[:1]},
			{"unknown thread", bot.WorkItemFilter{Thread: "local:nobody"}, nil},
			{"status done", bot.WorkItemFilter{Status: bot.StatusDone}, inT[:1]},
			{"status running", bot.WorkItemFilter{Status: bot.StatusRunning}, inU[:1]},
			{"status queued", bot.WorkItemFilter{Status: bot.StatusQueued}, reversed(all[2:])},
			{"status failed", bot.WorkItemFilter{Status: bot.StatusFailed}, nil},
			{"thread and status", bot.WorkItemFilter{Thread: tt.Key(), Status: bot.StatusQueued}, reversed(inT[1:])},
			{"thread and status, none", bot.WorkItemFilter{Thread: tu.Key(), Status: bot.StatusDone}, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got := h.list(tc.filter)
				if tc.want == nil {
					require.Empty(t, got)
					return
				}
				require.Equal(t, tc.want, ids(got))
				for _, wi := range got {
					if tc.filter.Status != "" {
						require.Equal(t, tc.filter.Status, wi.Status)
					}
					if tc.filter.Thread != "" {
						require.Equal(t, tc.filter.Thread, wi.Thread.Key())
					}
				}
			})
		}
	})

	t.Run("a conversation's work items, latest threads first", func(t *testing.T) {
		h := newHarness(t, open)
		dm := func(ts string) bot.Thread { return bot.SlackThread("T1", "D1", ts) }
		first := h.submit(dm("1700000100.000100"), "docs", "a")
		other := h.submit(bot.SlackThread("T1", "D11", "1700000150.000100"), "coder", "another DM channel")
		channel := h.submit(bot.SlackThread("T1", "C1", "1700000160.000100"), "coder", "a channel")
		second := h.submit(dm("1700000200.000100"), "docs", "b")
		third := h.submit(dm("1700000200.000100"), "ops", "c")
		require.Equal(t, []string{third.ID, second.ID, first.ID}, ids(h.list(bot.WorkItemFilter{Conversation: "slack:T1/D1"})))
		require.Equal(t, []string{third.ID, second.ID}, ids(h.list(bot.WorkItemFilter{Conversation: "slack:T1/D1", Limit: 2})))
		require.Equal(t, []string{other.ID}, ids(h.list(bot.WorkItemFilter{Conversation: "slack:T1/D11"})))
		require.Empty(t, h.list(bot.WorkItemFilter{Conversation: "slack:T1/D2"}))
		require.Equal(t, []string{channel.ID}, ids(h.list(bot.WorkItemFilter{Conversation: "slack:T1/C1"})))
	})

	t.Run("list limits default to 100 and stop at 1000", func(t *testing.T) {
		h := newHarness(t, open)
		const n = 1010
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range 64 {
			wg.Go(func() {
				for j := i; j < n; j += 64 {
					_, err := h.s.Ingest(h.ctx, routed(h.event(bot.LocalThread("t"), "x"), "coder", epoch()))
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		everything := h.list(bot.WorkItemFilter{Limit: 5000})
		require.Len(t, everything, 1000)
		require.Equal(t, ids(everything[:100]), ids(h.list(bot.WorkItemFilter{})))
		require.Equal(t, ids(everything[:100]), ids(h.list(bot.WorkItemFilter{Thread: "local:t"})))
		require.Equal(t, ids(everything[:100]), ids(h.list(bot.WorkItemFilter{Status: bot.StatusQueued})))
		require.Len(t, h.list(bot.WorkItemFilter{Thread: "local:t", Limit: 1001}), 1000)
	})

	t.Run("jobs oldest first", func(t *testing.T) {
		h := newHarness(t, open)
		a := h.submit(bot.LocalThread("t"), "coder", "a")
		require.Empty(t, h.jobs(a.ID))
		c1 := h.mustClaim("w1", epoch())
		require.NoError(t, h.s.ReleaseJob(h.ctx, c1.Job.ID, "w1", at(time.Second), nil))
		c2 := h.mustClaim("w2", at(2*time.Second))
		h.finish(c2.Job, at(3*time.Second), "ok")
		jobs := h.jobs(a.ID)
		require.Len(t, jobs, 2)
		require.Equal(t, c1.Job.ID, jobs[0].ID)
		require.Equal(t, c2.Job.ID, jobs[1].ID)
		require.Equal(t, "w2", jobs[1].Owner)
	})
}

func testReroute(t *testing.T, open Opener) {
	t.Run("handoff of a queued work item", func(t *testing.T) {
		h := newHarness(t, open)
		a := h.submit(bot.LocalThread("t"), "coder", "a")
		ceilings := []bot.Ceiling{{Profile: "read-only", Reason: "handed off by @coder (read-only)"}}
		wi, err := h.s.RerouteWorkItem(h.ctx, a.ID, bot.Hop{From: "coder", To: "reviewer", Reason: "needs a review", At: at(time.Second), Ceilings: ceilings})
		require.NoError(t, err)
		require.Equal(t, bot.Route{Agent: "reviewer", Kind: bot.RouteHandoff, Reason: "handoff from @coder: needs a review"}, wi.Route)
		require.Equal(t, &bot.Route{Agent: "coder", Kind: bot.RouteMention, Reason: "mention @coder"}, wi.FirstRoute, "the route it was made with is kept")
		require.Equal(t, bot.StatusQueued, wi.Status)
		require.Len(t, wi.Hops, 1)
		require.Equal(t, "reviewer", wi.Hops[0].To)
		require.Equal(t, ceilings, wi.Hops[0].Ceilings, "the next job keeps the rights of the run that handed off")
		require.True(t, wi.Hops[0].At.Equal(at(time.Second)))
		require.Equal(t, wi, h.workItem(a.ID))

		// The work item waits in the queue once, for the new agent.
		require.Equal(t, 1, h.depth())
		c := h.mustClaim("w1", at(2*time.Second))
		require.Equal(t, "reviewer", c.Job.Agent)
		require.Equal(t, []string{a.ID}, c.Job.WorkItemIDs)
		h.requireNothingToClaim(at(2 * time.Second))
	})

	t.Run("handoff during a run", func(t *testing.T) {
		h := newHarness(t, open)
		a := h.submit(bot.LocalThread("t"), "coder", "a")
		run := h.mustClaim("w1", epoch())
		_, err := h.s.RerouteWorkItem(h.ctx, a.ID, bot.Hop{From: "coder", To: "ops", Reason: "deploy", At: at(time.Second)})
		require.NoError(t, err)
		// The handoff waits for the run that made it.
		h.requireNothingToClaim(at(time.Second))
		h.finish(run.Job, at(2*time.Second), "handed to ops")

		// Ending the run does not undo the handoff.
		wi := h.workItem(a.ID)
		require.Equal(t, bot.StatusQueued, wi.Status)
		require.Equal(t, "ops", wi.Route.Agent)
		next := h.mustClaim("w2", at(3*time.Second))
		require.Equal(t, "ops", next.Job.Agent)
		require.Equal(t, []string{a.ID}, next.Job.WorkItemIDs)
		h.finish(next.Job, at(4*time.Second), "deployed")
		wi = h.workItem(a.ID)
		require.Equal(t, bot.StatusDone, wi.Status)
		require.Equal(t, "deployed", wi.Summary)
		require.Len(t, h.jobs(a.ID), 2)
	})

	t.Run("a run that handed off and then died is not retried", func(t *testing.T) {
		h := newHarness(t, open)
		a := h.submit(bot.LocalThread("t"), "coder", "a")
		h.mustClaim("w1", epoch()) // lease until +1m, never renewed
		_, err := h.s.RerouteWorkItem(h.ctx, a.ID, bot.Hop{From: "coder", To: "ops", Reason: "deploy", At: at(time.Second)})
		require.NoError(t, err)

		next := h.claim(claimReq("w2", at(5*time.Minute)))
		require.Empty(t, next.Abandoned)
		require.NotNil(t, next.Job)
		require.Equal(t, "ops", next.Job.Agent)
		require.Equal(t, []string{a.ID}, next.Job.WorkItemIDs)
		require.Equal(t, []string{a.ID}, ids(next.WorkItems))
		h.finish(next.Job, at(6*time.Minute), "deployed")
		require.Zero(t, h.depth())
		h.requireNothingToClaim(at(time.Hour))
		require.Equal(t, bot.StatusDone, h.workItem(a.ID).Status)
	})

	t.Run("a run that handed off and was released is not retried", func(t *testing.T) {
		h := newHarness(t, open)
		a := h.submit(bot.LocalThread("t"), "coder", "a")
		run := h.mustClaim("w1", epoch())
		_, err := h.s.RerouteWorkItem(h.ctx, a.ID, bot.Hop{From: "coder", To: "ops", Reason: "deploy", At: at(time.Second)})
		require.NoError(t, err)
		require.NoError(t, h.s.ReleaseJob(h.ctx, run.Job.ID, "w1", at(2*time.Second), nil))
		require.Equal(t, 1, h.depth())

		next := h.mustClaim("w2", at(3*time.Second))
		require.Equal(t, "ops", next.Job.Agent)
		require.Equal(t, []string{a.ID}, ids(next.WorkItems))
		h.finish(next.Job, at(4*time.Second), "deployed")
		h.requireNothingToClaim(at(time.Hour))
	})

	t.Run("hop limit", func(t *testing.T) {
		h := newHarness(t, open)
		a := h.submit(bot.LocalThread("t"), "coder", "a")
		agents := []string{"coder", "reviewer", "docs", "ops", "triage"}
		for i := range bot.MaxHops {
			wi, err := h.s.RerouteWorkItem(h.ctx, a.ID, bot.Hop{From: agents[i], To: agents[i+1], Reason: "next", At: at(time.Duration(i) * time.Second)})
			require.NoError(t, err)
			require.Len(t, wi.Hops, i+1)
		}
		_, err := h.s.RerouteWorkItem(h.ctx, a.ID, bot.Hop{From: "ops", To: "triage", Reason: "again", At: at(time.Minute)})
		requireCode(t, bot.ECONFLICT, err)
		wi := h.workItem(a.ID)
		require.Len(t, wi.Hops, bot.MaxHops)
		require.Equal(t, agents[bot.MaxHops], wi.Route.Agent)
		require.Equal(t, 1, h.depth())
	})
}

func testIngress(t *testing.T, open Opener) {
	h := newHarness(t, open)
	codes := []string{bot.IgnoreBot, bot.IgnoreNoRoute, bot.IgnoreBot, bot.IgnoreEdited, bot.IgnoreBot}
	var all, bots []string
	for _, code := range codes {
		res := h.ingest(ignored(h.event(bot.LocalThread("t"), "x"), code, epoch()))
		all = append(all, res.Ingress.ID)
		if code == bot.IgnoreBot {
			bots = append(bots, res.Ingress.ID)
		}
	}
	h.submit(bot.LocalThread("t"), "coder", "not ignored")

	list := func(f bot.IngressFilter) []string {
		t.Helper()
		recs, _, err := h.s.ListIngress(h.ctx, f)
		require.NoError(t, err)
		out := make([]string, len(recs))
		for i, r := range recs {
			out[i] = r.ID
			if f.Reason != "" {
				require.Equal(t, f.Reason, r.Reason)
			}
		}
		return out
	}
	require.Equal(t, reversed(all), list(bot.IngressFilter{}))
	require.Equal(t, reversed(all)[:2], list(bot.IngressFilter{Limit: 2}))
	require.Equal(t, reversed(bots), list(bot.IngressFilter{Reason: bot.IgnoreBot}))
	require.Equal(t, reversed(bots)[:1], list(bot.IngressFilter{Reason: bot.IgnoreBot, Limit: 1}))
	require.Empty(t, list(bot.IngressFilter{Reason: bot.IgnoreDeleted}))

	var wg sync.WaitGroup
	errs := make(chan error, 105)
	for range 105 {
		wg.Go(func() {
			_, err := h.s.Ingest(h.ctx, ignored(h.event(bot.LocalThread("t"), "x"), bot.IgnoreUnsupported, epoch()))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, list(bot.IngressFilter{}), 100)
	require.Len(t, list(bot.IngressFilter{Reason: bot.IgnoreUnsupported}), 100)
	require.Len(t, list(bot.IngressFilter{Limit: 200}), 110)
}
