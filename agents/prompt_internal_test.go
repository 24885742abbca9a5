package agents

import (
	"strings"
	"testing"

	"github.com/switchyard/switchyard/agents/tools"
)

// BenchmarkSystemPrompt measures the system prompt of a spawned helper
// with the core tools, three subagent tools and two agents it may call,
// made at every turn of every run.
func BenchmarkSystemPrompt(b *testing.B) {
	var visible []tools.Info
	for _, t := range tools.Core(tools.CoreOptions{}) {
		visible = append(visible, t.Info())
	}
	for _, name := range []string{"list_children", "await_child", "cancel_child"} {
		visible = append(visible, tools.Info{Name: name, Kind: tools.KindControl,
			Description: "Works on the subagents this thread's " + name + " started.  It returns\ttheir status, their result and how long they ran, one a line."})
	}
	for _, name := range []string{"reviewer", "writer"} {
		visible = append(visible, tools.Info{Name: "agent_" + name, Kind: tools.KindAgent,
			Description: "Ask the " + name + " agent: it reviews what you give it and answers with what it found. It sees only the task."})
	}
	r := &Runtime{}
	rn := &run{def: Definition{Name: "helper", Instructions: strings.Repeat("You help with the part you are given. ", 20)},
		sessionKey: "slack:T1/C1/1700000000.000100", workspace: "/tmp/ws", depth: 1, chain: []string{"lead", "helper"}}
	for b.Loop() {
		_ = r.systemPrompt(rn, visible, "")
	}
}
