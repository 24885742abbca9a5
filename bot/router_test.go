package bot_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// routerAgents are the five built-in agents with the keywords content
// matching looks for, in the order the agent manager would give them.
func rtAgents() []bot.AgentInfo {
	return []bot.AgentInfo{
		{Name: "coder", Keywords: []string{"refactor", "bug fix", "c++"}},
		{Name: "reviewer", Keywords: []string{"review", "pull request"}},
		{Name: "ops", Keywords: []string{"deploy", "rollback", "incident"}},
		{Name: "triage", Keywords: []string{"triage"}},
		{Name: "docs", Keywords: []string{"documentation", "readme"}},
	}
}

func rtConfig() bot.RoutingConfig {
	return bot.RoutingConfig{
		Commands: map[string]string{"deploy": "coder", "release": "ops"},
		Rules: []bot.Rule{
			{Name: "bugs", Priority: 100, Agent: "coder", Match: bot.Match{Labels: []string{"bug", "defect"}}},
			{Name: "pr-review", Priority: 50, Agent: "reviewer", Match: bot.Match{Kinds: []string{"github.pull_request.*"}}},
			{Name: "security", Priority: 200, Agent: "ops", Match: bot.Match{Sources: []string{"github"}, Labels: []string{"security"}}},
			{Name: "docs-paths", Priority: 60, Agent: "docs", Match: bot.Match{Paths: []string{"docs/**", "**/*.md"}}},
			{Name: "tie-first", Priority: 10, Agent: "coder", Match: bot.Match{Text: `(?i)\btie\b`}},
			{Name: "tie-second", Priority: 10, Agent: "docs", Match: bot.Match{Text: `(?i)\btie\b`}},
			{Name: "infra-repo", Priority: 40, Agent: "ops", Match: bot.Match{Repos: []string{"acme/infra-*"}}},
			{Name: "alerts", Priority: 30, Agent: "ops", Match: bot.Match{Channels: []string{"#alerts", "C0123"}}},
			{Name: "vip", Priority: 20, Agent: "reviewer", Match: bot.Match{Actors: []string{"alice"}}},
			{Name: "hotfix", Priority: 70, Agent: "coder", Match: bot.Match{
				Sources: []string{"slack"}, Kinds: []string{"slack.*"}, Text: `(?i)^hotfix`, Actors: []string{"bob"},
			}},
			{Name: "nightly", Priority: 5, Agent: "triage", Match: bot.Match{Sources: []string{"schedule"}}},
		},
	}
}

func rtRouter(t testing.TB, cfg bot.RoutingConfig) *bot.Router {
	t.Helper()
	r, err := bot.NewRouter(cfg, rtAgents())
	require.NoError(t, err)
	return r
}

func rtLocal(text string) *bot.Event {
	return &bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Actor: "carol", Text: text}
}

func rtSlack(channel, actor, text string) *bot.Event {
	return &bot.Event{Source: bot.SourceSlack, Kind: bot.KindSlackMessage, Channel: channel, Actor: actor, Text: text}
}

func rtGitHub(kind, repo string, labels, paths []string, text string) *bot.Event {
	return &bot.Event{Source: bot.SourceGitHub, Kind: kind, Repo: repo, Labels: labels, Paths: paths, Text: text, Actor: "octocat"}
}

