package daemon_test

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
)

// rawAnswer is what the daemon answered a request written byte for byte.
type rawAnswer struct {
	code   int
	header http.Header
	body   string
}

// sendRaw writes req on a connection of its own to addr, as a client that
// does not tidy up its paths and headers would, and reads the answer.
func sendRaw(t *testing.T, addr, req string) rawAnswer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
	_, err = io.WriteString(c, req)
	require.NoError(t, err)
	method, _, _ := strings.Cut(req, " ")
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return rawAnswer{resp.StatusCode, resp.Header, string(b)}
}

// The daemon's webhooks as someone on the internet finds them: every
// method but POST, paths near theirs, headers past the limit, and many
// connections at once posting what nobody signed. Each is answered in the
// 4xx with a short reason (or, for a path that cleans to a webhook's, sent
// to that webhook, whose checks then apply), nothing is stored, and the
// next request GitHub or Slack signs is served.
func TestWebhooksAnswerOutsidersAndServeTheNextGenuineRequest(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	platform := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasPrefix(r.URL.Path, "/slack/") {
			_, _ = w.Write([]byte(`{"ok":true,"user_id":"U0BOT","team_id":"T1","bot_id":"B1"}`))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"message":"Not Found"}`))
	}))
	t.Cleanup(platform.Close)
	const hookSecret, signingSecret = "github-hook-secret", "slack-signing-secret"
	r := start(t, func(o *daemon.Options) {
		c := o.Setup.Config
		c.GitHub = &config.GitHub{AppID: 1, PrivateKey: bot.Secret(pemKey), WebhookSecret: hookSecret, AppSlug: "switchyard",
			APIURL: platform.URL + "/github"}
		c.Slack = &config.Slack{Mode: config.SlackHTTP, BotToken: "xoxb-1-test", SigningSecret: signingSecret, APIURL: platform.URL + "/slack/"}
	})
	addr := strings.TrimPrefix(r.base, "http://")
	routes := []string{"/webhooks/github", "/slack/events", "/slack/commands", "/slack/interactions"}

	for _, method := range []string{"GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		for _, path := range routes {
			a := sendRaw(t, addr, method+" "+path+" HTTP/1.1\r\nHost: "+addr+"\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
			require.Equal(t, http.StatusMethodNotAllowed, a.code, "%s %s", method, path)
			require.Equal(t, "POST", a.header.Get("Allow"), "%s %s", method, path)
		}
	}
	post := func(path string, header string) rawAnswer {
		return sendRaw(t, addr, "POST "+path+" HTTP/1.1\r\nHost: "+addr+"\r\n"+header+"Content-Length: 2\r\nConnection: close\r\n\r\n{}")
	}
	for _, path := range []string{"/webhooks/github/", "/webhooks/GitHub", "/webhooks/github%2f", "/webhooks/%2e%2e/webhooks/github",
		"/slack/events/", "/slack/%2e/events", "/slack/", "/webhooks/", "/" + strings.Repeat("a", 64<<10)} {
		a := post(path, "")
		require.Equal(t, http.StatusNotFound, a.code, path[:min(len(path), 40)])
	}
	for path, clean := range map[string]string{"/webhooks/../webhooks/github": "/webhooks/github", "/webhooks//github": "/webhooks/github",
		"//webhooks/github": "/webhooks/github", "/slack/./events": "/slack/events", "/slack//commands": "/slack/commands"} {
		a := post(path, "X-Hub-Signature-256: sha256="+strings.Repeat("0", 64)+"\r\n")
		require.Equal(t, http.StatusTemporaryRedirect, a.code, path)
		require.Equal(t, clean, a.header.Get("Location"), "sent to the webhook itself, whose checks apply")
	}
	a := post("/webhooks/github", "X-Padding: "+strings.Repeat("a", 2<<20)+"\r\n")
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, a.code)

	// Many connections at once, each posting 64 KiB nobody signed.
	var wg sync.WaitGroup
	codes := make(chan int, 64)
	for i := range 64 {
		wg.Go(func() {
			path := routes[i%len(routes)]
			body := strings.Repeat("x", 64<<10)
			req, err := http.NewRequest(http.MethodPost, r.base+path, strings.NewReader(body))
			if err != nil {
				codes <- 0
				return
			}
			req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("ab", 32))
			req.Header.Set("X-GitHub-Event", "issue_comment")
			req.Header.Set("X-GitHub-Delivery", "forged-"+strconv.Itoa(i))
			req.Header.Set("X-Slack-Signature", "v0="+strings.Repeat("ab", 32))
			req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(time.Now().Unix(), 10))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				codes <- 0
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		require.Equal(t, http.StatusUnauthorized, code)
	}

	for _, path := range []string{"/api/v1/ingress", "/api/v1/workitems"} {
		code, body := r.do(t, "GET", path, "")
		require.Equal(t, http.StatusOK, code)
		var page struct {
			Items []json.RawMessage `json:"items"`
		}
		require.NoError(t, json.Unmarshal(body, &page))
		require.Empty(t, page.Items, "%s: nothing stored", path)
	}

	// GitHub's next delivery and Slack's next request are served.
	push := `{"ref":"refs/heads/main","repository":{"name":"hello","owner":{"login":"octo"}},"sender":{"login":"alice","type":"User"}}`
	mac := hmac.New(sha256.New, []byte(hookSecret))
	mac.Write([]byte(push))
	a = sendRaw(t, addr, fmt.Sprintf("POST /webhooks/github HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\n"+
		"X-GitHub-Delivery: genuine-1\r\nX-Hub-Signature-256: sha256=%s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		addr, hex.EncodeToString(mac.Sum(nil)), len(push), push))
	require.Equal(t, http.StatusAccepted, a.code, a.body)

	verify := `{"token":"x","challenge":"c-123","type":"url_verification"}`
	stamp := strconv.FormatInt(time.Now().Unix(), 10)
	mac = hmac.New(sha256.New, []byte(signingSecret))
	mac.Write([]byte("v0:" + stamp + ":" + verify))
	a = sendRaw(t, addr, fmt.Sprintf("POST /slack/events HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-Slack-Request-Timestamp: %s\r\n"+
		"X-Slack-Signature: v0=%s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		addr, stamp, hex.EncodeToString(mac.Sum(nil)), len(verify), verify))
	require.Equal(t, http.StatusOK, a.code, a.body)
	require.JSONEq(t, `{"challenge":"c-123"}`, a.body)
}
