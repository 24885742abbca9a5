package agents_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
)

// brokenBudgets is a budget store that cannot read or cannot write.
type brokenBudgets struct {
	bot.BudgetStore
	readErr, writeErr error
}

func (b brokenBudgets) Spent(ctx context.Context, keys []string) ([]bot.Spend, error) {
	if b.readErr != nil {
		return nil, b.readErr
	}
	return b.BudgetStore.Spent(ctx, keys)
}

func (b brokenBudgets) AddUsage(ctx context.Context, u bot.Usage) error {
	if b.writeErr != nil {
		return b.writeErr
	}
	return b.BudgetStore.AddUsage(ctx, u)
}

func budgetStore(t *testing.T) *bolt.Store {
	t.Helper()
	return bolttest.Open(t, t.TempDir())
}

func TestBudgetsAreCheckedBeforeEveryModelCallAndFailClosed(t *testing.T) {
	disk := errors.New("disk on fire")
	tests := []struct {
		name   string
		store  func(*bolt.Store) bot.BudgetStore
		limits agents.BudgetLimits
		calls  int
		reason string
	}{
		{"a cap nobody can raise stops the run before the call that would pass it twice",
			func(s *bolt.Store) bot.BudgetStore { return s }, agents.BudgetLimits{AgentTokens: 20}, 2,
			"stopped: budget reached (20 tokens), and no one can approve more here"},
		{"the requester's day", func(s *bolt.Store) bot.BudgetStore { return s }, agents.BudgetLimits{RequesterTokens: 30}, 2,
			"stopped: budget reached (30 tokens), and no one can approve more here"},
		{"unreadable counters stop it before any call", func(s *bolt.Store) bot.BudgetStore { return brokenBudgets{BudgetStore: s, readErr: disk} },
			agents.BudgetLimits{TreeTokens: 1000}, 0, "stopped: the budget cannot be read, so no model call is made: disk on fire"},
		{"a call that cannot be counted is the last", func(s *bolt.Store) bot.BudgetStore { return brokenBudgets{BudgetStore: s, writeErr: disk} },
			agents.BudgetLimits{}, 1, "stopped: a model call's usage cannot be recorded, so no more calls are made: disk on fire"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := newBrain(func(context.Context, string, llm.Request) (llm.Response, error) {
				return call("list_directory", `{"path":"."}`), nil
			})
			store := budgetStore(t)
			f := newFixture(t, model, nil, func(o *agents.RuntimeOptions) {
				o.Budgets = agents.NewBudgets(tt.store(store), nil)
				o.BudgetLimits = tt.limits
			})
			req := request("coder", "list it forever")
			req.WorkItems[0].Requester = bot.Requester{Source: bot.SourceLocal, ID: "alice"}
			res, err := f.rt.Run(context.Background(), req, nil)
			require.NoError(t, err)
			require.Equal(t, bot.ResultError, res.Status)
			require.Equal(t, tt.reason, res.Error)
			require.Len(t, model.requests("coder"), tt.calls)
		})
	}
}

func TestEveryModelCallIsCountedUnderItsTree(t *testing.T) {
	model := newBrain(func(_ context.Context, _ string, req llm.Request) (llm.Response, error) {
		if len(req.Messages) > 1 {
			return answer("done"), nil
		}
		return call("list_directory", `{"path":"."}`), nil
	})
	store := budgetStore(t)
	f := newFixture(t, model, nil, func(o *agents.RuntimeOptions) { o.Budgets = agents.NewBudgets(store, nil) })
	req := request("coder", "list it")
	req.WorkItems[0].Requester = bot.Requester{Source: bot.SourceLocal, ID: "alice"}
	res, err := f.rt.Run(context.Background(), req, nil)
	require.NoError(t, err)
	require.Equal(t, bot.ResultSuccess, res.Status, res.Error)
	spent, err := store.Spent(context.Background(), []string{bot.TreeBudgetKey("wi_1")})
	require.NoError(t, err)
	require.EqualValues(t, 30, spent[0].Tokens)
	require.EqualValues(t, 2, spent[0].Calls)
}

// decider approves every other request for more budget and denies the
// rest.
type decider struct{ n atomic.Int32 }

func (d *decider) Approve(context.Context, tools.Call, string) (bool, error) {
	return d.n.Add(1)%2 == 1, nil
}

// TestManyCappedTreesLeaveNothingBehindInTheBudgets: fan-outs that wait
// for room, ask, are approved or denied, leave no entry per tree once they
// end, so a daemon that runs for months keeps none.
func TestManyCappedTreesLeaveNothingBehindInTheBudgets(t *testing.T) {
	model := newBrain(func(_ context.Context, _ string, req llm.Request) (llm.Response, error) {
		switch {
		case strings.Contains(req.Messages[0].Content, "part "):
			return answer("helped"), nil
		case strings.Contains(lastMessage(req).Content, "split it"):
			return fanOut(4), nil
		}
		return answer("done"), nil
	})
	var budgets *agents.Budgets
	f, tr := durableTree(t, model, func(o *agents.RuntimeOptions) {
		o.BudgetLimits = agents.BudgetLimits{TreeTokens: 40, AgentTokens: 1000}
		o.Approver = &decider{}
		budgets = o.Budgets
	})
	tr.start(t, f)
	ends := map[bot.WorkStatus]int{}
	for range 10 {
		wi := tr.send(t, f, "coder", "split it")
		if wi.Status == bot.StatusFailed {
			require.Contains(t, wi.Error, "and more was denied")
		}
		ends[wi.Status]++
	}
	require.Positive(t, ends[bot.StatusDone], "no tree was approved")
	require.Positive(t, ends[bot.StatusFailed], "no tree was denied")
	flights, asking := budgets.Held()
	require.Zero(t, flights, "calls under way or waits are kept after their trees ended")
	require.Zero(t, asking, "keys asked for are kept after their trees ended")
}