func TestRouterRoute(t *testing.T) {
	r := rtRouter(t, rtConfig())
	mention := func(agent string) bot.Route {
		return bot.Route{Agent: agent, Kind: bot.RouteMention, Reason: "mention @" + agent}
	}
	command := func(agent, name string) bot.Route {
		return bot.Route{Agent: agent, Kind: bot.RouteCommand, Reason: "command /" + name}
	}
	rule := func(agent, name string, prio int) bot.Route {
		return bot.Route{Agent: agent, Kind: bot.RouteRule, Reason: fmt.Sprintf("rule %q (priority %d)", name, prio), Rule: name}
	}
	content := func(agent, kw string) bot.Route {
		return bot.Route{Agent: agent, Kind: bot.RouteKeyword, Reason: fmt.Sprintf("content: keyword %q", kw)}
	}
	def := bot.Route{Agent: "triage", Kind: bot.RouteDefault, Reason: "default"}

	tests := []struct {
		name string
		ev   *bot.Event
		want bot.Route
	}{
		// Mentions.
		{"mention", rtLocal("@coder fix the flaky login test"), mention("coder")},
		{"mention is case-insensitive", rtLocal("@CODER please look"), mention("coder")},
		{"first of several mentions", rtLocal("@reviewer and then @coder"), mention("reviewer")},
		{"unknown mention is skipped", rtLocal("@bob @docs can you help"), mention("docs")},
		{"only an unknown mention falls through", rtLocal("@bob hello there"),
			bot.Route{Agent: "triage", Kind: bot.RouteDefault, Reason: `default: no agent "@bob"`, Unknown: []string{"bob"}}},
		{"a misspelt agent is named with the one meant", rtLocal("@Codr fix it, @codr! @revewer?"),
			bot.Route{Agent: "triage", Kind: bot.RouteDefault, Unknown: []string{"Codr", "codr", "revewer"},
				Reason: `default: no agent "@Codr" (did you mean @coder?), "@revewer" (did you mean @reviewer?)`}},
		{"an unknown mention does not hide a command", rtLocal("@codr\n/deploy it"),
			bot.Route{Agent: "coder", Kind: bot.RouteCommand, Reason: "command /deploy", Unknown: []string{"codr"}}},
		{"a keyword route names the agent that is not one", rtLocal("@revewer please rollback"),
			bot.Route{Agent: "ops", Kind: bot.RouteKeyword, Unknown: []string{"revewer"},
				Reason: `content: keyword "rollback"; no agent "@revewer" (did you mean @reviewer?)`}},
		{"mention beats command", rtLocal("@docs\n/deploy prod"), mention("docs")},
		{"mention beats rule", rtGitHub("github.issue_comment.created", "acme/web", []string{"bug"}, nil, "@reviewer have a look"), mention("reviewer")},
		{"e-mail address is no mention", rtLocal("write to coder@example.com"), def},

		// Commands.
		{"custom command", rtLocal("/release v1.2"), command("ops", "release")},
		{"custom command overrides built-in", rtLocal("/deploy staging"), command("coder", "deploy")},
		{"built-in command", rtLocal("/review"), command("reviewer", "review")},
		{"command set by the source in upper case", &bot.Event{Source: bot.SourceSlack, Kind: bot.KindSlackCommand, Command: "Release"}, command("ops", "release")},
		{"command without mapping falls through to default", rtLocal("/frobnicate now"), def},
		{"command without mapping falls through to rule", rtSlack("alerts", "dave", "/frobnicate"), rule("ops", "alerts", 30)},
		{"command beats rule", rtGitHub("github.issue_comment.created", "acme/web", []string{"bug"}, nil, "/docs"), command("docs", "docs")},

		// Rules: priority and ties.
		{"higher priority wins", rtGitHub("github.issues.labeled", "acme/web", []string{"bug", "security"}, nil, ""), rule("ops", "security", 200)},
		{"same priority: file order", rtLocal("a tie again"), rule("coder", "tie-first", 10)},
		{"rule beats content", rtGitHub("github.issues.opened", "acme/web", []string{"bug"}, nil, "please deploy"), rule("coder", "bugs", 100)},

		// Rules: every match field.
		{"labels any of", rtGitHub("github.issues.opened", "acme/web", []string{"ui", "defect"}, nil, ""), rule("coder", "bugs", 100)},
		{"labels case-insensitive", rtGitHub("github.issues.opened", "acme/web", []string{"Bug"}, nil, ""), rule("coder", "bugs", 100)},
		{"sources: security needs github", &bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Labels: []string{"security"}}, def},
		{"sources: schedule", &bot.Event{Source: bot.SourceSchedule, Kind: bot.KindScheduleTick, Text: "nightly report"}, rule("triage", "nightly", 5)},
		{"kinds glob", rtGitHub("github.pull_request.opened", "acme/web", nil, []string{"src/main.go"}, ""), rule("reviewer", "pr-review", 50)},
		{"kinds glob does not match other kinds", rtGitHub("github.issues.opened", "acme/web", nil, nil, ""), def},
		{"paths: ** over nested dirs", rtGitHub("github.pull_request.synchronize", "acme/web", nil, []string{"docs/guide/intro.txt"}, ""), rule("docs", "docs-paths", 60)},
		{"paths: **/*.md at the root", rtGitHub("github.pull_request.opened", "acme/web", nil, []string{"README.md"}, ""), rule("docs", "docs-paths", 60)},
		{"paths: any of the changed files", rtGitHub("github.pull_request.opened", "acme/web", nil, []string{"src/a.go", "pkg/b/c.md"}, ""), rule("docs", "docs-paths", 60)},
		{"paths: no file matches", rtGitHub("github.pull_request.opened", "acme/web", nil, []string{"src/a.go", "docs.go"}, ""), rule("reviewer", "pr-review", 50)},
		{"repos glob", rtGitHub("github.issues.opened", "acme/infra-prod", nil, nil, ""), rule("ops", "infra-repo", 40)},
		{"repos glob is case-insensitive", rtGitHub("github.issues.opened", "Acme/Infra-Prod", nil, nil, ""), rule("ops", "infra-repo", 40)},
		{"repos glob: * stops at /", rtGitHub("github.issues.opened", "acme/infra", nil, nil, ""), def},
		{"channels by name", rtSlack("alerts", "dave", "disk full"), rule("ops", "alerts", 30)},
		{"channels by id", rtSlack("C0123", "dave", "disk full"), rule("ops", "alerts", 30)},
		{"actors case-insensitive", rtSlack("general", "Alice", "thoughts?"), rule("reviewer", "vip", 20)},
		{"text regex", rtLocal("Tie breaker"), rule("coder", "tie-first", 10)},
		{"text regex needs a word", rtLocal("tied up"), def},
		{"several fields all hold", rtSlack("general", "bob", "hotfix for login"), rule("coder", "hotfix", 70)},
		{"several fields, actor fails", rtSlack("general", "carol", "hotfix for login"), def},
		{"several fields, text fails", rtSlack("general", "bob", "no hotfix yet"), def},
		{"several fields, source fails", &bot.Event{Source: bot.SourceLocal, Kind: "slack.message", Actor: "bob", Text: "hotfix for login"}, def},

		// Content.
		{"content keyword", rtLocal("please deploy the thing"), content("ops", "deploy")},
		{"content is case-insensitive", rtLocal("DEPLOY now"), content("ops", "deploy")},
		{"content needs a whole word", rtLocal("the deployment notes"), def},
		{"content: agents in order", rtLocal("deploy after the refactor"), content("coder", "refactor")},
		{"content: keywords in order", rtLocal("a pull request to review"), content("reviewer", "review")},
		{"content: phrase", rtLocal("needs a bug fix, urgently"), content("coder", "bug fix")},
		{"content: keyword ending in a symbol", rtLocal("rewrite it in c++, fast"), content("coder", "c++")},
		{"content: keyword at the end", rtLocal("update the README"), content("docs", "readme")},

		// Default.
		{"default", rtLocal("hello"), def},
		{"empty event", &bot.Event{}, def},
	}
	require.GreaterOrEqual(t, len(tests), 30)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.ev.FillFromText()
			got := r.Route(tt.ev)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestRouterDefaultAgentOverride(t *testing.T) {
	r := rtRouter(t, bot.RoutingConfig{DefaultAgent: "docs"})
	ev := rtLocal("hello")
	ev.FillFromText()
	require.Equal(t, bot.Route{Agent: "docs", Kind: bot.RouteDefault, Reason: "default"}, r.Route(ev))
	require.Equal(t, "docs", r.DefaultAgent())
}

