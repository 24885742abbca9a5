package daemon_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
)

// No page of the admin UI and no answer of the API shows a configured
// secret (model keys, the GitHub App's key and webhook secret, Slack's
// tokens, API tokens, users' password hashes), in any spelling a page could
// write it in, not even when someone pastes them into a message.
func TestAdminUIAndAPINeverShowConfiguredSecrets(t *testing.T) {
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
	const (
		modelKey   = "sk-model+key/0123456789abcdefghij"
		hookSecret = "github&hook<secret>0123456789"
		botToken   = "xoxb-1111-2222-abcdefghijklmnop"
		signing    = "slack'signing\"secret0123456789"
		bobToken   = "bob-token+0123456789/abc"
		password   = "correct horse battery staple"
	)
	ana := adminUser(t, "ana", password)
	r := start(t, func(o *daemon.Options) {
		c := o.Setup.Config
		c.Models = map[string]config.Model{"spare": {Provider: "openai", APIKey: modelKey, Model: "m"}}
		c.GitHub = &config.GitHub{AppID: 1, PrivateKey: bot.Secret(pemKey), WebhookSecret: hookSecret, AppSlug: "switchyard",
			APIURL: platform.URL + "/github", MinPermission: "write"}
		c.Slack = &config.Slack{Mode: config.SlackHTTP, BotToken: botToken, SigningSecret: signing, APIURL: platform.URL + "/slack/"}
		c.Server.APITokens = []config.APIToken{{Name: "bob", Token: bobToken}}
		c.Admin.Users = []config.AdminUser{ana}
	})
	secrets := map[string]string{
		"model key": modelKey, "webhook secret": hookSecret, "bot token": botToken, "signing secret": signing,
		"bob's token": bobToken, "the daemon's token": r.token, "ana's hash": ana.PasswordHash.Reveal(),
	}
	for i, line := range strings.Split(pemKey, "\n") {
		if i > 0 && len(line) == 64 { // a line of the key's body
			secrets["the App's key"] = line
			break
		}
	}
	// A message that holds them all, as someone might paste them.
	var pasted []string
	for _, s := range secrets {
		pasted = append(pasted, s)
	}
	body, err := json.Marshal(map[string]string{"thread": "leak", "text": "@triage " + strings.Join(pasted, " and "), "id": "leak-1"})
	require.NoError(t, err)
	code, out := r.do(t, "POST", "/api/v1/messages", string(body))
	require.Equal(t, http.StatusAccepted, code, "%s", out)
	var made struct {
		ID string `json:"work_item_id"`
	}
	require.NoError(t, json.Unmarshal(out, &made))

	leaks := func(where, answer string) {
		t.Helper()
		for name, s := range secrets {
			for _, spelled := range []string{s, html.EscapeString(s), strings.ReplaceAll(html.EscapeString(s), "+", "&#43;"),
				url.QueryEscape(s), strings.ToLower(url.QueryEscape(s)), strings.Trim(jsonString(t, s), `"`)} {
				require.NotContains(t, answer, spelled, "%s shows %s", where, name)
			}
		}
	}
	api := []string{"/api/v1/agents", "/api/v1/agents/triage", "/api/v1/rules", "/api/v1/skills", "/api/v1/packages",
		"/api/v1/workitems", "/api/v1/workitems/" + made.ID, "/api/v1/audit", "/api/v1/approvals?all=true", "/api/v1/ingress",
		"/api/v1/runs", "/api/v1/threads/leak/messages", "/readyz", "/healthz", "/metrics"}
	for _, path := range api {
		code, out := r.do(t, "GET", path, "")
		require.Less(t, code, 500, "%s: %s", path, out)
		leaks(path, string(out))
	}
	c := newAdminClient(t, r.base)
	resp, _ := c.signIn(url.Values{"name": {"ana"}, "password": {password}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	pages := []string{"/admin/workitems", "/admin/workitems/" + made.ID, "/admin/workitems/" + made.ID + "/live", "/admin/workitems/rows",
		"/admin/rules", "/admin/skills", "/admin/scopes", "/admin/scopes?org=acme&repo=acme/web&agent=triage", "/admin/agents",
		"/admin/approvals?all=true", "/admin/budgets", "/admin/audit", "/admin/signin"}
	for _, path := range pages {
		var live map[string]string
		if strings.HasSuffix(path, "/live") || strings.HasSuffix(path, "/rows") {
			live = map[string]string{"X-Live": "1"}
		}
		resp, page := c.do("GET", path, nil, live)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, page)
		leaks(path, page)
	}
	_, page := c.do("GET", "/admin/workitems/"+made.ID, nil, nil)
	require.Contains(t, page, "[REDACTED]", "what was pasted is masked where it is shown")
}

func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b)
}
