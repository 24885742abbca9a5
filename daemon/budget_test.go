package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
)

// counting is a lead that spawns a helper, lists its workspace, then
// answers: three model calls of its own and one of the helper, 110 tokens
// each.
func counting(ctx context.Context, req chatRequest) reply {
	switch {
	case req.Agent == "helper":
		return reply{Text: "3 files"}
	case req.turns() == 0:
		return reply{Calls: []fakeCall{{ID: "count", Name: agents.SpawnTool, Args: spawnArgs("count the files", "helper")}}}
	case req.turns() == 1:
		return reply{Calls: []fakeCall{{ID: "ls", Name: "list_directory", Args: `{"path":"."}`}}}
	}
	return reply{Text: "counted"}
}

// pendingBudget waits for the thread's tree to ask for more budget and
// returns the approval.
func (tr *tree) pendingBudget(t *testing.T) bot.Approval {
	t.Helper()
	var pending []bot.Approval
	require.Eventually(t, func() bool {
		code, body := tr.do(t, "GET", "/api/v1/approvals", "")
		require.Equal(t, 200, code, string(body))
		pending = nil
		require.NoError(t, json.Unmarshal(body, &pending))
		return len(pending) == 1
	}, 10*time.Second, 10*time.Millisecond, "no budget approval was asked for")
	return pending[0]
}

func TestATreeAtItsBudgetPausesAsksAndResumesOrStops(t *testing.T) {
	model := newFakeModel(t, counting)
	tr := startTree(t, model, treeOptions{config: func(c *config.Config) { c.Budgets.Tree.Tokens = 300 }})

	tests := []struct {
		thread, decision string
		status           bot.WorkStatus
		reply            string
		leadCalls        int
	}{
		{"approved", "approve", bot.StatusDone, "counted", 3},
		{"denied", "deny", bot.StatusFailed, "stopped: budget reached (300 tokens), and more was denied", 2},
	}
	for _, tt := range tests {
		t.Run(tt.decision, func(t *testing.T) {
			before := len(model.seen("lead"))
			id := tr.send(t, tt.thread, "@lead count the files")
			ap := tr.pendingBudget(t)
			require.Equal(t, agents.BudgetTool, ap.Tool)
			require.Equal(t, "budget reached (300 tokens): approve 300 more?", ap.Reason)
			require.Equal(t, "local:"+tt.thread, ap.SessionKey)
			// The tree stopped before its fourth model call: 330 tokens
			// spent of 300, and the lead waits.
			require.Equal(t, 2, len(model.seen("lead"))-before)
			spent, err := tr.d.Store().Spent(context.Background(), []string{bot.TreeBudgetKey(id)})
			require.NoError(t, err)
			require.EqualValues(t, 330, spent[0].Tokens, "every call is counted, the helper's too")
			wi, err := tr.d.Store().GetWorkItem(context.Background(), id)
			require.NoError(t, err)
			require.False(t, wi.Status.Finished())
			// The thread is asked.
			require.Eventually(t, func() bool {
				_, body := tr.do(t, "GET", "/api/v1/threads/"+tt.thread+"/messages", "")
				return strings.Contains(string(body), "🔐 @lead: budget reached (300 tokens): approve 300 more?\\nApprove with `switchyard approvals approve "+ap.ID)
			}, 10*time.Second, 10*time.Millisecond, "the thread is not asked")

			code, body := tr.do(t, "POST", "/api/v1/approvals/"+ap.ID+"/"+tt.decision, "")
			require.Equal(t, 200, code, string(body))
			require.Equal(t, tt.status, tr.finished(t, id, time.Minute).Status)
			require.Equal(t, tt.leadCalls, len(model.seen("lead"))-before)
			msgs := tr.messages(t, tt.thread, id)
			require.Contains(t, msgs["reply"], tt.reply)
			kids := tr.children(t, id)
			require.Len(t, kids, 1)
			require.Equal(t, bot.RunDone, kids[0].Status, "what was done stays done")
			spent, err = tr.d.Store().Spent(context.Background(), []string{bot.TreeBudgetKey(id)})
			require.NoError(t, err)
			if tt.decision == "approve" {
				require.Contains(t, msgs["status"], "\nspent 440 tokens with its subagents; nothing left open")
				require.EqualValues(t, 440, spent[0].Tokens)
				require.EqualValues(t, 300, spent[0].GrantedTokens)
			} else {
				require.EqualValues(t, 330, spent[0].Tokens)
				require.Zero(t, spent[0].GrantedTokens)
			}
		})
	}
}

