package ui

import (
	"context"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/skills"
	"github.com/switchyard/switchyard/skills/install"
	"github.com/switchyard/switchyard/storage/bolt"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
)

// skillsEnv is a UI over a real store with the package registry, an
// installer and the audit log, as the daemon builds them, and a session
// signed in as alice.
type skillsEnv struct {
	t      *testing.T
	data   string
	store  *bolt.Store
	reg    *skills.Registry
	in     *install.Installer
	audit  *policy.Auditor
	ui     *UI
	cookie *http.Cookie
	csrf   string
}

var packagePermissions = []string{"read", "write", "exec", "push", "merge", "ci", "deploy", "secrets", "network", "admin"}

func newSkillsEnv(t *testing.T, roster Roster) *skillsEnv {
	t.Helper()
	e := &skillsEnv{t: t, data: t.TempDir()}
	e.store = bolttest.Open(t, e.data)
	redactor := bot.NewRedactor()
	load := skills.LoadOptions{Masker: redactor, Permissions: packagePermissions}
	var err error
	e.reg, err = skills.NewRegistry(t.Context(), skills.Options{Store: e.store, Masker: redactor, Permissions: packagePermissions})
	require.NoError(t, err)
	e.in, err = install.New(t.Context(), install.Options{Registry: e.reg, Dir: filepath.Join(e.data, "packages"), Load: load})
	require.NoError(t, err)
	e.audit, err = policy.NewAuditor(e.store, redactor)
	require.NoError(t, err)
	e.ui, err = New(Options{
		Admin:  admin.Options{Store: e.store, Skills: e.reg, Installer: e.in},
		Roster: roster, Redactor: redactor, Audit: e.audit, Sessions: e.store,
		Tokens: []httpapi.Token{{Name: "alice", Value: testToken}},
	})
	require.NoError(t, err)
	id, err := e.ui.sessions.start(t.Context(), tokenCredential("alice", testToken))
	require.NoError(t, err)
	sess, err := e.ui.sessions.get(t.Context(), id)
	require.NoError(t, err)
	e.cookie, e.csrf = &http.Cookie{Name: sessionCookie, Value: id}, sess.csrf
	return e
}

// get asks for a page as the signed-in person.
func (e *skillsEnv) get(path string) *httptest.ResponseRecorder {
	e.t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req.AddCookie(e.cookie)
	rec := httptest.NewRecorder()
	e.ui.Handler().ServeHTTP(rec, req)
	return rec
}

