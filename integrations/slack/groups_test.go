package slack

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

func TestRequesterUserGroupsAreLookedUpAndRemembered(t *testing.T) {
	ctx := context.Background()
	fs := newFakeSlack(t)
	fs.groups = map[string][]string{"S0SRE": {"U1", "U2"}, "S0ENG": {"U2"}}
	h := newHarnessWith(t, ModeHTTP, fs, newTestStore(t), func(o *Options) { o.UserGroups = []string{"S0ENG", "S0SRE"} })
	th := bot.SlackThread(testTeam, "C1", "1700000001.000100")

	r, err := h.a.ResolveRequester(ctx, bot.Requester{Source: bot.SourceSlack, ID: "U2"}, th)
	require.NoError(t, err)
	require.Equal(t, []string{"S0ENG", "S0SRE"}, r.Groups)
	r, err = h.a.ResolveRequester(ctx, bot.Requester{Source: bot.SourceSlack, ID: "U1"}, th)
	require.NoError(t, err)
	require.Equal(t, []string{"S0SRE"}, r.Groups)
	r, err = h.a.ResolveRequester(ctx, bot.Requester{Source: bot.SourceSlack, ID: "U9"}, th)
	require.NoError(t, err)
	require.Empty(t, r.Groups)
	require.Len(t, fs.callsOf("usergroups.users.list"), 2, "each group is asked once and remembered")

	local := bot.Requester{Source: bot.SourceLocal, ID: "ana"}
	r, err = h.a.ResolveRequester(ctx, local, bot.LocalThread("x"))
	require.NoError(t, err)
	require.Equal(t, local, r)

	// A group Slack does not know: the rights cannot be known.
	fs2 := newFakeSlack(t)
	h2 := newHarnessWith(t, ModeHTTP, fs2, newTestStore(t), func(o *Options) { o.UserGroups = []string{"S0GONE"} })
	_, err = h2.a.ResolveRequester(ctx, bot.Requester{Source: bot.SourceSlack, ID: "U1"}, th)
	require.ErrorContains(t, err, "members of Slack user group S0GONE: no_such_subteam")
}
