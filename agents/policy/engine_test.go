package policy_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
)

// call builds a call of tool by agent with profile in the fixture's
// workspace.
func (f *fixture) call(agent, profile string, tool tools.Info, input any) tools.Call {
	in, _ := json.Marshal(input)
	return tools.Call{
		CallContext: tools.CallContext{
			Scope:      tools.Scope{Agent: agent, Profile: profile},
			SessionKey: "local:t1", JobID: "job_1", WorkItemID: "wi_1", CorrelationID: "c1",
			Workspace: f.ws, CallID: "call_1",
		},
		Tool: tool, Input: in,
	}
}

func TestEngineIntersectsAgentSkillsAndProfile(t *testing.T) {
	f := newFixture(t, nil)
	e := f.engine
	read := map[string]string{"path": "README.md"}
	write := map[string]string{"path": "docs/new.md", "content": "x"}

	for _, tc := range []struct {
		name   string
		call   tools.Call
		skills []policy.Skill
		want   tools.Verdict
		rule   string
		reason string
	}{
		{name: "allowed", call: f.call("coder", "contributor", coreInfo("write_file"), write), want: tools.Allow},
		{name: "profile", call: f.call("reviewer", "read-only", coreInfo("write_file"), write), want: tools.Deny,
			rule: "profile:read-only/permission:write", reason: `denied by profile "read-only": tool "write_file" is not allowed (needs the write permission)`},
		{name: "unknown profile", call: f.call("x", "nobody", coreInfo("read_file"), read), want: tools.Deny, rule: "profile:unknown"},
		{name: "required agent", call: f.call("coder", "ops", tools.Info{Name: "deploy", Kind: tools.KindCommand, RequiredAgent: "ops", Permissions: []policy.Permission{policy.PermDeploy}}, map[string]any{}),
			want: tools.Deny, rule: "required_agent", reason: `denied: tool "deploy" may only be called by agent "ops" (required_agent)`},
		{name: "required agent is the caller", call: f.call("ops", "ops", tools.Info{Name: "deploy", Kind: tools.KindCommand, RequiredAgent: "ops", Permissions: []policy.Permission{policy.PermDeploy}}, map[string]any{}),
			want: tools.Allow},
		{name: "skill forbids", call: f.call("coder", "contributor", coreInfo("write_file"), write),
			skills: []policy.Skill{{Name: "impl", AllowedTools: []string{"write_file", "read_file"}}, {Name: "spec", ForbiddenTools: []string{"write_file"}}},
			want:   tools.Deny, rule: "skill:spec/forbidden_tools", reason: `denied by skill "spec": tool "write_file" is forbidden (forbidden_tools)`},
		{name: "skill allow lists add up", call: f.call("coder", "contributor", coreInfo("bash"), map[string]string{"command": "ls"}),
			skills: []policy.Skill{{Name: "a", AllowedTools: []string{"bash", "read_file"}}, {Name: "b", AllowedTools: []string{"read_file"}}},
			want:   tools.Allow},
		{name: "a tool no allow list names", call: f.call("coder", "contributor", coreInfo("write_file"), write),
			skills: []policy.Skill{{Name: "a", AllowedTools: []string{"bash", "read_file"}}, {Name: "b", AllowedTools: []string{"read_file"}}, {Name: "c"}},
			want:   tools.Deny, rule: "skill:a,b/allowed_tools", reason: `denied by skills "a", "b": tool "write_file" is in none of their allowed_tools`},
		{name: "forbidden beats another skill's allow list", call: f.call("coder", "contributor", coreInfo("write_file"), write),
			skills: []policy.Skill{{Name: "writer", AllowedTools: []string{"write_file"}}, {Name: "careful", AllowedTools: []string{"read_file"}, ForbiddenTools: []string{"write_*"}}},
			want:   tools.Deny, rule: "skill:careful/forbidden_tools"},
		{name: "skill allows", call: f.call("coder", "contributor", coreInfo("read_file"), read),
			skills: []policy.Skill{{Name: "a", AllowedTools: []string{"read_*"}}, {Name: "a", AllowedTools: []string{"read_*"}}},
			want:   tools.Allow},
		{name: "empty allow list allows nothing", call: f.call("coder", "contributor", coreInfo("read_file"), read),
			skills: []policy.Skill{{Name: "none", AllowedTools: []string{}}}, want: tools.Deny, rule: "skill:none/allowed_tools"},
		{name: "control tools survive allow lists", call: f.call("coder", "contributor", declares("disable_skill", tools.KindControl, policy.PermRead), map[string]any{}),
			skills: []policy.Skill{{Name: "spec", AllowedTools: []string{"read_file"}}}, want: tools.Allow},
		{name: "skills cannot widen the profile", call: f.call("reviewer", "read-only", coreInfo("write_file"), write),
			skills: []policy.Skill{{Name: "writer", AllowedTools: []string{"write_file"}}}, want: tools.Deny, rule: "profile:read-only/permission:write"},
		{name: "bad input", call: f.call("coder", "contributor", coreInfo("bash"), map[string]any{"command": 3}), want: tools.Deny, rule: "input:invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := e.Decide(tc.call, tc.skills)
			require.Equal(t, tc.want, d.Verdict, d.Reason)
			if tc.rule != "" {
				require.Equal(t, tc.rule, d.Rule)
			}
			if tc.reason != "" {
				require.Equal(t, tc.reason, d.Reason)
			}
		})
	}

	// The agent's tools list.
	c := f.call("coder", "contributor", coreInfo("bash"), map[string]string{"command": "ls"})
	c.Tools = []string{"read_file"}
	d := e.Decide(c, nil)
	require.Equal(t, "agent:coder/tools", d.Rule)
	require.Equal(t, `denied by agent "coder": tool "bash" is not in the tools list of agent "coder"`, d.Reason)
}

