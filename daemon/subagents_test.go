package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
)

var partOf = regexp.MustCompile(`part (\d+)`)

// splitting is the script of a lead that splits its work into parts, one
// subagent (helper) each, all spawned in one turn, and spawns again the
// parts that were refused until every part is done; helpers answer "part N
// done" after wait.
func splitting(parts int, helper func(ctx context.Context, req chatRequest) reply) func(ctx context.Context, req chatRequest) reply {
	return func(ctx context.Context, req chatRequest) reply {
		switch req.Agent {
		case "helper":
			return helper(ctx, req)
		case "lead":
			done := map[string]bool{}
			for _, res := range req.results() {
				if m := partOf.FindStringSubmatch(res); m != nil && strings.Contains(res, `"status":"done"`) {
					done[m[1]] = true
				}
			}
			var calls []fakeCall
			for i := 1; i <= parts; i++ {
				if n := fmt.Sprint(i); !done[n] {
					calls = append(calls, fakeCall{ID: fmt.Sprintf("spawn_%d_t%d", i, req.turns()), Name: agents.SpawnTool, Args: spawnArgs("part "+n, "helper")})
				}
			}
			if len(calls) == 0 || req.turns() > 20 {
				return reply{Text: fmt.Sprintf("%d parts done", len(done))}
			}
			return reply{Calls: calls}
		}
		return reply{Text: "nothing to do"}
	}
}

// answerPart answers a helper's part after the wait.
func answerPart(wait func(ctx context.Context)) func(ctx context.Context, req chatRequest) reply {
	return func(ctx context.Context, req chatRequest) reply {
		wait(ctx)
		return reply{Text: partOf.FindString(req.first()) + " done"}
	}
}

func sleep(d time.Duration) func(ctx context.Context) {
	return func(ctx context.Context) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
}

func TestSubagentsSpawnedInOneTurnRunInParallelAndTheNinthIsRefused(t *testing.T) {
	var model *fakeModel
	model = newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
		if req.Agent == "lead" && req.turns() == 0 {
			// Nine spawns in one turn: the ninth is beyond max_concurrent.
			var calls []fakeCall
			for i := 1; i <= 9; i++ {
				calls = append(calls, fakeCall{ID: fmt.Sprintf("spawn_%d", i), Name: agents.SpawnTool, Args: spawnArgs(fmt.Sprintf("part %d", i), "helper")})
			}
			return reply{Calls: calls}
		}
		return splitting(9, answerPart(func(ctx context.Context) {
			// Each helper's call takes 200 ms, and holds until all eight
			// are in flight together (or a minute passes: then the
			// recorded overlap shows they were not).
			wait, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			model.awaitInFlight(wait, "helper", 8)
			sleep(200 * time.Millisecond)(ctx)
		}))(ctx, req)
	})
	tr := startTree(t, model, treeOptions{workers: 8, subagents: config.Subagents{MaxConcurrent: 8}})
	id := tr.send(t, "split", "@lead do the nine parts")
	wi := tr.finished(t, id, time.Minute)
	require.Equal(t, bot.StatusDone, wi.Status, wi.Error)
	require.Equal(t, 8, model.maxInFlight("helper"), "the eight children's calls overlapped")

	lead := model.seen("lead")
	results := lead[1].results()
	require.Len(t, results, 9)
	var refused []string
	for i := 1; i <= 9; i++ {
		res := results[fmt.Sprintf("spawn_%d", i)]
		if strings.HasPrefix(res, "refused") {
			refused = append(refused, res)
			continue
		}
		require.Contains(t, res, fmt.Sprintf(`"content":"part %d done"`, i))
	}
	require.Equal(t, []string{"refused: spawn refused: 8 subagents of this run are already open and max_concurrent is 8; " +
		"await_child or cancel_child one of them before spawning another"}, refused, "the one spawn beyond the limit")

	kids := tr.children(t, id)
	require.Len(t, kids, 9, "eight in the first turn, the refused part in the next")
	for _, k := range kids {
		require.Equal(t, bot.RunDone, k.Status)
		require.Equal(t, "helper", k.Agent)
		require.Equal(t, bot.Owner{SessionKey: "local:split", AgentID: "lead", SandboxName: k.SandboxName}, k.Owner)
		require.NotEmpty(t, k.SandboxName)
		require.Equal(t, id, k.ParentLinks.WorkItemID)
		require.Equal(t, wi.ID, k.Creator.WorkItemID)
		require.NotEmpty(t, k.ParentLinks.JobID)
		require.NotEmpty(t, k.ChildJobID)
		require.Equal(t, 110, k.Tokens)
		require.Equal(t, 1, k.Depth)
		child, err := tr.d.Store().GetWorkItem(context.Background(), k.ChildWorkItemID)
		require.NoError(t, err)
		require.Equal(t, id, child.ParentID)
		require.Equal(t, bot.StatusDone, child.Status)
	}
	// Children post nothing of their own: the one status message shows the
	// tree, and the reply is the lead's.
	msgs := tr.messages(t, "split", id)
	require.Equal(t, "9 parts done", msgs["reply"])
	require.Contains(t, msgs["status"], "@helper: part 1 · done · 110 tokens")
	require.Equal(t, 9, strings.Count(msgs["status"], "@helper:"), msgs["status"])
}

