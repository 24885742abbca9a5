package daemon_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/httpapi"
)

// Every endpoint that changes something refuses a body over the API's
// limit with 413, those that read no body too, and every one that reads a
// body refuses a field given twice (in any case) with 400: what the API
// acts on is what a reader of the body takes it to say. Nothing refused
// is stored.
func TestAPIRefusesOversizedBodiesAndFieldsGivenTwiceAtEveryEndpoint(t *testing.T) {
	r := start(t, nil)
	endpoints := []struct {
		method, path string
		twice        string // a body naming one of its fields twice; "" reads no body
	}{
		{"POST", "/api/v1/messages", `{"thread":"t","text":"@coder hi","TEXT":"@triage hi"}`},
		{"POST", "/api/v1/rules", `{"name":"a","name":"b","agent":"triage"}`},
		{"PUT", "/api/v1/rules/rule_1", `{"name":"a","Name":"b","agent":"triage"}`},
		{"PUT", "/api/v1/rules/rule_1/priority", `{"priority":1,"priority":2}`},
		{"DELETE", "/api/v1/rules/rule_1", ""},
		{"POST", "/api/v1/explain", `{"text":"a","Text":"b"}`},
		{"POST", "/api/v1/approvals/ap_1/approve", `{"by":"admin","By":"ana"}`},
		{"POST", "/api/v1/approvals/ap_1/deny", `{"by":"admin","by":"admin"}`},
		{"POST", "/api/v1/workitems/wi_1/cancel", `{"reason":"a","reason":"b"}`},
		{"POST", "/api/v1/threads/t/reset", ""},
		{"POST", "/api/v1/runs/run_1/cancel", ""},
		{"POST", "/api/v1/runs/run_1/await", ""},
		{"DELETE", "/api/v1/workspaces/t", ""},
		{"POST", "/api/v1/packages", `{"source":"a","SOURCE":"b"}`},
		{"DELETE", "/api/v1/packages/p", ""},
		{"POST", "/api/v1/packages/p/enable", `{"scope":"global","scope":"repo:a/b"}`},
		{"POST", "/api/v1/skills/s/disable", `{"scope":"global","Scope":"repo:a/b"}`},
		{"POST", "/api/v1/skills", `{"name":"a","name":"b"}`},
		{"POST", "/api/v1/skills/s/override_version", `{"name":"a","name":"b"}`},
		{"POST", "/api/v1/skills/validate", `{"skills":["a"],"skills":["b"]}`},
		{"POST", "/api/v1/skills/compose", `{"skills":["a"],"Skills":["b"]}`},
		{"POST", "/api/v1/skills/select", `{"task":"a","task":"b"}`},
		{"POST", "/api/v1/config/reload", ""},
	}
	oversized := []struct{ name, body string }{
		{"json", `{"text":"` + strings.Repeat("a", httpapi.MaxBody) + `"}`},
		{"whitespace", strings.Repeat(" ", httpapi.MaxBody+1)},
	}
	for _, e := range endpoints {
		for _, o := range oversized {
			t.Run(fmt.Sprintf("%s %s %s over the limit", e.method, e.path, o.name), func(t *testing.T) {
				code, body := r.do(t, e.method, e.path, o.body)
				require.Equal(t, 413, code, "%s", body)
				var got httpapi.ErrorBody
				require.NoError(t, json.Unmarshal(body, &got))
				require.Equal(t, fmt.Sprintf("request body over %d bytes", httpapi.MaxBody), got.Error)
			})
		}
		if e.twice == "" {
			continue
		}
		t.Run(fmt.Sprintf("%s %s with a field twice", e.method, e.path), func(t *testing.T) {
			code, body := r.do(t, e.method, e.path, e.twice)
			require.Equal(t, 400, code, "%s", body)
			require.Regexp(t, `is given twice|duplicate key`, string(body), "a skill is read by the skill reader, which says it its way")
		})
	}
	// A query parameter given twice is refused wherever it is read.
	for _, q := range []string{
		"GET /api/v1/workitems?limit=1&limit=1000", "GET /api/v1/workitems?status=done&status=failed", "GET /api/v1/workitems?cursor=a&cursor=b",
		"GET /api/v1/runs?owner=a&owner=b", "GET /api/v1/ingress?reason=a&reason=b", "GET /api/v1/audit?since=1h&since=1000h",
		"GET /api/v1/audit?decision=deny&decision=allow", "GET /api/v1/approvals?all=false&all=true", "GET /api/v1/skills?q=a&q=b",
		"GET /api/v1/skills/effective?repo=a/b&repo=c/d", "POST /api/v1/runs/run_1/await?timeout=1s&timeout=10m",
		"DELETE /api/v1/workspaces/t?force=false&force=true", "GET /api/v1/workitems?limit=%zz",
	} {
		method, path, _ := strings.Cut(q, " ")
		code, body := r.do(t, method, path, "")
		require.Equal(t, 400, code, "%s: %s", q, body)
		require.Regexp(t, `is given 2 times|cannot be read`, string(body), q)
	}
	for _, list := range []string{"/api/v1/workitems", "/api/v1/rules/rule_1", "/api/v1/packages/p"} {
		code, body := r.do(t, "GET", list, "")
		require.Contains(t, []int{200, 404}, code, "%s", body)
		require.NotContains(t, string(body), "wi_1", "nothing refused was stored")
	}
}
