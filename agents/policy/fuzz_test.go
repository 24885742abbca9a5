package policy_test

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
)

// FuzzShellPolicy feeds arbitrary commands to the shell policy of every
// built-in profile: it must never panic, and whatever it does not allow
// comes with a rule and a reason.
func FuzzShellPolicy(f *testing.F) {
	for _, tc := range corpus {
		f.Add(tc.cmd)
	}
	for _, e := range loadClasses(f) {
		f.Add(e.cmd)
	}
	for _, s := range []string{
		"", " ", "\x00", "$'\\x", "$'\\u12'", "${", "$((", "a[$(rm)]", "`", "'", "\"$\"", "<<<", "<<EOF",
		"{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}", "{1..100000000}", "~root/x", "~+", "cd -", "popd; cat x",
		"sed 'w'", "sed 's/a/b/w'", "sed -e 'y/ab'", "find -exec", "xargs -I", "env -C", "git -C", "git -c",
		"time", "coproc", "function f", "f() { f; }; f", "select x in a; do rm; done", "((x=$(rm)))",
		"declare -i x=y", "let x=y", "[[ x -eq y ]]", "${x@P}", "${!x}", "a=(1 2); echo ${a[$i]}",
	} {
		f.Add(s)
	}
	fx := newFixture(f, map[string]policy.ProfileConfig{
		"fuzzy": {Extends: "contributor", Permissions: []policy.Permission{policy.PermDeploy},
			Commands: policy.CommandRules{Allow: []string{"make"}, Deny: []string{"git push"}},
			Approval: []string{"kubectl"}, Approvers: []string{"alice"}, Paths: policy.PathRules{Read: policy.PathRule{Deny: []string{"secrets/**"}}}},
	})
	profiles := append(append([]string(nil), builtinProfiles...), "fuzzy")
	f.Fuzz(func(t *testing.T, cmd string) {
		if !utf8.ValidString(cmd) {
			// JSON carries it as replacement characters; the tool input
			// the model sends is JSON.
			return
		}
		in, err := json.Marshal(map[string]string{"command": cmd})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range profiles {
			d, err := fx.engine.CheckOffline(policy.CheckRequest{Profile: p, Workspace: fx.ws, Tool: tools.Info{Name: tools.Bash}, Input: in})
			if err != nil {
				// Only an empty command is bad input.
				continue
			}
			switch d.Verdict {
			case tools.Allow:
			case tools.Deny, tools.NeedsApproval:
				if d.Rule == "" || d.Reason == "" {
					t.Fatalf("%s: %q: verdict %s without rule or reason", p, cmd, d.Verdict)
				}
			default:
				t.Fatalf("%s: %q: unknown verdict %q", p, cmd, d.Verdict)
			}
		}
	})
}
