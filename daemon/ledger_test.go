package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

// leaveOpen is a lead that leaves a background subagent and a background
// task running when its run ends, and whose helper waits until released.
func leaveOpen(release <-chan struct{}) func(ctx context.Context, req chatRequest) reply {
	return func(ctx context.Context, req chatRequest) reply {
		switch {
		case req.Agent == "helper":
			select {
			case <-release:
			case <-ctx.Done():
			}
			return reply{Text: "helped"}
		case strings.Contains(req.first(), "leave") && req.turns() == 0:
			return reply{Calls: []fakeCall{
				{ID: "child", Name: agents.SpawnTool, Args: `{"task":"take your time","agent":"helper","background":true}`},
				{ID: "task", Name: "bash", Args: `{"command":"sleep 300","background":true,"cleanup_on_run_end":false}`},
			}}
		case strings.Contains(req.first(), "leave"):
			return reply{Text: "left them running"}
		}
		return reply{Text: "carried over: " + fmt.Sprint(strings.Contains(req.System, "Carried over"))}
	}
}

func TestRunsAPIListsTreesAwaitsAndCancels(t *testing.T) {
	release := make(chan struct{})
	model := newFakeModel(t, leaveOpen(release))
	tr := startTree(t, model, treeOptions{})
	id := tr.send(t, "api", "@lead leave things running")
	require.Equal(t, bot.StatusDone, tr.finished(t, id, time.Minute).Status)
	kid := tr.children(t, id)[0]
	// The final status says what the run spent and what it left open.
	require.Contains(t, tr.messages(t, "api", id)["status"],
		"\nspent 220 tokens with its subagents; still open: "+kid.ID+" (subagent, running), task_1 (background task, running)")

	code, body := tr.do(t, "GET", "/api/v1/runs?owner=api", "")
	require.Equal(t, http.StatusOK, code, string(body))
	var page struct{ Items []map[string]any }
	require.NoError(t, json.Unmarshal(body, &page))
	require.Len(t, page.Items, 1)
	for _, field := range []string{"owner_session_key", "owner_agent_id", "owner_sandbox_name", "creator_job_id",
		"creator_dispatch_id", "creator_work_item_id", "parent_work_item_id", "parent_job_id", "parent_dispatch_id",
		"child_work_item_id", "child_dispatch_id", "child_job_id", "status", "result_summary", "tokens", "created_at"} {
		require.Contains(t, page.Items[0], field)
	}
	require.Equal(t, "local:api", page.Items[0]["owner_session_key"])
	code, _ = tr.do(t, "GET", "/api/v1/runs?status=sleeping", "")
	require.Equal(t, http.StatusBadRequest, code)

	code, body = tr.do(t, "GET", "/api/v1/runs/tree/"+id, "")
	require.Equal(t, http.StatusOK, code, string(body))
	require.JSONEq(t, fmt.Sprintf(`{"id":%q,"agent":"lead","status":"done","kind":"work_item","work_item_id":%q,"children":[
		{"id":%q,"agent":"helper","status":"running","kind":"subagent","work_item_id":%q,"task":"take your time","children":[]}]}`,
		id, id, kid.ID, kid.ChildWorkItemID), string(body))

	code, body = tr.do(t, "GET", "/api/v1/workitems/"+id, "")
	require.Equal(t, http.StatusOK, code)
	var detail admin.WorkItemDetail
	require.NoError(t, json.Unmarshal(body, &detail))
	require.Equal(t, []admin.RunSummary{{ID: kid.ID, Kind: bot.RunSubagent, Agent: "helper", Status: bot.RunRunning,
		WorkItemID: kid.ChildWorkItemID, Task: "take your time"}}, detail.Children)
	code, body = tr.do(t, "GET", "/api/v1/workitems/"+kid.ChildWorkItemID, "")
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, json.Unmarshal(body, &detail))
	require.Equal(t, id, detail.ParentID)
	require.Equal(t, kid.ID, detail.Run.ID)

	// An await that times out answers the open record.
	code, body = tr.do(t, "POST", "/api/v1/runs/"+kid.ID+"/await?timeout=100ms", "")
	require.Equal(t, http.StatusOK, code, string(body))
	var rec bot.ChildRun
	require.NoError(t, json.Unmarshal(body, &rec))
	require.Equal(t, bot.RunRunning, rec.Status)

	code, body = tr.do(t, "POST", "/api/v1/runs/"+kid.ID+"/cancel", "")
	require.Equal(t, http.StatusOK, code, string(body))
	require.NoError(t, json.Unmarshal(body, &rec))
	require.Equal(t, bot.RunCancelled, rec.Status)
	require.Equal(t, "admin", rec.Receipt.By)
	require.Equal(t, "cancelled through the API by admin", rec.Receipt.Reason)
	code, body = tr.do(t, "POST", "/api/v1/runs/"+kid.ID+"/cancel", "")
	require.Equal(t, http.StatusConflict, code, string(body))
	code, body = tr.do(t, "POST", "/api/v1/runs/"+kid.ID+"/await", "")
	require.Equal(t, http.StatusOK, code, string(body))
	require.NoError(t, json.Unmarshal(body, &rec))
	require.Equal(t, bot.RunCancelled, rec.Status)
	code, _ = tr.do(t, "POST", "/api/v1/runs/run_404/await", "")
	require.Equal(t, http.StatusNotFound, code)
	close(release)
}

