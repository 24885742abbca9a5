package daemon_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/bot"
)

// TestSpawnInputsAreReadAsTheModelMeantOrRefusedClearly makes one spawn per
// case and reads what the lead was told and what the ledger recorded.
func TestSpawnInputsAreReadAsTheModelMeantOrRefusedClearly(t *testing.T) {
	model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
		switch {
		case req.Agent == "lead" && !strings.Contains(req.first(), "{"):
			return reply{Text: "a lead as a subagent did it"}
		case req.Agent == "lead" && req.turns() == 0:
			// A task bigger than a message the API takes comes from the
			// model itself.
			first := req.first()
			args := strings.Replace(first[strings.Index(first, "{"):], "HUGE", strings.Repeat("x", 256<<10), 1)
			return reply{Calls: []fakeCall{{ID: "spawn", Name: agents.SpawnTool, Args: args}}}
		case req.Agent == "helper":
			return reply{Text: "helper did it"}
		}
		return reply{Text: "lead read: " + req.results()["spawn"]}
	})
	tr := startTree(t, model, treeOptions{})
	for _, tc := range []struct {
		name, args string
		result     string // what the lead reads begins with this
		contains   string
		timeout    int // the child's recorded timeout, seconds; 0: no child
		agent      string
	}{
		{name: "unknown agent", args: `{"task":"t","agent":"ghost"}`, result: `refused: spawn refused: there is no agent "ghost" (agents: `},
		{name: "agent with an at sign", args: `{"task":"t","agent":"@helper"}`, result: `{"id":"run_`, contains: `"status":"done"`, timeout: 600, agent: "helper"},
		{name: "no agent is the spawner itself", args: `{"task":"t"}`, result: `{"id":"run_`, timeout: 600, agent: "lead"},
		{name: "empty task", args: `{"task":"   ","agent":"helper"}`, result: "error: invalid input: task is required"},
		{name: "no task", args: `{"agent":"helper"}`, result: "error: invalid input: task is required"},
		{name: "unknown field", args: `{"task":"t","agent":"helper","priority":1}`, result: "error: invalid input: ", contains: "priority"},
		{name: "timeout as a duration", args: `{"task":"t","agent":"helper","timeout":"1s"}`, result: `{"id":"run_`, timeout: 1, agent: "helper"},
		{name: "timeout in seconds", args: `{"task":"t","agent":"helper","timeout":90}`, result: `{"id":"run_`, timeout: 90, agent: "helper"},
		{name: "timeout in seconds as a string", args: `{"task":"t","agent":"helper","timeout":"90"}`, result: `{"id":"run_`, timeout: 90, agent: "helper"},
		{name: "timeout under a second", args: `{"task":"t","agent":"helper","timeout":"500ms"}`, result: `{"id":"run_`, timeout: 1, agent: "helper"},
		{name: "timeout of a second and a half", args: `{"task":"t","agent":"helper","timeout":1.5}`, result: `{"id":"run_`, timeout: 2, agent: "helper"},
		{name: "timeout beyond the limit", args: `{"task":"t","agent":"helper","timeout":"10h"}`, result: `{"id":"run_`,
			contains: `"note":"its timeout is 10m0s, the most a subagent of @lead may have"`, timeout: 600, agent: "helper"},
		{name: "timeout far beyond the limit", args: `{"task":"t","agent":"helper","timeout":1e300}`, result: `{"id":"run_`,
			contains: "its timeout is 10m0s", timeout: 600, agent: "helper"},
		{name: "timeout at the limit", args: `{"task":"t","agent":"helper","timeout":"10m"}`, result: `{"id":"run_`, timeout: 600, agent: "helper"},
		{name: "background with a timeout beyond the limit", args: `{"task":"t","agent":"helper","background":true,"timeout":"2h"}`, result: `{"id":"run_`,
			contains: "cancel_child stops it; its timeout is 10m0s, the most a subagent of @lead may have", timeout: 600, agent: "helper"},
		{name: "negative timeout", args: `{"task":"t","agent":"helper","timeout":-1}`, result: "error: invalid input: ", contains: "a timeout cannot be negative"},
		{name: "empty timeout", args: `{"task":"t","agent":"helper","timeout":""}`, result: `{"id":"run_`, timeout: 600, agent: "helper"},
		{name: "null timeout", args: `{"task":"t","agent":"helper","timeout":null}`, result: `{"id":"run_`, timeout: 600, agent: "helper"},
		{name: "timeout that is no number", args: `{"task":"t","agent":"helper","timeout":true}`, result: "error: invalid input: ", contains: `a timeout wants seconds or a duration such as "5m"`},
		{name: "negative timeout as a string", args: `{"task":"t","agent":"helper","timeout":"-1"}`, result: "error: invalid input: ", contains: "a timeout cannot be negative"},
		{name: "timeout that is no duration", args: `{"task":"t","agent":"helper","timeout":"soon"}`, result: "error: invalid input: ", contains: `timeout "soon": want seconds or a duration such as "5m"`},
		{name: "huge task", args: `{"task":"HUGE","agent":"helper"}`, result: "refused: spawn refused: the task is 262144 bytes and a subagent's may be 16384 at most; " +
			"write the details to a file in the workspace and name the file instead"},
		{name: "huge context", args: `{"task":"t","context":"HUGE","agent":"helper"}`, result: "refused: spawn refused: the context is 262144 bytes"},
		{name: "unknown skill", args: `{"task":"t","agent":"helper","skills":["no-such-skill"]}`, result: "refused: spawn refused: ", contains: `"no-such-skill"`},
		{name: "skill without its companion", args: `{"task":"t","agent":"helper","skills":["opencode-implementer"]}`, result: "refused: spawn refused: ", contains: "specification-engine"},
		{name: "skills that go together", args: `{"task":"t","agent":"helper","skills":["opencode-implementer","specification-engine"]}`, result: `{"id":"run_`, timeout: 600, agent: "helper"},
		{name: "background", args: `{"task":"t","agent":"helper","background":true}`, result: `{"id":"run_`, contains: "await_child with its id collects the answer", timeout: 600, agent: "helper"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			thread := strings.ReplaceAll(tc.name, " ", "-")
			id := tr.send(t, thread, "@lead spawn "+tc.args)
			wi := tr.finished(t, id, time.Minute)
			require.Equal(t, bot.StatusDone, wi.Status, wi.Error)
			reply := tr.messages(t, thread, id)["reply"]
			read := strings.TrimPrefix(reply, "lead read: ")
			require.True(t, strings.HasPrefix(read, tc.result), "the lead read %.300s", read)
			require.Contains(t, read, tc.contains)
			kids := tr.children(t, id)
			if tc.timeout == 0 {
				require.Empty(t, kids, "a refused spawn starts nothing")
				return
			}
			require.Len(t, kids, 1)
			require.Equal(t, tc.timeout, kids[0].TimeoutSeconds)
			require.Equal(t, tc.agent, kids[0].Agent)
		})
	}
}

