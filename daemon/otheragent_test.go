package daemon_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/bot"
)

// TestAnotherAgentOfTheSameThreadCannotManageWhatItDoesNotOwn: records
// belong to the thread and the agent whose run started them; another agent
// in the same thread knowing the ids is refused, and lists nothing of them.
func TestAnotherAgentOfTheSameThreadCannotManageWhatItDoesNotOwn(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	ids := regexp.MustCompile(`(run|task)_\d+`)
	model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
		switch {
		case req.Agent == "helper" && strings.Contains(req.first(), "slow"):
			select {
			case <-release:
			case <-ctx.Done():
			}
			return reply{Text: "slow one done"}
		case req.Agent == "lead" && req.turns() == 0:
			return reply{Calls: []fakeCall{
				{ID: "bg", Name: agents.SpawnTool, Args: `{"task":"slow","agent":"helper","background":true}`},
				{ID: "task", Name: "bash", Args: `{"command":"sleep 300","background":true,"cleanup_on_run_end":false}`},
			}}
		case req.Agent == "lead":
			return reply{Text: "started " + ids.FindString(req.results()["bg"]) + " " + ids.FindString(req.results()["task"])}
		case req.Agent == "helper" && req.turns() == 0:
			found := ids.FindAllString(req.first(), -1)
			return reply{Calls: []fakeCall{
				{ID: "list", Name: agents.ListChildrenTool, Args: `{}`},
				{ID: "await", Name: agents.AwaitChildTool, Args: `{"id":"` + found[0] + `","timeout":0}`},
				{ID: "cancel", Name: agents.CancelChildTool, Args: `{"id":"` + found[0] + `"}`},
				{ID: "tasks", Name: "list_background_tasks", Args: `{}`},
				{ID: "read", Name: "read_background_output", Args: `{"id":"` + found[1] + `"}`},
				{ID: "stop", Name: "stop_background_task", Args: `{"id":"` + found[1] + `"}`},
			}}
		}
		res := req.results()
		return reply{Text: strings.Join([]string{res["list"], res["await"], res["cancel"], res["tasks"], res["read"], res["stop"]}, "\n")}
	})
	tr := startTree(t, model, treeOptions{})
	first := tr.send(t, "shared", "@lead start things")
	require.Equal(t, bot.StatusDone, tr.finished(t, first, time.Minute).Status)
	started := tr.messages(t, "shared", first)["reply"]
	found := ids.FindAllString(started, -1)
	require.Len(t, found, 2, started)

	other := tr.send(t, "shared", "@helper take over "+found[0]+" and "+found[1])
	require.Equal(t, bot.StatusDone, tr.finished(t, other, time.Minute).Status)
	lines := strings.Split(tr.messages(t, "shared", other)["reply"], "\n")
	require.Equal(t, []string{
		"no subagents",
		"refused: " + found[0] + " is not yours: it belongs to another thread or agent, and only the runs of its owner may manage it",
		"refused: " + found[0] + " is not yours: it belongs to another thread or agent, and only the runs of its owner may manage it",
		"no background tasks",
		"refused: " + found[1] + " is not yours: it belongs to another thread or agent, and only the runs of its owner may manage it",
		"refused: " + found[1] + " is not yours: it belongs to another thread or agent, and only the runs of its owner may manage it",
	}, lines)
	rec, err := tr.d.Store().GetRun(context.Background(), found[0])
	require.NoError(t, err)
	require.True(t, rec.Status.Open(), "the child runs on")
	task, err := tr.d.Store().GetTask(context.Background(), found[1])
	require.NoError(t, err)
	require.True(t, task.Status.Open(), "the task runs on")
}
