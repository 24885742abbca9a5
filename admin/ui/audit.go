package ui

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/agents/policy"
)

// auditPageSize is how many records a page of the audit log shows;
// auditScan bounds how many records one page reads looking for those
// that match the filters the store does not apply (agent, tool,
// requester).
const (
	auditPageSize = 50
	auditScan     = 5000
)

func (u *UI) auditPage() page {
	return page{Nav: "Audit", Path: "/admin/audit", Mount: func(m *http.ServeMux) {
		m.HandleFunc("GET /admin/audit", u.auditLog)
	}}
}

// auditFilter is what the audit page is filtered by.
type auditFilter struct {
	Decision, Agent, Tool, Requester, Since string
}

// matches reports whether rec passes the filters the store does not apply.
func (f auditFilter) matches(rec policy.AuditRecord) bool {
	if f.Agent != "" && !strings.EqualFold(rec.Agent, f.Agent) {
		return false
	}
	if f.Tool != "" && !strings.EqualFold(rec.Tool, f.Tool) {
		return false
	}
	if f.Requester != "" {
		if rec.Requester == nil {
			return false
		}
		who := rec.Requester.Source + ":" + rec.Requester.ID
		if !strings.EqualFold(who, f.Requester) && !strings.EqualFold(rec.Requester.ID, f.Requester) {
			return false
		}
	}
	return true
}

// auditView is one page of the audit log.
type auditView struct {
	Filter    auditFilter
	Decisions []string
	Records   []auditRow
	// Next is the query of the page after, "" after the last; Scanned
	// says the page stopped after reading auditScan records.
	Next    string
	Scanned bool
}

type auditRow struct {
	policy.AuditRecord
	Who string // the requester, source:id
}

// auditLog shows a page of the audit log, newest first. The store filters
// by decision and time; agent, tool and requester are matched here, reading
// the store's pages until this page is full, the log ends, or auditScan
// records were read. The cursor of the next page is the store's, so no
// record is skipped or shown twice.
func (u *UI) auditLog(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := auditView{Decisions: policy.AuditDecisions(), Filter: auditFilter{
		Decision: q.Get("decision"), Agent: strings.TrimSpace(q.Get("agent")), Tool: strings.TrimSpace(q.Get("tool")),
		Requester: strings.TrimSpace(q.Get("requester")), Since: strings.TrimSpace(q.Get("since")),
	}}
	f := policy.AuditFilter{Decision: v.Filter.Decision, Cursor: q.Get("cursor")}
	if v.Filter.Since != "" {
		t, err := admin.ParseSince(v.Filter.Since, u.opts.Now())
		if err != nil {
			u.fail(w, r, err)
			return
		}
		f.Since = t
	}
	read := 0
	for {
		// Ask for no more than the page still needs: the store's cursor
		// then ends exactly after the last record shown.
		f.Limit = auditPageSize - len(v.Records)
		recs, next, err := u.opts.Audit.List(r.Context(), f)
		if err != nil {
			u.fail(w, r, err)
			return
		}
		read += len(recs)
		for _, rec := range recs {
			if v.Filter.matches(rec) {
				row := auditRow{AuditRecord: rec}
				if rec.Requester != nil {
					row.Who = rec.Requester.Source + ":" + rec.Requester.ID
				}
				v.Records = append(v.Records, row)
			}
		}
		f.Cursor = next
		if next == "" || len(v.Records) >= auditPageSize {
			break
		}
		if read >= auditScan {
			v.Scanned = true
			break
		}
	}
	if f.Cursor != "" {
		nq := url.Values{"cursor": {f.Cursor}}
		for k, val := range map[string]string{"decision": v.Filter.Decision, "agent": v.Filter.Agent, "tool": v.Filter.Tool,
			"requester": v.Filter.Requester, "since": v.Filter.Since} {
			if val != "" {
				nq.Set(k, val)
			}
		}
		v.Next = nq.Encode()
	}
	u.render(w, r, "audit.html", v)
}
