package agents

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
