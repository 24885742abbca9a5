package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// "Why didn't it run?" has an answer for every reason GitHub intake makes
// no work item, from the config alone, and a permission the person asking
// knows is taken as the fact it is rather than named as a condition.
func TestExplainNamesEveryReasonAGitHubEventMakesNothing(t *testing.T) {
	dir := t.TempDir()
	githubConfig(t, dir, "  default_agent: triage\n")
	gh := []string{"explain", "--source", "github", "--repo", "acme/api"}
	for _, tc := range []struct {
		name    string
		args    []string
		ingress string
		says    string
	}{
		{"no rule for a pull request", []string{"--kind", "github.pull_request.opened", "--actor", "ana"},
			"no_route", "no mention, command or rule matched"},
		{"a person is mentioned, not an agent", []string{"--actor", "ana", "--text", "thanks @bob"},
			"no_route", `no agent "@bob"`},
		{"a request only quoted", []string{"--actor", "ana", "--text", "> @coder fix it\n\nsame here"},
			"no_route", "no mention, command or rule matched"},
		{"a request only in code", []string{"--actor", "ana", "--text", "write `@coder fix it`"},
			"no_route", "no mention, command or rule matched"},
		{"a request in an HTML comment", []string{"--actor", "ana", "--text", "<!-- @coder fix it -->"},
			"no_route", "no mention, command or rule matched"},
		{"a bot", []string{"--actor", "dependabot[bot]", "--bot", "--text", "@coder fix it"},
			"bot_actor", "sent by bot dependabot[bot], not in github.allow_bots"},
		{"Switchyard itself", []string{"--actor", "switchyard[bot]", "--bot", "--text", "@coder fix it"},
			"bot_actor", "sent by Switchyard itself"},
		{"an edit that mentions a person under a command", []string{"--kind", "github.issue_comment.edited", "--actor", "ana", "--text", "/deploy prod\n\ncc @bob"},
			"edited", "the edit adds no mention of an agent"},
		{"a deleted comment", []string{"--kind", "github.issue_comment.deleted", "--actor", "ana", "--text", "@coder fix it"},
			"deleted", "github.issue_comment.deleted is a deletion"},
		{"an event not acted on", []string{"--kind", "github.push", "--actor", "ana"},
			"unsupported", "github.push is not acted on"},
		{"a reader's mention", []string{"--actor", "ana", "--permission", "read", "--text", "@coder fix it"},
			"unauthorized", "ana has read permission on acme/api, write is required"},
		{"a triager's command", []string{"--actor", "ana", "--permission", "triage", "--text", "/deploy prod"},
			"unauthorized", "ana has triage permission on acme/api, write is required"},
		{"an approval", []string{"--text", "/approve ap_1"},
			"approval", "the author asks to approve ap_1; the decision is in the audit log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, dir, nil, append(append(append([]string{}, gh...), tc.args...), "--json")...)
			require.Equal(t, 0, r.code, r.stderr)
			var got struct {
				WorkItem bool   `json:"work_item"`
				Ingress  string `json:"ingress"`
				Reason   string `json:"reason"`
				Needs    string `json:"needs"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
			require.False(t, got.WorkItem, r.stdout)
			require.Equal(t, tc.ingress, got.Ingress, r.stdout)
			require.Contains(t, got.Reason, tc.says)
			require.Empty(t, got.Needs, "nothing will run, on no condition")

			r = run(t, dir, nil, append(append([]string{}, gh...), tc.args...)...)
			require.Equal(t, 0, r.code, r.stderr)
			require.True(t, strings.HasPrefix(r.stdout, "no work item ("+tc.ingress+"): "), r.stdout)
			require.NotContains(t, r.stdout, "@ asks", "no empty name")
		})
	}

	// A permission that is enough is no condition either.
	r := run(t, dir, nil, append(gh, "--actor", "ana", "--permission", "maintain", "--text", "@coder fix it", "--json")...)
	require.Equal(t, 0, r.code, r.stderr)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Equal(t, true, got["work_item"])
	require.Equal(t, "coder", got["agent"])
	require.NotContains(t, got, "needs")
}

// A stored delivery is explained as it was decided then and as the config
// SIGHUP put in effect decides it now; a config SIGHUP cannot load (bad
// YAML, an unknown key, a bad regular expression, a rule name twice) is
// logged at its file:line and changes nothing, and a burst of SIGHUPs
// leaves the daemon serving the last good config.
func TestExplainADeliveryAgainAfterSIGHUP(t *testing.T) {
	dir := t.TempDir()
	githubConfig(t, dir, "  default_agent: triage\n")
	good := mustRead(t, filepath.Join(dir, "config.yaml"))
	payload, err := os.ReadFile(filepath.Join("..", "..", "testdata", "github", "pull_request", "opened.payload.json"))
	require.NoError(t, err)
	addr := freeAddr(t)
	p := serve(t, dir, addr)
	server := "--server=http://" + addr
	require.Equal(t, http.StatusAccepted, deliver(t, addr, "pull_request", "hup-delivery-1", payload))
	// The token from the daemon's data directory: the CLI reads the config
	// for it, and some of the configs below are not YAML.
	env := []string{"SWITCHYARD_API_TOKEN=" + p.token(t)}

	explain := func() map[string]any {
		t.Helper()
		r := run(t, dir, env, "explain", server, "--delivery", "hup-delivery-1", "--json")
		require.Equal(t, 0, r.code, r.stderr)
		var rep map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
		return rep
	}
	rep := explain()
	require.Equal(t, false, rep["differs"])

	withRule := good + `  rules:
    - name: review-prs
      agent: reviewer
      match:
        kinds: ["github.pull_request.opened"]
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(withRule), 0o600))
	p.hup(t, true)
	rep = explain()
	require.Equal(t, true, rep["differs"])
	require.Equal(t, false, rep["then"].(map[string]any)["work_item"])
	require.Equal(t, "no_route", rep["then"].(map[string]any)["ingress"])
	now := rep["now"].(map[string]any)
	require.Equal(t, true, now["work_item"])
	require.Equal(t, "reviewer", now["agent"])
	require.Equal(t, "review-prs", now["rule"])

	var problems []string // logged, read once the daemon has stopped
	for _, tc := range []struct{ name, tail, problem string }{
		{"bad YAML", "  rules: [\n", "config.yaml:"},
		{"an unknown key", "  rulez: []\n", `config.yaml:9: routing.rulez: unknown key`},
		{"a bad regular expression", "  rules:\n    - name: r\n      agent: coder\n      match:\n        text: \"(oops\"\n",
			`config.yaml:13: routing.rules[0].match.text: bad regular expression`},
		{"a rule name twice", "  rules:\n    - name: r\n      agent: coder\n    - name: r\n      agent: ops\n",
			`config.yaml:12: routing.rules[1].name: duplicate rule name \"r\"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(good+tc.tail), 0o600))
			p.hup(t, false)
			problems = append(problems, tc.problem)
			rep := explain()
			require.Equal(t, "reviewer", rep["now"].(map[string]any)["agent"], "the config in effect stays")
			// Made good again, so the next case's refusal is its own.
			require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(withRule), 0o600))
			p.hup(t, true)
		})
	}

	// A burst: every signal is taken, the daemon keeps serving, and the
	// last file read is the one in effect.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(good), 0o600))
	for range 10 {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	}
	require.Eventually(t, func() bool { return explain()["differs"] == false }, 15*time.Second, 20*time.Millisecond)
	select {
	case <-p.done:
		t.Fatalf("a burst of SIGHUPs ended the daemon: %v", p.err)
	default:
	}
	require.Equal(t, "1", p.metric(t, "switchyard_config_last_reload_successful"))

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait())
	for _, problem := range problems {
		require.Contains(t, p.log.String(), `level=ERROR msg="config problem: `+problem)
	}
}

// A Slack message described without its author is a person's: explain
// decides it as intake would, and when slack.allowed_users is set, says the
// decision rests on the author being in it, rather than refusing it as a
// message nobody wrote.
func TestExplainASlackMessageWithoutItsAuthor(t *testing.T) {
	dir := t.TempDir()
	cfg := "slack:\n  mode: http\n  bot_token: xoxb-e2e\n  signing_secret: e2e\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	r := run(t, dir, nil, "explain", "--source", "slack", "--text", "@coder fix the login test")
	require.Equal(t, 0, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "coder (mention @coder); rights "), r.stdout)
	r = run(t, dir, nil, "explain", "--source", "slack", "--text", "> @coder fix the login test")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, "mention @coder", "a quote asks nothing")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg+"  allowed_users: [UANA01]\n"), 0o600))
	r = run(t, dir, nil, "explain", "--source", "slack", "--text", "@coder fix the login test", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Equal(t, true, got["work_item"])
	require.Equal(t, "coder", got["agent"])
	require.Equal(t, "the author is in slack.allowed_users", got["needs"])
	r = run(t, dir, nil, "explain", "--source", "slack", "--actor", "UBOB02", "--text", "@coder fix the login test")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "no work item (not_allowed): user or channel outside slack.allowed_users / allowed_channels\n", r.stdout)
	r = run(t, dir, nil, "explain", "--source", "slack", "--actor", "UANA01", "--text", "@coder fix the login test")
	require.Equal(t, 0, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "coder (mention @coder); rights "), r.stdout)
}
