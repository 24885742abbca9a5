package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunsAndWorkspacesFromTheCLI drives a lead that spawns a helper and
// leaves a background task running, then lists, trees and cancels its runs
// and deletes its workspace, as a user does.
func TestRunsAndWorkspacesFromTheCLI(t *testing.T) {
	fake := &fakeOpenAI{quick: true, byAgent: map[string][]toolStep{
		"lead": {
			{name: "spawn_subagent", args: `{"task":"list the files","agent":"helper"}`},
			{name: "bash", args: `{"command":"sleep 300","background":true,"cleanup_on_run_end":false}`},
		},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := treeDir(t, srv.URL, "")
	p := serve(t, dir, freeAddr(t))

	r := run(t, dir, p.env(), "send", "--wait", "--thread", "rt", "@lead split the work")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	r = run(t, dir, p.env(), "workitems", "list", "--thread", "rt", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var items []struct {
		ID       string `json:"id"`
		ParentID string `json:"parent_work_item_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &items))
	var roots []string
	for _, wi := range items {
		if wi.ParentID == "" {
			roots = append(roots, wi.ID)
		}
	}
	require.Len(t, roots, 1, "one work item without a parent: %s", r.stdout)
	root := roots[0]

	r = run(t, dir, p.env(), "runs", "list", "--owner", "rt", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var recs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &recs), r.stdout)
	require.Len(t, recs, 1, r.stdout)
	for _, field := range []string{"owner_session_key", "owner_agent_id", "owner_sandbox_name", "creator_job_id",
		"creator_dispatch_id", "creator_work_item_id", "parent_work_item_id", "parent_job_id", "parent_dispatch_id",
		"child_work_item_id", "child_dispatch_id", "child_job_id", "status", "result_summary", "tokens", "created_at"} {
		require.Contains(t, recs[0], field)
	}
	require.Equal(t, "local:rt", recs[0]["owner_session_key"])
	require.Equal(t, "lead", recs[0]["owner_agent_id"])
	require.Equal(t, root, recs[0]["parent_work_item_id"])
	require.Equal(t, "done", recs[0]["status"])
	id, kidItem := recs[0]["id"].(string), recs[0]["child_work_item_id"].(string)

	r = run(t, dir, p.env(), "runs", "list", "--status", "sleeping")
	require.Equal(t, 2, r.code, "a status no run has is bad input")
	require.Contains(t, r.stderr, `status "sleeping": want queued, running, done, failed, cancelled, timed_out or interrupted`)

	r = run(t, dir, p.env(), "runs", "tree", root, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var tree struct {
		ID, Agent, Status string
		Children          []struct {
			ID, Agent, Status string
			Children          []json.RawMessage
		}
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &tree))
	require.Equal(t, root, tree.ID)
	require.Equal(t, "lead", tree.Agent)
	require.Equal(t, "done", tree.Status)
	require.Len(t, tree.Children, 1)
	require.Equal(t, id, tree.Children[0].ID)
	require.Equal(t, "helper", tree.Children[0].Agent)
	require.Empty(t, tree.Children[0].Children)
	r = run(t, dir, p.env(), "runs", "tree", root)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, root+" work_item @lead done\n  "+id+" subagent @helper done ("+kidItem+")")

	r = run(t, dir, p.env(), "workitems", "show", root)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "child:    "+id+" subagent @helper done ("+kidItem+"): list the files")
	r = run(t, dir, p.env(), "workitems", "show", kidItem)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "run:      "+id+", spawned by @lead")

	r = run(t, dir, p.env(), "runs", "await", id, "--timeout", "5s")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, id+"  subagent @helper done")
	// A timeout under a millisecond still asks the daemon once.
	r = run(t, dir, p.env(), "runs", "await", id, "--timeout", "100us")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, id+"  subagent @helper done")
	// Unknown ids and bad timeouts say so, with the documented exit codes.
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"runs", "await", "run_404", "--timeout", "1s"}, 1, `"run_404" not found`},
		{[]string{"runs", "cancel", "run_404"}, 1, `"run_404" not found`},
		{[]string{"runs", "tree", "wi_404"}, 1, `"wi_404" not found`},
		{[]string{"workitems", "show", "wi_404"}, 1, `"wi_404" not found`},
		{[]string{"runs", "await", id, "--timeout", "0s"}, 2, "--timeout 0s: want a positive duration such as 30s or 5m"},
		{[]string{"runs", "await", id, "--timeout", "-1s"}, 2, "--timeout -1s: want a positive duration such as 30s or 5m"},
	} {
		r := run(t, dir, p.env(), tc.args...)
		require.Equal(t, tc.code, r.code, "%v: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.says, tc.args)
		require.Empty(t, r.stdout, tc.args)
	}
	r = run(t, dir, p.env(), "runs", "cancel", id)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, id+" is done already")
	r = run(t, dir, p.env(), "workitems", "cancel", root, "--reason", "too late")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "work item "+root+" is done already")
	r = run(t, dir, p.env(), "workitems", "cancel", "wi_404")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, `work item "wi_404" not found`)

	// The background task keeps the workspace: deletion is refused, and
	// --force stops it with a receipt.
	r = run(t, dir, p.env(), "workspaces", "delete", "rt")
	require.Equal(t, 1, r.code, r.stdout)
	require.Contains(t, r.stderr, "the workspace of local:rt has 1 record open (task_1 background task running)")
	require.Contains(t, r.stderr, "delete with --force")
	ws, err := filepath.Glob(filepath.Join(dir, "data", "workspaces", "*"))
	require.NoError(t, err)
	require.Len(t, ws, 1, "the workspace is still there")
	r = run(t, dir, p.env(), "workspaces", "delete", "rt", "--force")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `receipt:  stopped task_1 \(background task, was running\) by admin at [-0-9: ]+: its workspace was deleted \(forced\) by admin`, r.stdout)
	require.Contains(t, r.stdout, "Deleted the workspace of local:rt (")
	_, err = os.Stat(ws[0])
	require.True(t, os.IsNotExist(err), "the workspace is gone")
	require.Eventually(t, func() bool {
		r := run(t, dir, p.env(), "workspaces", "delete", "rt")
		return r.code == 0 && strings.Contains(r.stdout, "local:rt had no workspace.")
	}, 5*time.Second, 100*time.Millisecond)
}
