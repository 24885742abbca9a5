package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// These tests drive the real binary, as a user does.

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "switchyard-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "switchyard")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build switchyard: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is what a command printed and how it exited.
type result struct {
	stdout, stderr string
	code           int
}

func run(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{out.String(), errb.String(), code}
}

// daemonProc is a running `switchyard serve`.
type daemonProc struct {
	cmd  *exec.Cmd
	addr string
	dir  string
	log  *bytes.Buffer
	done chan struct{} // closed when the process has exited
	err  error         // its exit error, once done is closed
}

// wait waits for the process to exit and returns its exit error.
func (p *daemonProc) wait() error {
	<-p.done
	return p.err
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// treeDir is a daemon directory whose agents lead and helper run on the
// chat-completions server at modelURL, without a sandbox, with more added
// to its config.
func treeDir(t *testing.T, modelURL, more string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf("models:\n  default:\n    provider: openai\n    base_url: %s/v1\n    model: fake\nsandbox:\n  mode: none\n", modelURL) + more
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "agents"), 0o755))
	for name, desc := range map[string]string{"lead": "Leads a piece of work.", "helper": "Does one part of it."} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "agents", name+".md"), []byte(
			"---\nname: "+name+"\ndescription: "+desc+"\nmode: tool\n---\nYou do what you are asked.\n"), 0o600))
	}
	return dir
}

// serve starts the daemon in dir and waits until it is ready.
func serve(t *testing.T, dir, addr string, args ...string) *daemonProc {
	t.Helper()
	return serveEnv(t, dir, addr, hermeticEnv(), args...)
}

