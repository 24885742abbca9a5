package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

// Durable runs. A job's run (a top-level run or a subagent's) saves its
// conversation after every model answer that asks for tools (with its
// first child when it asks for nothing but spawns, see holdState) and after
// those tools' results, under the job's lead work item. A job retried after
// a crash finds it and goes on from the last saved point instead of
// starting over: the model is not asked again for what it answered, a tool
// that finished is not run again, and a call that had started without a
// saved result is reported to the model as interrupted, never silently run
// again, except the calls that find what they started before by their call
// id (spawn_subagent is given the child it spawned; await_child waits for
// it again).

// runStateVersion is the version of the saved document.
const runStateVersion = 1

// runState is what a run saves between its turns.
type runState struct {
	Version int    `json:"version"`
	Agent   string `json:"agent"`
	JobID   string `json:"job_id"`
	// Turn is how many model calls the run has made; Tokens what they
	// used; Said the latest text the model wrote.
	Turn   int    `json:"turn"`
	Tokens int    `json:"tokens"`
	Said   string `json:"said,omitempty"`
	// First is where the run's own messages start: before it, the
	// conversation it was given.
	First    int           `json:"first"`
	Messages []llm.Message `json:"messages"`
	// Again says the last answer's calls were cut short by a shutdown
	// that handed the job back: they are made again when it resumes, as
	// they never ran to their end (a call waiting for a person finds its
	// approval again).
	Again bool `json:"again,omitempty"`
	// Results are the last answer's results, kept with Messages unless
	// the job was handed back; not saved.
	Results []llm.Message `json:"-"`
}

// rebinds are the calls a resumed run makes again, as they find what they
// started before instead of starting it twice.
var rebinds = map[string]bool{SpawnTool: true, AwaitChildTool: true}

// stateKey is the work item a run's state is kept under, or "" for a run
// that keeps none (an agent called as a tool runs inside its caller's turn).
func (rn *run) stateKey() string {
	if len(rn.chain) != 1 {
		return ""
	}
	return rn.jobItem
}

// saveState keeps where rn stands, with the job ends of the children it
// took (see Subagents.Adopt) in the same transaction. A run whose state
// cannot be saved goes on: it would start over after a crash, as before,
// and the log says so.
func (r *Runtime) saveState(ctx context.Context, rn *run, st runState) {
	ends := rn.takeAdopted()
	key := rn.stateKey()
	if !r.keepsState(rn) {
		giveBack(ends, errNoState)
		return
	}
	doc, err := encodeState(ctx, rn, st)
	if err == nil {
		err = r.saveWithEnds(context.WithoutCancel(ctx), rn, key, doc, ends)
	} else {
		giveBack(ends, err)
	}
	if err != nil {
		r.log.LogAttrs(ctx, slog.LevelWarn, "save the run's state", append(rn.attrs(), slog.String("error", err.Error()))...)
		return
	}
	rn.kept = true
}

// keepsState reports whether rn saves its state turn by turn.
func (r *Runtime) keepsState(rn *run) bool { return r.opts.RunStates != nil && rn.stateKey() != "" }

// errNoState tells a child's job that the run that took its end keeps no
// state to write it with.
var errNoState = errors.New("the run keeps no state")

// saveWithEnds saves doc under key with the ends in one transaction. When
// that fails (a child's job no longer held, the store refusing) the state
// is saved alone and each end goes back to its job, which writes it; the
// run goes on once they have, so what its children spent is counted before
// its next model call.
func (r *Runtime) saveWithEnds(ctx context.Context, rn *run, key string, doc []byte, ends []*bot.JobEnd) error {
	var taken, theirs []*bot.JobEnd
	var outs []bot.JobOutcome
	for _, e := range ends {
		if e.Take() {
			taken, outs = append(taken, e), append(outs, e.Outcome)
		} else {
			theirs = append(theirs, e)
		}
	}
	defer func() {
		for _, e := range theirs {
			<-e.Settled()
		}
	}()
	if len(taken) > 0 {
		err := r.opts.RunStates.SaveRunStateWithEnds(ctx, bot.RunState{WorkItemID: key, Doc: doc}, outs)
		giveBack(taken, err)
		if err == nil {
			return nil
		}
		r.log.LogAttrs(ctx, slog.LevelWarn, "save the run's state with its subagents' ends; saving it alone",
			append(rn.attrs(), slog.Int("subagents", len(taken)), slog.String("error", err.Error()))...)
		theirs = append(theirs, taken...)
	}
	return r.opts.RunStates.SaveRunState(ctx, key, doc)
}

// giveBack tells the jobs of ends how their write went: nil, written;
// an error, theirs to write.
func giveBack(ends []*bot.JobEnd, err error) {
	for _, e := range ends {
		e.Written(err)
	}
}

