package policy_test

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
)

// corpusProfiles are the profiles testdata/corpus.txt gives a verdict for,
// in the order of its columns: the built-in ones, and deployer, a
// contributor that may deploy with a deny list and an approval list, like
// the README's.
var corpusProfiles = []string{policy.ReadOnly, policy.Contributor, policy.Maintainer, policy.Ops, "deployer"}

func deployerConfig() map[string]policy.ProfileConfig {
	return map[string]policy.ProfileConfig{
		"deployer": {
			Extends:     policy.Contributor,
			Permissions: []policy.Permission{policy.PermDeploy},
			Commands:    policy.CommandRules{Deny: []string{"kubectl delete", "terraform destroy", "docker", "npm publish"}},
			Approval:    []string{"kubectl apply", "helm upgrade", "terraform apply"},
			Approvers:   []string{"ana"},
		},
	}
}

// classEntry is one command of the corpus with the verdict it must get
// from each of corpusProfiles (A allow, D deny, N needs approval).
type classEntry struct {
	class, cmd, want string
	line             int
}

// loadClasses reads testdata/corpus.txt: "## class" headers, then one
// command a line after its five verdicts ("DAAAN cat x"), or a command of
// several lines between "DAAAN <<<" and ">>>".
func loadClasses(t testing.TB) []classEntry {
	t.Helper()
	f, err := os.Open("testdata/corpus.txt")
	require.NoError(t, err)
	defer f.Close()
	var out []classEntry
	class := ""
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			class = strings.TrimPrefix(line, "## ")
			continue
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		}
		want, cmd, ok := strings.Cut(line, " ")
		require.True(t, ok && len(want) == len(corpusProfiles) && strings.Trim(want, "ADN") == "", "corpus.txt:%d: bad line %q", n, line)
		start := n
		if cmd == "<<<" {
			var lines []string
			for sc.Scan() {
				n++
				if sc.Text() == ">>>" {
					break
				}
				lines = append(lines, sc.Text())
			}
			cmd = strings.Join(lines, "\n")
		}
		require.NotEmpty(t, class, "corpus.txt:%d: a command before any class", n)
		out = append(out, classEntry{class: class, cmd: cmd, want: want, line: start})
	}
	require.NoError(t, sc.Err())
	return out
}

// TestShellPolicyByClass decides every command of the corpus for every
// corpus profile: read-only must not run code, write or read outside; no
// contributor may get around its denials or approvals; everyday commands
// stay allowed.
func TestShellPolicyByClass(t *testing.T) {
	entries := loadClasses(t)
	require.GreaterOrEqual(t, len(entries), 1000)
	f := newFixture(t, deployerConfig())
	seen := map[string]int{}
	classes := map[string]int{}
	for _, e := range entries {
		if prev, dup := seen[e.cmd]; dup {
			t.Errorf("corpus.txt:%d: %q is already on line %d", e.line, e.cmd, prev)
		}
		seen[e.cmd] = e.line
		classes[e.class]++
		got := make([]byte, len(corpusProfiles))
		var reasons []string
		for i, p := range corpusProfiles {
			d := f.bash(t, p, e.cmd)
			got[i] = letter(d.Verdict)
			reasons = append(reasons, fmt.Sprintf("%s: %s [%s]", p, d.Reason, d.Rule))
			if d.Verdict != tools.Allow {
				require.NotEmpty(t, d.Rule, e.cmd)
				require.NotEmpty(t, d.Reason, e.cmd)
			}
		}
		if string(got) != e.want {
			t.Errorf("corpus.txt:%d (%s): %q: got %s, want %s\n\t%s", e.line, e.class, e.cmd, got, e.want, strings.Join(reasons, "\n\t"))
		}
	}
	for class, n := range classes {
		if n < 20 {
			t.Errorf("class %q has %d commands; a class needs many variants", class, n)
		}
	}
}