func TestSubagentsNeverOverlapBeyondMaxConcurrent(t *testing.T) {
	model := newFakeModel(t, splitting(8, answerPart(sleep(200*time.Millisecond))))
	tr := startTree(t, model, treeOptions{workers: 8, subagents: config.Subagents{MaxConcurrent: 2}})
	id := tr.send(t, "two", "@lead do the eight parts")
	wi := tr.finished(t, id, time.Minute)
	require.Equal(t, bot.StatusDone, wi.Status, wi.Error)
	require.Equal(t, "8 parts done", tr.messages(t, "two", id)["reply"])
	require.LessOrEqual(t, model.maxInFlight("helper"), 2)
	refused := 0
	for _, req := range model.seen("lead") {
		for _, res := range req.results() {
			if strings.Contains(res, "max_concurrent is 2") {
				refused++
			}
		}
	}
	require.Positive(t, refused, "spawns beyond the limit were refused, and spawned again later")
}

func TestOneWorkerStillFinishesTheTree(t *testing.T) {
	model := newFakeModel(t, splitting(3, answerPart(sleep(50*time.Millisecond))))
	tr := startTree(t, model, treeOptions{workers: 1})
	id := tr.send(t, "one", "@lead do the three parts")
	wi := tr.finished(t, id, time.Minute)
	require.Equal(t, bot.StatusDone, wi.Status, wi.Error)
	require.Equal(t, "3 parts done", tr.messages(t, "one", id)["reply"])
	require.Equal(t, 1, model.maxInFlight("helper"))
	require.Len(t, tr.children(t, id), 3)
}

func TestAChildCannotSpawnAtMaxDepthOne(t *testing.T) {
	model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
		switch {
		case req.Agent == "lead" && req.turns() == 0:
			return reply{Calls: []fakeCall{{Name: agents.SpawnTool, Args: spawnArgs("dig deeper", "helper")}}}
		case req.Agent == "helper" && req.turns() == 0:
			return reply{Calls: []fakeCall{{Name: agents.SpawnTool, Args: spawnArgs("dig even deeper", "helper")}}}
		case req.Agent == "helper":
			return reply{Text: "could not: " + req.last().text()}
		}
		return reply{Text: "lead heard: " + req.last().text()}
	})
	tr := startTree(t, model, treeOptions{})
	id := tr.send(t, "deep", "@lead dig")
	require.Equal(t, bot.StatusDone, tr.finished(t, id, time.Minute).Status)
	helper := model.seen("helper")
	require.Len(t, helper, 2)
	require.Equal(t, "refused: spawn refused: this run is a subagent 1 deep and max_depth is 1, so it cannot spawn; do the task yourself or answer with what you have",
		helper[1].last().text())
	require.Len(t, tr.children(t, id), 1)
	kid := tr.children(t, id)[0]
	require.Empty(t, tr.children(t, kid.ChildWorkItemID))
	require.Contains(t, kid.Result, "could not: refused: spawn refused")
}

