package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/switchyard/switchyard/agents/policy"
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
		{"watch a run tree grow and finish while the model works", browseRunTree},
		{"approve and deny pending calls, refused to a non-approver, and find the denial in the audit log", browseApprovals},
		{"markup others wrote shows as text in every page and live part, and no script runs", browseHostileText},
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

// browseRunTree watches a work item's detail while its lead spawns a
// helper, which works until the test lets it finish: the page shows the
// helper running, then done, without being reloaded.
func browseRunTree(t *testing.T, b *browser) {
	release := make(chan struct{})
	model := newFakeModel(t, splitting(1, answerPart(func(ctx context.Context) {
		select {
		case <-release:
		case <-ctx.Done():
		}
	})))
	tr := startTree(t, model, treeOptions{workers: 2})
	id := tr.send(t, "split", "@lead do the part")
	wait, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.True(t, model.awaitInFlight(wait, "helper", 1), "the helper never started")

	tab := b.tab(t)
	b.signIn(t, tab, tr.base, tr.token)
	b.do(t, tab,
		chromedp.Navigate(tr.base+"/admin/workitems/"+id),
		chromedp.WaitVisible(chromedp.CSS(`#run-tree li[data-run] .status-running`)),
	)
	require.Contains(t, b.text(t, tab, "#run-tree"), "helper")
	require.Equal(t, "running", b.text(t, tab, "#status"))
	b.shot(t, tab, "runtree-running")
	// The page was loaded once: the tree changes as the helper finishes.
	var loads int
	loads, err := chromedp.Run(tab, chromedp.Evaluate[int](`performance.getEntriesByType("navigation").length`))
	require.NoError(t, err)

	close(release)
	tr.finished(t, id, time.Minute)
	b.do(t, tab,
		chromedp.WaitVisible(chromedp.CSS(`#run-tree li[data-run] .status-done`)),
		chromedp.WaitVisible(chromedp.CSS(`#status.status-done`)),
	)
	after, err := chromedp.Run(tab, chromedp.Evaluate[int](`performance.getEntriesByType("navigation").length`))
	require.NoError(t, err)
	require.Equal(t, loads, after, "updated in place, not reloaded")
	require.Contains(t, b.text(t, tab, "#spend"), "tokens")
	b.shot(t, tab, "runtree-done")

	// The day's spending per agent: the lead's and the helper's calls.
	b.do(t, tab,
		chromedp.Navigate(tr.base+"/admin/budgets"),
		chromedp.WaitVisible(chromedp.CSS(`#budget-agent tr[data-name="helper"]`)),
	)
	require.Contains(t, b.text(t, tab, `#budget-agent tr[data-name="lead"]`), "220")
	b.shot(t, tab, "budgets")
}

