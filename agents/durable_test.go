package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
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

// approvers lets anyone decide.
type approvers struct{}

func (approvers) Approvers(string) []string { return []string{policy.AnyApprover} }

// asked tells the test when an approval was asked for.
type asked chan bot.Approval

func (a asked) ApprovalRequested(_ context.Context, ap bot.Approval) error { a <- ap; return nil }
func (asked) ApprovalResolved(context.Context, bot.Approval) error         { return nil }

// A daemon killed while a call waited for a person, or after the person
// decided and before the run acted on it, keeps the decision: the resumed
// run waits on the approval it had asked for, or acts on the decision, and
// the call runs at most once.
func TestARunResumedAfterACrashActsOnTheApprovalItHadAskedFor(t *testing.T) {
	// The model wrote its input with spaces and a <, as models do; the
	// saved state keeps it compact and escaped, and the call is found by
	// its approval all the same.
	const written = `{"path": "a.txt", "content": "<x>"}`
	tests := []struct {
		name string
		// before is what became of the approval before the daemon died;
		// after, what a person does once the run waits again.
		before, after string
		ran           bool
		resumed, said string
	}{
		{name: "pending at the crash, approved after", after: "approve", ran: true,
			resumed: "waiting on the approval it had asked for: write_file", said: "wrote 3 bytes to a.txt"},
		{name: "pending at the crash, denied after", after: "reject",
			resumed: "waiting on the approval it had asked for: write_file", said: "write_file needs approval (approval denied)"},
		{name: "approved before the run acted on it", before: "approve", ran: true,
			resumed: "waiting on the approval it had asked for: write_file", said: "wrote 3 bytes to a.txt"},
		{name: "denied before the run acted on it", before: "reject",
			resumed: "waiting on the approval it had asked for: write_file", said: "write_file needs approval (approval denied)"},
		{name: "taken by the run, which may have started the call", before: "take",
			resumed: "interrupted, not run again: write_file", said: "interrupted: the daemon stopped while write_file ran"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := budgetStore(t)
			notified := make(asked, 2)
			approvals, err := policy.NewApprovals(policy.ApprovalOptions{Store: store, Approvers: approvers{}, Notifier: notified,
				Timeout: time.Minute})
			require.NoError(t, err)

			// The job's previous attempt asked for the approval, then the
			// daemon died (the run's context ends as a shutdown's would, so
			// the approval stays as it was).
			prev, stop := context.WithCancelCause(ctx)
			asking := make(chan struct{})
			go func() {
				defer close(asking)
				_, _ = approvals.Approve(prev, tools.Call{
					CallContext: tools.CallContext{JobID: "job_0", WorkItemID: "wi_1", SessionKey: thread.Key(), Scope: tools.Scope{Agent: "coder"}},
					Tool:        tools.Info{Name: "write_file"}, Input: json.RawMessage(written),
				}, "write_file needs approval")
			}()
			ap := <-notified
			stop(bot.ErrShutdown)
			<-asking
			switch tc.before {
			case "approve":
				_, err = approvals.Grant(ctx, ap.ID, "ana")
			case "reject":
				_, err = approvals.Reject(ctx, ap.ID, "ana")
			case "take":
				_, err = approvals.Grant(ctx, ap.ID, "ana")
				if err == nil {
					err = store.TakeApproval(ctx, ap.ID)
				}
			}
			require.NoError(t, err)
			saved, err := json.Marshal(llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "write_file", Input: json.RawMessage(written)}}})
			require.NoError(t, err)
			require.NoError(t, store.SaveRunState(ctx, "wi_1", []byte(`{"version":1,"agent":"coder","job_id":"job_0",
				"turn":1,"tokens":15,"first":0,"messages":[{"role":"user","content":"write it"},`+string(saved)+`]}`)))

			model := newBrain(func(_ context.Context, _ string, req llm.Request) (llm.Response, error) {
				return answer(lastMessage(req).Content), nil
			})
			f := newFixture(t, model, nil, func(o *agents.RuntimeOptions) {
				o.RunStates, o.Policy, o.Approver = store, approvalPolicy{}, approvals
			})
			progress := &deciding{approvals: approvals, decide: tc.after}
			res, err := f.rt.Run(ctx, request("coder", "write it"), progress)
			require.NoError(t, err)
			require.NoError(t, progress.err)
			require.Equal(t, bot.ResultSuccess, res.Status, res.Error)
			require.Contains(t, res.Reply, tc.said)
			require.Contains(t, progress.lines(), bot.ProgressResumed+
				" resumed after a restart, after turn 1: nothing that had finished ran again; "+tc.resumed)
			require.Empty(t, notified, "nobody is asked twice")

			dir, err := f.spaces.Dir(thread.Key())
			require.NoError(t, err)
			got, err := os.ReadFile(filepath.Join(dir, "a.txt"))
			if !tc.ran {
				require.True(t, os.IsNotExist(err), "the call did not run")
				return
			}
			require.NoError(t, err)
			require.Equal(t, "<x>", string(got))
			after, err := store.GetApproval(ctx, ap.ID)
			require.NoError(t, err)
			require.True(t, after.Taken, "the decision is taken once")
		})
	}
}

// deciding records a run's progress and, when the run says it waits for a
// person, decides as the test says.
type deciding struct {
	recorder
	approvals *policy.Approvals
	decide    string
	err       error
}

func (d *deciding) Report(ctx context.Context, ev bot.ProgressEvent) {
	d.recorder.Report(ctx, ev)
	if ev.Kind != bot.ProgressNote || d.decide == "" {
		return
	}
	list, err := d.approvals.List(ctx, false)
	if err != nil || len(list) != 1 {
		d.err = fmt.Errorf("want the one pending approval, have %d (%v)", len(list), err)
		return
	}
	// A person decides, from outside the run.
	if d.decide == "approve" {
		_, d.err = d.approvals.Grant(context.Background(), list[0].ID, "ana")
	} else {
		_, d.err = d.approvals.Reject(context.Background(), list[0].ID, "ana")
	}
}