// post sends a form as the signed-in person, with the session's CSRF token
// unless withoutCSRF.
func (e *skillsEnv) post(path string, form url.Values, withoutCSRF bool) *httptest.ResponseRecorder {
	e.t.Helper()
	if !withoutCSRF {
		form.Set(csrfField, e.csrf)
	}
	req := httptest.NewRequest("POST", path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(e.cookie)
	rec := httptest.NewRecorder()
	e.ui.Handler().ServeHTTP(rec, req)
	return rec
}

// changes are the changes the audit log holds, newest first.
func (e *skillsEnv) changes() []policy.AuditRecord {
	e.t.Helper()
	recs, _, err := e.audit.List(context.Background(), policy.AuditFilter{Decision: policy.AuditChange})
	require.NoError(e.t, err)
	return recs
}

// writePackage writes a package's files into a new directory and returns it.
func writePackage(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	return dir
}

// acmeTools is a package with a skill and settings.
var acmeTools = map[string]string{
	"manifest.yaml": `name: acme-tools
version: 1.2.0
description: Acme's deploy checks.
skills:
  - name: deploy-check
    description: Check a deploy before it goes out.
    instructions: Check it.
    allowed_tools: [read_file]
    execution_protocol: [Read the deploy plan with read_file.]
config:
  type: object
  properties:
    environment: {type: string, enum: [staging, production], description: where deploys go}
    retries: {type: integer, minimum: 0}
  additionalProperties: false
`,
}

func TestLibraryListsPackagesAndSkills(t *testing.T) {
	e := newSkillsEnv(t, nil)
	rec := e.get("/admin/skills")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	body := rec.Body.String()
	for _, p := range admin.Packages(e.reg) {
		require.Contains(t, body, `data-package="`+p.Name+`"`)
	}
	for _, s := range e.reg.Skills() {
		require.Contains(t, body, `data-skill="`+s.Name+`"`)
	}
	require.Contains(t, body, "built in")
	require.NotContains(t, body, "Uninstall</button>", "built-in packages cannot be uninstalled")
}

func TestLibraryInstallsAndUninstalls(t *testing.T) {
	e := newSkillsEnv(t, nil)
	src := writePackage(t, acmeTools)

	t.Run("without the CSRF token nothing is installed", func(t *testing.T) {
		rec := e.post("/admin/skills/install", url.Values{"source": {src}}, true)
		require.Equal(t, http.StatusForbidden, rec.Code)
		require.Contains(t, rec.Body.String(), "CSRF token")
		_, ok := e.reg.Package("acme-tools")
		require.False(t, ok)
		require.Empty(t, e.changes())
	})

	for _, tc := range []struct {
		name   string
		form   url.Values
		status int
		want   string
	}{
		{"no source", url.Values{"source": {" "}}, http.StatusBadRequest, "source is required"},
		{"a source of no kind", url.Values{"source": {"ftp://example.com/x.tgz"}}, http.StatusBadRequest, "ftp://example.com/x.tgz"},
		{"a directory that is not there", url.Values{"source": {filepath.Join(e.data, "nowhere")}}, http.StatusBadRequest, "nowhere"},
		{"a bad scope to enable at", url.Values{"source": {src}, "enable": {"team:x"}}, http.StatusBadRequest, `enable: scope &#34;team:x&#34;: unknown kind`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := e.post("/admin/skills/install", tc.form, false)
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			body := rec.Body.String()
			require.Contains(t, body, `id="error"`)
			require.Contains(t, body, tc.want)
			require.Contains(t, body, `value="`+html.EscapeString(strings.TrimSpace(tc.form.Get("source")))+`"`, "the form keeps what was typed")
			_, ok := e.reg.Package("acme-tools")
			require.False(t, ok)
		})
	}
	require.Empty(t, e.changes(), "refusals change nothing")

	rec := e.post("/admin/skills/install", url.Values{"source": {src}, "enable": {"repo:acme/web, org:other"}}, false)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	body := rec.Body.String()
	require.Contains(t, body, "Installed acme-tools 1.2.0 from "+src)
	require.Contains(t, body, "Enabled at repo:acme/web, org:other.")
	require.Contains(t, body, `data-package="acme-tools"`)
	require.Contains(t, body, `data-skill="deploy-check"`)
	require.True(t, e.reg.Enabled(skills.Target{Repo: "acme/web"}, "deploy-check").Enabled, "installed and enabled in one step, as the API does")

	rec = e.post("/admin/skills/install", url.Values{"source": {src}}, false)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), "acme-tools 1.2.0 is installed already")

	rec = e.post("/admin/skills/uninstall", url.Values{"package": {"acme-tools"}}, true)
	require.Equal(t, http.StatusForbidden, rec.Code)
	_, ok := e.reg.Package("acme-tools")
	require.True(t, ok, "without the CSRF token nothing is uninstalled")

	rec = e.post("/admin/skills/uninstall", url.Values{"package": {"release-notes"}}, false)
	require.Equal(t, http.StatusConflict, rec.Code)
	require.Contains(t, rec.Body.String(), "package release-notes is built in and cannot be uninstalled; disable it instead")

	rec = e.post("/admin/skills/uninstall", url.Values{"package": {"acme-tools"}}, false)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "Uninstalled acme-tools 1.2.0.")
	require.NotContains(t, rec.Body.String(), `data-package="acme-tools"`)

	changes := e.changes()
	require.Len(t, changes, 3)
	for _, c := range changes {
		require.Equal(t, "alice", c.By, "audited as who is signed in")
	}
	require.Equal(t, "package.uninstall", changes[0].Tool)
	require.JSONEq(t, `{"package":"acme-tools","version":"1.2.0"}`, changes[0].Arguments)
	require.Equal(t, "package.install", changes[2].Tool)
	require.JSONEq(t, `{"source":"`+src+`","package":"acme-tools","version":"1.2.0","enable":["repo:acme/web","org:other"]}`, changes[2].Arguments)
}