// browseApprovals has a careful agent ask to write a file twice: bob, who
// is not an approver, is refused; ana approves the first call and denies
// the second, and finds the denial and bob's attempt in the audit log.
func browseApprovals(t *testing.T, b *browser) {
	const bobToken = "bob-token-0123456789"
	model := newFakeModel(t, func(_ context.Context, req chatRequest) reply {
		if req.Agent != "scribe" {
			return reply{Text: "nothing to do"}
		}
		if req.turns() > 0 {
			return reply{Text: "done with the notes"}
		}
		return reply{Calls: []fakeCall{{Name: "write_file", Args: `{"path":"notes.txt","content":"ok"}`}}}
	})
	tr := startTree(t, model, treeOptions{
		agents: map[string]string{"scribe": "---\nname: scribe\ndescription: Writes files, carefully.\nprofile: careful\n---\nYou write files.\n"},
		config: func(c *config.Config) {
			c.Profiles = map[string]policy.ProfileConfig{"careful": {Extends: "contributor", Approval: []string{"write_file"}, Approvers: []string{"ana"}}}
			c.Admin.Users = []config.AdminUser{adminUser(t, "ana", "correct horse battery")}
			c.Server.APITokens = []config.APIToken{{Name: "bob", Token: bot.Secret(bobToken)}}
		},
	})
	pending := func(n int) []bot.Approval {
		t.Helper()
		var list []bot.Approval
		require.Eventually(t, func() bool {
			code, body := tr.do(t, "GET", "/api/v1/approvals", "")
			require.Equal(t, 200, code, string(body))
			list = nil
			require.NoError(t, json.Unmarshal(body, &list))
			return len(list) == n
		}, 30*time.Second, 20*time.Millisecond, "want %d approvals waiting", n)
		return list
	}
	first := tr.send(t, "notes", "@scribe write the notes")
	ap := pending(1)[0]

	// Bob sees the call but may not decide it: refused, and audited.
	bob := b.tab(t)
	b.signIn(t, bob, tr.base, bobToken)
	b.do(t, bob,
		chromedp.Navigate(tr.base+"/admin/approvals"),
		chromedp.WaitVisible(chromedp.CSS(`#approvals tr[data-id="`+ap.ID+`"]`)),
		chromedp.Click(chromedp.CSS(`#approvals tr[data-id="`+ap.ID+`"] button.approve`)),
		chromedp.WaitVisible(chromedp.CSS("#error")),
	)
	require.Contains(t, b.text(t, bob, "#error"), "bob")
	// As an HTTP client would see it: 403.
	bobHTTP := newAdminClient(t, tr.base)
	resp, _ := bobHTTP.signIn(url.Values{"token": {bobToken}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, page := bobHTTP.do("GET", "/admin/approvals", nil, nil)
	resp, _ = bobHTTP.do("POST", "/admin/approvals/"+ap.ID+"/approve", url.Values{"csrf_token": {bobHTTP.csrf(page)}}, nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Len(t, pending(1), 1, "still waiting")

	// Ana approves it; the run goes on and writes the file.
	ana := b.tab(t)
	b.do(t, ana,
		chromedp.Navigate(tr.base+"/admin/approvals"),
		chromedp.WaitVisible(chromedp.CSS("#name")),
		chromedp.SendKeys(chromedp.CSS("#name"), "ana"),
		chromedp.SendKeys(chromedp.CSS("#password"), "correct horse battery"),
		chromedp.Submit(chromedp.CSS("#password")),
		chromedp.WaitVisible(chromedp.CSS(`#approvals tr[data-id="`+ap.ID+`"]`)),
	)
	require.Equal(t, "ana", b.text(t, ana, "#identity"))
	b.shot(t, ana, "approvals")
	b.do(t, ana,
		chromedp.Click(chromedp.CSS(`#approvals tr[data-id="`+ap.ID+`"] button.approve`)),
		chromedp.WaitVisible(chromedp.CSS(`#done[data-done="approved"]`)),
	)
	require.Equal(t, "Approved.", b.text(t, ana, "#done"))
	wi := tr.finished(t, first, 30*time.Second)
	require.Equal(t, bot.StatusDone, wi.Status, wi.Error)

	// The second call she denies.
	second := tr.send(t, "notes", "@scribe write them again")
	ap2 := pending(1)[0]
	require.NotEqual(t, ap.ID, ap2.ID)
	b.do(t, ana,
		chromedp.WaitVisible(chromedp.CSS(`#approvals tr[data-id="`+ap2.ID+`"]`)), // the list updates live
		chromedp.Click(chromedp.CSS(`#approvals tr[data-id="`+ap2.ID+`"] button.deny`)),
		chromedp.WaitVisible(chromedp.CSS(`#done[data-done="denied"]`)),
	)
	require.Equal(t, "Denied.", b.text(t, ana, "#done"))
	tr.finished(t, second, 30*time.Second)

	// The audit log shows the denial, and bob's attempt.
	b.do(t, ana,
		chromedp.Navigate(tr.base+"/admin/audit"),
		chromedp.WaitVisible(chromedp.CSS("#filter-decision")),
		chromedp.SetValue(chromedp.CSS("#filter-decision"), "rejected"),
		chromedp.Submit(chromedp.CSS("#filter-decision")),
		chromedp.WaitVisible(chromedp.CSS(`#audit tr.decision-rejected`)),
	)
	row := b.text(t, ana, `#audit tr.decision-rejected`)
	require.Contains(t, row, "write_file")
	require.Contains(t, row, "ana")
	require.Contains(t, row, second)
	b.shot(t, ana, "audit")
	b.do(t, ana,
		chromedp.Navigate(tr.base+"/admin/audit?decision=not_approver"),
		chromedp.WaitVisible(chromedp.CSS(`#audit tr.decision-not_approver`)),
	)
	require.Contains(t, b.text(t, ana, `#audit tr.decision-not_approver`), "bob")
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
		if k == "Host" {
			req.Host = v
			continue
		}
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

func TestAdminUIReroutesAFinishedWorkItemAsTheSignedInPersonAndAuditsIt(t *testing.T) {
	// A secret HTML would escape ("+" as "&#43;", "&" as "&amp;").
	const carolToken = "carol+token&0123456789"
	model := newFakeModel(t, func(_ context.Context, req chatRequest) reply { return reply{Text: req.Agent + " did it"} })
	tr := startTree(t, model, treeOptions{config: func(c *config.Config) {
		c.Server.APITokens = []config.APIToken{{Name: "carol", Token: carolToken}}
	}})
	id := tr.finished(t, tr.send(t, "ops", "@lead look at the deploy"), 30*time.Second).ID

	c := newAdminClient(t, tr.base)
	resp, _ := c.signIn(url.Values{"token": {tr.token}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	// A background task its job started is listed with it.
	jobs, err := tr.d.Store().ListJobs(t.Context(), id)
	require.NoError(t, err)
	task, err := tr.d.Store().AddTask(t.Context(), bot.BackgroundTask{
		Owner: bot.Owner{SessionKey: "local:ops", AgentID: "lead"}, Creator: bot.Creator{JobID: jobs[0].ID, WorkItemID: id},
		Agent: "lead", Command: "npm run dev", CleanupOnRunEnd: true, Status: bot.TaskRunning, CreatedAt: time.Now(), UpdatedAt: time.Now(),
	})
	require.NoError(t, err)
	resp, page := c.do("GET", "/admin/workitems/"+id, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Regexp(t, `<tr data-task="`+task.ID+`"><td>[^<]+</td><td>lead</td><td><pre>npm run dev</pre></td><td>running</td>`, page)
	require.Contains(t, page, `id="reroute-form"`)
	require.NotContains(t, page, `id="cancel-form"`, "a finished work item cannot be cancelled")

	// Without the form's token nothing happens.
	resp, _ = c.do("POST", "/admin/workitems/"+id+"/reroute", url.Values{"agent": {"helper"}}, nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	// An agent that does not exist is refused by name.
	resp, page = c.do("POST", "/admin/workitems/"+id+"/reroute", url.Values{"agent": {"nobody"}, "csrf_token": {c.csrf(page)}}, nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, page, `agent &#34;nobody&#34;: no such agent`)

	resp, _ = c.do("POST", "/admin/workitems/"+id+"/reroute",
		url.Values{"agent": {"helper"}, "reason": {"lead is busy"}, "csrf_token": {c.csrf(page)}}, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	wi := tr.finished(t, id, 30*time.Second)
	require.Equal(t, "helper", wi.Route.Agent)
	require.Equal(t, "handoff from @lead: re-routed in the admin UI by admin: lead is busy", wi.Route.Reason)
	require.Len(t, model.seen("helper"), 1, "the helper ran it")

	// No page shows a secret, even one a person wrote into a request.
	leaky := tr.finished(t, tr.send(t, "ops", "@lead the token is "+tr.token+", carol's is "+carolToken), 30*time.Second).ID
	for _, path := range []string{"/admin/workitems/" + leaky, "/admin/workitems", "/admin/workitems/" + leaky + "/live"} {
		resp, page := c.do("GET", path, nil, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.NotContains(t, page, tr.token, path)
		require.NotContains(t, page, "carol+token", path)
		require.NotContains(t, page, "carol&#43;token", path)
	}
	_, page = c.do("GET", "/admin/workitems/"+leaky, nil, nil)
	require.Contains(t, page, "the token is [REDACTED], carol&#39;s is [REDACTED]")

	recs, _, err := tr.d.Store().ListAudit(t.Context(), time.Time{}, "change", 10, "")
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Contains(t, string(recs[0]), `"tool":"workitem.reroute"`)
	require.Contains(t, string(recs[0]), `"by":"admin"`)
	require.Contains(t, string(recs[0]), `"work_item_id":"`+id+`"`)
}

func TestAdminUIBudgetsShowTheCapsBesideWhatEachSpentToday(t *testing.T) {
	model := newFakeModel(t, func(context.Context, chatRequest) reply { return reply{Text: "done"} })
	tr := startTree(t, model, treeOptions{config: func(c *config.Config) {
		c.Budgets.PerDay = config.DailyBudgets{Agent: 1000, Requester: 200}
		c.Budgets.Tree.Tokens = 5000
	}})
	tr.finished(t, tr.send(t, "ops", "@lead look"), 30*time.Second)
	tr.finished(t, tr.send(t, "ops", "@helper look too"), 30*time.Second)

	c := newAdminClient(t, tr.base)
	resp, _ := c.signIn(url.Values{"token": {tr.token}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, page := c.do("GET", "/admin/budgets", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "5000 tokens")
	row := func(kind, name string) string {
		m := regexp.MustCompile(`(?s)<table class="list" id="budget-` + kind + `">.*?<tr data-name="` + regexp.QuoteMeta(name) + `"[^>]*>(.*?)</tr>`).FindStringSubmatch(page)
		require.NotNil(t, m, "no %s row for %s", kind, name)
		return regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m[1], " ")
	}
	// Each agent spent 110 of its 1,000; the requester (the console's
	// token, admin) spent both, 220, over its 200.
	require.Regexp(t, `^\s*lead\s+110\s+1\s+0\.0000\s+890\s*$`, row("agent", "lead"))
	require.Regexp(t, `^\s*helper\s+110\s+1\s+0\.0000\s+890\s*$`, row("agent", "helper"))
	require.Regexp(t, `^\s*local:admin\s+220\s+2\s+0\.0000\s+0\s+spent\s*$`, row("requester", "local:admin"))
	require.Contains(t, page, `id="budget-repo"`)

	// Another day spent nothing; a day that is no date is refused.
	_, page = c.do("GET", "/admin/budgets?day=2001-01-01", nil, nil)
	require.NotContains(t, page, `data-name="lead"`)
	resp, page = c.do("GET", "/admin/budgets?day=yesterday", nil, nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, page, `day &#34;yesterday&#34;: want a date such as`)
}

// A session is kept in the store: the daemon restarted on the same data
// directory still knows it, until its person signs out.
func TestAdminUISessionOutlivesARestartUntilSignOut(t *testing.T) {
	dir := t.TempDir()
	r := start(t, func(o *daemon.Options) { o.Setup.Config.DataDir = dir })
	c := newAdminClient(t, r.base)
	resp, _ := c.signIn(url.Values{"token": {r.token}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, _ = c.do("GET", "/admin/workitems", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	r.stop()

	again := start(t, func(o *daemon.Options) { o.Setup.Config.DataDir = dir })
	c.base = again.base
	resp, page := c.do("GET", "/admin/workitems", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "still signed in after the restart")
	kept := *c.cookies["switchyard_session"]
	resp, _ = c.do("POST", "/admin/signout", url.Values{"csrf_token": {c.csrf(page)}}, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	c.cookies["switchyard_session"] = &kept
	resp, _ = c.do("GET", "/admin/workitems", nil, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "signed out")
}

// A credential taken out of the config, or changed, stops working when the
// config is reloaded, not at the next start: its token no longer calls
// the API or signs in, and the admin UI sessions signed in with it end;
// everyone else's stand. The reload says the credentials changed, not that
// they wait for a restart.
func TestReloadEndsWhatAWithdrawnCredentialSignedIn(t *testing.T) {
	const tokA, tokB, tokA2 = "ana-token-0123456789abcdef", "bob-token-0123456789abcdef", "ana-token-new-0123456789abc"
	hash := func(pw string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
		require.NoError(t, err)
		return string(h)
	}
	cidHash, deeHash, cidHash2 := hash("cid horse"), hash("dee horse"), hash("cid pony")
	cfg := func(tokens map[string]string, users map[string]string) string {
		var b strings.Builder
		b.WriteString("server:\n  api_tokens:\n")
		for _, name := range []string{"ana", "bob"} {
			if tok, ok := tokens[name]; ok {
				fmt.Fprintf(&b, "    - name: %s\n      token: %s\n", name, tok)
			}
		}
		b.WriteString("admin:\n  users:\n")
		for _, name := range []string{"cid", "dee"} {
			if h, ok := users[name]; ok {
				fmt.Fprintf(&b, "    - name: %s\n      password_hash: %q\n", name, h)
			}
		}
		return b.String()
	}
	allTokens, allUsers := map[string]string{"ana": tokA, "bob": tokB}, map[string]string{"cid": cidHash, "dee": deeHash}
	for _, tc := range []struct {
		name          string
		tokens, users map[string]string
		changed       []string
		ended         []string          // whose sessions end and whose credential no longer signs in
		signIn        map[string]string // a credential of the new config that signs in: who → token or password
	}{
		{"nothing of theirs changed", allTokens, allUsers, []string{}, nil, nil},
		{"a token withdrawn", map[string]string{"bob": tokB}, allUsers, []string{"server.api_tokens"}, []string{"ana"}, nil},
		{"a token changed", map[string]string{"ana": tokA2, "bob": tokB}, allUsers, []string{"server.api_tokens"}, []string{"ana"}, map[string]string{"ana": tokA2}},
		{"a user removed", allTokens, map[string]string{"cid": cidHash}, []string{"admin.users"}, []string{"dee"}, nil},
		{"a password changed", allTokens, map[string]string{"cid": cidHash2, "dee": deeHash}, []string{"admin.users"}, []string{"cid"}, map[string]string{"cid": "cid pony"}},
		{"everyone gone", map[string]string{}, map[string]string{}, []string{"admin.users", "server.api_tokens"}, []string{"ana", "bob", "cid", "dee"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newConfigFile(t, cfg(allTokens, allUsers))
			dir, listen := t.TempDir(), ""
			load := func(ctx context.Context) (*daemon.Setup, error) {
				return daemon.Load(ctx, daemon.LoadOptions{Path: f.path, Getenv: noModelEnv, Override: func(c *config.Config) {
					c.DataDir, c.Server.Listen = dir, listen
				}})
			}
			r := start(t, func(o *daemon.Options) {
				listen = o.Setup.Config.Server.Listen
				s, err := load(t.Context())
				require.NoError(t, err)
				o.Setup, o.Reload = s, load
			})
			creds := map[string]url.Values{
				"ana": {"token": {tokA}}, "bob": {"token": {tokB}},
				"cid": {"name": {"cid"}, "password": {"cid horse"}}, "dee": {"name": {"dee"}, "password": {"dee horse"}},
			}
			clients := map[string]*adminClient{}
			for who, form := range creds {
				c := newAdminClient(t, r.base)
				resp, page := c.signIn(form)
				require.Equal(t, http.StatusSeeOther, resp.StatusCode, "%s signs in: %s", who, page)
				clients[who] = c
			}
			api := func(token string) int {
				return (&running{base: r.base, token: token}).status(t, "GET", "/api/v1/workitems", "")
			}

			f.write(cfg(tc.tokens, tc.users))
			code, body := r.do(t, "POST", "/api/v1/config/reload", "")
			require.Equal(t, http.StatusOK, code, string(body))
			var res daemon.ReloadResult
			require.NoError(t, json.Unmarshal(body, &res))
			require.Equal(t, tc.changed, res.Changed)
			require.Empty(t, res.RestartRequired)

			for who, c := range clients {
				ended := slices.Contains(tc.ended, who)
				resp, _ := c.do("GET", "/admin/workitems", nil, nil)
				again, page := newAdminClient(t, r.base).signIn(creds[who])
				if ended {
					require.Equal(t, http.StatusSeeOther, resp.StatusCode, "%s's session ended", who)
					require.True(t, strings.HasPrefix(resp.Header.Get("Location"), "/admin/signin"))
					require.Equal(t, http.StatusUnauthorized, again.StatusCode, "%s's old credential no longer signs in", who)
				} else {
					require.Equal(t, http.StatusOK, resp.StatusCode, "%s's session stands", who)
					require.Equal(t, http.StatusSeeOther, again.StatusCode, "%s still signs in: %s", who, page)
				}
				if tok := creds[who].Get("token"); tok != "" {
					want := http.StatusOK
					if ended {
						want = http.StatusUnauthorized
					}
					require.Equal(t, want, api(tok), "%s's token on the API", who)
				}
			}
			for who, secret := range tc.signIn {
				form := url.Values{"token": {secret}}
				if !strings.HasPrefix(secret, who+"-token") {
					form = url.Values{"name": {who}, "password": {secret}}
				}
				resp, page := newAdminClient(t, r.base).signIn(form)
				require.Equal(t, http.StatusSeeOther, resp.StatusCode, "%s signs in with the new credential: %s", who, page)
				if tok := form.Get("token"); tok != "" {
					require.Equal(t, http.StatusOK, api(tok))
				}
			}
			require.Equal(t, http.StatusOK, r.status(t, "GET", "/api/v1/workitems", ""), "the administrator's token stands")
		})
	}
}