// serveEnv is serve with the daemon's environment.
func serveEnv(t *testing.T, dir, addr string, env []string, args ...string) *daemonProc {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--listen", addr}, args...)...)
	cmd.Dir = dir
	cmd.Env = env
	log := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	p := &daemonProc{cmd: cmd, addr: addr, dir: dir, log: log, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = p.wait()
		if t.Failed() {
			t.Logf("daemon log:\n%s", log.String())
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		// Ready, with every source up: "degraded" while Slack connects.
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			var body struct{ Status string }
			err = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == 200 && body.Status == "ready" {
				return p
			}
		}
		select {
		case <-p.done:
			t.Fatalf("daemon exited early: %v\n%s", p.err, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon not ready:\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hermeticEnv keeps the developer's model credentials and a local Ollama
// out of the daemon under test: with no models configured it must not find
// one.
func hermeticEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OLLAMA_HOST", "SWITCHYARD_API_TOKEN":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "OLLAMA_HOST=127.0.0.1:1")
}

func (p *daemonProc) env() []string { return []string{"SWITCHYARD_SERVER=http://" + p.addr} }

// token is the API token the daemon made in its data directory.
func (p *daemonProc) token(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.dir, "data", "api-token"))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// post sends a JSON body to the daemon's API with its token.
func (p *daemonProc) post(token, path, body string) (*http.Response, error) {
	req, err := http.NewRequest("POST", "http://"+p.addr+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	return http.DefaultClient.Do(req)
}

func TestTourFromAFreshDirectory(t *testing.T) {
	dir := t.TempDir()
	p := serve(t, dir, freeAddr(t))
	r := run(t, dir, p.env(), "send", "@triage hello")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "wi_1")
	require.Contains(t, r.stdout, "triage (mention @triage)")

	require.Eventually(t, func() bool {
		r := run(t, dir, p.env(), "thread", "local:default", "--json")
		var msgs []struct{ Kind, Text string }
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &msgs) == nil && len(msgs) == 2 &&
			msgs[0].Kind == "status" && msgs[1].Kind == "reply"
	}, 10*time.Second, 100*time.Millisecond)
	r = run(t, dir, p.env(), "thread", "local:default")
	require.Contains(t, r.stdout, "[status")
	require.Contains(t, r.stdout, "[reply")
	require.Contains(t, r.stdout, `agent "triage" has no model: set models.default in config.yaml`)

	// --wait prints the reply and exits 1 because the work failed.
	r = run(t, dir, p.env(), "send", "--wait", "--thread", "t2", "/deploy staging")
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stdout, "ops (command /deploy)")
	require.Contains(t, r.stdout, "ops could not finish")

	r = run(t, dir, p.env(), "workitems", "list", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var list []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list), "a JSON array")
	require.Len(t, list, 2)
	require.ElementsMatch(t, []string{"id", "thread", "status", "route", "parent_work_item_id", "created_at"}, keysOf(list[0]))

	r = run(t, dir, p.env(), "workitems", "show", "wi_1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "mention @triage")

	r = run(t, dir, p.env(), "send", "--id", "x1", "--json", "hi")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"duplicate": false`)
	r = run(t, dir, p.env(), "send", "--id", "x1", "--json", "hi")
	require.Contains(t, r.stdout, `"duplicate": true`)

	r = run(t, dir, []string{"SWITCHYARD_SERVER=http://" + freeAddr(t)}, "workitems", "list")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "is `switchyard serve` running?")

	// The CLI found the daemon's token in ./data; elsewhere it has none,
	// and says where to look.
	r = run(t, t.TempDir(), p.env(), "workitems", "list")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "missing or wrong bearer token (HTTP 401); no API token: the daemon makes data/api-token at its first start")
	r = run(t, t.TempDir(), append(p.env(), "SWITCHYARD_API_TOKEN="+p.token(t)), "workitems", "list")
	require.Equal(t, 0, r.code, r.stderr)
	cfg := filepath.Join(t.TempDir(), "elsewhere.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("data_dir: "+filepath.Join(dir, "data")+"\n"), 0o600))
	r = run(t, t.TempDir(), p.env(), "workitems", "list", "--config", cfg)
	require.Equal(t, 0, r.code, r.stderr)
}

func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestKill9LosesNothing kills the daemon with SIGKILL right after it
// acknowledged a burst of messages, restarts it and checks every
// acknowledged work item is processed.
func TestKill9LosesNothing(t *testing.T) {
	dir := t.TempDir()
	// The default lease is 30s: the restarted daemon must reclaim the
	// killed one's jobs at once, not after their leases.
	addr := freeAddr(t)
	p := serve(t, dir, addr)
	token := p.token(t)

	const n = 40
	var (
		mu  sync.Mutex
		ids []string
		wg  sync.WaitGroup
	)
	for i := range n {
		wg.Go(func() {
			body := fmt.Sprintf(`{"thread":"t%d","text":"@coder task %d","id":"k-%d"}`, i%5, i, i)
			resp, err := p.post(token, "/api/v1/messages", body)
			if err != nil {
				return // the kill may land first: unacknowledged, so not owed
			}
			defer resp.Body.Close()
			var res struct {
				WorkItemID string `json:"work_item_id"`
			}
			if resp.StatusCode == http.StatusAccepted && json.NewDecoder(resp.Body).Decode(&res) == nil {
				mu.Lock()
				ids = append(ids, res.WorkItemID)
				mu.Unlock()
			}
		})
		if i == n/2 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	wg.Wait()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.wait()
	require.NotEmpty(t, ids)

	p2 := serve(t, dir, addr)
	for _, id := range ids {
		require.Eventually(t, func() bool {
			r := run(t, dir, p2.env(), "workitems", "show", id, "--json")
			var wi struct{ Status string }
			return r.code == 0 && json.Unmarshal([]byte(r.stdout), &wi) == nil &&
				(wi.Status == "done" || wi.Status == "failed")
		}, 15*time.Second, 100*time.Millisecond, "work item %s acknowledged before the kill was not processed", id)
	}
}

func TestSIGTERMShutsDownCleanly(t *testing.T) {
	dir := t.TempDir()
	p := serve(t, dir, freeAddr(t))
	r := run(t, dir, p.env(), "send", "@triage hello")
	require.Equal(t, 0, r.code)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
		require.NoError(t, p.err, "exit status 0 after SIGTERM")
	case <-time.After(40 * time.Second):
		t.Fatal("daemon did not stop within 40s of SIGTERM")
	}
	require.Contains(t, p.log.String(), "stopped")
}

// A second Ctrl-C during the shutdown hands the running job back at once,
// instead of being swallowed while the model keeps the job for its 30 s of
// grace; after the restart the job runs again and its reply comes once.
func TestASecondInterruptHandsRunningJobsBackAtOnce(t *testing.T) {
	asked := make(chan struct{}, 1)
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			asked <- struct{}{}
			<-r.Context().Done() // a model that does not answer
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Done after all."}}]}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf("models:\n  default:\n    provider: openai\n    base_url: %s/v1\n    model: fake\n", srv.URL)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	addr := freeAddr(t)
	p := serve(t, dir, addr)
	r := run(t, dir, p.env(), "send", "--thread", "slow", "@coder look")
	require.Equal(t, 0, r.code, r.stderr)
	<-asked

	require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
	// The shutdown is under way once intake has stopped.
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err != nil
	}, 15*time.Second, 50*time.Millisecond)
	require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
	require.NoError(t, p.wait(), "exit status 0")
	log := p.log.String()
	require.Contains(t, log, "asked again to stop: cancelling running jobs now")
	require.Contains(t, log, "job released at shutdown")
	require.NotContains(t, log, "grace period over")

	p = serve(t, dir, addr)
	require.Eventually(t, func() bool {
		r := run(t, dir, p.env(), "thread", "slow", "--json")
		var msgs []struct{ Kind, Text string }
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &msgs) == nil && len(msgs) == 2 &&
			msgs[1].Kind == "reply" && msgs[1].Text == "Done after all."
	}, 30*time.Second, 100*time.Millisecond, "the job handed back runs again after the restart and replies once")
}

func TestConfigErrorsExit2NamingFileLineAndKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600))
		return name
	}
	tests := []struct {
		name, body, want string
	}{
		{"unknown-agent.yaml", "routing:\n  rules:\n    - name: bugs\n      agent: tirage\n      match:\n        labels: [bug]\n",
			`unknown-agent.yaml:4: routing.rules[0].agent: unknown agent "tirage"`},
		{"unknown-key.yaml", "server:\n  listn: 127.0.0.1:1\n", "unknown-key.yaml:2: server.listn"},
		{"bad-regex.yaml", "routing:\n  rules:\n    - name: r\n      agent: coder\n      match:\n        text: \"(\"\n",
			"bad-regex.yaml:6: routing.rules[0].match.text"},
		{"wrong-type.yaml", "workers: many\n", "wrong-type.yaml:1: workers"},
		// The README's old deployer: contributor cannot run kubectl at all,
		// so its approval never asked anyone.
		{"lying-approval.yaml", "profiles:\n  deployer:\n    extends: contributor\n    approval: [\"kubectl apply\"]\n    approvers: [alice]\n",
			`lying-approval.yaml:4: profiles.deployer.approval[0]: "kubectl apply" never asks anyone: the profile refuses it outright (`},
		{"unknown-ceiling.yaml", "access:\n  slack:\n    users:\n      U0123ABCD: admin\n",
			`unknown-ceiling.yaml:4: access.slack.users.U0123ABCD: unknown profile "admin"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := write(tt.name, tt.body)
			for _, args := range [][]string{
				{"config", "check", "--config", file},
				{"explain", "--config", file, "--text", "hi"},
				{"serve", "--config", file, "--listen", freeAddr(t)},
			} {
				r := run(t, dir, nil, args...)
				require.Equal(t, 2, r.code, "%v: %s", args, r.stderr)
				require.Contains(t, r.stderr, tt.want, args)
			}
		})
	}
	// Approvals of platform tools are judged by what the tools declare.
	file := write("tool-approval.yaml", "profiles:\n  reviewer2:\n    extends: read-only\n    approval: [github_get_issue, github_merge_pull_request]\n    approvers: [alice]\n")
	r := run(t, dir, nil, "config", "check", "--config", file)
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stderr, `tool-approval.yaml:4: profiles.reviewer2.approval[1]: "github_merge_pull_request" never asks anyone: the profile refuses it outright (tool "github_merge_pull_request" is not allowed (needs the merge permission))`)
	require.NotContains(t, r.stderr, "approval[0]")
	r = run(t, dir, nil, "config", "check", "--config", "missing.yaml")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "missing.yaml")

	r = run(t, dir, nil, "config", "check")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "<defaults>: ok")
}

