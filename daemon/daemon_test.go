package daemon_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
	"github.com/switchyard/switchyard/integrations/local"
)

// noModelEnv is an environment where no model is found: no keys, and no
// Ollama where it is looked for.
func noModelEnv(name string) string {
	if name == "OLLAMA_HOST" {
		return "127.0.0.1:1"
	}
	return ""
}

// setupFor loads the built-in defaults as serve does, with the data in a
// temporary directory, changed by mutate.
func setupFor(t *testing.T, mutate func(*config.Config)) *daemon.Setup {
	t.Helper()
	dir := t.TempDir()
	s, err := daemon.Load(context.Background(), daemon.LoadOptions{Getenv: noModelEnv, Override: func(c *config.Config) {
		c.DataDir = dir
		c.Server.Listen = "127.0.0.1:0"
		if mutate != nil {
			mutate(c)
		}
	}})
	require.NoError(t, err)
	return s
}

type running struct {
	base  string
	token string
	stop  func()
}

// start runs a daemon on a free loopback port until the test ends.
func start(t *testing.T, mutate func(*daemon.Options)) *running {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	opts := daemon.Options{
		Setup:         setupFor(t, func(c *config.Config) { c.Server.Listen = ln.Addr().String() }),
		ShutdownGrace: time.Second,
	}
	if mutate != nil {
		mutate(&opts)
	}
	d, err := daemon.New(t.Context(), opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, ln) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
	t.Cleanup(stop)
	token := opts.APIToken
	if !token.IsSet() {
		token = opts.Setup.Config.Server.APIToken
	}
	if !token.IsSet() {
		token, err = daemon.ReadAPIToken(opts.Setup.Config.DataDir)
		require.NoError(t, err)
	}
	r := &running{base: "http://" + ln.Addr().String(), token: token.Reveal(), stop: stop}
	require.Eventually(t, func() bool { return r.status(t, "GET", "/readyz", "") == 200 }, 5*time.Second, 10*time.Millisecond)
	return r
}

func (r *running) do(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, r.base+path, strings.NewReader(body))
	require.NoError(t, err)
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

func (r *running) status(t *testing.T, method, path, body string) int {
	code, _ := r.do(t, method, path, body)
	return code
}

func TestSendRoutesPersistsAndReportsInTheThread(t *testing.T) {
	r := start(t, nil)
	code, body := r.do(t, "POST", "/api/v1/messages", `{"thread":"t1","text":"@Coder hi","user":"ana","id":"c-1"}`)
	require.Equal(t, http.StatusAccepted, code, string(body))
	var res local.MessageResponse
	require.NoError(t, json.Unmarshal(body, &res))
	require.Equal(t, "local:t1", res.Thread)
	require.False(t, res.Duplicate)
	require.Equal(t, bot.Route{Agent: "coder", Kind: bot.RouteMention, Reason: "mention @coder"}, res.Route)
	require.JSONEq(t, fmt.Sprintf(`{"work_item_id":%q,"thread":"local:t1","duplicate":false,"route":{"agent":"coder","kind":"mention","reason":"mention @coder","rule":""}}`, res.WorkItemID), string(body))

	var msgs []local.ThreadMessage
	require.Eventually(t, func() bool {
		code, body := r.do(t, "GET", "/api/v1/threads/t1/messages", "")
		require.Equal(t, 200, code)
		require.NoError(t, json.Unmarshal(body, &msgs))
		return len(msgs) == 2
	}, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, "status", msgs[0].Kind)
	require.Equal(t, "reply", msgs[1].Kind)
	require.Contains(t, msgs[1].Text, `agent "coder" has no model: set models.default`)

	// The same thread by its escaped session key.
	code, _ = r.do(t, "GET", "/api/v1/threads/"+url.PathEscape("local:t1")+"/messages", "")
	require.Equal(t, 200, code)

	// The reply is queued before the job is recorded finished (a crash in
	// between retries the job), so the status follows a moment later.
	var detail map[string]any
	require.Eventually(t, func() bool {
		code, body := r.do(t, "GET", "/api/v1/workitems/"+res.WorkItemID, "")
		require.Equal(t, 200, code)
		require.NoError(t, json.Unmarshal(body, &detail))
		return detail["status"] != "running"
	}, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, "failed", detail["status"])
	require.NotEmpty(t, detail["jobs"])

	code, body = r.do(t, "GET", "/api/v1/workitems?thread=t1&status=failed&limit=5", "")
	require.Equal(t, 200, code, string(body))
	var list struct{ Items []map[string]any }
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list.Items, 1)
	require.ElementsMatch(t, []string{"id", "thread", "status", "route", "parent_work_item_id", "created_at"}, keys(list.Items[0]))
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestSameClientIDConcurrentlyMakesOneWorkItem(t *testing.T) {
	r := start(t, nil)
	const n = 100
	results := make([]local.MessageResponse, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			code, body := r.do(t, "POST", "/api/v1/messages", `{"thread":"t","text":"@ops deploy","id":"same"}`)
			require.Equal(t, http.StatusAccepted, code)
			require.NoError(t, json.Unmarshal(body, &results[i]))
		})
	}
	wg.Wait()
	first := 0
	for _, res := range results {
		require.Equal(t, results[0].WorkItemID, res.WorkItemID, "every answer carries the one work item")
		if !res.Duplicate {
			first++
		}
	}
	require.Equal(t, 1, first, "exactly one answer is the original")
	code, body := r.do(t, "GET", "/api/v1/workitems?thread=t", "")
	require.Equal(t, 200, code)
	var list struct{ Items []any }
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list.Items, 1)
}

