package httpapi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

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
		{"unauthorized", bot.Errorf(bot.EUNAUTHORIZED, "bob may not decide"), http.StatusUnauthorized, bot.EUNAUTHORIZED, "bob may not decide"},
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

func TestRequireToken(t *testing.T) {
	const token = "s3cret-token"
	tests := []struct {
		name   string
		token  bot.Secret
		header string // Authorization; "" sends none
		ok     bool
	}{
		{"right token", token, "Bearer " + token, true},
		{"scheme in lower case", token, "bearer " + token, true},
		{"no header", token, "", false},
		{"wrong token", token, "Bearer nope", false},
		{"token is a prefix of the header", token, "Bearer " + token + "x", false},
		{"header is a prefix of the token", token, "Bearer " + token[:len(token)-1], false},
		{"trailing space", token, "Bearer " + token + " ", false},
		{"no scheme", token, token, false},
		{"other scheme", token, "Basic " + token, false},
		{"no token configured, no header", "", "", true},
		{"no token configured, any header", "", "Bearer whatever", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				called = true
				w.WriteHeader(http.StatusNoContent)
			})
			req := httptest.NewRequest(http.MethodGet, "/api/v1/workitems", nil)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			rec := httptest.NewRecorder()
			httpapi.RequireToken(tt.token, next).ServeHTTP(rec, req)

			require.Equal(t, tt.ok, called)
			if tt.ok {
				require.Equal(t, http.StatusNoContent, rec.Code)
				return
			}
			require.Equal(t, http.StatusUnauthorized, rec.Code)
			require.Equal(t, `Bearer realm="switchyard"`, rec.Header().Get("WWW-Authenticate"))
			body := errorBody(t, rec)
			require.Equal(t, bot.EUNAUTHORIZED, body.Code)
			require.NotEmpty(t, body.Error)
			require.NotContains(t, rec.Body.String(), token)
		})
	}
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
			code: bot.EINVALID, msg: []string{`field "count"`, "want int", "got string"}},
		{name: "wrong nested type", body: `{"inner":{"flag":"yes"}}`,
			code: bot.EINVALID, msg: []string{`"inner.flag"`, "want bool"}},
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
