package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

// noopTool costs nothing to run, so a benchmark measures the runtime.
type noopTool struct{ name string }

func (t noopTool) Info() tools.Info {
	return tools.Info{
		Name: t.name, Kind: tools.KindCore, Description: "Does nothing, quickly. Used to measure overhead.",
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"additionalProperties":false}`),
	}
}

func (noopTool) Run(context.Context, tools.CallContext, json.RawMessage) (string, error) {
	return "ok", nil
}

// instantModel answers at once: a tool call on each of the first turns-1
// turns, then a final answer.
type instantModel struct{ turns int }

func (m instantModel) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	if len(req.Messages) < 2*m.turns-1 {
		return llm.Response{
			ToolCalls:  []llm.ToolCall{{ID: "c", Name: "noop_07", Input: json.RawMessage(`{"path":"x"}`)}},
			StopReason: llm.StopToolUse, Usage: llm.Usage{InputTokens: 100, OutputTokens: 10},
		}, nil
	}
	return llm.Response{Text: "done", StopReason: llm.StopEnd, Usage: llm.Usage{InputTokens: 100, OutputTokens: 10}}, nil
}

type countingProgress struct{ n atomic.Int64 }

func (p *countingProgress) Report(context.Context, bot.ProgressEvent) { p.n.Add(1) }

// BenchmarkTurnOverhead50Tools measures what the runtime itself costs per
// turn (building the request, the policy check, executing the call through
// the toolset, progress events) for an agent that sees 50 tools, against a
// model that answers in no time. Each op is a run of 10 turns; ns/turn is
// the figure to compare with the 1 ms target.
func BenchmarkTurnOverhead50Tools(b *testing.B) {
	const turns = 10
	ts := tools.Core(tools.CoreOptions{})
	for i := len(ts); i < 50; i++ {
		ts = append(ts, noopTool{name: fmt.Sprintf("noop_%02d", i)})
	}
	reg, err := tools.NewRegistry(ts...)
	require.NoError(b, err)
	dir := filepath.Join(b.TempDir(), "agents")
	writeAgent(b, dir, "bench.md", "---\nname: bench\ndescription: Benchmarks.\nmode: handoff\nmax_turns: 20\n---\nYou measure.\n")
	m, err := agents.NewManager(context.Background(), agents.ManagerOptions{Dir: dir})
	require.NoError(b, err)
	rt, err := agents.NewRuntime(agents.RuntimeOptions{
		Agents: m, Tools: reg, Models: llm.Models{"default": instantModel{turns: turns}},
	})
	require.NoError(b, err)
	req := request("bench", "measure")
	progress := &countingProgress{}

	// One run to check the setup: 50 tools visible, 10 turns, success.
	res, err := rt.Run(context.Background(), req, progress)
	require.NoError(b, err)
	require.Equal(b, bot.ResultSuccess, res.Status, res.Reply)
	require.Equal(b, turns, res.TurnsUsed)

	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := rt.Run(context.Background(), req, progress); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*turns), "ns/turn")
}