func TestAPIEdgeCases(t *testing.T) {
	r := start(t, nil)
	big := `{"text":"` + strings.Repeat("x", 2<<20) + `"}`
	tests := []struct {
		name, method, path, body string
		code                     int
		contains                 string
	}{
		{"body over 1 MiB", "POST", "/api/v1/messages", big, 413, "over 1048576 bytes"},
		{"malformed JSON", "POST", "/api/v1/messages", `{"text":`, 400, "malformed JSON"},
		{"wrong type", "POST", "/api/v1/messages", `{"text":5}`, 400, `field "text"`},
		{"unknown field", "POST", "/api/v1/messages", `{"txt":"hi"}`, 400, `unknown field "txt"`},
		{"missing text", "POST", "/api/v1/messages", `{"thread":"t"}`, 400, "text: required"},
		{"not a local thread", "POST", "/api/v1/messages", `{"thread":"github:o/r#1","text":"x"}`, 400, "local threads only"},
		{"bad thread key", "GET", "/api/v1/threads/" + url.PathEscape("irc:x") + "/messages", "", 400, "unknown source"},
		{"unknown work item", "GET", "/api/v1/workitems/wi_999", "", 404, "wi_999"},
		{"bad status filter", "GET", "/api/v1/workitems?status=sleeping", "", 400, `status "sleeping"`},
		{"bad limit", "GET", "/api/v1/workitems?limit=0", "", 400, "limit"},
		{"explain", "POST", "/api/v1/explain", `{"source":"local","kind":"local.message","text":"/deploy staging"}`, 200, `"reason": "command /deploy"`},
		{"ingress", "GET", "/api/v1/ingress", "", 200, "["},
		{"healthz", "GET", "/healthz", "", 200, "ok"},
		{"metrics", "GET", "/metrics", "", 200, "switchyard_queue_depth"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := r.do(t, tt.method, tt.path, tt.body)
			require.Equal(t, tt.code, code, string(body))
			text := string(body)
			if code >= 400 {
				var e struct{ Error, Code string }
				require.NoError(t, json.Unmarshal(body, &e))
				text = e.Error
			}
			require.Contains(t, text, tt.contains)
		})
	}
}

func TestAPITokenIsRequiredWhenSet(t *testing.T) {
	r := start(t, func(o *daemon.Options) { o.APIToken = "s3cret-token" })
	code, _ := r.do(t, "GET", "/api/v1/workitems", "")
	require.Equal(t, 200, code)
	anon := &running{base: r.base}
	code, body := anon.do(t, "GET", "/api/v1/workitems", "")
	require.Equal(t, 401, code)
	require.NotContains(t, string(body), "s3cret-token")
	wrong := &running{base: r.base, token: "nope"}
	require.Equal(t, 401, wrong.status(t, "GET", "/api/v1/workitems", ""))
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		code, body := anon.do(t, "GET", path, "")
		require.Equal(t, 200, code, "%s needs no token", path)
		require.NotContains(t, string(body), "s3cret-token")
	}
}

