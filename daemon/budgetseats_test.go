package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
)

// fanOut is a lead that spawns n helpers in its first turn and answers
// once they are done; each helper's calls are answered by helper.
func fanOut(n int, helper func(ctx context.Context, req chatRequest) reply) func(ctx context.Context, req chatRequest) reply {
	return func(ctx context.Context, req chatRequest) reply {
		switch {
		case req.Agent == "helper":
			return helper(ctx, req)
		case req.turns() == 0:
			var calls []fakeCall
			for i := range n {
				calls = append(calls, fakeCall{ID: fmt.Sprintf("part%d", i), Name: agents.SpawnTool, Args: spawnArgs(fmt.Sprintf("part %d", i), "helper")})
			}
			return reply{Calls: calls}
		}
		return reply{Text: "all parts done"}
	}
}

// slowly answers after d, or gives up with the run.
func slowly(d time.Duration, r reply) func(ctx context.Context, req chatRequest) reply {
	return func(ctx context.Context, _ chatRequest) reply {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		return r
	}
}

// approvals lists the approvals waiting for a decision.
func (tr *tree) approvals(t *testing.T) []bot.Approval {
	t.Helper()
	code, body := tr.do(t, "GET", "/api/v1/approvals", "")
	require.Equal(t, 200, code, string(body))
	var pending []bot.Approval
	require.NoError(t, json.Unmarshal(body, &pending))
	return pending
}

// spent reads what key spent.
func (tr *tree) spent(t *testing.T, key string) bot.Spend {
	t.Helper()
	spent, err := tr.d.Store().Spent(context.Background(), []string{key})
	require.NoError(t, err)
	return spent[0]
}

// TestAFanOutUnderADayCapNoCallCountedYetPassesItByOneCallAtMost: the
// helpers' agent has spent nothing today when six of them call at once, so
// no call says what one spends; they still pass the agent's cap by one
// call, not by one call each.
func TestAFanOutUnderADayCapNoCallCountedYetPassesItByOneCallAtMost(t *testing.T) {
	const helpers = 6
	model := newFakeModel(t, fanOut(helpers, slowly(200*time.Millisecond, reply{Text: "part done"})))
	tr := startTree(t, model, treeOptions{subagents: config.Subagents{MaxConcurrent: helpers},
		config: func(c *config.Config) { c.Budgets.PerDay.Agent = 300 }})
	id := tr.send(t, "day", "@lead do the parts")

	ap := tr.pendingBudget(t)
	require.Equal(t, "budget reached (300 tokens): approve 300 more?", ap.Reason)
	key := bot.DailyBudgetKey(time.Now(), bot.BudgetAgent, "helper")
	require.Eventually(t, func() bool { return tr.spent(t, key).Tokens >= 300 }, 10*time.Second, 10*time.Millisecond)
	require.LessOrEqual(t, tr.spent(t, key).Tokens, int64(300+110), "the helpers passed their cap by more than one call")
	require.LessOrEqual(t, len(model.seen("helper")), 3, "helpers called the model past the cap")

	// Denied, the helpers waiting end with the refusal and the lead
	// answers with what was done.
	code, body := tr.do(t, "POST", "/api/v1/approvals/"+ap.ID+"/deny", "")
	require.Equal(t, 200, code, string(body))
	require.Equal(t, bot.StatusDone, tr.finished(t, id, time.Minute).Status)
	for _, k := range tr.children(t, id) {
		if k.Status != bot.RunDone {
			require.Equal(t, bot.RunFailed, k.Status)
			require.Contains(t, k.Error, "budget reached (300 tokens), and more was denied")
		}
	}
	require.Empty(t, tr.approvals(t), "a refusal answers every helper of the tree")
}

