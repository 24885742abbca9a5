package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// metric reads a metric without labels from the daemon's /metrics.
func (p *daemonProc) metric(t *testing.T, name string) string {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(body)
	require.NotNil(t, m, "no metric %s", name)
	return string(m[1])
}

// hup sends SIGHUP and waits until the daemon has taken it: the reload
// metrics change as the reload succeeds (success) or is refused.
func (p *daemonProc) hup(t *testing.T, success bool) {
	t.Helper()
	before := p.metric(t, "switchyard_config_last_reload_success_timestamp_seconds")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool {
		if success {
			return p.metric(t, "switchyard_config_last_reload_success_timestamp_seconds") != before &&
				p.metric(t, "switchyard_config_last_reload_successful") == "1"
		}
		return p.metric(t, "switchyard_config_last_reload_successful") == "0"
	}, 15*time.Second, 20*time.Millisecond)
	select {
	case <-p.done:
		t.Fatalf("SIGHUP ended the daemon: %v", p.err)
	default:
	}
}

func TestSIGHUPChangesRoutingWithoutARestart(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	writeRule := func(agent string) {
		cfg := fmt.Sprintf("routing:\n  rules:\n    - name: deploys\n      agent: %s\n      match:\n        text: deploy\n", agent)
		require.NoError(t, os.WriteFile(file, []byte(cfg), 0o600))
	}
	routesTo := func(p *daemonProc, thread, agent string) {
		t.Helper()
		r := run(t, dir, p.env(), "send", "--thread", thread, "deploy web")
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, fmt.Sprintf(`→ %s (rule "deploys" (priority 0))`, agent))
	}

	writeRule("ops")
	p := serve(t, dir, freeAddr(t))
	routesTo(p, "t1", "ops")
	require.Equal(t, "1", p.metric(t, "switchyard_config_last_reload_successful"), "the start counts as a load")

	// A changed rule routes the next message, with no restart.
	writeRule("coder")
	p.hup(t, true)
	routesTo(p, "t2", "coder")

	// A broken config is refused: the daemon runs on with the one before.
	writeRule("nobody")
	p.hup(t, false)
	require.Equal(t, "0", p.metric(t, "switchyard_config_last_reload_success"))
	routesTo(p, "t3", "coder")
	r := run(t, dir, p.env(), "config", "reload")
	require.Equal(t, 2, r.code)
	require.Equal(t, "switchyard: config reload refused, config.yaml stays in effect:\n"+
		`config.yaml:4: routing.rules[0].agent: unknown agent "nobody"`+"\n", r.stderr)

	// Fixed, the CLI reloads it.
	writeRule("docs")
	r = run(t, dir, p.env(), "config", "reload")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "config.yaml reloaded: routing.rules changed\n", r.stdout)
	require.Equal(t, "1", p.metric(t, "switchyard_config_last_reload_successful"))
	routesTo(p, "t4", "docs")

	// What only a restart changes is named, and keeps its value until then.
	require.NoError(t, os.WriteFile(file, []byte("workers: 2\n"+mustRead(t, file)), 0o600))
	r = run(t, dir, p.env(), "config", "reload")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "config.yaml reloaded: nothing changed\ntakes effect at the next start: workers\n", r.stdout)

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait(), "exit status 0 after SIGTERM")
	log := p.log.String()
	require.Contains(t, log, `level=ERROR msg="config problem: config.yaml:4: routing.rules[0].agent: unknown agent \"nobody\""`)
	require.Contains(t, log, `level=INFO msg="config reloaded" config=config.yaml changed=routing.rules`)
	require.Contains(t, log, `level=WARN msg="config changes that take effect at the next start: workers; until then their old values stay in effect"`)
	require.Regexp(t, `(?m)msg="job started" .*work_item=wi_\d+ requests=1$`, log, "the job's lead work item and how many it runs, not a list of ids")
}

func mustRead(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	return string(b)
}

// config check runs the very checks serve runs: what one refuses, the
// other refuses with the same words.
func TestConfigCheckRefusesWhatServeRefuses(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "agents"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "agents", "helper.md"),
		[]byte("---\nname: helper\ndescription: Helps.\nmodel: fast\nprofile: wizard\ntools: [read_file, rm_rf]\n---\nHelp.\n"), 0o600))
	want := `switchyard: agents/helper.md:4: model: unknown model "fast" (configured: none; add it under models in config.yaml)
agents/helper.md:5: profile: unknown profile "wizard" (want contributor, maintainer, ops, read-only)
agents/helper.md:6: tools: unknown tool "rm_rf"
`
	check := run(t, dir, hermeticEnv(), "config", "check")
	require.Equal(t, 2, check.code)
	require.Equal(t, want, check.stderr)
	serve := run(t, dir, hermeticEnv(), "serve", "--listen", freeAddr(t))
	require.Equal(t, 2, serve.code)
	require.Equal(t, want, serve.stderr)
	require.NoDirExists(t, filepath.Join(dir, "data"), "serve refused before it touched anything")

	// The example config names an Anthropic model: without its key both
	// refuse it and say how to fix it; with the key check accepts it.
	example, err := os.ReadFile("../../config.example.yaml")
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "agents")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), example, 0o600))
	env := append(hermeticEnv(), "ANTHROPIC_API_KEY=", "SWITCHYARD_API_TOKEN=")
	check = run(t, dir, env, "config", "check")
	serve = run(t, dir, env, "serve", "--listen", freeAddr(t))
	for _, r := range []result{check, serve} {
		require.Equal(t, 2, r.code)
		line := strings.Count(string(example[:strings.Index(string(example), "api_key: ${ANTHROPIC_API_KEY}")]), "\n") + 1
		require.Equal(t, fmt.Sprintf("switchyard: config.yaml:%d: models.default.api_key: required for anthropic without a base_url; "+
			"${ANTHROPIC_API_KEY} is unset or empty: set it in the daemon's environment, or remove the model\n", line), r.stderr)
	}
	check = run(t, dir, append(env, "ANTHROPIC_API_KEY=sk-ant-test"), "config", "check")
	require.Equal(t, 0, check.code, check.stderr)
	require.Equal(t, "config.yaml: ok (6 rules, 1 schedule; agents: builder, coder, docs, ops, reviewer, triage; models: default, local)\n", check.stdout)
	require.Empty(t, strings.TrimSpace(check.stderr))
}