func TestAChildPastItsTimeoutIsCancelledAndReported(t *testing.T) {
	model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
		switch {
		case req.Agent == "lead" && req.turns() == 0:
			return reply{Calls: []fakeCall{{ID: "slow", Name: agents.SpawnTool, Args: `{"task":"take forever","agent":"helper","timeout":1}`}}}
		case req.Agent == "helper":
			<-ctx.Done() // never answers
			return reply{}
		}
		return reply{Text: "lead heard: " + req.last().text()}
	})
	tr := startTree(t, model, treeOptions{})
	id := tr.send(t, "slow", "@lead wait for it")
	require.Equal(t, bot.StatusDone, tr.finished(t, id, time.Minute).Status)
	lead := model.seen("lead")
	require.Len(t, lead, 2)
	res := lead[1].results()["slow"]
	require.True(t, strings.HasPrefix(res, "error: subagent run_"), res)
	require.Contains(t, res, "(@helper) timed out and was cancelled")
	require.Contains(t, res, `"status":"timed_out"`)
	require.Contains(t, res, `"error":"timed out after 1s and was cancelled"`)
	kid := tr.children(t, id)[0]
	require.Equal(t, bot.RunTimedOut, kid.Status)
	child, err := tr.d.Store().GetWorkItem(context.Background(), kid.ChildWorkItemID)
	require.NoError(t, err)
	require.Equal(t, bot.StatusFailed, child.Status)
	require.Contains(t, tr.messages(t, "slow", id)["reply"], "lead heard:")
}