// TestHelpersWaitingAtTheCapEndPromptlyOnDenialWhileAnotherCallIsUnderWay:
// one helper's call is still under way when the others reach the cap and
// ask; denied, or the approval expiring, the asking helpers end at once,
// not when that call ends, and the tree ends cleanly.
func TestHelpersWaitingAtTheCapEndPromptlyOnDenialWhileAnotherCallIsUnderWay(t *testing.T) {
	for _, decision := range []string{"deny", "expire"} {
		t.Run(decision, func(t *testing.T) {
			const helpers = 6
			release := make(chan struct{})
			model := newFakeModel(t, fanOut(helpers, func(ctx context.Context, req chatRequest) reply {
				switch {
				case strings.Contains(req.first(), "part 0"):
					// A long call, under way all along.
					select {
					case <-release:
					case <-ctx.Done():
					}
					return reply{Text: "part 0 done"}
				default:
					// A large one that reaches the cap at once.
					return reply{Text: "part done", Tokens: 290}
				}
			}))
			tr := startTree(t, model, treeOptions{subagents: config.Subagents{MaxConcurrent: helpers},
				config: func(c *config.Config) {
					c.Budgets.Tree.Tokens = 300
					if decision == "expire" {
						c.ApprovalTimeout = time.Second
					}
				}})
			id := tr.send(t, "deny", "@lead do the parts")
			ap := tr.pendingBudget(t)
			if decision == "deny" {
				code, body := tr.do(t, "POST", "/api/v1/approvals/"+ap.ID+"/deny", "")
				require.Equal(t, 200, code, string(body))
			}
			require.Eventually(t, func() bool {
				var ended int
				for _, k := range tr.children(t, id) {
					if !k.Status.Open() {
						ended++
					}
				}
				return ended >= helpers-1
			}, 10*time.Second, 10*time.Millisecond, "the helpers at the cap did not end on the refusal")
			var refused int
			for _, k := range tr.children(t, id) {
				if k.Status == bot.RunFailed {
					require.Contains(t, k.Error, "budget reached (300 tokens), and more was")
					refused++
				}
			}
			require.Positive(t, refused, "no helper was waiting at the cap")
			require.Empty(t, tr.approvals(t), "asked once")
			close(release)
			wi := tr.finished(t, id, time.Minute)
			require.Equal(t, bot.StatusFailed, wi.Status, "the lead, at the cap too, stops")
			require.Contains(t, wi.Error, "budget reached (300 tokens), and more was")
			require.Contains(t, tr.messages(t, "deny", id)["reply"], "budget reached (300 tokens)")
			for _, k := range tr.children(t, id) {
				require.False(t, k.Status.Open())
			}
		})
	}
}

// TestCancellingATreeWhoseHelpersWaitForRoomEndsThemAll: two helpers'
// calls are under way and the others wait for room under the cap; the
// work item's cancel, or the thread's reset, ends every one of them, none
// calling the model.
func TestCancellingATreeWhoseHelpersWaitForRoomEndsThemAll(t *testing.T) {
	for _, how := range []string{"cancel", "reset"} {
		t.Run(how, func(t *testing.T) {
			const helpers = 6
			model := newFakeModel(t, fanOut(helpers, func(ctx context.Context, _ chatRequest) reply {
				<-ctx.Done()
				return reply{}
			}))
			tr := startTree(t, model, treeOptions{subagents: config.Subagents{MaxConcurrent: helpers},
				config: func(c *config.Config) { c.Budgets.Tree.Tokens = 300 }})
			id := tr.send(t, how, "@lead do the parts")
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			require.True(t, model.awaitInFlight(ctx, "helper", 2))
			require.Eventually(t, func() bool { return len(tr.children(t, id)) == helpers }, 10*time.Second, 10*time.Millisecond)

			path := "/api/v1/workitems/" + id + "/cancel"
			if how == "reset" {
				path = "/api/v1/threads/" + how + "/reset"
			}
			code, body := tr.do(t, "POST", path, "")
			require.Equal(t, 200, code, string(body))
			wi := tr.finished(t, id, 30*time.Second)
			if how == "cancel" {
				require.Equal(t, bot.StatusCancelled, wi.Status)
			}
			require.Eventually(t, func() bool {
				for _, k := range tr.children(t, id) {
					if k.Status.Open() {
						return false
					}
				}
				return true
			}, 30*time.Second, 10*time.Millisecond, "a helper waiting for room was left open")
			for _, k := range tr.children(t, id) {
				require.Equal(t, bot.RunCancelled, k.Status, k.Error)
			}
			require.Len(t, model.seen("helper"), 2, "a helper waiting for room called the model")
			require.Empty(t, tr.approvals(t))
		})
	}
}

