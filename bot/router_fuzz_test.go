package bot

import (
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/stretchr/testify/require"
)

// The router's fast paths (glob shapes, literal prefilters, the path index)
// must never change a decision. These targets compare them with the plain
// library calls they stand in for.

func fuzzRoutingConfig() RoutingConfig {
	return RoutingConfig{
		Commands: map[string]string{"ship": "ops"},
		Rules: []Rule{
			{Name: "bugs", Priority: 100, Agent: "coder", Match: Match{Labels: []string{"bug", "Defect"}}},
			{Name: "prs", Priority: 50, Agent: "reviewer", Match: Match{Kinds: []string{"github.pull_request.*"}}},
			{Name: "docs", Priority: 60, Agent: "docs", Match: Match{Paths: []string{"docs/**", "**/*.md", "README", "a/*", "{x,y}/**/z.go"}}},
			{Name: "infra", Priority: 40, Agent: "ops", Match: Match{Repos: []string{"acme/infra-*", "acme/ops"}}},
			{Name: "hotfix", Priority: 70, Agent: "coder", Match: Match{Sources: []string{"slack", "local"}, Text: `(?i)\bhotfix\b`}},
			{Name: "ticket", Priority: 10, Agent: "triage", Match: Match{Text: `TICKET-\d+`}},
			{Name: "incident", Priority: 10, Agent: "ops", Match: Match{Kinds: []string{"github.*.opened"}, Text: `(?i)(sev|incident)[0-9]`}},
		},
	}
}

func fuzzAgents() []AgentInfo {
	return []AgentInfo{
		{Name: "coder", Keywords: []string{"refactor", "c++"}},
		{Name: "reviewer", Keywords: []string{"review"}},
		{Name: "ops", Keywords: []string{"deploy", "straße"}},
		{Name: "triage"},
		{Name: "docs", Keywords: []string{"readme"}},
	}
}

// referenceRoute decides like Router.Route, the slow and obvious way.
func referenceRoute(t *testing.T, r *Router, cfg RoutingConfig, agents []AgentInfo, ev *Event) Route {
	route := referenceRouteOf(t, cfg, agents, ev)
	if route.Kind != RouteMention && len(ev.Mentions) > 0 {
		route.Unknown = ev.Mentions
		if route.Kind == RouteDefault {
			route.Reason = "default: " + NoAgent(ev.Mentions, r.Agents())
		}
	}
	return route
}

