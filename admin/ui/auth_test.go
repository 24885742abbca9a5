package ui

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/storage/bolt"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
)

const testToken = "admin-token-0123456789abcdef"

// clock is a settable clock shared by the UIs of a test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newStoreUI is a UI over store, as each replica sharing it builds one.
func newStoreUI(t *testing.T, store *bolt.Store, now func() time.Time) *UI {
	t.Helper()
	redactor := bot.NewRedactor()
	audit, err := policy.NewAuditor(store, redactor)
	require.NoError(t, err)
	u, err := New(Options{
		Admin: admin.Options{Store: store}, Tokens: []httpapi.Token{{Name: "ana", Value: testToken}},
		Redactor: redactor, Audit: audit, Records: store, Sessions: store, SessionTTL: time.Hour, Now: now,
	})
	require.NoError(t, err)
	return u
}

func serve(u *UI, method, path string, form url.Values, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	var req *http.Request
	if form != nil {
		req = httptest.NewRequest(method, path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest(method, path, nil)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	u.Handler().ServeHTTP(rec, req)
	return rec
}

var csrfValue = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

func cookieOf(t *testing.T, rec *httptest.ResponseRecorder, name string) *http.Cookie {
	t.Helper()
	for _, c := range rec.Result().Cookies() {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no %s cookie in the answer", name)
	return nil
}

// signInAt signs in through u's form with the token and returns the
// session's cookie.
func signInAt(t *testing.T, u *UI) *http.Cookie {
	t.Helper()
	form := serve(u, "GET", "/admin/signin", nil)
	m := csrfValue.FindStringSubmatch(form.Body.String())
	require.NotNil(t, m, "the sign-in form has its token")
	rec := serve(u, "POST", "/admin/signin", url.Values{"token": {testToken}, csrfField: {m[1]}}, cookieOf(t, form, signInCookie))
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	return cookieOf(t, rec, sessionCookie)
}

// signedIn reports whether the cookie opens a page of u.
func signedIn(t *testing.T, u *UI, c *http.Cookie) bool {
	t.Helper()
	rec := serve(u, "GET", "/admin/workitems", nil, c)
	if rec.Code == http.StatusOK {
		require.Contains(t, rec.Body.String(), `<span id="identity">ana</span>`)
		return true
	}
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	return false
}

// Two UIs on one store stand for two replicas sharing it: a session made
// through one is accepted by the other, its CSRF token too, and signing
// out through either ends it on both.
func TestSessionMadeByOneUIIsAcceptedByAnotherOnTheSameStore(t *testing.T) {
	store := bolttest.Open(t, t.TempDir())
	c := &clock{now: time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC)}
	a, b := newStoreUI(t, store, c.Now), newStoreUI(t, store, c.Now)

	sess := signInAt(t, a)
	require.True(t, signedIn(t, a, sess))
	require.True(t, signedIn(t, b, sess), "the other UI knows the session")

	// The stored session holds the SHA-256 of the id, never the id.
	stored, ok, err := store.GetSession(t.Context(), hashID(sess.Value))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "ana", stored.Identity)
	_, ok, err = store.GetSession(t.Context(), []byte(sess.Value))
	require.NoError(t, err)
	require.False(t, ok)

	// Signing out through b, with the CSRF token a's page gave, ends it
	// on both.
	m := csrfValue.FindStringSubmatch(serve(a, "GET", "/admin/workitems", nil, sess).Body.String())
	require.NotNil(t, m)
	rec := serve(b, "POST", "/admin/signout", url.Values{csrfField: {m[1]}}, sess)
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	require.False(t, signedIn(t, a, sess), "signed out everywhere")
	require.False(t, signedIn(t, b, sess))
	_, ok, err = store.GetSession(t.Context(), hashID(sess.Value))
	require.NoError(t, err)
	require.False(t, ok, "the store forgot it")
}

// A session lasts its time from sign-in on every UI; once expired it is
// refused and forgotten, and signing in drops the sessions that expired.
func TestExpiredSessionIsRefusedAndForgotten(t *testing.T) {
	store := bolttest.Open(t, t.TempDir())
	c := &clock{now: time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC)}
	a, b := newStoreUI(t, store, c.Now), newStoreUI(t, store, c.Now)

	first, second := signInAt(t, a), signInAt(t, a)
	c.advance(time.Hour - time.Second)
	require.True(t, signedIn(t, b, first), "a second before it expires")
	c.advance(time.Second)
	require.False(t, signedIn(t, b, first), "expired")
	_, ok, err := store.GetSession(t.Context(), hashID(first.Value))
	require.NoError(t, err)
	require.False(t, ok, "an expired session asked for is forgotten")

	_, ok, err = store.GetSession(t.Context(), hashID(second.Value))
	require.NoError(t, err)
	require.True(t, ok, "not asked for since it expired")
	signInAt(t, b)
	_, ok, err = store.GetSession(t.Context(), hashID(second.Value))
	require.NoError(t, err)
	require.False(t, ok, "a sign-in drops the sessions that expired")
}

