package daemon_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
)

// The admin UI's browser tests: one headless Chromium for all of them
// (each step opens its own tab in a fresh browser context, so cookies do
// not carry over), driving the real daemon started by the step. Screenshots
// go to $SWITCHYARD_SCREENSHOTS (default <tmp>/switchyard-admin-screenshots),
// or to docs/admin/ with SWITCHYARD_UPDATE_SCREENSHOTS=1.
func TestAdminUIInBrowser(t *testing.T) {
	b := newBrowser(t)
	for _, step := range []struct {
		name string
		run  func(t *testing.T, b *browser)
	}{
		{"sign in with a token, see the work items, sign out", browseSignIn},
		{"install a package, toggle a skill at repo scope, see the agent inherit it", browseSkillScopes},
		{"make a rule, see explain pick it, move it below another, delete it", browseRules},
	} {
		t.Run(step.name, func(t *testing.T) { step.run(t, b) })
	}
}

// browser is the one Chromium the browser tests share.
type browser struct {
	ctx   context.Context // the browser's
	shots string          // where screenshots go
}

// chromiumNames are the programs a Chromium is looked for as.
func chromiumNames() []string {
	return []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}
}

// newBrowser starts a headless Chromium for the test. Without one, the
// test fails under CI=true and is skipped elsewhere, saying how to install
// it.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := ""
	for _, name := range chromiumNames() {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		msg := "no Chromium found (looked for " + strings.Join(chromiumNames(), ", ") +
			"): the admin UI's browser tests need one; install it with: apt-get install -y chromium"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		fmt.Println("SKIP:", msg)
		t.Skip(msg)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 860),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// Start the browser now, so that a step's time is its own.
	require.NoError(t, chromedp.Do(ctx), "start %s", path)
	shots := os.Getenv("SWITCHYARD_SCREENSHOTS")
	switch {
	case os.Getenv("SWITCHYARD_UPDATE_SCREENSHOTS") == "1":
		shots = filepath.Join("..", "docs", "admin")
	case shots == "":
		shots = filepath.Join(os.TempDir(), "switchyard-admin-screenshots")
	}
	require.NoError(t, os.MkdirAll(shots, 0o755))
	t.Logf("admin UI screenshots in %s", shots)
	return &browser{ctx: ctx, shots: shots}
}

// tab opens a tab of its own browser context (no cookies of other steps)
// for the rest of the test, every action bounded by a minute.
func (b *browser) tab(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, time.Minute)
	t.Cleanup(cancelTimeout)
	return ctx
}

// do runs steps in tab, failing the test on an error.
func (b *browser) do(t *testing.T, tab context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	require.NoError(t, chromedp.Do(tab, steps...))
}

// text is the visible text of the first element sel selects.
func (b *browser) text(t *testing.T, tab context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(t, err, "text of %s", sel)
	return s
}

// shot saves a screenshot of the page as name.png.
func (b *browser) shot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	require.NoError(t, err, "screenshot %s", name)
	require.NoError(t, os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644))
}

// signIn signs in at base with an API token and waits for the work items.
func (b *browser) signIn(t *testing.T, tab context.Context, base, token string) {
	t.Helper()
	b.do(t, tab,
		chromedp.Navigate(base+"/admin/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("#identity")),
	)
}

func browseSignIn(t *testing.T, b *browser) {
	tr := startTree(t, newFakeModel(t, func(context.Context, chatRequest) reply { return reply{Text: "done"} }), treeOptions{})
	id := tr.send(t, "ops", "@lead look at the deploy")
	tr.finished(t, id, 30*time.Second)

	tab := b.tab(t)
	// A wrong token is refused on the form.
	b.do(t, tab,
		chromedp.Navigate(tr.base+"/admin/workitems"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), "not-the-token-at-all"),
		chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("#error")),
	)
	require.Equal(t, "Wrong token.", b.text(t, tab, "#error"))
	b.shot(t, tab, "signin")

	b.signIn(t, tab, tr.base, tr.token)
	require.Equal(t, "admin", b.text(t, tab, "#identity"))
	b.do(t, tab, chromedp.WaitVisible(chromedp.CSS(`#workitems tr[data-id="`+id+`"]`)))
	row := b.text(t, tab, `#workitems tr[data-id="`+id+`"]`)
	require.Contains(t, row, "local:ops")
	require.Contains(t, row, "lead")
	require.Contains(t, row, "done")
	b.shot(t, tab, "workitems")

	// Signed out, the pages lead to the sign-in form again.
	b.do(t, tab,
		chromedp.Click(chromedp.CSS(".signout button")),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.Navigate(tr.base+"/admin/workitems"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
	)
}

// adminClient speaks to the admin UI as a browser would, holding its
// cookies, without following redirects.
type adminClient struct {
	t       *testing.T
	base    string
	cookies map[string]*http.Cookie
}

func newAdminClient(t *testing.T, base string) *adminClient {
	return &adminClient{t: t, base: base, cookies: map[string]*http.Cookie{}}
}

