package main

import (
	"encoding/base64"
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
// A daemon started with no config file (make run) reads the config.yaml
// made since at its next reload, as README's tour has a new user do; one
// started with a file keeps to it, and refuses a reload while it is gone.
func TestAReloadReadsTheConfigFileMadeAfterAStartWithNone(t *testing.T) {
	dir := t.TempDir()
	p := serve(t, dir, freeAddr(t))
	r := run(t, dir, p.env(), "explain", "--daemon", "--text", "deploy web")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, `rule "deploys"`)

	file := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(file, []byte("routing:\n  rules:\n    - name: deploys\n      agent: ops\n      match:\n        text: deploy\n"), 0o600))
	r = run(t, dir, p.env(), "config", "reload")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "config.yaml reloaded: routing.rules changed\n", r.stdout)
	r = run(t, dir, p.env(), "explain", "--daemon", "--text", "deploy web")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `ops (rule "deploys" (priority 0))`)

	require.NoError(t, os.Remove(file))
	r = run(t, dir, p.env(), "config", "reload")
	require.Equal(t, 2, r.code, r.stdout)
	require.Contains(t, r.stderr, "config reload refused, config.yaml stays in effect")
	require.Contains(t, r.stderr, "no such file or directory")
	r = run(t, dir, p.env(), "explain", "--daemon", "--text", "deploy web")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `ops (rule "deploys" (priority 0))`, "the config in effect stays")
}

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

// What serve refuses before it listens — a port out of range, a
// connection string that does not parse, the postgres driver without an
// API token the replicas share, a GitHub App key it cannot read — config
// check refuses too, with the same
// words, and serve refuses it before it touches anything. The password
// and the key are never shown.
func TestConfigCheckRefusesTheStoreAndListenerServeWouldRefuse(t *testing.T) {
	const password = "pw-TOPSECRET-4711"
	const token = "server:\n  api_token: tok-0123456789abcdef\n"
	for _, tc := range []struct {
		name, config, want string
	}{
		{"port out of range", "server:\n  listen: 127.0.0.1:99999\n",
			`config.yaml:2: server.listen: bad port "99999": want 0 to 65535 (or a service name such as http)`},
		{"negative port", "server:\n  listen: \":-1\"\n",
			`config.yaml:2: server.listen: bad port "-1": want 0 to 65535 (or a service name such as http)`},
		{"keyword DSN with an open quote", token + "storage:\n  driver: postgres\n  dsn: \"host=db password='" + password + "\"\n",
			"config.yaml:5: storage.dsn: cannot read the connection string: unterminated quoted string in connection info string"},
		{"URL DSN with a bad escape", token + "storage:\n  driver: postgres\n  dsn: postgres://sy:%zz" + password + "@db/sy\n",
			"config.yaml:5: storage.dsn: cannot read the connection string: invalid percent-encoded token in password"},
		{"URL DSN with a bad port", token + "storage:\n  driver: postgres\n  dsn: postgres://sy:" + password + "@db:port/sy\n",
			"config.yaml:5: storage.dsn: cannot read the connection string"},
		{"GitHub key file missing", "github:\n  app_id: 1\n  webhook_secret: s\n  private_key_file: ./app.pem\n",
			"config.yaml:4: github.private_key_file: cannot read it: no such file or directory"},
		{"GitHub key not PEM", "github:\n  app_id: 1\n  webhook_secret: s\n  private_key: " + password + "\n",
			"config.yaml:4: github.private_key: not a PEM-encoded private key"},
		{"GitHub key of garbage", "github:\n  app_id: 1\n  webhook_secret: s\n  private_key: |\n    -----BEGIN RSA PRIVATE KEY-----\n    " +
			base64.StdEncoding.EncodeToString([]byte(password)) + "\n    -----END RSA PRIVATE KEY-----\n",
			"config.yaml:4: github.private_key: not a PKCS#1 or PKCS#8 RSA private key"},
		{"postgres without a shared token", "storage:\n  driver: postgres\n  dsn: postgres://sy:" + password + "@db/sy\n",
			"config.yaml:2: storage.driver: is postgres: the replicas must share the API token, so set server.api_token " +
				"(for example to ${SWITCHYARD_API_TOKEN}) or $SWITCHYARD_API_TOKEN instead of relying on each replica's api-token file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(tc.config), 0o600))
			check := run(t, dir, hermeticEnv(), "config", "check")
			serve := run(t, dir, hermeticEnv(), "serve")
			for _, r := range []result{check, serve} {
				require.Equal(t, 2, r.code, r.stderr)
				require.Equal(t, "switchyard: "+tc.want+"\n", r.stderr)
				require.NotContains(t, r.stdout+r.stderr, password)
			}
			require.NoDirExists(t, filepath.Join(dir, "data"), "serve refused before it touched anything")
		})
	}
}

