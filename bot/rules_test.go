package bot_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// A rule made through the API is checked by the config's own check of a
// rule: every case answers what the config says of the same rule, without
// the place in the file.
func TestCheckRuleIsTheConfigCheck(t *testing.T) {
	base := bot.RoutingConfig{Rules: []bot.Rule{
		{Name: "bugs", Priority: 100, Agent: "coder", Match: bot.Match{Labels: []string{"bug"}}},
	}}
	router := rtRouter(t, base)
	router, warnings := router.WithStoredRules([]bot.StoredRule{
		{ID: "rule_1", Rule: bot.Rule{Name: "docs-ui", Agent: "docs", Match: bot.Match{Paths: []string{"docs/**"}}}, CreatedBy: "alice", CreatedAt: time.Now()},
	})
	require.Empty(t, warnings)

	for _, tc := range []struct {
		name string
		id   string
		rule bot.Rule
		want []string // problems, each "field: why"; none when valid
	}{
		{name: "valid", rule: bot.Rule{Name: "x", Agent: "ops", Match: bot.Match{Kinds: []string{"github.issues.*"}, Text: `(?i)deploy`}}},
		{name: "no conditions routes every event", rule: bot.Rule{Name: "all", Agent: "triage"}},
		{name: "no name", rule: bot.Rule{Agent: "coder"},
			want: []string{"name: a rule needs a name (it is recorded with every decision the rule makes)"}},
		{name: "blank name", rule: bot.Rule{Name: "  ", Agent: "coder"},
			want: []string{"name: a rule needs a name (it is recorded with every decision the rule makes)"}},
		{name: "no agent", rule: bot.Rule{Name: "x"}, want: []string{"agent: a rule needs an agent"}},
		{name: "unknown agent", rule: bot.Rule{Name: "x", Agent: "nobody"}, want: []string{`agent: unknown agent "nobody"`}},
		{name: "agent spelled otherwise", rule: bot.Rule{Name: "x", Agent: "Coder"}, want: []string{`agent: unknown agent "Coder"`}},
		{name: "bad regular expression", rule: bot.Rule{Name: "x", Agent: "coder", Match: bot.Match{Text: "(deploy"}},
			want: []string{`match.text: bad regular expression "(deploy": missing closing )`}},
		{name: "bad glob", rule: bot.Rule{Name: "x", Agent: "coder", Match: bot.Match{Paths: []string{"docs/[a"}}},
			want: []string{`match.paths[0]: bad glob "docs/[a": syntax error in pattern`}},
		{name: "empty value", rule: bot.Rule{Name: "x", Agent: "coder", Match: bot.Match{Labels: []string{"bug", " "}}},
			want: []string{"match.labels[1]: empty value"}},
		{name: "empty glob", rule: bot.Rule{Name: "x", Agent: "coder", Match: bot.Match{Kinds: []string{""}}},
			want: []string{"match.kinds[0]: empty value"}},
		{name: "unknown source", rule: bot.Rule{Name: "x", Agent: "coder", Match: bot.Match{Sources: []string{"jira"}}},
			want: []string{`match.sources[0]: unknown source "jira" (want local, github, slack or schedule)`}},
		{name: "unicode name", rule: bot.Rule{Name: "déploiements ✓ 部署", Agent: "ops"}},
		{name: "name as long as it may be", rule: bot.Rule{Name: strings.Repeat("é", bot.MaxRuleName), Agent: "ops"}},
		{name: "name too long", rule: bot.Rule{Name: strings.Repeat("x", 500000), Agent: "ops"},
			want: []string{"name: 500000 characters, over the 200 a rule's name may have (it is recorded with every decision the rule makes)"}},
		{name: "name with a line break", rule: bot.Rule{Name: "deploys\nrule \"bugs\" (priority 100)", Agent: "ops"},
			want: []string{"name: holds the control character U+000A: a rule's name is shown to people and recorded as written"}},
		{name: "name with a NUL", rule: bot.Rule{Name: "x\x00", Agent: "ops"},
			want: []string{"name: holds the control character U+0000: a rule's name is shown to people and recorded as written"}},
		{name: "name written right to left", rule: bot.Rule{Name: "safe\u202eyolped", Agent: "ops"},
			want: []string{"name: holds the control character U+202E: a rule's name is shown to people and recorded as written"}},
		{name: "name not UTF-8", rule: bot.Rule{Name: "x\xff", Agent: "ops"},
			want: []string{"name: not UTF-8 text: a rule's name is shown to people and recorded as written"}},
		{name: "label with a control character", rule: bot.Rule{Name: "x", Agent: "ops", Match: bot.Match{Labels: []string{"bug\x1b[31m"}}},
			want: []string{"match.labels[0]: holds the control character U+001B"}},
		{name: "glob with a NUL", rule: bot.Rule{Name: "x", Agent: "ops", Match: bot.Match{Repos: []string{"acme/\x00*"}}},
			want: []string{"match.repos[0]: holds the control character U+0000"}},
		{name: "regular expression over lines", rule: bot.Rule{Name: "x", Agent: "ops", Match: bot.Match{Text: "deploy:\n\tnow\r\n"}}},
		{name: "regular expression with a NUL", rule: bot.Rule{Name: "x", Agent: "ops", Match: bot.Match{Text: "deploy\x00"}},
			want: []string{"match.text: holds the control character U+0000"}},
		{name: "regular expression too long", rule: bot.Rule{Name: "x", Agent: "ops", Match: bot.Match{Text: strings.Repeat("(a*)*", 20000)}},
			want: []string{"match.text: 100000 bytes, over the 4096 a rule's regular expression may have (every event is matched against it)"}},
		{name: "a config rule's name", rule: bot.Rule{Name: "bugs", Agent: "coder"},
			want: []string{`name: duplicate rule name "bugs" (also config)`}},
		{name: "a stored rule's name", rule: bot.Rule{Name: "docs-ui", Agent: "coder"},
			want: []string{`name: duplicate rule name "docs-ui" (also stored:rule_1)`}},
		{name: "its own name, when edited", id: "rule_1", rule: bot.Rule{Name: "docs-ui", Agent: "coder"}},
		{name: "several problems at once", rule: bot.Rule{Name: "x", Agent: "nobody", Match: bot.Match{Text: "(", Repos: []string{""}}},
			want: []string{`agent: unknown agent "nobody"`, "match.repos[0]: empty value", `match.text: bad regular expression "(": missing closing )`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := router.CheckRule(tc.id, tc.rule)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.Equal(t, tc.want, problems(err))
			for _, e := range unjoin(err) {
				var fe *bot.FieldError
				require.ErrorAs(t, e, &fe, "each problem names its field")
			}
			// The config says the same of the rule at its place.
			if strings.HasPrefix(tc.name, "a ") || tc.name == "its own name, when edited" {
				return // names are compared with other rules below
			}
			cfg := bot.RoutingConfig{Rules: []bot.Rule{tc.rule}}
			_, cerr := bot.NewRouter(cfg, rtAgents())
			var fromConfig []string
			for _, p := range problems(cerr) {
				fromConfig = append(fromConfig, strings.TrimPrefix(p, "routing.rules[0]."))
			}
			require.Equal(t, tc.want, fromConfig)
		})
	}
}

