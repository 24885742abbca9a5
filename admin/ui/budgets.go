package ui

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
)

// BudgetCaps are the caps of the config in effect.
type BudgetCaps interface {
	BudgetCaps() config.Budgets
}

func (u *UI) budgetsPage() page {
	return page{Nav: "Budgets", Path: "/admin/budgets", Mount: func(m *http.ServeMux) {
		m.HandleFunc("GET /admin/budgets", u.budgets)
	}}
}

// budgetsView is the budgets page: the configured caps, and what each
// requester, agent and repository spent on a UTC day.
type budgetsView struct {
	Caps  config.Budgets
	Day   string // YYYY-MM-DD
	Today bool
	Kinds []budgetKind
}

// budgetKind is one kind of daily budget: its cap and who spent what.
type budgetKind struct {
	Kind, Title string
	Cap         int64 // tokens a day; 0 caps nothing
	Rows        []budgetRow
	// More says only the first rows are shown (in name order).
	More bool
}

type budgetRow struct {
	Name          string
	Tokens, Calls int64
	Cost          float64
	// Left is what the cap leaves today, with what approvals granted;
	// Over is set when nothing is left.
	Left int64
	Over bool
}

func (u *UI) budgets(w http.ResponseWriter, r *http.Request) {
	if u.opts.Records == nil || u.opts.Caps == nil {
		u.fail(w, r, bot.Errorf(bot.EUNAVAILABLE, "no budgets: the agent runtime is not configured"))
		return
	}
	now := u.opts.Now().UTC()
	day := now
	if s := r.URL.Query().Get("day"); s != "" {
		d, err := time.Parse(time.DateOnly, s)
		if err != nil {
			u.fail(w, r, bot.Errorf(bot.EINVALID, "day %q: want a date such as %s", s, now.Format(time.DateOnly)))
			return
		}
		day = d
	}
	caps := u.opts.Caps.BudgetCaps()
	v := budgetsView{Caps: caps, Day: day.Format(time.DateOnly), Today: day.Format(time.DateOnly) == now.Format(time.DateOnly)}
	for _, k := range []struct {
		kind, title string
		cap         int64
	}{
		{bot.BudgetRequester, "Requesters", caps.PerDay.Requester},
		{bot.BudgetAgent, "Agents", caps.PerDay.Agent},
		{bot.BudgetRepo, "Repositories", caps.PerDay.Repo},
	} {
		prefix := strings.TrimSuffix(bot.DailyBudgetKey(day, k.kind, "x"), "x")
		spent, more, err := u.opts.Records.SpentUnder(r.Context(), prefix, bot.MaxListLimit)
		if err != nil {
			u.fail(w, r, err)
			return
		}
		bk := budgetKind{Kind: k.kind, Title: k.title, Cap: k.cap, More: more}
		for _, sp := range spent {
			row := budgetRow{Name: strings.TrimPrefix(sp.Key, prefix), Tokens: sp.Tokens, Calls: sp.Calls, Cost: sp.Cost}
			if k.cap > 0 {
				row.Left = max(k.cap+sp.GrantedTokens-sp.Tokens, 0)
				row.Over = row.Left == 0
			}
			bk.Rows = append(bk.Rows, row)
		}
		// The biggest spenders first.
		slices.SortStableFunc(bk.Rows, func(a, b budgetRow) int { return cmp.Compare(b.Tokens, a.Tokens) })
		v.Kinds = append(v.Kinds, bk)
	}
	u.render(w, r, "budgets.html", v)
}
