package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
)

// RuleBook keeps the stored routing rules: each change is checked exactly
// as a config rule is (the same messages, EINVALID), stored, audited as
// the identity given, and in effect on every replica before long; the
// daemon implements it. Propose builds the router a change would make,
// without storing anything, for explain.
type RuleBook interface {
	GetRule(ctx context.Context, id string) (bot.StoredRule, error)
	CreateRule(ctx context.Context, by string, r bot.Rule) (bot.StoredRule, error)
	UpdateRule(ctx context.Context, by, id string, r bot.Rule) (bot.StoredRule, error)
	// MoveRule changes a rule's priority only: where it is tried.
	MoveRule(ctx context.Context, by, id string, priority int) (bot.StoredRule, error)
	DeleteRule(ctx context.Context, by, id string) (bot.StoredRule, error)
	Propose(ctx context.Context, change RuleChange) (bot.Decider, error)
}

// RuleChange is a change of the stored rules not yet made: a new rule (no
// ID), the rule of ID edited, or with Delete, the rule of ID removed.
type RuleChange struct {
	ID     string    `json:"id,omitempty"`
	Rule   *bot.Rule `json:"rule,omitempty"`
	Delete bool      `json:"delete,omitempty"`
}

// RuleRequest is the body of POST /api/v1/rules and PUT
// /api/v1/rules/{id}: the fields of a config rule.
type RuleRequest struct {
	Name     string    `json:"name"`
	Priority int       `json:"priority"`
	Agent    string    `json:"agent"`
	Match    bot.Match `json:"match"`
}

// Rule is the rule the request describes.
func (r RuleRequest) Rule() bot.Rule {
	return bot.Rule{Name: r.Name, Priority: r.Priority, Agent: r.Agent, Match: r.Match}
}

// PriorityRequest is the body of PUT /api/v1/rules/{id}/priority.
type PriorityRequest struct {
	Priority *int `json:"priority"`
}

func (a *API) mountRules(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/rules", a.createRule)
	mux.HandleFunc("GET /api/v1/rules/{id}", a.getRule)
	mux.HandleFunc("PUT /api/v1/rules/{id}", a.updateRule)
	mux.HandleFunc("PUT /api/v1/rules/{id}/priority", a.moveRule)
	mux.HandleFunc("DELETE /api/v1/rules/{id}", a.deleteRule)
}

// ruleBook returns the rule book and who asks, or answers the request
// itself and returns false.
func (a *API) ruleBook(w http.ResponseWriter, r *http.Request) (RuleBook, string, bool) {
	if a.opts.RuleBook == nil {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAVAILABLE, "this daemon keeps no routing rules of its own"))
		return nil, "", false
	}
	id, ok := httpapi.IdentityFrom(r.Context())
	if !ok {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAUTHORIZED, "rules are changed by who authenticated, and this request did not"))
		return nil, "", false
	}
	return a.opts.RuleBook, id.Name, true
}

func (a *API) getRule(w http.ResponseWriter, r *http.Request) {
	if a.opts.RuleBook == nil {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAVAILABLE, "this daemon keeps no routing rules of its own"))
		return
	}
	rule, err := a.opts.RuleBook.GetRule(r.Context(), r.PathValue("id"))
	a.answerRule(w, r, http.StatusOK, rule, err)
}

func (a *API) createRule(w http.ResponseWriter, r *http.Request) {
	book, by, ok := a.ruleBook(w, r)
	if !ok {
		return
	}
	var req RuleRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	rule, err := book.CreateRule(r.Context(), by, req.Rule())
	a.answerRule(w, r, http.StatusCreated, rule, err)
}

func (a *API) updateRule(w http.ResponseWriter, r *http.Request) {
	book, by, ok := a.ruleBook(w, r)
	if !ok {
		return
	}
	var req RuleRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	rule, err := book.UpdateRule(r.Context(), by, r.PathValue("id"), req.Rule())
	a.answerRule(w, r, http.StatusOK, rule, err)
}

func (a *API) moveRule(w http.ResponseWriter, r *http.Request) {
	book, by, ok := a.ruleBook(w, r)
	if !ok {
		return
	}
	var req PriorityRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	if req.Priority == nil {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EINVALID, "priority: want the rule's new priority, a whole number"))
		return
	}
	rule, err := book.MoveRule(r.Context(), by, r.PathValue("id"), *req.Priority)
	a.answerRule(w, r, http.StatusOK, rule, err)
}

func (a *API) deleteRule(w http.ResponseWriter, r *http.Request) {
	book, by, ok := a.ruleBook(w, r)
	if !ok {
		return
	}
	rule, err := book.DeleteRule(r.Context(), by, r.PathValue("id"))
	a.answerRule(w, r, http.StatusOK, rule, err)
}

func (a *API) answerRule(w http.ResponseWriter, r *http.Request, status int, rule bot.StoredRule, err error) {
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	httpapi.JSON(w, status, rule)
}

// ChangeExplanation is the answer of POST /api/v1/explain with a change:
// what the rules in effect decide for the event, what they would decide
// with the change made, and whether the two differ. Then is what was
// decided when a stored event arrived.
type ChangeExplanation struct {
	Then     *bot.Explanation `json:"then,omitempty"`
	Current  bot.Explanation  `json:"current"`
	Proposed bot.Explanation  `json:"proposed"`
	Differs  bool             `json:"differs"`
}

// ExplainChange decides the request's event, or the stored event it
// names, under the rules in effect and with its change made (none: the
// same twice), as POST /api/v1/explain with a change answers; the admin
// UI's test form asks it too.
func ExplainChange(ctx context.Context, o Options, req *ExplainRequest) (ChangeExplanation, error) {
	ev, asOf := &req.Event, time.Time{}
	var out ChangeExplanation
	if req.replay() {
		rep, stored, err := o.replayEvent(ctx, req)
		if err != nil {
			return ChangeExplanation{}, err
		}
		ev, asOf, out.Then = stored, stored.ReceivedAt, &rep.Then
	}
	var router bot.Decider
	if req.Change != nil {
		if o.RuleBook == nil {
			return ChangeExplanation{}, bot.Errorf(bot.EUNAVAILABLE, "this daemon keeps no routing rules of its own")
		}
		var err error
		if router, err = o.RuleBook.Propose(ctx, *req.Change); err != nil {
			return ChangeExplanation{}, err
		}
	}
	current := *ev
	cd, err := o.Intake.DecideWith(ctx, &current, nil, asOf)
	if err != nil {
		return ChangeExplanation{}, err
	}
	out.Current, out.Proposed = cd.Explain(), cd.Explain()
	if router != nil {
		proposed := *ev
		pd, err := o.Intake.DecideWith(ctx, &proposed, router, asOf)
		if err != nil {
			return ChangeExplanation{}, err
		}
		out.Proposed = pd.Explain()
	}
	c, p := out.Current, out.Proposed
	out.Differs = c.WorkItem != p.WorkItem || c.Agent != p.Agent || c.Kind != p.Kind || c.Rule != p.Rule || c.Origin != p.Origin || c.Ingress != p.Ingress
	if err := o.rights(ctx, &out.Current, ev); err != nil {
		return ChangeExplanation{}, err
	}
	if err := o.rights(ctx, &out.Proposed, ev); err != nil {
		return ChangeExplanation{}, err
	}
	return out, nil
}
