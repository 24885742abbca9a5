package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// auditRecord is what `audit --json` prints of a record.
type auditRecord struct {
	Decision, Tool, Agent, Profile, Rule, Reason string
	Requester                                    *struct{ Source, ID, Permission string }
	Ceilings                                     []struct{ Profile, Reason string }
}

func denials(t *testing.T, dir string, env []string) []auditRecord {
	t.Helper()
	r := run(t, dir, env, "audit", "--decision", "deny", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var page struct{ Items []auditRecord }
	if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || page.Items == nil {
		var list []auditRecord
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &list), r.stdout)
		return list
	}
	return page.Items
}

func TestAReadOnlyReviewerCannotWriteThroughCoder(t *testing.T) {
	fake := &fakeOpenAI{byAgent: map[string][]toolStep{
		"reviewer": {{"agent_coder", `{"task":"write notes.txt saying the review is done"}`}},
		"coder":    {{"write_file", `{"path":"notes.txt","content":"reviewed"}`}},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf("models:\n  default:\n    provider: openai\n    base_url: %s/v1\n    model: fake\n", srv.URL)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	p := serve(t, dir, freeAddr(t))

	r := run(t, dir, p.env(), "send", "--wait", "--user", "ana", "--thread", "review", "@reviewer review and note it")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, `denied by the ceiling \"read-only\" (called by @reviewer, read-only)`)
	written, _ := filepath.Glob(filepath.Join(dir, "data", "workspaces", "*", "notes.txt"))
	require.Empty(t, written, "coder wrote nothing")

	recs := denials(t, dir, p.env())
	require.Len(t, recs, 1)
	rec := recs[0]
	require.Equal(t, "write_file", rec.Tool)
	require.Equal(t, "coder", rec.Agent)
	require.Equal(t, "contributor", rec.Profile)
	require.Equal(t, "ceiling:read-only/permission:write", rec.Rule)
	require.NotNil(t, rec.Requester)
	require.Equal(t, "local", rec.Requester.Source)
	require.Equal(t, "admin", rec.Requester.ID, "the requester is the API token")
	require.Equal(t, []struct{ Profile, Reason string }{
		{"ops", "requested by @ana (token admin) on the local console"},
		{"read-only", "called by @reviewer, read-only"},
	}, rec.Ceilings)
}

// githubAPI is a fake of the GitHub REST API calls the daemon makes for a
// work item, spoken at the wire: an installation token, a collaborator's
// permission, comments and reactions.
type githubAPI struct {
	mu       sync.Mutex
	perms    map[string]string // "owner/repo/login" → permission
	comments map[int64]string
	asked    []string
}

func (g *githubAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, r.Method+" "+r.URL.Path)
	w.Header().Set("Content-Type", "application/json")
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/access_tokens"):
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"token":"ghs_e2eInstallationToken","expires_at":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	case r.Method == http.MethodGet && len(parts) == 4 && parts[0] == "repos" && parts[3] == "installation":
		fmt.Fprintf(w, `{"id":1,"account":{"login":%q}}`, parts[1])
	case len(parts) == 6 && parts[3] == "collaborators" && parts[5] == "permission":
		perm, ok := g.perms[parts[1]+"/"+parts[2]+"/"+parts[4]]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"message":"Not Found"}`)
			return
		}
		fmt.Fprintf(w, `{"permission":%q,"role_name":%q,"user":{"login":%q}}`, perm, perm, parts[4])
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/comments"):
		var c struct{ Body string }
		_ = json.Unmarshal(body, &c)
		id := int64(len(g.comments) + 100)
		g.comments[id] = c.Body
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d,"body":%q}`, id, c.Body)
	case r.Method == http.MethodPatch && len(parts) == 6 && parts[3] == "issues" && parts[4] == "comments":
		var c struct{ Body string }
		_ = json.Unmarshal(body, &c)
		var id int64
		fmt.Sscan(parts[5], &id)
		g.comments[id] = c.Body
		fmt.Fprintf(w, `{"id":%d,"body":%q}`, id, c.Body)
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/comments"):
		fmt.Fprint(w, `[]`)
	case strings.HasSuffix(r.URL.Path, "/reactions"):
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":1,"content":"eyes"}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message":"Not Found"}`)
	}
}

func (g *githubAPI) commentText() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var b strings.Builder
	for _, c := range g.comments {
		b.WriteString(c + "\n")
	}
	return b.String()
}

func TestAGitHubReaderGetsReadOnlyEvenFromCoder(t *testing.T) {
	fake := &fakeOpenAI{byAgent: map[string][]toolStep{
		"coder": {{"write_file", `{"path":"fix.go","content":"package fix"}`}},
	}}
	model := httptest.NewServer(fake)
	defer model.Close()
	gh := &githubAPI{perms: map[string]string{"acme/app/stranger": "read"}, comments: map[int64]string{}}
	api := httptest.NewServer(gh)
	defer api.Close()

	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "app.pem"),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))
	cfg := fmt.Sprintf(`models:
  default:
    provider: openai
    base_url: %s/v1
    model: fake
github:
  app_id: 1
  app_slug: switchyard
  private_key_file: ./app.pem
  webhook_secret: e2e-secret
  api_url: %s/
routing:
  rules:
    - name: bugs
      agent: coder
      match:
        labels: [bug]
`, model.URL, api.URL)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	addr := freeAddr(t)
	p := serve(t, dir, addr)

	// Someone with read access labels an issue: the rule routes it to coder,
	// and the run looks up who asked.
	payload := []byte(`{"action":"labeled","label":{"name":"bug"},
		"issue":{"number":7,"title":"It crashes","body":"Please fix.","labels":[{"name":"bug"}],"user":{"login":"stranger","type":"User"}},
		"repository":{"name":"app","full_name":"acme/app","owner":{"login":"acme"}},
		"sender":{"login":"stranger","type":"User"},"installation":{"id":1}}`)
	require.Equal(t, http.StatusAccepted, deliver(t, addr, "issues", "e2e-labeled-1", payload))

	var status string
	require.Eventually(t, func() bool {
		r := run(t, dir, p.env(), "workitems", "show", "wi_1", "--json")
		var wi struct{ Status string }
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &wi) != nil {
			return false
		}
		status = wi.Status
		return status == "done" || status == "failed"
	}, 30*time.Second, 200*time.Millisecond)
	require.Equal(t, "done", status)
	written, _ := filepath.Glob(filepath.Join(dir, "data", "workspaces", "*", "fix.go"))
	require.Empty(t, written, "coder wrote nothing for a reader")

	recs := denials(t, dir, p.env())
	require.Len(t, recs, 1)
	require.Equal(t, "write_file", recs[0].Tool)
	require.Equal(t, "coder", recs[0].Agent)
	require.Equal(t, "ceiling:read-only/permission:write", recs[0].Rule)
	require.Equal(t, "stranger", recs[0].Requester.ID)
	require.Equal(t, "read", recs[0].Requester.Permission, "looked up at run start through the permission API")
	require.Equal(t, []struct{ Profile, Reason string }{{"read-only", "requested by @stranger, read access"}}, recs[0].Ceilings)

	// The thread's status comment and explain both say why.
	require.Eventually(t, func() bool {
		return strings.Contains(gh.commentText(), "rights: read-only: requested by @stranger, read access")
	}, 15*time.Second, 100*time.Millisecond, "status comments: %s", gh.commentText())
	r := run(t, dir, p.env(), "explain", "--work-item", "wi_1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `now:  coder (rule "bugs" (priority 0)); rights read-only: requested by @stranger, read access`)
}
