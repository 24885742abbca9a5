package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	tiktoken "github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
)

// tokenizer is o200k_base, the BPE of OpenAI's current models, read from
// the vocabulary tiktoken-go-loader embeds: nothing is fetched. tiktoken-go
// keeps its loader in a package variable, so it is set once.
func tokenizer(b *testing.B) *tiktoken.Tiktoken {
	b.Helper()
	setLoader.Do(func() { tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader()) })
	enc, err := tiktoken.GetEncoding("o200k_base")
	if err != nil {
		b.Fatal(err)
	}
	return enc
}

var setLoader sync.Once

// hundredSkills is a registry with 100 skills enabled everywhere: twenty of
// each built-in skill, each with its own name and the built-in's
// description, instructions, protocol and contracts, as teams write them.
func hundredSkills(b *testing.B) (*skills.Registry, []string) {
	b.Helper()
	reg, err := skills.NewRegistry(b.Context(), skills.Options{})
	if err != nil {
		b.Fatal(err)
	}
	builtin := reg.Skills()
	var names []string
	for i := range 100 {
		s := *builtin[i%len(builtin)]
		s.Name = fmt.Sprintf("%s-%02d", s.Name, i)
		s.ComposabilityRules = nil // each stands alone; the prompt is what is measured
		s.InstructionsFile = ""    // read already
		if _, err := reg.Register(s); err != nil {
			b.Fatal(err)
		}
		if err := reg.Set(b.Context(), skills.Setting{Scope: skills.Global, Name: s.Name, Enabled: skills.Enabled}); err != nil {
			b.Fatal(err)
		}
		names = append(names, s.Name)
	}
	// Only the hundred: the built-ins themselves are disabled.
	for _, s := range builtin {
		if err := reg.Set(b.Context(), skills.Setting{Scope: skills.Global, Name: s.Package, Enabled: skills.Disabled}); err != nil {
			b.Fatal(err)
		}
	}
	return reg, names
}

// promptRecorder is a model that keeps the system prompt of the first
// request and answers at once.
type promptRecorder struct {
	mu     sync.Mutex
	system string
}

func (m *promptRecorder) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	m.mu.Lock()
	m.system = req.System
	m.mu.Unlock()
	return llm.Response{Text: "done", StopReason: llm.StopEnd}, nil
}

// systemPrompt is the system prompt the runtime builds for agent's first
// turn.
func systemPrompt(b *testing.B, reg *skills.Registry, dir, agent string) string {
	b.Helper()
	mgr, err := agents.NewManager(b.Context(), agents.ManagerOptions{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	core, err := tools.NewRegistry(tools.Core(tools.CoreOptions{})...)
	if err != nil {
		b.Fatal(err)
	}
	model := &promptRecorder{}
	rt, err := agents.NewRuntime(agents.RuntimeOptions{Agents: mgr, Tools: core, Models: llm.Models{"default": model}, Skills: reg})
	if err != nil {
		b.Fatal(err)
	}
	th := bot.LocalThread("bench")
	res, err := rt.Run(b.Context(), bot.RunRequest{
		Job:       bot.Job{ID: "job_1", Agent: agent, Thread: th},
		WorkItems: []bot.WorkItem{{ID: "wi_1", Kind: bot.KindLocalMessage, Text: "write the release notes", Thread: th}},
		Agent:     agent, Thread: th,
	}, discardProgress{})
	if err != nil || res.Status != bot.ResultSuccess {
		b.Fatalf("run %s: %v %+v", agent, err, res)
	}
	return model.system
}

// BenchmarkSkillPromptTokens counts, with a real tokenizer, the system
// prompt of an agent with 100 skills enabled where it runs: with
// progressive disclosure (one line a skill, loaded on demand) against the
// same agent with every skill's instructions inlined, built in the same
// run by the same runtime. Target: at least 90% fewer tokens.
func BenchmarkSkillPromptTokens(b *testing.B) {
	for range b.N {
		enc := tokenizer(b)
		reg, names := hundredSkills(b)
		dir := filepath.Join(b.TempDir(), "agents")
		if err := os.MkdirAll(dir, 0o750); err != nil {
			b.Fatal(err)
		}
		const body = "mode: handoff\n---\nYou help the team ship: you answer requests in the thread with the tools you have.\n"
		// The same agent twice: one loads skills when it needs them, the
		// other has them all loaded (and so is not offered enable_skill).
		files := map[string]string{
			"disclosure.md": "---\nname: disclosure\ndescription: Loads skills on demand.\n" + body,
			"inlined.md": "---\nname: inlined\ndescription: Has every skill inlined.\ntools: [read_file, list_directory, search_files, bash]\n" +
				"skills: [" + strings.Join(names, ", ") + "]\n" + body,
		}
		for name, src := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
				b.Fatal(err)
			}
		}
		progressive := systemPrompt(b, reg, dir, "disclosure")
		inlined := systemPrompt(b, reg, dir, "inlined")
		if n := strings.Count(progressive, "\n- "); n < 100 {
			b.Fatalf("the progressive prompt lists %d skills, want 100", n)
		}
		if n := strings.Count(inlined, "\n### "); n != 100 {
			b.Fatalf("the inlined prompt holds %d skills, want 100", n)
		}
		tp, ti := len(enc.Encode(progressive, nil, nil)), len(enc.Encode(inlined, nil, nil))
		fewer := 1 - float64(tp)/float64(ti)
		b.ReportMetric(float64(tp), "tokens-progressive")
		b.ReportMetric(float64(ti), "tokens-inlined")
		report(b, "skills: system prompt tokens with 100 skills enabled (o200k_base, offline)",
			fmt.Sprintf("progressive disclosure, one line a skill: %d tokens", tp),
			fmt.Sprintf("baseline, every skill's instructions inlined: %d tokens", ti),
			fmt.Sprintf("ratio %.3f, %.1f%% fewer tokens (target at least 90%%): %s", float64(tp)/float64(ti), fewer*100, verdict(fewer >= 0.9)),
		)
	}
}
