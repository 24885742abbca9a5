package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
)

// errorBody decodes an error answer, checking it is JSON.
func errorBody(t *testing.T, rec *httptest.ResponseRecorder) httpapi.ErrorBody {
	t.Helper()
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var body httpapi.ErrorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), "body: %s", rec.Body)
	return body
}

func TestErrorMapsCodesToStatus(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		status  int
		code    string
		message string
	}{
		{"invalid", bot.Errorf(bot.EINVALID, "limit %q: bad", "x"), http.StatusBadRequest, bot.EINVALID, `limit "x": bad`},
		{"not found", bot.Errorf(bot.ENOTFOUND, "work item %q not found", "wi_9"), http.StatusNotFound, bot.ENOTFOUND, `work item "wi_9" not found`},
		{"conflict", bot.Errorf(bot.ECONFLICT, "lease taken over"), http.StatusConflict, bot.ECONFLICT, "lease taken over"},
		{"unauthorized", bot.Errorf(bot.EUNAUTHORIZED, "no token"), http.StatusUnauthorized, bot.EUNAUTHORIZED, "no token"},
		{"forbidden", bot.Errorf(bot.EFORBIDDEN, "bob may not decide"), http.StatusForbidden, bot.EFORBIDDEN, "bob may not decide"},
		{"too large", bot.Errorf(bot.ETOOLARGE, "request body over 10 bytes"), http.StatusRequestEntityTooLarge, bot.ETOOLARGE, "request body over 10 bytes"},
		{"unavailable", bot.Errorf(bot.EUNAVAILABLE, "shutting down"), http.StatusServiceUnavailable, bot.EUNAVAILABLE, "shutting down"},
		// A wrapped domain error keeps its code and shows only its own
		// message: the wrapping context is for logs, not callers.
		{"wrapped", fmt.Errorf("load wi_9: %w", bot.Errorf(bot.ENOTFOUND, "no such item")), http.StatusNotFound, bot.ENOTFOUND, "no such item"},
		{"coded internal", bot.Errorf(bot.EINTERNAL, "index damaged at key 7"), http.StatusInternalServerError, bot.EINTERNAL, "index damaged at key 7"},
		{"plain error", errors.New("open /var/lib/switchyard.db: permission denied"), http.StatusInternalServerError, bot.EINTERNAL, "internal error"},
		{"wrapped plain error", fmt.Errorf("list: %w", errors.New("bbolt: page 12 already freed")), http.StatusInternalServerError, bot.EINTERNAL, "internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.status, httpapi.Status(tt.code))

			rec := httptest.NewRecorder()
			httpapi.Error(rec, httptest.NewRequest(http.MethodGet, "/api/v1/x", nil), nil, tt.err)

			require.Equal(t, tt.status, rec.Code)
			require.Equal(t, httpapi.ErrorBody{Error: tt.message, Code: tt.code}, errorBody(t, rec))
		})
	}
}

func TestStatusOfUnknownCodeIs500(t *testing.T) {
	for _, code := range []string{"", "weird", "NOT_FOUND"} {
		require.Equal(t, http.StatusInternalServerError, httpapi.Status(code), "code %q", code)
	}
}

func TestInternalErrorDetailIsLoggedNotAnswered(t *testing.T) {
	const detail = "open /srv/data/switchyard.db: permission denied"
	tests := []struct {
		name   string
		err    error
		logged bool
	}{
		{"plain error", errors.New(detail), true},
		{"wrapped plain error", fmt.Errorf("list work items: %w", errors.New(detail)), true},
		{"domain error", bot.Errorf(bot.ENOTFOUND, "no agent %q", "x"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			rec := httptest.NewRecorder()
			httpapi.Error(rec, httptest.NewRequest(http.MethodGet, "/api/v1/workitems", nil), logger, tt.err)

			require.NotContains(t, rec.Body.String(), "permission denied")
			if !tt.logged {
				require.Empty(t, logs.String())
				return
			}
			require.Equal(t, http.StatusInternalServerError, rec.Code)
			require.Equal(t, httpapi.ErrorBody{Error: "internal error", Code: bot.EINTERNAL}, errorBody(t, rec))
			require.Contains(t, logs.String(), "permission denied")
			require.Contains(t, logs.String(), "/api/v1/workitems")
		})
	}
}