func problems(err error) []string {
	var out []string
	for _, e := range unjoin(err) {
		out = append(out, e.Error())
	}
	return out
}

func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// Config rules and stored rules decide together: higher priority first,
// and at one priority the config's (in file order) before the stored ones
// (in the order they were made). A stored rule's decision names it.
func TestStoredRulesMergeByPriorityThenOrigin(t *testing.T) {
	cfg := bot.RoutingConfig{Rules: []bot.Rule{
		{Name: "bugs", Priority: 10, Agent: "coder", Match: bot.Match{Labels: []string{"bug"}}, Origin: "config.yaml:12"},
		{Name: "low", Priority: 1, Agent: "triage", Match: bot.Match{Labels: []string{"bug"}}, Origin: "config.yaml:16"},
	}}
	base := rtRouter(t, cfg)
	made := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	stored := func(id, name string, prio int, agent string) bot.StoredRule {
		return bot.StoredRule{ID: id, Rule: bot.Rule{Name: name, Priority: prio, Agent: agent, Match: bot.Match{Labels: []string{"bug"}}},
			CreatedBy: "alice", CreatedAt: made}
	}
	ev := rtGitHub("github.issues.labeled", "acme/api", []string{"bug"}, nil, "")

	r, warnings := base.WithStoredRules([]bot.StoredRule{stored("rule_1", "ui-high", 20, "ops"), stored("rule_2", "ui-tie", 10, "docs")})
	require.Empty(t, warnings)
	require.Equal(t, bot.Route{Agent: "ops", Kind: bot.RouteRule, Reason: `rule "ui-high" (priority 20, stored:rule_1)`, Rule: "ui-high", Origin: "stored:rule_1"}, r.Route(ev))
	var order []string
	for _, ri := range r.Rules() {
		order = append(order, ri.Name+"@"+ri.Origin)
	}
	require.Equal(t, []string{"ui-high@stored:rule_1", "bugs@config.yaml:12", "ui-tie@stored:rule_2", "low@config.yaml:16"}, order)
	info := r.Rules()[0]
	require.Equal(t, "rule_1", info.ID)
	require.Equal(t, "alice", info.CreatedBy)
	require.Equal(t, made, *info.CreatedAt)

	// Moved below the config's rule at the same priority, it decides no more.
	r, _ = base.WithStoredRules([]bot.StoredRule{stored("rule_1", "ui-high", 10, "ops")})
	require.Equal(t, "bugs", r.Route(ev).Rule)
	// Replacing the stored rules leaves the config's as they are.
	r, _ = r.WithStoredRules(nil)
	require.Equal(t, []string{"bugs", "low"}, names(r.Rules()))
	require.False(t, r.NeedsPaths())
	r, _ = r.WithStoredRules([]bot.StoredRule{{ID: "rule_3", Rule: bot.Rule{Name: "p", Agent: "docs", Match: bot.Match{Paths: []string{"docs/**"}}}}})
	require.True(t, r.NeedsPaths(), "a stored rule on paths makes GitHub fetch a pull request's files")
}

