package github

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
)

// countingBody is a request body that counts what the handler read of it,
// sending n bytes of spaces (endless when n is negative).
type countingBody struct {
	n    int64
	read int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.n == 0 {
		return 0, io.EOF
	}
	k := int64(len(p))
	if b.n > 0 {
		k = min(k, b.n)
		b.n -= k
	}
	for i := range k {
		p[i] = ' '
	}
	b.read += k
	return int(k), nil
}

// A request that cannot be GitHub's by its headers alone (no signature,
// SHA-1 only, GitHub's digits in upper case or with spaces, two signatures,
// or no secret configured to check one with) is refused 401 before a byte of
// its body is read, however large it says it is; a body that keeps coming
// without a length is refused 413 once it passes 25 MiB.
func TestDeliveriesThatCannotBeGitHubsAreRefusedUnread(t *testing.T) {
	const hexSig = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name     string
		secret   string
		sigs     []string
		announce int64
	}{
		{"no signature", testSecret, nil, MaxWebhookBody},
		{"SHA-1 alone", testSecret, []string{"sha1=0123456789abcdef0123456789abcdef01234567"}, -1},
		{"upper-case digits", testSecret, []string{"sha256=" + strings.ToUpper(hexSig)}, -1},
		{"upper-case algorithm", testSecret, []string{"SHA256=" + hexSig}, -1},
		{"a space after the equals sign", testSecret, []string{"sha256= " + hexSig}, -1},
		{"a space after the digits", testSecret, []string{"sha256=" + hexSig + " "}, -1},
		{"two signatures", testSecret, []string{"sha256=" + hexSig, "sha256=" + hexSig}, -1},
		{"63 digits", testSecret, []string{"sha256=" + hexSig[1:]}, -1},
		{"no secret configured", "", []string{"sha256=" + hexSig}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(o *WebhookOptions, _ *GateOptions) { o.Secret = bot.Secret(tc.secret) })
			body := &countingBody{n: -1}
			req := httptest.NewRequest(http.MethodPost, "/webhooks/github", body)
			req.ContentLength = tc.announce
			req.Header.Set("X-GitHub-Event", "issue_comment")
			req.Header.Set("X-GitHub-Delivery", "d-1")
			for _, s := range tc.sigs {
				req.Header.Add("X-Hub-Signature-256", s)
			}
			code, a := e.serve(req)
			require.Equal(t, http.StatusUnauthorized, code)
			require.Equal(t, "missing or wrong X-Hub-Signature-256", a.Error)
			require.Zero(t, body.read, "nothing of the body is read")
		})
	}

	e := newEnv(t)
	body := &countingBody{n: -1}
	req := httptest.NewRequest(http.MethodPost, "/webhooks/github", body)
	req.ContentLength = -1 // chunked, endless
	req.Header.Set("X-GitHub-Event", "issue_comment")
	req.Header.Set("X-GitHub-Delivery", "d-endless")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hexSig)
	code, a := e.serve(req)
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
	require.Equal(t, "payload over 25 MiB", a.Error)
	require.LessOrEqual(t, body.read, int64(MaxWebhookBody+1<<20), "read no further than the limit")
	require.Empty(t, e.ingress())
}

