package ui

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/skills"
)

// roster is a configuration as the agents page reads it.
type roster struct {
	agents []agents.Definition
	models map[string]Model
	policy *policy.Engine
}

func (r roster) Agents() []agents.Definition { return r.agents }
func (r roster) Model(name string) (Model, bool) {
	m, ok := r.models[name]
	return m, ok
}
func (r roster) Policy() *policy.Engine { return r.policy }

func TestAgentsPageShowsAgentsProfilesAndCeilings(t *testing.T) {
	builtin, err := agents.Builtin()
	require.NoError(t, err)
	yes := true
	engine, err := policy.New(policy.Options{
		Profiles: map[string]policy.ProfileConfig{"deployer": {
			Description: "Deploys to staging.", Extends: "contributor", Permissions: []policy.Permission{policy.PermDeploy}, Network: &yes,
			Commands: policy.CommandRules{Deny: []string{"kubectl delete"}}, Approval: []string{"bash"}, Approvers: []string{"mia"},
		}},
		Access: policy.AccessConfig{
			GitHub: policy.GitHubAccess{Users: map[string]string{"release-bot": "deployer"}},
			Slack:  policy.SlackAccess{Groups: map[string]string{"S0SRE": "ops"}},
		},
	})
	require.NoError(t, err)
	shipper := agents.Definition{
		Name: "shipper", Description: "Ships releases.", Model: "fast", Profile: "deployer", Mode: agents.ModeHandoff,
		Tools: []string{"bash", "read_file"}, Skills: []string{"release-notes"}, Source: agents.SourceUser, File: "agents/shipper.md",
	}
	ro := roster{
		agents: append(builtin, shipper),
		// What a model is, never its key: the roster cannot give one.
		models: map[string]Model{"fast": {Provider: "openai", Model: "gpt-4.1-mini"}},
		policy: engine,
	}
	e := newSkillsEnv(t, ro)
	require.NoError(t, e.reg.Set(t.Context(), skills.Setting{Scope: skills.Scope{Kind: skills.ScopeAgent, Name: "shipper"}, Name: "incident-triage", Enabled: skills.Disabled}))

	rec := e.get("/admin/agents")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	body := rec.Body.String()
	for _, d := range builtin {
		require.Contains(t, body, `data-agent="`+d.Name+`"`)
	}
	require.Regexp(t, `data-agent="shipper">\s*<td><b>shipper</b> <span class="muted">handoff</span><br><span class="muted">Ships releases.</span></td>\s*`+
		`<td class="file">user<br><span class="muted">agents/shipper.md</span></td>\s*`+
		`<td>fast<br><span class="muted">openai gpt-4.1-mini</span></td>\s*`+
		`<td><a href="#profile-deployer">deployer</a></td>\s*`+
		`<td class="tools">bash, read_file</td>\s*`+
		`<td class="skills">loads release-notes<br><span class="muted">enabled by global and agent settings:</span> code-review-checklist, opencode-implementer, release-notes, specification-engine `, body)

	require.Regexp(t, `id="profile-deployer" data-profile="deployer">\s*<td><b>deployer</b> <span class="muted">extends contributor</span><br><span class="muted">Deploys to staging.</span></td>\s*`+
		`<td>read, write, exec, push, deploy, network</td>\s*`+
		`<td><span class="muted">as its permissions allow</span></td>\s*`+
		`<td>deny kubectl delete</td>\s*<td></td>\s*`+
		`<td>bash<br><span class="muted">decided by mia</span></td>\s*<td>shipper</td>`, body)
	require.Regexp(t, `id="profile-read-only" data-profile="read-only">\s*<td><b>read-only</b> <span class="muted">built in</span>`, body)

	for _, row := range []string{
		`<tr><td>GitHub users with write access</td><td><a href="#profile-contributor">contributor</a></td><td class="muted"><code>access.github.write</code></td></tr>`,
		`<tr><td>GitHub user release-bot</td><td><a href="#profile-deployer">deployer</a></td><td class="muted"><code>access.github.users</code></td></tr>`,
		`<tr><td>Slack user group S0SRE</td><td><a href="#profile-ops">ops</a></td><td class="muted"><code>access.slack.groups</code></td></tr>`,
		`<tr><td>Local console users</td><td><a href="#profile-ops">ops</a></td><td class="muted"><code>access.local.default</code></td></tr>`,
		`<td><a href="#profile-read-only">read-only</a></td><td class="muted"><code>access.default</code></td></tr>`,
	} {
		require.Contains(t, body, row)
	}

	// The scopes page offers the agents in effect, and keeps one that is
	// gone but chosen, since settings may still name it.
	body = e.get("/admin/scopes?agent=retired").Body.String()
	require.Contains(t, body, `<option value="shipper">shipper</option>`)
	require.Contains(t, body, `<option value="retired" selected>retired</option>`)
}

func TestAgentsPageWithoutAgents(t *testing.T) {
	e := newSkillsEnv(t, nil)
	rec := e.get("/admin/agents")
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Contains(t, rec.Body.String(), "no agents are loaded")
}
