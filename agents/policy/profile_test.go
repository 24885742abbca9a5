package policy_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/bot"
)

func fieldErrors(t *testing.T, err error) map[string]string {
	t.Helper()
	require.Error(t, err)
	out := map[string]string{}
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	for _, e := range list {
		var fe *bot.FieldError
		require.True(t, errors.As(e, &fe), "%T %v", e, e)
		out[fe.Field] = fe.Msg
	}
	return out
}

func TestProfileConfigIsValidatedWithFieldPaths(t *testing.T) {
	yes := true
	cfg := map[string]policy.ProfileConfig{
		"deployer":   {Extends: "x"},
		"loop-a":     {Extends: "loop-b"},
		"loop-b":     {Extends: "loop-a"},
		"self":       {Extends: "self"},
		"on-a-loop":  {Extends: "loop-a"},
		"ops":        {Extends: "contributor"},
		"Bad Name":   {},
		"perms":      {Permissions: []policy.Permission{"write", "fly"}},
		"net":        {Permissions: []policy.Permission{policy.PermNetwork}},
		"globs":      {Paths: policy.PathRules{Write: policy.PathRule{Allow: []string{"docs/[", "../up/**"}}}},
		"cmds":       {Commands: policy.CommandRules{Deny: []string{"rm; ls", ""}}},
		"tools":      {Tools: []string{"read_file", "no such"}},
		"approval":   {Extends: "contributor", Approval: []string{"kubectl apply"}, Network: &yes},
		"inherits":   {Extends: "approval"},
		"has-people": {Extends: "contributor", Approval: []string{"deploy"}, Approvers: []string{"alice"}},
	}
	errs := fieldErrors(t, policy.ValidateProfiles(cfg))
	require.Equal(t, `unknown profile "x" (want read-only, contributor, maintainer, ops or a custom profile)`, errs["profiles.deployer.extends"])
	require.Equal(t, "extends forms a cycle: loop-a → loop-b → loop-a", errs["profiles.loop-a.extends"])
	require.Equal(t, "extends forms a cycle: loop-b → loop-a → loop-b", errs["profiles.loop-b.extends"])
	require.Equal(t, "extends forms a cycle: self → self", errs["profiles.self.extends"])
	require.NotContains(t, errs, "profiles.on-a-loop.extends", "the cycle is reported where it is")
	require.Contains(t, errs["profiles.ops"], "built-in profile")
	require.Contains(t, errs["profiles.Bad Name"], "invalid profile name")
	require.Contains(t, errs["profiles.perms.permissions[1]"], `unknown permission "fly"`)
	require.Contains(t, errs["profiles.net.permissions[0]"], "network: true")
	require.Contains(t, errs["profiles.globs.paths.write.allow[0]"], "invalid glob")
	require.Contains(t, errs["profiles.globs.paths.write.allow[1]"], "absolute glob")
	require.Contains(t, errs["profiles.cmds.commands.deny[0]"], "not shell syntax")
	require.Contains(t, errs["profiles.cmds.commands.deny[1]"], "empty command")
	require.Contains(t, errs["profiles.tools.tools[1]"], "invalid tool name")
	require.Contains(t, errs["profiles.approval.approvers"], "required")
	require.NotContains(t, errs, "profiles.has-people.approvers")
	require.Len(t, errs, 14, "%v", errs)

	_, err := policy.New(policy.Options{Profiles: cfg})
	require.Error(t, err)
}

