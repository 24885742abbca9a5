package agents_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/bot"
)

func TestARetriedJobGoesOnFromItsLastTurnAndInterruptsWhatHadStarted(t *testing.T) {
	model := newBrain(func(_ context.Context, _ string, req llm.Request) (llm.Response, error) {
		return answer("went on after: " + lastMessage(req).Content), nil
	})
	store := budgetStore(t)
	f := newFixture(t, model, nil, func(o *agents.RuntimeOptions) { o.RunStates = store })
	// The job's previous attempt had its first answer, a write_file call,
	// under way when the daemon died.
	require.NoError(t, store.SaveRunState(context.Background(), "wi_1", []byte(`{"version":1,"agent":"coder","job_id":"job_0",
		"turn":1,"tokens":15,"first":0,"messages":[
		{"role":"user","content":"write it"},
		{"role":"assistant","tool_calls":[{"id":"c1","name":"write_file","input":{"path":"out.txt","content":"x"}}]}]}`)))

	progress := &recorder{}
	res, err := f.rt.Run(context.Background(), request("coder", "write it"), progress)
	require.NoError(t, err)
	require.Equal(t, bot.ResultSuccess, res.Status, res.Error)
	require.Equal(t, 2, res.TurnsUsed, "its first turn is not made again")
	require.Equal(t, 15+15, res.TokensUsed)
	seen := model.requests("coder")
	require.Len(t, seen, 1)
	require.Len(t, seen[0].Messages, 3, "the model is given the conversation as it stood")
	require.Equal(t, "went on after: interrupted: the daemon stopped while write_file ran, and it was not run again; "+
		"check what it did before you repeat it", res.Reply)
	dir, err := f.spaces.Dir(thread.Key())
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "out.txt"))
	require.True(t, os.IsNotExist(err), "the interrupted call was not run again")
	require.Contains(t, progress.lines(), bot.ProgressResumed+
		" resumed after a restart, after turn 1: nothing that had finished ran again; interrupted, not run again: write_file")

	doc, err := store.LoadRunState(context.Background(), "wi_1")
	require.NoError(t, err)
	require.Nil(t, doc, "a run that ended keeps no state")
}

func TestARunKeepsItsStateTurnByTurn(t *testing.T) {
	store := budgetStore(t)
	var during []byte
	model := newBrain(func(ctx context.Context, _ string, req llm.Request) (llm.Response, error) {
		if len(req.Messages) == 1 {
			return call("list_directory", `{"path":"."}`), nil
		}
		var err error
		during, err = store.LoadRunState(ctx, "wi_1")
		require.NoError(t, err)
		return answer("listed"), nil
	})
	f := newFixture(t, model, nil, func(o *agents.RuntimeOptions) { o.RunStates = store })
	res, err := f.rt.Run(context.Background(), request("coder", "list it"), nil)
	require.NoError(t, err)
	require.Equal(t, bot.ResultSuccess, res.Status, res.Error)
	require.JSONEq(t, `{"version":1,"agent":"coder","job_id":"job_1","turn":1,"tokens":15,"first":0,"messages":[
		{"role":"user","content":"[local.message from @alice]\nlist it"},
		{"role":"assistant","tool_calls":[{"id":"call_list_directory","name":"list_directory","input":{"path":"."}}]},
		{"role":"tool","content":". is empty","tool_call_id":"call_list_directory"}]}`, string(during))
}
