package ui

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
)

func (u *UI) rulesPage() page {
	return page{Nav: "Rules", Path: "/admin/rules", Mount: func(m *http.ServeMux) {
		m.HandleFunc("GET /admin/rules", u.rules)
		m.HandleFunc("POST /admin/rules", u.createRule)
		m.HandleFunc("POST /admin/rules/test", u.testEvent)
		m.HandleFunc("POST /admin/rules/{id}", u.updateRule)
		m.HandleFunc("POST /admin/rules/{id}/priority", u.moveRule)
		m.HandleFunc("POST /admin/rules/{id}/delete", u.deleteRule)
	}}
}

// rulesView is the rules page: the rules in the order they are tried, the
// form of the rule being made or edited, the test form and its answer.
type rulesView struct {
	Rules        []ruleRow
	Agents       []string
	DefaultAgent string
	// Sources are the sources an event can come from.
	Sources []string
	Form    ruleForm
	Test    testForm
	// Result is the test form's answer; Changed says it weighed a change.
	Result  *admin.ChangeExplanation
	Changed bool
	// Error is why a change or a test was refused; Saved names the rule
	// a change was just made to, Deleted the rule just deleted.
	Error, Saved, Deleted string
}

// ruleRow is one rule of the listing.
type ruleRow struct {
	bot.RuleInfo
	// Stored rules can be changed here; the config's cannot.
	Stored bool
	// Editing is the rule in the form.
	Editing bool
}

// ruleForm is the form of a rule as typed: lists are comma-separated.
type ruleForm struct {
	ID, Name, Priority, Agent                              string
	Sources, Kinds, Labels, Repos, Paths, Actors, Channels string
	Text                                                   string
}

// testForm is the event to test, described one of three ways (Mode):
// "fields", "payload" (an event as POST /api/v1/explain takes it) or
// "delivery" (a stored delivery's id).
type testForm struct {
	Mode                                                    string
	Source, Kind, Text, Labels, Repo, Paths, Actor, Channel string
	Payload                                                 string
	Delivery, DeliverySource                                string
}

func (u *UI) rules(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := rulesView{Saved: q.Get("saved"), Deleted: q.Get("deleted"), Test: testForm{Mode: "fields", Source: bot.SourceLocal}}
	if id := q.Get("edit"); id != "" {
		book, err := u.ruleBook()
		var rule bot.StoredRule
		if err == nil {
			rule, err = book.GetRule(r.Context(), id)
		}
		if err != nil {
			u.fail(w, r, err)
			return
		}
		v.Form = formOf(rule)
	}
	u.showRules(w, r, http.StatusOK, v)
}

// showRules renders the page with v, the rules and agents in effect
// added.
func (u *UI) showRules(w http.ResponseWriter, r *http.Request, status int, v rulesView) {
	if u.opts.Admin.Routing == nil {
		u.fail(w, r, bot.Errorf(bot.EUNAVAILABLE, "no router is loaded"))
		return
	}
	router := u.opts.Admin.Routing.Routing()
	v.Agents, v.DefaultAgent = router.Agents(), router.DefaultAgent()
	v.Sources = []string{bot.SourceLocal, bot.SourceGitHub, bot.SourceSlack, bot.SourceSchedule}
	for _, ri := range router.Rules() {
		v.Rules = append(v.Rules, ruleRow{RuleInfo: ri, Stored: ri.ID != "", Editing: ri.ID != "" && ri.ID == v.Form.ID})
	}
	u.renderStatus(w, r, status, "rules.html", v)
}

// ruleBook is the daemon's book of stored rules, through which the API
// changes them too: each change is checked as a config rule is, audited
// as who is signed in, and in effect on every replica.
func (u *UI) ruleBook() (admin.RuleBook, error) {
	if u.opts.Admin.RuleBook == nil {
		return nil, bot.Errorf(bot.EUNAVAILABLE, "this daemon keeps no routing rules of its own")
	}
	return u.opts.Admin.RuleBook, nil
}

func (u *UI) createRule(w http.ResponseWriter, r *http.Request) {
	f := readRuleForm(r)
	book, err := u.ruleBook()
	var rule bot.Rule
	if err == nil {
		rule, err = f.rule()
	}
	if err == nil {
		var made bot.StoredRule
		if made, err = book.CreateRule(r.Context(), identity(r), rule); err == nil {
			http.Redirect(w, r, "/admin/rules?saved="+url.QueryEscape(made.ID), http.StatusSeeOther)
			return
		}
	}
	u.refused(w, r, rulesView{Form: f, Test: readTestForm(r)}, err)
}