func TestBackgroundChildrenAreAwaitedListedAndCancelledByTheirOwnerOnly(t *testing.T) {
	release := make(chan struct{})
	model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
		switch {
		case req.Agent == "helper" && strings.Contains(req.first(), "quick"):
			return reply{Text: "quick one done"}
		case req.Agent == "helper":
			select {
			case <-release:
			case <-ctx.Done():
			}
			return reply{Text: "slow one done"}
		case req.Agent == "lead" && strings.Contains(req.first(), "start"):
			if req.turns() == 0 {
				return reply{Calls: []fakeCall{
					{ID: "bg_quick", Name: agents.SpawnTool, Args: `{"task":"quick","agent":"helper","background":true}`},
					{ID: "bg_slow", Name: agents.SpawnTool, Args: `{"task":"slow","agent":"helper","background":true}`},
				}}
			}
			if req.turns() == 1 {
				var quick struct{ ID string }
				require.NoError(t, json.Unmarshal([]byte(req.results()["bg_quick"]), &quick))
				return reply{Calls: []fakeCall{{ID: "await_quick", Name: agents.AwaitChildTool, Args: `{"id":"` + quick.ID + `"}`}}}
			}
			return reply{Text: "started: " + req.results()["await_quick"]}
		case req.Agent == "lead" && strings.Contains(req.first(), "check"):
			if req.turns() == 0 {
				return reply{Calls: []fakeCall{{ID: "list", Name: agents.ListChildrenTool, Args: `{"open":true}`}}}
			}
			if req.turns() == 1 {
				id := regexp.MustCompile(`run_\d+`).FindString(req.results()["list"])
				return reply{Calls: []fakeCall{{ID: "cancel", Name: agents.CancelChildTool, Args: `{"id":"` + id + `"}`}}}
			}
			return reply{Text: "checked: " + req.results()["cancel"]}
		case req.Agent == "lead" && strings.Contains(req.first(), "steal"):
			if req.turns() == 0 {
				id := regexp.MustCompile(`run_\d+`).FindString(req.first())
				return reply{Calls: []fakeCall{
					{ID: "await", Name: agents.AwaitChildTool, Args: `{"id":"` + id + `","timeout":1}`},
					{ID: "cancel", Name: agents.CancelChildTool, Args: `{"id":"` + id + `"}`},
				}}
			}
			return reply{Text: "stole: " + req.results()["await"] + " / " + req.results()["cancel"]}
		}
		return reply{Text: "?"}
	})
	tr := startTree(t, model, treeOptions{})
	first := tr.send(t, "bg", "@lead start two in the background")
	require.Equal(t, bot.StatusDone, tr.finished(t, first, time.Minute).Status)
	reply := tr.messages(t, "bg", first)["reply"]
	require.Contains(t, reply, `"status":"done"`)
	require.Contains(t, reply, "quick one done")
	kids := tr.children(t, first)
	require.Len(t, kids, 2)
	slices.SortFunc(kids, func(a, b bot.ChildRun) int { return strings.Compare(a.Task, b.Task) })
	quick, slow := kids[0], kids[1]
	require.Equal(t, "slow", slow.Task)
	require.True(t, slow.Status.Open(), "the slow child outlives the run that spawned it")

	// The next run of the thread is told what is still open, and manages it.
	second := tr.send(t, "bg", "@lead check on the children")
	require.Equal(t, bot.StatusDone, tr.finished(t, second, time.Minute).Status)
	check := lastOf(model.seen("lead"), "check on", 1)
	require.Contains(t, check.System, "Still open and owned by this thread")
	require.Contains(t, check.System, "- subagent "+slow.ID+" [")
	require.Contains(t, check.System, "@helper: slow")
	require.Contains(t, check.results()["list"], slow.ID+" @helper [")
	require.NotContains(t, check.results()["list"], quick.ID+" ", "only open ones were asked for")
	rec, err := tr.d.Store().GetRun(context.Background(), slow.ID)
	require.NoError(t, err)
	require.Equal(t, bot.RunCancelled, rec.Status)
	require.NotNil(t, rec.Receipt)
	require.Equal(t, "@lead", rec.Receipt.By)
	require.Equal(t, bot.ReceiptCancelled, rec.Receipt.Action)
	require.Equal(t, first, rec.Receipt.Creator.WorkItemID)
	require.Eventually(t, func() bool {
		wi, err := tr.d.Store().GetWorkItem(context.Background(), slow.ChildWorkItemID)
		require.NoError(t, err)
		return wi.Status == bot.StatusCancelled
	}, 10*time.Second, 10*time.Millisecond)
	close(release)

	// Another thread knowing the id is refused.
	other := tr.send(t, "elsewhere", "@lead steal "+quick.ID)
	require.Equal(t, bot.StatusDone, tr.finished(t, other, time.Minute).Status)
	stole := tr.messages(t, "elsewhere", other)["reply"]
	require.Equal(t, 2, strings.Count(stole, "refused: "+quick.ID+" is not yours: it belongs to another thread or agent"), stole)

	// A third run carries nothing open over.
	third := tr.send(t, "bg", "@lead check again")
	require.Equal(t, bot.StatusDone, tr.finished(t, third, time.Minute).Status)
	last := model.seen("lead")
	sys := last[len(last)-1].System
	require.NotContains(t, sys, "Still open")
	require.True(t, slices.ContainsFunc(last, func(r chatRequest) bool { return strings.Contains(r.first(), "check again") }))
}

// lastOf is the request of the run started by a message containing text
// at its turn.
func lastOf(reqs []chatRequest, text string, turn int) chatRequest {
	for _, r := range slices.Backward(reqs) {
		if strings.Contains(r.first(), text) && r.turns() == turn {
			return r
		}
	}
	return chatRequest{}
}

