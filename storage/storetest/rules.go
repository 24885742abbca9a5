package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// storedRule is a stored rule called name, made by alice at t.
func storedRule(name string, priority int, t time.Time) bot.StoredRule {
	return bot.StoredRule{
		Rule: bot.Rule{Name: name, Priority: priority, Agent: "coder", Match: bot.Match{
			Kinds: []string{"github.issues.*"}, Labels: []string{"bug"}, Text: `(?i)\bcrash\b`,
		}},
		CreatedBy: "alice", CreatedAt: t,
	}
}

func testRules(t *testing.T, open Opener) {
	h := newHarness(t, open)
	s := h.s
	list, err := s.ListRules(h.ctx)
	require.NoError(t, err)
	require.Empty(t, list, "a new store has no rules")

	a, err := s.CreateRule(h.ctx, storedRule("bugs", 10, epoch()))
	require.NoError(t, err)
	require.Equal(t, "rule_1", a.ID)
	b, err := s.CreateRule(h.ctx, storedRule("docs", 5, at(time.Minute)))
	require.NoError(t, err)
	require.Equal(t, "rule_2", b.ID)

	_, err = s.CreateRule(h.ctx, storedRule("bugs", 1, at(2*time.Minute)))
	require.Equal(t, bot.ECONFLICT, bot.ErrorCode(err), "a second rule of a name: %v", err)
	require.EqualError(t, err, `duplicate rule name "bugs" (also stored:rule_1)`)

	// An update keeps who made the rule and when, whatever it says.
	up := b
	up.Priority, up.Agent, up.Match = 20, "reviewer", bot.Match{Paths: []string{"docs/**"}}
	up.UpdatedBy, up.UpdatedAt = "bob", at(3*time.Minute)
	up.CreatedBy, up.CreatedAt = "mallory", at(time.Hour)
	got, err := s.UpdateRule(h.ctx, up)
	require.NoError(t, err)
	require.Equal(t, "alice", got.CreatedBy)
	require.Equal(t, at(time.Minute), got.CreatedAt)
	require.Equal(t, "bob", got.UpdatedBy)

	rename := got
	rename.Name = "bugs"
	_, err = s.UpdateRule(h.ctx, rename)
	require.Equal(t, bot.ECONFLICT, bot.ErrorCode(err), "renamed to another rule's name: %v", err)
	_, err = s.UpdateRule(h.ctx, storedRuleWithID("rule_9", "x"))
	require.Equal(t, bot.ENOTFOUND, bot.ErrorCode(err), "%v", err)
	_, err = s.UpdateRule(h.ctx, storedRuleWithID("wi_1", "x"))
	require.Equal(t, bot.ENOTFOUND, bot.ErrorCode(err), "%v", err)

	// Records without what a store needs are refused, and nothing changes.
	for _, bad := range []bot.StoredRule{
		{Rule: bot.Rule{Agent: "coder"}, CreatedBy: "alice", CreatedAt: epoch()},
		{Rule: bot.Rule{Name: "x"}, CreatedBy: "alice", CreatedAt: epoch()},
		{Rule: bot.Rule{Name: "x", Agent: "coder"}},
	} {
		_, err := s.CreateRule(h.ctx, bad)
		require.Equal(t, bot.EINVALID, bot.ErrorCode(err), "%+v: %v", bad, err)
	}

	h.reopen()
	list, err = h.s.ListRules(h.ctx)
	require.NoError(t, err)
	require.Equal(t, []bot.StoredRule{a, got}, list, "in the order they were made, as written, after a reopen")

	gone, err := h.s.DeleteRule(h.ctx, "rule_1")
	require.NoError(t, err)
	require.Equal(t, a, gone)
	_, err = h.s.DeleteRule(h.ctx, "rule_1")
	require.Equal(t, bot.ENOTFOUND, bot.ErrorCode(err), "%v", err)

	// The name is free again, and ids are never given twice (a refused
	// write may use one up).
	c, err := h.s.CreateRule(h.ctx, storedRule("bugs", 0, at(4*time.Minute)))
	require.NoError(t, err)
	require.NotContains(t, []string{"rule_1", "rule_2"}, c.ID)
	list, err = h.s.ListRules(h.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"rule_2", c.ID}, []string{list[0].ID, list[1].ID}, "in the order they were made")
}

func storedRuleWithID(id, name string) bot.StoredRule {
	r := storedRule(name, 0, epoch())
	r.ID = id
	return r
}

// testRulesConcurrent creates rules of one name from many goroutines:
// exactly one is stored.
func testRulesConcurrent(t *testing.T, open Opener) {
	h := newHarness(t, open)
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		ok, taken int
	)
	for i := range 8 {
		wg.Go(func() {
			_, err := h.s.CreateRule(h.ctx, storedRule("once", i, epoch()))
			mu.Lock()
			defer mu.Unlock()
			switch bot.ErrorCode(err) {
			case "":
				ok++
			case bot.ECONFLICT:
				taken++
			default:
				t.Errorf("create: %v", err)
			}
		})
	}
	wg.Wait()
	require.Equal(t, 1, ok)
	require.Equal(t, 7, taken)
	list, err := h.s.ListRules(h.ctx)
	require.NoError(t, err)
	require.Len(t, list, 1, fmt.Sprint(list))
}