// do sends a request with the client's cookies and keeps the ones the
// answer sets; form, when not nil, is the urlencoded body.
func (c *adminClient) do(method, path string, form url.Values, header map[string]string) (*http.Response, string) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, body)
	require.NoError(c.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	for _, ck := range c.cookies {
		req.AddCookie(ck)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	for _, ck := range resp.Cookies() {
		if ck.MaxAge < 0 {
			delete(c.cookies, ck.Name)
		} else {
			c.cookies[ck.Name] = ck
		}
	}
	return resp, string(b)
}

var csrfInput = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// csrf is the CSRF token of a page's forms.
func (c *adminClient) csrf(page string) string {
	c.t.Helper()
	m := csrfInput.FindStringSubmatch(page)
	require.NotNil(c.t, m, "no CSRF token in the page:\n%s", page)
	return m[1]
}

// signIn signs in with form (token, or name and password) through the
// sign-in form and returns the answer.
func (c *adminClient) signIn(form url.Values) (*http.Response, string) {
	c.t.Helper()
	_, page := c.do("GET", "/admin/signin", nil, nil)
	form.Set("csrf_token", c.csrf(page))
	return c.do("POST", "/admin/signin", form, nil)
}

// adminUser is a user of the admin UI with a password, hashed at the
// lowest cost so the tests stay quick.
func adminUser(t *testing.T, name, password string) config.AdminUser {
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	require.NoError(t, err)
	return config.AdminUser{Name: name, PasswordHash: bot.Secret(h)}
}

func TestAdminUIRefusesWhoIsNotSignedInAndFormsWithoutTheirToken(t *testing.T) {
	r := start(t, func(o *daemon.Options) {
		o.Setup.Config.Admin.Users = []config.AdminUser{adminUser(t, "ana", "correct horse battery")}
	})

	anon := newAdminClient(t, r.base)
	// Without a session, a page leads to the sign-in form, and anything
	// else is refused.
	resp, _ := anon.do("GET", "/admin/workitems?status=done", nil, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/admin/signin?next=%2Fadmin%2Fworkitems%3Fstatus%3Ddone", resp.Header.Get("Location"))
	resp, _ = anon.do("GET", "/admin/workitems/rows", nil, map[string]string{"X-Live": "1"})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = anon.do("POST", "/admin/signout", url.Values{}, nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	// A session id nobody was given is no session.
	anon.cookies["switchyard_session"] = &http.Cookie{Name: "switchyard_session", Value: "made-up"}
	resp, _ = anon.do("GET", "/admin/workitems", nil, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	// Every answer carries the security headers.
	resp, page := newAdminClient(t, r.base).do("GET", "/admin/signin", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
		require.Contains(t, csp, want)
	}
	require.NotContains(t, csp, "unsafe-inline")
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	require.Equal(t, "same-origin", resp.Header.Get("Referrer-Policy"))
	require.NotContains(t, page, "<script>", "no inline script")
	require.NotContains(t, page, "style=", "no inline style")

	// A wrong password, an unknown name and a wrong token are refused,
	// and start no session.
	for _, form := range []url.Values{
		{"name": {"ana"}, "password": {"correct horse"}},
		{"name": {"bob"}, "password": {"correct horse battery"}},
		{"token": {"not-a-token-of-this-daemon"}},
	} {
		c := newAdminClient(t, r.base)
		resp, page := c.signIn(form)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%v", form)
		require.Regexp(t, `Wrong (name or password|token)\.`, page)
		require.NotContains(t, c.cookies, "switchyard_session")
	}
	// The sign-in form without its own token is refused.
	c := newAdminClient(t, r.base)
	resp, _ = c.do("POST", "/admin/signin", url.Values{"token": {r.token}}, nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.NotContains(t, c.cookies, "switchyard_session")

	// The right password starts a session in a cookie scripts cannot read
	// and other sites cannot send, and leads where the form was asked from.
	c = newAdminClient(t, r.base)
	form := url.Values{"name": {"ana"}, "password": {"correct horse battery"}, "next": {"/admin/workitems?status=done"}}
	resp, _ = c.signIn(form)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/admin/workitems?status=done", resp.Header.Get("Location"))
	sess := c.cookies["switchyard_session"]
	require.NotNil(t, sess)
	require.True(t, sess.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, sess.SameSite)
	require.False(t, sess.Secure, "served over plain http with no https public_url")
	require.Len(t, sess.Value, 43, "32 random bytes")
	resp, page = c.do("GET", "/admin/workitems", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, `<span id="identity">ana</span>`)

	// A form sent without its CSRF token, or with another session's, is
	// refused and changes nothing.
	other := newAdminClient(t, r.base)
	_, _ = other.signIn(url.Values{"token": {r.token}})
	_, otherPage := other.do("GET", "/admin/workitems", nil, nil)
	for _, token := range []string{"", other.csrf(otherPage)} {
		resp, page = c.do("POST", "/admin/signout", url.Values{"csrf_token": {token}}, nil)
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
		require.Contains(t, page, "CSRF token")
	}
	resp, _ = c.do("GET", "/admin/workitems", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "still signed in")

	// Another site's request is refused before anything else.
	resp, _ = c.do("GET", "/admin/workitems", nil, map[string]string{"Sec-Fetch-Site": "cross-site"})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp, _ = c.do("POST", "/admin/signout", url.Values{"csrf_token": {c.csrf(page)}}, map[string]string{"Origin": "https://evil.example"})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	// Signing out ends the session: its cookie no longer signs in.
	_, page = c.do("GET", "/admin/workitems", nil, nil)
	kept := *c.cookies["switchyard_session"]
	resp, _ = c.do("POST", "/admin/signout", url.Values{"csrf_token": {c.csrf(page)}}, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	c.cookies["switchyard_session"] = &kept
	resp, _ = c.do("GET", "/admin/workitems", nil, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
}

func TestAdminUICookiesAreSecureBehindAnHTTPSPublicURL(t *testing.T) {
	r := start(t, func(o *daemon.Options) { o.Setup.Config.Server.PublicURL = "https://switchyard.example.com" })
	c := newAdminClient(t, r.base)
	resp, _ := c.signIn(url.Values{"token": {r.token}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.True(t, c.cookies["switchyard_session"].Secure)
}
