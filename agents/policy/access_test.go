package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

func github(login, perm string) bot.Requester {
	return bot.Requester{Source: bot.SourceGitHub, ID: login, Permission: perm}
}

func TestRequestersMapToCeilings(t *testing.T) {
	yes := true
	e, err := policy.New(policy.Options{
		Profiles: map[string]policy.ProfileConfig{"deployer": {Extends: "contributor", Permissions: []policy.Permission{policy.PermDeploy}, Network: &yes}},
		Access: policy.AccessConfig{
			GitHub: policy.GitHubAccess{Users: map[string]string{"Release-Bot": "deployer"}},
			Slack: policy.SlackAccess{
				Users:  map[string]string{"U0ADMIN": "ops"},
				Groups: map[string]string{"S0SRE": "ops", "S0ENG": "maintainer", "S0REL": "deployer"},
			},
			Local:     policy.LocalAccess{Users: map[string]string{"guest": "read-only"}},
			Schedules: policy.ScheduleAccess{Names: map[string]string{"nightly-triage": "read-only"}},
		},
	})
	require.NoError(t, err)
	for _, tc := range []struct {
		r      bot.Requester
		want   string
		reason string
	}{
		{github("stranger", "read"), "read-only", "requested by @stranger, read access"},
		{github("tom", "triage"), "contributor", "requested by @tom, triage access"},
		{github("alice", "write"), "contributor", "requested by @alice, write access"},
		{github("mia", "maintain"), "maintainer", "requested by @mia, maintain access"},
		{github("root", "admin"), "ops", "requested by @root, admin access"},
		{github("mallory", "none"), "read-only", "requested by @mallory, who has no access to the repository"},
		{github("rule-sender", ""), "read-only", "requested by @rule-sender, whose access to the repository is unknown"},
		{github("release-bot", "read"), "deployer", "requested by @release-bot (access.github.users)"},
		{bot.Requester{Source: bot.SourceSlack, ID: "U0ADMIN", Groups: []string{"S0ENG"}}, "ops", "requested by @U0ADMIN (access.slack.users)"},
		{bot.Requester{Source: bot.SourceSlack, ID: "U1", Groups: []string{"S0OTHER", "S0ENG", "S0SRE"}}, "ops", "requested by @U1, a member of S0SRE (access.slack.groups)"},
		// Neither of deployer and maintainer allows all the other does: the
		// first by id.
		{bot.Requester{Source: bot.SourceSlack, ID: "U2", Groups: []string{"S0REL", "S0ENG"}}, "maintainer", "requested by @U2, a member of S0ENG (access.slack.groups)"},
		{bot.Requester{Source: bot.SourceSlack, ID: "U3"}, "contributor", "requested by @U3, a member of the Slack workspace"},
		// Slack Connect: someone of another organisation in a shared
		// channel is no member of the workspace, whatever groups say.
		{bot.Requester{Source: bot.SourceSlack, ID: "U4", Team: "T0OTHER", External: true, Groups: []string{"S0SRE"}}, "read-only", "requested by @U4, from another Slack workspace (T0OTHER)"},
		{bot.Requester{Source: bot.SourceSlack, ID: "U0ADMIN", Team: "T0OTHER", External: true}, "ops", "requested by @U0ADMIN (access.slack.users)"},
		{bot.Requester{Source: bot.SourceLocal, ID: "ana"}, "ops", "requested by @ana on the local console"},
		{bot.Requester{Source: bot.SourceLocal, ID: "guest"}, "read-only", "requested by @guest on the local console (access.local.users)"},
		{bot.Requester{Source: bot.SourceSchedule, ID: "weekly"}, "ops", "started by schedule weekly"},
		{bot.Requester{Source: bot.SourceSchedule, ID: "nightly-triage"}, "read-only", "started by schedule nightly-triage (access.schedules.names)"},
		{bot.Requester{}, "read-only", "requested by nobody known"},
		{bot.Requester{Source: "email", ID: "x@example.com"}, "read-only", "requested by @x@example.com from email, which access does not know"},
	} {
		got := e.Ceiling(tc.r)
		require.Equal(t, bot.Ceiling{Profile: tc.want, Reason: tc.reason}, got, "%+v", tc.r)
	}
	require.Equal(t, []string{"S0ENG", "S0REL", "S0SRE"}, e.SlackGroups())

	// What access is in effect, the defaults filled in, as the admin UI
	// shows it; changing the copy changes nothing.
	a := e.Access()
	require.Equal(t, "read-only", a.Default)
	require.Equal(t, policy.GitHubAccess{Read: "read-only", Triage: "contributor", Write: "contributor", Maintain: "maintainer", Admin: "ops",
		Users: map[string]string{"Release-Bot": "deployer"}}, a.GitHub)
	require.Equal(t, "contributor", a.Slack.Default)
	require.Equal(t, "ops", a.Local.Default)
	require.Equal(t, "ops", a.Schedules.Default)
	a.Slack.Users["U3"] = "ops"
	require.Equal(t, "contributor", e.Ceiling(bot.Requester{Source: bot.SourceSlack, ID: "U3"}).Profile)
}

