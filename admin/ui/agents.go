package ui

import (
	"cmp"
	"net/http"
	"slices"
	"strings"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
)

// The agents and profiles page: each agent in effect with where it comes
// from, its model, profile, tools and skills; each permission profile as
// the permission engine of the configuration in effect resolved it; and
// the access ceilings requesters get. Nothing here is parsed back from
// text: every value is a field of the agents' definitions or the engine's
// profiles.

// Roster is the configuration in effect as the agents page shows it. The
// daemon's configuration coordinator has it.
type Roster interface {
	// Agents are the agents in effect, sorted by name.
	Agents() []agents.Definition
	// Model says what a model name is: its provider and the provider's
	// model, never its key.
	Model(name string) (Model, bool)
	// Policy is the permission engine of the configuration's profiles
	// and access ceilings.
	Policy() *policy.Engine
}

// Model is what the page says of a model.
type Model struct {
	Provider, Model string
}

func (u *UI) agentsPage() page {
	return page{Nav: "Agents", Path: "/admin/agents", Mount: func(m *http.ServeMux) {
		m.HandleFunc("GET /admin/agents", u.agents)
	}}
}

// agentsView is the template's data.
type agentsView struct {
	Agents   []agentRow
	Profiles []profileRow
	Access   []accessRow
}

// agentRow is one agent.
type agentRow struct {
	Name, Description, Source, File, Mode string
	Model                                 string
	// Provider and ProviderModel say what Model is, when the config
	// names it.
	Provider, ProviderModel string
	Profile                 string
	// Tools is the agent's tools list; empty means every core tool its
	// profile allows.
	Tools []string
	// Skills are those the agent loads at start (its skills:); Enabled
	// those enabled for it in any repository (global and agent scopes).
	Skills, Enabled []string
	Overrides       []string
}

// profileRow is one profile and the agents that have it.
type profileRow struct {
	policy.Profile
	// Approvers are who decide its approvals: its own, or the daemon's
	// administrator.
	EffectiveApprovers []string
	Agents             []string
}

// accessRow is one mapping of requesters to a ceiling.
type accessRow struct {
	// Who says which requesters, Key is the config's path of the
	// mapping, Profile the ceiling.
	Who, Key, Profile string
}

func (u *UI) agents(w http.ResponseWriter, r *http.Request) {
	if u.opts.Roster == nil {
		u.fail(w, r, bot.Errorf(bot.EUNAVAILABLE, "no agents are loaded"))
		return
	}
	u.render(w, r, "agents.html", buildAgents(u.opts.Roster, u.opts.Admin.Skills))
}

// agentNames are the names of the agents in effect, for choosing one.
func (u *UI) agentNames() []string {
	if u.opts.Roster == nil {
		return nil
	}
	var out []string
	for _, d := range u.opts.Roster.Agents() {
		out = append(out, d.Name)
	}
	return out
}

// buildAgents reads the roster, and the registry (nil: no packages) for
// the skills enabled for each agent.
func buildAgents(ro Roster, reg *skills.Registry) agentsView {
	var v agentsView
	byProfile := map[string][]string{}
	for _, d := range ro.Agents() {
		row := agentRow{
			Name: d.Name, Description: d.Description, Source: d.Source, File: d.File, Mode: string(d.Mode),
			Model: d.ModelName(), Profile: d.Profile, Tools: d.Tools, Skills: d.Skills, Overrides: d.Overrides,
		}
		if m, ok := ro.Model(row.Model); ok {
			row.Provider, row.ProviderModel = m.Provider, m.Model
		}
		if reg != nil {
			for _, s := range reg.EnabledSkills(skills.Target{Agent: d.Name}) {
				row.Enabled = append(row.Enabled, s.Name)
			}
		}
		v.Agents = append(v.Agents, row)
		byProfile[d.Profile] = append(byProfile[d.Profile], d.Name)
	}
	e := ro.Policy()
	if e == nil {
		return v
	}
	for _, p := range e.Profiles() {
		v.Profiles = append(v.Profiles, profileRow{Profile: p, EffectiveApprovers: e.Approvers(p.Name), Agents: byProfile[p.Name]})
	}
	v.Access = accessRows(e.Access())
	return v
}

// accessRows lists the access section, defaults filled in, in the order
// a reader looks for someone: GitHub by permission and by login, Slack,
// the local console, schedules, everyone else.
func accessRows(a policy.AccessConfig) []accessRow {
	out := []accessRow{
		{"GitHub users with read access", "access.github.read", a.GitHub.Read},
		{"GitHub users with triage access", "access.github.triage", a.GitHub.Triage},
		{"GitHub users with write access", "access.github.write", a.GitHub.Write},
		{"GitHub users with maintain access", "access.github.maintain", a.GitHub.Maintain},
		{"GitHub users with admin access", "access.github.admin", a.GitHub.Admin},
	}
	named := func(who, key string, m map[string]string) {
		rows := make([]accessRow, 0, len(m))
		for k, p := range m {
			rows = append(rows, accessRow{Who: who + " " + k, Key: key, Profile: p})
		}
		slices.SortFunc(rows, func(x, y accessRow) int { return cmp.Compare(strings.ToLower(x.Who), strings.ToLower(y.Who)) })
		out = append(out, rows...)
	}
	named("GitHub user", "access.github.users", a.GitHub.Users)
	out = append(out, accessRow{"Slack members nothing else names", "access.slack.default", a.Slack.Default})
	named("Slack member", "access.slack.users", a.Slack.Users)
	named("Slack user group", "access.slack.groups", a.Slack.Groups)
	out = append(out, accessRow{"Local console users", "access.local.default", a.Local.Default})
	named("Local console token", "access.local.users", a.Local.Users)
	out = append(out, accessRow{"Schedules", "access.schedules.default", a.Schedules.Default})
	named("Schedule", "access.schedules.names", a.Schedules.Names)
	return append(out, accessRow{"Everyone else (no or unknown access, another Slack workspace)", "access.default", a.Default})
}