// TestAHelperWhoseModelFailsLetsTheOthersWaitingForRoomGoOn: the call of
// one of the helpers under way fails; it spent nothing, and the helpers
// waiting for room go on.
func TestAHelperWhoseModelFailsLetsTheOthersWaitingForRoomGoOn(t *testing.T) {
	const helpers = 4
	model := newFakeModel(t, fanOut(helpers, func(ctx context.Context, req chatRequest) reply {
		if strings.Contains(req.first(), "part 0") {
			return reply{Status: 400}
		}
		return slowly(100*time.Millisecond, reply{Text: "part done"})(ctx, req)
	}))
	tr := startTree(t, model, treeOptions{subagents: config.Subagents{MaxConcurrent: helpers},
		config: func(c *config.Config) { c.Budgets.Tree.Tokens = 1000 }})
	id := tr.send(t, "fail", "@lead do the parts")
	require.Equal(t, bot.StatusDone, tr.finished(t, id, time.Minute).Status)
	for _, k := range tr.children(t, id) {
		if k.Task == "part 0" {
			require.Equal(t, bot.RunFailed, k.Status)
			continue
		}
		require.Equal(t, bot.RunDone, k.Status, k.Error)
	}
	require.Empty(t, tr.approvals(t), "the tree never reached its cap")
	require.EqualValues(t, 110*(helpers-1)+220, tr.spent(t, bot.TreeBudgetKey(id)).Tokens)
}

// TestATreeUnderItsCapIsNeverAsked: fan-outs that end just under their
// caps, with calls of one size or of very different sizes, wait for room
// at times but are never asked for more.
func TestATreeUnderItsCapIsNeverAsked(t *testing.T) {
	sizes := []int{10, 500, 40, 900, 5, 250, 60, 120}
	for _, tc := range []struct {
		name   string
		tokens func(part int) int // prompt tokens of a helper's call
	}{
		{"calls of one size", func(int) int { return 100 }},
		{"calls of very different sizes", func(part int) int { return sizes[part] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const helpers = 8
			var total int64 = 220 // the lead's two calls
			for i := range helpers {
				total += int64(tc.tokens(i) + 10)
			}
			model := newFakeModel(t, fanOut(helpers, func(ctx context.Context, req chatRequest) reply {
				m := partOf.FindStringSubmatch(req.first())
				require.NotNil(t, m, req.first())
				part, err := strconv.Atoi(m[1])
				require.NoError(t, err)
				return slowly(20*time.Millisecond, reply{Text: "part done", Tokens: tc.tokens(part)})(ctx, req)
			}))
			tr := startTree(t, model, treeOptions{subagents: config.Subagents{MaxConcurrent: helpers},
				config: func(c *config.Config) {
					c.Budgets.Tree.Tokens = total + 1
					c.Budgets.PerDay.Agent = total + 1
					c.Budgets.PerDay.Requester = total + 1
				}})
			id := tr.send(t, "under", "@lead do the parts")
			wi := tr.finished(t, id, time.Minute)
			require.Equal(t, bot.StatusDone, wi.Status, wi.Error)
			require.Empty(t, tr.approvals(t))
			require.Equal(t, total, tr.spent(t, bot.TreeBudgetKey(id)).Tokens)
			require.Equal(t, "all parts done", tr.messages(t, "under", id)["reply"])
			require.NotContains(t, tr.messages(t, "under", id)["status"], "budget reached")
		})
	}
}