// adopt keeps a child's job end for rn's next save.
func (rn *run) adopt(end *bot.JobEnd) {
	rn.mu.Lock()
	rn.adopted = append(rn.adopted, end)
	rn.mu.Unlock()
}

// takeAdopted returns the ends rn took and forgets them.
func (rn *run) takeAdopted() []*bot.JobEnd {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	ends := rn.adopted
	rn.adopted = nil
	return ends
}

// lastCall reports whether one call of rn's turn is still running: a child
// whose end that call waits for is held by nothing else of the turn.
func (rn *run) lastCall() bool { return rn.outstanding.Load() == 1 }

// encodeState is the document that keeps where rn stands.
func encodeState(ctx context.Context, rn *run, st runState) ([]byte, error) {
	st.Version, st.Agent, st.JobID = runStateVersion, rn.def.Name, rn.jobID
	if len(st.Results) > 0 {
		if ctx.Err() != nil && bot.HandedBack(ctx) {
			st.Again = true
		} else {
			st.Messages = append(slices.Clip(st.Messages), st.Results...)
		}
	}
	doc, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encode the run's state: %w", err)
	}
	return doc, nil
}

// holdState keeps where rn stands after an answer that asks for nothing but
// spawns, for the spawns to save in the transactions that write the
// children: the answer is then saved with its first child, not a commit
// before it. Nothing of the turn has happened before that commit, so a
// daemon that dies first asks the model again, as when it dies during the
// call; a turn whose spawns write nothing (all refused, or found from
// before) saves the answer with its results, which come next.
func (r *Runtime) holdState(ctx context.Context, rn *run, st runState) {
	key := rn.stateKey()
	if r.opts.RunStates == nil || key == "" {
		return
	}
	doc, err := encodeState(ctx, rn, st)
	if err != nil {
		r.log.LogAttrs(ctx, slog.LevelWarn, "save the run's state", append(rn.attrs(), slog.String("error", err.Error()))...)
		return
	}
	rn.mu.Lock()
	rn.held = &bot.RunState{WorkItemID: key, Doc: doc}
	rn.mu.Unlock()
	// Its end deletes what a spawn saved.
	rn.kept = true
}

// heldState is the state a spawn of rn's current turn saves with its child,
// or nil.
func (rn *run) heldState() *bot.RunState {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.held
}

// releaseState forgets the held state once the turn's calls have run: what
// comes next is saved with their results.
func (rn *run) releaseState() {
	rn.mu.Lock()
	rn.held = nil
	rn.mu.Unlock()
}

// onlySpawns reports whether calls are all spawn_subagent.
func onlySpawns(calls []llm.ToolCall) bool {
	for _, c := range calls {
		if c.Name != SpawnTool {
			return false
		}
	}
	return len(calls) > 0
}

// dropState forgets rn's state once the run has ended, unless its job was
// handed back to run again (a shutdown, a lease taken over), which goes on
// from it.
func (r *Runtime) dropState(ctx context.Context, rn *run) {
	key := rn.stateKey()
	if r.opts.RunStates == nil || key == "" || !rn.kept || (ctx.Err() != nil && bot.HandedBack(ctx)) {
		return
	}
	if err := r.opts.RunStates.DeleteRunState(context.WithoutCancel(ctx), key); err != nil {
		r.log.LogAttrs(ctx, slog.LevelWarn, "forget the run's state", append(rn.attrs(), slog.String("error", err.Error()))...)
	}
}

// resumeState returns the state rn's job saved before, or false. A state
// of another agent (the work item was handed on since) or version is not
// resumed.
func (r *Runtime) resumeState(ctx context.Context, rn *run) (runState, bool) {
	key := rn.stateKey()
	if r.opts.RunStates == nil || key == "" {
		return runState{}, false
	}
	doc, err := r.opts.RunStates.LoadRunState(ctx, key)
	if err != nil {
		r.log.LogAttrs(ctx, slog.LevelWarn, "read the run's state; starting over", append(rn.attrs(), slog.String("error", err.Error()))...)
		return runState{}, false
	}
	if doc == nil {
		return runState{}, false
	}
	rn.retried = true
	var st runState
	if err := json.Unmarshal(doc, &st); err != nil || st.Version != runStateVersion || st.Agent != rn.def.Name ||
		st.First < 0 || st.First > len(st.Messages) {
		r.log.LogAttrs(ctx, slog.LevelWarn, "the run's saved state does not fit; starting over", rn.attrs()...)
		rn.kept = true // deleted at the end, not read again
		return runState{}, false
	}
	rn.kept = true
	return st, true
}

