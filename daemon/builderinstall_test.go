package daemon

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
	"github.com/switchyard/switchyard/skills/install"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
)

// The builder's one approved install_package never puts a package's agent
// in the place of an agent in effect by that name (built in, from an agent
// file, another package's): it is refused naming them, and nothing is
// installed. Its own package's agent may be installed again.
func TestTheBuilderCannotReplaceAnAgentInEffect(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	store := bolttest.Open(t, data)
	reg, err := skills.NewRegistry(ctx, skills.Options{Store: store, Masker: bot.NewRedactor(), Permissions: permissionNames()})
	require.NoError(t, err)
	in, err := install.New(ctx, install.Options{Registry: reg, Dir: filepath.Join(data, PackagesDir),
		Load: skills.LoadOptions{Masker: bot.NewRedactor(), Permissions: permissionNames()}})
	require.NoError(t, err)
	inEffect := map[string]agents.Definition{
		"coder":    {Name: "coder", Source: agents.SourceBuiltin},
		"builder":  {Name: "builder", Source: agents.SourceBuiltin},
		"triager":  {Name: "triager", Source: agents.SourceUser},
		"notifier": {Name: "notifier", Source: "package:ops-kit", Package: "ops-kit"},
		"greeter":  {Name: "greeter", Source: "package:greeter", Package: "greeter"},
	}
	b := installer{in: in, agents: func(name string) (agents.Definition, bool) {
		d, ok := inEffect[name]
		return d, ok
	}}
	write := func(name, version string, agentNames ...string) string {
		dir := filepath.Join(t.TempDir(), name)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		m := "name: " + name + "\nversion: " + version + "\ndescription: Made by the builder.\nagents:\n"
		for _, a := range agentNames {
			m += "  - {name: " + a + ", description: Does " + a + "'s work., instructions: Do it.}\n"
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(m), 0o644))
		return dir
	}
	for _, tc := range []struct {
		pkg    string
		agents []string
		want   string
	}{
		{"sneaky", []string{"coder"}, "package sneaky would replace the agent coder (built in); name its agent otherwise"},
		{"sneaky", []string{"builder"}, "package sneaky would replace the agent builder (built in); name its agent otherwise"},
		{"sneaky", []string{"triager"}, "package sneaky would replace the agent triager (an agent file); name its agent otherwise"},
		{"sneaky", []string{"helper", "notifier"}, "package sneaky would replace the agent notifier (package:ops-kit); name its agent otherwise"},
		{"sneaky", []string{"coder", "builder"}, "package sneaky would replace the agents coder (built in), builder (built in); name its agents otherwise"},
		{"other", []string{"greeter"}, "package other would replace the agent greeter (package:greeter); name its agent otherwise"},
	} {
		_, err := b.InstallPackage(ctx, write(tc.pkg, "1.0.0", tc.agents...), []skills.Scope{skills.Global})
		require.EqualError(t, err, tc.want)
		require.Empty(t, reg.Installed(), "nothing installed")
	}
	res, err := b.InstallPackage(ctx, write("greeter", "0.2.0", "greeter"), []skills.Scope{skills.Global})
	require.NoError(t, err, "the package's own agent again")
	require.Equal(t, []string{"greeter"}, res.Agents)
	entries, err := os.ReadDir(filepath.Join(data, PackagesDir))
	require.NoError(t, err)
	require.Len(t, entries, 1, "only greeter's directory")

	// An operator's install (skills install) is not the builder's: it may
	// replace a built-in agent, as documented.
	_, err = in.Install(ctx, install.Request{Source: write("ops-coder", "1.0.0", "coder"), Enable: []skills.Scope{skills.Global}})
	require.NoError(t, err)
}
