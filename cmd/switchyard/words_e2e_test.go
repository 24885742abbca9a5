package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Messages a person reads say each thing once, in words, without Go's
// error chains.
func TestMessagesSayWhatIsWrongOnce(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	r := run(t, dir, append(hermeticEnv(), "SWITCHYARD_SERVER=http://"+addr, "SWITCHYARD_API_TOKEN=t0123456789abcdef"), "send", "hi")
	require.Equal(t, 1, r.code)
	require.Equal(t, "switchyard: cannot reach the daemon at http://"+addr+": connection refused (is `switchyard serve` running?)\n", r.stderr)

	r = run(t, dir, hermeticEnv(), "config", "check")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "<defaults>: ok (0 rules, 0 schedules; agents: builder, coder, docs, ops, reviewer, triage; models: none)\n", r.stdout)
	require.Equal(t, "warning: no model configured: ANTHROPIC_API_KEY and OPENAI_API_KEY are unset and no Ollama answered at "+
		"http://127.0.0.1:1 (connection refused); agents cannot run until a model is configured\n", r.stderr)

	r = run(t, dir, append(hermeticEnv(), "ANTHROPIC_API_KEY=sk-ant-test", "ANTHROPIC_MODEL=claude-test"), "config", "check")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "<defaults>: ok (0 rules, 0 schedules; agents: builder, coder, docs, ops, reviewer, triage; models: default)\n"+
		"ANTHROPIC_API_KEY is set: the default model is anthropic claude-test\n", r.stdout)
}

// An answer of the wrong shape (another program on the daemon's port, or
// a daemon of another version) is said in JSON's words, never Go's.
func TestAnAnswerOfTheWrongShapeIsSaidInWords(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"work_item_id":42,"thread":["local","x"]}`)
	}))
	t.Cleanup(srv.Close)
	r := run(t, t.TempDir(), append(hermeticEnv(), "SWITCHYARD_SERVER="+srv.URL, "SWITCHYARD_API_TOKEN=t0123456789abcdef"), "send", "hi")
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, "work_item_id is a number where a string belongs")
	for _, goWords := range []string{"int", "[]", "Go ", "struct", "unmarshal"} {
		require.NotContains(t, strings.ReplaceAll(r.stderr, "integer", ""), goWords)
	}
}

// A short API token is warned about once, naming where it was set: the
// config's is not said to come from $SWITCHYARD_API_TOKEN, which is unset.
func TestAShortAPITokenIsWarnedAboutOnceWhereItWasSet(t *testing.T) {
	const warning = "API token shorter than 16 characters"
	for _, tc := range []struct {
		name, config, env, setting string
	}{
		{name: "in the config", config: "server:\n  api_token: hunter2hunter\n", setting: "server.api_token"},
		{name: "from the environment", env: "SWITCHYARD_API_TOKEN=hunter2hunter", setting: "$SWITCHYARD_API_TOKEN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.config != "" {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(tc.config), 0o600))
			}
			env := hermeticEnv()
			if tc.env != "" {
				env = append(env, tc.env)
			}
			p := serveEnv(t, dir, freeAddr(t), env)
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
			require.NoError(t, p.wait())
			log := p.log.String()
			require.Equal(t, 1, strings.Count(log, warning), log)
			require.Contains(t, log, "setting="+tc.setting)
			require.NotContains(t, log, "hunter2hunter")
		})
	}
}