// consoleRights are the rights a console user's request gives an agent of profile.
func consoleRights(profile, agent string) string {
	return fmt.Sprintf(`"rights":{"profile":%q,"reason":"%s's own profile, within ops (requested by @local on the local console)"}`, profile, agent)
}

func TestExplainOffline(t *testing.T) {
	dir := t.TempDir()
	cfg := `routing:
  commands:
    ship: ops
  rules:
    - name: bugs
      priority: 100
      agent: coder
      match:
        labels: [bug]
    - name: migrations
      priority: 50
      agent: reviewer
      match:
        kinds: ["github.pull_request.*"]
        paths: ["db/**/*.sql"]
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--text", "@coder fix it"}, `{"work_item":true,"agent":"coder","kind":"mention","reason":"mention @coder","rule":"",` + consoleRights("contributor", "coder") + `}`},
		{[]string{"--text", "/deploy staging"}, `{"work_item":true,"agent":"ops","kind":"command","reason":"command /deploy","rule":"",` + consoleRights("ops", "ops") + `}`},
		{[]string{"--text", "/ship it"}, `{"work_item":true,"agent":"ops","kind":"command","reason":"command /ship","rule":"",` + consoleRights("ops", "ops") + `}`},
		{[]string{"--text", "/unknown x"}, `{"work_item":true,"agent":"triage","kind":"default","reason":"default","rule":"",` + consoleRights("read-only", "triage") + `}`},
		{[]string{"--source", "github", "--kind", "github.issues.labeled", "--label", "bug"}, `{"work_item":true,"agent":"coder","kind":"rule","reason":"rule \"bugs\" (priority 100)","rule":"bugs",
			"rights":{"profile":"read-only","reason":"requested by an unnamed github user, whose access to the repository is unknown"}}`},
		{[]string{"--source", "github", "--kind", "github.pull_request.opened", "--path", "db/m/001.sql"}, `{"work_item":true,"agent":"reviewer","kind":"rule","reason":"rule \"migrations\" (priority 50)","rule":"migrations",
			"rights":{"profile":"read-only","reason":"reviewer's own profile, within read-only (requested by an unnamed github user, whose access to the repository is unknown)"}}`},
		// The intake makes no work item of a GitHub event nothing asked for
		// explicitly, so neither does explain.
		{[]string{"--source", "github", "--kind", "github.pull_request.opened", "--path", "src/x.go"}, `{"work_item":false,"agent":"","kind":"","reason":"no mention, command or rule matched","rule":"","ingress":"no_route"}`},
		{[]string{"--source", "github", "--actor", "octocat", "--repo", "acme/api", "--text", "@coder fix it"}, `{"work_item":true,"agent":"coder","kind":"mention","reason":"mention @coder","rule":"","needs":"@octocat has write permission on acme/api (github.min_permission; not checked offline)",
			"rights":{"profile":"contributor","reason":"coder's own profile, within contributor (requested by @octocat, write access)"}}`},
		// What a reader may have agents do, whatever the agent.
		{[]string{"--source", "github", "--actor", "stranger", "--permission", "read", "--repo", "acme/api", "--kind", "github.issues.labeled", "--label", "bug"},
			`{"work_item":true,"agent":"coder","kind":"rule","reason":"rule \"bugs\" (priority 100)","rule":"bugs",
			"rights":{"profile":"read-only","reason":"requested by @stranger, read access"}}`},
		{[]string{"--source", "github", "--actor", "dependabot[bot]", "--bot", "--text", "@coder fix it"}, `{"work_item":false,"agent":"","kind":"","reason":"sent by bot dependabot[bot], not in github.allow_bots","rule":"","ingress":"bot_actor"}`},
	}
	for _, tt := range tests {
		r := run(t, dir, nil, append([]string{"explain", "--json"}, tt.args...)...)
		require.Equal(t, 0, r.code, r.stderr)
		require.JSONEq(t, tt.want, r.stdout, tt.args)
	}
	r := run(t, dir, nil, "explain", "--text", "@coder hi")
	require.Equal(t, "coder (mention @coder); rights contributor: coder's own profile, within ops (requested by @local on the local console)\n", r.stdout)
	r = run(t, dir, nil, "explain", "--source", "github", "--kind", "github.pull_request.opened")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "no work item (no_route): no mention, command or rule matched\n", r.stdout)
	r = run(t, dir, nil, "explain", "--source", "github", "--actor", "octocat", "--repo", "acme/api", "--text", "/deploy now")
	require.Equal(t, "ops (command /deploy), if @octocat has write permission on acme/api (github.min_permission; not checked offline); "+
		"rights contributor: requested by @octocat, write access\n", r.stdout)
	r = run(t, dir, nil, "explain", "--source", "github", "--actor", "stranger", "--permission", "read", "--kind", "github.issues.labeled", "--label", "bug")
	require.Equal(t, "coder (rule \"bugs\" (priority 100)); rights read-only: requested by @stranger, read access\n", r.stdout)

	r = run(t, dir, nil, "rules", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "bugs")
	require.Less(t, strings.Index(r.stdout, "bugs"), strings.Index(r.stdout, "migrations"), "higher priority first")
	require.Contains(t, r.stdout, "/ship → ops")
}

func TestVersionAndUsageErrors(t *testing.T) {
	r := run(t, t.TempDir(), nil, "version")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "switchyard ")
	r = run(t, t.TempDir(), nil, "send", "--no-such-flag", "x")
	require.Equal(t, 2, r.code)
}
