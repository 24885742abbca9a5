package daemon_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
	"github.com/switchyard/switchyard/integrations/local"
)

// configFile is a config file a test rewrites between loads.
type configFile struct {
	t    *testing.T
	path string
}

func newConfigFile(t *testing.T, body string) *configFile {
	f := &configFile{t: t, path: filepath.Join(t.TempDir(), "config.yaml")}
	f.write(body)
	return f
}

func (f *configFile) write(body string) {
	require.NoError(f.t, os.WriteFile(f.path, []byte(body), 0o600))
}

func (f *configFile) load(ctx context.Context) (*daemon.Setup, error) {
	return daemon.Load(ctx, daemon.LoadOptions{Path: f.path, Getenv: noModelEnv})
}

func (f *configFile) mustLoad() *daemon.Setup {
	s, err := f.load(context.Background())
	require.NoError(f.t, err)
	return s
}

// ruleTo is a config whose one rule sends "deploy" to agent.
func ruleTo(agent string) string {
	return fmt.Sprintf("routing:\n  rules:\n    - name: deploys\n      agent: %s\n      match:\n        text: deploy\n", agent)
}

// recorder is a subscriber that notes what it was asked, and refuses when
// told to.
type recorder struct {
	name    string
	refuse  error
	log     *[]string
	applied *daemon.Setup
}

func (r *recorder) Prepare(_ context.Context, _, next *daemon.Setup) (func(), error) {
	*r.log = append(*r.log, "prepare "+r.name)
	if r.refuse != nil {
		return nil, r.refuse
	}
	return func() {
		*r.log = append(*r.log, "commit "+r.name)
		r.applied = next
	}, nil
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestCoordinatorSwapsAllSubscribersOrNone(t *testing.T) {
	f := newConfigFile(t, ruleTo("ops"))
	initial := f.mustLoad()
	reg := prometheus.NewRegistry()
	c := daemon.NewCoordinator(initial, f.load, reg, nil)
	var calls []string
	a := &recorder{name: "a", log: &calls}
	b := &recorder{name: "b", log: &calls, refuse: errors.New("b cannot take it")}
	z := &recorder{name: "z", log: &calls}
	c.Subscribe(a, b, z)
	require.Equal(t, 1.0, gauge(t, reg, "switchyard_config_last_reload_successful"), "the start is a successful load")
	started := gauge(t, reg, "switchyard_config_last_reload_success_timestamp_seconds")
	require.Positive(t, started)

	// One subscriber refuses: nobody commits, the config in effect stays.
	f.write(ruleTo("coder"))
	_, err := c.Reload(context.Background())
	var re *daemon.ReloadError
	require.ErrorAs(t, err, &re)
	require.ErrorContains(t, err, "b cannot take it")
	require.Equal(t, []string{"prepare a", "prepare b"}, calls, "nothing is committed, z is not even asked")
	require.Same(t, initial, c.Current())
	require.Nil(t, a.applied)
	for _, name := range []string{"switchyard_config_last_reload_successful", "switchyard_config_last_reload_success"} {
		require.Equal(t, 0.0, gauge(t, reg, name), name)
	}
	require.Equal(t, started, gauge(t, reg, "switchyard_config_last_reload_success_timestamp_seconds"))

	// All of them take it: all commit, in order, and it is in effect.
	calls = nil
	b.refuse = nil
	res, err := c.Reload(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"prepare a", "prepare b", "prepare z", "commit a", "commit b", "commit z"}, calls)
	require.Equal(t, daemon.ReloadResult{Config: f.path, Changed: []string{"routing.rules"}, RestartRequired: []string{}}, res)
	cur := c.Current()
	require.Same(t, cur, a.applied)
	require.Same(t, cur, z.applied)
	require.Equal(t, "coder", cur.Router.Route(&bot.Event{Source: bot.SourceLocal, Text: "deploy it"}).Agent)
	require.Equal(t, 1.0, gauge(t, reg, "switchyard_config_last_reload_successful"))
	require.Equal(t, 1.0, gauge(t, reg, "switchyard_config_last_reload_success"))
	require.GreaterOrEqual(t, gauge(t, reg, "switchyard_config_last_reload_success_timestamp_seconds"), started)
}

