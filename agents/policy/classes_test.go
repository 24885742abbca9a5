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
// contributor that may deploy with a deny list (options included: "rm
// -rf") and an approval list, like the README's.
var corpusProfiles = []string{policy.ReadOnly, policy.Contributor, policy.Maintainer, policy.Ops, "deployer"}

func deployerConfig() map[string]policy.ProfileConfig {
	return map[string]policy.ProfileConfig{
		"deployer": {
			Extends:     policy.Contributor,
			Permissions: []policy.Permission{policy.PermDeploy},
			Commands:    policy.CommandRules{Deny: []string{"kubectl delete", "terraform destroy", "docker", "npm publish", "rm -rf", "git push --force"}},
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

// variant is a construct a command can be put in without changing what it
// does: transparent ones need nothing a command would not need on its own.
type variant struct {
	name        string
	wrap        func(cmd string) string
	transparent bool
	// positional ones change the script's positional parameters ($1),
	// so commands that use them are left out.
	positional bool
}

func quoted(cmd string) string { return "'" + strings.ReplaceAll(cmd, "'", `'\''`) + "'" }

var variants = []variant{
	{"and", func(c string) string { return "true && {\n" + c + "\n}" }, true, false},
	{"braces", func(c string) string { return "{\n" + c + "\n}" }, true, false},
	{"subshell", func(c string) string { return "(\n" + c + "\n)" }, true, false},
	{"if", func(c string) string { return "if true; then\n" + c + "\nfi" }, true, false},
	{"for", func(c string) string { return "for _i in 1; do\n" + c + "\ndone" }, true, false},
	{"substitution", func(c string) string { return "echo \"$(\n" + c + "\n)\"" }, true, false},
	{"background", func(c string) string { return c + " &\nwait" }, true, false},
	{"function", func(c string) string { return "f() {\n" + c + "\n}\nf" }, true, true},
	{"bash -c", func(c string) string { return "bash -c " + quoted(c) }, true, true},
	{"eval", func(c string) string { return "eval " + quoted(c) }, true, true},
	{"timeout", func(c string) string { return "timeout 10 bash -c " + quoted(c) }, true, true},
	{"env", func(c string) string { return "env LANG=C bash -c " + quoted(c) }, true, true},
	{"nice", func(c string) string { return "nice -n 1 sh -c " + quoted(c) }, true, true},
	{"command", func(c string) string { return "command eval " + quoted(c) }, true, true},
	{"trap", func(c string) string { return "trap " + quoted(c) + " EXIT" }, true, true},
	{"find -exec", func(c string) string { return "find . -maxdepth 0 -exec bash -c " + quoted(c) + ` \;` }, true, true},
	{"here-document", func(c string) string { return "bash <<'POLICY_EOF'\n" + c + "\nPOLICY_EOF" }, false, true},
	{"pipe", func(c string) string { return "echo " + quoted(c) + " | sh" }, false, true},
	{"here-string", func(c string) string { return "bash <<< " + quoted(c) }, false, true},
}

func usesPositional(cmd string) bool {
	for _, p := range []string{"$1", "$2", "$3", "$@", "$*", "$#", "${1", "${@", "$0", "\"$@\""} {
		if strings.Contains(cmd, p) {
			return true
		}
	}
	return false
}

func severity(b byte) int { return map[byte]int{'A': 0, 'N': 1, 'D': 2}[b] }

// TestCorpusVariantsKeepTheirVerdicts puts every command of the corpus
// that a profile refuses or wants approved into constructs of variants (a
// third of them each, in turn, so every construct meets every class):
// none may make it allowed, or a denial an approval. Everyday reading put
// into a transparent construct stays allowed for read-only.
func TestCorpusVariantsKeepTheirVerdicts(t *testing.T) {
	f := newFixture(t, deployerConfig())
	checked := 0
	for _, e := range loadClasses(t) {
		everyday := strings.HasPrefix(e.class, "everyday reading")
		if !everyday && strings.Trim(e.want, "A") == "" {
			continue
		}
		for k, v := range variants {
			if (e.line+k)%3 != 0 {
				continue
			}
			if v.positional && usesPositional(e.cmd) || strings.Contains(e.cmd, "POLICY_EOF") ||
				v.name == "background" && strings.Contains(e.cmd, "<<") || v.name == "find -exec" && strings.Contains(e.cmd, "{}") {
				continue
			}
			cmd := v.wrap(e.cmd)
			for i, p := range corpusProfiles {
				base := e.want[i]
				if base == 'A' && !(everyday && v.transparent && p == policy.ReadOnly) {
					continue
				}
				d := f.bash(t, p, cmd)
				checked++
				got := letter(d.Verdict)
				if base == 'A' && got != 'A' {
					t.Errorf("corpus.txt:%d: %s: %q in %s: got %c, want A: %s", e.line, p, e.cmd, v.name, got, d.Reason)
				}
				if base != 'A' && severity(got) < severity(base) {
					t.Errorf("corpus.txt:%d: %s: %q in %s: got %c, want %c or stricter: %s", e.line, p, e.cmd, v.name, got, base, d.Reason)
				}
			}
		}
	}
	require.Greater(t, checked, 10_000)
}
