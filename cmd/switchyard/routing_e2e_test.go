package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// githubConfig is a config with GitHub connected: its API is never asked,
// because nothing in these tests needs a permission or a file list.
func githubConfig(t *testing.T, dir, rules string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "app.pem"), pemKey, 0o600))
	cfg := `github:
  app_id: 1
  app_slug: switchyard
  private_key_file: ./app.pem
  webhook_secret: e2e-secret
  api_url: http://127.0.0.1:1/
routing:
` + rules
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
}

// signGitHub sets the headers of a GitHub delivery, signed with the
// tests' webhook secret.
func signGitHub(req *http.Request, event, delivery string, payload []byte) {
	mac := hmac.New(sha256.New, []byte("e2e-secret"))
	mac.Write(payload)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
}

// deliver posts a signed GitHub webhook delivery and returns the status.
func deliver(t *testing.T, addr, event, delivery string, payload []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/webhooks/github", bytes.NewReader(payload))
	require.NoError(t, err)
	signGitHub(req, event, delivery, payload)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// "Why didn't it run?" for GitHub: explain agrees with the webhook, and a
// stored delivery is explained again against the config in effect now.
func TestExplainAnswersWhyAGitHubEventDidNotRun(t *testing.T) {
	dir := t.TempDir()
	githubConfig(t, dir, "  default_agent: triage\n")
	payload, err := os.ReadFile(filepath.Join("..", "..", "testdata", "github", "pull_request", "opened.payload.json"))
	require.NoError(t, err)

	// Offline, from the config alone: no rule matches, so no work item.
	r := run(t, dir, nil, "explain", "--source", "github", "--kind", "github.pull_request.opened", "--repo", "Codertocat/Hello-World")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "no work item (no_route): no mention, command or rule matched\n", r.stdout)

	// The webhook decides the same.
	addr := freeAddr(t)
	p := serve(t, dir, addr)
	server := "--server=http://" + addr
	require.Equal(t, http.StatusAccepted, deliver(t, addr, "pull_request", "e2e-delivery-1", payload))
	r = run(t, dir, nil, "workitems", "list", server)
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, "Codertocat", "no work item was made")
	r = run(t, dir, nil, "ingress", server, "--reason", "no_route")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "in_1")
	require.Contains(t, r.stdout, "e2e-delivery-1")
	require.Contains(t, r.stdout, "no mention, command or rule matched")

	r = run(t, dir, nil, "explain", server, "--delivery", "e2e-delivery-1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "github github.pull_request.opened (delivery e2e-delivery-1) in github:Codertocat/Hello-World#2\n"+
		"then: in_1 → no work item (no_route): no mention, command or rule matched\n"+
		"now:  no work item (no_route): no mention, command or rule matched\n"+
		"The config in effect now decides the same.\n", r.stdout)

	// A rule for pull requests is added; the daemon starts with it, and the
	// stored delivery is decided otherwise now.
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait())
	require.Equal(t, 1, strings.Count(p.log.String(), "no model configured"), "said once: %s", p.log)
	githubConfig(t, dir, `  default_agent: triage
  rules:
    - name: review-prs
      priority: 10
      agent: reviewer
      match:
        kinds: ["github.pull_request.opened"]
`)
	serve(t, dir, addr)
	r = run(t, dir, nil, "explain", server, "--delivery", "e2e-delivery-1", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Equal(t, true, rep["differs"])
	require.Equal(t, map[string]any{"work_item": false, "agent": "", "kind": "", "reason": "no mention, command or rule matched",
		"rule": "", "ingress": "no_route"}, rep["then"])
	now := rep["now"].(map[string]any)
	rights := now["rights"].(map[string]any)
	delete(now, "rights")
	require.Equal(t, map[string]any{"work_item": true, "agent": "reviewer", "kind": "rule", "reason": `rule "review-prs" (priority 10)`,
		"rule": "review-prs"}, now)
	// GitHub cannot be asked here: the rights say what they are without
	// the sender's permission, and that it could not be looked up.
	require.Equal(t, "read-only", rights["profile"])
	require.Contains(t, rights["reason"], "requested by @Codertocat, whose access to the repository is unknown) (looking it up failed: ")
	r = run(t, dir, nil, "explain", server, "--delivery", "e2e-delivery-1")
	require.Contains(t, r.stdout, "now:  reviewer (rule \"review-prs\" (priority 10)); rights read-only: ")
	require.Contains(t, r.stdout, "\nThe config in effect now decides otherwise.\n")

	// A work item is explained again from its id.
	r = run(t, dir, nil, "send", server, "--thread", "t1", "@coder hello")
	require.Equal(t, 0, r.code, r.stderr)
	r = run(t, dir, nil, "explain", server, "--work-item", "wi_1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "then: wi_1 → coder (mention @coder)\nnow:  coder (mention @coder); rights contributor: coder's own profile, within ops (requested by @local (token admin) on the local console)\n")

	r = run(t, dir, nil, "explain", server, "--delivery", "no-such-delivery")
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, `no delivery "no-such-delivery"`)
	r = run(t, dir, nil, "explain", server, "--delivery", "x", "--text", "hi")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "--text describes an event")
}