func TestReloadOfABrokenConfigKeepsTheOldOneAndSaysWhereItIsWrong(t *testing.T) {
	f := newConfigFile(t, ruleTo("ops"))
	initial := f.mustLoad()
	var logs bytes.Buffer
	c := daemon.NewCoordinator(initial, f.load, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	var calls []string
	c.Subscribe(&recorder{name: "a", log: &calls})

	f.write(ruleTo("nobody") + "schedules:\n  - {name: nightly, cron: \"@daily\", agent: nightwatch, text: look}\n")
	_, err := c.Reload(context.Background())
	require.Error(t, err)
	require.Empty(t, calls, "a config that fails its checks reaches no subscriber")
	require.Same(t, initial, c.Current())
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err), "the API answers 400 and the CLI exits 2")
	want := f.path + ":4: routing.rules[0].agent: unknown agent \"nobody\"\n" + f.path + ":8: schedules[0].agent: unknown agent \"nightwatch\""
	require.Equal(t, "config reload refused, "+f.path+" stays in effect:\n"+want, err.Error())
	require.Equal(t, err.Error(), bot.ErrorMessage(err), "every problem reaches the API's answer")
	for _, line := range strings.Split(want, "\n") {
		require.Contains(t, logs.String(), `level=ERROR msg="config problem: `+strings.ReplaceAll(line, `"`, `\"`)+`"`)
	}

	// A file that is gone is refused the same way.
	require.NoError(t, os.Remove(f.path))
	_, err = c.Reload(context.Background())
	require.ErrorContains(t, err, "no such file or directory")
	require.Same(t, initial, c.Current())
}

func TestReloadKeepsWhatOnlyARestartChanges(t *testing.T) {
	base := `server:
  listen: 127.0.0.1:8080
  api_token: first-token-123456
data_dir: %s
workers: %d
dispatch:
  lease: %s
github:
  app_id: %d
  private_key: key
  webhook_secret: hook
  allow_bots: ["%s"]
approval_timeout: %s
`
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))
	base = strings.Replace(base, "private_key: key", "private_key_file: "+keyFile, 1)
	f := newConfigFile(t, fmt.Sprintf(base, dir, 4, "30s", 1, "a[bot]", "15m"))
	initial := f.mustLoad()
	c := daemon.NewCoordinator(initial, f.load, nil, nil)

	f.write(strings.Replace(fmt.Sprintf(base, dir+"/other", 8, "1m", 2, "b[bot]", "5m"), "first-token", "second-token", 1))
	res, err := c.Reload(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"approval_timeout", "github.allow_bots"}, res.Changed)
	require.Equal(t, []string{"server.api_token", "data_dir", "workers", "dispatch.lease", "github.app_id"}, res.RestartRequired)
	cur := c.Current().Config
	require.Equal(t, initial.Config.Server, cur.Server, "the values in effect are kept")
	require.Equal(t, dir, cur.DataDir)
	require.Equal(t, 4, cur.Workers)
	require.Equal(t, int64(1), cur.GitHub.AppID)
	require.Equal(t, []string{"b[bot]"}, cur.GitHub.AllowBots, "what a reload can change is changed")
	require.Equal(t, []string{"a[bot]"}, initial.Config.GitHub.AllowBots, "the config before is left as it was")
	require.NotContains(t, fmt.Sprint(res), "second-token")

	// Adding or removing a platform needs a restart too.
	f.write(fmt.Sprintf("data_dir: %s\nserver:\n  api_token: first-token-123456\n", dir))
	res, err = c.Reload(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"github"}, res.RestartRequired)
	require.NotNil(t, c.Current().Config.GitHub, "GitHub stays connected until the restart")
}

func TestLoadChecksAgentsAgainstModelsToolsAndProfiles(t *testing.T) {
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents")
	require.NoError(t, os.Mkdir(agents, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(agents, "helper.md"),
		[]byte("---\nname: helper\ndescription: Helps.\nmodel: fast\nprofile: wizard\ntools: [read_file, github_comment]\n---\nHelp.\n"), 0o600))
	f := newConfigFile(t, "agents_dir: "+agents+"\nrouting:\n  default_agent: helpr\n")
	_, err := f.load(context.Background())
	require.True(t, config.IsInvalid(err))
	file := filepath.Join(agents, "helper.md")
	require.Equal(t, f.path+`:3: routing.default_agent: unknown agent "helpr"`+"\n"+
		file+`:4: model: unknown model "fast" (configured: none; add it under models in config.yaml)`+"\n"+
		file+`:5: profile: unknown profile "wizard" (want contributor, maintainer, ops, read-only)`+"\n"+
		file+`:6: tools: unknown tool "github_comment"`, err.Error())
}