// skillsFrom is a SkillSource with fixed skills.
type skillsFrom []policy.Skill

func (s skillsFrom) ActiveSkills(context.Context, tools.CallContext) []policy.Skill { return s }

func TestToolsNeedWhatTheyDeclare(t *testing.T) {
	e, err := policy.New(policy.Options{
		Skills: skillsFrom{{Name: "careful", ForbiddenTools: []string{"slack_*"}}},
	})
	require.NoError(t, err)
	integration := tools.KindIntegration
	for _, tc := range []struct {
		profile string
		tool    tools.Info
		forbids bool
	}{
		{"read-only", coreInfo("read_file"), false},
		{"read-only", coreInfo("bash"), false},
		{"read-only", coreInfo("edit_file"), true},
		{"read-only", declares("agent_docs", tools.KindAgent, policy.PermRead), false},
		{"read-only", declares("handoff_to", tools.KindControl, policy.PermRead), false},
		{"read-only", declares("lint", tools.KindCommand, policy.PermExec), true},
		{"contributor", declares("lint", tools.KindCommand, policy.PermExec), false},
		{"read-only", declares("release_notes", tools.KindCommand, policy.PermRead), false},
		{"maintainer", declares("db_migrate", tools.KindCommand, policy.PermDeploy), true},
		{"ops", declares("db_migrate", tools.KindCommand, policy.PermDeploy), false},
		{"read-only", declares("github_get_pull_request", integration, policy.PermRead), false},
		{"read-only", declares("github_open_pull_request", integration, policy.PermPush), true},
		{"contributor", declares("github_open_pull_request", integration, policy.PermPush), false},
		{"contributor", declares("github_merge_pull_request", integration, policy.PermMerge), true},
		{"maintainer", declares("github_merge_pull_request", integration, policy.PermMerge), false},
		{"maintainer", declares("rerun_workflow", integration, policy.PermCI), false},
		{"contributor", declares("rerun_workflow", integration, policy.PermCI), true},
		{"ops", declares("vault_read", integration, policy.PermSecrets), false},
		{"maintainer", declares("vault_read", integration, policy.PermSecrets), true},
		// The name says nothing: a tool that sounds harmless needs what
		// it declares, and one that declares nothing is never allowed.
		{"read-only", declares("get_status", integration, policy.PermPush), true},
		{"contributor", declares("merge_helper", integration, policy.PermRead), false},
		{"ops", tools.Info{Name: "list_things", Kind: integration}, true},
		{"ops", tools.Info{Name: "agent_docs", Kind: tools.KindAgent}, true},
		{"nobody", coreInfo("read_file"), true},
	} {
		require.Equal(t, tc.forbids, e.Forbids(tc.profile, tc.tool), "%s %s", tc.profile, tc.tool.Name)
	}

	d := e.Decide(tools.Call{
		CallContext: tools.CallContext{Scope: tools.Scope{Agent: "ops", Profile: "ops"}},
		Tool:        tools.Info{Name: "list_things", Kind: integration}, Input: json.RawMessage(`{}`),
	}, nil)
	require.Equal(t, tools.Deny, d.Verdict)
	require.Equal(t, "profile:ops/tool:undeclared", d.Rule)
	require.Equal(t, `denied by profile "ops": tool "list_things" declares no permissions, so no profile allows it`, d.Reason)

	// Check consults the skill source.
	got := e.Check(context.Background(), tools.Call{
		CallContext: tools.CallContext{Scope: tools.Scope{Agent: "ops", Profile: "ops"}},
		Tool:        declares("slack_post_message", integration, policy.PermPush), Input: json.RawMessage(`{}`),
	})
	require.Equal(t, tools.Deny, got.Verdict)
	require.Contains(t, got.Reason, `denied by skill "careful"`)
}