func TestRouterBuiltinCommandDroppedWithoutItsAgent(t *testing.T) {
	agents := slices.DeleteFunc(rtAgents(), func(a bot.AgentInfo) bool { return a.Name == "docs" })
	r, err := bot.NewRouter(bot.RoutingConfig{}, agents)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"deploy": "ops", "review": "reviewer", "triage": "triage"}, r.Commands())

	ev := rtLocal("/docs please")
	ev.FillFromText()
	require.Equal(t, bot.Route{Agent: "triage", Kind: bot.RouteDefault, Reason: "default"}, r.Route(ev))
}

func TestRouterCatchAllRule(t *testing.T) {
	r := rtRouter(t, bot.RoutingConfig{Rules: []bot.Rule{{Name: "all", Agent: "coder"}}})
	ev := rtLocal("deploy")
	ev.FillFromText()
	require.Equal(t, bot.Route{Agent: "coder", Kind: bot.RouteRule, Reason: `rule "all" (priority 0)`, Rule: "all"}, r.Route(ev))
	require.Equal(t, "any event", r.Rules()[0].Match)
}

func TestRouterRulesListedInEvaluationOrder(t *testing.T) {
	r := rtRouter(t, rtConfig())
	var names []string
	for _, ri := range r.Rules() {
		names = append(names, fmt.Sprintf("%s:%d", ri.Name, ri.Priority))
	}
	require.Equal(t, []string{
		"security:200", "bugs:100", "hotfix:70", "docs-paths:60", "pr-review:50",
		"infra-repo:40", "alerts:30", "vip:20", "tie-first:10", "tie-second:10", "nightly:5",
	}, names)
	require.Equal(t, bot.RuleInfo{
		Name: "hotfix", Priority: 70, Agent: "coder",
		Match: "sources slack; kinds slack.*; actors bob; text /(?i)^hotfix/", Origin: "config",
	}, r.Rules()[2])
}

