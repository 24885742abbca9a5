package bot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// OriginStored prefixes the origin of a stored rule: "stored:rule_3".
const OriginStored = "stored:"

// StoredRule is a routing rule made through the API or the admin UI and
// kept in the store, beside the config file's rules: the same fields as a
// config rule, checked by the same function (Router.CheckRule), with an
// id and who made and last changed it, when.
type StoredRule struct {
	ID string `json:"id"`
	Rule
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedBy string    `json:"updated_by,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// Origin is where the rule comes from: "stored:<id>".
func (s StoredRule) Origin() string { return OriginStored + s.ID }

// Validate checks what a store needs of a record: an id, a name, an agent
// and its author. What the rule means (agents, expressions, globs, unique
// names) is the router's to check, before it is stored.
func (s StoredRule) Validate() error {
	switch {
	case s.ID == "":
		return Errorf(EINVALID, "stored rule: no id")
	case strings.TrimSpace(s.Name) == "":
		return Errorf(EINVALID, "stored rule %s: no name", s.ID)
	case s.Agent == "":
		return Errorf(EINVALID, "stored rule %s: no agent", s.ID)
	case s.CreatedBy == "" || s.CreatedAt.IsZero():
		return Errorf(EINVALID, "stored rule %s: who made it and when are not set", s.ID)
	}
	return nil
}

// RuleStore keeps the stored routing rules. The daemon builds its router
// from them and the config's, and changes them for the admin API. Names
// are unique among stored rules: a second rule of a name is ECONFLICT.
type RuleStore interface {
	// ListRules returns every stored rule, in the order they were made.
	ListRules(ctx context.Context) ([]StoredRule, error)
	// CreateRule stores a new rule and gives it its id (rule_<n>); the
	// id of r is ignored.
	CreateRule(ctx context.Context, r StoredRule) (StoredRule, error)
	// UpdateRule replaces the rule of r's id (ENOTFOUND when there is
	// none), keeping who made it and when.
	UpdateRule(ctx context.Context, r StoredRule) (StoredRule, error)
	// DeleteRule removes the rule of that id and returns it (ENOTFOUND
	// when there is none).
	DeleteRule(ctx context.Context, id string) (StoredRule, error)
}

// mergeRules returns the rules in evaluation order: higher priority first;
// at one priority the config's in file order, then the stored ones in the
// order they were made. The stable sort keeps that order within a
// priority.
func mergeRules(config, stored []compiledRule) []compiledRule {
	out := slices.Concat(config, stored)
	slices.SortStableFunc(out, func(a, b compiledRule) int { return cmp.Compare(b.info.Priority, a.info.Priority) })
	return out
}

// duplicateRule is the problem of a rule whose name another rule, at
// other, has already.
func duplicateRule(at, name, other string) error {
	field := ".name"
	if at != "" {
		field = at + field
	} else {
		field = "name"
	}
	return &FieldError{Field: field, Msg: fmt.Sprintf("duplicate rule name %q (also %s)", name, other)}
}

// WithStoredRules returns a router that also routes by rules, in place of
// the stored rules r had: each is compiled by the config's rule check and
// merged with the config's rules (see mergeRules). A rule that no longer
// compiles (its agent was removed from the config, a config rule took its
// name) is left out and said in the warnings, one line each: a stored rule
// never stops a reload or a start.
func (r *Router) WithStoredRules(rules []StoredRule) (*Router, []string) {
	out := *r
	out.stored = make(map[string]StoredRule, len(rules))
	var (
		compiled []compiledRule
		warnings []string
	)
	for _, s := range rules {
		cr, errs := r.compileStored(s, out.stored)
		if len(errs) > 0 {
			warnings = append(warnings, fmt.Sprintf("stored rule %s (%q) routes nothing: %s", s.ID, s.Name, joinProblems(errs)))
			continue
		}
		out.stored[s.Name] = s
		compiled = append(compiled, cr)
	}
	out.rules = mergeRules(r.configRules, compiled)
	out.needsPaths = slices.ContainsFunc(out.rules, func(cr compiledRule) bool { return cr.paths != nil })
	return &out, warnings
}

// compileStored checks and compiles s among the config's rules and the
// stored rules of taken.
func (r *Router) compileStored(s StoredRule, taken map[string]StoredRule) (compiledRule, []error) {
	rule := s.Rule
	rule.Origin = s.Origin()
	cr, errs := compileRule("", rule, r.known)
	cr.info.ID = s.ID
	cr.info.CreatedBy, cr.info.UpdatedBy = s.CreatedBy, s.UpdatedBy
	if !s.CreatedAt.IsZero() {
		t := s.CreatedAt
		cr.info.CreatedAt = &t
	}
	if !s.UpdatedAt.IsZero() {
		t := s.UpdatedAt
		cr.info.UpdatedAt = &t
	}
	if rule.Name != "" {
		if j, ok := r.configNames[rule.Name]; ok {
			where := fmt.Sprintf("routing.rules[%d]", j)
			for _, c := range r.configRules {
				if c.info.Name == rule.Name {
					where = c.info.Origin
				}
			}
			errs = append(errs, duplicateRule("", rule.Name, where))
		} else if other, ok := taken[rule.Name]; ok && other.ID != s.ID {
			errs = append(errs, duplicateRule("", rule.Name, other.Origin()))
		}
	}
	return cr, errs
}

// CheckRule checks rule as a stored rule with the id given ("" for a new
// one) would be checked, against the agents and the other rules of r:
// exactly the config's check of a rule, with the same messages, each
// problem a *FieldError named by the rule's field ("agent",
// "match.text"); several are joined with errors.Join. A rule's name must
// not be any other rule's, of the config or stored.
func (r *Router) CheckRule(id string, rule Rule) error {
	taken := r.stored
	if id != "" {
		taken = make(map[string]StoredRule, len(r.stored))
		for name, s := range r.stored {
			if s.ID != id {
				taken[name] = s
			}
		}
	}
	_, errs := r.compileStored(StoredRule{ID: id, Rule: rule}, taken)
	return errors.Join(errs...)
}

// joinProblems puts problems on one line: "agent: unknown agent \"x\"; match.text: …".
func joinProblems(errs []error) string {
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// known reports whether name is an agent's, spelled as the agent is.
func (r *Router) known(name string) bool {
	a, ok := r.agents[strings.ToLower(name)]
	return ok && a.name == name
}