func referenceRouteOf(t *testing.T, cfg RoutingConfig, agents []AgentInfo, ev *Event) Route {
	for _, m := range ev.Mentions {
		for _, a := range agents {
			if strings.EqualFold(a.Name, m) {
				return Route{Agent: a.Name, Kind: RouteMention, Reason: "mention @" + a.Name}
			}
		}
	}
	cmds := DefaultCommands()
	for k, v := range cfg.Commands {
		cmds[strings.ToLower(k)] = v
	}
	if a, ok := cmds[strings.ToLower(ev.Command)]; ok && ev.Command != "" {
		return Route{Agent: a, Kind: RouteCommand, Reason: "command /" + strings.ToLower(ev.Command)}
	}
	rules := slices.Clone(cfg.Rules)
	slices.SortStableFunc(rules, func(a, b Rule) int { return b.Priority - a.Priority })
	anyGlobRef := func(globs []string, names []string, lower bool) bool {
		for _, g := range globs {
			for _, n := range names {
				if lower {
					g, n = strings.ToLower(g), strings.ToLower(n)
				}
				ok, err := doublestar.Match(g, n)
				require.NoError(t, err)
				if ok {
					return true
				}
			}
		}
		return false
	}
	anyFoldRef := func(want, have []string) bool {
		for _, w := range want {
			for _, h := range have {
				if h != "" && strings.EqualFold(w, h) {
					return true
				}
			}
		}
		return false
	}
	for _, r := range rules {
		m := r.Match
		switch {
		case m.Sources != nil && !anyFoldRef(m.Sources, []string{ev.Source}),
			m.Kinds != nil && !anyGlobRef(m.Kinds, []string{ev.Kind}, true),
			m.Labels != nil && !anyFoldRef(m.Labels, ev.Labels),
			m.Repos != nil && !anyGlobRef(m.Repos, []string{ev.Repo}, true),
			m.Paths != nil && !anyGlobRef(m.Paths, ev.Paths, false),
			m.Text != "" && !regexp.MustCompile(m.Text).MatchString(ev.Text):
			continue
		}
		return Route{Agent: r.Agent, Kind: RouteRule, Reason: `rule "` + r.Name + `" (priority ` + strconv.Itoa(r.Priority) + ")", Rule: r.Name}
	}
	// Case-insensitive means: equal after strings.ToLower.
	for _, a := range agents {
		for _, kw := range a.Keywords {
			re := regexp.MustCompile(`(^|[^\pL\p{Nd}_])` + regexp.QuoteMeta(kw) + `($|[^\pL\p{Nd}_])`)
			if strings.HasSuffix(kw, "+") {
				re = regexp.MustCompile(`(^|[^\pL\p{Nd}_])` + regexp.QuoteMeta(kw))
			}
			if re.MatchString(strings.ToLower(ev.Text)) {
				return Route{Agent: a.Name, Kind: RouteKeyword, Reason: `content: keyword "` + kw + `"`}
			}
		}
	}
	return Route{Agent: "triage", Kind: RouteDefault, Reason: "default"}
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func FuzzRoute(f *testing.F) {
	f.Add("local", "local.message", "@coder fix it", "", "", "")
	f.Add("github", "github.pull_request.opened", "see TICKET-12", "bug", "docs/a/b.txt\nsrc/x.go", "acme/web")
	f.Add("github", "github.issues.opened", "SEV2 in prod", "", "", "Acme/Infra-Prod")
	f.Add("slack", "slack.message", "HotFix now\n/ship it", "", "", "")
	f.Add("github", "github.pull_request.synchronize", "", "", "x/q/r/z.go\nREADME\na/b\na", "acme/ops")
	f.Add("local", "local.message", "use c++, then deploy to straße", "", "", "")
	f.Add("local", "local.message", "ſev1 ınc KELVIN \u212a", "", "", "")
	cfg, agents := fuzzRoutingConfig(), fuzzAgents()
	r, err := NewRouter(cfg, agents)
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, source, kind, text, labels, paths, repo string) {
		ev := &Event{Source: source, Kind: kind, Text: text, Labels: splitLines(labels), Paths: splitLines(paths), Repo: repo}
		ev.FillFromText()
		got := r.Route(ev)
		require.NotEmpty(t, got.Agent)
		require.Contains(t, []RouteKind{RouteMention, RouteCommand, RouteRule, RouteKeyword, RouteDefault}, got.Kind)
		require.Equal(t, referenceRoute(t, r, cfg, agents, ev), got)
	})
}

func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{
		{"docs/**", "docs"}, {"docs/**", "docs/a/b.md"}, {"**/*.md", "README.md"}, {"a/*", "a/"},
		{"a/*", "a/b/c"}, {"github.pull_request.*", "github.pull_request.opened"}, {"{a,b}/**/c.go", "b/c.go"},
		{`a\*b`, "a*b"}, {"[a-c]x/y.z", "bx/y.z"}, {"a/**/", "a/b/"}, {"*", ""}, {"x.{go,md}", "x.md"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if !utf8.ValidString(pattern) || !utf8.ValidString(name) {
			// doublestar decodes every invalid byte as U+FFFD, so "\xc4"
			// matches "\xc8" there; the fast paths compare bytes.
			// Neither occurs in real paths or event kinds.
			return
		}
		g, err := compileGlob(pattern, false)
		if !doublestar.ValidatePattern(pattern) || strings.TrimSpace(pattern) == "" {
			require.Error(t, err)
			return
		}
		require.NoError(t, err)
		want, err := doublestar.Match(pattern, name)
		require.NoError(t, err)
		require.Equal(t, want, g.match(name))
		if want {
			// The path index may only reject what cannot match.
			seg, _, _ := strings.Cut(name, "/")
			require.True(t, g.seg == "" || g.seg == seg, "seg %q of %q", g.seg, name)
			require.True(t, g.ext == "" || g.ext == pathExt(name), "ext %q of %q", g.ext, name)
		}
	})
}