// With no token configured the daemon makes one at first start, private to
// its user, and keeps it; every /api/v1 call needs it, loopback included.
func TestTokenFileIsMadeOnceAndRequired(t *testing.T) {
	dir := t.TempDir()
	r := start(t, func(o *daemon.Options) { o.Setup.Config.DataDir = dir })
	path := filepath.Join(dir, daemon.APITokenFile)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	tok, err := daemon.ReadAPIToken(dir)
	require.NoError(t, err)
	raw, err := base64.RawURLEncoding.DecodeString(tok.Reveal())
	require.NoError(t, err, "URL-safe")
	require.Len(t, raw, 32)
	anon := &running{base: r.base}
	require.Equal(t, 401, anon.status(t, "GET", "/api/v1/workitems", ""))
	require.Equal(t, 200, r.status(t, "GET", "/api/v1/workitems", ""))
	r.stop()

	// A restart reuses it.
	again, err := daemon.LoadAPIToken(dir)
	require.NoError(t, err)
	require.Equal(t, tok.Reveal(), again.Reveal())

	// A file others may read is refused, naming the fix.
	require.NoError(t, os.Chmod(path, 0o644))
	_, err = daemon.ReadAPIToken(dir)
	require.ErrorContains(t, err, "chmod 600")
	_, err = daemon.New(t.Context(), daemon.Options{Setup: setupFor(t, func(c *config.Config) { c.DataDir = dir })})
	require.ErrorContains(t, err, "may be read by other users")
	require.NoError(t, os.Chmod(path, 0o600))
	require.NoError(t, os.WriteFile(path, []byte("\n"), 0o600))
	_, err = daemon.ReadAPIToken(dir)
	require.ErrorContains(t, err, "is empty")

	// A link in its place, to a token whoever planted it knows, is
	// refused, by the CLI and the daemon alike.
	planted := filepath.Join(t.TempDir(), "known")
	require.NoError(t, os.WriteFile(planted, []byte("known-to-mallory\n"), 0o600))
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.Symlink(planted, path))
	_, err = daemon.ReadAPIToken(dir)
	require.EqualError(t, err, path+" is a symbolic link, not a regular file: delete it and the daemon makes a new token at its next start")
	_, err = daemon.LoadAPIToken(dir)
	require.ErrorContains(t, err, "is a symbolic link, not a regular file")
	// So is a directory, said in words.
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.Mkdir(path, 0o700))
	_, err = daemon.ReadAPIToken(dir)
	require.ErrorContains(t, err, path+" is a directory, not a regular file")
}

