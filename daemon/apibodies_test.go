package daemon_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
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
			for _, chunked := range []bool{false, true} {
				how := "with its length"
				if chunked {
					how = "chunked"
				}
				t.Run(fmt.Sprintf("%s %s %s over the limit, %s", e.method, e.path, o.name, how), func(t *testing.T) {
					code, body := r.send(t, e.method, e.path, o.body, chunked)
					require.Equal(t, 413, code, "%s", body)
					var got httpapi.ErrorBody
					require.NoError(t, json.Unmarshal(body, &got))
					require.Equal(t, fmt.Sprintf("request body over %d bytes", httpapi.MaxBody), got.Error)
				})
			}
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

// send is do with the body sent chunked, without a Content-Length, when
// chunked is true.
func (r *running) send(t *testing.T, method, path, body string, chunked bool) (int, []byte) {
	t.Helper()
	if !chunked {
		return r.do(t, method, path, body)
	}
	// A body of unknown length: the client sends it chunked.
	req, err := http.NewRequest(method, r.base+path, io.NopCloser(strings.NewReader(body)))
	require.NoError(t, err)
	req.ContentLength = -1
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// Every endpoint answers HEAD as it answers GET, without a body, where it
// takes GET; any method an endpoint does not take (OPTIONS too: the API
// answers no cross-site preflight) is answered 405 in JSON, with Allow
// saying what it takes; a path no endpoint has is 404 in JSON. Nothing is
// changed by any of them.
func TestAPIAnswersEveryMethodOfEveryEndpoint(t *testing.T) {
	r := start(t, nil)
	code, body := r.do(t, "POST", "/api/v1/messages", `{"thread":"t","text":"@triage hi"}`)
	require.Equal(t, 202, code, "%s", body)
	gets := []string{
		"/api/v1/workitems", "/api/v1/workitems/wi_1", "/api/v1/workitems/wi_404", "/api/v1/threads/t/messages",
		"/api/v1/ingress", "/api/v1/audit", "/api/v1/approvals", "/api/v1/agents", "/api/v1/agents/coder",
		"/api/v1/rules", "/api/v1/rules/rule_404", "/api/v1/runs", "/api/v1/runs/run_404", "/api/v1/runs/tree/wi_1",
		"/api/v1/skills", "/api/v1/skills/release-notes", "/api/v1/packages", "/api/v1/packages/release-notes",
	}
	for _, path := range gets {
		get, getBody := r.do(t, "GET", path, "")
		head, headBody := r.do(t, "HEAD", path, "")
		require.Equal(t, get, head, "HEAD %s answers as GET does (%s)", path, getBody)
		require.Empty(t, headBody, "HEAD %s", path)
		for _, method := range []string{"OPTIONS", "PATCH"} {
			code, body := r.do(t, method, path, "")
			require.Equal(t, 405, code, "%s %s: %s", method, path, body)
			var got httpapi.ErrorBody
			require.NoError(t, json.Unmarshal(body, &got), "%s %s: %s", method, path, body)
			require.Equal(t, httpapi.CodeMethodNotAllowed, got.Code)
			require.Regexp(t, `^`+regexp.QuoteMeta(path)+` takes (.*, )?GET`, got.Error)
			require.Contains(t, got.Error, "not "+method)
		}
	}
	posts := []string{
		"/api/v1/messages", "/api/v1/explain", "/api/v1/config/reload", "/api/v1/threads/t/reset", "/api/v1/workitems/wi_1/cancel",
		"/api/v1/runs/run_1/cancel", "/api/v1/runs/run_1/await", "/api/v1/approvals/ap_1/approve", "/api/v1/packages/p/enable",
	}
	for _, path := range posts {
		for _, method := range []string{"GET", "HEAD", "OPTIONS"} {
			code, body := r.do(t, method, path, "")
			require.Equal(t, 405, code, "%s %s: %s", method, path, body)
			require.Contains(t, r.allow(t, method, path), "POST", "%s %s", method, path)
			if method == "HEAD" {
				require.Empty(t, body)
				continue
			}
			var got httpapi.ErrorBody
			require.NoError(t, json.Unmarshal(body, &got), "%s %s: %s", method, path, body)
			require.Equal(t, httpapi.CodeMethodNotAllowed, got.Code)
		}
	}
	for _, path := range []string{"/api/v1/nope", "/api/v2/workitems", "/api/v1/workitems/wi_1/nope"} {
		for _, method := range []string{"GET", "OPTIONS", "POST"} {
			code, body := r.do(t, method, path, "")
			require.Equal(t, 404, code, "%s %s: %s", method, path, body)
			var got httpapi.ErrorBody
			require.NoError(t, json.Unmarshal(body, &got), "%s %s: %s", method, path, body)
			require.Equal(t, "no endpoint "+path+" in this API", got.Error)
		}
	}
	code, body = r.do(t, "GET", "/api/v1/workitems", "")
	require.Equal(t, 200, code)
	var page struct{ Items []map[string]any }
	require.NoError(t, json.Unmarshal(body, &page))
	require.Len(t, page.Items, 1, "nothing was made or cancelled")
	require.NotEqual(t, "cancelled", page.Items[0]["status"])
}

// allow is the Allow header of the answer to method at path.
func (r *running) allow(t *testing.T, method, path string) string {
	t.Helper()
	req, err := http.NewRequest(method, r.base+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.Header.Get("Allow")
}
