package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

var agentToolSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"task":{"type":"string","description":"What the agent should do, self-contained"},` +
	`"context":{"type":"string","description":"What it needs to know from this conversation: a short summary, file names, constraints"}},` +
	`"required":["task"],"additionalProperties":false}`)

// agentTool offers a tool-mode agent to another agent of the same run as
// agent_<name>.
type agentTool struct {
	rt     *Runtime
	caller *run
	callee Definition
}

var _ tools.Tool = (*agentTool)(nil)

func (t *agentTool) Info() tools.Info {
	return tools.Info{
		Name:        ToolName(t.callee.Name),
		Description: t.callee.Description,
		Schema:      agentToolSchema,
		Kind:        tools.KindAgent,
		// Calling is reading; what the callee does is checked call by
		// call under its own rights, which never exceed its caller's.
		Permissions: []tools.Permission{tools.PermRead},
	}
}

// Run invokes the callee with an invocation context instead of the caller's
// history. Its AgentResponse, as JSON, is the tool result. Cycles and chains
// deeper than MaxDepth are refused before the callee starts.
func (t *agentTool) Run(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Task    string `json:"task"`
		Context string `json:"context"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	if strings.TrimSpace(in.Task) == "" {
		return "", errors.New("invalid input: task is required")
	}
	caller := t.caller
	callee, ok := t.rt.opts.Agents.Get(t.callee.Name)
	if !ok {
		return "", tools.Refuse("agent %q is no longer defined", t.callee.Name)
	}
	if callee.Mode != ModeTool {
		return "", tools.Refuse("agent %q works by handoff, not as a tool; use handoff_to", callee.Name)
	}
	if msg := t.rt.packageOff(caller.target, callee); msg != "" {
		return "", tools.Refuse("%s", msg)
	}
	path := strings.Join(append(slices.Clone(caller.chain), callee.Name), " → ")
	if slices.Contains(caller.chain, callee.Name) {
		return "", tools.Refuse("cycle: %s; %q is already working on this request further up the chain", path, callee.Name)
	}
	if caller.depth+1 > t.rt.opts.MaxDepth {
		return "", tools.Refuse("agent chain too deep: %s would be %d calls deep, the limit is %d; do the task yourself or answer with what you have",
			path, caller.depth+1, t.rt.opts.MaxDepth)
	}

	// The callee works for the same requester, under every ceiling of the
	// caller and the caller's own profile: never more than the caller.
	passed := caller.passedOn("called by")
	child := &run{
		def:           callee,
		jobID:         caller.jobID,
		sessionKey:    caller.sessionKey,
		workspace:     caller.workspace,
		correlationID: caller.nextChildID(),
		parentID:      caller.correlationID,
		chain:         append(slices.Clone(caller.chain), callee.Name),
		depth:         caller.depth + 1,
		userMessage:   caller.userMessage,
		requester:     caller.requester,
		ceilings:      slices.Clone(caller.ceilings),
		inherited:     passed,
		target:        targetOf(caller.sessionKey, callee.Name),
		skills:        &loadedSkills{},
		thread:        caller.thread,
		jobItem:       caller.jobItem,
		dispatchID:    caller.dispatchID,
		owner:         caller.owner,
		rootWorkItem:  caller.rootWorkItem,
		spawnDepth:    caller.spawnDepth,
		retried:       caller.retried,
	}
	for _, c := range passed {
		child.ceilings = appendCeiling(child.ceilings, c)
	}
	if caller.progress != nil {
		child.progress = childProgress{parent: caller.progress, agent: callee.Name}
	}
	ic := InvocationContext{
		ConversationSummary: in.Context,
		UserMessage:         caller.userMessage,
		CorrelationID:       child.correlationID,
	}
	log := t.rt.log
	attrs := append(child.attrs(), slog.String("caller", caller.def.Name))
	if t.rt.opts.Access != nil {
		attrs = append(attrs, slog.String("rights", t.rt.opts.Access.Effective(callee.Name, callee.Profile, child.ceilings).String()))
	}
	log.LogAttrs(ctx, slog.LevelInfo, "agent invoked as a tool", attrs...)
	// The callee loads its own skills; the caller's rules are the
	// caller's, not the callee's.
	t.rt.preload(ctx, child, callee.Skills)

	started := t.rt.opts.Now()
	rec := t.rt.recordCall(ctx, caller, child, in.Task, in.Context)
	out := t.rt.invoke(ctx, child, nil, invocationText(caller.def.Name, in.Task, ic), "")
	resp := t.rt.redactResponse(out.resp)
	t.rt.saveTranscript(context.WithoutCancel(ctx), child, out, resp, 0, started)
	t.rt.endCall(context.WithoutCancel(ctx), rec, resp)
	caller.addChildTokens(resp.TokensUsed)
	log.LogAttrs(ctx, slog.LevelInfo, "agent returned", append(child.attrs(),
		slog.String("caller", caller.def.Name), slog.String("status", resp.Status),
		slog.Int("tokens", resp.TokensUsed), slog.Int("turns", resp.TurnsUsed))...)

	b, err := json.Marshal(resp)
	if err != nil {
		return "", err
	}
	if resp.Status != bot.ResultSuccess {
		return string(b), fmt.Errorf("agent %q ended with status %s", callee.Name, resp.Status)
	}
	return string(b), nil
}