// runnerFunc is a bot.Runner written as a function.
type runnerFunc func(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error)

func (f runnerFunc) Run(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
	return f(ctx, req, p)
}

// reply waits for the reply in a local thread and returns it.
func (r *running) reply(t *testing.T, thread string) string {
	t.Helper()
	var text string
	require.Eventually(t, func() bool {
		code, body := r.do(t, "GET", "/api/v1/threads/"+thread+"/messages", "")
		require.Equal(t, 200, code)
		var msgs []local.ThreadMessage
		require.NoError(t, json.Unmarshal(body, &msgs))
		for _, m := range msgs {
			if m.Kind == "reply" {
				text = m.Text
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond)
	return text
}

func (r *running) explain(t *testing.T, text string) bot.Explanation {
	t.Helper()
	code, body := r.do(t, "POST", "/api/v1/explain", fmt.Sprintf(`{"source":"local","kind":"local.message","text":%q}`, text))
	require.Equal(t, 200, code, string(body))
	var e bot.Explanation
	require.NoError(t, json.Unmarshal(body, &e))
	return e
}

func TestReloadChangesRoutingWhileRunsUnderWayKeepTheirs(t *testing.T) {
	f := newConfigFile(t, ruleTo("ops"))
	dir := t.TempDir()
	load := func(ctx context.Context) (*daemon.Setup, error) {
		return daemon.Load(ctx, daemon.LoadOptions{Path: f.path, Getenv: noModelEnv, Override: func(c *config.Config) {
			c.DataDir, c.Server.Listen = dir, "127.0.0.1:0"
		}})
	}
	// Each configuration's runner says which one it is; runs of ops wait
	// until the test lets them finish.
	var generations atomic.Int32
	release := make(chan struct{})
	opsStarted := make(chan struct{}, 1)
	r := start(t, func(o *daemon.Options) {
		s, err := load(context.Background())
		require.NoError(t, err)
		o.Setup, o.Reload = s, load
		o.NewRunner = func(daemon.RunnerDeps) (bot.Runner, error) {
			gen := generations.Add(1)
			return runnerFunc(func(ctx context.Context, req bot.RunRequest, _ bot.Progress) (bot.RunResult, error) {
				if req.Agent == "ops" {
					opsStarted <- struct{}{}
					select {
					case <-release:
					case <-ctx.Done():
						return bot.RunResult{}, ctx.Err()
					}
				}
				return bot.RunResult{Status: bot.ResultSuccess, Reply: fmt.Sprintf("%s ran on configuration %d", req.Agent, gen)}, nil
			}), nil
		}
	})
	send := func(thread, text string) local.MessageResponse {
		code, body := r.do(t, "POST", "/api/v1/messages", fmt.Sprintf(`{"thread":%q,"text":%q}`, thread, text))
		require.Equal(t, http.StatusAccepted, code, string(body))
		var res local.MessageResponse
		require.NoError(t, json.Unmarshal(body, &res))
		return res
	}
	require.Equal(t, "ops", send("first", "deploy web").Route.Agent)
	<-opsStarted

	f.write(ruleTo("coder"))
	code, body := r.do(t, "POST", "/api/v1/config/reload", "")
	require.Equal(t, 200, code, string(body))
	require.JSONEq(t, fmt.Sprintf(`{"config":%q,"changed":["routing.rules"],"restart_required":[]}`, f.path), string(body))
	require.Equal(t, bot.Explanation{WorkItem: true, Agent: "coder", Kind: bot.RouteRule, Reason: `rule "deploys" (priority 0)`, Rule: "deploys"},
		r.explain(t, "deploy api"))
	require.Equal(t, "coder", send("second", "deploy api").Route.Agent, "the next decision uses the new config")
	require.Equal(t, "coder ran on configuration 2", r.reply(t, "second"), "the next run uses the new runner")
	close(release)
	require.Equal(t, "ops ran on configuration 1", r.reply(t, "first"), "a run under way keeps what it started with")

	// A broken config is refused with where it is wrong; the one in effect
	// stays.
	f.write(ruleTo("nobody"))
	code, body = r.do(t, "POST", "/api/v1/config/reload", "")
	require.Equal(t, 400, code)
	var e struct{ Error, Code string }
	require.NoError(t, json.Unmarshal(body, &e))
	require.Equal(t, "invalid", e.Code)
	require.Equal(t, "config reload refused, "+f.path+" stays in effect:\n"+f.path+`:4: routing.rules[0].agent: unknown agent "nobody"`, e.Error)
	require.Equal(t, "coder", r.explain(t, "deploy api").Agent)
	require.Equal(t, "0", metric(t, r, "switchyard_config_last_reload_successful"))
	require.Equal(t, "0", metric(t, r, "switchyard_config_last_reload_success"))

	f.write(ruleTo("docs"))
	code, body = r.do(t, "POST", "/api/v1/config/reload", "")
	require.Equal(t, 200, code, string(body))
	require.Equal(t, "docs", r.explain(t, "deploy api").Agent)
	require.Equal(t, "1", metric(t, r, "switchyard_config_last_reload_successful"))
	require.EqualValues(t, 3, generations.Load(), "one runner per configuration put in effect")
}

// metric reads a metric without labels from /metrics.
func metric(t *testing.T, r *running, name string) string {
	t.Helper()
	code, body := r.do(t, "GET", "/metrics", "")
	require.Equal(t, 200, code)
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(body)
	require.NotNil(t, m, "no metric %s", name)
	return string(m[1])
}

func TestReloadRebuildsTheSandboxOnlyWhenItsModeChanges(t *testing.T) {
	f := newConfigFile(t, ruleTo("ops"))
	dir := t.TempDir()
	load := func(ctx context.Context) (*daemon.Setup, error) {
		return daemon.Load(ctx, daemon.LoadOptions{Path: f.path, Getenv: noModelEnv, Override: func(c *config.Config) {
			c.DataDir, c.Server.Listen = dir, "127.0.0.1:0"
		}})
	}
	var sandboxes []*sandbox.Sandbox
	r := start(t, func(o *daemon.Options) {
		s, err := load(context.Background())
		require.NoError(t, err)
		o.Setup, o.Reload = s, load
		o.Sandbox.Bwrap = "/nonexistent/bwrap"
		o.NewRunner = func(deps daemon.RunnerDeps) (bot.Runner, error) {
			sandboxes = append(sandboxes, deps.Sandbox)
			return bot.NoRuntime{}, nil
		}
	})
	reload := func() {
		code, body := r.do(t, "POST", "/api/v1/config/reload", "")
		require.Equal(t, 200, code, string(body))
	}
	f.write(ruleTo("coder"))
	reload()
	f.write(ruleTo("coder") + "sandbox:\n  mode: none\n")
	reload()
	require.Len(t, sandboxes, 3)
	require.Same(t, sandboxes[0], sandboxes[1], "a reload that leaves the sandbox alone keeps it")
	require.Equal(t, sandbox.ModeRequired, sandboxes[1].Mode())
	require.Equal(t, sandbox.ModeNone, sandboxes[2].Mode())
}

// Agents' tools lists are checked against ToolNames, computed from the
// config without connecting anything; they are the tools the daemon
// registers.
func TestToolNamesAreTheToolsTheDaemonRegisters(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	s := setupFor(t, func(c *config.Config) {
		c.GitHub = &config.GitHub{AppID: 1, PrivateKey: bot.Secret(pemKey), WebhookSecret: "hook", AppSlug: "switchyard",
			APIURL: config.DefaultGitHubAPIURL, MinPermission: "write"}
		c.Slack = &config.Slack{Mode: config.SlackHTTP, BotToken: "xoxb-1", SigningSecret: "sign", APIURL: config.DefaultSlackAPIURL}
	})
	var registered []string
	d, err := daemon.New(t.Context(), daemon.Options{Setup: s, NewRunner: func(deps daemon.RunnerDeps) (bot.Runner, error) {
		// The core tools as the daemon's runner makes them: the
		// background task tools come with the daemon's Background.
		for _, tl := range tools.Core(tools.CoreOptions{Background: deps.Background}) {
			registered = append(registered, tl.Info().Name)
		}
		for _, tl := range deps.Tools {
			registered = append(registered, tl.Info().Name)
		}
		return bot.NoRuntime{}, nil
	}})
	require.NoError(t, err)
	require.NoError(t, d.Close())
	require.ElementsMatch(t, daemon.ToolNames(s.Config), registered)
	require.Greater(t, len(registered), len(tools.CoreNames())+10)
}
