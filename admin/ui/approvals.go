package ui

import (
	"context"
	"net/http"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/bot"
)

// ApprovalDesk lists tool calls waiting for a person and records
// decisions; *policy.Approvals has it.
type ApprovalDesk interface {
	List(ctx context.Context, all bool) ([]bot.Approval, error)
	Decide(ctx context.Context, d policy.ApprovalDecision) (bot.Approval, error)
}

func (u *UI) approvalsPage() page {
	return page{Nav: "Approvals", Path: "/admin/approvals", Mount: func(m *http.ServeMux) {
		m.HandleFunc("GET /admin/approvals", u.approvals)
		m.HandleFunc("GET /admin/approvals/rows", u.approvalRows)
		m.HandleFunc("POST /admin/approvals/{id}/approve", u.decide(true))
		m.HandleFunc("POST /admin/approvals/{id}/deny", u.decide(false))
	}}
}

// approvalsView is the approvals page: those waiting, and with All the
// recently decided ones after them.
type approvalsView struct {
	All      bool
	Pending  []bot.Approval
	Decided  []bot.Approval
	Identity string
	// Done says what a decision just did.
	Done string
}

func (u *UI) listApprovals(r *http.Request) (approvalsView, error) {
	v := approvalsView{All: r.URL.Query().Get("all") == "true", Identity: identity(r), Done: r.URL.Query().Get("done")}
	if u.opts.Approvals == nil {
		return v, bot.Errorf(bot.EUNAVAILABLE, "no approvals: the agent runtime is not configured")
	}
	list, err := u.opts.Approvals.List(r.Context(), v.All)
	if err != nil {
		return v, err
	}
	for _, ap := range list {
		if ap.Status == bot.ApprovalPending {
			v.Pending = append(v.Pending, ap)
		} else {
			v.Decided = append(v.Decided, ap)
		}
	}
	return v, nil
}

func (u *UI) approvals(w http.ResponseWriter, r *http.Request) {
	v, err := u.listApprovals(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.render(w, r, "approvals.html", v)
}

func (u *UI) approvalRows(w http.ResponseWriter, r *http.Request) {
	v, err := u.listApprovals(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.fragment(w, r, "approvals.html", "rows", v)
}

// decide approves or denies as the signed-in person, under the API's
// rules: someone not among the approvers is refused (403) and the attempt
// audited by the approvals themselves.
func (u *UI) decide(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if u.opts.Approvals == nil {
			u.fail(w, r, bot.Errorf(bot.EUNAVAILABLE, "no approvals: the agent runtime is not configured"))
			return
		}
		id := r.PathValue("id")
		if _, err := u.opts.Approvals.Decide(r.Context(), policy.ApprovalDecision{ID: id, Approve: approve, By: identity(r)}); err != nil {
			u.fail(w, r, err)
			return
		}
		done := "denied"
		if approve {
			done = "approved"
		}
		http.Redirect(w, r, "/admin/approvals?done="+done, http.StatusSeeOther)
	}
}