func TestAuthenticate(t *testing.T) {
	const admin, ana = "s3cret-token-admin", "s3cret-token-ana"
	tokens := []httpapi.Token{{Name: "admin", Value: admin}, {Name: "ana", Value: ana}, {Name: "unset"}}
	tests := []struct {
		name   string
		header string // Authorization; "" sends none
		who    string // the identity next sees; "" refused
	}{
		{"admin token", "Bearer " + admin, "admin"},
		{"named token", "Bearer " + ana, "ana"},
		{"scheme in lower case", "bearer " + ana, "ana"},
		{"no header", "", ""},
		{"empty bearer", "Bearer ", ""},
		{"wrong token", "Bearer nope", ""},
		{"token is a prefix of the header", "Bearer " + ana + "x", ""},
		{"header is a prefix of the token", "Bearer " + ana[:len(ana)-1], ""},
		{"same length, last byte other", "Bearer " + ana[:len(ana)-1] + "X", ""},
		{"trailing space", "Bearer " + ana + " ", ""},
		{"no scheme", ana, ""},
		{"other scheme", "Basic " + ana, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			who := ""
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id, ok := httpapi.IdentityFrom(r.Context())
				require.True(t, ok)
				who = id.Name
				w.WriteHeader(http.StatusNoContent)
			})
			req := httptest.NewRequest(http.MethodGet, "/api/v1/workitems", nil)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			rec := httptest.NewRecorder()
			httpapi.Authenticate(httpapi.NewTokenSet(tokens), next).ServeHTTP(rec, req)

			require.Equal(t, tt.who, who)
			if tt.who != "" {
				require.Equal(t, http.StatusNoContent, rec.Code)
				return
			}
			require.Equal(t, http.StatusUnauthorized, rec.Code)
			require.Equal(t, `Bearer realm="switchyard"`, rec.Header().Get("WWW-Authenticate"))
			body := errorBody(t, rec)
			require.Equal(t, bot.EUNAUTHORIZED, body.Code)
			require.Equal(t, "missing or wrong bearer token", body.Error)
			require.NotContains(t, rec.Body.String(), ana)
		})
	}
	_, ok := httpapi.IdentityFrom(context.Background())
	require.False(t, ok, "a context that never authenticated has no identity")

	rec := httptest.NewRecorder()
	httpapi.Authenticate(httpapi.NewTokenSet(nil), http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	require.Equal(t, http.StatusUnauthorized, rec.Code, "no token configured refuses everyone")
}

// The tokens of a set replaced (a config reloaded) authenticate from the
// next request on, and those no longer in it do not, through the handler
// built before the change.
func TestAuthenticateFollowsTheTokensInEffect(t *testing.T) {
	const ana, bea, fresh = "s3cret-token-ana", "s3cret-token-bea", "s3cret-token-new"
	set := httpapi.NewTokenSet([]httpapi.Token{{Name: "ana", Value: ana}, {Name: "bea", Value: bea}})
	h := httpapi.Authenticate(set, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := httpapi.IdentityFrom(r.Context())
		_, _ = io.WriteString(w, id.Name)
	}))
	who := func(token string) string {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/workitems", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusUnauthorized {
			return ""
		}
		return rec.Body.String()
	}
	for _, tc := range []struct {
		name   string
		tokens []httpapi.Token
		want   map[string]string // token → identity, "" refused
	}{
		{"as built", nil, map[string]string{ana: "ana", bea: "bea", fresh: ""}},
		{"bea withdrawn", []httpapi.Token{{Name: "ana", Value: ana}}, map[string]string{ana: "ana", bea: "", fresh: ""}},
		{"ana's token changed", []httpapi.Token{{Name: "ana", Value: fresh}}, map[string]string{ana: "", bea: "", fresh: "ana"}},
		{"given to another name", []httpapi.Token{{Name: "root", Value: fresh}}, map[string]string{ana: "", bea: "", fresh: "root"}},
		{"none left", []httpapi.Token{{Name: "ana"}}, map[string]string{ana: "", bea: "", fresh: ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.tokens != nil {
				set.Replace(tc.tokens)
			}
			for token, want := range tc.want {
				require.Equal(t, want, who(token), "token %s", token)
			}
		})
	}
	name, ok := new(httpapi.TokenSet).Name(ana)
	require.False(t, ok, "a set never given tokens knows none")
	require.Empty(t, name)
}

