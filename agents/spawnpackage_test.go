package agents_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
)

// TestAnAgentWhosePackageIsNotEnabledIsNeitherSpawnedNorHandedTheWork: a package's agent
// runs only where its package is enabled, as a subagent too: the spawn is
// refused before anything starts, as an agent call would be, and so is a
// handoff to it.
func TestAnAgentWhosePackageIsNotEnabledIsNeitherSpawnedNorHandedTheWork(t *testing.T) {
	model := newBrain(func(ctx context.Context, agent string, req llm.Request) (llm.Response, error) {
		switch {
		case agent == "dba":
			return answer("the dba ran"), nil
		case len(req.Messages) == 1:
			return call(agents.SpawnTool, `{"task":"check the schema","agent":"dba"}`), nil
		}
		return answer("lead read: " + lastMessage(req).Content), nil
	})
	reg, err := skills.NewRegistry(context.Background(), skills.Options{})
	require.NoError(t, err)
	f, tr := durableTree(t, model, func(o *agents.RuntimeOptions) {
		m, err := agents.NewManager(context.Background(), agents.ManagerOptions{Packages: packages{
			"db-tools": {"agents/dba.md": "---\nname: dba\ndescription: Database admin.\n---\nAdminister.\n"},
		}})
		require.NoError(t, err)
		o.Agents, o.Skills = m, reg
	})
	tr.start(t, f)
	wi := tr.send(t, f, "coder", "check the schema")
	require.Equal(t, bot.StatusDone, wi.Status, wi.Error)
	require.Empty(t, model.requests("dba"), "the dba never ran")
	reqs := model.requests("coder")
	require.Len(t, reqs, 2)
	require.Equal(t, `refused: spawn refused: agent "dba" comes from package "db-tools", which is not enabled for @dba (no setting enables it); `+
		"a person enables it with switchyard skills enable db-tools --scope …", lastMessage(reqs[1]).Content)
	rs, _, err := f.store.ListRuns(context.Background(), bot.RunFilter{ParentWorkItemID: wi.ID})
	require.NoError(t, err)
	require.Empty(t, rs, "nothing was spawned")

	// Nor is the work handed to it.
	hop := newBrain(func(ctx context.Context, agent string, req llm.Request) (llm.Response, error) {
		if agent == "dba" {
			return answer("the dba ran"), nil
		}
		if len(req.Messages) == 1 {
			return call(agents.HandoffTool, `{"agent":"dba","reason":"it is a schema question"}`), nil
		}
		return answer("lead read: " + lastMessage(req).Content), nil
	})
	f2, tr2 := durableTree(t, hop, func(o *agents.RuntimeOptions) {
		m, err := agents.NewManager(context.Background(), agents.ManagerOptions{Packages: packages{
			"db-tools": {"agents/dba.md": "---\nname: dba\ndescription: Database admin.\n---\nAdminister.\n"},
		}})
		require.NoError(t, err)
		o.Agents, o.Skills = m, reg
	})
	tr2.start(t, f2)
	wi = tr2.send(t, f2, "coder", "check the schema")
	require.Equal(t, bot.StatusDone, wi.Status, wi.Error)
	require.Equal(t, "coder", wi.Route.Agent)
	require.Empty(t, hop.requests("dba"))
	require.Contains(t, lastMessage(hop.requests("coder")[1]).Content, `refused: handoff refused: agent "dba" comes from package "db-tools", which is not enabled`)
}