func TestFileToolsResolvePathsBeforeMatching(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		profile, tool, path string
		want                tools.Verdict
		rule                string
	}{
		{"read-only", "read_file", "README.md", tools.Allow, ""},
		{"read-only", "read_file", "link-in/main.go", tools.Allow, ""},
		{"read-only", "read_file", "src/../README.md", tools.Allow, ""},
		{"read-only", "read_file", "link-out/secret.txt", tools.Deny, "profile:read-only/path:symlink-escape"},
		{"ops", "read_file", "link-out/secret.txt", tools.Deny, "profile:ops/path:symlink-escape"},
		{"ops", "read_file", "link-out", tools.Deny, "profile:ops/path:symlink-escape"},
		{"ops", "read_file", "dangling", tools.Deny, "profile:ops/path:symlink-escape"},
		{"ops", "read_file", "link-in/../link-out/secret.txt", tools.Deny, "profile:ops/path:symlink-escape"},
		{"ops", "read_file", "../outside/secret.txt", tools.Deny, "profile:ops/path:outside-workspace"},
		{"ops", "read_file", "/etc/passwd", tools.Deny, "profile:ops/path:outside-workspace"},
		{"contributor", "write_file", "link-out/new.txt", tools.Deny, "profile:contributor/path:symlink-escape"},
		{"contributor", "write_file", "dangling", tools.Deny, "profile:contributor/path:symlink-escape"},
		{"contributor", "write_file", "src/new.go", tools.Allow, ""},
		{"contributor", "write_file", ".github/workflows/release.yml", tools.Deny, "profile:contributor/path:ci"},
		{"contributor", "edit_file", ".git/hooks/pre-commit", tools.Deny, "profile:contributor/path:ci"},
		{"maintainer", "edit_file", ".github/workflows/ci.yml", tools.Allow, ""},
		{"contributor", "read_file", ".env", tools.Deny, "profile:contributor/path:secrets"},
		{"ops", "read_file", ".env", tools.Allow, ""},
		{"read-only", "list_directory", "", tools.Allow, ""},
		{"read-only", "search_files", "link-out", tools.Deny, "profile:read-only/path:symlink-escape"},
	} {
		in := map[string]string{"path": tc.path}
		if tc.tool == "write_file" {
			in["content"] = "x"
		}
		d := f.tool(t, tc.profile, tc.tool, in)
		require.Equal(t, tc.want, d.Verdict, "%s %s %s: %s", tc.profile, tc.tool, tc.path, d.Reason)
		if tc.rule != "" {
			require.Equal(t, tc.rule, d.Rule, tc.path)
		}
	}

	// A workspace that is itself reached through a link works the same.
	link := filepath.Join(t.TempDir(), "ws-link")
	require.NoError(t, os.Symlink(f.ws, link))
	in, _ := json.Marshal(map[string]string{"command": "cat src/main.go && cat link-out/secret.txt"})
	d, err := f.engine.CheckOffline(policy.CheckRequest{Profile: "read-only", Workspace: link, Tool: tools.Info{Name: "bash"}, Input: in})
	require.NoError(t, err)
	require.Equal(t, "profile:read-only/path:symlink-escape", d.Rule, d.Reason)
}