func TestRequireJSON(t *testing.T) {
	tests := []struct {
		name, method, contentType, body string
		status                          int
	}{
		{"json", "POST", "application/json", `{}`, 204},
		{"json with charset", "POST", "application/json; charset=utf-8", `{}`, 204},
		{"json in upper case", "POST", "Application/JSON", `{}`, 204},
		{"no body, no type", "POST", "", "", 204},
		{"get", "GET", "", "", 204},
		{"text/plain", "POST", "text/plain", `{"text":"hi"}`, 415},
		{"form", "POST", "application/x-www-form-urlencoded", `text=hi`, 415},
		{"multipart", "POST", "multipart/form-data; boundary=x", `--x--`, 415},
		{"body without a type", "POST", "", `{"text":"hi"}`, 415},
		{"json lookalike", "POST", "application/jsonp", `{}`, 415},
		{"unparsable type", "POST", "application/json; =", `{}`, 415},
		{"text/plain on get", "GET", "text/plain", "", 415},
		{"json over MaxBody", "POST", "application/json", bodyOfSize(httpapi.MaxBody + 1), 413},
		{"a body over MaxBody where none is read", "DELETE", "", strings.Repeat(" ", httpapi.MaxBody+1), 413},
		{"json of MaxBody", "POST", "application/json", bodyOfSize(httpapi.MaxBody), 204},
		{"chunked json", "POST", "application/json", `{"text":"hi"}`, 204},
		{"chunked json of MaxBody", "POST", "application/json", bodyOfSize(httpapi.MaxBody), 204},
		{"chunked json over MaxBody", "POST", "application/json", bodyOfSize(httpapi.MaxBody + 1), 413},
		{"chunked over MaxBody where none is read", "POST", "application/json", strings.Repeat(" ", 2*httpapi.MaxBody), 413},
		{"chunked over MaxBody to a GET", "GET", "application/json", strings.Repeat(" ", httpapi.MaxBody+1), 413},
		{"chunked without a type", "POST", "", `{}`, 415},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, "/api/v1/messages", strings.NewReader(tt.body))
			// Sent without a Content-Length, as Transfer-Encoding: chunked.
			if strings.HasPrefix(tt.name, "chunked") {
				req.ContentLength = -1
				req.Body = io.NopCloser(strings.NewReader(tt.body))
			}
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			rec := httptest.NewRecorder()
			got := ""
			httpapi.RequireJSON(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.Contains(tt.name, "where none is read") {
					w.WriteHeader(http.StatusNoContent)
					return
				}
				b, err := io.ReadAll(r.Body)
				require.NoError(t, err)
				got = string(b)
				w.WriteHeader(http.StatusNoContent)
			})).ServeHTTP(rec, req)
			require.Equal(t, tt.status, rec.Code, rec.Body.String())
			if tt.status == 204 && !strings.Contains(tt.name, "where none is read") {
				require.Equal(t, tt.body, got, "the endpoint reads the body as it was sent")
			}
			if tt.status == 413 {
				body := errorBody(t, rec)
				require.Equal(t, bot.ETOOLARGE, body.Code)
				require.Equal(t, "request body over 1048576 bytes", body.Error)
			}
			if tt.status == 415 {
				body := errorBody(t, rec)
				require.Equal(t, httpapi.CodeUnsupportedMediaType, body.Code)
				require.Contains(t, body.Error, "send Content-Type: application/json")
			}
		})
	}
}

