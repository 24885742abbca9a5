package ui

import (
	"net/http"
	"net/url"
	"time"

	"github.com/switchyard/switchyard/bot"
)

// workItemsPageSize is how many work items a page of the list shows.
const workItemsPageSize = 50

func (u *UI) workItemsPage() page {
	return page{Nav: "Work items", Path: "/admin/workitems", Mount: func(m *http.ServeMux) {
		m.HandleFunc("GET /admin/workitems", u.workItems)
		m.HandleFunc("GET /admin/workitems/rows", u.workItemRows)
		m.HandleFunc("GET /admin/workitems/{id}", u.workItem)
		m.HandleFunc("GET /admin/workitems/{id}/live", u.workItemLive)
		m.HandleFunc("POST /admin/workitems/{id}/cancel", u.cancelWorkItem)
		m.HandleFunc("POST /admin/workitems/{id}/reroute", u.rerouteWorkItem)
	}}
}

// workItemsView is the list page: the filter, one page of rows and the
// links to the page after it.
type workItemsView struct {
	Status, Thread string
	Statuses       []bot.WorkStatus
	Rows           []workItemRow
	// Query is the filter and cursor of this page, for the live rows.
	Query string
	// Next is the query of the next page, "" after the last.
	Next string
}

// workItemRow is one work item in the list.
type workItemRow struct {
	ID, Source, Thread, Agent, Reason, Requester string
	Status                                       bot.WorkStatus
	Created                                      time.Time
	Age                                          string
	// Tokens are what the tree the work item leads spent; -1 for a
	// subagent's work item, whose tree is its parent's.
	Tokens int64
}

func (u *UI) workItems(w http.ResponseWriter, r *http.Request) {
	v, err := u.listWorkItems(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.render(w, r, "workitems.html", v)
}

// workItemRows is the list's rows alone, which the page reloads live.
func (u *UI) workItemRows(w http.ResponseWriter, r *http.Request) {
	v, err := u.listWorkItems(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.fragment(w, r, "workitems.html", "rows", v)
}

// listWorkItems reads one page of the store's listing, as the filter and
// the cursor of the request say.
func (u *UI) listWorkItems(r *http.Request) (workItemsView, error) {
	q := r.URL.Query()
	v := workItemsView{Status: q.Get("status"), Thread: q.Get("thread"), Query: r.URL.RawQuery,
		Statuses: []bot.WorkStatus{bot.StatusQueued, bot.StatusRunning, bot.StatusDone, bot.StatusFailed, bot.StatusCancelled}}
	f := bot.WorkItemFilter{Status: bot.WorkStatus(v.Status), Limit: workItemsPageSize, Cursor: q.Get("cursor")}
	if f.Status != "" && !f.Status.Valid() {
		return v, bot.Errorf(bot.EINVALID, "status %q: want queued, running, done, failed or cancelled", f.Status)
	}
	if v.Thread != "" {
		th, err := bot.ParseThread(v.Thread)
		if err != nil {
			return v, err
		}
		f.Thread = th.Key()
	}
	items, next, err := u.opts.Admin.Store.ListWorkItems(r.Context(), f)
	if err != nil {
		return v, err
	}
	var keys []string
	for _, wi := range items {
		if wi.ParentID == "" {
			keys = append(keys, bot.TreeBudgetKey(wi.ID))
		}
	}
	spent := map[string]int64{}
	if len(keys) > 0 && u.opts.Records != nil {
		ss, err := u.opts.Records.Spent(r.Context(), keys)
		if err != nil {
			return v, err
		}
		for _, s := range ss {
			spent[s.Key] = s.Tokens
		}
	}
	now := u.opts.Now()
	for _, wi := range items {
		row := workItemRow{
			ID: wi.ID, Source: wi.Source, Thread: wi.Thread.Key(), Agent: wi.Route.Agent, Reason: wi.Route.Reason,
			Status: wi.Status, Created: wi.CreatedAt, Age: age(now.Sub(wi.CreatedAt)), Tokens: -1,
		}
		if !wi.Requester.IsZero() {
			row.Requester = wi.Requester.Source + ":" + wi.Requester.ID
		}
		if wi.ParentID == "" {
			row.Tokens = spent[bot.TreeBudgetKey(wi.ID)]
		}
		v.Rows = append(v.Rows, row)
	}
	if next != "" {
		nq := url.Values{"cursor": {next}}
		if v.Status != "" {
			nq.Set("status", v.Status)
		}
		if v.Thread != "" {
			nq.Set("thread", v.Thread)
		}
		v.Next = nq.Encode()
	}
	return v, nil
}