// A handoff whose reason is longer than a record keeps is still recorded,
// with its reason clipped, as an agent call's task is.
func TestAHandoffWithALongReasonIsStillInTheLedger(t *testing.T) {
	long := strings.Repeat("because ", 4<<10)
	model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
		switch {
		case req.Agent == "lead" && req.turns() == 0:
			args, _ := json.Marshal(map[string]string{"agent": "helper", "reason": long})
			return reply{Calls: []fakeCall{{ID: "hand", Name: agents.HandoffTool, Args: string(args)}}}
		case req.Agent == "helper":
			return reply{Text: "helper took over"}
		}
		return reply{Text: "?"}
	})
	tr := startTree(t, model, treeOptions{})
	id := tr.send(t, "long-hop", "@lead hand it on")
	require.Equal(t, bot.StatusDone, tr.finished(t, id, time.Minute).Status)
	require.Eventually(t, func() bool {
		rs, _, err := tr.d.Store().ListRuns(context.Background(), bot.RunFilter{ParentWorkItemID: id})
		require.NoError(t, err)
		return len(rs) == 1 && rs[0].Status == bot.RunDone
	}, 10*time.Second, 10*time.Millisecond, "the handoff is recorded and ends with its work item")
	rs, _, err := tr.d.Store().ListRuns(context.Background(), bot.RunFilter{ParentWorkItemID: id})
	require.NoError(t, err)
	hop := rs[0]
	require.Equal(t, bot.RunHandoff, hop.Kind)
	require.Equal(t, "helper", hop.Agent)
	require.LessOrEqual(t, len(hop.Task), bot.MaxLedgerText)
	require.True(t, strings.HasPrefix(hop.Task, "because because"), hop.Task[:40])
	require.True(t, strings.HasSuffix(hop.Task, "…"))
}