func TestStrictQuery(t *testing.T) {
	for _, tc := range []struct {
		query  string
		status int
		msg    string
	}{
		{"", 204, ""},
		{"limit=10&cursor=abc", 204, ""},
		{"force=true", 204, ""},
		{"thread=a%20b&status=done", 204, ""},
		{"force=false&force=true", 400, `query parameter "force" is given 2 times: give it once`},
		{"limit=1&limit=1000000&limit=5", 400, `query parameter "limit" is given 3 times`},
		{"status=done&status=", 400, `query parameter "status" is given 2 times`},
		{"cursor=%zz", 400, "the query string cannot be read"},
		{"a=1;b=2", 400, "the query string cannot be read"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/api/v1/workitems?"+tc.query, nil)
			rec := httptest.NewRecorder()
			httpapi.StrictQuery(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusNoContent)
			})).ServeHTTP(rec, req)
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			if tc.msg != "" {
				body := errorBody(t, rec)
				require.Equal(t, bot.EINVALID, body.Code)
				require.Contains(t, body.Error, tc.msg)
			}
		})
	}
}

func TestGuard(t *testing.T) {
	loopback, err := httpapi.NewSite("127.0.0.1:8080", "")
	require.NoError(t, err)
	public, err := httpapi.NewSite("0.0.0.0:8080", "https://switchyard.example.com")
	require.NoError(t, err)
	lan, err := httpapi.NewSite("10.1.2.3:9000", "http://bot.internal:8443/")
	require.NoError(t, err)
	tests := []struct {
		name    string
		site    *httpapi.Site
		host    string
		headers map[string]string
		ok      bool
	}{
		{"listen address", loopback, "127.0.0.1:8080", nil, true},
		{"localhost", loopback, "localhost:8080", nil, true},
		{"localhost in capitals", loopback, "LOCALHOST:8080", nil, true},
		{"ipv6 loopback", loopback, "[::1]:8080", nil, true},
		{"another loopback address", loopback, "127.0.0.2:8080", nil, true},
		{"rebound name", loopback, "evil.example:8080", nil, false},
		{"other port", loopback, "127.0.0.1:9999", nil, false},
		{"no port", loopback, "localhost", nil, false},
		{"own origin", loopback, "127.0.0.1:8080", map[string]string{"Origin": "http://localhost:8080"}, true},
		{"foreign origin", loopback, "127.0.0.1:8080", map[string]string{"Origin": "http://evil.example"}, false},
		{"origin of another port", loopback, "127.0.0.1:8080", map[string]string{"Origin": "http://localhost:3000"}, false},
		{"https origin of the listen address", loopback, "127.0.0.1:8080", map[string]string{"Origin": "https://127.0.0.1:8080"}, false},
		{"null origin", loopback, "127.0.0.1:8080", map[string]string{"Origin": "null"}, false},
		{"empty origin", loopback, "127.0.0.1:8080", map[string]string{"Origin": ""}, false},
		{"cross-site fetch", loopback, "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "cross-site"}, false},
		{"same-site fetch", loopback, "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "same-site"}, false},
		{"same-origin fetch", loopback, "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "same-origin"}, true},
		{"typed in the address bar", loopback, "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "none"}, true},
		{"referer of another site", loopback, "127.0.0.1:8080", map[string]string{"Referer": "http://evil.example/page?x=1"}, false},
		{"referer of another port", loopback, "127.0.0.1:8080", map[string]string{"Referer": "http://localhost:3000/"}, false},
		{"referer that is no address", loopback, "127.0.0.1:8080", map[string]string{"Referer": "::not a url"}, false},
		{"referer of a page of its own", loopback, "127.0.0.1:8080", map[string]string{"Referer": "http://localhost:8080/admin/rules?edit=rule_1"}, true},
		{"own origin, a referer elsewhere: the origin says", loopback, "127.0.0.1:8080", map[string]string{"Origin": "http://localhost:8080", "Referer": "http://evil.example/"}, true},
		{"public host", public, "switchyard.example.com", nil, true},
		{"public page as referer", public, "switchyard.example.com", map[string]string{"Referer": "https://switchyard.example.com/admin/"}, true},
		{"public name over http as referer", public, "switchyard.example.com", map[string]string{"Referer": "http://switchyard.example.com/admin/"}, false},
		{"public host with port", public, "switchyard.example.com:443", nil, true},
		{"public origin", public, "switchyard.example.com", map[string]string{"Origin": "https://switchyard.example.com"}, true},
		{"public name over http", public, "switchyard.example.com", map[string]string{"Origin": "http://switchyard.example.com"}, false},
		{"every address: an address literal", public, "192.168.1.7:8080", nil, true},
		{"every address: loopback", public, "localhost:8080", nil, true},
		{"every address: a name", public, "evil.example:8080", nil, false},
		{"lan address", lan, "10.1.2.3:9000", nil, true},
		{"lan public url", lan, "bot.internal:8443", map[string]string{"Origin": "http://bot.internal:8443"}, true},
		{"lan: loopback is not it", lan, "127.0.0.1:9000", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/api/v1/messages", nil)
			req.Host = tt.host
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			called := false
			rec := httptest.NewRecorder()
			httpapi.Guard(func() *httpapi.Site { return tt.site }, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				called = true
				w.WriteHeader(http.StatusNoContent)
			})).ServeHTTP(rec, req)
			require.Equal(t, tt.ok, called)
			if !tt.ok {
				require.Equal(t, http.StatusForbidden, rec.Code)
				body := errorBody(t, rec)
				require.Equal(t, bot.EFORBIDDEN, body.Code)
				require.NotEmpty(t, body.Error)
				require.NotContains(t, body.Error, "x=1", "of a page's address an error shows its origin only")
			}
		})
	}
	_, err = httpapi.NewSite("nonsense", "")
	require.Error(t, err)
}

func TestRedactMasksAnswers(t *testing.T) {
	r := bot.NewRedactor("configured-secret-value")
	h := httpapi.Redact(r, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/text" {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusTeapot)
			fmt.Fprint(w, "configured-secret-value")
			return
		}
		httpapi.JSON(w, http.StatusCreated, map[string]string{"text": "key configured-secret-value", "url": "http://u:p"})
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/json", nil))
	require.Equal(t, http.StatusCreated, rec.Code)
	require.JSONEq(t, `{"text":"key [REDACTED]","url":"http://u:p"}`, rec.Body.String())
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/text", nil))
	require.Equal(t, http.StatusTeapot, rec.Code)
	require.Equal(t, "[REDACTED]", rec.Body.String())
}

type decodeTarget struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
	Inner struct {
		Flag bool `json:"flag"`
	} `json:"inner"`
}

