package policy_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
)

// guardConfig is a contributor that may deploy and reach the network, with
// the deny and approval lists a team writes first: rules that name options
// as well as subcommands.
func guardConfig() map[string]policy.ProfileConfig {
	network := true
	return map[string]policy.ProfileConfig{
		"guard": {
			Extends:     policy.Contributor,
			Permissions: []policy.Permission{policy.PermDeploy},
			Network:     &network,
			Commands:    policy.CommandRules{Deny: []string{"rm -rf", "kubectl delete", "git push --force"}},
			Approval:    []string{"kubectl apply", "terraform apply"},
			Approvers:   []string{"ana"},
		},
	}
}

// TestCommandRulesMatchOptionsHoweverSpelt holds a rule that names options
// to every spelling of them: clustered, split, reordered, long or
// abbreviated, after the operands, through a variable, xargs or a wrapper,
// and to git's other ways to force a push. Commands without the options
// stay allowed.
func TestCommandRulesMatchOptionsHoweverSpelt(t *testing.T) {
	f := newFixture(t, guardConfig())
	for _, tc := range []struct {
		cmd  string
		want tools.Verdict
		rule string
	}{
		{"rm -rf build", tools.Deny, "commands.deny:rm -rf"},
		{"rm -fr build", tools.Deny, "commands.deny:rm -rf"},
		{"rm -r -f build", tools.Deny, "commands.deny:rm -rf"},
		{"rm -R -f build", tools.Deny, "commands.deny:rm -rf"},
		{"rm --recursive --force build", tools.Deny, "commands.deny:rm -rf"},
		{"rm --recur --forc build", tools.Deny, "commands.deny:rm -rf"},
		{"rm -vrf build", tools.Deny, "commands.deny:rm -rf"},
		{"rm build -r -f", tools.Deny, "commands.deny:rm -rf"},
		{"/bin/rm -rf build", tools.Deny, "commands.deny:rm -rf"},
		{"x=-r; rm -f $x build", tools.Deny, "commands.deny:rm -rf"},
		{"echo -rf build | xargs rm", tools.Deny, "commands.deny:rm -rf"},
		{"bash -c 'rm -Rf build'", tools.Deny, "commands.deny:rm -rf"},
		{"git push --force origin feature", tools.Deny, "commands.deny:git push --force"},
		{"git push -f origin feature", tools.Deny, "commands.deny:git push --force"},
		{"git push origin feature --force", tools.Deny, "commands.deny:git push --force"},
		{"git push --forc origin feature", tools.Deny, "commands.deny:git push --force"},
		{"git push --force-with-lease origin feature", tools.Deny, "commands.deny:git push --force"},
		{"git push origin +feature", tools.Deny, "commands.deny:git push --force"},
		{"git push origin +HEAD:feature", tools.Deny, "commands.deny:git push --force"},
		{"git push -c x origin feature -vf", tools.Deny, "commands.deny:git push --force"},
		{"git -c remote.origin.push=+refs/heads/feature:refs/heads/feature push origin", tools.Deny, "commands.deny:git push --force"},
		{"git -c alias.fp='push --force' fp origin feature", tools.Deny, "commands.deny:git push --force"},
		{"git send-pack --force origin feature", tools.Deny, "commands.deny:git push --force"},
		{"kubectl apply -f k8s.yaml", tools.NeedsApproval, "approval:kubectl apply"},
		{"rm -r build", tools.Allow, ""},
		{"rm -f build/out.o", tools.Allow, ""},
		{"rm -- -rf", tools.Allow, ""},
		{"rm -r -- build", tools.Allow, ""},
		{"rm -f *.o", tools.Allow, ""},
		{"git push origin feature", tools.Allow, ""},
		{"git push -u origin feature", tools.Allow, ""},
	} {
		d := f.bash(t, "guard", tc.cmd)
		require.Equal(t, tc.want, d.Verdict, "%s: %s", tc.cmd, d.Reason)
		if tc.rule != "" {
			require.Equal(t, "profile:guard/"+tc.rule, d.Rule, tc.cmd)
		}
	}
}

// TestOptionsCannotBeAllowedAlone refuses commands.allow entries that name
// an option: allowing "rm -i" would allow rm with every other option.
func TestOptionsCannotBeAllowedAlone(t *testing.T) {
	err := policy.ValidateProfiles(map[string]policy.ProfileConfig{
		"p": {Extends: policy.ReadOnly, Commands: policy.CommandRules{Allow: []string{"rm -i"}}},
	})
	require.ErrorContains(t, err, `"rm -i": allow a command or its subcommands, not an option of it`)
	err = policy.ValidateProfiles(map[string]policy.ProfileConfig{
		"p": {Extends: policy.Contributor, Commands: policy.CommandRules{Deny: []string{"git push --force=x"}}},
	})
	require.ErrorContains(t, err, "without a value or a glob")
}