// unfinished are the calls of the last assistant message of msgs that have
// no result, in order.
func unfinished(msgs []llm.Message) []llm.ToolCall {
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != llm.RoleAssistant {
		return nil
	}
	return msgs[len(msgs)-1].ToolCalls
}

// interrupted is the result a resumed run gives the model for a call that
// had started before the restart.
func interrupted(call llm.ToolCall) llm.Message {
	return llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, IsError: true,
		Content: "interrupted: the daemon stopped while " + call.Name + " ran, and it was not run again; " +
			"check what it did before you repeat it"}
}

// resumedText is what the thread is told about a resumed run: after a
// crash, the calls interrupted, those that wait on the approval they had
// asked for and those picked up again; after a shutdown, the calls it cut
// short, made again.
func resumedText(st runState, interruptedCalls, approvalCalls, reboundCalls []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "resumed after a restart, after turn %d: nothing that had finished ran again", st.Turn)
	if len(interruptedCalls) > 0 {
		fmt.Fprintf(&b, "; interrupted, not run again: %s", strings.Join(interruptedCalls, ", "))
	}
	if len(approvalCalls) > 0 {
		fmt.Fprintf(&b, "; waiting on the approval it had asked for: %s", strings.Join(approvalCalls, ", "))
	}
	switch {
	case len(reboundCalls) > 0 && st.Again:
		fmt.Fprintf(&b, "; cut short by the shutdown and made again: %s", strings.Join(reboundCalls, ", "))
	case len(reboundCalls) > 0:
		fmt.Fprintf(&b, "; picked up again: %s", strings.Join(reboundCalls, ", "))
	}
	return b.String()
}

// settle gives the calls that had started before the restart their
// results: those that find what they started are made again, and so are
// those that had asked a person and were not acted on yet (they never ran,
// and find their approval with the decision made meanwhile); the others are
// interrupted. The thread is told.
func (r *Runtime) settle(ctx, runCtx context.Context, rn *run, ts *tools.Toolset, cc tools.CallContext, st runState, calls []llm.ToolCall) []llm.Message {
	out := make([]llm.Message, len(calls))
	var again []llm.ToolCall
	var at []int
	var stopped, waiting, rebound []string
	for i, c := range calls {
		switch {
		case rebinds[c.Name] || st.Again:
			rebound = append(rebound, c.Name)
		case r.waitsForApproval(ctx, rn, ts, cc, c):
			waiting = append(waiting, c.Name)
		default:
			out[i] = interrupted(c)
			stopped = append(stopped, c.Name)
			continue
		}
		again, at = append(again, c), append(at, i)
	}
	r.resumed(ctx, rn, st, stopped, waiting, rebound)
	for j, m := range r.calls(ctx, runCtx, rn, ts, cc, st.Turn, again) {
		out[at[j]] = m
	}
	return out
}

// approvalsAsked is what an approver knows of the approvals calls asked
// for before a restart (policy.Approvals).
type approvalsAsked interface {
	// Waiting reports whether call has an approval no run has acted on:
	// pending, or decided and not taken.
	Waiting(ctx context.Context, call tools.Call) (bool, error)
}

// waitsForApproval reports whether call, cut off by a crash, was waiting
// for a person's decision, or had one that no run acted on: it never ran.
func (r *Runtime) waitsForApproval(ctx context.Context, rn *run, ts *tools.Toolset, cc tools.CallContext, c llm.ToolCall) bool {
	asked, ok := r.opts.Approver.(approvalsAsked)
	if !ok {
		return false
	}
	cc.CallID = c.ID
	call, ok := ts.Call(cc, c.Name, c.Input)
	if !ok {
		return false
	}
	waiting, err := asked.Waiting(ctx, call)
	if err != nil {
		r.log.LogAttrs(ctx, slog.LevelWarn, "look for the approval of a call cut off by the restart; it is reported interrupted",
			append(rn.attrs(), slog.String("tool", c.Name), slog.String("error", err.Error()))...)
		return false
	}
	return waiting
}

// resumed tells the thread, and the log, that rn went on after a restart.
func (r *Runtime) resumed(ctx context.Context, rn *run, st runState, stopped, waiting, rebound []string) {
	text := resumedText(st, stopped, waiting, rebound)
	r.log.LogAttrs(ctx, slog.LevelInfo, "agent run resumed", append(rn.attrs(), slog.Int("turn", st.Turn),
		slog.String("previous_job", st.JobID), slog.Int("interrupted", len(stopped)), slog.Int("awaiting_approval", len(waiting)),
		slog.Int("rebound", len(rebound)))...)
	r.report(ctx, rn, bot.ProgressEvent{Kind: bot.ProgressResumed, Turn: st.Turn, Text: text})
}
