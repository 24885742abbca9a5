package agents

import (
	"context"
	"sync"
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
	var waits []string
	first, second := &seat{b: b}, &seat{b: b}
	for _, st := range []*seat{first, second} {
		_, ok := b.board(c, spent, b.counted(), st, &waits)
		require.True(t, ok)
	}
	landed, ok := b.board(c, spent, b.counted(), &seat{b: b}, &waits)
	require.False(t, ok, "a third call could reach the cap")
	require.NotNil(t, landed)
	_, ok = b.board(c, spent, b.counted(), &seat{b: b}, &waits)
	require.False(t, ok)
	require.Equal(t, 1, b.flights[c.key].waiting, "a run waits on a key once")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, b.await(ctx, landed), context.Canceled)
	b.stopWaiting(waits)
	require.Equal(t, 2, b.flights[c.key].calls)
	require.Zero(t, b.flights[c.key].waiting)

	gen := b.counted()
	first.leave()
	first.leave()
	require.Equal(t, 1, b.flights[c.key].calls, "a seat is left once")
	_, ok = b.board(c, spent, gen, &seat{b: b}, &waits)
	require.False(t, ok, "a call counted since the counters were read has them read again")
	require.True(t, second.leaveAlone(), "nothing else under way")
	second.leave()
	require.Empty(t, b.flights)
	(*seat)(nil).leave()
}

// pausedSpend is a budget store whose reads report spent, and wait while
// paused.
type pausedSpend struct {
	bot.BudgetStore
	spent   bot.Spend
	mu      sync.Mutex
	paused  chan struct{} // reads wait for it to be closed, when not nil
	reading chan struct{} // told of each read that waits
}

func (p *pausedSpend) Spent(ctx context.Context, keys []string) ([]bot.Spend, error) {
	p.mu.Lock()
	paused := p.paused
	p.mu.Unlock()
	if paused != nil {
		p.reading <- struct{}{}
		select {
		case <-paused:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	out := make([]bot.Spend, len(keys))
	for i, k := range keys {
		out[i] = p.spent
		out[i].Key = k
	}
	return out, nil
}

// TestARunWokenToLookForRoomAgainStillWaits: a run woken by a call's end
// reads the counters again; a helper's last call ending meanwhile is
// counted at once, as when the run waited, or the run would find room
// without what that call spent and pass the cap by one call more.
func TestARunWokenToLookForRoomAgainStillWaits(t *testing.T) {
	store := &pausedSpend{spent: bot.Spend{Tokens: 110, Calls: 1}, reading: make(chan struct{})}
	b := NewBudgets(store, nil)
	rt := &Runtime{opts: RuntimeOptions{BudgetLimits: BudgetLimits{TreeTokens: 300}}}
	rn := &run{rootWorkItem: "wi_1", def: Definition{Name: "helper"}}
	key := bot.TreeBudgetKey("wi_1")
	ctx := t.Context()
	first, err := b.admit(ctx, rt, rn)
	require.NoError(t, err)
	second, err := b.admit(ctx, rt, rn)
	require.NoError(t, err)

	// A third finds no room beside them (330 of 300) and waits.
	done := make(chan error, 1)
	go func() {
		st, err := b.admit(ctx, rt, rn)
		st.leave()
		done <- err
	}()
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.flights[key].waiting == 1
	}, 10*time.Second, time.Millisecond)

	// The first call's end wakes it, and it reads the counters again.
	paused := make(chan struct{})
	store.mu.Lock()
	store.paused = paused
	store.mu.Unlock()
	first.leave()
	<-store.reading

	require.False(t, second.leaveAlone(), "a run looking for room again waits no less")
	second.leave()
	store.mu.Lock()
	store.paused = nil
	store.mu.Unlock()
	close(paused)
	require.NoError(t, <-done)
	require.Empty(t, b.flights)
}