// A form over its limit is refused as too large, wherever it is sent,
// rather than read cut short.
func TestFormOverItsLimitIsTooLarge(t *testing.T) {
	store := bolttest.Open(t, t.TempDir())
	c := &clock{now: time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC)}
	u := newStoreUI(t, store, c.Now)
	sess := signInAt(t, u)
	m := csrfValue.FindStringSubmatch(serve(u, "GET", "/admin/workitems", nil, sess).Body.String())
	require.NotNil(t, m)
	big := strings.Repeat("a", maxForm)
	for _, tc := range []struct {
		path string
		form url.Values
	}{
		{"/admin/signin", url.Values{"token": {testToken}, "pad": {big}}},
		{"/admin/rules/test", url.Values{csrfField: {m[1]}, "text": {big}}},
		{"/admin/signout", url.Values{csrfField: {m[1]}, "pad": {big}}},
	} {
		rec := serve(u, "POST", tc.path, tc.form, sess)
		require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, "%s: %s", tc.path, rec.Body.String())
		require.Contains(t, rec.Body.String(), "over 1048576 bytes")
	}
	require.True(t, signedIn(t, u, sess), "the sign-out that was too large did not happen")
}

// A session lasts only while what it was signed in with signs in as the
// same name: a replica started, or a running one whose config is reloaded,
// with a user removed, a password or a token changed or withdrawn, or a
// token given to another name, no longer takes the sessions started with
// it, and forgets them; the others stand.
func TestSessionEndsWhenWhatItSignedInWithIsNoLongerConfigured(t *testing.T) {
	const otherToken = "other-token-0123456789abcdef"
	hash := func(pw string) bot.Secret {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
		require.NoError(t, err)
		return bot.Secret(h)
	}
	beaHash := hash("right horse")
	ana := httpapi.Token{Name: "ana", Value: testToken}
	bea := User{Name: "bea", PasswordHash: beaHash}
	for _, tc := range []struct {
		name         string
		tokens       []httpapi.Token
		users        []User
		anaOK, beaOK bool
	}{
		{"nothing changed", []httpapi.Token{ana}, []User{bea}, true, true},
		{"another token beside", []httpapi.Token{{Name: "other", Value: otherToken}, ana}, []User{{Name: "bea", PasswordHash: beaHash}}, true, true},
		{"the token changed", []httpapi.Token{{Name: "ana", Value: otherToken}}, []User{bea}, false, true},
		{"the token withdrawn", nil, []User{bea}, false, true},
		{"the token given to another name", []httpapi.Token{{Name: "root", Value: testToken}}, []User{bea}, false, true},
		{"the user removed", []httpapi.Token{ana}, nil, true, false},
		{"the password changed", []httpapi.Token{ana}, []User{{Name: "bea", PasswordHash: hash("new horse")}}, true, false},
		{"the user's name now a token's", []httpapi.Token{ana, {Name: "bea", Value: otherToken}}, nil, true, false},
		{"everyone gone", nil, nil, false, false},
	} {
		for _, how := range []string{"restarted", "reloaded"} {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				store := bolttest.Open(t, t.TempDir())
				c := &clock{now: time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC)}
				before := configuredUI(t, store, c.Now, []httpapi.Token{ana}, []User{bea})
				anaSess := signInAt(t, before)
				beaSess := signInWith(t, before, password("bea", "right horse"))

				var after *UI
				if how == "restarted" {
					after = configuredUI(t, store, c.Now, tc.tokens, tc.users)
				} else {
					other := configuredUI(t, store, c.Now, []httpapi.Token{ana}, []User{bea})
					before.SetCredentials(tc.tokens, tc.users)
					after, before = before, other
				}
				for _, s := range []struct {
					who    string
					cookie *http.Cookie
					ok     bool
				}{{"ana", anaSess, tc.anaOK}, {"bea", beaSess, tc.beaOK}} {
					rec := serve(after, "GET", "/admin/workitems", nil, s.cookie)
					if s.ok {
						require.Equal(t, http.StatusOK, rec.Code, "%s: %s", s.who, rec.Body.String())
						require.Contains(t, rec.Body.String(), `<span id="identity">`+s.who+`</span>`)
					} else {
						require.Equal(t, http.StatusSeeOther, rec.Code, "%s is led to sign in again", s.who)
						require.True(t, strings.HasPrefix(rec.Header().Get("Location"), "/admin/signin"))
						_, kept, err := store.GetSession(t.Context(), hashID(s.cookie.Value))
						require.NoError(t, err)
						require.False(t, kept, "%s's session is forgotten", s.who)
						rec = serve(before, "GET", "/admin/workitems", nil, s.cookie)
						require.Equal(t, http.StatusSeeOther, rec.Code, "%s's session is gone for every replica", s.who)
					}
				}
			})
		}
	}
}

