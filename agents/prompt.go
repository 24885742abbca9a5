package agents

import (
	"strconv"
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
	var plain, agents int
	var handoff bool
	for _, t := range visible {
		switch listing(t) {
		case listedTool:
			plain++
		case listedAgent:
			agents++
		}
		handoff = handoff || t.Kind != tools.KindAgent && t.Name == HandoffTool
	}
	if plain == 0 {
		b.WriteString("You have no tools: answer from what you are told.\n")
	} else {
		b.WriteString("Tools:\n")
		writeListed(&b, visible, listedTool)
	}
	if agents > 0 {
		b.WriteString("\nAgents you can call as tools. Each runs your task on its own and sees only the task and context you pass, not this conversation:\n")
		writeListed(&b, visible, listedAgent)
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
	b.WriteString("You are the ")
	b.WriteString(strconv.Quote(rn.def.Name))
	b.WriteString(" agent of Switchyard")
	if rn.sessionKey != "" {
		b.WriteString(", working in the thread ")
		b.WriteString(rn.sessionKey)
	}
	b.WriteString(". ")
	if rn.workspace != "" {
		b.WriteString("File paths are relative to this thread's workspace directory; bash runs there. ")
	}
	if rn.depth > 0 {
		b.WriteString("You were called by the ")
		b.WriteString(strconv.Quote(rn.chain[len(rn.chain)-2]))
		b.WriteString(" agent; your final answer goes back to it, not to the thread. ")
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

// Where a tool is listed in the system prompt: with the tools, with the
// agents, or in a section of its own (handoff_to, the skill tools).
const (
	listedTool = iota
	listedAgent
	listedApart
)

func listing(t tools.Info) int {
	switch {
	case t.Kind == tools.KindAgent:
		return listedAgent
	case t.Name == HandoffTool, t.Name == EnableSkillTool, t.Name == DisableSkillTool:
		return listedApart
	}
	return listedTool
}

// writeListed writes a line for each tool of visible listed where.
func writeListed(b *strings.Builder, visible []tools.Info, where int) {
	for i := range visible {
		if t := &visible[i]; listing(*t) == where {
			writeItem(b, t.Name, firstSentence(t.Description))
		}
	}
}

// writeItem writes a line of a list: "- name: text".
func writeItem(b *strings.Builder, name, text string) {
	b.WriteString("- ")
	b.WriteString(name)
	b.WriteString(": ")
	b.WriteString(text)
	b.WriteString("\n")
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
