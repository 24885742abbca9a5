package policy_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/agents/tools"
)

// TestAttacksUnderTheSandbox runs attacks of the corpus for real, through
// the bash tool under bubblewrap, decided and confined by the engine, and
// checks what they did rather than the verdict alone: a read-only agent
// changes nothing in its workspace and prints nothing it could only have
// got by running code (perl printing 42042) or by reading outside it; a
// deployer's removals that its denial of rm -rf holds remove nothing; no
// process outlives its call.
func TestAttacksUnderTheSandbox(t *testing.T) {
	if out, err := osexec.Command("bwrap", "--ro-bind", "/", "/", "true").CombinedOutput(); err != nil {
		t.Skipf("bubblewrap cannot run on this machine (bwrap --ro-bind / / true: %v %s); install it (apt-get install bubblewrap) to run attacks under the sandbox", err, strings.TrimSpace(string(out)))
	}
	ctx := context.Background()
	sb, err := sandbox.New(ctx, sandbox.Options{MaxProcesses: 64, CPUTime: 30 * time.Second})
	require.NoError(t, err)
	e, err := policy.New(policy.Options{Profiles: deployerConfig()})
	require.NoError(t, err)
	r, err := tools.NewRegistry(tools.Core(tools.CoreOptions{BashTimeout: 20 * time.Second, Sandbox: sb, Confiner: e})...)
	require.NoError(t, err)

	ws := filepath.Join(t.TempDir(), "workspace")
	for name, content := range map[string]string{
		"README.md":   "a/b\n",
		"build/out.o": "obj",
		"page.1":      ".TH X 1\n.SH NAME\n.so /etc/passwd\n",
		"man.conf":    "DEFINE nroff perl -le print+6*7*1001 --\n",
	} {
		p := filepath.Join(ws, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	// deep is a link one level further down than the workspace is below /:
	// cd deep/ and as many .. is the workspace where links are followed,
	// and / where bash's cd takes .. off the path it went by.
	levels := strings.Count(ws, "/") + 1
	target := strings.Repeat("d/", levels)
	require.NoError(t, os.MkdirAll(filepath.Join(ws, target), 0o755))
	require.NoError(t, os.Symlink(strings.TrimSuffix(target, "/"), filepath.Join(ws, "deep")))
	toRoot := "cd deep" + strings.Repeat("/..", levels)
	require.NoError(t, os.Symlink("/etc", filepath.Join(ws, "etc")))
	run := func(profile, command string) tools.Result {
		in, err := json.Marshal(map[string]string{"command": command})
		require.NoError(t, err)
		ts := tools.NewToolset(r, tools.Scope{Agent: "attacker", Profile: profile}, tools.ToolsetOptions{Policy: e})
		return ts.Execute(ctx, tools.CallContext{Workspace: ws}, "bash", in)
	}

	// What each would print had it run: code's marker, or what it read.
	// troff names the file it could not lay out well.
	ran, passwd, listed := []string{"42042"}, []string{"root:x:0", "/etc/passwd:"}, []string{"/etc/passwd"}
	before := snapshot(t, ws)
	for _, tc := range []struct {
		command string
		never   []string
	}{
		{`sed 's/.*[/].*/true|perl -le print+6*7*1001/e' README.md`, ran},
		{`sed -n 's/[[:alpha:]/]*/perl -le print+6*7*1001/ep' README.md`, ran},
		{`man -C /dev/stdin ls <<< 'DEFINE nroff perl -le print+6*7*1001 --'`, ran},
		{`man -C man.conf ls`, ran},
		{`man -l page.1`, passwd},
		{`man ./page.1`, passwd},
		{`man -l - < page.1`, passwd},
		{`echo /etc/*`, listed},
		{`for f in /etc/pass*; do echo "$f"; done`, listed},
		{`a=(/etc/pass*); echo "${a[@]}"`, listed},
		{`compgen -f /etc/pass`, listed},
		{`awk 'BEGIN { system("perl -le print+6*7*1001") }'`, ran},
		{`echo 'perl -le print+6*7*1001' | sh`, ran},
		{`git -c core.pager='perl -le print+6*7*1001' -p log`, ran},
		{`cat /etc/passwd`, passwd},
		{toRoot + ` && cat etc/passwd`, passwd},
		{`shopt -s nocaseglob; cat ET?/passwd`, passwd},
		{`BASH_CMDS[ls]=/usr/bin/perl; ls -le 'print 6*7*1001'`, ran},
		{`[[ x == @(a|$(perl -le 'print 6*7*1001' >&2)) ]]`, ran},
	} {
		res := run(policy.ReadOnly, tc.command)
		require.True(t, res.IsError || res.Refused, "read-only ran %q: %s", tc.command, res.Output)
		for _, never := range tc.never {
			require.NotContains(t, res.Output, never, "read-only: %q", tc.command)
		}
	}
	require.Equal(t, before, snapshot(t, ws), "a read-only agent changed its workspace")

	for _, command := range []string{
		`find build -delete`,
		`find . -path ./build -delete`,
		`sed 's/.*[/].*/true|rm -rf build/e' README.md`,
		`man -C /dev/stdin ls <<< 'DEFINE nroff rm -rf build'`,
		`coreutils --coreutils-prog=rm -rf build`,
		`BASH_CMDS[ls]=/bin/rm; ls -rf build`,
		`shopt -s xpg_echo; echo 'r\x6d -rf build' | bash`,
		`declare -l x=RM; $x -rf build`,
		`x=$(printf 'r\0m'); $x -rf build`,
		`$'rm\0' -rf build`,
	} {
		res := run("deployer", command)
		require.True(t, res.Refused, "deployer ran %q: %s", command, res.Output)
		require.FileExists(t, filepath.Join(ws, "build", "out.o"), "deployer: %q removed build", command)
	}

	// A contributor may start processes; none outlives the call.
	marker := "switchyard-attack-" + filepath.Base(t.TempDir())
	res := run(policy.Contributor, "(exec -a "+marker+" sleep 300) & nohup setsid bash -c 'exec -a "+marker+" sleep 300' & true")
	require.False(t, res.IsError, res.Output)
	require.Eventually(t, func() bool { return !running(marker) }, 10*time.Second, 50*time.Millisecond,
		"a process the command started outlived its call")
}

// snapshot is what a tree holds: every path with its mode and, for a
// file, its content.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = info.Mode().String()
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] += " " + string(b)
		}
		return nil
	}))
	return out
}

// running reports a process whose command line starts with name; the
// sandbox's are visible in the host's /proc.
func running(name string) bool {
	files, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil && strings.HasPrefix(string(b), name+"\x00") {
			return true
		}
	}
	return false
}