// Daemons starting at once on an empty data directory agree on one token.
func TestTokenFileRace(t *testing.T) {
	dir := t.TempDir()
	toks := make([]bot.Secret, 8)
	var wg sync.WaitGroup
	for i := range toks {
		wg.Go(func() {
			tok, err := daemon.LoadAPIToken(dir)
			require.NoError(t, err)
			toks[i] = tok
		})
	}
	wg.Wait()
	for _, tok := range toks {
		require.Equal(t, toks[0].Reveal(), tok.Reveal())
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary files left behind")
}

func TestSecondDaemonOnTheSameDataFails(t *testing.T) {
	dir := t.TempDir()
	inDir := func(c *config.Config) { c.DataDir = dir }
	d, err := daemon.New(t.Context(), daemon.Options{Setup: setupFor(t, inDir)})
	require.NoError(t, err)
	defer d.Close()
	t0 := time.Now()
	_, err = daemon.New(t.Context(), daemon.Options{Setup: setupFor(t, inDir)})
	require.ErrorContains(t, err, "switchyard.db")
	require.ErrorContains(t, err, "locked by another process")
	require.Less(t, time.Since(t0), 5*time.Second)
}

// syncBuffer is a log sink the daemon's goroutines may write to at once.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A secret someone pastes into a message is stored as sent, but no API
// answer, thread message or log line shows it.
func TestSecretsNeverInAPIAnswersThreadsOrLogs(t *testing.T) {
	const configured = "configured-model-key-0123456789"
	const shaped = "glpat-AbCdEfGhIjKlMnOpQrSt"
	logs := &syncBuffer{}
	r := start(t, func(o *daemon.Options) {
		o.Setup.Config.Models = map[string]config.Model{"spare": {Provider: "openai", APIKey: configured, Model: "m"}}
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	code, body := r.do(t, "POST", "/api/v1/messages",
		`{"thread":"leak","text":"@coder use `+configured+` and `+shaped+`","id":"`+configured+`"}`)
	require.Equal(t, http.StatusAccepted, code, string(body))
	var res local.MessageResponse
	require.NoError(t, json.Unmarshal(body, &res))

	var answers []string
	require.Eventually(t, func() bool {
		code, body := r.do(t, "GET", "/api/v1/threads/leak/messages", "")
		require.Equal(t, 200, code)
		var msgs []local.ThreadMessage
		require.NoError(t, json.Unmarshal(body, &msgs))
		return len(msgs) == 2
	}, 5*time.Second, 20*time.Millisecond)
	for _, path := range []string{"/api/v1/threads/leak/messages", "/api/v1/workitems/" + res.WorkItemID,
		"/api/v1/workitems?thread=leak", "/api/v1/ingress"} {
		code, body := r.do(t, "GET", path, "")
		require.Equal(t, 200, code, path)
		require.True(t, json.Valid(body), path)
		answers = append(answers, string(body))
	}
	require.Contains(t, answers[1], "@coder use [REDACTED] and [REDACTED]")
	r.stop()
	for _, out := range append(answers, logs.String()) {
		require.NotContains(t, out, configured)
		require.NotContains(t, out, shaped)
	}
}

// A short API token, set on purpose, authenticates; the daemon warns that
// it could be guessed, naming where it was set and never the token.
func TestShortAPITokensWorkAndAreWarnedAbout(t *testing.T) {
	for _, tc := range []struct {
		name, setting string
		set           func(*daemon.Options)
	}{
		{"from the environment", "$SWITCHYARD_API_TOKEN", func(o *daemon.Options) { o.APIToken = "hunter2" }},
		{"in the config", "server.api_token", func(o *daemon.Options) { o.Setup.Config.Server.APIToken = "hunter2" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &syncBuffer{}
			r := start(t, func(o *daemon.Options) {
				tc.set(o)
				o.Logger = slog.New(slog.NewTextHandler(logs, nil))
			})
			r.token = "hunter2"
			require.Equal(t, http.StatusOK, r.status(t, "GET", "/api/v1/workitems", ""))
			r.token = "hunter3"
			require.Equal(t, http.StatusUnauthorized, r.status(t, "GET", "/api/v1/workitems", ""))
			r.stop()
			require.Contains(t, logs.String(), `level=WARN msg="API token shorter than 16 characters: anyone who can reach the listener could guess it`)
			require.Contains(t, logs.String(), "setting="+tc.setting)
			require.NotContains(t, logs.String(), "hunter2")
		})
	}
}

// /api/v1 answers only requests meant for it: from no other site, for this
// host, authenticated, with JSON bodies. A refused request stores nothing.
func TestAPIRefusesCrossSiteAndOddRequests(t *testing.T) {
	r := start(t, func(o *daemon.Options) {
		o.Setup.Config.Server.PublicURL = "https://switchyard.example.com"
		o.Setup.Config.Server.APITokens = []config.APIToken{{Name: "ana", Token: "ana-token-0123456789"}}
	})
	const msg = `{"thread":"x","text":"@coder delete everything"}`
	send := func(mutate func(*http.Request)) (int, string) {
		req, err := http.NewRequest("POST", r.base+"/api/v1/messages", strings.NewReader(msg))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+r.token)
		req.Header.Set("Content-Type", "application/json")
		mutate(req)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var e struct{ Error string }
		if resp.StatusCode >= 400 {
			require.NoError(t, json.Unmarshal(b, &e), string(b))
			return resp.StatusCode, e.Error
		}
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		name     string
		mutate   func(*http.Request)
		code     int
		contains string
	}{
		{"foreign origin", func(r *http.Request) { r.Header.Set("Origin", "http://evil.example") }, 403, `Origin "http://evil.example"`},
		{"null origin", func(r *http.Request) { r.Header.Set("Origin", "null") }, 403, "cross-site"},
		{"cross-site fetch", func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, 403, "cross-site"},
		{"no origin, sent from a page elsewhere", func(r *http.Request) { r.Header.Set("Referer", "http://evil.example/page") }, 403, "http://evil.example"},
		{"rebound host", func(r *http.Request) { r.Host = "evil.example:8080" }, 403, `Host "evil.example:8080"`},
		{"no token", func(r *http.Request) { r.Header.Del("Authorization") }, 401, "bearer token"},
		{"a form", func(r *http.Request) { r.Header.Set("Content-Type", "application/x-www-form-urlencoded") }, 415, "application/json"},
		{"text/plain", func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, 415, "application/json"},
		{"no content type", func(r *http.Request) { r.Header.Del("Content-Type") }, 415, "application/json"},
		{"a web page with the token still may not", func(r *http.Request) {
			r.Header.Set("Origin", "http://evil.example")
			r.Header.Set("Content-Type", "text/plain")
		}, 403, "cross-site"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := send(tt.mutate)
			require.Equal(t, tt.code, code, body)
			require.Contains(t, body, tt.contains)
		})
	}
	code, body := r.do(t, "GET", "/api/v1/workitems", "")
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"items":[]}`, string(body), "no refused request stored anything")
	code, body = r.do(t, "GET", "/api/v1/ingress", "")
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"items":[]}`, string(body))

	// What is the daemon's own passes: its origin, the public URL's host,
	// a named token.
	code, text := send(func(r *http.Request) {
		r.Header.Set("Origin", "http://localhost"+r.Host[strings.LastIndex(r.Host, ":"):])
	})
	require.Equal(t, 202, code, text)
	code, text = send(func(r *http.Request) {
		r.Host = "switchyard.example.com"
		r.Header.Set("Origin", "https://switchyard.example.com")
		r.Header.Set("Authorization", "Bearer ana-token-0123456789")
	})
	require.Equal(t, 202, code, text)
	// The webhooks and health endpoints come through proxies and keep
	// their own rules.
	req, err := http.NewRequest("GET", r.base+"/healthz", nil)
	require.NoError(t, err)
	req.Host = "proxy.internal"
	req.Header.Set("Origin", "http://evil.example")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
}