func TestAccessNamesOnlyKnownProfiles(t *testing.T) {
	err := policy.ValidateAccess(policy.AccessConfig{
		Default: "nobody",
		GitHub:  policy.GitHubAccess{Read: "reader", Users: map[string]string{"dependabot[bot]": "robot", "ok": "deployer"}},
		Slack:   policy.SlackAccess{Groups: map[string]string{"S1": ""}},
		Local:   policy.LocalAccess{Users: map[string]string{" ": "ops"}},
	}, map[string]policy.ProfileConfig{"deployer": {Extends: "contributor"}})
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *bot.FieldError
		require.True(t, errors.As(e, &fe), e)
		fields = append(fields, fe.Field+": "+fe.Msg)
	}
	require.Equal(t, []string{
		`access.default: unknown profile "nobody" (want read-only, contributor, maintainer, ops or one of profiles:)`,
		`access.github.read: unknown profile "reader" (want read-only, contributor, maintainer, ops or one of profiles:)`,
		`access.github.users["dependabot[bot]"]: unknown profile "robot" (want read-only, contributor, maintainer, ops or one of profiles:)`,
		`access.slack.groups.S1: name a profile`,
		`access.local.users[" "]: empty name`,
	}, fields)
	_, err = policy.New(policy.Options{Access: policy.AccessConfig{Default: "nobody"}})
	require.ErrorContains(t, err, `access.default: unknown profile "nobody"`)
}

func TestEffectiveRightsSayWhy(t *testing.T) {
	yes := true
	e, err := policy.New(policy.Options{Profiles: map[string]policy.ProfileConfig{
		"deployer": {Extends: "contributor", Permissions: []policy.Permission{policy.PermDeploy}, Network: &yes},
	}})
	require.NoError(t, err)
	stranger := e.Ceiling(github("stranger", "read"))
	local := e.Ceiling(bot.Requester{Source: bot.SourceLocal, ID: "ana"})
	for _, tc := range []struct {
		profile  string
		ceilings []bot.Ceiling
		want     string
	}{
		{"contributor", []bot.Ceiling{stranger}, "read-only: requested by @stranger, read access"},
		{"contributor", []bot.Ceiling{local}, "contributor: coder's own profile, within ops (requested by @ana on the local console)"},
		{"contributor", nil, "contributor: coder's own profile"},
		{"ops", []bot.Ceiling{local, {Profile: "read-only", Reason: "handed off by @triage, read-only"}}, "read-only: handed off by @triage, read-only"},
		{"deployer", []bot.Ceiling{{Profile: "maintainer", Reason: "requested by @mia, maintain access"}},
			"deployer ∩ maintainer: coder's own profile; requested by @mia, maintain access"},
	} {
		require.Equal(t, tc.want, e.Effective("coder", tc.profile, tc.ceilings).String())
	}
}

