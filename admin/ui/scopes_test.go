package ui

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/skills"
	"github.com/switchyard/switchyard/skills/install"
)

// cell finds a matrix cell's state and why: data-state, data-enabled,
// and the words that say where its value comes from.
func cell(t *testing.T, body, name, scope string) (state, enabled, why string) {
	t.Helper()
	re := regexp.MustCompile(`data-name="` + regexp.QuoteMeta(name) + `" data-scope="` + regexp.QuoteMeta(scope) +
		`" data-state="(\w+)" data-enabled="(\w+)">\s*<span class="state">\w+</span>\s*<span class="why">([^<]*)</span>`)
	m := re.FindStringSubmatch(body)
	require.NotNil(t, m, "no cell of %s at %s", name, scope)
	return m[1], m[2], m[3]
}

// web is the selection the tests look at.
var web = url.Values{"repo": {"acme/web"}, "agent": {"coder"}}

func form(kv ...string) url.Values {
	v := url.Values{"repo": {"acme/web"}, "agent": {"coder"}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

func TestScopeMatrixShowsWhereEachValueIsDecided(t *testing.T) {
	e := newSkillsEnv(t, nil)
	rec := e.get("/admin/scopes?" + web.Encode())
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	body := rec.Body.String()
	for _, sc := range []string{"global", "org:acme", "repo:acme/web", "agent:coder"} {
		state, enabled, why := cell(t, body, "release-notes", sc)
		require.Equal(t, []string{"inherited", "true", "default"}, []string{state, enabled, why}, sc)
	}

	// Turned off at the repository: set there, inherited by the agent.
	rec = e.post("/admin/scopes/set", form("name", "release-notes", "scope", "repo:acme/web", "set", "disable"), false)
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	require.Equal(t, "/admin/scopes?agent=coder&org=acme&repo=acme%2Fweb", rec.Header().Get("Location"))
	body = e.get("/admin/scopes?" + web.Encode()).Body.String()
	state, enabled, why := cell(t, body, "release-notes", "repo:acme/web")
	require.Equal(t, []string{"here", "false", "set here"}, []string{state, enabled, why})
	state, enabled, why = cell(t, body, "release-notes", "agent:coder")
	require.Equal(t, []string{"inherited", "false", "inherited from repo:acme/web"}, []string{state, enabled, why})
	state, enabled, _ = cell(t, body, "release-notes", "org:acme")
	require.Equal(t, []string{"inherited", "true"}, []string{state, enabled})

	// The matrix says what `skills effective` says, and the setting is
	// the store's, as the CLI's is: a registry opened again has it.
	eff := e.reg.Enabled(skills.Target{Repo: "acme/web", Agent: "coder"}, "release-notes")
	require.Equal(t, skills.Effective{Name: "release-notes", Package: "release-notes", Scope: "repo:acme/web", Origin: "store"}, eff)
	again, err := skills.NewRegistry(t.Context(), skills.Options{Store: e.store})
	require.NoError(t, err)
	require.Equal(t, eff, again.Enabled(skills.Target{Repo: "acme/web", Agent: "coder"}, "release-notes"))

	// The agent turns it back on for itself; clearing that inherits again.
	require.Equal(t, http.StatusSeeOther, e.post("/admin/scopes/set", form("name", "release-notes", "scope", "agent:coder", "set", "enable"), false).Code)
	body = e.get("/admin/scopes?" + web.Encode()).Body.String()
	state, enabled, why = cell(t, body, "release-notes", "agent:coder")
	require.Equal(t, []string{"here", "true", "set here"}, []string{state, enabled, why})
	require.Equal(t, http.StatusSeeOther, e.post("/admin/scopes/set", form("name", "release-notes", "scope", "agent:coder", "set", "inherit"), false).Code)
	_, stored := e.reg.StoredSetting(skills.Scope{Kind: skills.ScopeAgent, Name: "coder"}, "release-notes")
	require.False(t, stored, "inherit forgets the setting")

	changes := e.changes()
	require.Len(t, changes, 3)
	require.Equal(t, "skills.inherit", changes[0].Tool)
	require.Equal(t, "skills.disable", changes[2].Tool)
	require.JSONEq(t, `{"name":"release-notes","scope":"repo:acme/web"}`, changes[2].Arguments)
	require.Equal(t, "alice", changes[2].By)
}

func TestScopeMatrixRefusals(t *testing.T) {
	e := newSkillsEnv(t, nil)
	require.NoError(t, e.reg.SetConfig([]skills.Setting{{Scope: skills.Scope{Kind: skills.ScopeOrg, Name: "acme"}, Name: "incident-triage", Enabled: skills.Disabled, Origin: "config.yaml:12"}}))

	for path, f := range map[string]url.Values{
		"/admin/scopes/set":    form("name", "release-notes", "scope", "repo:acme/web", "set", "disable"),
		"/admin/scopes/config": form("package", "release-notes", "scope", "repo:acme/web"),
	} {
		rec := e.post(path, f, true)
		require.Equal(t, http.StatusForbidden, rec.Code, path)
		require.Contains(t, rec.Body.String(), "CSRF token")
	}

	for _, tc := range []struct {
		name   string
		form   url.Values
		status int
		want   string
	}{
		{"a scope of no kind", form("name", "release-notes", "scope", "team:x", "set", "disable"), http.StatusBadRequest, `scope &#34;team:x&#34;: unknown kind`},
		{"a verb of none", form("name", "release-notes", "scope", "global", "set", "toggle"), http.StatusBadRequest, `set &#34;toggle&#34;: want enable, disable or inherit`},
		{"a name of nothing", form("name", "release-note", "scope", "global", "set", "disable"), http.StatusNotFound, `no package or skill &#34;release-note&#34;; did you mean &#34;release-notes&#34;?`},
		{"what the config file sets", form("name", "incident-triage", "scope", "org:acme", "set", "enable"), http.StatusConflict, "config.yaml:12 sets incident-triage at org:acme (enabled: false); change it there"},
		{"a repository that is not one", url.Values{"repo": {"acme"}, "name": {"release-notes"}, "scope": {"global"}, "set": {"disable"}}, http.StatusBadRequest, `repository &#34;acme&#34;: want owner/name`},
		{"a repository of another org", url.Values{"org": {"other"}, "repo": {"acme/web"}, "name": {"release-notes"}, "scope": {"global"}, "set": {"disable"}}, http.StatusBadRequest, "repository acme/web is not in org other: its org is acme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := e.post("/admin/scopes/set", tc.form, false)
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			require.Contains(t, rec.Body.String(), `<p class="error" id="error" role="alert">`+tc.want)
		})
	}
	require.Empty(t, e.changes(), "nothing refused is audited")
	require.True(t, e.reg.Enabled(skills.Target{Repo: "acme/web"}, "release-notes").Enabled, "nothing refused changed anything")

	body := e.get("/admin/scopes?" + web.Encode()).Body.String()
	state, enabled, why := cell(t, body, "incident-triage", "org:acme")
	require.Equal(t, []string{"here", "false", "set here in config.yaml:12"}, []string{state, enabled, why})
	require.Contains(t, body, "the config file decides (config.yaml:12)")

	rec := e.get("/admin/scopes?agent=Not+An+Agent")
	require.Equal(t, http.StatusBadRequest, rec.Code)
	require.Contains(t, rec.Body.String(), `agent &#34;Not An Agent&#34;: not an agent name`)
}

func TestScopeMatrixPackagesAndTheirSettings(t *testing.T) {
	e := newSkillsEnv(t, nil)
	_, err := e.in.Install(context.Background(), install.Request{Source: writePackage(t, acmeTools)})
	require.NoError(t, err)
	repo := skills.Scope{Kind: skills.ScopeRepo, Name: "acme/web"}

	body := e.get("/admin/scopes?" + web.Encode()).Body.String()
	state, enabled, why := cell(t, body, "deploy-check", "agent:coder")
	require.Equal(t, []string{"inherited", "false", "default"}, []string{state, enabled, why}, "an installed package is off until enabled")

	require.Equal(t, http.StatusSeeOther, e.post("/admin/scopes/set", form("name", "acme-tools", "scope", "repo:acme/web", "set", "enable"), false).Code)
	body = e.get("/admin/scopes?" + web.Encode()).Body.String()
	state, enabled, why = cell(t, body, "acme-tools", "repo:acme/web")
	require.Equal(t, []string{"here", "true", "set here"}, []string{state, enabled, why})
	state, enabled, why = cell(t, body, "deploy-check", "repo:acme/web")
	require.Equal(t, []string{"here", "true", "set here for package acme-tools"}, []string{state, enabled, why})
	state, enabled, why = cell(t, body, "deploy-check", "agent:coder")
	require.Equal(t, []string{"inherited", "true", "inherited from repo:acme/web"}, []string{state, enabled, why})

	// Settings the schema refuses are refused with the schema's words,
	// and nothing changes.
	rec := e.post("/admin/scopes/config", form("package", "acme-tools", "scope", "repo:acme/web", "setting.environment", "qa", "setting.retries", "2"), false)
	require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), `<p class="error" id="error" role="alert">at repo:acme/web: settings of package acme-tools: at /environment:`)
	require.Regexp(t, `data-scope="repo:acme/web">(?s:.)*?name="setting.environment" value="qa"`, rec.Body.String(), "the form keeps what was typed")
	rec = e.post("/admin/scopes/config", form("package", "acme-tools", "scope", "repo:acme/web", "setting.retries", "-1"), false)
	require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "at /retries:")
	rec = e.post("/admin/scopes/config", form("package", "acme-tools", "scope", "repo:acme/web", "setting.environment", "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"), false)
	require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "setting environment of acme-tools looks like a credential")
	require.NotContains(t, rec.Body.String(), "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB", "a secret typed in is never shown back")
	st, _ := e.reg.StoredSetting(repo, "acme-tools")
	require.Empty(t, st.Settings)

	rec = e.post("/admin/scopes/config", form("package", "acme-tools", "scope", "global", "setting.environment", "staging", "setting.retries", "1"), false)
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	rec = e.post("/admin/scopes/config", form("package", "acme-tools", "scope", "repo:acme/web", "setting.environment", "production"), false)
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	st, _ = e.reg.StoredSetting(repo, "acme-tools")
	require.Equal(t, skills.Enabled, st.Enabled, "the package stays enabled where it was")
	require.Equal(t, map[string]any{"environment": "production"}, st.Settings)
	require.Equal(t, map[string]any{"environment": "production", "retries": int64(1)}, e.reg.Settings(skills.Target{Repo: "acme/web", Agent: "coder"}, "acme-tools"))
	gl, _ := e.reg.StoredSetting(skills.Global, "acme-tools")
	require.Equal(t, skills.Inherit, gl.Enabled, "settings alone enable nothing")

	body = e.get("/admin/scopes?" + web.Encode()).Body.String()
	require.Regexp(t, `data-scope="repo:acme/web">(?s:.)*?name="setting.environment" value="production" placeholder="inherited: staging"`, body)
	require.Regexp(t, `data-scope="agent:coder">(?s:.)*?name="setting.retries" value="" placeholder="inherited: 1"`, body)

	// Turning the package off keeps its settings there.
	require.Equal(t, http.StatusSeeOther, e.post("/admin/scopes/set", form("name", "acme-tools", "scope", "repo:acme/web", "set", "disable"), false).Code)
	st, _ = e.reg.StoredSetting(repo, "acme-tools")
	require.Equal(t, skills.Disabled, st.Enabled)
	require.Equal(t, map[string]any{"environment": "production"}, st.Settings)

	changes := e.changes()
	require.Equal(t, "skills.disable", changes[0].Tool)
	require.Equal(t, "skills.settings", changes[1].Tool)
	require.JSONEq(t, `{"package":"acme-tools","scope":"repo:acme/web","settings":{"environment":"production"}}`, changes[1].Arguments)
}
