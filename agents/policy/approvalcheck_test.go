package policy_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
)

func TestApprovalOfWhatIsRefusedOutrightIsAConfigError(t *testing.T) {
	yes := true
	who := []string{"alice"}
	for _, tc := range []struct {
		name    string
		profile policy.ProfileConfig
		// want maps the field of each error to what its message says;
		// nil when the profile is fine. The reason in parentheses is the
		// shell policy's own.
		want map[string][]string
	}{
		{"the old README deployer: contributor cannot run kubectl at all",
			policy.ProfileConfig{Extends: "contributor", Approval: []string{"kubectl apply", "git push"}, Approvers: who},
			map[string][]string{
				"profiles.p.approval[0]": {`"kubectl apply" never asks anyone: the profile refuses it outright (command "kubectl" is not allowed (needs the deploy permission)); grant what it needs (permissions, commands.allow or tools) or remove it from approval`},
				"profiles.p.approval[1]": {`"git push" never asks anyone: the profile refuses it outright (`, "needs the network permission"},
			}},
		{"git push needs the network",
			policy.ProfileConfig{Extends: "contributor", Permissions: []policy.Permission{policy.PermDeploy}, Approval: []string{"kubectl apply", "git push"}, Approvers: who},
			map[string][]string{"profiles.p.approval[1]": {`"git push" never asks anyone: the profile refuses it outright (`, "needs the network permission"}}},
		{"the README deployer now", policy.ProfileConfig{Extends: "contributor", Permissions: []policy.Permission{policy.PermDeploy}, Network: &yes,
			Approval: []string{"kubectl apply", "git push"}, Approvers: who}, nil},
		{"allowed by name", policy.ProfileConfig{Extends: "contributor", Commands: policy.CommandRules{Allow: []string{"kubectl"}},
			Approval: []string{"kubectl apply"}, Approvers: who}, nil},
		{"denied by name", policy.ProfileConfig{Extends: "ops", Commands: policy.CommandRules{Deny: []string{"terraform destroy"}},
			Approval: []string{"make", "terraform destroy"}, Approvers: who},
			map[string][]string{"profiles.p.approval[1]": {`"terraform destroy" never asks anyone: the profile refuses it outright (`, `commands.deny "terraform destroy"`}}},
		{"a tool the profile cannot call", policy.ProfileConfig{Extends: "read-only", Approval: []string{"write_file"}, Approvers: who},
			map[string][]string{"profiles.p.approval[0]": {`"write_file" never asks anyone: the profile refuses it outright (tool "write_file" is not allowed (needs the write permission)); grant what it needs (permissions, commands.allow or tools) or remove it from approval`}}},
		{"a tool outside the tools list", policy.ProfileConfig{Extends: "ops", Tools: []string{"read_file", "bash"}, Approval: []string{"write_file"}, Approvers: who},
			map[string][]string{"profiles.p.approval[0]": {`"write_file" never asks anyone: the profile refuses it outright (tool "write_file" is not in the profile's tools list); grant what it needs (permissions, commands.allow or tools) or remove it from approval`}}},
		{"a tool the profile calls", policy.ProfileConfig{Extends: "contributor", Approval: []string{"write_file", "bash"}, Approvers: who}, nil},
		{"a push to a branch that may be protected is not refused outright",
			policy.ProfileConfig{Extends: "contributor", Network: &yes, Approval: []string{"git push"}, Approvers: who}, nil},
		{"globs are not judged", policy.ProfileConfig{Extends: "read-only", Approval: []string{"kube*"}, Approvers: who}, nil},
		{"platform tools wait for their platform", policy.ProfileConfig{Extends: "read-only", Approval: []string{"github_merge_pull_request"}, Approvers: who}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := policy.ValidateProfiles(map[string]policy.ProfileConfig{"p": tc.profile})
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			got := fieldErrors(t, err)
			require.Len(t, got, len(tc.want), "%v", got)
			for field, parts := range tc.want {
				for _, part := range parts {
					require.Contains(t, got[field], part)
				}
			}
		})
	}
}

func TestInheritedApprovalIsReportedWhereItDies(t *testing.T) {
	who := []string{"alice"}
	err := policy.ValidateProfiles(map[string]policy.ProfileConfig{
		"base":    {Extends: "ops", Approval: []string{"kubectl apply"}, Approvers: who},
		"careful": {Extends: "base", Commands: policy.CommandRules{Deny: []string{"kubectl"}}},
	})
	got := fieldErrors(t, err)
	require.Len(t, got, 1)
	require.Contains(t, got["profiles.careful"], `approval "kubectl apply" never asks anyone: the profile refuses it outright (`)
	require.Contains(t, got["profiles.careful"], `commands.deny "kubectl"`)
}

func TestApprovalsOfPlatformToolsAreCheckedWithThePlatform(t *testing.T) {
	e, err := policy.New(policy.Options{Profiles: map[string]policy.ProfileConfig{
		"reader": {Extends: "read-only", Approval: []string{"github_merge_pull_request", "github_get_issue"}, Approvers: []string{"alice"}},
	}})
	require.NoError(t, err, "without the platform its tools cannot be judged")
	infos := []tools.Info{
		{Name: "github_merge_pull_request", Kind: tools.KindIntegration, Permissions: []policy.Permission{policy.PermMerge}},
		{Name: "github_get_issue", Kind: tools.KindIntegration, Permissions: []policy.Permission{policy.PermRead}},
	}
	require.Equal(t, map[string]string{
		"profiles.reader.approval[0]": `"github_merge_pull_request" never asks anyone: the profile refuses it outright (tool "github_merge_pull_request" is not allowed (needs the merge permission)); grant what it needs (permissions, commands.allow or tools) or remove it from approval`,
	}, fieldErrors(t, e.CheckApprovals(infos)))
}
