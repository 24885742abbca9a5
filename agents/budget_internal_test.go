package agents

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/bot"
)

// TestARefusalOfMoreBudgetIsKeptForADay: a refusal answers the other runs
// of the tree that asked, and a daemon that runs for months does not keep
// every one it was given.
func TestARefusalOfMoreBudgetIsKeptForADay(t *testing.T) {
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	b := NewBudgets(nil, nil)
	b.now = func() time.Time { return now }
	for _, mark := range []string{"agent:coder@tokens:1/wi_1", "agent:coder@tokens:1/wi_2"} {
		require.EqualError(t, b.refuse(mark, "budget reached, and more was denied"), "budget reached, and more was denied")
	}
	now = now.Add(deniedFor - time.Minute)
	_ = b.refuse("agent:coder@tokens:1/wi_3", "denied")
	require.Len(t, b.denied, 3, "a refusal of less than a day ago still answers its tree")
	now = now.Add(2 * time.Minute)
	_ = b.refuse("agent:coder@tokens:1/wi_4", "denied")
	require.Len(t, b.denied, 2)
	require.Contains(t, b.denied, "agent:coder@tokens:1/wi_3")
	require.Contains(t, b.denied, "agent:coder@tokens:1/wi_4")
}

// TestACallStartsBesideOthersOnlyWhereTheyLeaveRoomUnderTheCap: each call
// under way is expected to spend what the key's calls spent on average.
func TestACallStartsBesideOthersOnlyWhereTheyLeaveRoomUnderTheCap(t *testing.T) {
	tokens := budgetCap{key: "tree/wi_1", tokens: 300}
	cost := budgetCap{key: "tree/wi_1", cost: 0.30, price: 1000 / 1e6}
	free := budgetCap{key: "tree/wi_1", cost: 0.30}
	for _, tc := range []struct {
		name  string
		c     budgetCap
		spent bot.Spend
		under int
		room  bool
	}{
		{"nothing under way", tokens, bot.Spend{Tokens: 290, Calls: 1}, 0, true},
		{"no call counted yet: the first goes alone", tokens, bot.Spend{}, 0, true},
		{"no call counted yet: the others wait for it", tokens, bot.Spend{}, 1, false},
		{"one under way leaves room", tokens, bot.Spend{Tokens: 110, Calls: 1}, 1, true},
		{"two under way could reach the cap", tokens, bot.Spend{Tokens: 110, Calls: 1}, 2, false},
		{"an approval makes room", tokens, bot.Spend{Tokens: 330, Calls: 3, GrantedTokens: 300}, 2, true},
		{"calls of 50 on average: one more", tokens, bot.Spend{Tokens: 200, Calls: 4}, 1, true},
		{"calls of 50 on average: two more could reach it", tokens, bot.Spend{Tokens: 200, Calls: 4}, 2, false},
		{"cost: one under way leaves room", cost, bot.Spend{Cost: 0.11, Calls: 1}, 1, true},
		{"cost: two under way could reach the cap", cost, bot.Spend{Cost: 0.11, Calls: 1}, 2, false},
		{"cost: after a call without prices, two priced ones leave room", cost, bot.Spend{Tokens: 110, Calls: 1}, 2, true},
		{"cost: three priced calls of 110 tokens could reach it", cost, bot.Spend{Tokens: 110, Calls: 1}, 3, false},
		{"cost: a call without prices costs nothing", free, bot.Spend{Tokens: 110, Cost: 0.11, Calls: 1}, 5, true},
		{"cost: no call counted yet: a priced one waits for the first", cost, bot.Spend{}, 1, false},
		{"cost: no call counted yet: one without prices goes beside the first", free, bot.Spend{}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.room, tc.c.room(tc.spent, tc.under))
		})
	}
}

// TestARunWaitingForRoomLeavesNothingBehind: seats and waits are counted
// per key only while they last, so a daemon that runs for months keeps no
// entry per tree.
func TestARunWaitingForRoomLeavesNothingBehind(t *testing.T) {
	b := NewBudgets(nil, nil)
	c := budgetCap{key: "tree/wi_1", tokens: 300}
	spent := bot.Spend{Tokens: 110, Calls: 1}
	first, second := &seat{b: b}, &seat{b: b}
	for _, st := range []*seat{first, second} {
		_, ok := b.board(c, spent, b.counted(), st)
		require.True(t, ok)
	}
	landed, ok := b.board(c, spent, b.counted(), &seat{b: b})
	require.False(t, ok, "a third call could reach the cap")
	require.NotNil(t, landed)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, b.await(ctx, landed), context.Canceled)
	require.Equal(t, 2, b.flights[c.key].calls)

	gen := b.counted()
	first.leave()
	first.leave()
	require.Equal(t, 1, b.flights[c.key].calls, "a seat is left once")
	select {
	case <-landed:
	default:
		t.Fatal("the runs waiting were not woken")
	}
	_, ok = b.board(c, spent, gen, &seat{b: b})
	require.False(t, ok, "a call counted since the counters were read has them read again")
	second.leave()
	require.Empty(t, b.flights)
	(*seat)(nil).leave()
}

// summedSpend is a budget store that keeps one sum of every call's usage.
type summedSpend struct {
	bot.BudgetStore
	mu    sync.Mutex
	spent bot.Spend
}

func (p *summedSpend) Spent(_ context.Context, keys []string) ([]bot.Spend, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]bot.Spend, len(keys))
	for i, k := range keys {
		out[i] = p.spent
		out[i].Key = k
	}
	return out, nil
}

func (p *summedSpend) AddUsage(_ context.Context, u bot.Usage) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spent.Tokens += int64(u.Tokens)
	p.spent.Calls++
	return nil
}

// TestAHelpersLastCallUnderACapIsCountedBeforeItsSeatIsLeft: a subagent's
// last call is counted with its job's end, a moment after its answer;
// under a cap it is counted at once, so a run that looks for room
// meanwhile (another helper of the fan-out starting late) neither sees it
// under way nor misses what it spent.
func TestAHelpersLastCallUnderACapIsCountedBeforeItsSeatIsLeft(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limits  BudgetLimits
		counted int64
	}{
		{"under a cap", BudgetLimits{TreeTokens: 300}, 110},
		{"under a cost cap", BudgetLimits{TreeCost: 1, Prices: map[string]ModelPrices{DefaultModel: {Input: 1, Output: 1}}}, 110},
		{"under no cap, with its job's end", BudgetLimits{}, 0},
		{"under a cap of wall time only, with its job's end", BudgetLimits{TreeWallTime: time.Hour}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &summedSpend{}
			b := NewBudgets(store, nil)
			rt := &Runtime{opts: RuntimeOptions{Budgets: b, BudgetLimits: tc.limits}}
			rn := &run{rootWorkItem: "wi_1", def: Definition{Name: "helper"}, child: &bot.ChildRun{}, chain: []string{"helper"}}
			ctx := t.Context()
			st, err := b.admit(ctx, rt, rn)
			require.NoError(t, err)
			require.NoError(t, rt.spent(ctx, rn, llm.Usage{InputTokens: 100, OutputTokens: 10}, true, st))
			st.leave()
			require.Equal(t, tc.counted, store.spent.Tokens)
			if tc.counted == 0 {
				require.NotNil(t, rn.lastUsage, "counted with its job's end")
				require.EqualValues(t, 110, rn.lastUsage.Tokens)
			} else {
				require.Nil(t, rn.lastUsage, "counted twice")
			}
			require.Empty(t, b.flights)
		})
	}
}