func TestATreeWaitingForMoreBudgetHoldsNoWorker(t *testing.T) {
	model := newFakeModel(t, counting)
	tr := startTree(t, model, treeOptions{workers: 1, config: func(c *config.Config) { c.Budgets.Tree.Tokens = 300 }})
	id := tr.send(t, "paused", "@lead count the files")
	ap := tr.pendingBudget(t)

	// The one worker is free for other work while the tree waits.
	other := tr.send(t, "other", "@helper count them")
	require.Equal(t, bot.StatusDone, tr.finished(t, other, time.Minute).Status)
	require.Equal(t, "3 files", tr.messages(t, "other", other)["reply"])

	code, body := tr.do(t, "POST", "/api/v1/approvals/"+ap.ID+"/approve", "")
	require.Equal(t, 200, code, string(body))
	require.Equal(t, bot.StatusDone, tr.finished(t, id, time.Minute).Status)
	require.Equal(t, "counted", tr.messages(t, "paused", id)["reply"])
}

func TestATreeAtItsCostCapAsksForMoreInTheCurrency(t *testing.T) {
	model := newFakeModel(t, counting)
	tr := startTree(t, model, treeOptions{config: func(c *config.Config) {
		m := c.Models["default"]
		m.Prices = &config.Prices{Input: 1000, Output: 1000} // 0.11 a call: 100 tokens in, 10 out
		c.Models["default"] = m
		c.Budgets.Tree.Cost = 0.30
		c.Budgets.Currency = "EUR"
	}})
	id := tr.send(t, "cost", "@lead count the files")
	ap := tr.pendingBudget(t)
	require.Equal(t, "budget reached (0.30 EUR): approve 0.30 EUR more?", ap.Reason)
	spent, err := tr.d.Store().Spent(context.Background(), []string{bot.TreeBudgetKey(id)})
	require.NoError(t, err)
	require.InDelta(t, 0.33, spent[0].Cost, 1e-9, "three calls, the helper's one of them")

	code, body := tr.do(t, "POST", "/api/v1/approvals/"+ap.ID+"/approve", "")
	require.Equal(t, 200, code, string(body))
	require.Equal(t, bot.StatusDone, tr.finished(t, id, time.Minute).Status)
	spent, err = tr.d.Store().Spent(context.Background(), []string{bot.TreeBudgetKey(id)})
	require.NoError(t, err)
	require.InDelta(t, 0.44, spent[0].Cost, 1e-9)
	require.InDelta(t, 0.30, spent[0].GrantedCost, 1e-9)
}

// TestAFanOutPassesItsBudgetByOneCallAtMost spawns six helpers at once
// under a cap that three calls reach: the calls already under way when the
// cap could be reached are waited for, so the tree stops within one call of
// it instead of one call of every helper past it.
func TestAFanOutPassesItsBudgetByOneCallAtMost(t *testing.T) {
	const helpers = 6
	model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
		switch {
		case req.Agent == "helper":
			// Long enough that every helper's call would be under way at once.
			select {
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
			}
			return reply{Text: "part done"}
		case req.turns() == 0:
			var calls []fakeCall
			for i := range helpers {
				calls = append(calls, fakeCall{ID: fmt.Sprintf("part%d", i), Name: agents.SpawnTool, Args: spawnArgs(fmt.Sprintf("part %d", i), "helper")})
			}
			return reply{Calls: calls}
		}
		return reply{Text: "all parts done"}
	})
	tr := startTree(t, model, treeOptions{subagents: config.Subagents{MaxConcurrent: helpers},
		config: func(c *config.Config) { c.Budgets.Tree.Tokens = 300 }})
	id := tr.send(t, "fan", "@lead do the parts")

	ap := tr.pendingBudget(t)
	require.Equal(t, "budget reached (300 tokens): approve 300 more?", ap.Reason)
	// 110 tokens a call: the lead's and two helpers' reach 330, one call
	// past the cap; the other helpers wait for the decision.
	require.Equal(t, 2, len(model.seen("helper")), "helpers called the model past the cap")
	require.Eventually(t, func() bool {
		spent, err := tr.d.Store().Spent(context.Background(), []string{bot.TreeBudgetKey(id)})
		require.NoError(t, err)
		return spent[0].Tokens == 330
	}, 10*time.Second, 10*time.Millisecond, "what the helpers spent is counted")

	// Approved as often as asked, the tree finishes, every helper done once.
	for deadline := time.Now().Add(time.Minute); ; {
		wi, err := tr.d.Store().GetWorkItem(context.Background(), id)
		require.NoError(t, err)
		if wi.Status.Finished() {
			require.Equal(t, bot.StatusDone, wi.Status, wi.Error)
			break
		}
		require.True(t, time.Now().Before(deadline), "the tree did not finish")
		code, body := tr.do(t, "GET", "/api/v1/approvals", "")
		require.Equal(t, 200, code, string(body))
		var pending []bot.Approval
		require.NoError(t, json.Unmarshal(body, &pending))
		for _, p := range pending {
			code, body := tr.do(t, "POST", "/api/v1/approvals/"+p.ID+"/approve", "")
			require.Equal(t, 200, code, string(body))
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, helpers, len(model.seen("helper")), "each helper called the model once")
	kids := tr.children(t, id)
	require.Len(t, kids, helpers)
	for _, k := range kids {
		require.Equal(t, bot.RunDone, k.Status)
	}
}
