package policy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
)

// fixture is a workspace laid out like a checked-out repository, with a
// directory outside it and symbolic links that lead there.
type fixture struct {
	ws, outside string
	engine      *policy.Engine
}

func newFixture(t testing.TB, cfg map[string]policy.ProfileConfig) *fixture {
	t.Helper()
	root := t.TempDir()
	ws := filepath.Join(root, "workspace")
	outside := filepath.Join(root, "outside")
	files := map[string]string{
		"README.md":                "# demo\n",
		"src/main.go":              "package main\n",
		"src/util.go":              "package main\n",
		"docs/README.md":           "docs\n",
		"build/out.o":              "obj",
		".github/workflows/ci.yml": "on: push\n",
		".git/config":              "[core]\n",
		".git/hooks/pre-push":      "#!/bin/sh\n",
		".env":                     "TOKEN=ghp_" + "0123456789abcdefghijABCDEFGHIJ\n",
		".env.example":             "TOKEN=\n",
		"Jenkinsfile":              "pipeline {}\n",
		"secrets/db.txt":           "password\n",
		// A bare repository committed into the repository, its config
		// running a command the deployer profile denies.
		"vendor.git/HEAD":   "ref: refs/heads/main\n",
		"vendor.git/config": "[core]\n\tbare = true\n[diff]\n\texternal = kubectl delete pod x\n",
	}
	for name, content := range files {
		p := filepath.Join(ws, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	require.NoError(t, os.MkdirAll(outside, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("outside\n"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(ws, "link-out")))
	require.NoError(t, os.Symlink("src", filepath.Join(ws, "link-in")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "missing", "file"), filepath.Join(ws, "dangling")))
	e, err := policy.New(policy.Options{Profiles: cfg})
	require.NoError(t, err)
	return &fixture{ws: ws, outside: outside, engine: e}
}

// bash decides a bash command for profile offline.
func (f *fixture) bash(t testing.TB, profile, command string) policy.Decision {
	t.Helper()
	in, err := json.Marshal(map[string]string{"command": command})
	require.NoError(t, err)
	d, err := f.engine.CheckOffline(policy.CheckRequest{Profile: profile, Workspace: f.ws, Tool: tools.Info{Name: tools.Bash}, Input: in})
	require.NoError(t, err)
	return d
}

// tool decides a call of a core tool with the given input.
func (f *fixture) tool(t testing.TB, profile, name string, input any) policy.Decision {
	t.Helper()
	in, err := json.Marshal(input)
	require.NoError(t, err)
	d, err := f.engine.CheckOffline(policy.CheckRequest{Profile: profile, Workspace: f.ws, Tool: tools.Info{Name: name}, Input: in})
	require.NoError(t, err)
	return d
}

func letter(v tools.Verdict) byte {
	switch v {
	case tools.Allow:
		return 'A'
	case tools.NeedsApproval:
		return 'N'
	}
	return 'D'
}

// coreInfo is the Info of a core tool, with what it declares.
func coreInfo(name string) tools.Info {
	info, ok := tools.CoreInfo(name)
	if !ok {
		panic("no core tool " + name)
	}
	return info
}

// declares returns an Info of kind that declares perms.
func declares(name string, kind tools.Kind, perms ...policy.Permission) tools.Info {
	return tools.Info{Name: name, Kind: kind, Permissions: perms}
}