func TestAgentCallsAndHandoffsAreInTheLedger(t *testing.T) {
	model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
		switch {
		case req.Agent == "lead" && req.turns() == 0:
			return reply{Calls: []fakeCall{{ID: "ask", Name: agents.ToolName("helper"), Args: `{"task":"check the spelling"}`}}}
		case req.Agent == "lead" && req.turns() == 1:
			return reply{Calls: []fakeCall{{ID: "hand", Name: agents.HandoffTool, Args: `{"agent":"helper","reason":"it is theirs"}`}}}
		case req.Agent == "helper" && strings.Contains(req.first(), "spelling"):
			return reply{Text: "spelling is fine"}
		case req.Agent == "helper":
			return reply{Text: "helper took over"}
		}
		return reply{Text: "?"}
	})
	tr := startTree(t, model, treeOptions{})
	id := tr.send(t, "calls", "@lead sort it out")
	require.Eventually(t, func() bool {
		rs, _, err := tr.d.Store().ListRuns(context.Background(), bot.RunFilter{ParentWorkItemID: id})
		require.NoError(t, err)
		return len(rs) == 2 && !rs[0].Status.Open()
	}, time.Minute, 10*time.Millisecond)
	require.Equal(t, bot.StatusDone, tr.finished(t, id, time.Minute).Status)
	rs, _, err := tr.d.Store().ListRuns(context.Background(), bot.RunFilter{ParentWorkItemID: id})
	require.NoError(t, err)
	hop, call := rs[0], rs[1]

	require.Equal(t, bot.RunAgentCall, call.Kind)
	require.Equal(t, "helper", call.Agent)
	require.Equal(t, bot.RunDone, call.Status)
	require.Equal(t, "spelling is fine", call.Result)
	require.Equal(t, 110, call.Tokens)
	require.Equal(t, bot.Owner{SessionKey: "local:calls", AgentID: "lead", SandboxName: call.SandboxName}, call.Owner)
	require.Equal(t, id, call.ParentLinks.WorkItemID)
	require.Equal(t, call.ParentLinks.JobID, call.ChildJobID, "a call runs in its caller's job")

	require.Equal(t, bot.RunHandoff, hop.Kind)
	require.Equal(t, "helper", hop.Agent)
	require.Equal(t, "it is theirs", hop.Task)
	require.Equal(t, bot.RunDone, hop.Status)
	require.Equal(t, "helper took over", hop.Result)
	require.Equal(t, id, hop.ChildWorkItemID, "a handoff's work item is the one handed on")
	require.NotEmpty(t, hop.ChildDispatchID)
	require.NotEqual(t, hop.ParentLinks.DispatchID, hop.ChildDispatchID)
	require.NotEqual(t, hop.ParentLinks.JobID, hop.ChildJobID)
	require.Equal(t, []bot.Ceiling{{Profile: "contributor", Reason: "handed off by @lead, contributor"}}, hop.Ceilings)
}

func TestAnAgentsOwnLimitsWinOverTheConfigs(t *testing.T) {
	model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
		switch {
		case req.Agent == "lead" && req.turns() == 0:
			return reply{Calls: []fakeCall{
				{ID: "a", Name: agents.SpawnTool, Args: spawnArgs("part 1", "helper")},
				{ID: "b", Name: agents.SpawnTool, Args: spawnArgs("part 2", "helper")},
			}}
		case req.Agent == "helper":
			return reply{Text: partOf.FindString(req.first()) + " done"}
		}
		res := req.results()
		return reply{Text: res["a"] + "\n" + res["b"]}
	})
	tr := startTree(t, model, treeOptions{workers: 4, subagents: config.Subagents{MaxConcurrent: 8}, agents: map[string]string{
		"lead": "---\nname: lead\ndescription: Leads, one helper at a time.\nsubagents: {max_concurrent: 1}\n---\nLead.\n",
	}})
	id := tr.send(t, "own", "@lead two parts")
	require.Equal(t, bot.StatusDone, tr.finished(t, id, time.Minute).Status)
	reply := tr.messages(t, "own", id)["reply"]
	require.Equal(t, 1, strings.Count(reply, "max_concurrent is 1"), reply)
	require.Equal(t, 1, strings.Count(reply, `"status":"done"`), reply)
}