// configuredUI is a UI over store signing in tokens and users, as a
// replica started with that config builds one.
func configuredUI(t *testing.T, store *bolt.Store, now func() time.Time, tokens []httpapi.Token, users []User) *UI {
	t.Helper()
	redactor := bot.NewRedactor()
	audit, err := policy.NewAuditor(store, redactor)
	require.NoError(t, err)
	u, err := New(Options{
		Admin: admin.Options{Store: store}, Tokens: tokens, Users: users,
		Redactor: redactor, Audit: audit, Records: store, Sessions: store, SessionTTL: time.Hour, Now: now,
	})
	require.NoError(t, err)
	return u
}

// signInWith signs in through u's form with fields and returns the
// session's cookie.
func signInWith(t *testing.T, u *UI, fields url.Values) *http.Cookie {
	t.Helper()
	form := serve(u, "GET", "/admin/signin", nil)
	m := csrfValue.FindStringSubmatch(form.Body.String())
	require.NotNil(t, m, "the sign-in form has its token")
	fields.Set(csrfField, m[1])
	rec := serve(u, "POST", "/admin/signin", fields, cookieOf(t, form, signInCookie))
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	return cookieOf(t, rec, sessionCookie)
}

// HEAD is answered as GET is, signed in or not; a method no page takes is
// refused without a session and 405 with one.
func TestHeadIsAnsweredAsGet(t *testing.T) {
	store := bolttest.Open(t, t.TempDir())
	u := newStoreUI(t, store, time.Now)
	sess := signInAt(t, u)
	for _, tc := range []struct {
		method string
		signed bool
		status int
		where  string // Location
	}{
		{"GET", false, http.StatusSeeOther, "/admin/signin?next=%2Fadmin%2Fworkitems"},
		{"HEAD", false, http.StatusSeeOther, "/admin/signin?next=%2Fadmin%2Fworkitems"},
		{"OPTIONS", false, http.StatusUnauthorized, ""},
		{"GET", true, http.StatusOK, ""},
		{"HEAD", true, http.StatusOK, ""},
		{"OPTIONS", true, http.StatusMethodNotAllowed, ""},
	} {
		var cookies []*http.Cookie
		if tc.signed {
			cookies = append(cookies, sess)
		}
		rec := serve(u, tc.method, "/admin/workitems", nil, cookies...)
		require.Equal(t, tc.status, rec.Code, "%s signed in %v: %s", tc.method, tc.signed, rec.Body.String())
		require.Equal(t, tc.where, rec.Header().Get("Location"), "%s signed in %v", tc.method, tc.signed)
	}
}

// Sign-in leads only to a page of the UI, as a browser reads the address:
// anything that could take it elsewhere, or out of /admin/, leads to the
// first page instead.
func TestSignInLeadsOnlyToAPageOfTheUI(t *testing.T) {
	u := newStoreUI(t, bolttest.Open(t, t.TempDir()), time.Now)
	base, err := url.Parse("http://switchyard.example.com/admin/signin")
	require.NoError(t, err)
	for _, tc := range []struct{ next, want string }{
		{"/admin/workitems?status=done", "/admin/workitems?status=done"},
		{"/admin/workitems/wi_1", "/admin/workitems/wi_1"},
		{"/admin/", "/admin/"},
		{"", "/admin/"},
		{"//evil.example", "/admin/"},
		{"///evil.example", "/admin/"},
		{"/\\evil.example", "/admin/"},
		{"https://evil.example/admin/", "/admin/"},
		{"http:/admin/", "/admin/"},
		{"javascript:alert(1)//admin/", "/admin/"},
		{"/admin/../\t/evil.example", "/admin/"},
		{"/admin/\t/evil.example", "/admin/"},
		{"/admin/\n/evil.example", "/admin/"},
		{"/admin/..//evil.example", "/admin/"},
		{"/admin/../../evil.example", "/admin/"},
		{"/admin/%2e%2e/%2e%2e//evil.example", "/admin/"},
		{"/admin//evil.example", "/admin/"},
		{"/admin/./rules", "/admin/"},
		{"/admin/../%5cevil.example", "/admin/"},
		{"/admin/\\..\\..\\evil.example", "/admin/"},
		{"/admin/ /evil.example", "/admin/"},
		{"/admin", "/admin/"},
		{"/administrator/", "/admin/"},
	} {
		t.Run(tc.next, func(t *testing.T) {
			form := serve(u, "GET", "/admin/signin?next="+url.QueryEscape(tc.next), nil)
			m := csrfValue.FindStringSubmatch(form.Body.String())
			require.NotNil(t, m)
			rec := serve(u, "POST", "/admin/signin", url.Values{"token": {testToken}, csrfField: {m[1]}, "next": {tc.next}}, cookieOf(t, form, signInCookie))
			require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
			loc := rec.Header().Get("Location")
			require.Equal(t, tc.want, loc)
			// As a browser reads it: tabs and line ends dropped, a
			// backslash a slash.
			read := strings.NewReplacer("\t", "", "\n", "", "\r", "", "\\", "/").Replace(loc)
			to, err := base.Parse(read)
			require.NoError(t, err)
			require.Equal(t, "switchyard.example.com", to.Host)
			require.True(t, strings.HasPrefix(to.Path, "/admin/"), to.Path)
		})
	}
}

