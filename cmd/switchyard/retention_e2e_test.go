package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
)

// With retention set to minutes, the daemon's sweep removes old finished
// work and old payloads and keeps what is live or young; storage compact
// refuses a store a daemon runs on, and afterwards shrinks the file,
// keeping what was left.
func TestRetentionAndCompact(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("retention:\n  payloads: 1m\n  records: 2m\n"), 0o600))
	path := filepath.Join(dir, "data", "switchyard.db")

	// An hour of history, written straight into the store: 100 work items
	// that finished 50 minutes ago, 50 still queued, each with a 32 KB
	// payload.
	store := bolttest.Open(t, filepath.Dir(path))
	now := time.Now()
	payload := bytes.Repeat([]byte(`{"comment":{"body":"lorem ipsum dolor"}}`), 800)
	var finished, queued []*bot.WorkItem
	for i := range 150 {
		at := now.Add(-time.Hour)
		res, err := store.Ingest(t.Context(), bot.IngestRequest{
			Event: bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, DeliveryID: fmt.Sprint("old-", i),
				Thread: bot.LocalThread(fmt.Sprint("old-", i)), Text: "an old request", ReceivedAt: at, Raw: payload},
			Route: &bot.Route{Agent: "triage", Kind: bot.RouteDefault, Reason: "default"}, Now: at,
		})
		require.NoError(t, err)
		if i < 100 {
			c, err := store.ClaimNext(t.Context(), bot.ClaimRequest{Owner: "old", Now: at, Lease: time.Minute, MaxAttempts: 3})
			require.NoError(t, err)
			require.NoError(t, store.FinishJob(t.Context(), bot.JobOutcome{JobID: c.Job.ID, Owner: "old", Now: now.Add(-50 * time.Minute), Success: true, Summary: "done"}))
			finished = append(finished, res.WorkItem)
		} else {
			queued = append(queued, res.WorkItem)
		}
	}
	require.NoError(t, store.Close())

	p := serve(t, dir, freeAddr(t))
	token := p.token(t)
	for i := range 5 {
		resp, err := p.post(token, "/api/v1/messages", fmt.Sprintf(`{"thread":"new-%d","text":"a new request"}`, i))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
	}
	require.Eventually(t, func() bool {
		return run(t, dir, p.env(), "workitems", "show", finished[0].ID).code != 0
	}, 20*time.Second, 100*time.Millisecond, "the sweep at start removes what finished 50 minutes ago")
	for _, wi := range finished {
		r := run(t, dir, p.env(), "workitems", "show", wi.ID)
		require.NotEqual(t, 0, r.code, "%s finished 50 minutes ago", wi.ID)
	}
	for _, wi := range queued {
		require.Equal(t, 0, run(t, dir, p.env(), "workitems", "show", wi.ID).code, "%s was still queued", wi.ID)
	}
	r := run(t, dir, p.env(), "workitems", "list", "--limit", "1000")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 55, strings.Count(r.stdout, "\nwi_"), r.stdout)

	r = run(t, dir, nil, "storage", "compact")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "the file is in use, by a running daemon most likely; stop it first")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait())
	store = bolttest.Open(t, filepath.Dir(path))
	for _, wi := range queued {
		ev, err := store.GetEvent(t.Context(), wi.EventRef)
		require.NoError(t, err)
		require.Empty(t, ev.Raw, "a payload older than a minute")
		require.Equal(t, "an old request", ev.Text)
	}
	require.NoError(t, store.Close())

	before, err := os.Stat(path)
	require.NoError(t, err)
	r = run(t, dir, nil, "storage", "compact")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "compacted "+filepath.Join("data", "switchyard.db")+": ")
	after, err := os.Stat(path)
	require.NoError(t, err)
	t.Logf("%s", strings.TrimSpace(r.stdout))
	require.Less(t, after.Size(), before.Size()/2, "the file shrank")

	p = serve(t, dir, freeAddr(t))
	r = run(t, dir, p.env(), "workitems", "list", "--limit", "1000")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 55, strings.Count(r.stdout, "\nwi_"), "everything that was left is there")
}

// With retention set to seconds, what finishes while the daemon runs is
// gone within seconds, not at the next hourly sweep.
func TestRetentionOfSecondsSweepsWhileTheDaemonRuns(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("retention:\n  payloads: 3s\n  records: 3s\n"), 0o600))
	p := serve(t, dir, freeAddr(t))
	token := p.token(t)
	resp, err := p.post(token, "/api/v1/messages", `{"thread":"t-1","text":"a request"}`)
	require.NoError(t, err)
	var accepted struct {
		WorkItemID string `json:"work_item_id"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&accepted))
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	id := accepted.WorkItemID
	require.NotEmpty(t, id)
	// The daemon has no model: the request fails at once, and is finished.
	require.Eventually(t, func() bool {
		r := run(t, dir, p.env(), "workitems", "show", id)
		return r.code == 0 && strings.Contains(r.stdout, "failed")
	}, 20*time.Second, 100*time.Millisecond, "the request ends")
	require.Eventually(t, func() bool {
		return run(t, dir, p.env(), "workitems", "show", id).code != 0
	}, 30*time.Second, 200*time.Millisecond, "a work item finished longer ago than its 3 s retention is swept while the daemon runs")
}
