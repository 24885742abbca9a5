package agents_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
)

// growingAgents is the agents in effect, to which an install adds one.
type growingAgents struct {
	mu    sync.Mutex
	base  *agents.Manager
	added []agents.Definition
}

func (g *growingAgents) Get(name string) (agents.Definition, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, d := range g.added {
		if d.Name == name {
			return d, true
		}
	}
	return g.base.Get(name)
}

func (g *growingAgents) List() []agents.Definition {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append(append([]agents.Definition(nil), g.base.List()...), g.added...)
}

// fakeInstaller installs by adding the package's agent to the agents in
// effect, as the daemon's rebuild does.
type fakeInstaller struct {
	agents *growingAgents
	mu     sync.Mutex
	dirs   []string
	scopes [][]skills.Scope
	// previous is the version the install replaces, if any.
	previous string
}

func (f *fakeInstaller) InstallPackage(_ context.Context, dir string, enable []skills.Scope) (agents.Installed, error) {
	f.mu.Lock()
	f.dirs, f.scopes = append(f.dirs, dir), append(f.scopes, enable)
	f.mu.Unlock()
	f.agents.mu.Lock()
	f.agents.added = append(f.agents.added, agents.Definition{Name: "greeter", Description: "Greets people.", Profile: "read-only",
		Mode: agents.ModeTool, Instructions: "Say hello.", Source: "package:greeter", Package: "greeter"})
	f.agents.mu.Unlock()
	return agents.Installed{Package: "greeter", Version: "0.1.0", Previous: f.previous, Agents: []string{"greeter"}, Enabled: []string{"global"}}, nil
}

// approveEach approves every call and counts them.
type approveEach struct {
	mu    sync.Mutex
	calls []string
}

func (a *approveEach) Approve(_ context.Context, call tools.Call, reason string) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, call.Tool.Name+": "+reason)
	return true, nil
}

func TestTheBuilderInstallsAnAgentItCallsNextTurn(t *testing.T) {
	fake, model := newScriptedModel(t,
		step{tool: "write_file", args: `{"path":"greeter/manifest.yaml","content":"name: greeter\n"}`},
		step{tool: "install_package", args: `{"path":"greeter"}`},
		step{tool: "agent_greeter", args: `{"task":"say hello"}`},
		step{text: "Hello!"}, // the greeter's answer
		step{text: "greeter is installed and says hello."},
	)
	approver := &approveEach{}
	var installer *fakeInstaller
	f := newFixture(t, model, nil, func(o *agents.RuntimeOptions) {
		e, err := policy.New(policy.Options{Skills: agents.LoadedSkills{}})
		require.NoError(t, err)
		o.Policy, o.Profiles, o.Access, o.Approver = e, e, e, approver
		grow := &growingAgents{base: o.Agents.(*agents.Manager)}
		o.Agents = grow
		installer = &fakeInstaller{agents: grow}
		o.Installer = installer
	})
	res, err := f.rt.Run(context.Background(), asOwner("builder", "make an agent that greets"), &recorder{})
	require.NoError(t, err)
	require.Equal(t, bot.ResultSuccess, res.Status, res.Reply)

	reqs := fake.requests()
	require.Len(t, reqs, 5)
	require.Contains(t, toolNames(reqs[0]), "install_package", "the builder has install_package")
	require.NotContains(t, toolNames(reqs[0]), "agent_greeter")
	require.Contains(t, lastToolResult(t, reqs[2]), "Installed package greeter 0.1.0, enabled at global.")
	require.Contains(t, toolNames(reqs[2]), "agent_greeter", "the agent installed is callable at the next turn, no restart")
	require.Contains(t, lastToolResult(t, reqs[4]), `"content":"Hello!"`)

	ws, err := f.spaces.Dir(thread.Key())
	require.NoError(t, err)
	real, err := filepath.EvalSymlinks(filepath.Join(ws, "greeter"))
	require.NoError(t, err)
	require.Equal(t, []string{real}, installer.dirs)
	require.Equal(t, [][]skills.Scope{{skills.Global}}, installer.scopes, "a console thread has no repository: the package is enabled globally")
	require.Equal(t, []string{`install_package: profile "contributor" requires approval: every call of tool "install_package" waits for a person`}, approver.calls)
}

// The builder installing its package again (it fixed the agent) is told
// what the install replaced: another version, or that version's files.
func TestTheBuilderIsToldWhatAnInstallReplaced(t *testing.T) {
	cases := []struct{ previous, want string }{
		{"", "Installed package greeter 0.1.0, enabled at global."},
		{"0.1.0", "Installed package greeter 0.1.0 (it replaced that version's files), enabled at global."},
		{"0.0.9", "Installed package greeter 0.1.0 (it replaced 0.0.9), enabled at global."},
	}
	for _, tc := range cases {
		t.Run("previous "+tc.previous, func(t *testing.T) {
			fake, model := newScriptedModel(t,
				step{tool: "install_package", args: `{"path":"greeter"}`},
				step{text: "done"},
			)
			f := newFixture(t, model, nil, func(o *agents.RuntimeOptions) {
				e, err := policy.New(policy.Options{Skills: agents.LoadedSkills{}})
				require.NoError(t, err)
				o.Policy, o.Profiles, o.Access, o.Approver = e, e, e, &approveEach{}
				grow := &growingAgents{base: o.Agents.(*agents.Manager)}
				o.Agents = grow
				o.Installer = &fakeInstaller{agents: grow, previous: tc.previous}
			})
			ws, err := f.spaces.Dir(thread.Key())
			require.NoError(t, err)
			require.NoError(t, os.MkdirAll(filepath.Join(ws, "greeter"), 0o755))
			_, err = f.rt.Run(context.Background(), asOwner("builder", "install the greeter again"), &recorder{})
			require.NoError(t, err)
			require.Contains(t, lastToolResult(t, fake.requests()[1]), tc.want)
		})
	}
}

func TestOnlyTheBuilderIsOfferedInstallPackage(t *testing.T) {
	fake, model := newScriptedModel(t, step{tool: "install_package", args: `{"path":"x"}`}, step{text: "no"})
	f := newFixture(t, model, nil, func(o *agents.RuntimeOptions) {
		o.Installer = &fakeInstaller{agents: &growingAgents{base: o.Agents.(*agents.Manager)}}
	})
	ws, err := f.spaces.Dir(thread.Key())
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "x"), 0o755))
	_, err = f.rt.Run(context.Background(), asOwner("coder", "install x"), &recorder{})
	require.NoError(t, err)
	reqs := fake.requests()
	require.NotContains(t, toolNames(reqs[0]), "install_package")
	require.Contains(t, lastToolResult(t, reqs[1]), "refused: unknown tool \"install_package\"")
}