// `config reload` reports a config with a mistake of any kind as refused,
// exit status 2, with its file:line problems, and the config in effect
// stays: the token the CLI needs is read past problems elsewhere in the
// file, so a mistake the decoder finds is reported like one a check finds.
func TestConfigReloadRefusesEveryKindOfMistake(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	const good = "routing:\n  rules:\n    - name: deploys\n      agent: ops\n      match:\n        text: deploy\n"
	require.NoError(t, os.WriteFile(file, []byte(good), 0o600))
	p := serve(t, dir, freeAddr(t))

	// Merge keys that double up as they nest ("billion laughs").
	var bomb strings.Builder
	bomb.WriteString(good + "models:\n  a0: &a0 {provider: openai, model: m}\n")
	for i := 1; i < 12; i++ {
		fmt.Fprintf(&bomb, "  a%d: &a%d {<<: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", "))
	}
	for _, tc := range []struct {
		name, config, problem string
	}{
		{"unknown top-level key", good + "routnig: {}\n", `config.yaml:7: routnig: unknown key; did you mean "routing"?`},
		{"unknown key in a rule's match", strings.Replace(good, "text:", "txt:", 1), `config.yaml:6: routing.rules[0].match.txt: unknown key; did you mean "text"?`},
		{"unknown key in server", "server:\n  api_tokne: x\n" + good, `config.yaml:2: server.api_tokne: unknown key; did you mean "api_token"?`},
		{"wrong type", good + "workers: many\n", `config.yaml:7: workers: want an integer, got "many"`},
		{"duplicate key", good + "routing: {}\n", `config.yaml:7: routing: duplicate key (first on line 1)`},
		{"bad regex", strings.Replace(good, "text: deploy", "text: \"deploy(\"", 1), `config.yaml:6: routing.rules[0].match.text: bad regular expression "deploy(": missing closing )`},
		{"bad duration", good + "dedup_window: forever\n", `config.yaml:7: dedup_window: bad duration "forever"`},
		{"unknown agent", strings.Replace(good, "agent: ops", "agent: tirage", 1), `config.yaml:4: routing.rules[0].agent: unknown agent "tirage"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(file, []byte(tc.config), 0o600))
			r := run(t, dir, p.env(), "config", "reload")
			require.Equal(t, 2, r.code, r.stderr)
			require.True(t, strings.HasPrefix(r.stderr, "switchyard: config reload refused, config.yaml stays in effect:\n"), r.stderr)
			require.Contains(t, r.stderr, tc.problem)
			require.Equal(t, "0", p.metric(t, "switchyard_config_last_reload_successful"))
		})
	}

	// A file that does not parse or is too large to read through, or
	// whose server section, token or data directory is wrong, hides the
	// token itself: the CLI says so, with the problem,
	// and exits 2 as for any mistake in the config.
	for config, problem := range map[string]string{
		good + "server: [\n":                "config.yaml:7: did not find expected node content",
		good + "server: [a]\n":              "config.yaml:7: server: want a mapping, got a list",
		good + "server: {api_token: [a]}\n": "config.yaml:7: server.api_token: want a string, got a list",
		good + "data_dir: \"\"\n":           "config.yaml:7: data_dir: must not be empty",
	} {
		require.NoError(t, os.WriteFile(file, []byte(config), 0o600))
		r := run(t, dir, p.env(), "config", "reload")
		require.Equal(t, 2, r.code, r.stderr)
		require.Equal(t, "switchyard: missing or wrong bearer token (HTTP 401); the API token is looked for in a config with problems:\n"+
			problem+"\n", r.stderr)
	}

	// The config before them all stayed in effect, and a fixed one loads.
	require.NoError(t, os.WriteFile(file, []byte(good), 0o600))
	r := run(t, dir, p.env(), "send", "--thread", "t1", "deploy web")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `→ ops (rule "deploys" (priority 0))`)
	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(good, "agent: ops", "agent: coder", 1)), 0o600))
	r = run(t, dir, p.env(), "config", "reload")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "config.yaml reloaded: routing.rules changed\n", r.stdout)
}