func (u *UI) updateRule(w http.ResponseWriter, r *http.Request) {
	f := readRuleForm(r)
	f.ID = r.PathValue("id")
	book, err := u.ruleBook()
	var rule bot.Rule
	if err == nil {
		rule, err = f.rule()
	}
	if err == nil {
		if _, err = book.UpdateRule(r.Context(), identity(r), f.ID, rule); err == nil {
			http.Redirect(w, r, "/admin/rules?saved="+url.QueryEscape(f.ID), http.StatusSeeOther)
			return
		}
	}
	u.refused(w, r, rulesView{Form: f, Test: readTestForm(r)}, err)
}

func (u *UI) moveRule(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	book, err := u.ruleBook()
	if err != nil {
		u.refused(w, r, rulesView{}, err)
		return
	}
	p, err := strconv.Atoi(strings.TrimSpace(r.PostFormValue("priority")))
	if err != nil {
		u.refused(w, r, rulesView{}, bot.Errorf(bot.EINVALID, "priority %q: want a whole number", r.PostFormValue("priority")))
		return
	}
	if _, err := book.MoveRule(r.Context(), identity(r), id, p); err != nil {
		u.refused(w, r, rulesView{}, err)
		return
	}
	http.Redirect(w, r, "/admin/rules?saved="+url.QueryEscape(id), http.StatusSeeOther)
}

func (u *UI) deleteRule(w http.ResponseWriter, r *http.Request) {
	book, err := u.ruleBook()
	var gone bot.StoredRule
	if err == nil {
		gone, err = book.DeleteRule(r.Context(), identity(r), r.PathValue("id"))
	}
	if err != nil {
		u.refused(w, r, rulesView{}, err)
		return
	}
	http.Redirect(w, r, "/admin/rules?deleted="+url.QueryEscape(gone.Name), http.StatusSeeOther)
}

// testEvent answers the test form: which rule wins for the event and why,
// under the rules in effect and, when the rule form holds a rule, with
// that rule saved.
func (u *UI) testEvent(w http.ResponseWriter, r *http.Request) {
	v := rulesView{Form: readRuleForm(r), Test: readTestForm(r)}
	req, err := v.Test.request()
	if err == nil && !v.Form.empty() {
		var rule bot.Rule
		if rule, err = v.Form.rule(); err == nil {
			req.Change = &admin.RuleChange{ID: v.Form.ID, Rule: &rule}
			v.Changed = true
		}
	}
	if err == nil {
		var out admin.ChangeExplanation
		if out, err = admin.ExplainChange(r.Context(), u.opts.Admin, req); err == nil {
			v.Result = &out
		}
	}
	if err != nil {
		u.refused(w, r, v, err)
		return
	}
	u.showRules(w, r, http.StatusOK, v)
}

// refused shows the page again with what was typed and why it was
// refused, with the status of the error's code.
func (u *UI) refused(w http.ResponseWriter, r *http.Request, v rulesView, err error) {
	if bot.ErrorCode(err) == bot.EINTERNAL {
		u.fail(w, r, err)
		return
	}
	if v.Test.Mode == "" {
		v.Test = testForm{Mode: "fields", Source: bot.SourceLocal}
	}
	v.Error = bot.ErrorMessage(err)
	v.Changed = false
	u.showRules(w, r, httpapi.Status(bot.ErrorCode(err)), v)
}

func formOf(s bot.StoredRule) ruleForm {
	m := s.Match
	j := func(l []string) string { return strings.Join(l, ", ") }
	return ruleForm{
		ID: s.ID, Name: s.Name, Priority: strconv.Itoa(s.Priority), Agent: s.Agent,
		Sources: j(m.Sources), Kinds: j(m.Kinds), Labels: j(m.Labels), Repos: j(m.Repos), Paths: j(m.Paths),
		Actors: j(m.Actors), Channels: j(m.Channels), Text: m.Text,
	}
}

