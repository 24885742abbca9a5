package skills_test

import (
	"context"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
)

// newRegistry returns a registry of the built-ins alone, with the daemon's
// redactor finding secrets.
func newRegistry(t *testing.T) *skills.Registry {
	t.Helper()
	r, err := skills.NewRegistry(t.Context(), skills.Options{
		Masker:      bot.NewRedactor(),
		Permissions: []string{"read", "write", "exec", "push", "merge", "ci", "deploy", "secrets", "network", "admin"},
		KnownTools: func() []string {
			return []string{"read_file", "list_directory", "search_files", "write_file", "edit_file", "bash"}
		},
	})
	require.NoError(t, err)
	return r
}

// addPackage loads a package from files and adds it as installed.
func addPackage(t *testing.T, r *skills.Registry, files map[string]string, settings ...skills.Setting) *skills.Package {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, text := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(text)}
	}
	p, err := skills.LoadPackage(fsys, skills.LoadOptions{Masker: bot.NewRedactor(), Dir: "/packages/" + t.Name()})
	require.NoError(t, err)
	digest, err := skills.Digest(fsys)
	require.NoError(t, err)
	rec := skills.InstalledPackage{Name: p.Name(), Version: p.Version(), Source: "dir", Digest: digest, Dir: "/packages/x"}
	require.NoError(t, r.Add(context.Background(), p, rec, settings...))
	return p
}

func TestBuiltinPackages(t *testing.T) {
	r := newRegistry(t)
	var names []string
	for _, p := range r.Packages() {
		require.True(t, p.Builtin, p.Name())
		require.Empty(t, p.Warnings, p.Name())
		names = append(names, p.Name())
	}
	require.Equal(t, []string{"code-review-checklist", "incident-triage", "opencode-implementer", "release-notes", "specification-engine"}, names)

	spec, ok := r.Skill("specification-engine")
	require.True(t, ok)
	require.Equal(t, []string{"spec_kit"}, spec.AllowedTools, "the specification engine allows only spec_kit")
	require.Equal(t, []string{"opencode-implementer"}, spec.ComposabilityRules.Requires)
	require.Contains(t, spec.Instructions, "spec_kit")

	impl, ok := r.Skill("opencode-implementer")
	require.True(t, ok)
	require.Subset(t, impl.ForbiddenTools, []string{"write_file", "edit_file"})
	require.Equal(t, []string{"specification-engine"}, impl.ComposabilityRules.Requires)

	for _, name := range []string{"code-review-checklist", "release-notes", "incident-triage"} {
		s, ok := r.Skill(name)
		require.True(t, ok, name)
		require.Greater(t, len(s.Instructions), 500, "%s has real instructions", name)
		require.NotEmpty(t, s.ExecutionProtocol, name)
		require.Empty(t, r.Warnings(name), name)
	}
	for _, e := range r.Effective(skills.Target{Repo: "acme/web", Agent: "coder"}) {
		require.True(t, e.Enabled, "built-ins are enabled everywhere: %s", e.Name)
		require.Equal(t, skills.ScopeDefault, e.Scope)
	}
}

// A package's command tool never takes the name of a tool Switchyard has
// (core, platform, control tools the runtime adds) or of another
// package's: it would stand in for that tool in every run where the
// package is enabled. Each is refused at install naming the tool, and
// nothing is added.
func TestCommandToolNamesCollide(t *testing.T) {
	r, err := skills.NewRegistry(t.Context(), skills.Options{
		Masker: bot.NewRedactor(), Permissions: []string{"read", "write", "exec"},
		KnownTools: func() []string {
			return []string{"read_file", "write_file", "bash", "github_comment", "enable_skill", "install_package", "handoff_to", "spawn_subagent", "budget", "spec_kit"}
		},
	})
	require.NoError(t, err)
	pkg := func(name, version string, toolNames ...string) map[string]string {
		m := "name: " + name + "\nversion: " + version + "\ndescription: d\npermissions: [read]\ntools:\n"
		for _, tn := range toolNames {
			m += "  - {name: " + tn + ", description: d, command: [bin/x], permissions: [read]}\n"
		}
		return map[string]string{"manifest.yaml": m, "bin/x": "#!/bin/sh\n"}
	}
	add := func(files map[string]string) error {
		p := loadPkg(t, files)
		return r.Add(context.Background(), p, skills.InstalledPackage{Name: p.Name(), Version: p.Version(), Digest: "sha256:x", Dir: "/x"})
	}
	for _, name := range []string{"read_file", "write_file", "bash", "github_comment", "enable_skill", "install_package", "handoff_to", "spawn_subagent", "budget", "spec_kit"} {
		err := add(pkg("hijack", "1.0.0", "lint", name))
		require.EqualError(t, err, "tool "+name+" of package hijack has the name of a tool Switchyard has; name it otherwise", name)
		_, ok := r.Package("hijack")
		require.False(t, ok, "nothing added")
	}
	require.NoError(t, add(pkg("linters", "1.0.0", "lint")))
	err = add(pkg("other", "1.0.0", "fmt", "lint"))
	require.EqualError(t, err, "tool lint is already contributed by package linters")
	require.NoError(t, add(pkg("linters", "1.1.0", "lint", "fmt")), "a new version keeps its own tools")
}
