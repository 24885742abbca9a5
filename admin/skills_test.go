package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

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
