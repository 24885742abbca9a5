package daemon_test

import (
	"context"
	"encoding/json"

	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
)

// rulesDaemon runs a daemon whose config file has one rule, "deploys"
// (text deploy → ops, priority 0), written at line 3.
func rulesDaemon(t *testing.T, mutate func(*daemon.Options)) (*running, *configFile) {
	t.Helper()
	f := newConfigFile(t, ruleTo("ops"))
	dir := t.TempDir()
	load := func(ctx context.Context) (*daemon.Setup, error) {
		return daemon.Load(ctx, daemon.LoadOptions{Path: f.path, Getenv: noModelEnv, Override: func(c *config.Config) {
			c.DataDir, c.Server.Listen = dir, "127.0.0.1:0"
		}})
	}
	r := start(t, func(o *daemon.Options) {
		s, err := load(context.Background())
		require.NoError(t, err)
		o.Setup, o.Reload = s, load
		o.NewRunner = func(daemon.RunnerDeps) (bot.Runner, error) {
			return runnerFunc(func(context.Context, bot.RunRequest, bot.Progress) (bot.RunResult, error) {
				return bot.RunResult{Status: bot.ResultSuccess, Reply: "done"}, nil
			}), nil
		}
		if mutate != nil {
			mutate(o)
		}
	})
	return r, f
}

func (r *running) json(t *testing.T, method, path, body string, want int, into any) {
	t.Helper()
	code, b := r.do(t, method, path, body)
	require.Equal(t, want, code, "%s %s: %s", method, path, b)
	if into != nil {
		require.NoError(t, json.Unmarshal(b, into), string(b))
	}
}

func TestRulesMadeThroughTheAPIRouteAtOnceAndAreAudited(t *testing.T) {
	r, f := rulesDaemon(t, nil)

	var rules admin.Rules
	r.json(t, "GET", "/api/v1/rules", "", 200, &rules)
	require.Len(t, rules.Rules, 1)
	require.Equal(t, f.path+":3", rules.Rules[0].Origin, "a config rule says where it is written")
	require.Equal(t, "ops", r.explain(t, "deploy the thing").Agent)

	// A rule of higher priority, made through the API, decides at once.
	var made bot.StoredRule
	r.json(t, "POST", "/api/v1/rules", `{"name":"deploys-to-coder","priority":5,"agent":"coder","match":{"text":"(?i)deploy"}}`, http.StatusCreated, &made)
	require.Equal(t, "rule_1", made.ID)
	require.Equal(t, "admin", made.CreatedBy, "the token's identity")
	e := r.explain(t, "deploy the thing")
	require.Equal(t, "coder", e.Agent)
	require.Equal(t, "deploys-to-coder", e.Rule)
	require.Equal(t, "stored:rule_1", e.Origin)
	require.Equal(t, `rule "deploys-to-coder" (priority 5, stored:rule_1)`, e.Reason)

	r.json(t, "GET", "/api/v1/rules", "", 200, &rules)
	require.Equal(t, []string{"deploys-to-coder", "deploys"}, names(rules.Rules))
	require.Equal(t, "stored:rule_1", rules.Rules[0].Origin)
	require.Equal(t, "rule_1", rules.Rules[0].ID)
	require.Equal(t, "admin", rules.Rules[0].CreatedBy)

	// Moved below the config's rule (same priority: the config's first).
	var moved bot.StoredRule
	r.json(t, "PUT", "/api/v1/rules/rule_1/priority", `{"priority":0}`, 200, &moved)
	require.Equal(t, 0, moved.Priority)
	require.Equal(t, "admin", moved.UpdatedBy)
	require.Equal(t, "ops", r.explain(t, "deploy the thing").Agent)
	r.json(t, "GET", "/api/v1/rules", "", 200, &rules)
	require.Equal(t, []string{"deploys", "deploys-to-coder"}, names(rules.Rules))

	// Edited whole: another agent, another match.
	var edited bot.StoredRule
	r.json(t, "PUT", "/api/v1/rules/rule_1", `{"name":"docs-please","priority":9,"agent":"docs","match":{"text":"(?i)readme"}}`, 200, &edited)
	require.Equal(t, "docs-please", edited.Name)
	require.Equal(t, "admin", edited.CreatedBy)
	require.Equal(t, "docs", r.explain(t, "fix the readme").Agent)
	require.Equal(t, "ops", r.explain(t, "deploy the thing").Agent)
	var got bot.StoredRule
	r.json(t, "GET", "/api/v1/rules/rule_1", "", 200, &got)
	require.Equal(t, edited, got)

	var gone bot.StoredRule
	r.json(t, "DELETE", "/api/v1/rules/rule_1", "", 200, &gone)
	require.Equal(t, "docs-please", gone.Name)
	require.NotEqual(t, "docs", r.explain(t, "fix the readme").Agent)
	for _, call := range [][2]string{{"GET", "/api/v1/rules/rule_1"}, {"DELETE", "/api/v1/rules/rule_1"}, {"PUT", "/api/v1/rules/rule_1/priority"}} {
		body := ""
		if call[0] == "PUT" {
			body = `{"priority":1}`
		}
		require.Equal(t, http.StatusNotFound, r.status(t, call[0], call[1], body), call)
	}

	// Every change is in the audit log, as who made it.
	var page struct {
		Items []policy.AuditRecord `json:"items"`
	}
	r.json(t, "GET", "/api/v1/audit?decision=change", "", 200, &page)
	var reasons, actions []string
	for _, rec := range page.Items {
		require.Equal(t, "admin", rec.By)
		reasons = append(reasons, rec.Reason)
		actions = append(actions, rec.Tool)
	}
	require.Equal(t, []string{"rule.delete", "rule.update", "rule.move", "rule.create"}, actions)
	var last bot.StoredRule
	require.NoError(t, json.Unmarshal([]byte(page.Items[1].Arguments), &last), "the rule as it was made, as JSON")
	require.Equal(t, edited, last)
	require.Equal(t, []string{
		`deleted routing rule "docs-please" (stored:rule_1): priority 9, agent docs, match text /(?i)readme/`,
		`changed routing rule "docs-please" (stored:rule_1): priority 9, agent docs, match text /(?i)readme/`,
		`moved from priority 5 to routing rule "deploys-to-coder" (stored:rule_1): priority 0, agent coder, match text /(?i)deploy/`,
		`created routing rule "deploys-to-coder" (stored:rule_1): priority 5, agent coder, match text /(?i)deploy/`,
	}, reasons)
}