func TestCeilingsBoundEveryCall(t *testing.T) {
	f := newFixture(t, map[string]policy.ProfileConfig{
		"careful": {Extends: "ops", Approval: []string{"write_file"}, Approvers: []string{"ana"}},
	})
	e := f.engine
	stranger := e.Ceiling(github("stranger", "read"))
	write := map[string]string{"path": "docs/new.md", "content": "x"}
	withCeilings := func(c tools.Call, ceilings ...bot.Ceiling) tools.Call {
		c.Ceilings = ceilings
		return c
	}
	for _, tc := range []struct {
		name   string
		call   tools.Call
		want   tools.Verdict
		rule   string
		reason string
	}{
		{name: "write under a read-only ceiling", call: withCeilings(f.call("coder", "contributor", coreInfo("write_file"), write), stranger),
			want: tools.Deny, rule: "ceiling:read-only/permission:write",
			reason: `denied by the ceiling "read-only" (requested by @stranger, read access): tool "write_file" is not allowed (needs the write permission)`},
		{name: "a writing command under a read-only ceiling", call: withCeilings(f.call("coder", "contributor", coreInfo("bash"), map[string]string{"command": "ls && touch x"}), stranger),
			want: tools.Deny, rule: "ceiling:read-only/permission:write"},
		{name: "reading under a read-only ceiling", call: withCeilings(f.call("coder", "contributor", coreInfo("bash"), map[string]string{"command": "ls src"}), stranger),
			want: tools.Allow},
		{name: "a ceiling never widens the profile", call: withCeilings(f.call("reviewer", "read-only", coreInfo("write_file"), write), bot.Ceiling{Profile: "ops", Reason: "requested by @root, admin access"}),
			want: tools.Deny, rule: "profile:read-only/permission:write"},
		{name: "a ceiling's approval is asked", call: withCeilings(f.call("coder", "contributor", coreInfo("write_file"), write), bot.Ceiling{Profile: "careful", Reason: "requested by @ana on the local console"}),
			want: tools.NeedsApproval, rule: "ceiling:careful/approval:write_file",
			reason: `the ceiling "careful" (requested by @ana on the local console) requires approval: tool "write_file" needs approval`},
		{name: "the narrowest of several ceilings", call: withCeilings(f.call("ops", "ops", coreInfo("write_file"), write),
			bot.Ceiling{Profile: "ops", Reason: "requested by @ana on the local console"}, bot.Ceiling{Profile: "read-only", Reason: "handed off by @triage, read-only"}),
			want: tools.Deny, rule: "ceiling:read-only/permission:write"},
		{name: "an unknown ceiling", call: withCeilings(f.call("coder", "contributor", coreInfo("read_file"), map[string]string{"path": "README.md"}), bot.Ceiling{Profile: "gone", Reason: "x"}),
			want: tools.Deny, rule: "ceiling:unknown"},
		{name: "an agent tool under a read-only ceiling", call: withCeilings(f.call("reviewer", "read-only", declares("agent_coder", tools.KindAgent, policy.PermRead), map[string]string{"task": "write"}), stranger),
			want: tools.Allow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := e.Decide(tc.call, nil)
			require.Equal(t, tc.want, d.Verdict, d.Reason)
			if tc.rule != "" {
				require.Equal(t, tc.rule, d.Rule)
			}
			if tc.reason != "" {
				require.Equal(t, tc.reason, d.Reason)
			}
			require.Equal(t, tc.call.Profile, d.Profile, "the decision names the agent's profile")
		})
	}

	// A tool a ceiling forbids is not shown to the agent either.
	s := tools.Scope{Agent: "coder", Profile: "contributor", Ceilings: []bot.Ceiling{stranger}}
	ok, why := tools.Visible(coreInfo("write_file"), s, e)
	require.False(t, ok)
	require.Equal(t, `tool "write_file" is forbidden by the ceiling "read-only" (requested by @stranger, read access)`, why)
	ok, _ = tools.Visible(coreInfo("read_file"), s, e)
	require.True(t, ok)
}

func TestConfinementFollowsTheCeilings(t *testing.T) {
	f := newFixture(t, nil)
	stranger := f.engine.Ceiling(github("stranger", "read"))
	c := f.engine.Confine(tools.Scope{Agent: "ops", Profile: "ops", Ceilings: []bot.Ceiling{stranger}}, f.ws)
	require.False(t, c.Network, "the ceiling has no network")
	require.True(t, c.WorkspaceReadOnly, "the ceiling may not write")
	require.NotEmpty(t, c.ReadOnly, "the ceiling has no ci")
	c = f.engine.Confine(tools.Scope{Agent: "ops", Profile: "ops", Ceilings: []bot.Ceiling{{Profile: "gone"}}}, f.ws)
	require.NotEmpty(t, c.Masked, "the ceiling has no secrets")
	require.Equal(t, tools.Confinement{WorkspaceReadOnly: true, ReadOnly: c.ReadOnly, Masked: c.Masked}, c, "an unknown ceiling grants nothing")
}

func TestRefusalsByACeilingAreAuditedWithTheRequester(t *testing.T) {
	ctx := context.Background()
	auditor, _ := openAudit(t)
	f := newFixture(t, nil)
	e, err := policy.New(policy.Options{Audit: auditor})
	require.NoError(t, err)
	requester := github("stranger", "read")
	call := f.call("coder", "contributor", coreInfo("write_file"), map[string]string{"path": "a.txt", "content": "x"})
	call.Requester = requester
	call.Ceilings = []bot.Ceiling{e.Ceiling(requester)}
	require.Equal(t, tools.Deny, e.Check(ctx, call).Verdict)

	recs, _, err := auditor.List(ctx, policy.AuditFilter{Decision: policy.AuditDeny})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, &requester, recs[0].Requester)
	require.Equal(t, []bot.Ceiling{{Profile: "read-only", Reason: "requested by @stranger, read access"}}, recs[0].Ceilings)
	require.Equal(t, "ceiling:read-only/permission:write", recs[0].Rule)
	raw, err := json.Marshal(recs[0])
	require.NoError(t, err)
	require.Contains(t, string(raw), `"requester":{"source":"github","id":"stranger","permission":"read"}`)
	require.Contains(t, string(raw), `"ceilings":[{"profile":"read-only","reason":"requested by @stranger, read access"}]`)
}
