package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/bot"
)

// withStoredRules completes s with the routing rules kept in the store: a
// router that routes by them beside the config's rules. A stored rule that
// no longer compiles is left out and logged; it never refuses a start or
// a reload. s itself is not changed.
func withStoredRules(ctx context.Context, s *Setup, rules bot.RuleStore, log *slog.Logger) (*Setup, error) {
	stored, err := rules.ListRules(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the stored routing rules: %w", err)
	}
	router, warnings := s.Router.WithStoredRules(stored)
	for _, w := range warnings {
		log.LogAttrs(ctx, slog.LevelWarn, w)
	}
	next := *s
	next.Router, next.stored = router, stored
	return &next, nil
}

// sharedPoll is how often a replica sharing its store looks whether the
// stored routing rules or skill settings changed without it hearing so (a
// notification sent before it listened, or lost with a connection).
const sharedPoll = 5 * time.Second

// watchShared puts stored routing rules and skill settings changed
// elsewhere in effect when no notification said so: everything that
// listens also polls.
func (d *Daemon) watchShared(ctx context.Context) {
	t := time.NewTicker(sharedPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d.refreshRules(ctx)
		d.refreshSkills(ctx)
	}
}

// refreshRules puts the stored routing rules in effect here when they are
// not those in effect.
func (d *Daemon) refreshRules(ctx context.Context) {
	stored, err := d.store.ListRules(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.log.LogAttrs(ctx, slog.LevelWarn, "look for changed routing rules", slog.String("error", err.Error()))
		}
		return
	}
	if !reflect.DeepEqual(stored, d.config.Current().stored) {
		_ = d.config.Refresh(ctx)
	}
}

// complete makes s, a configuration as Load read it, what the daemon runs:
// with what the installed packages contribute and the stored rules.
func (d *Daemon) complete(ctx context.Context, s *Setup) (*Setup, error) {
	s, err := withPackages(ctx, s, d.skills, d.log)
	if err != nil {
		return nil, err
	}
	return withStoredRules(ctx, s, d.store, d.log)
}

// rulesChanged puts a change of the stored rules in effect here, through
// the coordinator as a change of the packages is, and tells the replicas
// sharing the store, which do the same.
func (d *Daemon) rulesChanged(ctx context.Context) {
	if err := d.config.Refresh(ctx); err != nil {
		d.log.LogAttrs(ctx, slog.LevelError, "a routing rule changed, but the rules could not be put in effect here", slog.String("error", err.Error()))
	}
	d.notify(bot.TopicRules, d.replica)
}

// ruleBook changes the stored routing rules for the admin API: each change
// is checked by the router in effect exactly as a config rule is, stored,
// audited as who asked, and put in effect on every replica.
type ruleBook struct{ d *Daemon }

var _ admin.RuleBook = ruleBook{}

func (b ruleBook) GetRule(ctx context.Context, id string) (bot.StoredRule, error) {
	rules, err := b.d.store.ListRules(ctx)
	if err != nil {
		return bot.StoredRule{}, err
	}
	for _, r := range rules {
		if r.ID == id {
			return r, nil
		}
	}
	return bot.StoredRule{}, b.notStored(id)
}

// notStored is the error of a rule id no stored rule has. A config rule
// named so is no stored rule either: it is changed only in the file it is
// written in, which the answer names.
func (b ruleBook) notStored(id string) error {
	for _, ri := range b.d.config.Current().Router.Rules() {
		if ri.ID == "" && ri.Name == id {
			return bot.Errorf(bot.ENOTFOUND, "no stored rule %q: rule %q is the config's (%s), changed only there", id, ri.Name, ri.Origin)
		}
	}
	return bot.Errorf(bot.ENOTFOUND, "no rule %q", id)
}

// check refuses a rule the config would refuse, with the config's
// messages, naming each field.
func (b ruleBook) check(id string, r bot.Rule) error {
	err := b.d.config.Current().Router.CheckRule(id, r)
	if err == nil {
		return nil
	}
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	msgs := make([]string, len(list))
	for i, e := range list {
		msgs[i] = e.Error()
	}
	return bot.Errorf(bot.EINVALID, "%s", strings.Join(msgs, "; "))
}

func (b ruleBook) CreateRule(ctx context.Context, by string, r bot.Rule) (bot.StoredRule, error) {
	if err := b.check("", r); err != nil {
		return bot.StoredRule{}, err
	}
	rule, err := b.d.store.CreateRule(ctx, bot.StoredRule{Rule: r, CreatedBy: by, CreatedAt: b.d.clock.Now().UTC()})
	if err != nil {
		return bot.StoredRule{}, err
	}
	return rule, b.changed(ctx, by, "rule.create", "created", rule)
}