// TestTwoTreesUnderOneRequestersDayCapPassItByOneCallAtMost: two requests
// of one person fan out at once under the requester's day cap.
func TestTwoTreesUnderOneRequestersDayCapPassItByOneCallAtMost(t *testing.T) {
	const helpers = 4
	model := newFakeModel(t, fanOut(helpers, slowly(200*time.Millisecond, reply{Text: "part done"})))
	tr := startTree(t, model, treeOptions{subagents: config.Subagents{MaxConcurrent: helpers},
		config: func(c *config.Config) { c.Budgets.PerDay.Requester = 500 }})
	first := tr.send(t, "one", "@lead do the parts")
	second := tr.send(t, "two", "@lead do the parts")
	ap := tr.pendingBudget(t)
	require.Equal(t, "budget reached (500 tokens): approve 500 more?", ap.Reason)
	key := bot.DailyBudgetKey(time.Now(), bot.BudgetRequester, "local:admin")
	require.LessOrEqual(t, tr.spent(t, key).Tokens, int64(500+110), "the trees passed the cap by more than one call")

	// Approved as often as asked, both finish.
	for _, id := range []string{first, second} {
		for deadline := time.Now().Add(time.Minute); ; {
			wi, err := tr.d.Store().GetWorkItem(context.Background(), id)
			require.NoError(t, err)
			if wi.Status.Finished() {
				require.Equal(t, bot.StatusDone, wi.Status, wi.Error)
				break
			}
			require.True(t, time.Now().Before(deadline), "the tree did not finish")
			for _, p := range tr.approvals(t) {
				code, body := tr.do(t, "POST", "/api/v1/approvals/"+p.ID+"/approve", "")
				require.Equal(t, 200, code, string(body))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	require.Len(t, model.seen("helper"), 2*helpers, "each helper called the model once")
	require.False(t, strings.Contains(tr.messages(t, "one", first)["reply"], "stopped"))
}

// approveUntilFinished approves every budget asked for until work item id
// finishes, and returns it.
func (tr *tree) approveUntilFinished(t *testing.T, id string) *bot.WorkItem {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		wi, err := tr.d.Store().GetWorkItem(context.Background(), id)
		require.NoError(t, err)
		if wi.Status.Finished() {
			return wi
		}
		require.True(t, time.Now().Before(deadline), "the tree did not finish")
		for _, p := range tr.approvals(t) {
			code, body := tr.do(t, "POST", "/api/v1/approvals/"+p.ID+"/approve", "")
			require.Equal(t, 200, code, string(body))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCappedFanOutsFinishApprovedAsOftenAsAsked: under a cap that a few
// calls reach, fan-outs of every shape finish once each approval is given,
// every helper's work done once: with one worker, eight helpers at once,
// helpers calling an agent as a tool, and helpers in the background.
func TestCappedFanOutsFinishApprovedAsOftenAsAsked(t *testing.T) {
	const helpers = 8
	spawns := func(background bool) []fakeCall {
		var calls []fakeCall
		for i := range helpers {
			args, _ := json.Marshal(map[string]any{"task": fmt.Sprintf("part %d", i), "agent": "helper", "background": background})
			calls = append(calls, fakeCall{ID: fmt.Sprintf("part%d", i), Name: agents.SpawnTool, Args: string(args)})
		}
		return calls
	}
	for _, tc := range []struct {
		name            string
		workers         int
		nested, bg      bool
		helperCalls     int // model calls of the helpers in all
		scoutCalls      int
		maxConcurrent   int
		expectLeadCalls int
	}{
		{name: "one worker", workers: 1, maxConcurrent: helpers, helperCalls: helpers, expectLeadCalls: 2},
		{name: "eight at once", maxConcurrent: helpers, helperCalls: helpers, expectLeadCalls: 2},
		{name: "agents called as tools", maxConcurrent: helpers, nested: true, helperCalls: 2 * helpers, scoutCalls: helpers, expectLeadCalls: 2},
		{name: "in the background", maxConcurrent: helpers, bg: true, helperCalls: helpers, expectLeadCalls: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
				switch {
				case req.Agent == "scout":
					return slowly(20*time.Millisecond, reply{Text: "scouted"})(ctx, req)
				case req.Agent == "helper" && tc.nested && req.turns() == 0:
					return reply{Calls: []fakeCall{{ID: "scout", Name: agents.ToolName("scout"), Args: `{"task":"look around"}`}}}
				case req.Agent == "helper":
					return slowly(50*time.Millisecond, reply{Text: "part done"})(ctx, req)
				case req.turns() == 0:
					return reply{Calls: spawns(tc.bg)}
				case tc.bg && req.turns() == 1:
					var calls []fakeCall
					for i := range helpers {
						var spawned struct{ ID string }
						require.NoError(t, json.Unmarshal([]byte(req.results()[fmt.Sprintf("part%d", i)]), &spawned))
						calls = append(calls, fakeCall{ID: fmt.Sprintf("await%d", i), Name: agents.AwaitChildTool, Args: `{"id":"` + spawned.ID + `"}`})
					}
					return reply{Calls: calls}
				}
				return reply{Text: "all parts done"}
			})
			tr := startTree(t, model, treeOptions{workers: tc.workers, subagents: config.Subagents{MaxConcurrent: tc.maxConcurrent},
				agents: map[string]string{"scout": agentFile("scout", "Looks around.")},
				config: func(c *config.Config) { c.Budgets.Tree.Tokens = 300 }})
			id := tr.send(t, "fan", "@lead do the parts")
			wi := tr.approveUntilFinished(t, id)
			require.Equal(t, bot.StatusDone, wi.Status, wi.Error)
			require.Equal(t, "all parts done", tr.messages(t, "fan", id)["reply"])
			kids := tr.children(t, id)
			require.Len(t, kids, helpers)
			for _, k := range kids {
				require.Equal(t, bot.RunDone, k.Status, k.Error)
			}
			require.Len(t, model.seen("helper"), tc.helperCalls, "a helper's call was made twice or not at all")
			require.Len(t, model.seen("scout"), tc.scoutCalls)
			require.Len(t, model.seen("lead"), tc.expectLeadCalls)
			spent := tr.spent(t, bot.TreeBudgetKey(id))
			require.EqualValues(t, 110*(tc.helperCalls+tc.scoutCalls+tc.expectLeadCalls), spent.Tokens, "every call is counted once")
			// Each approval raised the cap by 300 when the tree reached it,
			// so it never stood more than one call past its level.
			require.LessOrEqual(t, spent.Tokens, 300+spent.GrantedTokens+110)
		})
	}
}

// TestAFanOutUnderACostCapPassesItByOneCallAtMost: as with tokens, priced
// helpers calling at once under the tree's cost cap pass it by one call.
func TestAFanOutUnderACostCapPassesItByOneCallAtMost(t *testing.T) {
	const helpers = 6
	model := newFakeModel(t, fanOut(helpers, slowly(200*time.Millisecond, reply{Text: "part done"})))
	tr := startTree(t, model, treeOptions{subagents: config.Subagents{MaxConcurrent: helpers}, config: func(c *config.Config) {
		m := c.Models["default"]
		m.Prices = &config.Prices{Input: 1000, Output: 1000} // 0.11 a call
		c.Models["default"] = m
		c.Budgets.Tree.Cost = 0.30
		c.Budgets.Currency = "EUR"
	}})
	id := tr.send(t, "cost", "@lead do the parts")
	ap := tr.pendingBudget(t)
	require.Equal(t, "budget reached (0.30 EUR): approve 0.30 EUR more?", ap.Reason)
	require.Equal(t, 2, len(model.seen("helper")), "helpers called the model past the cap")
	require.Eventually(t, func() bool {
		return tr.spent(t, bot.TreeBudgetKey(id)).Cost > 0.32
	}, 10*time.Second, 10*time.Millisecond, "what the helpers spent is counted")
	require.InDelta(t, 0.33, tr.spent(t, bot.TreeBudgetKey(id)).Cost, 1e-9)
	wi := tr.approveUntilFinished(t, id)
	require.Equal(t, bot.StatusDone, wi.Status, wi.Error)
	require.Len(t, model.seen("helper"), helpers)
}

// TestPricedHelpersOfAnUnpricedLeadPassTheCostCapByOneCallAtMost: the
// lead's model has no prices, so the tree's first call costs nothing and
// says nothing of what a priced call costs; the priced helpers calling at
// once still pass the cost cap by one call.
func TestPricedHelpersOfAnUnpricedLeadPassTheCostCapByOneCallAtMost(t *testing.T) {
	const helpers = 6
	model := newFakeModel(t, fanOut(helpers, slowly(200*time.Millisecond, reply{Text: "part done"})))
	tr := startTree(t, model, treeOptions{subagents: config.Subagents{MaxConcurrent: helpers},
		agents: map[string]string{"helper": "---\nname: helper\ndescription: Does one part of a piece of work.\nmode: tool\nmodel: priced\n---\nYou do what you are asked.\n"},
		config: func(c *config.Config) {
			m := c.Models["default"]
			m.Prices = &config.Prices{Input: 1000, Output: 1000} // 0.11 a call
			c.Models["priced"] = m
			c.Budgets.Tree.Cost = 0.30
			c.Budgets.Currency = "EUR"
		}})
	id := tr.send(t, "mixed", "@lead do the parts")
	ap := tr.pendingBudget(t)
	require.Equal(t, "budget reached (0.30 EUR): approve 0.30 EUR more?", ap.Reason)
	require.Eventually(t, func() bool {
		return tr.spent(t, bot.TreeBudgetKey(id)).Cost > 0.30
	}, 10*time.Second, 10*time.Millisecond, "what the helpers spent is counted")
	require.LessOrEqual(t, tr.spent(t, bot.TreeBudgetKey(id)).Cost, 0.30+0.11+1e-9, "the helpers passed the cap by more than one call")
	require.LessOrEqual(t, len(model.seen("helper")), 3, "helpers called the model past the cap")
	wi := tr.approveUntilFinished(t, id)
	require.Equal(t, bot.StatusDone, wi.Status, wi.Error)
	require.Len(t, model.seen("helper"), helpers)
}

// TestAHungModelCallHoldsTheHelpersWaitingForRoomOnlyUntilItsTimeout: one
// helper's call hangs (the model server never answers it) while the others
// wait for room under the cap; at that helper's timeout its place is given
// up and the others go on, the tree finishing with what they did.
func TestAHungModelCallHoldsTheHelpersWaitingForRoomOnlyUntilItsTimeout(t *testing.T) {
	const helpers = 4
	model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
		switch {
		case req.Agent == "helper" && strings.Contains(req.first(), "part 0"):
			<-ctx.Done()
			return reply{}
		case req.Agent == "helper":
			return slowly(20*time.Millisecond, reply{Text: "part done"})(ctx, req)
		case req.turns() == 0:
			calls := []fakeCall{{ID: "part0", Name: agents.SpawnTool, Args: `{"task":"part 0","agent":"helper","timeout":1}`}}
			for i := 1; i < helpers; i++ {
				calls = append(calls, fakeCall{ID: fmt.Sprintf("part%d", i), Name: agents.SpawnTool, Args: spawnArgs(fmt.Sprintf("part %d", i), "helper")})
			}
			return reply{Calls: calls}
		}
		return reply{Text: "all parts done"}
	})
	// Each call is 110 tokens: beside the hung call no other fits under
	// the cap until it is given up.
	tr := startTree(t, model, treeOptions{subagents: config.Subagents{MaxConcurrent: helpers},
		config: func(c *config.Config) { c.Budgets.Tree.Tokens = 200 }})
	id := tr.send(t, "hung", "@lead do the parts")
	wi := tr.approveUntilFinished(t, id)
	require.Equal(t, bot.StatusDone, wi.Status, wi.Error)
	for _, k := range tr.children(t, id) {
		if k.Task == "part 0" {
			require.Equal(t, bot.RunTimedOut, k.Status)
			continue
		}
		require.Equal(t, bot.RunDone, k.Status, k.Error)
	}
}

// TestOneHelperAtATimeUnderItsCapIsNeverAsked: a helper's last call,
// counted with its job's end that its waiting parent writes, is counted
// once before the parent's next call, so a tree one token under its cap
// is never asked.
func TestOneHelperAtATimeUnderItsCapIsNeverAsked(t *testing.T) {
	model := newFakeModel(t, counting)
	tr := startTree(t, model, treeOptions{config: func(c *config.Config) {
		c.Budgets.Tree.Tokens = 441
		c.Budgets.PerDay.Requester = 1_000_000
	}})
	for i := range 3 {
		thread := fmt.Sprintf("one%d", i)
		id := tr.send(t, thread, "@lead count the files")
		wi := tr.finished(t, id, time.Minute)
		require.Equal(t, bot.StatusDone, wi.Status, wi.Error)
		require.Equal(t, "counted", tr.messages(t, thread, id)["reply"])
		require.EqualValues(t, 440, tr.spent(t, bot.TreeBudgetKey(id)).Tokens)
	}
	require.Empty(t, tr.approvals(t))
}