// The listings a check reads are remembered between checks while their
// directories stay unchanged; a link made afterwards is seen all the same,
// by a glob and by a walk through a tree's entries.
func TestRememberedListingsSeeANewLink(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	cmds := []string{"cat src/*.go", "find src -name '*.go' -exec cat {} +", "git ls-files | xargs cat"}
	// Past the time a directory must have been left alone for its listing
	// to be remembered.
	time.Sleep(3200 * time.Millisecond)
	for range 2 {
		for _, cmd := range cmds {
			require.Equal(t, tools.Allow, f.bash(t, "read-only", cmd).Verdict, cmd)
		}
	}
	require.NoError(t, os.Symlink(filepath.Join(f.outside, "secret.txt"), filepath.Join(f.ws, "src", "evil.go")))
	for _, cmd := range cmds {
		d := f.bash(t, "read-only", cmd)
		require.Equal(t, tools.Deny, d.Verdict, cmd)
		require.Equal(t, "profile:read-only/path:symlink-escape", d.Rule, "%s: %s", cmd, d.Reason)
	}
}

func TestOfflineCheckReportsBadInput(t *testing.T) {
	f := newFixture(t, nil)
	_, err := f.engine.CheckOffline(policy.CheckRequest{Profile: "nobody", Tool: tools.Info{Name: "bash"}, Input: json.RawMessage(`{"command":"ls"}`)})
	require.ErrorContains(t, err, `unknown profile "nobody"`)
	_, err = f.engine.CheckOffline(policy.CheckRequest{Profile: "ops", Workspace: f.ws, Tool: tools.Info{Name: "bash"}, Input: json.RawMessage(`{"command":`)})
	require.ErrorContains(t, err, "not valid JSON")
	_, err = f.engine.CheckOffline(policy.CheckRequest{Profile: "ops", Workspace: f.ws, Tool: tools.Info{Name: "bash"}, Input: json.RawMessage(`{}`)})
	require.ErrorContains(t, err, "command is required")
	_, err = f.engine.CheckOffline(policy.CheckRequest{Profile: "ops", Workspace: filepath.Join(f.ws, "missing"), Tool: tools.Info{Name: "bash"}, Input: json.RawMessage(`{"command":"ls"}`)})
	require.Error(t, err)
	_, err = f.engine.CheckOffline(policy.CheckRequest{Profile: "ops", Workspace: f.ws})
	require.ErrorContains(t, err, "no tool")

	// The workspace defaults to the current directory.
	t.Chdir(f.ws)
	d, err := f.engine.CheckOffline(policy.CheckRequest{Profile: "read-only", Tool: tools.Info{Name: "bash"}, Input: json.RawMessage(`{"command":"cat README.md"}`)})
	require.NoError(t, err)
	require.Equal(t, tools.Allow, d.Verdict, d.Reason)
	require.Equal(t, []policy.Permission{"read"}, d.Permissions)
	require.False(t, d.Sensitive)
}

