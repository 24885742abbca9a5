package daemon_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
)

// TestADailyCapAsksEveryRequestThatReachesIt: a request that reaches a
// day's cap asks for more; one whose ask was denied or expired ends with
// what it did, and the next request of the day asks again rather than
// stopping on an answer given to another.
func TestADailyCapAsksEveryRequestThatReachesIt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cap      func(c *config.Config)
		key      string // the day's key, after the date
		decision string // what becomes of the first request's ask
		reply    string
		asked    string
		spent    int64 // the key's tokens after both requests
	}{
		{name: "agent, expired", cap: func(c *config.Config) { c.Budgets.PerDay.Agent = 200 },
			key:      "/" + bot.BudgetAgent + "/lead",
			decision: "expire", reply: "stopped: budget reached (200 tokens), and more was not approved",
			asked: "budget reached (200 tokens): approve 200 more?", spent: 220 + 110},
		{name: "requester, denied", cap: func(c *config.Config) { c.Budgets.PerDay.Requester = 300 },
			key:      "/" + bot.BudgetRequester + "/local:",
			decision: "deny", reply: "stopped: budget reached (300 tokens), and more was denied",
			asked: "budget reached (300 tokens): approve 300 more?", spent: 330 + 110},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
				if req.Agent == "lead" && strings.Contains(req.first(), "just say hello") {
					return reply{Text: "hello"}
				}
				return counting(ctx, req)
			})
			tr := startTree(t, model, treeOptions{config: func(c *config.Config) {
				tc.cap(c)
				c.ApprovalTimeout = 3 * time.Second
			}})
			first := tr.send(t, "first", "@lead count the files")
			ap := tr.pendingBudget(t)
			require.Equal(t, tc.asked, ap.Reason)
			if tc.decision != "expire" {
				code, body := tr.do(t, "POST", "/api/v1/approvals/"+ap.ID+"/"+tc.decision, "")
				require.Equal(t, 200, code, string(body))
			}
			require.Equal(t, bot.StatusFailed, tr.finished(t, first, time.Minute).Status)
			require.Contains(t, tr.messages(t, "first", first)["reply"], tc.reply)

			// The next request of the day is over the cap already: it asks
			// before its first call, and goes on once approved.
			second := tr.send(t, "second", "@lead just say hello")
			ap2 := tr.pendingBudget(t)
			require.NotEqual(t, ap.ID, ap2.ID)
			require.Equal(t, tc.asked, ap2.Reason)
			code, body := tr.do(t, "POST", "/api/v1/approvals/"+ap2.ID+"/approve", "")
			require.Equal(t, 200, code, string(body))
			wi2 := tr.finished(t, second, time.Minute)
			require.Equal(t, bot.StatusDone, wi2.Status, wi2.Error)
			require.Equal(t, "hello", tr.messages(t, "second", second)["reply"])
			// The ask names the day's key it is for.
			var input struct{ Budget string }
			require.NoError(t, json.Unmarshal([]byte(ap2.Arguments), &input), ap2.Arguments)
			require.Contains(t, input.Budget, tc.key)
			require.True(t, strings.HasPrefix(input.Budget, "day/"), input.Budget)
			spent, err := tr.d.Store().Spent(context.Background(), []string{input.Budget})
			require.NoError(t, err)
			require.Positive(t, spent[0].GrantedTokens)
			require.Equal(t, tc.spent, spent[0].Tokens)
		})
	}
}

// TestMoreWallTimeCountsFromTheApproval: a tree at its wall time asks for
// more; the approval gives that much more from when it is given, however
// long the person took, so the tree goes on without asking again at once.
func TestMoreWallTimeCountsFromTheApproval(t *testing.T) {
	model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
		switch req.turns() {
		case 0:
			return reply{Calls: []fakeCall{{ID: "ls", Name: "list_directory", Args: `{"path":"."}`}}}
		case 1:
			sleep(1200 * time.Millisecond)(ctx)
			return reply{Calls: []fakeCall{{ID: "ls2", Name: "list_directory", Args: `{"path":"."}`}}}
		}
		return reply{Text: "listed twice"}
	})
	tr := startTree(t, model, treeOptions{config: func(c *config.Config) { c.Budgets.Tree.WallTime = time.Second }})
	id := tr.send(t, "wall", "@lead list it twice")
	ap := tr.pendingBudget(t)
	require.Equal(t, "budget reached (1s of wall time): approve 1s more?", ap.Reason)
	// The person takes longer to answer than the tree's whole budget.
	time.Sleep(3 * time.Second)
	code, body := tr.do(t, "POST", "/api/v1/approvals/"+ap.ID+"/approve", "")
	require.Equal(t, 200, code, string(body))
	wi := tr.finished(t, id, time.Minute)
	require.Equal(t, bot.StatusDone, wi.Status, wi.Error)
	require.Equal(t, "listed twice", tr.messages(t, "wall", id)["reply"])
	code, body = tr.do(t, "GET", "/api/v1/approvals", "")
	require.Equal(t, 200, code, string(body))
	require.JSONEq(t, "[]", string(body), "asked once")
}
