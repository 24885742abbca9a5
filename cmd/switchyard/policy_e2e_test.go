package main

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/tools"
)

// bashStep is a bash tool call of the fake model.
func bashStep(command string) toolStep {
	in, _ := json.Marshal(map[string]string{"command": command})
	return toolStep{"bash", string(in)}
}

// A read-only reviewer steered into running one command of every class
// the shell policy closes — programs run by options, interpreters fed a
// program, builtins evaluating code, environment variables, links, cd,
// option writes — changes nothing in its workspace and runs none of
// them: every payload would leave a file behind, and none is there.
func TestReadOnlyReviewerRunsNoneOfTheClasses(t *testing.T) {
	attacks := []string{
		`find . -maxdepth 0 -fprint pwned-fprint`,
		`find . -maxdepth 0 -exec touch pwned-find ';'`,
		`git grep -O'touch pwned-grep' marker`,
		`git -c core.fsmonitor='touch pwned-fsmonitor' status`,
		`git -c alias.x='!touch pwned-alias' x`,
		`echo 'touch pwned-pipe' | bash`,
		"bash <<'EOF'\ntouch pwned-heredoc\nEOF",
		`source /dev/stdin <<< 'touch pwned-source'`,
		`awk 'BEGIN { system("touch pwned-awk") }'`,
		`sed '1e touch pwned-sed' marker.txt`,
		`sed 's/.*[/]*.*/true|touch pwned-sed-bracket/e' marker.txt`,
		`man -C /dev/stdin ls <<< 'DEFINE nroff touch pwned-man'`,
		`let 'a[$(touch pwned-let)]=1'`,
		`read 'a[$(touch pwned-read)]' <<< 1`,
		`printf -v 'a[$(touch pwned-printf)]' x`,
		`history -s x; history -w pwned-history`,
		`env -S 'touch pwned-env'`,
		`BASH_ENV=/dev/stdin bash -c true <<< 'touch pwned-bashenv'`,
		`ln -s marker.txt link && echo changed > link`,
		`cd "$HOME" && echo changed > marker.txt`,
		`git shortlog --output=pwned-shortlog HEAD`,
		`tar -cf - marker.txt | tar --to-command='touch pwned-tar' -xf -`,
		`python3 -c 'open("pwned-python", "w")'`,
		`echo changed >> marker.txt`,
	}
	steps := make([]toolStep, 0, len(attacks))
	for _, a := range attacks {
		steps = append(steps, bashStep(a))
	}
	fake := &fakeOpenAI{steps: steps, quick: true}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf("models:\n  default:\n    provider: openai\n    base_url: %s/v1\n    model: fake\n", srv.URL)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))

	// The thread's workspace: a repository with a file the payloads would
	// change. Run by bash there, each attack leaves a file or a change.
	ws := filepath.Join(dir, "data", "workspaces", tools.WorkspaceName("local:confine"))
	require.NoError(t, os.MkdirAll(ws, 0o750))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "marker.txt"), []byte("marker\n"), 0o644))
	for _, args := range [][]string{{"init", "-q"}, {"add", "marker.txt"}} {
		out, err := exec.Command("git", append([]string{"-C", ws}, args...)...).CombinedOutput()
		require.NoError(t, err, "git %s: %s", args[0], out)
	}
	p := serve(t, dir, freeAddr(t))

	r := run(t, dir, p.env(), "send", "--wait", "--thread", "confine", "@reviewer review the marker")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)

	entries, err := os.ReadDir(ws)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{".git", "marker.txt"}, names, "no payload created a file")
	b, err := os.ReadFile(filepath.Join(ws, "marker.txt"))
	require.NoError(t, err)
	require.Equal(t, "marker\n", string(b), "no payload changed the marker")

	// Every call was refused before it ran, and the refusal audited.
	r = run(t, dir, p.env(), "audit", "--decision", "deny", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var page struct {
		Items []struct{ Decision, Tool, Agent, Profile, Rule, Arguments string }
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &page))
	recs := page.Items
	require.Len(t, recs, len(attacks), "one refusal per attack: %s", r.stdout)
	for _, rec := range recs {
		require.Equal(t, "bash", rec.Tool)
		require.Equal(t, "reviewer", rec.Agent)
		require.Equal(t, "read-only", rec.Profile)
		require.True(t, strings.HasPrefix(rec.Rule, "profile:read-only/"), rec.Rule)
	}
}

// A contributor whose profile wants kubectl apply approved pipes it into a
// shell: the call waits for a person, and nothing runs meanwhile.
func TestPipingAnApprovalIntoAShellAsksFirst(t *testing.T) {
	fake := &fakeOpenAI{steps: []toolStep{bashStep(`echo 'kubectl apply -f deploy.yaml; touch ran' | sh`)}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	const anaToken = "ana-token-0123456789"
	cfg := fmt.Sprintf("models:\n  default:\n    provider: openai\n    base_url: %s/v1\n    model: fake\n"+
		"profiles:\n  deployer:\n    extends: contributor\n    permissions: [deploy]\n"+
		"    approval: [\"kubectl apply\"]\n    approvers: [ana]\n"+
		"server:\n  api_tokens:\n    - {name: ana, token: %s}\n", srv.URL, anaToken)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "agents"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "agents", "shipper.md"), []byte(
		"---\nname: shipper\ndescription: Ships releases.\nprofile: deployer\n---\nYou ship.\n"), 0o600))
	p := serve(t, dir, freeAddr(t))

	r := run(t, dir, p.env(), "send", "--thread", "ship", "@shipper deploy it")
	require.Equal(t, 0, r.code, r.stderr)

	var pending []struct{ ID, Tool, Status, Reason string }
	require.Eventually(t, func() bool {
		r := run(t, dir, p.env(), "approvals", "list", "--json")
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &pending) == nil && len(pending) == 1
	}, 20*time.Second, 100*time.Millisecond)
	require.Equal(t, "bash", pending[0].Tool)
	ws := filepath.Join(dir, "data", "workspaces", tools.WorkspaceName("local:ship"))
	_, err := os.Stat(filepath.Join(ws, "ran"))
	require.True(t, os.IsNotExist(err), "nothing ran while the approval waits")

	ana := append(p.env(), "SWITCHYARD_API_TOKEN="+anaToken)
	r = run(t, dir, ana, "approvals", "deny", pending[0].ID)
	require.Equal(t, 0, r.code, r.stderr)
	require.Eventually(t, func() bool {
		r := run(t, dir, p.env(), "workitems", "list", "--thread", "ship", "--json")
		var list []struct{ Status string }
		return json.Unmarshal([]byte(r.stdout), &list) == nil && len(list) == 1 &&
			list[0].Status != "running" && list[0].Status != "pending"
	}, 20*time.Second, 100*time.Millisecond)
	_, err = os.Stat(filepath.Join(ws, "ran"))
	require.True(t, os.IsNotExist(err), "a denied call never runs")
}
