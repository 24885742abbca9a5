package daemon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/bot"
)

// TestCancellingAHandoffStopsTheWorkItHandedOn: a handoff's record is
// cancelled through the API with the work it stands for, never as a
// receipt beside a run that goes on.
func TestCancellingAHandoffStopsTheWorkItHandedOn(t *testing.T) {
	model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
		switch req.Agent {
		case "lead":
			return reply{Calls: []fakeCall{{ID: "hand", Name: agents.HandoffTool, Args: `{"agent":"helper","reason":"it is theirs"}`}}}
		case "helper":
			<-ctx.Done() // works until stopped
			return reply{}
		}
		return reply{Text: "?"}
	})
	tr := startTree(t, model, treeOptions{})
	id := tr.send(t, "hop", "@lead pass it on")
	var hop bot.ChildRun
	require.Eventually(t, func() bool {
		rs, _, err := tr.d.Store().ListRuns(context.Background(), bot.RunFilter{ParentWorkItemID: id})
		require.NoError(t, err)
		if len(rs) != 1 || rs[0].Status != bot.RunRunning {
			return false
		}
		hop = rs[0]
		return model.maxInFlight("helper") == 1
	}, 30*time.Second, 10*time.Millisecond)
	require.Equal(t, bot.RunHandoff, hop.Kind)

	code, body := tr.do(t, "POST", "/api/v1/runs/"+hop.ID+"/cancel", "")
	require.Equal(t, http.StatusOK, code, string(body))
	var rec bot.ChildRun
	require.NoError(t, json.Unmarshal(body, &rec))
	require.Equal(t, hop.ID, rec.ID)

	wi := tr.finished(t, id, 30*time.Second)
	require.Equal(t, bot.StatusCancelled, wi.Status, "the work handed on stops with its record")
	got, err := tr.d.Store().GetRun(context.Background(), hop.ID)
	require.NoError(t, err)
	require.Equal(t, bot.RunCancelled, got.Status)
	require.NotNil(t, got.Receipt)
	require.Equal(t, "admin", got.Receipt.By)
}

// TestAnAgentCallIsNotCancelledApartFromItsCaller: an agent called as a
// tool ends with its caller's call; cancelling its record alone is refused
// with where to cancel instead.
func TestAnAgentCallIsNotCancelledApartFromItsCaller(t *testing.T) {
	release := make(chan struct{})
	model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
		switch {
		case req.Agent == "lead" && req.turns() == 0:
			return reply{Calls: []fakeCall{{ID: "ask", Name: agents.ToolName("helper"), Args: `{"task":"check the spelling"}`}}}
		case req.Agent == "helper":
			select {
			case <-release:
			case <-ctx.Done():
			}
			return reply{Text: "spelling is fine"}
		}
		return reply{Text: "lead heard: " + req.last().text()}
	})
	tr := startTree(t, model, treeOptions{})
	id := tr.send(t, "call", "@lead check it")
	var call bot.ChildRun
	require.Eventually(t, func() bool {
		rs, _, err := tr.d.Store().ListRuns(context.Background(), bot.RunFilter{ParentWorkItemID: id})
		require.NoError(t, err)
		if len(rs) != 1 {
			return false
		}
		call = rs[0]
		return model.maxInFlight("helper") == 1
	}, 30*time.Second, 10*time.Millisecond)
	require.Equal(t, bot.RunAgentCall, call.Kind)
	code, body := tr.do(t, "POST", "/api/v1/runs/"+call.ID+"/cancel", "")
	require.Equal(t, http.StatusConflict, code, string(body))
	require.Contains(t, string(body), call.ID+" is @helper called as a tool inside the run of "+id+", and ends with that call; cancel "+id+" to stop it")
	close(release)
	require.Equal(t, bot.StatusDone, tr.finished(t, id, time.Minute).Status)
	got, err := tr.d.Store().GetRun(context.Background(), call.ID)
	require.NoError(t, err)
	require.Equal(t, bot.RunDone, got.Status, "the call went on and its record says so")
	require.Nil(t, got.Receipt)
}