func TestRouterNeedsPaths(t *testing.T) {
	require.True(t, rtRouter(t, rtConfig()).NeedsPaths())
	require.False(t, rtRouter(t, bot.RoutingConfig{Rules: []bot.Rule{
		{Name: "bugs", Agent: "coder", Match: bot.Match{Labels: []string{"bug"}}},
	}}).NeedsPaths())
}

func TestNewRouterErrors(t *testing.T) {
	rule := func(name, agent string, m bot.Match) bot.Rule { return bot.Rule{Name: name, Agent: agent, Match: m} }
	ok := rule("ok", "coder", bot.Match{})
	tests := []struct {
		name   string
		cfg    bot.RoutingConfig
		agents []bot.AgentInfo // rtAgents() when nil
		want   []bot.FieldError
	}{
		{
			name: "unknown default agent",
			cfg:  bot.RoutingConfig{DefaultAgent: "tirage"},
			want: []bot.FieldError{{Field: "routing.default_agent", Msg: `unknown agent "tirage"`}},
		},
		{
			name:   "implicit default agent missing",
			agents: []bot.AgentInfo{{Name: "coder"}},
			want:   []bot.FieldError{{Field: "routing.default_agent", Msg: `unknown agent "triage"`}},
		},
		{
			name: "agent names are exact",
			cfg:  bot.RoutingConfig{DefaultAgent: "Triage"},
			want: []bot.FieldError{{Field: "routing.default_agent", Msg: `unknown agent "Triage"`}},
		},
		{
			name: "negative thread window",
			cfg:  bot.RoutingConfig{ThreadWindow: -time.Hour},
			want: []bot.FieldError{{Field: "routing.thread_window", Msg: "-1h0m0s is negative"}},
		},
		{
			name: "command with unknown agent",
			cfg:  bot.RoutingConfig{Commands: map[string]string{"deploy": "opz"}},
			want: []bot.FieldError{{Field: "routing.commands.deploy", Msg: `unknown agent "opz"`}},
		},
		{
			name: "command without agent",
			cfg:  bot.RoutingConfig{Commands: map[string]string{"ship": ""}},
			want: []bot.FieldError{{Field: "routing.commands.ship", Msg: "no agent given"}},
		},
		{
			name: "command written with its slash",
			cfg:  bot.RoutingConfig{Commands: map[string]string{"/ship": "ops"}},
			want: []bot.FieldError{{Field: `routing.commands["/ship"]`, Msg: `bad command name "/ship": write it without the slash`}},
		},
		{
			name: "command name with a space",
			cfg:  bot.RoutingConfig{Commands: map[string]string{"ship it": "ops"}},
			want: []bot.FieldError{{Field: `routing.commands["ship it"]`, Msg: `bad command name "ship it": want letters, digits, - and _`}},
		},
		{
			name: "commands differing in case only",
			cfg:  bot.RoutingConfig{Commands: map[string]string{"Ship": "ops", "ship": "ops"}},
			want: []bot.FieldError{{Field: "routing.commands.ship", Msg: `duplicate command "ship" (also "Ship"; command names are case-insensitive)`}},
		},
		{
			name: "rule with unknown agent",
			cfg:  bot.RoutingConfig{Rules: []bot.Rule{ok, rule("b", "coder", bot.Match{}), rule("c", "tirage", bot.Match{})}},
			want: []bot.FieldError{{Field: "routing.rules[2].agent", Msg: `unknown agent "tirage"`}},
		},
		{
			name: "rule without agent",
			cfg:  bot.RoutingConfig{Rules: []bot.Rule{rule("a", "", bot.Match{})}},
			want: []bot.FieldError{{Field: "routing.rules[0].agent", Msg: "a rule needs an agent"}},
		},
		{
			name: "rule without name",
			cfg:  bot.RoutingConfig{Rules: []bot.Rule{ok, rule(" ", "coder", bot.Match{})}},
			want: []bot.FieldError{{Field: "routing.rules[1].name", Msg: "a rule needs a name (it is recorded with every decision the rule makes)"}},
		},
		{
			name: "duplicate rule name",
			cfg:  bot.RoutingConfig{Rules: []bot.Rule{ok, rule("b", "coder", bot.Match{}), rule("ok", "docs", bot.Match{})}},
			want: []bot.FieldError{{Field: "routing.rules[2].name", Msg: `duplicate rule name "ok" (also routing.rules[0])`}},
		},
		{
			name: "bad regular expression",
			cfg:  bot.RoutingConfig{Rules: []bot.Rule{rule("a", "coder", bot.Match{Text: "("})}},
			want: []bot.FieldError{{Field: "routing.rules[0].match.text", Msg: `bad regular expression "(": missing closing )`}},
		},
		{
			name: "bad kinds glob",
			cfg:  bot.RoutingConfig{Rules: []bot.Rule{rule("a", "coder", bot.Match{Kinds: []string{"github.*", "["}})}},
			want: []bot.FieldError{{Field: "routing.rules[0].match.kinds[1]", Msg: `bad glob "[": syntax error in pattern`}},
		},
		{
			name: "bad repos glob",
			cfg:  bot.RoutingConfig{Rules: []bot.Rule{rule("a", "coder", bot.Match{Repos: []string{"acme/{a,b"}})}},
			want: []bot.FieldError{{Field: "routing.rules[0].match.repos[0]", Msg: `bad glob "acme/{a,b": syntax error in pattern`}},
		},
		{
			name: "bad paths glob",
			cfg:  bot.RoutingConfig{Rules: []bot.Rule{rule("a", "coder", bot.Match{Paths: []string{`docs/\`}})}},
			want: []bot.FieldError{{Field: "routing.rules[0].match.paths[0]", Msg: `bad glob "docs/\\": syntax error in pattern`}},
		},
		{
			name: "empty label",
			cfg:  bot.RoutingConfig{Rules: []bot.Rule{rule("a", "coder", bot.Match{Labels: []string{"bug", " "}})}},
			want: []bot.FieldError{{Field: "routing.rules[0].match.labels[1]", Msg: "empty value"}},
		},
		{
			name: "empty kind",
			cfg:  bot.RoutingConfig{Rules: []bot.Rule{rule("a", "coder", bot.Match{Kinds: []string{""}})}},
			want: []bot.FieldError{{Field: "routing.rules[0].match.kinds[0]", Msg: "empty value"}},
		},
		{
			name: "unknown source",
			cfg:  bot.RoutingConfig{Rules: []bot.Rule{rule("a", "coder", bot.Match{Sources: []string{"githb"}})}},
			want: []bot.FieldError{{Field: "routing.rules[0].match.sources[0]", Msg: `unknown source "githb" (want local, github, slack or schedule)`}},
		},
		{
			name: "every problem is reported, in config order",
			cfg: bot.RoutingConfig{
				DefaultAgent: "nobody",
				Commands:     map[string]string{"b": "x", "a": "y"},
				Rules: []bot.Rule{
					rule("", "z", bot.Match{Text: "[", Actors: []string{""}}),
				},
			},
			want: []bot.FieldError{
				{Field: "routing.default_agent", Msg: `unknown agent "nobody"`},
				{Field: "routing.commands.a", Msg: `unknown agent "y"`},
				{Field: "routing.commands.b", Msg: `unknown agent "x"`},
				{Field: "routing.rules[0].name", Msg: "a rule needs a name (it is recorded with every decision the rule makes)"},
				{Field: "routing.rules[0].agent", Msg: `unknown agent "z"`},
				{Field: "routing.rules[0].match.actors[0]", Msg: "empty value"},
				{Field: "routing.rules[0].match.text", Msg: `bad regular expression "[": missing closing ]`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agents := tt.agents
			if agents == nil {
				agents = rtAgents()
			}
			r, err := bot.NewRouter(tt.cfg, agents)
			require.Error(t, err)
			require.Nil(t, r)
			require.Equal(t, tt.want, rtFieldErrors(t, err))
		})
	}
}

// fieldErrors flattens what NewRouter returned: one *FieldError, or several
// joined.
func rtFieldErrors(t *testing.T, err error) []bot.FieldError {
	t.Helper()
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var out []bot.FieldError
	for _, e := range errs {
		var fe *bot.FieldError
		require.True(t, errors.As(e, &fe), "not a *FieldError: %v", e)
		require.Equal(t, fe.Field+": "+fe.Msg, e.Error())
		out = append(out, *fe)
	}
	return out
}

// benchRouter builds a router with n rules shaped like a large organisation's
// config: most rules narrow by source and kind, then by label, repo, path or
// channel; one in ten looks at the text.
func rtBenchRouter(tb testing.TB, n int) *bot.Router {
	kinds := []string{"github.issues.*", "github.pull_request.*", "github.issue_comment.created", "slack.*", "github.push"}
	var rules []bot.Rule
	for i := range n {
		m := bot.Match{}
		switch i % 5 {
		case 0:
			m.Sources = []string{"github"}
			m.Kinds = []string{kinds[i%len(kinds)]}
			m.Labels = []string{fmt.Sprintf("team-%d", i), fmt.Sprintf("area-%d", i)}
		case 1:
			m.Kinds = []string{"github.pull_request.*"}
			m.Paths = []string{fmt.Sprintf("services/svc-%d/**", i), fmt.Sprintf("**/*.%d.proto", i)}
		case 2:
			m.Sources = []string{"github"}
			m.Repos = []string{fmt.Sprintf("acme/repo-%d-*", i)}
		case 3:
			m.Sources = []string{"slack"}
			m.Channels = []string{fmt.Sprintf("C%06d", i)}
		case 4:
			if i%10 == 4 {
				m.Kinds = []string{"github.*"}
				m.Text = fmt.Sprintf(`(?i)\bticket-%d\b`, i)
			} else {
				m.Actors = []string{fmt.Sprintf("user-%d", i)}
			}
		}
		rules = append(rules, bot.Rule{Name: fmt.Sprintf("rule-%d", i), Priority: i % 7, Agent: "coder", Match: m})
	}
	r, err := bot.NewRouter(bot.RoutingConfig{Rules: rules}, rtAgents())
	require.NoError(tb, err)
	return r
}

// benchEvent matches no rule, so Route examines all of them and then the
// content keywords: the worst case.
func rtBenchEvent() *bot.Event {
	var paths []string
	for i := range 30 {
		paths = append(paths, fmt.Sprintf("internal/pkg%d/file%d.go", i%4, i))
	}
	ev := &bot.Event{
		Source: bot.SourceGitHub, Kind: "github.pull_request.opened", Repo: "acme/monorepo", Actor: "octocat",
		Labels: []string{"enhancement", "needs-review", "size/L"},
		Paths:  paths,
		Text: strings.Repeat("This change reworks the way the scheduler handles missed firings. ", 6) +
			"It has tests and updates nothing else.",
	}
	ev.FillFromText()
	return ev
}

func BenchmarkRoute1000Rules(b *testing.B) {
	r := rtBenchRouter(b, 1000)
	ev := rtBenchEvent()
	require.Equal(b, "default", r.Route(ev).Reason)
	lat := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		r.Route(ev)
		if len(lat) < cap(lat) {
			lat = append(lat, time.Since(start))
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}
