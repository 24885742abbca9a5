package main

import (
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A rule made through the API is in the daemon's listing with where it
// comes from and who made it, beside the config's with its file and line,
// and explain --daemon decides by it.
func TestStoredRulesInTheCLI(t *testing.T) {
	srv := httptest.NewServer(&fakeOpenAI{quick: true})
	defer srv.Close()
	dir := t.TempDir()
	modelConfig(t, dir, srv.URL)
	f, err := os.OpenFile(filepath.Join(dir, "config.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fmt.Fprint(f, "routing:\n  rules:\n    - name: bugs\n      agent: coder\n      match:\n        labels: [bug]\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	p := serve(t, dir, freeAddr(t))
	env := p.env()

	resp, err := p.post(p.token(t), "/api/v1/rules", `{"name":"readme","priority":7,"agent":"docs","match":{"text":"(?i)readme"}}`)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 201, resp.StatusCode, string(body))

	r := run(t, dir, env, "rules", "list", "--daemon")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `7\s+readme\s+docs\s+stored:rule_1 by admin\s+text /\(\?i\)readme/`, r.stdout)
	require.Regexp(t, `0\s+bugs\s+coder\s+config\.yaml:8\s+labels bug`, r.stdout)

	r = run(t, dir, env, "explain", "--daemon", "--text", "fix the README please")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `docs (rule "readme" (priority 7, stored:rule_1))`)

	// Offline, from the config file alone, the config's rule is listed
	// with its place.
	r = run(t, dir, nil, "rules", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `0\s+bugs\s+coder\s+config\.yaml:8\s+labels bug`, r.stdout)
	require.NotContains(t, r.stdout, "readme")
	require.Contains(t, r.stderr, "switchyard rules list --daemon", "it says where the stored rules are")
}