// bodyOfSize returns a valid JSON object of exactly n bytes.
func bodyOfSize(n int) string {
	const frame = `{"name":""}`
	return `{"name":"` + strings.Repeat("a", n-len(frame)) + `"}`
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name string
		body string
		want decodeTarget
		code string   // "" for success
		msg  []string // parts of the error message
	}{
		{name: "valid", body: `{"name":"ana","count":2,"inner":{"flag":true}}`,
			want: decodeTarget{Name: "ana", Count: 2, Inner: struct {
				Flag bool `json:"flag"`
			}{Flag: true}}},
		{name: "trailing whitespace", body: "{\"name\":\"ana\"}\n\t ", want: decodeTarget{Name: "ana"}},
		{name: "exactly MaxBody", body: bodyOfSize(httpapi.MaxBody), want: decodeTarget{Name: strings.Repeat("a", httpapi.MaxBody-len(`{"name":""}`))}},
		{name: "unknown field", body: `{"name":"ana","colour":"red"}`,
			code: bot.EINVALID, msg: []string{"unknown field", `"colour"`}},
		{name: "unknown nested field", body: `{"inner":{"flag":true,"extra":1}}`,
			code: bot.EINVALID, msg: []string{"unknown field", `"extra"`}},
		{name: "wrong type", body: `{"count":"two"}`,
			code: bot.EINVALID, msg: []string{`field "count": want an integer, got a string`}},
		{name: "a fraction for an integer", body: `{"count":1.5}`,
			code: bot.EINVALID, msg: []string{`field "count": want an integer, got the number 1.5`}},
		{name: "wrong nested type", body: `{"inner":{"flag":"yes"}}`,
			code: bot.EINVALID, msg: []string{`field "inner.flag": want true or false, got a string`}},
		{name: "a list for a string", body: `{"name":["ana"]}`,
			code: bot.EINVALID, msg: []string{`field "name": want a string, got a list`}},
		{name: "a list for the body", body: `[{"name":"ana"}]`,
			code: bot.EINVALID, msg: []string{`malformed JSON: want an object, got a list`}},
		{name: "syntax error", body: `{"name":ana}`,
			code: bot.EINVALID, msg: []string{"malformed JSON at byte"}},
		{name: "empty body", body: ``,
			code: bot.EINVALID, msg: []string{"empty body"}},
		{name: "truncated", body: `{"name":"an`,
			code: bot.EINVALID, msg: []string{"ends too early"}},
		{name: "second object", body: `{"name":"a"}{"name":"b"}`,
			code: bot.EINVALID, msg: []string{"unexpected data after the object"}},
		{name: "trailing garbage", body: `{"name":"a"} x`,
			code: bot.EINVALID, msg: []string{"malformed JSON"}},
		{name: "one byte over MaxBody", body: bodyOfSize(httpapi.MaxBody + 1),
			code: bot.ETOOLARGE, msg: []string{fmt.Sprintf("over %d bytes", httpapi.MaxBody)}},
		{name: "a field twice", body: `{"name":"ana","name":"bob"}`,
			code: bot.EINVALID, msg: []string{`field "name" is given twice`}},
		{name: "a field twice in another case", body: `{"name":"ana","Name":"bob"}`,
			code: bot.EINVALID, msg: []string{`field "Name" is given twice`}},
		{name: "a nested field twice", body: `{"inner":{"flag":true,"FLAG":false}}`,
			code: bot.EINVALID, msg: []string{`field "FLAG" is given twice`}},
		{name: "one name in two objects", body: `{"name":"ana","inner":{"flag":true},"count":1}`,
			want: decodeTarget{Name: "ana", Count: 1, Inner: struct {
				Flag bool `json:"flag"`
			}{Flag: true}}},
		{name: "small object, oversized trailing whitespace", body: `{"name":"a"}` + strings.Repeat(" ", httpapi.MaxBody),
			code: bot.ETOOLARGE, msg: []string{fmt.Sprintf("over %d bytes", httpapi.MaxBody)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/api/v1/explain", strings.NewReader(tt.body))
			var got decodeTarget
			err := httpapi.Decode(httptest.NewRecorder(), req, &got)
			if tt.code == "" {
				require.NoError(t, err)
				require.Equal(t, tt.want, got)
				return
			}
			require.Error(t, err)
			require.Equal(t, tt.code, bot.ErrorCode(err), "error: %v", err)
			for _, part := range tt.msg {
				require.Contains(t, bot.ErrorMessage(err), part)
			}
		})
	}
}