func TestResetAndWorkspaceDeletionLeaveReceipts(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	model := newFakeModel(t, leaveOpen(release))
	tr := startTree(t, model, treeOptions{})

	// Deleting a workspace is refused while the thread's records are open;
	// --force closes them, each with a receipt.
	id := tr.send(t, "ws", "@lead leave things running")
	require.Equal(t, bot.StatusDone, tr.finished(t, id, time.Minute).Status)
	kid := tr.children(t, id)[0]
	ws := filepath.Join(tr.d.Store().Where(), "..", "workspaces", tools.WorkspaceName("local:ws"))
	require.DirExists(t, ws)
	code, body := tr.do(t, "DELETE", "/api/v1/workspaces/ws", "")
	require.Equal(t, http.StatusConflict, code, string(body))
	require.Contains(t, string(body), "the workspace of local:ws has 2 records open ("+kid.ID+" subagent running, task_1 background task running): "+
		"stop them first, or delete with --force, which closes them with receipts")
	require.DirExists(t, ws)
	code, body = tr.do(t, "DELETE", "/api/v1/workspaces/ws?force=true", "")
	require.Equal(t, http.StatusOK, code, string(body))
	var del admin.WorkspaceDeletion
	require.NoError(t, json.Unmarshal(body, &del))
	require.True(t, del.Deleted)
	require.Len(t, del.Receipts, 2)
	require.Equal(t, kid.ID, del.Receipts[0].RecordID)
	require.Equal(t, bot.ReceiptCancelled, del.Receipts[0].Action)
	require.Equal(t, "task_1", del.Receipts[1].RecordID)
	require.Equal(t, bot.ReceiptStopped, del.Receipts[1].Action)
	for _, rc := range del.Receipts {
		require.Equal(t, "admin", rc.By)
		require.Equal(t, "its workspace was deleted (forced) by admin", rc.Reason)
		require.Equal(t, id, rc.Creator.WorkItemID)
		require.Equal(t, "local:ws", rc.SessionKey)
	}
	_, err := os.Stat(ws)
	require.True(t, os.IsNotExist(err), "the workspace is gone")

	// A reset cancels and archives what the thread owns, with a receipt
	// each, and the next run carries nothing over.
	first := tr.send(t, "rs", "@lead leave things running")
	require.Equal(t, bot.StatusDone, tr.finished(t, first, time.Minute).Status)
	code, body = tr.do(t, "POST", "/api/v1/threads/rs/reset", "")
	require.Equal(t, http.StatusOK, code, string(body))
	var reset admin.ResetResult
	require.NoError(t, json.Unmarshal(body, &reset))
	require.Equal(t, 1, reset.Cleared)
	var actions []string
	for _, rc := range reset.Receipts {
		actions = append(actions, rc.RecordID+" "+rc.Action)
		require.Equal(t, "the thread was reset by admin", rc.Reason)
	}
	kid = tr.children(t, first)[0]
	require.ElementsMatch(t, []string{kid.ID + " cancelled", "task_2 stopped"}, actions)
	next := tr.send(t, "rs", "@lead what do you carry over?")
	require.Equal(t, bot.StatusDone, tr.finished(t, next, time.Minute).Status)
	require.Equal(t, "carried over: false", tr.messages(t, "rs", next)["reply"])
	sys := lastOf(model.seen("lead"), "carry over", 0).System
	require.NotContains(t, sys, first)
	require.NotContains(t, sys, "Still open")

	// A second reset has nothing left to close: everything is archived.
	code, body = tr.do(t, "POST", "/api/v1/threads/rs/reset", "")
	require.Equal(t, http.StatusOK, code, string(body))
	require.NoError(t, json.Unmarshal(body, &reset))
	require.Empty(t, reset.Receipts)
	rs, _, err := tr.d.Store().ListRuns(context.Background(), bot.RunFilter{OwnerSessionKey: "local:rs"})
	require.NoError(t, err)
	for _, r := range rs {
		require.NotNil(t, r.ArchivedAt, r.ID)
	}
}
