package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
)

func skillsAPI(t *testing.T) (http.Handler, *skills.Registry) {
	t.Helper()
	reg, err := skills.NewRegistry(context.Background(), skills.Options{Masker: bot.NewRedactor()})
	require.NoError(t, err)
	s := seed(t)
	return handler(admin.Options{Store: s.store, Intake: s.intake, Skills: reg}), reg
}

func TestSkillsAPI(t *testing.T) {
	h, _ := skillsAPI(t)

	rec := serve(t, h, "GET", "/api/v1/skills", "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var list []map[string]string
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &list))
	require.Len(t, list, 5)
	require.Equal(t, map[string]string{"name": "code-review-checklist", "package": "code-review-checklist", "version": "1.0.0",
		"description": list[0]["description"]}, list[0])

	// SC-005: a skill registered through the API is usable at once.
	triage := `{"name":"triage-lite","description":"Triage small issues.","instructions":"Label it.","allowed_tools":["github_add_labels"],` +
		`"execution_protocol":["Label it with github_add_labels."],"composability_rules":{"requires":["incident-triage"]}}`
	rec = serve(t, h, "POST", "/api/v1/skills", triage)
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	require.JSONEq(t, `{"valid":false,"errors":[{"code":"missing_companion","message":"triage-lite requires incident-triage, which is not in the set; add it","skills":["triage-lite","incident-triage"]}],"warnings":[]}`,
		serve(t, h, "POST", "/api/v1/skills/validate", `{"skills":["triage-lite"]}`).Body.String())
	require.JSONEq(t, `{"valid":true,"errors":[],"warnings":[]}`,
		serve(t, h, "POST", "/api/v1/skills/validate", `{"skills":["triage-lite","incident-triage"]}`).Body.String())

	rec = serve(t, h, "POST", "/api/v1/skills/triage-lite/override_version", `{"name":"triage-lite","version":"2.0.0","description":"d","instructions":"i","allowed_tools":[],"execution_protocol":["x"]}`)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	rec = serve(t, h, "GET", "/api/v1/skills/triage-lite", "")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), `"version": "2.0.0"`)

	rec = serve(t, h, "POST", "/api/v1/skills/compose", `{"skills":["opencode-implementer","specification-engine"]}`)
	require.Equal(t, http.StatusOK, rec.Code)
	var comp skills.Composition
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &comp))
	require.Subset(t, comp.ForbiddenTools, []string{"write_file", "edit_file"})

	rec = serve(t, h, "POST", "/api/v1/skills/select", `{"task":"fix the flaky test","coding":true}`)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), `"opencode-implementer"`)

	rec = serve(t, h, "POST", "/api/v1/skills/release-notes/disable", `{"scope":"repo:acme/web"}`)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.JSONEq(t, `{"name":"release-notes","scope":"repo:acme/web","enabled":"false"}`, rec.Body.String())
	rec = serve(t, h, "GET", "/api/v1/skills/effective?repo=acme/web&agent=coder", "")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), `"name": "release-notes",
    "enabled": false,
    "scope": "repo:acme/web"`)

	rec = serve(t, h, "GET", "/api/v1/packages", "")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), `"builtin": true`)
}