// A child past its timeout is reported in the thread as well as to its
// parent: the status message's tree says it timed out.
func TestAChildPastItsTimeoutIsShownInTheThread(t *testing.T) {
	model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
		switch {
		case req.Agent == "lead" && req.turns() == 0:
			return reply{Calls: []fakeCall{{ID: "slow", Name: agents.SpawnTool, Args: `{"task":"take forever","agent":"helper","timeout":"500ms"}`}}}
		case req.Agent == "helper":
			<-ctx.Done()
			return reply{}
		}
		return reply{Text: "lead heard: " + req.last().text()}
	})
	tr := startTree(t, model, treeOptions{})
	id := tr.send(t, "late", "@lead wait for it")
	require.Equal(t, bot.StatusDone, tr.finished(t, id, time.Minute).Status)
	msgs := tr.messages(t, "late", id)
	require.Contains(t, msgs["reply"], "timed out after 1s and was cancelled")
	require.Eventually(t, func() bool {
		return strings.Contains(tr.messages(t, "late", id)["status"], "@helper: take forever · timed out")
	}, 10*time.Second, 10*time.Millisecond, "the thread's status shows the child timed out: %s", msgs["status"])
}

// TestAwaitChildTimeouts: await_child waits as long as its timeout says, 0
// checks without waiting, and none (or null, or "") waits the default.
func TestAwaitChildTimeouts(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
		switch {
		case req.Agent == "helper":
			select {
			case <-release:
			case <-ctx.Done():
			}
			return reply{Text: "slow one done"}
		case req.Agent == "lead" && req.turns() == 0:
			return reply{Calls: []fakeCall{{ID: "bg", Name: agents.SpawnTool, Args: `{"task":"slow","agent":"helper","background":true}`}}}
		case req.Agent == "lead" && req.turns() == 1:
			var bg struct{ ID string }
			require.NoError(t, json.Unmarshal([]byte(req.results()["bg"]), &bg))
			first := req.first()
			timeout := first[strings.Index(first, "timeout ")+len("timeout "):]
			return reply{Calls: []fakeCall{{ID: "await", Name: agents.AwaitChildTool, Args: `{"id":"` + bg.ID + `","timeout":` + timeout + `}`}}}
		}
		return reply{Text: "lead read: " + req.results()["await"]}
	})
	// Each case leaves its helper working until the test ends.
	tr := startTree(t, model, treeOptions{workers: 8})
	for _, tc := range []struct{ timeout, note string }{
		{"0", "; await it (with a timeout) to wait for its answer, or cancel_child"},
		{`"0s"`, "; await it (with a timeout) to wait for its answer, or cancel_child"},
		{"1", " after waiting 1s; await again later, or cancel_child"},
		{`"1.5s"`, " after waiting 1.5s; await again later, or cancel_child"},
	} {
		t.Run(tc.timeout, func(t *testing.T) {
			thread := "await-" + strings.Trim(tc.timeout, `"`)
			id := tr.send(t, thread, "@lead spawn and await with timeout "+tc.timeout)
			wi := tr.finished(t, id, time.Minute)
			require.Equal(t, bot.StatusDone, wi.Status, wi.Error)
			reply := tr.messages(t, thread, id)["reply"]
			require.Regexp(t, `"status":"(queued|running)"`, reply)
			require.Regexp(t, `"note":"still (queued|running)`+regexp.QuoteMeta(tc.note)+`"`, reply)
		})
	}
}