func TestLimit(t *testing.T) {
	tests := []struct {
		name  string
		query string // raw value of limit; "-" leaves it out
		want  int
		bad   bool
	}{
		{"absent", "-", 0, false},
		{"empty", "", 0, false},
		{"one", "1", 1, false},
		{"max", "50", 50, false},
		{"zero", "0", 0, true},
		{"negative", "-3", 0, true},
		{"over max", "51", 0, true},
		{"not a number", "abc", 0, true},
		{"number then letters", "10abc", 0, true},
		{"exponent", "1e2", 0, true},
		{"hex", "0x10", 0, true},
		{"two numbers", "5 6", 0, true},
		{"leading space", " 7", 0, true},
		{"fraction", "2.5", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := "/api/v1/workitems"
			if tt.query != "-" {
				target += "?limit=" + url.QueryEscape(tt.query)
			}
			n, err := httpapi.Limit(httptest.NewRequest(http.MethodGet, target, nil), 50)
			if !tt.bad {
				require.NoError(t, err)
				require.Equal(t, tt.want, n)
				return
			}
			require.Error(t, err)
			require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
			require.Contains(t, bot.ErrorMessage(err), "limit")
			require.Contains(t, bot.ErrorMessage(err), "1 to 50")
		})
	}
}

func TestUnreachableSaysWhyOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer slow.Close()
	for _, tc := range []struct {
		url    string
		client *http.Client
		want   string
	}{
		{"http://" + addr + "/api/v1/messages", http.DefaultClient, "connection refused"},
		{slow.URL, &http.Client{Timeout: 50 * time.Millisecond}, "no answer in time"},
	} {
		_, err := tc.client.Post(tc.url, "application/json", nil)
		require.Error(t, err)
		require.Equal(t, tc.want, httpapi.Unreachable(err), err.Error())
	}
}