func TestCustomProfilesFromYAML(t *testing.T) {
	var cfg struct {
		Profiles map[string]policy.ProfileConfig `yaml:"profiles"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(`
profiles:
  deployer:
    description: Deploys with a person watching
    extends: contributor
    network: true
    permissions: [deploy]
    approval: [kubectl apply, helm]
    approvers: [alice, bob]
    commands:
      deny: [kubectl delete, terraform destroy]
  docs-writer:
    tools: [read_file, write_file, bash]
    commands:
      allow: [ls, cat, grep, git diff]
    paths:
      write:
        allow: ["docs/**"]
      read:
        deny: ["secrets/**"]
  ro-make:
    extends: read-only
    commands:
      allow: [make]
  contributor-net:
    extends: contributor
    network: true
  maintainer-net:
    extends: maintainer
    network: true
`), &cfg))
	f := newFixture(t, cfg.Profiles)

	p, ok := f.engine.Profile("deployer")
	require.True(t, ok)
	require.Equal(t, []policy.Permission{"read", "write", "exec", "push", "deploy", "network"}, p.Permissions)
	require.True(t, f.engine.Network("deployer"))
	require.False(t, f.engine.Network("contributor"))
	require.Equal(t, []string{"alice", "bob"}, f.engine.Approvers("deployer"))
	names := f.engine.Names()
	require.Equal(t, []string{"contributor", "contributor-net", "deployer", "docs-writer", "maintainer", "maintainer-net", "ops", "read-only", "ro-make"}, names)
	list := f.engine.Profiles()
	require.Equal(t, "read-only", list[0].Name)
	require.True(t, list[0].Builtin)
	require.Equal(t, "contributor-net", list[4].Name)
	doc, err := json.Marshal(list)
	require.NoError(t, err)
	require.Contains(t, string(doc), `"approval":["kubectl apply","helm"]`)

	for _, tc := range []struct {
		profile, cmd string
		want         byte
		rule         string
	}{
		{"deployer", "kubectl get pods", 'A', ""},
		{"deployer", "kubectl apply -f app.yaml", 'N', "profile:deployer/approval:kubectl apply"},
		{"deployer", "ls && kubectl apply -f app.yaml", 'N', ""},
		{"deployer", "helm upgrade app ./chart", 'N', ""},
		{"deployer", "kubectl -n prod delete pod x", 'D', "profile:deployer/commands.deny:kubectl delete"},
		{"deployer", "kubectl apply -f x; terraform destroy", 'D', ""},
		{"deployer", "timeout 60 kubectl apply -f x", 'N', ""},
		{"deployer", "curl https://example.com", 'A', ""},
		{"deployer", "gh pr merge 1", 'D', ""},
		{"docs-writer", "ls docs", 'A', ""},
		{"docs-writer", "cat README.md", 'A', ""},
		{"docs-writer", "grep -r foo docs", 'A', ""},
		{"docs-writer", "git diff", 'A', ""},
		{"docs-writer", "git status", 'D', ""},
		{"docs-writer", "cat secrets/db.txt", 'D', "profile:docs-writer/paths.read.deny:secrets/**"},
		{"docs-writer", "grep -r password .", 'D', ""},
		{"docs-writer", "cat README.md > docs/copy.md", 'A', ""},
		{"docs-writer", "cat README.md > src/copy.go", 'D', "profile:docs-writer/paths.write.allow"},
		{"docs-writer", "rm docs/README.md", 'D', ""},
		{"docs-writer", "echo hi", 'A', ""},
		{"docs-writer", "cd docs && ls", 'A', ""},
		{"docs-writer", "printf '%s' x", 'D', ""},
		{"ro-make", "make test", 'A', ""},
		{"ro-make", "make test && rm x", 'D', ""},
		{"ro-make", "make -C ../other", 'D', ""},
		{"contributor-net", "git push origin feature/x", 'A', ""},
		{"contributor-net", "git push -u origin HEAD:feature/y", 'A', ""},
		{"contributor-net", "git push origin main", 'D', "profile:contributor-net/permission:merge"},
		{"contributor-net", "git push", 'D', ""},
		{"contributor-net", "git push --all origin", 'D', ""},
		{"contributor-net", "git push origin :feature/x", 'D', ""},
		{"contributor-net", "git push origin HEAD", 'D', ""},
		{"contributor-net", "git push origin release/1.2", 'D', ""},
		{"contributor-net", "git push origin +refs/heads/feat:refs/heads/master", 'D', ""},
		{"contributor-net", "gh pr create --fill", 'A', ""},
		{"contributor-net", "gh pr merge 3", 'D', ""},
		{"contributor-net", "curl https://example.com", 'A', ""},
		{"contributor-net", "kubectl get pods", 'D', ""},
		{"maintainer-net", "git push origin main", 'A', ""},
		{"maintainer-net", "git push", 'A', ""},
		{"maintainer-net", "gh pr merge 3 --squash", 'A', ""},
		{"maintainer-net", "gh release create v1", 'D', ""},
	} {
		d := f.bash(t, tc.profile, tc.cmd)
		require.Equal(t, string(tc.want), string(letter(d.Verdict)), "%s: %s: %s (%s)", tc.profile, tc.cmd, d.Reason, d.Rule)
		if tc.rule != "" {
			require.Equal(t, tc.rule, d.Rule, tc.cmd)
		}
	}

	d := f.bash(t, "deployer", "kubectl apply -f app.yaml")
	require.Equal(t, `profile "deployer" requires approval: command "kubectl" needs approval (profile "deployer" lists "kubectl apply")`, d.Reason)
	require.True(t, d.Sensitive)
	d = f.bash(t, "contributor-net", "git push origin main")
	require.Equal(t, `denied by profile "contributor-net": command "git push" is not allowed (needs the merge permission): branch main is protected`, d.Reason)

	// Tools: docs-writer lists its tools, so others are refused even
	// where a permission would cover them, and listed ones need none.
	require.True(t, f.engine.Forbids("docs-writer", coreInfo("list_directory")))
	require.False(t, f.engine.Forbids("docs-writer", coreInfo("write_file")))
	d = f.tool(t, "docs-writer", "write_file", map[string]string{"path": "docs/new.md", "content": "x"})
	require.Equal(t, "allow", string(d.Verdict), d.Reason)
	d = f.tool(t, "docs-writer", "write_file", map[string]string{"path": "src/new.go", "content": "x"})
	require.Equal(t, "deny", string(d.Verdict), d.Reason)
	d = f.tool(t, "docs-writer", "list_directory", map[string]string{})
	require.Equal(t, "profile:docs-writer/tools", d.Rule)
}