// A session id chosen before sign-in, made up or a live session of
// someone else's planted in the browser, is not the session sign-in
// starts, and the planted one is ended.
func TestSignInStartsASessionOfItsOwn(t *testing.T) {
	u := newStoreUI(t, bolttest.Open(t, t.TempDir()), time.Now)
	planted := signInAt(t, u)
	require.True(t, signedIn(t, u, planted))
	for _, brought := range []*http.Cookie{{Name: sessionCookie, Value: "chosen-by-someone-else-0123456789abcdef"}, planted} {
		form := serve(u, "GET", "/admin/signin", nil, brought)
		m := csrfValue.FindStringSubmatch(form.Body.String())
		require.NotNil(t, m)
		rec := serve(u, "POST", "/admin/signin", url.Values{"token": {testToken}, csrfField: {m[1]}}, cookieOf(t, form, signInCookie), brought)
		require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
		got := cookieOf(t, rec, sessionCookie)
		require.NotEqual(t, brought.Value, got.Value)
		require.True(t, signedIn(t, u, got))
		require.False(t, signedIn(t, u, brought), "the session brought to sign-in is no session after it")
	}
}

// Served over TLS, every cookie the UI sets is Secure, as well as HttpOnly
// and SameSite=Strict under /admin/; over plain http behind no https
// public URL, it is not Secure (the browser would drop it).
func TestCookiesOverTLSAreSecure(t *testing.T) {
	u := newStoreUI(t, bolttest.Open(t, t.TempDir()), time.Now)
	for _, overTLS := range []bool{true, false} {
		over := func(req *http.Request) *http.Request {
			if overTLS {
				req.TLS = &tlsState
			}
			return req
		}
		rec := httptest.NewRecorder()
		u.Handler().ServeHTTP(rec, over(httptest.NewRequest("GET", "/admin/signin", nil)))
		form := rec.Result()
		m := csrfValue.FindStringSubmatch(rec.Body.String())
		require.NotNil(t, m)
		req := over(httptest.NewRequest("POST", "/admin/signin", strings.NewReader(url.Values{"token": {testToken}, csrfField: {m[1]}}.Encode())))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for _, c := range form.Cookies() {
			req.AddCookie(c)
		}
		rec = httptest.NewRecorder()
		u.Handler().ServeHTTP(rec, req)
		require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
		cookies := append(form.Cookies(), rec.Result().Cookies()...)
		require.Len(t, cookies, 3, "the sign-in form's, then it cleared and the session's")
		for _, c := range cookies {
			require.Equal(t, overTLS, c.Secure, "%s over TLS: %v", c.Name, overTLS)
			require.True(t, c.HttpOnly, c.Name)
			require.Equal(t, http.SameSiteStrictMode, c.SameSite, c.Name)
			require.Equal(t, "/admin/", c.Path, c.Name)
		}
	}
}

var tlsState = tls.ConnectionState{HandshakeComplete: true}

// FuzzLocalNext holds sign-in's next to a page of the UI: whatever is
// given, what it leads to is nothing or, read as a browser reads an
// address, a path under /admin/ of the daemon's own host.
func FuzzLocalNext(f *testing.F) {
	for _, s := range []string{"/admin/workitems?status=done", "//evil.example", "/admin/../\t/evil.example", "/\\evil.example",
		"/admin/%2e%2e/", "https://evil.example/admin/", "/admin/x#y", "/admin/ \n/x"} {
		f.Add(s)
	}
	base, err := url.Parse("http://switchyard.example.com/admin/signin")
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, next string) {
		got := localNext(next)
		if got == "" {
			return
		}
		require.Equal(t, next, got)
		read := strings.NewReplacer("\t", "", "\n", "", "\r", "", "\\", "/").Replace(got)
		to, err := base.Parse(read)
		require.NoError(t, err)
		require.Equal(t, "switchyard.example.com", to.Host, "%q", next)
		require.Equal(t, "http", to.Scheme, "%q", next)
		require.True(t, strings.HasPrefix(to.Path, "/admin/"), "%q leads to %q", next, to.Path)
	})
}
