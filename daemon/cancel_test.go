package daemon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/bot"
)

// hangs is a model whose calls for requests saying "hang" never answer
// until their run stops; every other request is answered at once.
func hangs(ctx context.Context, req chatRequest) reply {
	if strings.Contains(req.first(), "hang") {
		<-ctx.Done()
		return reply{}
	}
	return reply{Text: "done: " + req.first()}
}

// leadCalled waits until n of the lead's model calls have been in flight at once.
func (tr *tree) leadCalled(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.True(t, tr.model.awaitInFlight(ctx, "lead", n), "the lead's model call never started")
}

func TestCancelThroughTheAPIStopsARunningWorkItemAndTakesAQueuedOneOutOfTheQueue(t *testing.T) {
	tr := startTree(t, newFakeModel(t, hangs), treeOptions{})
	running := tr.send(t, "c", "@lead hang on the deploy")
	tr.leadCalled(t, 1)
	// A second request in the thread waits for the first run to end.
	queued := tr.send(t, "c", "@lead and then the docs")
	wi, err := tr.d.Store().GetWorkItem(t.Context(), queued)
	require.NoError(t, err)
	require.Equal(t, bot.StatusQueued, wi.Status)

	code, body := tr.do(t, "POST", "/api/v1/workitems/"+queued+"/cancel", "")
	require.Equal(t, http.StatusOK, code, string(body))
	var got bot.WorkItem
	require.NoError(t, json.Unmarshal(body, &got))
	require.Equal(t, queued, got.ID)
	require.Equal(t, bot.StatusCancelled, got.Status)
	require.Equal(t, "cancelled by admin", got.Error)

	code, body = tr.do(t, "POST", "/api/v1/workitems/"+running+"/cancel", `{"reason":"wrong environment"}`)
	require.Equal(t, http.StatusOK, code, string(body))
	done := tr.finished(t, running, time.Minute)
	require.Equal(t, bot.StatusCancelled, done.Status)
	require.Equal(t, "cancelled by admin: wrong environment", done.Error)
	msgs := tr.messages(t, "c", running)
	require.Contains(t, msgs["status"], "cancelled by admin: wrong environment")
	require.Contains(t, msgs["reply"], "lead stopped working on "+running+": cancelled by admin: wrong environment")

	// Neither is run again: the cancelled run is not retried, the queued
	// one never starts.
	jobs, err := tr.d.Store().ListJobs(t.Context(), running)
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, bot.JobFailed, jobs[0].Status)
	jobs, err = tr.d.Store().ListJobs(t.Context(), queued)
	require.NoError(t, err)
	require.Empty(t, jobs)
	next := tr.finished(t, tr.send(t, "c", "@lead the thread goes on"), time.Minute)
	require.Equal(t, bot.StatusDone, next.Status)
	require.Len(t, tr.model.seen("lead"), 2, "the cancelled run once, the next request once")

	// Both cancels are in the audit log, as who made them through the API.
	code, body = tr.do(t, "GET", "/api/v1/audit?decision=change", "")
	require.Equal(t, http.StatusOK, code, string(body))
	var audit struct {
		Items []policy.AuditRecord `json:"items"`
	}
	require.NoError(t, json.Unmarshal(body, &audit))
	var cancels []string
	for _, rec := range audit.Items {
		if rec.Tool == "workitem.cancel" {
			require.Equal(t, "admin", rec.By)
			cancels = append(cancels, rec.WorkItemID+" "+rec.Arguments)
		}
	}
	require.ElementsMatch(t, []string{
		queued + ` {"status":"cancelled"}`,
		running + ` {"reason":"wrong environment","status":"running"}`,
	}, cancels)

	// A finished work item, an unknown one, and a body that is not one.
	code, body = tr.do(t, "POST", "/api/v1/workitems/"+running+"/cancel", "")
	require.Equal(t, http.StatusConflict, code, string(body))
	require.Contains(t, string(body), "work item "+running+" is cancelled already")
	code, _ = tr.do(t, "POST", "/api/v1/workitems/wi_404/cancel", "")
	require.Equal(t, http.StatusNotFound, code)
	code, _ = tr.do(t, "POST", "/api/v1/workitems/"+next.ID+"/cancel", `{"why":"x"}`)
	require.Equal(t, http.StatusBadRequest, code)
}

func TestAdminUICancelsARunningWorkItemAsTheSignedInPersonAndAuditsIt(t *testing.T) {
	tr := startTree(t, newFakeModel(t, hangs), treeOptions{})
	id := tr.send(t, "ui", "@lead hang on")
	tr.leadCalled(t, 1)

	c := newAdminClient(t, tr.base)
	resp, _ := c.signIn(url.Values{"token": {tr.token}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, page := c.do("GET", "/admin/workitems/"+id, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, `id="cancel-form"`)
	require.NotContains(t, page, "subagent", "any work item is cancelled here")

	// Without the form's token nothing happens.
	resp, _ = c.do("POST", "/admin/workitems/"+id+"/cancel", url.Values{"reason": {"not now"}}, nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	wi, err := tr.d.Store().GetWorkItem(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, bot.StatusRunning, wi.Status)

	resp, _ = c.do("POST", "/admin/workitems/"+id+"/cancel", url.Values{"reason": {"not now"}, "csrf_token": {c.csrf(page)}}, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	done := tr.finished(t, id, time.Minute)
	require.Equal(t, bot.StatusCancelled, done.Status)
	require.Equal(t, "cancelled by admin: not now", done.Error)
	require.Contains(t, tr.messages(t, "ui", id)["status"], "cancelled by admin")

	_, page = c.do("GET", "/admin/workitems/"+id, nil, nil)
	require.NotContains(t, page, `id="cancel-form"`, "a finished work item cannot be cancelled")

	recs, _, err := tr.d.Store().ListAudit(t.Context(), time.Time{}, "change", 10, "")
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Contains(t, string(recs[0]), `"tool":"workitem.cancel"`)
	require.Contains(t, string(recs[0]), `"by":"admin"`)
	require.Contains(t, string(recs[0]), `"work_item_id":"`+id+`"`)
	require.Contains(t, string(recs[0]), `not now`)
}