// lockedLog is a log destination the handler and the test share.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Signed deliveries GitHub would never send, by class (a form naming its
// payload twice; members of the wrong type right by a comment's text;
// strings that end inside it; a number past int64): each is refused 400 as
// malformed, stores nothing, and logs why without a word of the payload,
// which may hold anything a person wrote. The next delivery is accepted.
func TestMalformedDeliveriesAreRefusedWithoutLoggingThePayload(t *testing.T) {
	const marker = "SECRETIVE-TEXT-OF-A-COMMENT"
	logs := &lockedLog{}
	e := newEnv(t, func(o *WebhookOptions, _ *GateOptions) {
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	e.gh.setPermission("octo/hello", "alice", "write", "write")
	good := issueCommentPayload("created", person("alice"), "@triage "+marker, nil).bytes(t)
	comment := `{"action":"created","issue":{"number":7},"repository":{"name":"hello","owner":{"login":"octo"}},"sender":{"login":"alice"},"comment":`
	for _, tc := range []struct {
		name, contentType, body string
	}{
		{"a form naming its payload twice", "application/x-www-form-urlencoded",
			url.Values{"payload": {string(good), `{"action":"deleted"}`}}.Encode()},
		{"a form that does not decode", "application/x-www-form-urlencoded", "payload=" + url.QueryEscape(string(good)) + "&%zz"},
		{"a comment id that is text", "application/json", comment + `{"id":"` + marker + `","body":"x"}}`},
		{"a body that is a number", "application/json", comment + `{"id":1,"body":12345678901234567890,"x":"` + marker + `"}}`},
		{"text cut inside a string", "application/json", comment + `{"id":1,"body":"` + marker},
		{"an escape that is not one", "application/json", comment + `{"id":1,"body":"\q ` + marker + `"}}`},
		{"a raw control character", "application/json", comment + `{"id":1,"body":"` + marker + "\x01" + `"}}`},
		{"an installation id past int64", "application/json", `{"installation":{"id":9223372036854775808},"action":"` + marker + `"}`},
		{"a number that is not one", "application/json", comment + `{"id":1e` + marker + `}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			req := httptest.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(body))
			req.Header.Set("Content-Type", tc.contentType)
			req.Header.Set("X-GitHub-Event", "issue_comment")
			req.Header.Set("X-GitHub-Delivery", "d-"+tc.name)
			req.Header.Set("X-Hub-Signature-256", sign(testSecret, body))
			code, a := e.serve(req)
			require.Equal(t, http.StatusBadRequest, code)
			require.Equal(t, "malformed payload", a.Error)
		})
	}
	require.Empty(t, e.workItems())
	require.Empty(t, e.ingress())
	require.Contains(t, logs.String(), "github delivery unreadable")
	require.NotContains(t, logs.String(), marker, "no log line carries the payload")

	code, a := e.post("issue_comment", "d-good", good)
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, "accepted", a.Status)
}

// Many connections each sending a large body without a valid signature hold
// at most the bodies' bound together: the daemon answers a delivery that
// does not fit 503 with Retry-After at once, still accepts GitHub's small
// deliveries, and once the senders are gone takes large ones again.
func TestUnverifiedBodiesArrivingAtOnceAreBounded(t *testing.T) {
	const limit = 4 << 20
	bodies := httpapi.NewBodies(limit)
	e := newEnv(t, func(o *WebhookOptions, _ *GateOptions) { o.Bodies = bodies })
	e.gh.setPermission("octo/hello", "alice", "write", "write")
	srv := httptest.NewServer(e.handler)
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")

	// Three clients announce 25 MiB, send 1 MiB of it under a made-up
	// signature, and keep the connection open.
	var conns []net.Conn
	for i := range 3 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		conns = append(conns, c)
		_, err = fmt.Fprintf(c, "POST /webhooks/github HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
			"X-GitHub-Event: push\r\nX-GitHub-Delivery: slow-%d\r\nX-Hub-Signature-256: sha256=%s\r\nContent-Length: %d\r\n\r\n",
			addr, i, strings.Repeat("ab", 32), MaxWebhookBody)
		require.NoError(t, err)
		_, err = c.Write(bytes.Repeat([]byte(" "), 1<<20))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return bodies.Held() >= 3<<20 }, 10*time.Second, 5*time.Millisecond,
		"the three bodies are being read")

	post := func(delivery string, payload []byte) (*http.Response, answer) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/github", bytes.NewReader(payload))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "issue_comment")
		req.Header.Set("X-GitHub-Delivery", delivery)
		req.Header.Set("X-Hub-Signature-256", sign(testSecret, payload))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var a answer
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&a))
		return resp, a
	}
	large := issueCommentPayload("created", person("alice"), "@triage "+strings.Repeat("x", 1<<20), nil).bytes(t)
	resp, a := post("d-large", large)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.Equal(t, "too many deliveries arriving at once; redeliver later", a.Error)
	require.LessOrEqual(t, bodies.Held(), int64(limit))

	resp, a = post("d-small", issueCommentPayload("created", person("alice"), "@triage small", nil).bytes(t))
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "a small delivery still fits")
	require.Equal(t, "accepted", a.Status)

	for _, c := range conns {
		require.NoError(t, c.Close())
	}
	require.Eventually(t, func() bool { return bodies.Held() == 0 }, 10*time.Second, 5*time.Millisecond,
		"what the senders held is free once they are gone")
	resp, a = post("d-large", large)
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Equal(t, "accepted", a.Status)
	require.Len(t, e.workItems(), 2)
}