// invocationText is the first message of an agent called as a tool: the
// task, and the invocation context in place of a conversation.
func invocationText(caller, task string, ic InvocationContext) string {
	var b strings.Builder
	if caller != "" {
		fmt.Fprintf(&b, "Task from the %s agent:\n", caller)
	} else {
		b.WriteString("Task:\n")
	}
	b.WriteString(strings.TrimSpace(task))
	b.WriteString("\n")
	if s := strings.TrimSpace(ic.ConversationSummary); s != "" {
		b.WriteString("\nContext:\n" + s + "\n")
	}
	if s := strings.TrimSpace(ic.UserMessage); s != "" {
		b.WriteString("\nThe request that started this work, for reference:\n" + s + "\n")
	}
	return b.String()
}

// childProgress shows a callee's steps in the caller's status message.
type childProgress struct {
	parent bot.Progress
	agent  string
}

func (p childProgress) Report(ctx context.Context, ev bot.ProgressEvent) {
	if ev.Kind == bot.ProgressSkills {
		// The status message's skills are the caller's; the callee's
		// show as what it is doing.
		ev.Kind, ev.Text = bot.ProgressNote, "loaded skills "+listOr(ev.Skills, "none")
		ev.Skills = nil
	}
	ev.Text = "@" + p.agent + ": " + ev.Text
	p.parent.Report(ctx, ev)
}

var handoffSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"agent":{"type":"string","description":"The agent that should own this work item"},` +
	`"reason":{"type":"string","description":"Why, in one line; it is shown in the thread"}},` +
	`"required":["agent","reason"],"additionalProperties":false}`)

// handoffTool re-routes the run's work item to another agent through the
// Rerouter, which counts the hop against bot.MaxHops. The run ends after the
// turn that handed off.
type handoffTool struct {
	rt *Runtime
	rn *run
}

var _ tools.Tool = (*handoffTool)(nil)

func (t *handoffTool) Info() tools.Info {
	return tools.Info{
		Name:        HandoffTool,
		Description: "Hand this work item to another agent, which then owns it and answers in the thread. Ends your run.",
		Schema:      handoffSchema,
		Kind:        tools.KindControl,
		// The next agent works under the rights of this run at the most.
		Permissions: []tools.Permission{tools.PermRead},
	}
}

func (t *handoffTool) Run(ctx context.Context, _ tools.CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Agent  string `json:"agent"`
		Reason string `json:"reason"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	in.Agent = strings.TrimPrefix(strings.TrimSpace(in.Agent), "@")
	in.Reason = strings.TrimSpace(in.Reason)
	if in.Agent == "" || in.Reason == "" {
		return "", errors.New("invalid input: agent and reason are required")
	}
	rn := t.rn
	target, ok := t.rt.opts.Agents.Get(in.Agent)
	if !ok {
		return "", tools.Refuse("there is no agent %q (agents: %s)", in.Agent, strings.Join(t.rt.agentNames(), ", "))
	}
	if target.Name == rn.def.Name {
		return "", tools.Refuse("the work item is already yours")
	}
	if msg := t.rt.packageOff(rn.target, target); msg != "" {
		return "", tools.Refuse("handoff refused: %s", msg)
	}
	if rn.handedOff() != nil {
		return "", tools.Refuse("the work item was already handed off in this run")
	}
	// The next agent works under this run's rights at the most: the
	// ceilings it inherited, its own profile and the skills it cannot
	// unload go with the hop (the requester's is worked out again from the
	// work item).
	hop := bot.Hop{From: rn.def.Name, To: target.Name, Reason: in.Reason, At: t.rt.opts.Now().UTC(), Ceilings: rn.passedOnHeld("handed off by")}
	if _, err := t.rt.opts.Rerouter.RerouteWorkItem(ctx, rn.workItemID, hop); err != nil {
		if bot.ErrorCode(err) == bot.ECONFLICT {
			return "", tools.Refuse("handoff refused: %s (a work item may change agents at most %d times); finish it yourself", bot.ErrorMessage(err), bot.MaxHops)
		}
		return "", fmt.Errorf("handoff to %s: %w", target.Name, err)
	}
	rn.setHandoff(hop)
	t.rt.recordHandoff(ctx, rn, hop)
	t.rt.log.LogAttrs(ctx, slog.LevelInfo, "work item handed off", append(rn.attrs(),
		slog.String("work_item", rn.workItemID), slog.String("to", target.Name), slog.String("reason", in.Reason))...)
	return fmt.Sprintf("handed off to %s; your run ends after this turn", target.Name), nil
}