func TestListenErrorSaysTheAddressOnce(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	addr := taken.Addr().String()
	d, err := daemon.New(t.Context(), daemon.Options{Setup: setupFor(t, func(c *config.Config) { c.Server.Listen = addr })})
	require.NoError(t, err)
	err = d.ListenAndServe(context.Background())
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "listen on "+addr+": "), err.Error())
	require.Equal(t, 1, strings.Count(err.Error(), addr), err.Error())
	require.NotContains(t, err.Error(), "listen tcp")
}

// A console message's requester is whoever authenticated, by the name of
// their API token: the "user" a client writes is shown, never trusted.
func TestConsoleRequesterIsTheTokensName(t *testing.T) {
	const guestToken = "guest-token-0123456789"
	r := start(t, func(o *daemon.Options) {
		o.Setup.Config.Server.APITokens = []config.APIToken{{Name: "guest", Token: guestToken}}
		o.Setup.Config.Access.Local.Users = map[string]string{"guest": "read-only"}
	})
	for _, tc := range []struct {
		name, token, want string
	}{
		{"the daemon's own token", r.token, "admin"},
		{"a named token claiming another user", guestToken, "guest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := *r
			as.token = tc.token
			code, body := as.do(t, "POST", "/api/v1/messages", `{"thread":"who","text":"@coder hi","user":"admin"}`)
			require.Equal(t, http.StatusAccepted, code, string(body))
			var res local.MessageResponse
			require.NoError(t, json.Unmarshal(body, &res))
			code, body = r.do(t, "GET", "/api/v1/workitems/"+res.WorkItemID, "")
			require.Equal(t, http.StatusOK, code, string(body))
			var wi struct {
				Actor     string        `json:"actor"`
				Requester bot.Requester `json:"requester"`
			}
			require.NoError(t, json.Unmarshal(body, &wi))
			require.Equal(t, "admin", wi.Actor, "the thread shows the name the client wrote")
			require.Equal(t, bot.Requester{Source: bot.SourceLocal, ID: tc.want, Name: "admin"}, wi.Requester)
		})
	}
}

