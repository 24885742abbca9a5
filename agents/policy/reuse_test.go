package policy_test

import (
	"encoding/json"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
)

// TestChecksShareNothing decides the corpus on one engine from several
// goroutines at once, each in its own order, and checks every decision
// against one made by an engine that has decided nothing before: an
// engine reuses what a check needs (parser, buffers, maps), and nothing a
// check leaves behind may change the next one.
func TestChecksShareNothing(t *testing.T) {
	f := newFixture(t, nil)
	type job struct{ profile, cmd string }
	var jobs []job
	for _, tc := range corpus {
		for _, p := range builtinProfiles {
			jobs = append(jobs, job{p, tc.cmd})
		}
	}
	// What a check could leave behind: functions, variables known to be
	// numbers, directories, words.
	for _, cmd := range []string{
		"sudo() { echo hi; }; sudo", "sudo id", "x=5; echo $((x + 1))", "echo $((x + 1))",
		"cd src && cat main.go", "cat main.go", "for i in 1 2; do echo $((i)); done", "echo $((i))",
		"git() { ls; }; git push origin main", "git push origin main",
	} {
		for _, p := range builtinProfiles {
			jobs = append(jobs, job{p, cmd})
		}
	}
	want := make([]policy.Decision, len(jobs))
	for i, j := range jobs {
		fresh := &fixture{ws: f.ws, outside: f.outside}
		e, err := policy.New(policy.Options{})
		require.NoError(t, err)
		fresh.engine = e
		want[i] = fresh.bash(t, j.profile, j.cmd)
	}

	const workers = 4
	got := make([][]policy.Decision, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		got[w] = make([]policy.Decision, len(jobs))
		order := rand.Perm(len(jobs))
		wg.Go(func() {
			for _, i := range order {
				in, _ := json.Marshal(map[string]string{"command": jobs[i].cmd})
				d, err := f.engine.CheckOffline(policy.CheckRequest{Profile: jobs[i].profile, Workspace: f.ws,
					Tool: tools.Info{Name: tools.Bash}, Input: in})
				if err != nil {
					errs[w] = err
					return
				}
				got[w][i] = d
			}
		})
	}
	wg.Wait()
	for w := range workers {
		require.NoError(t, errs[w])
		for i, j := range jobs {
			require.Equal(t, want[i], got[w][i], "%s: %q", j.profile, j.cmd)
		}
	}
}
