package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
)

// TestATreeTwoDeepWithMaxDepthTwo: with max_depth 2 a child may spawn and
// its child may not; the ledger nests the three levels by their links, the
// grandchild is owned by the thread and agent that started the tree, and
// one worker still finishes it.
func TestATreeTwoDeepWithMaxDepthTwo(t *testing.T) {
	for _, workers := range []int{1, 4} {
		t.Run(fmt.Sprint(workers, " workers"), func(t *testing.T) {
			model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
				level := strings.Count(req.first(), "deeper")
				switch {
				case req.turns() == 0:
					return reply{Calls: []fakeCall{{ID: "spawn", Name: agents.SpawnTool, Args: spawnArgs("go deeper "+strings.Repeat("deeper ", level), "helper")}}}
				}
				return reply{Text: fmt.Sprintf("level %d heard: %s", level, req.results()["spawn"])}
			})
			tr := startTree(t, model, treeOptions{workers: workers, subagents: config.Subagents{MaxDepth: 2}})
			thread := fmt.Sprint("deep", workers)
			id := tr.send(t, thread, "@lead dig")
			wi := tr.finished(t, id, time.Minute)
			require.Equal(t, bot.StatusDone, wi.Status, wi.Error)

			kids := tr.children(t, id)
			require.Len(t, kids, 1)
			grand := tr.children(t, kids[0].ChildWorkItemID)
			require.Len(t, grand, 1)
			require.Empty(t, tr.children(t, grand[0].ChildWorkItemID))
			require.Equal(t, 2, grand[0].Depth)
			require.Equal(t, bot.RunDone, grand[0].Status)
			require.Equal(t, kids[0].Owner, grand[0].Owner, "the grandchild is owned as its parent is")
			require.Equal(t, "lead", grand[0].Owner.AgentID)
			require.Equal(t, id, grand[0].RootWorkItemID)
			require.Contains(t, grand[0].Result, "refused: spawn refused: this run is a subagent 2 deep and max_depth is 2")

			code, body := tr.do(t, "GET", "/api/v1/runs/tree/"+id, "")
			require.Equal(t, 200, code, string(body))
			var root admin.RunNode
			require.NoError(t, json.Unmarshal(body, &root))
			require.Len(t, root.Children, 1)
			require.Equal(t, kids[0].ID, root.Children[0].ID)
			require.Len(t, root.Children[0].Children, 1)
			require.Equal(t, grand[0].ID, root.Children[0].Children[0].ID)

			spent, err := tr.d.Store().Spent(context.Background(), []string{bot.TreeBudgetKey(id)})
			require.NoError(t, err)
			require.EqualValues(t, 6*110, spent[0].Tokens, "two calls at each of the three levels, under the tree")
		})
	}
}
