package agents

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	require.ErrorIs(t, b.await(ctx, c.key, landed), context.Canceled)
	require.Equal(t, 2, b.flights[c.key].calls)
	require.Zero(t, b.flights[c.key].waiting)

	gen := b.counted()
	first.leave()
	first.leave()
	require.Equal(t, 1, b.flights[c.key].calls, "a seat is left once")
	_, ok = b.board(c, spent, gen, &seat{b: b})
	require.False(t, ok, "a call counted since the counters were read has them read again")
	second.leave()
	require.Empty(t, b.flights)
	(*seat)(nil).leave()
}