// A request no endpoint takes is answered in JSON like every other error,
// with what the path allows; the endpoints themselves, HEAD where GET is,
// answer as they do.
func TestEndpointsAnswerWhatNoneTakesInJSON(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/workitems", func(w http.ResponseWriter, _ *http.Request) { httpapi.JSON(w, 200, []string{}) })
	mux.HandleFunc("GET /api/v1/workitems/{id}", func(w http.ResponseWriter, r *http.Request) {
		httpapi.JSON(w, 200, map[string]string{"id": r.PathValue("id")})
	})
	mux.HandleFunc("POST /api/v1/workitems/{id}/cancel", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	mux.HandleFunc("POST /api/v1/messages", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(202) })
	h := httpapi.Endpoints(mux)
	for _, tc := range []struct {
		method, path string
		status       int
		allow, msg   string
	}{
		{"GET", "/api/v1/workitems", 200, "", ""},
		{"HEAD", "/api/v1/workitems", 200, "", ""},
		{"GET", "/api/v1/workitems/wi_1", 200, "", ""},
		{"POST", "/api/v1/workitems/wi_1/cancel", 204, "", ""},
		{"POST", "/api/v1/messages", 202, "", ""},
		{"POST", "/api/v1/workitems", 405, "GET, HEAD", "/api/v1/workitems takes GET or HEAD, not POST"},
		{"DELETE", "/api/v1/workitems/wi_1", 405, "GET, HEAD", "/api/v1/workitems/wi_1 takes GET or HEAD, not DELETE"},
		{"OPTIONS", "/api/v1/workitems", 405, "GET, HEAD", "/api/v1/workitems takes GET or HEAD, not OPTIONS"},
		{"GET", "/api/v1/messages", 405, "POST", "/api/v1/messages takes POST, not GET"},
		{"HEAD", "/api/v1/messages", 405, "POST", "/api/v1/messages takes POST, not HEAD"},
		{"OPTIONS", "/api/v1/messages", 405, "POST", "/api/v1/messages takes POST, not OPTIONS"},
		{"GET", "/api/v1/workitems/wi_1/cancel", 405, "POST", "/api/v1/workitems/wi_1/cancel takes POST, not GET"},
		{"GET", "/api/v1/nope", 404, "", "no endpoint /api/v1/nope in this API"},
		{"OPTIONS", "/api/v2/workitems", 404, "", "no endpoint /api/v2/workitems in this API"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			require.Equal(t, tc.allow, rec.Header().Get("Allow"))
			if tc.msg == "" {
				return
			}
			require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			body := errorBody(t, rec)
			require.Equal(t, tc.msg, body.Error)
			if tc.status == 404 {
				require.Equal(t, bot.ENOTFOUND, body.Code)
			} else {
				require.Equal(t, httpapi.CodeMethodNotAllowed, body.Code)
			}
		})
	}
}
