package bot_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// enabledAt says a package is enabled for events of these repositories.
func enabledAt(repos ...string) func(org, repo string) bool {
	return func(_, repo string) bool {
		for _, r := range repos {
			if strings.EqualFold(r, repo) {
				return true
			}
		}
		return false
	}
}

func TestEntrypointsRouteWhereTheirPackageIsEnabled(t *testing.T) {
	base, err := bot.NewRouter(rtConfig(), append(rtAgents(), bot.AgentInfo{Name: "release-writer"}))
	require.NoError(t, err)
	r, warnings := base.WithEntrypoints([]bot.Entrypoint{
		{Name: "release-helper/notes", Origin: "package:release-helper", Agent: "release-writer", Skills: []string{"changelog-draft"},
			Commands: []string{"/release-notes", "/deploy"}, Kinds: []string{"github.release.published"}, Enabled: enabledAt("acme/web")},
		{Name: "other/notes", Origin: "package:other", Agent: "docs", Commands: []string{"release-notes"}, Enabled: enabledAt("acme/web", "acme/api")},
		{Name: "ghost/x", Origin: "package:ghost", Agent: "nobody", Commands: []string{"ghost"}},
	})
	require.Equal(t, []string{
		`entry point release-helper/notes (package:release-helper): /deploy is the config's command (for @coder); the config's stays`,
		`entry point other/notes (package:other): /release-notes is taken by entry point release-helper/notes (package:release-helper)`,
		`entry point ghost/x (package:ghost): no agent "nobody"; it routes nothing`,
	}, warnings)

	gh := func(repo, kind, text string) *bot.Event {
		owner, _, _ := strings.Cut(repo, "/")
		return &bot.Event{Source: bot.SourceGitHub, Kind: kind, Org: owner, Repo: repo, Text: text}
	}
	for _, tc := range []struct {
		name string
		ev   *bot.Event
		want bot.Route
	}{
		{name: "its command where enabled", ev: gh("acme/web", "github.issue_comment.created", "/release-notes since v1.2"),
			want: bot.Route{Agent: "release-writer", Kind: bot.RouteCommand, Reason: "command /release-notes of package:release-helper",
				Rule: "release-helper/notes", Origin: "package:release-helper", Skills: []string{"changelog-draft"}}},
		{name: "its command where not enabled routes as if it did not exist", ev: gh("acme/api", "github.issue_comment.created", "/release-notes"),
			want: bot.Route{Agent: "triage", Kind: bot.RouteDefault, Reason: "default"}},
		{name: "a command the config has stays the config's", ev: gh("acme/web", "github.issue_comment.created", "/deploy staging"),
			want: bot.Route{Agent: "coder", Kind: bot.RouteCommand, Reason: "command /deploy"}},
		{name: "its trigger where enabled", ev: gh("acme/web", "github.release.published", ""),
			want: bot.Route{Agent: "release-writer", Kind: bot.RouteRule, Reason: `entry point "release-helper/notes" of package:release-helper`,
				Rule: "release-helper/notes", Origin: "package:release-helper", Skills: []string{"changelog-draft"}}},
		{name: "its trigger elsewhere", ev: gh("acme/api", "github.release.published", ""),
			want: bot.Route{Agent: "triage", Kind: bot.RouteDefault, Reason: "default"}},
		{name: "the config's rules come first", ev: &bot.Event{Source: bot.SourceGitHub, Kind: "github.release.published", Org: "acme", Repo: "acme/web", Labels: []string{"bug"}},
			want: bot.Route{Agent: "coder", Kind: bot.RouteRule, Reason: `rule "bugs" (priority 100)`, Rule: "bugs"}},
		{name: "a mention comes first", ev: gh("acme/web", "github.issue_comment.created", "@docs /release-notes"),
			want: bot.Route{Agent: "docs", Kind: bot.RouteMention, Reason: "mention @docs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.ev.FillFromText()
			require.Equal(t, tc.want, r.Route(tc.ev))
		})
	}

	rules := r.Rules()
	last := rules[len(rules)-1]
	require.Equal(t, bot.RuleInfo{Name: "release-helper/notes", Agent: "release-writer", Match: "kinds github.release.published", Origin: "package:release-helper"}, last)
	require.Equal(t, "config", rules[0].Origin)
	require.Equal(t, "release-writer", r.Commands()["release-notes"])
	require.Equal(t, []bot.EntrypointInfo{
		{Name: "release-helper/notes", Origin: "package:release-helper", Agent: "release-writer", Skills: []string{"changelog-draft"},
			Commands: []string{"release-notes"}, Triggers: []string{"github.release.published"}},
		{Name: "other/notes", Origin: "package:other", Agent: "docs", Skills: []string{}, Commands: []string{}, Triggers: []string{}},
	}, r.Entrypoints())

	// The router it came from is unchanged.
	require.NotContains(t, base.Commands(), "release-notes")
	require.Len(t, base.Rules(), len(rules)-1)
}