func (b ruleBook) UpdateRule(ctx context.Context, by, id string, r bot.Rule) (bot.StoredRule, error) {
	if _, err := b.GetRule(ctx, id); err != nil {
		return bot.StoredRule{}, err
	}
	if err := b.check(id, r); err != nil {
		return bot.StoredRule{}, err
	}
	rule, err := b.d.store.UpdateRule(ctx, bot.StoredRule{ID: id, Rule: r, UpdatedBy: by, UpdatedAt: b.d.clock.Now().UTC()})
	if err != nil {
		return bot.StoredRule{}, err
	}
	return rule, b.changed(ctx, by, "rule.update", "changed", rule)
}

func (b ruleBook) MoveRule(ctx context.Context, by, id string, priority int) (bot.StoredRule, error) {
	old, err := b.GetRule(ctx, id)
	if err != nil {
		return bot.StoredRule{}, err
	}
	r := old.Rule
	r.Priority = priority
	if err := b.check(id, r); err != nil {
		return bot.StoredRule{}, err
	}
	rule, err := b.d.store.UpdateRule(ctx, bot.StoredRule{ID: id, Rule: r, UpdatedBy: by, UpdatedAt: b.d.clock.Now().UTC()})
	if err != nil {
		return bot.StoredRule{}, err
	}
	return rule, b.changed(ctx, by, "rule.move", fmt.Sprintf("moved from priority %d to", old.Priority), rule)
}

func (b ruleBook) DeleteRule(ctx context.Context, by, id string) (bot.StoredRule, error) {
	rule, err := b.d.store.DeleteRule(ctx, id)
	if bot.ErrorCode(err) == bot.ENOTFOUND {
		return bot.StoredRule{}, b.notStored(id)
	}
	if err != nil {
		return bot.StoredRule{}, err
	}
	return rule, b.changed(ctx, by, "rule.delete", "deleted", rule)
}

// changed puts a change made as by in effect, tells the other replicas
// and audits it: action names it ("rule.create"; the record's tool, as
// for every change made in the admin UI), the arguments are the rule as
// it is now, the reason says it in words. The change is made whatever the
// audit log answers; an audit record that cannot be written is the
// request's error.
func (b ruleBook) changed(ctx context.Context, by, action, what string, r bot.StoredRule) error {
	b.d.rulesChanged(context.WithoutCancel(ctx))
	args, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode the audit record of %s: %w", action, err)
	}
	rec := policy.AuditRecord{
		Decision: policy.AuditChange, Tool: action, Arguments: string(args), By: by,
		Reason: fmt.Sprintf("%s routing rule %q (%s): priority %d, agent %s, match %s", what, r.Name, r.Origin(), r.Priority, r.Agent, bot.Summarize(r.Match)),
	}
	if err := b.d.audit.Record(ctx, rec); err != nil {
		return fmt.Errorf("rule %s was %s, but its audit record could not be written: %w", r.ID, strings.Fields(what)[0], err)
	}
	return nil
}

// Propose returns the router in effect with change made to its stored
// rules, checked as a change is: nothing is stored.
func (b ruleBook) Propose(ctx context.Context, change admin.RuleChange) (bot.Decider, error) {
	stored, err := b.d.store.ListRules(ctx)
	if err != nil {
		return nil, err
	}
	i := -1
	if change.ID != "" {
		if i = slices.IndexFunc(stored, func(r bot.StoredRule) bool { return r.ID == change.ID }); i < 0 {
			return nil, b.notStored(change.ID)
		}
	}
	switch {
	case change.Delete && change.Rule != nil:
		return nil, bot.Errorf(bot.EINVALID, "change: a deletion carries no rule")
	case change.Delete && i < 0:
		return nil, bot.Errorf(bot.EINVALID, "change: name the rule to delete by its id")
	case change.Delete:
		stored = slices.Delete(stored, i, i+1)
	case change.Rule == nil:
		return nil, bot.Errorf(bot.EINVALID, "change: want the rule as it would be, or delete")
	default:
		if err := b.check(change.ID, *change.Rule); err != nil {
			return nil, err
		}
		if i >= 0 {
			stored[i].Rule = *change.Rule
		} else {
			stored = append(stored, bot.StoredRule{ID: proposedID, Rule: *change.Rule})
		}
	}
	router, warnings := b.d.config.Current().Router.WithStoredRules(stored)
	if len(warnings) > 0 {
		// Checked above; a rule that stopped compiling meanwhile is
		// left out as it is from the router in effect.
		b.d.log.LogAttrs(ctx, slog.LevelDebug, "proposed rules", slog.String("left out", strings.Join(warnings, "; ")))
	}
	return router, nil
}

// proposedID is the id of a new rule in a proposed change: its decisions
// name it "stored:new".
const proposedID = "new"
