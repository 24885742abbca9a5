package policy_test

import (
	"os"
	"os/exec"
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
	// Secret-looking files are masked for every profile without the
	// secrets permission: .env, not .env.example, and nothing under .git or
	// node_modules.
	require.NoError(t, os.MkdirAll(filepath.Join(f.ws, "node_modules", "x"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "node_modules", "x", ".npmrc"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "docs", "server.pem"), []byte("x"), 0o644))
	require.NoError(t, os.Symlink("docs/server.pem", filepath.Join(f.ws, "id_rsa")))
	// In a repository, a file it tracks is left alone: a committed .npmrc.
	sub := filepath.Join(f.ws, "docs", "sub")
	require.NoError(t, os.MkdirAll(sub, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sub, ".npmrc"), []byte("registry=x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(sub, ".env"), []byte("TOKEN=x"), 0o644))
	for _, args := range [][]string{{"init", "-q"}, {"add", ".npmrc"}} {
		out, err := exec.Command("git", append([]string{"-C", sub}, args...)...).CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	masked := []string{filepath.Join(real, ".env"), filepath.Join(real, "docs/server.pem"), filepath.Join(real, "docs/sub/.env")}
	protected := []string{
		filepath.Join(real, ".git/hooks"), filepath.Join(real, ".git/config"),
		filepath.Join(real, ".github/workflows"), filepath.Join(real, "Jenkinsfile"),
	}
	for _, tc := range []struct {
		profile string
		want    tools.Confinement
	}{
		{"read-only", tools.Confinement{WorkspaceReadOnly: true, ReadOnly: protected, Masked: masked}},
		{"contributor", tools.Confinement{ReadOnly: protected, Masked: masked}},
		{"deployer", tools.Confinement{Network: true, ReadOnly: protected, Masked: masked}},
		{"maintainer", tools.Confinement{Masked: masked}},
		{"ops", tools.Confinement{Network: true}},
		{"auditor", tools.Confinement{WorkspaceReadOnly: true, Masked: masked}},
		{"nobody", tools.Confinement{WorkspaceReadOnly: true, ReadOnly: protected, Masked: masked}},
	} {
		got := f.engine.Confine(tools.Scope{Agent: "a", Profile: tc.profile}, f.ws)
		require.Equal(t, tc.want.Network, got.Network, tc.profile)
		require.Equal(t, tc.want.WorkspaceReadOnly, got.WorkspaceReadOnly, tc.profile)
		require.ElementsMatch(t, tc.want.ReadOnly, got.ReadOnly, tc.profile)
		require.ElementsMatch(t, tc.want.Masked, got.Masked, tc.profile)
	}
}