func TestSkillsAPIErrors(t *testing.T) {
	h, _ := skillsAPI(t)
	valid := `{"name":"x","description":"d","instructions":"i","allowed_tools":[],"execution_protocol":["s"]}`
	require.Equal(t, http.StatusCreated, serve(t, h, "POST", "/api/v1/skills", valid).Code)
	cases := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"register twice", "POST", "/api/v1/skills", valid, http.StatusConflict, "use override_version"},
		{"a skill with a mistake", "POST", "/api/v1/skills", `{"name":"y","descripton":"d"}`, http.StatusBadRequest, `request.json:1: descripton: unknown key; did you mean \"description\"?`},
		{"not JSON", "POST", "/api/v1/skills", `{"name":`, http.StatusBadRequest, "the JSON document ends too early"},
		{"override of another name", "POST", "/api/v1/skills/y/override_version", valid, http.StatusBadRequest, `the body defines skill \"x\", the path names \"y\"`},
		{"unknown skill", "GET", "/api/v1/skills/nope", "", http.StatusNotFound, `no skill \"nope\"`},
		{"validate with a typo", "POST", "/api/v1/skills/validate", `{"skill":["x"]}`, http.StatusBadRequest, `unknown field \"skill\"`},
		{"compose unknown", "POST", "/api/v1/skills/compose", `{"skills":["nope"]}`, http.StatusNotFound, `unknown skill \"nope\"`},
		{"select with a bad risk", "POST", "/api/v1/skills/select", `{"task":"x","risk_level":"extreme"}`, http.StatusBadRequest, `risk_level \"extreme\"`},
		{"enable without scope", "POST", "/api/v1/skills/release-notes/enable", `{}`, http.StatusBadRequest, "scope is required"},
		{"enable at a bad scope", "POST", "/api/v1/skills/release-notes/enable", `{"scope":"team:x"}`, http.StatusBadRequest, "unknown kind"},
		{"enable nothing", "POST", "/api/v1/skills/nope/enable", `{"scope":"global"}`, http.StatusNotFound, `no package or skill \"nope\"`},
		{"settings of a skill", "POST", "/api/v1/skills/x/enable", `{"scope":"global","settings":{"a":1}}`, http.StatusBadRequest, "settings belong to its package"},
		{"a package that is not", "POST", "/api/v1/packages/x/enable", `{"scope":"global"}`, http.StatusNotFound, `no package \"x\"`},
		{"an unknown setting verb", "POST", "/api/v1/skills/x/toggle", `{"scope":"global"}`, http.StatusNotFound, "want /enable, /disable or /inherit"},
		{"effective of a bad repo", "GET", "/api/v1/skills/effective?repo=acme", "", http.StatusBadRequest, `repo \"acme\": want owner/name`},
		{"no installer", "POST", "/api/v1/packages", `{"source":"/tmp/x"}`, http.StatusServiceUnavailable, "no package installer"},
		{"unknown package", "GET", "/api/v1/packages/nope", "", http.StatusNotFound, `no package \"nope\"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(t, h, tc.method, tc.path, tc.body)
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			require.Contains(t, rec.Body.String(), tc.want)
		})
	}
}

// acmeTools is an installed package with a skill and settings.
var acmeTools = fstest.MapFS{"manifest.yaml": {Data: []byte(`name: acme-tools
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
    environment: {type: string, enum: [staging, production]}
    retries: {type: integer, minimum: 0}
  additionalProperties: false
`)}}

// Enabling or disabling a package at a scope keeps the settings stored
// there; only settings given change them, as `skills enable --set` does,
// and inherit forgets the scope's setting whole.
func TestEnablementKeepsTheScopesSettings(t *testing.T) {
	repo := skills.Scope{Kind: skills.ScopeRepo, Name: "acme/web"}
	kept := map[string]any{"environment": "production", "retries": int64(2)}
	cases := []struct {
		name, path, body string
		enabled          skills.Enablement
		settings         map[string]any // stored at the scope after; nil: no setting stored
	}{
		{"enable without settings", "/api/v1/packages/acme-tools/enable", `{"scope":"repo:acme/web"}`, skills.Enabled, kept},
		{"enable through the skills path", "/api/v1/skills/acme-tools/enable", `{"scope":"repo:acme/web"}`, skills.Enabled, kept},
		{"disable", "/api/v1/packages/acme-tools/disable", `{"scope":"repo:acme/web"}`, skills.Disabled, kept},
		{"inherit forgets the setting, settings included", "/api/v1/skills/acme-tools/inherit", `{"scope":"repo:acme/web"}`, skills.Inherit, nil},
		{"enable with settings replaces them", "/api/v1/packages/acme-tools/enable", `{"scope":"repo:acme/web","settings":{"retries":3}}`,
			skills.Enabled, map[string]any{"retries": int64(3)}},
		{"enable with empty settings keeps them", "/api/v1/packages/acme-tools/enable", `{"scope":"repo:acme/web","settings":{}}`, skills.Enabled, kept},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := seed(t)
			reg, err := skills.NewRegistry(t.Context(), skills.Options{Store: s.store, Masker: bot.NewRedactor()})
			require.NoError(t, err)
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), acmeTools["manifest.yaml"].Data, 0o644))
			p, err := skills.LoadPackage(os.DirFS(dir), skills.LoadOptions{Dir: dir})
			require.NoError(t, err)
			digest, err := skills.Digest(os.DirFS(dir))
			require.NoError(t, err)
			require.NoError(t, reg.Add(t.Context(), p, skills.InstalledPackage{Name: "acme-tools", Version: "1.2.0", Digest: digest, Dir: dir}))
			require.NoError(t, reg.Set(t.Context(), skills.Setting{Scope: repo, Name: "acme-tools", Enabled: skills.Disabled, Settings: kept}))
			h := handler(admin.Options{Store: s.store, Intake: s.intake, Skills: reg})

			rec := serve(t, h, "POST", tc.path, tc.body)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())

			// What the store holds, as a registry opened again reads it.
			again, err := skills.NewRegistry(t.Context(), skills.Options{Store: s.store})
			require.NoError(t, err)
			for _, r := range []*skills.Registry{reg, again} {
				st, ok := r.StoredSetting(repo, "acme-tools")
				if tc.settings == nil {
					require.False(t, ok)
					continue
				}
				require.True(t, ok)
				require.Equal(t, tc.enabled, st.Enabled)
				require.Equal(t, tc.settings, st.Settings)
			}
		})
	}

	t.Run("inherit where nothing else is stored forgets the setting", func(t *testing.T) {
		s := seed(t)
		reg, err := skills.NewRegistry(t.Context(), skills.Options{Store: s.store})
		require.NoError(t, err)
		h := handler(admin.Options{Store: s.store, Intake: s.intake, Skills: reg})
		require.Equal(t, http.StatusOK, serve(t, h, "POST", "/api/v1/skills/release-notes/disable", `{"scope":"global"}`).Code)
		require.Equal(t, http.StatusOK, serve(t, h, "POST", "/api/v1/skills/release-notes/inherit", `{"scope":"global"}`).Code)
		_, ok := reg.StoredSetting(skills.Global, "release-notes")
		require.False(t, ok)
	})
}