// Lists come a page at a time, say how to get the next, and never stop
// without saying so.
func TestListsPageWithACursor(t *testing.T) {
	dir := t.TempDir()
	p := serve(t, dir, freeAddr(t))
	for i := range 5 {
		r := run(t, dir, p.env(), "send", "--thread", "pages", fmt.Sprintf("message %d", i))
		require.Equal(t, 0, r.code, r.stderr)
	}

	var seen []string
	args := []string{"workitems", "list", "--thread", "pages", "--limit", "2"}
	for page := 0; ; page++ {
		require.Less(t, page, 5)
		r := run(t, dir, p.env(), args...)
		require.Equal(t, 0, r.code, r.stderr)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")[1:] // past the header
		for _, l := range lines {
			seen = append(seen, strings.Fields(l)[0])
		}
		if r.stderr == "" {
			require.Len(t, lines, 1, "the last page holds the rest")
			break
		}
		require.Len(t, lines, 2)
		more, ok := strings.CutPrefix(strings.TrimSpace(r.stderr), "More: ")
		require.True(t, ok, r.stderr)
		next := strings.Fields(more)
		require.Equal(t, "switchyard", next[0])
		require.Contains(t, more, "--limit 2 --thread pages --cursor ")
		args = next[1:]
	}
	require.Equal(t, []string{"wi_5", "wi_4", "wi_3", "wi_2", "wi_1"}, seen)

	// --json prints a JSON array; the next page's command is on stderr.
	r := run(t, dir, p.env(), "workitems", "list", "--limit", "3", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var first []struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &first))
	require.Len(t, first, 3)
	cursor := nextCursor(t, r.stderr)
	r = run(t, dir, p.env(), "workitems", "list", "--limit", "3", "--json", "--cursor", cursor)
	require.Equal(t, 0, r.code, r.stderr)
	var last []struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &last))
	require.Equal(t, []struct{ ID string }{{"wi_2"}, {"wi_1"}}, last)
	require.Empty(t, r.stderr, "the last page has no cursor")
	r = run(t, dir, p.env(), "workitems", "list", "--thread", "nowhere", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, "[]", r.stdout, "an empty list is an empty array")

	r = run(t, dir, p.env(), "workitems", "list", "--cursor", "garbage")
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, `cursor "garbage" is not one this listing gave out`)

	r = run(t, dir, p.env(), "ingress")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "ID  TIME  KIND  DELIVERY  ACTOR  REASON  DETAIL\n", r.stdout, "console messages always make work items")
	r = run(t, dir, p.env(), "audit", "--limit", "1")
	require.Equal(t, 0, r.code, r.stderr)
}

// nextCursor is the cursor of the next page a listing's stderr names
// ("More: switchyard … --cursor C").
func nextCursor(t *testing.T, stderr string) string {
	t.Helper()
	more, ok := strings.CutPrefix(strings.TrimSpace(stderr), "More: ")
	require.True(t, ok, "no next page named: %q", stderr)
	f := strings.Fields(more)
	require.GreaterOrEqual(t, len(f), 2)
	require.Equal(t, "--cursor", f[len(f)-2], more)
	return f[len(f)-1]
}
