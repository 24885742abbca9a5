package policy_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
)

func TestConfinementFollowsTheRights(t *testing.T) {
	yes := true
	f := newFixture(t, map[string]policy.ProfileConfig{
		"deployer": {Extends: "contributor", Network: &yes},
		"auditor":  {Extends: "read-only", Permissions: []policy.Permission{policy.PermCI}},
	})
	real, err := filepath.EvalSymlinks(f.ws)
	require.NoError(t, err)
	protected := []string{
		filepath.Join(real, ".git/hooks"), filepath.Join(real, ".git/config"),
		filepath.Join(real, ".github/workflows"), filepath.Join(real, "Jenkinsfile"),
	}
	for _, tc := range []struct {
		profile string
		want    tools.Confinement
	}{
		{"read-only", tools.Confinement{WorkspaceReadOnly: true, ReadOnly: protected}},
		{"contributor", tools.Confinement{ReadOnly: protected}},
		{"deployer", tools.Confinement{Network: true, ReadOnly: protected}},
		{"maintainer", tools.Confinement{}},
		{"ops", tools.Confinement{Network: true}},
		{"auditor", tools.Confinement{WorkspaceReadOnly: true}},
		{"nobody", tools.Confinement{WorkspaceReadOnly: true, ReadOnly: protected}},
	} {
		got := f.engine.Confine(tools.Scope{Agent: "a", Profile: tc.profile}, f.ws)
		require.Equal(t, tc.want.Network, got.Network, tc.profile)
		require.Equal(t, tc.want.WorkspaceReadOnly, got.WorkspaceReadOnly, tc.profile)
		require.ElementsMatch(t, tc.want.ReadOnly, got.ReadOnly, tc.profile)
	}
}
