package agents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

// runChild runs a subagent's work item: the agent its record names, on the
// task and the summary its parent gave (never the parent's conversation),
// in the parent's workspace, under the parent's ceilings and its own
// timeout, counted from the spawn. It keeps no conversation; how it ended
// goes into its record, which the parent reads, written with its last
// model call's usage and its transcript in the transaction that ends its
// job (bot.JobRecords). A retried job whose record has ended already
// answers with what the record says, so no child runs twice.
func (r *Runtime) runChild(ctx context.Context, req bot.RunRequest, progress bot.Progress) (bot.RunResult, error) {
	lead := req.WorkItems[0]
	if r.children == nil {
		return bot.RunResult{}, fmt.Errorf("%s is a subagent's work item, and this runtime keeps no ledger", lead.ID)
	}
	c := r.children
	rec, err := c.store.RunOfWorkItem(ctx, lead.ID)
	if err != nil {
		return bot.RunResult{}, fmt.Errorf("the record of subagent %s: %w", lead.ID, err)
	}
	if !rec.Status.Open() {
		return childResult(rec), nil
	}
	def, ok := r.opts.Agents.Get(rec.Agent)
	if !ok {
		msg := fmt.Sprintf("agent %q is not defined (agents: %s)", rec.Agent, strings.Join(r.agentNames(), ", "))
		return c.ended(rec, bot.JobRecords{}, bot.RunEnd{Status: bot.RunFailed, Error: msg}), nil
	}
	thread := req.Thread
	if thread.IsZero() {
		thread = req.Job.Thread
	}
	// Its package may have been disabled since the spawn.
	if msg := r.packageOff(targetOf(thread.Key(), def.Name), def); msg != "" {
		return c.ended(rec, bot.JobRecords{}, bot.RunEnd{Status: bot.RunFailed, Error: msg}), nil
	}
	timeout := childTimeout(rec, r.subagentLimits(def))
	deadline := rec.CreatedAt.Add(timeout)
	if !r.opts.Now().Before(deadline) {
		msg := fmt.Sprintf("timed out: its timeout (%s) passed before it could start", timeout)
		return c.ended(rec, bot.JobRecords{}, bot.RunEnd{Status: bot.RunTimedOut, Error: msg}), nil
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	runCtx, stop := context.WithDeadlineCause(runCtx, deadline, errChildTimedOut)
	defer stop()
	defer c.started(rec, cancel)()

	rn := &run{
		def:           def,
		jobID:         req.Job.ID,
		sessionKey:    thread.Key(),
		correlationID: req.Job.ID,
		chain:         []string{def.Name},
		retried:       req.Job.Attempt > 1,
		child:         rec,
		thread:        thread,
		jobItem:       lead.ID,
		dispatchID:    firstID(req.Job.DispatchIDs),
		owner:         rec.Owner,
		rootWorkItem:  rec.RootWorkItemID,
		spawnDepth:    rec.Depth,
		inherited:     rec.Ceilings,
		target:        targetOf(thread.Key(), def.Name),
		skills:        &loadedSkills{pinned: rec.Skills, spawned: len(rec.Skills) > 0},
	}
	if len(rec.Skills) > 0 {
		// The skills its parent gave it hold from its first turn, or it
		// does not run: without them it could do more than was meant.
		set, err := r.spawnSkills(rn.target, rec.Skills)
		if err != nil {
			return c.ended(rec, bot.JobRecords{}, bot.RunEnd{Status: bot.RunFailed, Error: "its skills cannot be loaded: " + err.Error()}), nil
		}
		rn.skills.setNext(set)
	} else {
		r.preload(runCtx, rn, def.Skills)
	}
	rn.progress = subagentProgress{c: c, rec: rec, next: progress}
	if err := r.bound(runCtx, rn, req.WorkItems, thread); err != nil {
		return bot.RunResult{}, err
	}
	if r.opts.Workspaces.Root != "" {
		dir, err := r.opts.Workspaces.Dir(rn.sessionKey)
		if err != nil {
			return bot.RunResult{}, err
		}
		rn.workspace = dir
	}
	defer c.watchTree(lead.ID, func(lines []string) {
		r.report(runCtx, rn, bot.ProgressEvent{Kind: bot.ProgressChildren, Children: lines})
	})()

	started := r.opts.Now()
	r.log.LogAttrs(ctx, slog.LevelInfo, "subagent started", append(rn.attrs(),
		slog.String("run", rec.ID), slog.String("parent_work_item", rec.ParentLinks.WorkItemID))...)
	input := invocationText(rec.AgentID, rec.Task, InvocationContext{ConversationSummary: rec.Context})
	out := r.invoke(runCtx, rn, nil, input, "")
	resp := r.redactResponse(out.resp)
	saveCtx, cancelSave := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancelSave()
	recs := bot.JobRecords{Usage: rn.lastUsage}
	if r.opts.Transcripts != nil {
		t, err := r.transcript(rn, out, resp, 0, started)
		if err != nil {
			r.log.LogAttrs(ctx, slog.LevelError, "save transcript", append(rn.attrs(), slog.String("error", err.Error()))...)
		} else {
			recs.Transcript = &t
		}
	}
	r.endRun(saveCtx, rn)

	status, errText := bot.RunFailed, resp.Error
	switch cause := context.Cause(runCtx); {
	case errors.Is(cause, errChildTimedOut):
		status, errText = bot.RunTimedOut, fmt.Sprintf("timed out after %s and was cancelled", timeout)
	case errors.Is(cause, errChildCancelled):
		status = bot.RunCancelled
	case resp.Status == bot.ResultSuccess:
		status = bot.RunDone
	}
	res := c.ended(rec, recs, bot.RunEnd{Status: status, Result: resp.Content, Error: errText, Tokens: resp.TokensUsed})
	r.log.LogAttrs(ctx, slog.LevelInfo, "subagent finished", append(rn.attrs(),
		slog.String("run", rec.ID), slog.String("status", string(status)), slog.Int("tokens", resp.TokensUsed),
		slog.Int("turns", resp.TurnsUsed))...)
	res.TurnsUsed = resp.TurnsUsed
	return res, nil
}

// ended is how a subagent's job ends: with recs and its record's end,
// written in the transaction that ends the job, and the result the record
// then gives. Its waiters are woken once that is written (Recorded).
func (c *Subagents) ended(rec *bot.ChildRun, recs bot.JobRecords, end bot.RunEnd) bot.RunResult {
	end.ID, end.ParentWorkItemID, end.At = rec.ID, rec.ParentLinks.WorkItemID, c.now().UTC()
	end.Result, end.Error = clip(end.Result, maxResult), clip(end.Error, maxResult)
	final := *rec
	end.Apply(&final)
	res := childResult(&final)
	recs.Run = &end
	res.Records = recs
	return res
}

// Recorded wakes whoever waits for the subagent whose end recs wrote, and
// the tree it is part of (bot.DispatcherOptions.Recorded).
func (c *Subagents) Recorded(_ context.Context, recs bot.JobRecords) {
	if recs.Run != nil {
		c.mu.Lock()
		delete(c.handed, recs.Run.ID)
		c.mu.Unlock()
		c.signal(recs.Run.ID, recs.Run.ParentWorkItemID)
	}
}

// childResult is how a subagent's job ends, from its record.
func childResult(rec *bot.ChildRun) bot.RunResult {
	res := bot.RunResult{Reply: rec.Result, Error: rec.Error, TokensUsed: rec.Tokens}
	switch rec.Status {
	case bot.RunDone:
		res.Status = bot.ResultSuccess
	case bot.RunCancelled:
		res.Status = bot.ResultCancelled
	default:
		res.Status = bot.ResultError
		if res.Error == "" {
			res.Error = "the subagent " + statusWords(rec)
		}
	}
	return res
}

func firstID(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

// subagentProgress shows what a subagent does in its parent's tree.
type subagentProgress struct {
	c    *Subagents
	rec  *bot.ChildRun
	next bot.Progress
}

func (p subagentProgress) Report(ctx context.Context, ev bot.ProgressEvent) {
	switch ev.Kind {
	case bot.ProgressRights:
	case bot.ProgressChildren:
		p.c.treeChanged(p.rec.ParentLinks.WorkItemID)
	default:
		p.c.progress(p.rec, ev.Text, 0)
	}
	if p.next != nil {
		p.next.Report(ctx, ev)
	}
}

// endRun stops the background tasks rn's job started that end with its run.
func (r *Runtime) endRun(ctx context.Context, rn *run) {
	if r.opts.Background == nil || rn.jobID == "" {
		return
	}
	if n := r.opts.Background.EndRun(ctx, rn.jobID); n > 0 {
		r.log.LogAttrs(ctx, slog.LevelInfo, "background tasks stopped with their run", append(rn.attrs(), slog.Int("tasks", n))...)
	}
}

// used counts what a model call of rn cost.
func (r *Runtime) used(rn *run, total int) {
	if rn.child != nil && r.children != nil {
		r.children.progress(rn.child, "", total)
	}
}

// concurrent reports whether calls of the tool run beside the others of
// their turn: subagents, spawned or awaited, work in parallel.
func concurrent(name string) bool { return name == SpawnTool || name == AwaitChildTool }

// calls runs one turn's tool calls and returns their results in the order
// of the calls. Spawns and awaits run in parallel, after the other calls
// have run one by one: while the children work, the run does nothing else,
// so a child and its parent never work on the workspace at the same time
// unless the parent spawned in the background. The model asked for the calls
// of one turn together, without seeing any result, so none depends on
// another's.
func (r *Runtime) calls(ctx, runCtx context.Context, rn *run, ts *tools.Toolset, cc tools.CallContext, turn int, calls []llm.ToolCall) []llm.Message {
	out := make([]llm.Message, len(calls))
	rn.outstanding.Store(int32(len(calls)))
	defer rn.outstanding.Store(0)
	one := func(i int) {
		out[i] = r.call(ctx, runCtx, rn, ts, cc, turn, calls[i])
		rn.outstanding.Add(-1)
	}
	var parallel []int
	for i, call := range calls {
		if concurrent(call.Name) && len(calls) > 1 {
			parallel = append(parallel, i)
			continue
		}
		one(i)
	}
	var wg sync.WaitGroup
	for _, i := range parallel {
		wg.Go(func() { one(i) })
	}
	wg.Wait()
	return out
}

// OpenRecords implements bot.OpenRecordSource: the subagents and
// background tasks sessionKey's runs of agent own and have not finished,
// for the continuation summary of its next run.
func (c *Subagents) OpenRecords(ctx context.Context, sessionKey, agent string) ([]bot.OpenRecord, error) {
	rs, _, err := c.store.ListRuns(ctx, bot.RunFilter{OwnerSessionKey: sessionKey, OwnerAgent: agent, Open: true, Limit: 100})
	if err != nil {
		return nil, fmt.Errorf("open subagents of %s: %w", sessionKey, err)
	}
	var out []bot.OpenRecord
	for _, rec := range rs {
		if rec.Kind != bot.RunSubagent {
			continue
		}
		out = append(out, bot.OpenRecord{Kind: string(rec.Kind), ID: rec.ID, Status: string(rec.Status),
			Summary: "@" + rec.Agent + ": " + rec.Task, Since: rec.CreatedAt})
	}
	{
		ts, _, err := c.store.ListTasks(ctx, bot.TaskFilter{OwnerSessionKey: sessionKey, OwnerAgent: agent, Open: true, Limit: 100})
		if err != nil {
			return nil, fmt.Errorf("open background tasks of %s: %w", sessionKey, err)
		}
		for _, t := range ts {
			out = append(out, bot.OpenRecord{Kind: bot.KindBackgroundTask, ID: t.ID, Status: string(t.Status),
				Summary: "`" + oneLine(t.Command, 120) + "`", Since: t.CreatedAt})
		}
	}
	return out, nil
}

// recordCall writes the ledger record of an agent called as a tool; nil
// without a ledger. A failure to write it is logged: the call goes on.
func (r *Runtime) recordCall(ctx context.Context, caller, callee *run, task, summary string) *bot.ChildRun {
	if r.children == nil || caller.jobItem == "" {
		return nil
	}
	now := r.opts.Now().UTC()
	rec, err := r.children.store.AddRun(ctx, bot.ChildRun{
		Kind: bot.RunAgentCall, Owner: caller.owner,
		Creator:     bot.Creator{JobID: caller.jobID, DispatchID: caller.dispatchID, WorkItemID: caller.jobItem},
		ParentLinks: bot.ParentLinks{WorkItemID: caller.jobItem, JobID: caller.jobID, DispatchID: caller.dispatchID},
		ChildJobID:  caller.jobID, RootWorkItemID: caller.rootWorkItem,
		Agent: callee.def.Name, Task: clip(task, maxResult), Context: clip(summary, maxResult), CallID: callee.correlationID,
		Depth: callee.depth, Ceilings: callee.inherited, Status: bot.RunRunning, CreatedAt: now, StartedAt: &now,
	})
	if err != nil {
		r.log.LogAttrs(ctx, slog.LevelError, "record an agent call", append(callee.attrs(), slog.String("error", err.Error()))...)
		return nil
	}
	return &rec
}

// endCall records how an agent call ended.
func (r *Runtime) endCall(ctx context.Context, rec *bot.ChildRun, resp AgentResponse) {
	if rec == nil {
		return
	}
	status := bot.RunDone
	if resp.Status != bot.ResultSuccess {
		status = bot.RunFailed
	}
	r.children.finish(ctx, rec, status, resp.Content, resp.Error, resp.TokensUsed)
}

// recordHandoff writes the ledger record of a handoff: the work item goes
// on under another agent, with a new dispatch and job the record is given
// when a worker claims it.
func (r *Runtime) recordHandoff(ctx context.Context, rn *run, hop bot.Hop) {
	if r.children == nil {
		return
	}
	_, err := r.children.store.AddRun(ctx, bot.ChildRun{
		Kind: bot.RunHandoff, Owner: rn.owner,
		Creator:         bot.Creator{JobID: rn.jobID, DispatchID: rn.dispatchID, WorkItemID: rn.workItemID},
		ParentLinks:     bot.ParentLinks{WorkItemID: rn.workItemID, JobID: rn.jobID, DispatchID: rn.dispatchID},
		ChildWorkItemID: rn.workItemID, RootWorkItemID: rn.rootWorkItem, Agent: hop.To, Task: clip(hop.Reason, maxResult),
		Ceilings: hop.Ceilings, Status: bot.RunQueued, CreatedAt: hop.At,
	})
	if err != nil {
		r.log.LogAttrs(ctx, slog.LevelError, "record a handoff", append(rn.attrs(), slog.String("error", err.Error()))...)
	}
}

// Recover closes what a daemon that stopped left open: agent calls ran
// inside jobs that are retried from the start, so their records are
// interrupted. Subagents' records move with their work items, which the
// queue retries. It returns how many records it closed.
func (c *Subagents) Recover(ctx context.Context) (int, error) {
	rs, _, err := c.store.ListRuns(ctx, bot.RunFilter{Open: true, Limit: 1000})
	if err != nil {
		return 0, err
	}
	n := 0
	now := c.now().UTC()
	for _, rec := range rs {
		if rec.Kind != bot.RunAgentCall {
			continue
		}
		_, err := c.store.UpdateRun(ctx, rec.ID, func(c *bot.ChildRun) error {
			if !c.Status.Open() {
				return errNotOpen
			}
			c.Status, c.Error, c.FinishedAt = bot.RunInterrupted, "the daemon stopped during the call", &now
			return nil
		})
		switch {
		case err == nil:
			n++
		case !errors.Is(err, errNotOpen):
			return n, err
		}
	}
	return n, nil
}
