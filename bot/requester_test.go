package bot_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

func TestRequesterHandle(t *testing.T) {
	for _, tc := range []struct {
		r    bot.Requester
		want string
	}{
		{bot.Requester{Source: bot.SourceGitHub, ID: "stranger", Permission: "read"}, "@stranger"},
		{bot.Requester{Source: bot.SourceSlack, ID: "U0123"}, "@U0123"},
		{bot.Requester{Source: bot.SourceLocal, ID: "@ana"}, "@ana"},
		{bot.Requester{Source: bot.SourceSchedule, ID: "weekday-triage"}, "schedule weekday-triage"},
		{bot.Requester{Source: bot.SourceSlack}, "an unnamed slack user"},
		{bot.Requester{}, "nobody known"},
	} {
		require.Equal(t, tc.want, tc.r.Handle())
	}
}

func TestRightsReadWell(t *testing.T) {
	r := bot.EffectiveRights{Profile: "read-only", Reason: "requested by @stranger, read access"}
	require.Equal(t, "read-only: requested by @stranger, read access", r.String())
	require.Equal(t, "ops", bot.EffectiveRights{Profile: "ops"}.String())
	e := bot.Explanation{WorkItem: true, Agent: "coder", Reason: `rule "bugs" (priority 100)`, Rights: &r}
	require.Equal(t, `coder (rule "bugs" (priority 100)); rights read-only: requested by @stranger, read access`, e.String())
}