// Rules made through the API are refused exactly as the config refuses
// them, with the config's words for each field, and nothing is stored.
func TestRuleInputIsCheckedAsTheConfigChecksIt(t *testing.T) {
	r, _ := rulesDaemon(t, nil)
	r.json(t, "POST", "/api/v1/rules", `{"name":"mine","agent":"coder","match":{"labels":["bug"]}}`, http.StatusCreated, nil)

	for _, tc := range []struct {
		name, body, want string
	}{
		{"unknown agent", `{"name":"x","agent":"nobody"}`, `agent: unknown agent "nobody"`},
		{"no agent", `{"name":"x"}`, `agent: a rule needs an agent`},
		{"no name", `{"agent":"coder"}`, `name: a rule needs a name (it is recorded with every decision the rule makes)`},
		{"bad regular expression", `{"name":"x","agent":"coder","match":{"text":"(deploy"}}`, `match.text: bad regular expression "(deploy": missing closing )`},
		{"bad glob", `{"name":"x","agent":"coder","match":{"paths":["src/[a"]}}`, `match.paths[0]: bad glob "src/[a": syntax error in pattern`},
		{"empty value", `{"name":"x","agent":"coder","match":{"labels":[""]}}`, `match.labels[0]: empty value`},
		{"unknown source", `{"name":"x","agent":"coder","match":{"sources":["jira"]}}`, `match.sources[0]: unknown source "jira" (want local, github, slack or schedule)`},
		{"the config's rule's name", `{"name":"deploys","agent":"coder"}`, ""},
		{"a stored rule's name", `{"name":"mine","agent":"ops"}`, `name: duplicate rule name "mine" (also stored:rule_1)`},
		{"unknown field", `{"name":"x","agent":"coder","match":{"label":["bug"]}}`, `malformed JSON: unknown field "label"`},
		{"unknown top-level field", `{"name":"x","agent":"coder","when":"always"}`, `malformed JSON: unknown field "when"`},
		{"several at once", `{"name":"x","agent":"nobody","match":{"text":"("}}`, `agent: unknown agent "nobody"; match.text: bad regular expression "(": missing closing )`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body struct{ Error, Code string }
			r.json(t, "POST", "/api/v1/rules", tc.body, http.StatusBadRequest, &body)
			require.Equal(t, bot.EINVALID, body.Code)
			if tc.name == "the config's rule's name" {
				require.Regexp(t, `^name: duplicate rule name "deploys" \(also .*config\.yaml:3\)$`, body.Error)
				return
			}
			require.Equal(t, tc.want, body.Error)
		})
	}
	// An edit is checked the same; its own name is its own.
	var body struct{ Error string }
	r.json(t, "PUT", "/api/v1/rules/rule_1", `{"name":"mine","agent":"nobody"}`, http.StatusBadRequest, &body)
	require.Equal(t, `agent: unknown agent "nobody"`, body.Error)
	r.json(t, "PUT", "/api/v1/rules/rule_1/priority", `{}`, http.StatusBadRequest, &body)
	require.Equal(t, "priority: want the rule's new priority, a whole number", body.Error)

	var rules admin.Rules
	r.json(t, "GET", "/api/v1/rules", "", 200, &rules)
	require.Equal(t, []string{"deploys", "mine"}, names(rules.Rules), "nothing refused was stored")
}