// Replicas on PostgreSQL share one API token: a daemon that would make a
// token file of its own refuses to start, saying what to set, before it
// connects to anything.
func TestPostgresNeedsASharedAPIToken(t *testing.T) {
	dir := t.TempDir()
	load := func(getenv func(string) string) (*daemon.Setup, error) {
		return daemon.Load(t.Context(), daemon.LoadOptions{Getenv: getenv, Override: func(c *config.Config) {
			c.DataDir = dir
			c.Server.Listen = "127.0.0.1:0"
			c.Storage = config.Storage{Driver: config.StoragePostgres, DSN: "postgres://switchyard:pw-not-shown@127.0.0.1:1/switchyard", MaxConns: 4}
		}})
	}
	// The check of the config refuses it, as config check does.
	_, err := load(noModelEnv)
	require.True(t, config.IsInvalid(err), "%v", err)
	require.ErrorContains(t, err, "storage.driver: is postgres: the replicas must share the API token, so set server.api_token")
	require.NotContains(t, err.Error(), "pw-not-shown")

	// A setup checked with the token in the environment still needs it
	// handed to the daemon.
	setup, err := load(func(name string) string {
		if name == "SWITCHYARD_API_TOKEN" {
			return "shared-token-0123456789"
		}
		return noModelEnv(name)
	})
	require.NoError(t, err)
	_, err = daemon.New(t.Context(), daemon.Options{Setup: setup})
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
	require.ErrorContains(t, err, "the replicas must share the API token, so set server.api_token")
	require.NotContains(t, err.Error(), "pw-not-shown")

	// With one, an unreachable database is said in words, without the
	// password, and nothing is written to the data directory.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = daemon.New(ctx, daemon.Options{Setup: setup, APIToken: "shared-token-0123456789"})
	require.Equal(t, bot.EUNAVAILABLE, bot.ErrorCode(err), "%v", err)
	require.ErrorContains(t, err, "cannot reach the postgres database switchyard at 127.0.0.1:1")
	require.NotContains(t, err.Error(), "pw-not-shown")
	entries, _ := os.ReadDir(setup.Config.DataDir)
	require.Empty(t, entries)
}

// With no model in the config, the one the environment gives is checked
// where it came from: a variable of only white space is unset, and a bad
// value is named as the environment's, not as a models entry the user
// never wrote.
func TestTheModelTheEnvironmentGivesIsCheckedAsTheEnvironments(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   map[string]string
		found bool
		err   string
	}{
		{"nothing", nil, false, ""},
		{"a key of white space", map[string]string{"ANTHROPIC_API_KEY": "  ", "OPENAI_API_KEY": "\t"}, false, ""},
		{"an anthropic key", map[string]string{"ANTHROPIC_API_KEY": "sk-ant-0123"}, true, ""},
		{"an openai key", map[string]string{"OPENAI_API_KEY": "sk-0123", "OPENAI_BASE_URL": " http://127.0.0.1:1/v1 "}, true, ""},
		{"a base url that is not one", map[string]string{"OPENAI_API_KEY": "sk-0123", "OPENAI_BASE_URL": "notaurl"}, false,
			`<defaults>: models: none configured, and the model the environment gives cannot be used ($OPENAI_API_KEY, $OPENAI_BASE_URL, $OPENAI_MODEL): `},
		{"a base url of another scheme", map[string]string{"OPENAI_API_KEY": "sk-0123", "OPENAI_BASE_URL": "ftp://x/v1"}, false,
			`cannot be used ($OPENAI_API_KEY, $OPENAI_BASE_URL, $OPENAI_MODEL): `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := daemon.Load(t.Context(), daemon.LoadOptions{Getenv: func(name string) string {
				if v, ok := tc.env[name]; ok {
					return v
				}
				return noModelEnv(name)
			}, Override: func(c *config.Config) { c.DataDir = t.TempDir() }})
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.NotContains(t, err.Error(), "models.default", "the user wrote no models entry")
				require.NotContains(t, err.Error(), "sk-0123")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.found, s.ModelFound, s.ModelNote)
		})
	}
}