func FuzzTextMatcher(f *testing.F) {
	for _, s := range [][2]string{
		{`(?i)\bdeploy\b`, "Deploy now"}, {`TICKET-\d+`, "ticket-1"}, {`(?i)s`, "ſ"}, {`(?i)k`, "\u212a"},
		{`(hot)(fix)`, "hotfix"}, {`(?i:abc)d`, "ABCd"}, {`^$`, ""}, {`a|b`, "b"}, {`(?i)straße`, "STRASSE"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, expr, text string) {
		re, err := regexp.Compile(expr)
		tm, err2 := compileText(expr)
		if err != nil {
			require.Error(t, err2)
			return
		}
		require.NoError(t, err2)
		in := routeInput{ev: &Event{Text: text}}
		require.Equal(t, re.MatchString(text), tm.match(&in))
	})
}

// FuzzNewRouter compiles arbitrary rules: it never panics, a failure is a
// list of *FieldError naming a routing field, and a router that compiles
// routes any event.
func FuzzNewRouter(f *testing.F) {
	f.Add("bugs", "coder", 1, "github", "github.issues.*", "bug", "acme/*", "docs/**", `(?i)\bbug\b`, "deploy", "ops", "triage")
	f.Add("", "tirage", -5, "githb", "[", "", "{", `\`, "(", "/x", "", "nobody")
	f.Add("a", "docs", 0, "SLACK", "**", " ", "acme/**", "**/*.md", "^$", "Deploy", "nobody", "")
	f.Fuzz(func(t *testing.T, name, agent string, prio int, source, kind, label, repo, path, text, cmd, cmdAgent, def string) {
		cfg := RoutingConfig{
			DefaultAgent: def,
			Commands:     map[string]string{cmd: cmdAgent},
			Rules: []Rule{
				{Name: name, Priority: prio, Agent: agent, Match: Match{
					Sources: []string{source}, Kinds: []string{kind}, Labels: []string{label},
					Repos: []string{repo}, Paths: []string{path}, Text: text,
				}},
				{Name: name + "-2", Priority: prio, Agent: agent, Match: Match{Text: text, Paths: []string{path, path}}},
			},
		}
		r, err := NewRouter(cfg, fuzzAgents())
		if err != nil {
			require.Nil(t, r)
			errs := []error{err}
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				errs = j.Unwrap()
			}
			for _, e := range errs {
				var fe *FieldError
				require.True(t, errors.As(e, &fe), "%T: %v", e, e)
				require.True(t, strings.HasPrefix(fe.Field, "routing."), fe.Field)
				require.NotEmpty(t, fe.Msg)
			}
			return
		}
		require.Len(t, r.Rules(), 2)
		require.Equal(t, path != "", r.NeedsPaths())
		ev := &Event{Source: source, Kind: kind, Labels: []string{label}, Repo: repo, Paths: []string{path}, Text: text + " " + cmd}
		ev.FillFromText()
		got := r.Route(ev)
		require.NotEmpty(t, got.Agent)
	})
}

func FuzzContainsPivot(f *testing.F) {
	f.Add("the ticket-42 is open", "ticket-42", uint8(6))
	f.Add("aaa", "aaaa", uint8(0))
	f.Add("xab", "ab", uint8(1))
	f.Add("", "a", uint8(0))
	f.Fuzz(func(t *testing.T, s, lit string, pivot uint8) {
		if lit == "" {
			return
		}
		p := int(pivot) % len(lit)
		require.Equal(t, strings.Contains(s, lit), containsPivot(s, lit, p), "%q in %q at %d", lit, s, p)
	})
}
