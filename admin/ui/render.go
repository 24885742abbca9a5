package ui

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
)

// view is what every template is given: the page's own data under Data.
type view struct {
	Identity string // who is signed in; "" on the sign-in form
	CSRF     string // the token every form sends
	Nav      []navItem
	Data     any
}

type navItem struct {
	Name, Path string
	Current    bool
}

// render writes the page of file (under templates/) in the layout, with
// data as .Data, status 200.
func (u *UI) render(w http.ResponseWriter, r *http.Request, file string, data any) {
	u.renderStatus(w, r, http.StatusOK, file, data)
}

// renderStatus is render with another status.
func (u *UI) renderStatus(w http.ResponseWriter, r *http.Request, status int, file string, data any) {
	csrf := ""
	if s := sessionFrom(r.Context()); s != nil {
		csrf = s.csrf
	}
	u.renderWith(w, r, status, file, csrf, data)
}

func (u *UI) renderWith(w http.ResponseWriter, r *http.Request, status int, file, csrf string, data any) {
	v := view{Identity: identity(r), CSRF: csrf, Data: data}
	if v.Identity != "" {
		for _, p := range u.pages {
			v.Nav = append(v.Nav, navItem{Name: p.Nav, Path: p.Path, Current: strings.HasPrefix(r.URL.Path, p.Path)})
		}
	}
	u.execute(w, r, status, file, "layout", v)
}

// fragment writes the template name of file alone, for a part of a page
// that live.js refreshes; it is given the same view as the page.
func (u *UI) fragment(w http.ResponseWriter, r *http.Request, file, name string, data any) {
	csrf := ""
	if s := sessionFrom(r.Context()); s != nil {
		csrf = s.csrf
	}
	u.execute(w, r, http.StatusOK, file, name, view{Identity: identity(r), CSRF: csrf, Data: data})
}

// execute runs a template on v, its data masked (see masked), and sends
// what it made, masked again by the redactor.
func (u *UI) execute(w http.ResponseWriter, r *http.Request, status int, file, name string, v view) {
	t, ok := u.tmpl[file]
	if !ok {
		u.log.Error("admin ui: no template", "file", file)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if v.Data != nil {
		v.Data = masked(u.opts.Redactor, reflect.ValueOf(v.Data)).Interface()
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, v); err != nil {
		u.log.Error("admin ui: render", "file", file, "template", name, "error", err.Error())
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(u.opts.Redactor.Redact(buf.String()))) // the browser went away
}

// errorView is the error page's data.
type errorView struct {
	Status  int
	Message string
}

// fail shows err as a page with the status of its code: what was refused
// and why; an internal error is logged and shown without its detail.
func (u *UI) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := bot.ErrorCode(err)
	status := httpapi.Status(code)
	if code == bot.EINTERNAL {
		u.log.Error("admin ui error", "method", r.Method, "path", r.URL.Path, "error", err.Error())
	}
	if r.Header.Get("X-Live") != "" {
		http.Error(w, bot.ErrorMessage(err), status)
		return
	}
	u.renderStatus(w, r, status, "error.html", errorView{Status: status, Message: bot.ErrorMessage(err)})
}

// Change is something a person changed in the UI, for the audit log.
type Change struct {
	// Action names it: "workitem.cancel", "rule.create".
	Action string
	// WorkItemID is the work item it concerns, if one.
	WorkItemID string
	// Detail says what was changed, as a value that renders as JSON
	// (redacted before it is stored).
	Detail any
}

// audit records that the signed-in person made c, with who they are.
func (u *UI) audit(r *http.Request, c Change) error {
	args := ""
	if c.Detail != nil {
		b, err := json.Marshal(c.Detail)
		if err != nil {
			return bot.Errorf(bot.EINTERNAL, "encode the audit record of %s: %v", c.Action, err)
		}
		args = string(b)
	}
	return u.opts.Audit.Record(r.Context(), policy.AuditRecord{
		Decision: policy.AuditChange, Tool: c.Action, Arguments: args, WorkItemID: c.WorkItemID, By: identity(r),
	})
}

// refusal is how a page with a form says err above it: the status of its
// code and its message. An internal error is logged and said without its
// detail.
func (u *UI) refusal(r *http.Request, err error) (int, string) {
	code := bot.ErrorCode(err)
	if code == bot.EINTERNAL {
		u.log.Error("admin ui error", "method", r.Method, "path", r.URL.Path, "error", err.Error())
	}
	return httpapi.Status(code), bot.ErrorMessage(err)
}

// record audits a change that has been made; one that cannot be recorded
// is logged, since the change stands.
func (u *UI) record(r *http.Request, c Change) {
	if err := u.audit(r, c); err != nil {
		u.log.Error("admin ui: a change was made but not audited", "action", c.Action, "by", identity(r), "error", err.Error())
	}
}
