package agents

import (
	"fmt"
	"strings"

	"github.com/switchyard/switchyard/agents/tools"
)

// systemPrompt is the agent's instructions, then what it can do (tools and
// agents listed apart, so it knows which calls hand work to someone else),
// then where it is, then what the thread carries over from earlier runs.
func (r *Runtime) systemPrompt(rn *run, visible []tools.Info, continuation string) string {
	var b strings.Builder
	b.Grow(len(rn.def.Instructions) + 64*len(visible) + len(continuation) + 512)
	if rn.def.Instructions != "" {
		b.WriteString(rn.def.Instructions)
		b.WriteString("\n\n")
	}
	b.WriteString("## Capabilities\n\n")
	var plain, agents []tools.Info
	var handoff bool
	for _, t := range visible {
		switch {
		case t.Kind == tools.KindAgent:
			agents = append(agents, t)
		case t.Name == HandoffTool:
			handoff = true
		case t.Name == EnableSkillTool || t.Name == DisableSkillTool:
			// The Skills section says how to use them.
		default:
			plain = append(plain, t)
		}
	}
	if len(plain) == 0 {
		b.WriteString("You have no tools: answer from what you are told.\n")
	} else {
		b.WriteString("Tools:\n")
		for _, t := range plain {
			fmt.Fprintf(&b, "- %s: %s\n", t.Name, firstSentence(t.Description))
		}
	}
	if len(agents) > 0 {
		b.WriteString("\nAgents you can call as tools. Each runs your task on its own and sees only the task and context you pass, not this conversation:\n")
		for _, t := range agents {
			fmt.Fprintf(&b, "- %s: %s\n", t.Name, firstSentence(t.Description))
		}
	}
	if handoff {
		b.WriteString("\nhandoff_to gives this whole work item to another agent, which then owns the thread; use it when the request belongs to someone else rather than to a subtask. Agents: ")
		var names []string
		for _, d := range r.opts.Agents.List() {
			if d.Name != rn.def.Name {
				names = append(names, d.Name)
			}
		}
		b.WriteString(strings.Join(names, ", "))
		b.WriteString(".\n")
	}
	b.WriteString("\nA tool call that is not allowed comes back as a result starting with \"refused:\"; do not retry it, find another way or say what you need.\n")
	r.writeSkills(&b, rn, visible)

	b.WriteString("\n## Where you are\n\n")
	fmt.Fprintf(&b, "You are the %q agent of Switchyard", rn.def.Name)
	if rn.sessionKey != "" {
		fmt.Fprintf(&b, ", working in the thread %s", rn.sessionKey)
	}
	b.WriteString(". ")
	if rn.workspace != "" {
		b.WriteString("File paths are relative to this thread's workspace directory; bash runs there. ")
	}
	if rn.depth > 0 {
		fmt.Fprintf(&b, "You were called by the %q agent; your final answer goes back to it, not to the thread. ", rn.chain[len(rn.chain)-2])
	} else {
		b.WriteString("Your final answer is posted in the thread. ")
	}
	b.WriteString("\n")
	if continuation != "" {
		b.WriteString("\n## Carried over\n\n")
		b.WriteString(continuation)
	}
	return b.String()
}

// firstSentence keeps prompts short: the full descriptions travel with the
// tool definitions.
func firstSentence(s string) string {
	if len(s) > 300 {
		s = s[:300]
	}
	if i := strings.Index(s, ". "); i > 0 {
		s = s[:i+1]
	} else if i := strings.Index(s, ".\n"); i > 0 {
		s = s[:i+1]
	}
	return oneLine(s, 300)
}