func readRuleForm(r *http.Request) ruleForm {
	v := r.PostFormValue
	return ruleForm{
		ID: v("rule_id"), Name: v("name"), Priority: v("priority"), Agent: v("agent"),
		Sources: v("sources"), Kinds: v("kinds"), Labels: v("labels"), Repos: v("repos"), Paths: v("paths"),
		Actors: v("actors"), Channels: v("channels"), Text: v("text"),
	}
}

// empty reports whether the form holds no rule: the test form then
// weighs no change.
func (f ruleForm) empty() bool {
	return f.ID == "" && strings.TrimSpace(f.Name+f.Agent+f.Sources+f.Kinds+f.Labels+f.Repos+f.Paths+f.Actors+f.Channels+f.Text) == ""
}

// rule is the rule the form describes; what it means is the rule book's
// to check, with the config's words.
func (f ruleForm) rule() (bot.Rule, error) {
	prio := 0
	if p := strings.TrimSpace(f.Priority); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			return bot.Rule{}, bot.Errorf(bot.EINVALID, "priority %q: want a whole number", f.Priority)
		}
		prio = n
	}
	return bot.Rule{Name: strings.TrimSpace(f.Name), Priority: prio, Agent: strings.TrimSpace(f.Agent), Match: bot.Match{
		Sources: list(f.Sources), Kinds: list(f.Kinds), Labels: list(f.Labels), Repos: list(f.Repos),
		Paths: list(f.Paths), Actors: list(f.Actors), Channels: list(f.Channels), Text: f.Text,
	}}, nil
}

// list splits what was typed into a list at commas and line ends; nothing
// typed is no condition (nil).
func list(s string) []string {
	var out []string
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func readTestForm(r *http.Request) testForm {
	v := r.PostFormValue
	return testForm{
		Mode: v("ev_mode"), Source: v("ev_source"), Kind: v("ev_kind"), Text: v("ev_text"), Labels: v("ev_labels"),
		Repo: v("ev_repo"), Paths: v("ev_paths"), Actor: v("ev_actor"), Channel: v("ev_channel"),
		Payload: v("ev_payload"), Delivery: v("ev_delivery"), DeliverySource: v("ev_delivery_source"),
	}
}

// request is the explain request the test form describes.
func (t testForm) request() (*admin.ExplainRequest, error) {
	req := &admin.ExplainRequest{}
	switch t.Mode {
	case "payload":
		if strings.TrimSpace(t.Payload) == "" {
			return nil, bot.Errorf(bot.EINVALID, "payload: paste an event as JSON, as POST /api/v1/explain takes it")
		}
		if err := httpapi.DecodeBytes([]byte(t.Payload), req); err != nil {
			return nil, bot.Errorf(bot.EINVALID, "payload: %s", bot.ErrorMessage(err))
		}
		if req.Change != nil {
			return nil, bot.Errorf(bot.EINVALID, "payload: the change to weigh is the rule in the form, not part of the event")
		}
	case "delivery":
		if strings.TrimSpace(t.Delivery) == "" {
			return nil, bot.Errorf(bot.EINVALID, "delivery: give a stored delivery's id (a GitHub delivery id, a Slack event id, a console message id)")
		}
		req.DeliveryID, req.Source = strings.TrimSpace(t.Delivery), strings.TrimSpace(t.DeliverySource)
	case "fields", "":
		source := strings.TrimSpace(t.Source)
		if source == "" {
			source = bot.SourceLocal
		}
		kind := strings.TrimSpace(t.Kind)
		if kind == "" {
			kind = bot.DefaultKind(source)
		}
		ev := bot.Event{
			Source: source, Kind: kind, Text: t.Text, Labels: list(t.Labels), Repo: strings.TrimSpace(t.Repo), Paths: list(t.Paths),
			Actor: strings.TrimSpace(t.Actor), Channel: strings.TrimSpace(t.Channel),
			Addressed: source == bot.SourceLocal || kind == bot.KindSlackMention,
		}
		ev.Requester = bot.Requester{Source: source, ID: ev.Actor}
		if source == bot.SourceLocal && ev.Actor == "" {
			ev.Requester.ID = "local" // what the console records for a message without a user
		}
		if owner, _, ok := strings.Cut(ev.Repo, "/"); ok {
			ev.Org = owner
		}
		req.Event = ev
	default:
		return nil, bot.Errorf(bot.EINVALID, "test an event: want fields, a payload or a delivery id")
	}
	return req, nil
}