// Explain answers what the rules decide now and what a change being
// edited would decide, for an event described or a stored one.
func TestExplainWithAProposedChange(t *testing.T) {
	r, _ := rulesDaemon(t, nil)
	var stored bot.StoredRule
	r.json(t, "POST", "/api/v1/rules", `{"name":"readme","agent":"docs","match":{"text":"(?i)readme"}}`, http.StatusCreated, &stored)

	explain := func(body string) admin.ChangeExplanation {
		t.Helper()
		var out admin.ChangeExplanation
		r.json(t, "POST", "/api/v1/explain", body, 200, &out)
		return out
	}
	// A new rule, not saved.
	out := explain(`{"source":"local","kind":"local.message","text":"deploy now","change":{"rule":{"name":"new-one","priority":3,"agent":"coder","match":{"text":"deploy"}}}}`)
	require.Equal(t, "ops", out.Current.Agent)
	require.Equal(t, "deploys", out.Current.Rule)
	require.Equal(t, "coder", out.Proposed.Agent)
	require.Equal(t, "new-one", out.Proposed.Rule)
	require.Equal(t, `rule "new-one" (priority 3, stored:new)`, out.Proposed.Reason)
	require.True(t, out.Differs)
	require.Nil(t, out.Then)

	// The stored rule edited: it no longer matches.
	out = explain(`{"source":"local","kind":"local.message","text":"see the readme","change":{"id":"rule_1","rule":{"name":"readme","agent":"docs","match":{"text":"(?i)changelog"}}}}`)
	require.Equal(t, "readme", out.Current.Rule)
	require.Equal(t, bot.RouteKind("keyword"), out.Proposed.Kind, "the docs agent's keyword decides then")
	require.True(t, out.Differs)

	// Deleted; and a change that decides the same says so.
	out = explain(`{"source":"local","kind":"local.message","text":"deploy now","change":{"id":"rule_1","delete":true}}`)
	require.False(t, out.Differs)
	require.Equal(t, out.Current, out.Proposed)

	// A stored delivery, decided again with the change.
	code, body := r.do(t, "POST", "/api/v1/messages", `{"thread":"ops-room","text":"please deploy","id":"m-1"}`)
	require.Equal(t, http.StatusAccepted, code, string(body))
	out = explain(`{"delivery_id":"m-1","change":{"rule":{"name":"new-one","priority":3,"agent":"coder","match":{"text":"deploy"}}}}`)
	require.NotNil(t, out.Then)
	require.Equal(t, "ops", out.Then.Agent)
	require.Equal(t, "ops", out.Current.Agent)
	require.Equal(t, "coder", out.Proposed.Agent)

	// A change the config would refuse is refused with its words; nothing
	// is stored by explaining.
	var bad struct{ Error, Code string }
	r.json(t, "POST", "/api/v1/explain", `{"text":"x","change":{"rule":{"name":"readme","agent":"coder"}}}`, http.StatusBadRequest, &bad)
	require.Equal(t, `name: duplicate rule name "readme" (also stored:rule_1)`, bad.Error)
	r.json(t, "POST", "/api/v1/explain", `{"text":"x","change":{"id":"rule_9","delete":true}}`, http.StatusNotFound, &bad)
	r.json(t, "POST", "/api/v1/explain", `{"text":"x","change":{"rule":{"name":"z","agent":"coder"},"when":1}}`, http.StatusBadRequest, &bad)
	require.Equal(t, `malformed JSON: unknown field "when"`, bad.Error)
	var rules admin.Rules
	r.json(t, "GET", "/api/v1/rules", "", 200, &rules)
	require.Equal(t, []string{"deploys", "readme"}, names(rules.Rules))

}

func names(rules []bot.RuleInfo) []string {
	var out []string
	for _, r := range rules {
		out = append(out, r.Name)
	}
	return out
}