func TestSandboxReadOnlyPathsFollowTheCIPermission(t *testing.T) {
	f := newFixture(t, nil)
	require.NoError(t, os.MkdirAll(filepath.Join(f.ws, "repo", ".git", "hooks"), 0o755))
	real, err := filepath.EvalSymlinks(f.ws)
	require.NoError(t, err)
	got := f.engine.SandboxReadOnly("contributor", f.ws)
	require.ElementsMatch(t, []string{
		filepath.Join(real, ".git/hooks"), filepath.Join(real, ".git/config"), filepath.Join(real, ".github/workflows"),
		filepath.Join(real, "Jenkinsfile"), filepath.Join(real, "repo/.git/hooks"),
	}, got)
	require.Empty(t, f.engine.SandboxReadOnly("maintainer", f.ws))
	require.NotEmpty(t, f.engine.SandboxReadOnly("nobody", f.ws), "an unknown profile is treated as the least")
}

func TestSensitiveToolsASkillBringsNeedApproval(t *testing.T) {
	f := newFixture(t, map[string]policy.ProfileConfig{
		"releaser": {Extends: "contributor", Tools: []string{"publish", "read_file"}},
	})
	publish := tools.Info{Name: "publish", Kind: tools.KindCommand, Package: "releases", Permissions: []policy.Permission{policy.PermPush}}
	stamp := tools.Info{Name: "stamp", Kind: tools.KindCommand, Package: "releases", Permissions: []policy.Permission{policy.PermRead}}
	loaded := []policy.Skill{{Name: "shipping", AllowedTools: []string{"publish", "stamp", "read_file"}}}
	for _, tc := range []struct {
		name    string
		tool    tools.Info
		profile string
		tools   []string // the agent's tools list
		pkg     string   // the agent's package
		want    tools.Verdict
		reason  string
	}{
		{name: "a push tool only the skill brings", tool: publish, profile: "contributor", want: tools.NeedsApproval,
			reason: `tool "publish" came with skill "shipping" and uses push; profile "contributor" does not list it, so each call needs a person's approval`},
		{name: "a read tool the skill brings", tool: stamp, profile: "contributor", want: tools.Allow},
		{name: "the profile lists it", tool: publish, profile: "releaser", want: tools.Allow},
		{name: "the agent's own tools list has it", tool: publish, profile: "contributor", tools: []string{"publish"}, want: tools.Allow},
		{name: "its own package's tool", tool: publish, profile: "contributor", pkg: "releases", want: tools.Allow},
		{name: "the profile forbids it whatever the skill", tool: publish, profile: "read-only", want: tools.Deny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := f.call("coder", tc.profile, tc.tool, map[string]any{})
			c.Tools, c.Package, c.Loaded = tc.tools, tc.pkg, []string{"publish", "stamp", "read_file"}
			d := f.engine.Decide(c, loaded)
			require.Equal(t, tc.want, d.Verdict, d.Reason)
			if tc.reason != "" {
				require.Equal(t, tc.reason, d.Reason)
			}
		})
	}
}

func TestToolsThatAskEveryTime(t *testing.T) {
	f := newFixture(t, map[string]policy.ProfileConfig{
		"installer": {Extends: "contributor", Tools: []string{"install_package", "read_file"}},
		"guarded":   {Extends: "contributor", Approval: []string{"bash"}, Approvers: []string{"ana"}},
	})
	install := tools.Info{Name: "install_package", Kind: tools.KindControl, Permissions: []policy.Permission{policy.PermWrite}, Approval: true}
	d := f.engine.Decide(f.call("builder", "contributor", install, map[string]any{}), nil)
	require.Equal(t, tools.NeedsApproval, d.Verdict, d.Reason)
	require.Equal(t, `profile "contributor" requires approval: every call of tool "install_package" waits for a person`, d.Reason)
	d = f.engine.Decide(f.call("builder", "installer", install, map[string]any{}), nil)
	require.Equal(t, tools.Allow, d.Verdict, "a profile that lists the tool decided for it")
	d = f.engine.Decide(f.call("builder", "read-only", install, map[string]any{}), nil)
	require.Equal(t, tools.Deny, d.Verdict, "asking a person never widens the profile")

	require.Equal(t, []string{policy.AdminApprover}, f.engine.Approvers("contributor"), "the built-in profiles' calls are decided by the administrator")
	require.Equal(t, []string{"ana"}, f.engine.Approvers("guarded"))
}