func TestABackgroundTaskOutlivesItsRunAndOnlyItsOwnerManagesIt(t *testing.T) {
	model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
		task := regexp.MustCompile(`task_\d+`).FindString(req.first())
		switch {
		case strings.Contains(req.first(), "start the server") && req.turns() == 0:
			return reply{Calls: []fakeCall{
				{ID: "dev", Name: "bash", Args: `{"command":"echo serving; sleep 300","background":true,"cleanup_on_run_end":false}`},
				{ID: "tmp", Name: "bash", Args: `{"command":"sleep 300","background":true}`},
			}}
		case strings.Contains(req.first(), "stop it") && req.turns() == 0:
			id := regexp.MustCompile(`background_task (task_\d+) \[running`).FindStringSubmatch(req.System)
			if id == nil {
				return reply{Text: "nothing carried over"}
			}
			return reply{Calls: []fakeCall{{ID: "stop", Name: "stop_background_task", Args: `{"id":"` + id[1] + `"}`}}}
		case strings.Contains(req.first(), "steal") && req.turns() == 0:
			return reply{Calls: []fakeCall{
				{ID: "read", Name: "read_background_output", Args: `{"id":"` + task + `"}`},
				{ID: "stop", Name: "stop_background_task", Args: `{"id":"` + task + `"}`},
			}}
		}
		var results []string
		for _, id := range []string{"dev", "tmp", "read", "stop"} {
			if r, ok := req.results()[id]; ok {
				results = append(results, id+": "+r)
			}
		}
		return reply{Text: strings.Join(results, "\n")}
	})
	tr := startTree(t, model, treeOptions{})
	first := tr.send(t, "srv", "@lead start the server")
	require.Equal(t, bot.StatusDone, tr.finished(t, first, time.Minute).Status)
	ts, _, err := tr.d.Store().ListTasks(context.Background(), bot.TaskFilter{OwnerSessionKey: "local:srv"})
	require.NoError(t, err)
	require.Len(t, ts, 2)
	slices.SortFunc(ts, func(a, b bot.BackgroundTask) int { return strings.Compare(a.ID, b.ID) })
	dev, tmp := ts[0], ts[1]
	if dev.CleanupOnRunEnd {
		dev, tmp = tmp, dev
	}
	require.Equal(t, bot.TaskRunning, dev.Status, "cleanup_on_run_end: false outlives its run")
	require.Equal(t, bot.TaskStopped, tmp.Status, "the other ended with its run")
	require.Equal(t, first, dev.Creator.WorkItemID)
	require.Equal(t, "lead", dev.AgentID)

	// Another thread cannot touch it, even knowing its id.
	other := tr.send(t, "elsewhere", "@lead steal "+dev.ID)
	require.Equal(t, bot.StatusDone, tr.finished(t, other, time.Minute).Status)
	stole := tr.messages(t, "elsewhere", other)["reply"]
	require.Equal(t, 2, strings.Count(stole, "refused: "+dev.ID+" is not yours"), stole)

	// The next run of the thread is told about it, with its age, and stops it.
	second := tr.send(t, "srv", "@lead stop it")
	require.Equal(t, bot.StatusDone, tr.finished(t, second, time.Minute).Status)
	sys := lastOf(model.seen("lead"), "stop it", 0).System
	require.Regexp(t, `- background_task `+dev.ID+` \[running, started \d+s ago\] `+"`echo serving; sleep 300`", sys)
	require.Contains(t, tr.messages(t, "srv", second)["reply"], "stop: stopped "+dev.ID)
	rec, err := tr.d.Store().GetTask(context.Background(), dev.ID)
	require.NoError(t, err)
	require.Equal(t, bot.TaskStopped, rec.Status)
	require.Equal(t, "@lead", rec.Receipt.By)
}
