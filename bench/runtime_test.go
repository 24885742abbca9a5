package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

// noopTool costs nothing to run, so what is measured is the runtime.
type noopTool struct{ name string }

func (t noopTool) Info() tools.Info {
	return tools.Info{
		Name: t.name, Kind: tools.KindCore, Description: "Does nothing, quickly.", Permissions: []tools.Permission{tools.PermRead},
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

type discardProgress struct{}

func (discardProgress) Report(context.Context, bot.ProgressEvent) {}

// BenchmarkRuntimeTurnOverhead measures what the agent runtime itself costs
// per turn — building the request with 50 tools, the policy check,
// executing the call through the toolset, progress events — against the
// zero-latency model alone, called the same number of times with the same
// requests' shape, in the same run. Target: under 1 ms per turn.
func BenchmarkRuntimeTurnOverhead(b *testing.B) {
	const (
		turns = 10
		runs  = 300
	)
	for range b.N {
		ts := tools.Core(tools.CoreOptions{})
		for i := len(ts); i < 50; i++ {
			ts = append(ts, noopTool{name: fmt.Sprintf("noop_%02d", i)})
		}
		reg, err := tools.NewRegistry(ts...)
		if err != nil {
			b.Fatal(err)
		}
		dir := filepath.Join(b.TempDir(), "agents")
		if err := os.MkdirAll(dir, 0o750); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "bench.md"), []byte("---\nname: bench\ndescription: Benchmarks.\nmode: handoff\nmax_turns: 20\n---\nYou measure.\n"), 0o600); err != nil {
			b.Fatal(err)
		}
		mgr, err := agents.NewManager(context.Background(), agents.ManagerOptions{Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		model := instantModel{turns: turns}
		rt, err := agents.NewRuntime(agents.RuntimeOptions{Agents: mgr, Tools: reg, Models: llm.Models{"default": model}})
		if err != nil {
			b.Fatal(err)
		}
		th := bot.LocalThread("bench")
		req := bot.RunRequest{
			Job:       bot.Job{ID: "job_1", Agent: "bench", Thread: th},
			WorkItems: []bot.WorkItem{{ID: "wi_1", Kind: bot.KindLocalMessage, Text: "measure", Thread: th}},
			Agent:     "bench", Thread: th,
		}
		res, err := rt.Run(context.Background(), req, discardProgress{})
		if err != nil || res.Status != bot.ResultSuccess || res.TurnsUsed != turns {
			b.Fatalf("setup: %v %+v", err, res)
		}

		// Baseline: the model alone, asked for the same turns.
		msgs := make([]llm.Message, 0, 2*turns)
		t0 := time.Now()
		for range runs {
			msgs = msgs[:0]
			for range turns {
				if _, err := model.Chat(context.Background(), llm.Request{Messages: msgs}); err != nil {
					b.Fatal(err)
				}
				msgs = append(msgs, llm.Message{}, llm.Message{})
			}
		}
		modelOnly := time.Since(t0)

		t0 = time.Now()
		for range runs {
			if _, err := rt.Run(context.Background(), req, discardProgress{}); err != nil {
				b.Fatal(err)
			}
		}
		full := time.Since(t0)
		perTurn := (full - modelOnly) / (runs * turns)
		b.ReportMetric(float64(perTurn.Nanoseconds()), "overhead-ns/turn")
		report(b, "agent runtime: overhead per turn with 50 tools",
			fmt.Sprintf("runtime with a zero-latency model: %s per turn", full/(runs*turns)),
			fmt.Sprintf("baseline, the model alone: %s per turn", modelOnly/(runs*turns)),
			fmt.Sprintf("overhead %s per turn = %.3f of the 1ms target: %s", perTurn,
				float64(perTurn)/float64(time.Millisecond), verdict(perTurn < time.Millisecond)),
		)
	}
}