// A stored rule that no longer compiles (its agent left the config, the
// config took its name) routes nothing and is said; the others route.
func TestStoredRuleThatNoLongerCompilesIsLeftOut(t *testing.T) {
	base := rtRouter(t, bot.RoutingConfig{Rules: []bot.Rule{{Name: "bugs", Agent: "coder", Match: bot.Match{Labels: []string{"bug"}}}}})
	r, warnings := base.WithStoredRules([]bot.StoredRule{
		{ID: "rule_1", Rule: bot.Rule{Name: "gone", Agent: "release-writer"}},
		{ID: "rule_2", Rule: bot.Rule{Name: "bugs", Agent: "ops"}},
		{ID: "rule_3", Rule: bot.Rule{Name: "fine", Agent: "ops", Match: bot.Match{Labels: []string{"ops"}}}},
	})
	require.Equal(t, []string{
		`stored rule rule_1 ("gone") routes nothing: agent: unknown agent "release-writer"`,
		`stored rule rule_2 ("bugs") routes nothing: name: duplicate rule name "bugs" (also config)`,
	}, warnings)
	require.Equal(t, []string{"bugs", "fine"}, names(r.Rules()))
}

func names(rules []bot.RuleInfo) []string {
	var out []string
	for _, r := range rules {
		out = append(out, r.Name)
	}
	return out
}

// FuzzCheckRule holds the check of a stored rule to the config's: for any
// rule, the problems are the config's for the same rule at its place,
// without the place; a rule that passes routes beside the config's.
func FuzzCheckRule(f *testing.F) {
	f.Add("bugs", "coder", 1, "github", "github.issues.*", "bug", "acme/*", "docs/**", `(?i)\bbug\b`)
	f.Add("", "tirage", -5, "githb", "[", "", "{", `\`, "(")
	f.Add("a", "docs", 0, "SLACK", "**", " ", "acme/**", "**/*.md", "^$")
	router := func(t *testing.T) *bot.Router {
		r, err := bot.NewRouter(bot.RoutingConfig{}, rtAgents())
		require.NoError(t, err)
		return r
	}
	f.Fuzz(func(t *testing.T, name, agent string, prio int, source, kind, label, repo, path, text string) {
		rule := bot.Rule{Name: name, Priority: prio, Agent: agent, Match: bot.Match{
			Sources: []string{source}, Kinds: []string{kind}, Labels: []string{label},
			Repos: []string{repo}, Paths: []string{path}, Text: text,
		}}
		r := router(t)
		err := r.CheckRule("", rule)
		_, cerr := bot.NewRouter(bot.RoutingConfig{Rules: []bot.Rule{rule}}, rtAgents())
		var fromConfig []string
		for _, p := range problems(cerr) {
			fromConfig = append(fromConfig, strings.TrimPrefix(p, "routing.rules[0]."))
		}
		require.Equal(t, fromConfig, problems(err))
		if err != nil {
			return
		}
		merged, warnings := r.WithStoredRules([]bot.StoredRule{{ID: "rule_1", Rule: rule}})
		require.Empty(t, warnings)
		require.Len(t, merged.Rules(), 1)
		require.Equal(t, "stored:rule_1", merged.Rules()[0].Origin)
	})
}
