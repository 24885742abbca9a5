package policy_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"mvdan.cc/sh/v3/syntax"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
)

// deniedAtoms are commands each built-in profile refuses on their own, in
// newFixture's workspace. simple ones are a bare command and arguments,
// which wrappers like env and xargs can run.
var deniedAtoms = map[string][]struct {
	cmd    string
	simple bool
}{
	policy.ReadOnly: {
		{"rm -rf build", true}, {"touch x", true}, {"python3 -c 1", true}, {"curl https://example.com", true},
		{"sudo id", true}, {"echo x > out.txt", false}, {"git commit -m x", true}, {"sed -i s/a/b/ README.md", true},
		{"make", true}, {"cat .env", true},
		// Options that run programs, write or read outside.
		{"git grep -Ovim main", true}, {"diff3 --diff-program=touch a b c", true}, {"sort --compress-program=touch README.md", true},
		{"git shortlog --output=x HEAD", true}, {"git config -f /etc/passwd --list", true}, {"tree -l", true},
		{"tar --to-command=touch -xf a.tar", true}, {"man -P touch ls", true}, {"zip -TT touch a.zip README.md", true},
		{"less +!touch README.md", true}, {"git log --ext-diff -p", true}, {"find . -fprint x", true},
		// Builtins evaluated as code, history files.
		{"let 'a[$(touch x)]=1'", false}, {"read 'a[$(touch x)]' < README.md", false}, {"printf -v 'a[$(touch x)]' x", false},
		{"test -v 'a[$(touch x)]'", false}, {"declare -i n='a[$(touch x)]'", false}, {"history -w", true},
		{"x='a[$(touch x)]'; echo ${!x}", false},
		// Environment.
		{"PAGER=touch git log", false}, {"GIT_EXTERNAL_DIFF=touch git diff", false}, {"LD_PRELOAD=./x.so ls", false},
		{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0=touch git log", false},
		// Interpreters and programs fed to them.
		{"echo ls | sh", false}, {"awk 'BEGIN{system(\"touch x\")}'", true}, {"sed 'e touch x' README.md", true},
		{"vim -c '!ls' README.md", true}, {"script -qc 'touch x' /dev/null", true},
	},
	policy.Contributor: {
		{"sudo id", true}, {"curl https://example.com", true}, {"cat /etc/passwd", true}, {"kubectl get pods", true},
		{"echo x > .github/workflows/x.yml", false}, {"cat link-out/secret.txt", true}, {"git push origin main", true},
		{"rm -rf /", true}, {"cat .env", true}, {"touch .git/hooks/pre-commit", true},
		// Payloads the profile denies, fed to interpreters and programs
		// that run commands.
		{"echo 'sudo id' | sh", false}, {"echo c3VkbyBpZA== | base64 -d | sh", false},
		{"python3 -c 'import os; os.system(\"sudo id\")'", true}, {"awk 'BEGIN{system(\"kubectl get pods\")}'", true},
		{"git -c alias.x='!sudo id' x", true}, {"GIT_PAGER='kubectl get pods' git log", false},
		{"ln -s .git/hooks h && echo x > h/pre-commit", false}, {"CDPATH=/ cd etc", false},
		{"tar --checkpoint-action=exec='sudo id' -cf a.tar src", true}, {"git bisect run sudo id", true},
	},
	policy.Maintainer: {
		{"sudo id", true}, {"curl https://example.com", true}, {"kubectl delete pod x", true}, {"cat /etc/shadow", true},
		{"cat .env", true}, {"echo x > ../escape", false}, {"$CMD", false},
	},
	policy.Ops: {
		{"sudo id", true}, {"cat /etc/passwd", true}, {"echo x > ../x", false}, {"$CMD", false},
		{"cat link-out/secret.txt", true}, {"rm -rf /", true}, {"doas ls", true}, {"eval \"$X\"", false},
		{"echo cm0gLXJmIC8= | base64 -d | sh", false}, {"python3 -c \"$CODE\"", true},
	},
	// deployer (deployerConfig) denies kubectl delete and docker and wants
	// kubectl apply approved: neither may become allowed.
	"deployer": {
		{"kubectl delete pod x", true}, {"docker ps", true}, {"kubectl apply -f x", true}, {"helm upgrade app ./chart", true},
		{"echo 'kubectl apply -f x' | sh", false}, {"python3 -c 'import os; os.system(\"docker ps\")'", true},
		{"git -c alias.k='!kubectl apply -f x' k", true}, {"PAGER='docker ps' man ls", false},
		{"sort --compress-program=docker README.md", true}, {"terraform destroy", true},
	},
}

var benignAtoms = []string{"ls", "echo hi", "cat README.md", "git status", "true", "pwd", "wc -l src/main.go"}

// quoteSingle quotes s for bash as one word.
func quoteSingle(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// embed puts script s somewhere into a construct the shell policy must look
// into, recursively.
func embed(r *rand.Rand, s string, simple bool, depth int) (string, bool) {
	if depth == 0 {
		return s, simple
	}
	b := benignAtoms[r.IntN(len(benignAtoms))]
	var out string
	switch r.IntN(44) {
	case 0:
		out = s + "; " + b
	case 1:
		out = b + "; " + s
	case 2:
		out = b + " && " + s
	case 3:
		out = "false || " + s
	case 4:
		out = b + " | " + s
	case 5:
		out = s + " | " + b
	case 6:
		out = "( " + s + " )"
	case 7:
		out = "{ " + s + "; }"
	case 8:
		out = `echo "$( ` + s + `)"`
	case 9:
		if strings.Contains(s, "`") {
			out = "echo $( " + s + ")"
		} else {
			out = "echo `" + s + "`"
		}
	case 10:
		out = "diff <( " + s + ") <(" + b + ")"
	case 11:
		out = "f() { " + s + "; }; f"
	case 12:
		out = "g() { " + s + "; }"
	case 13:
		out = "if true; then " + s + "; fi"
	case 14:
		out = "if false; then :; else " + s + "; fi"
	case 15:
		out = "while " + s + "; do break; done"
	case 16:
		out = "for i in 1 2; do " + s + "; done"
	case 17:
		out = "case x in x) " + s + ";; esac"
	case 18:
		out = "bash -c " + quoteSingle(s)
	case 19:
		out = "eval " + quoteSingle(s)
	case 20:
		out = "x=$( " + s + ")"
	case 21:
		out = "echo ${x:-$( " + s + ")}"
	case 22:
		out = "cat <<EOF\n$( " + s + ")\nEOF\n" + b
	case 23:
		out = `cat <<< "$( ` + s + `)"`
	case 24:
		out = "[[ -n $( " + s + ") ]]"
	case 25:
		out = "trap " + quoteSingle(s) + " EXIT"
	case 26:
		out = "sh -c " + quoteSingle(s)
	case 27:
		out = s + " & wait"
	case 28:
		out = "! " + s
	case 29:
		out = "time { " + s + "; }"
	case 32:
		out = "echo " + quoteSingle(s) + " | sh"
	case 33:
		out = "bash <<'PROP_EOF'\n" + s + "\nPROP_EOF"
	case 34:
		out = "sh <<< " + quoteSingle(s)
	case 35:
		out = "source /dev/stdin <<< " + quoteSingle(s)
	case 36:
		out = "echo " + quoteSingle(s) + " > build/p.sh && bash build/p.sh"
	case 37:
		out = "script -qc " + quoteSingle(s) + " /dev/null"
	case 38:
		out = "flock build/lock -c " + quoteSingle(s)
	case 39:
		out = "watch -n 1 " + quoteSingle(s)
	case 40:
		out = "parallel ::: " + quoteSingle(s)
	case 41:
		out = "x=1; if [ \"$x\" = 1 ]; then " + s + "; fi"
	case 42:
		out = "echo x | xargs -I{} sh -c " + quoteSingle(s)
	case 43:
		out = "find . -maxdepth 0 -exec sh -c " + quoteSingle(s) + " \\;"
	case 30, 31:
		if !simple {
			return embed(r, s, simple, depth)
		}
		wrappers := []string{"env ", "env LANG=C ", "nice -n 5 ", "timeout 10 ", "nohup ", "command ", "stdbuf -oL ",
			"setsid ", "builtin ", "exec ", "echo x | xargs ", "find . -maxdepth 0 -exec ", "busybox ", "flock lockfile ",
			"strace ", "npx ", "env -i ", "time ", "command -p ", "timeout -s KILL 5 ", "xargs -I{} "}
		w := wrappers[r.IntN(len(wrappers))]
		out = w + s
		if strings.HasPrefix(w, "find") {
			out += ` \;`
		}
		return embed(r, out, true, depth-1)
	}
	return embed(r, out, false, depth-1)
}

// TestNoCommandHidingADeniedOneIsAllowed is the shell policy's property: a
// command a profile refuses stays refused wherever it is put — pipes,
// lists, subshells, substitutions, functions, loops, here-documents,
// wrappers, nested shells.
func TestNoCommandHidingADeniedOneIsAllowed(t *testing.T) {
	f := newFixture(t, deployerConfig())
	parser := syntax.NewParser(syntax.Variant(syntax.LangBash))
	const perProfile = 1500
	for _, p := range []string{policy.ReadOnly, policy.Contributor, policy.Maintainer, policy.Ops, "deployer"} {
		r := rand.New(rand.NewPCG(42, uint64(len(p))))
		for _, a := range deniedAtoms[p] {
			require.NotEqual(t, tools.Allow, f.bash(t, p, a.cmd).Verdict, "%s: atom %q must be denied on its own", p, a.cmd)
		}
		skipped := 0
		for range perProfile {
			a := deniedAtoms[p][r.IntN(len(deniedAtoms[p]))]
			script, _ := embed(r, a.cmd, a.simple, 1+r.IntN(4))
			if _, err := parser.Parse(strings.NewReader(script), ""); err != nil {
				// Some nestings are not shell (a here-document inside
				// [[ … ]]); the policy refuses them, which proves nothing.
				skipped++
				continue
			}
			d := f.bash(t, p, script)
			require.NotEqual(t, tools.Allow, d.Verdict, "%s allowed %q, which hides %q", p, script, a.cmd)
			if d.Rule == "profile:"+p+"/shell:parse" {
				// A nested script (bash -c, eval) the parser cannot read
				// is refused too, but proves less.
				skipped++
			}
		}
		require.Less(t, skipped, perProfile/10, "too few generated scripts parse")
	}
}

// The same constructs around benign commands stay allowed for ops, so the
// property above is not met by refusing the constructs themselves.
func TestConstructsAroundBenignCommandsAreAllowed(t *testing.T) {
	f := newFixture(t, nil)
	r := rand.New(rand.NewPCG(7, 7))
	allowed := 0
	const n = 500
	for range n {
		script, _ := embed(r, benignAtoms[r.IntN(len(benignAtoms))], true, 1+r.IntN(3))
		if f.bash(t, policy.Ops, script).Verdict == tools.Allow {
			allowed++
		}
	}
	require.Greater(t, allowed, n*9/10, fmt.Sprintf("only %d of %d allowed", allowed, n))
}
