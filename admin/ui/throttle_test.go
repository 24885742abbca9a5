package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
)

// passwordUI is a UI with the token user ana and the password user bea
// (password "right horse").
func passwordUI(t *testing.T, now func() time.Time) *UI {
	t.Helper()
	store := bolttest.Open(t, t.TempDir())
	hash, err := bcrypt.GenerateFromPassword([]byte("right horse"), bcrypt.MinCost)
	require.NoError(t, err)
	redactor := bot.NewRedactor()
	audit, err := policy.NewAuditor(store, redactor)
	require.NoError(t, err)
	u, err := New(Options{
		Admin: admin.Options{Store: store}, Tokens: []httpapi.Token{{Name: "ana", Value: testToken}},
		Users:    []User{{Name: "bea", PasswordHash: bot.Secret(hash)}},
		Redactor: redactor, Audit: audit, Records: store, Sessions: store, SessionTTL: time.Hour, Now: now,
	})
	require.NoError(t, err)
	return u
}

// attempt posts the sign-in form from addr with fields and returns the
// answer.
func attempt(t *testing.T, u *UI, addr string, fields url.Values) *http.Response {
	t.Helper()
	form := serve(u, "GET", "/admin/signin", nil)
	m := csrfValue.FindStringSubmatch(form.Body.String())
	require.NotNil(t, m)
	fields.Set(csrfField, m[1])
	req := newFormRequest("/admin/signin", fields)
	req.RemoteAddr = addr
	req.AddCookie(cookieOf(t, form, signInCookie))
	return serveRequest(u, req)
}

func newFormRequest(path string, form url.Values) *http.Request {
	req := httptest.NewRequest("POST", path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req
}

func serveRequest(u *UI, req *http.Request) *http.Response {
	rec := httptest.NewRecorder()
	u.Handler().ServeHTTP(rec, req)
	return rec.Result()
}

func password(name, pw string) url.Values { return url.Values{"name": {name}, "password": {pw}} }
func token(tok string) url.Values         { return url.Values{"token": {tok}} }

func TestSignInSlowsDownGuessing(t *testing.T) {
	const home, other = "192.0.2.1:5000", "198.51.100.7:6000"
	for _, tc := range []struct {
		name   string
		wrong  func(i int) url.Values // the failures
		right  url.Values             // the right credentials, refused while waiting
		fromB  url.Values             // an attempt from another address then
		bOK    bool                   // whether that one is checked (not throttled)
		reason string
	}{
		{"a name's password from one address", func(int) url.Values { return password("bea", "wrong") }, password("bea", "right horse"),
			password("bea", "right horse"), false, "the name waits wherever it comes from"},
		{"many names from one address", func(i int) url.Values { return password("user"+strconv.Itoa(i), "x") }, password("bea", "right horse"),
			password("bea", "right horse"), true, "another address is not held back for names it did not try"},
		{"tokens from one address", func(i int) url.Values { return token("guess-" + strconv.Itoa(i)) }, token(testToken),
			token(testToken), true, "tokens are counted per address"},
		{"names in other cases are one name", func(i int) url.Values { return password([]string{"BEA", "bea", " Bea "}[i%3], "x") }, password("bea", "right horse"),
			password("bea", "right horse"), false, "case and spaces do not make another name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
			u := passwordUI(t, c.Now)
			for i := range freeFailures {
				resp := attempt(t, u, home, tc.wrong(i))
				require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "failure %d is only refused", i+1)
			}
			resp := attempt(t, u, home, tc.right)
			require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "right credentials wait too: nothing is checked")
			require.Equal(t, "1", resp.Header.Get("Retry-After"))
			for _, ck := range resp.Cookies() {
				require.NotEqual(t, sessionCookie, ck.Name, "no session while throttled")
			}

			resp = attempt(t, u, other, tc.fromB)
			if tc.bOK {
				require.Equal(t, http.StatusSeeOther, resp.StatusCode, tc.reason)
			} else {
				require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, tc.reason)
			}

			// One more failure doubles the wait.
			c.advance(time.Second)
			require.Equal(t, http.StatusUnauthorized, attempt(t, u, home, tc.wrong(99)).StatusCode)
			resp = attempt(t, u, home, tc.right)
			require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
			require.Equal(t, "2", resp.Header.Get("Retry-After"))

			// Once the wait is over the right credentials sign in. That
			// forgets the name's failures but not the address's: from a
			// third address the name is counted from zero, from this one
			// the next failure waits as before.
			c.advance(2 * time.Second)
			require.Equal(t, http.StatusSeeOther, attempt(t, u, home, tc.right).StatusCode)
			require.Equal(t, http.StatusTooManyRequests, attempt(t, u, home, tc.wrong(100)).StatusCode, "the address still waits")
			for i := range freeFailures - 1 {
				require.Equal(t, http.StatusUnauthorized, attempt(t, u, "203.0.113.9:1", tc.wrong(i)).StatusCode, "counted from zero again")
			}
		})
	}
}

func TestSignInBackoffIsCappedAndForgotten(t *testing.T) {
	require.Equal(t, time.Duration(0), backoff(freeFailures-1))
	require.Equal(t, time.Second, backoff(freeFailures))
	require.Equal(t, 4*time.Second, backoff(freeFailures+2))
	require.Equal(t, maxBackoff, backoff(freeFailures+40), "someone guessing at a name keeps its owner out for minutes at most")

	c := &clock{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	u := passwordUI(t, c.Now)
	for i := range 30 {
		if i > 0 {
			c.advance(maxBackoff)
		}
		require.Equal(t, http.StatusUnauthorized, attempt(t, u, "192.0.2.1:1", password("bea", "wrong")).StatusCode, "attempt %d", i)
	}
	resp := attempt(t, u, "192.0.2.1:1", password("bea", "right horse"))
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, strconv.Itoa(int(maxBackoff.Seconds())), resp.Header.Get("Retry-After"))
	c.advance(failureMemory)
	require.Equal(t, http.StatusSeeOther, attempt(t, u, "192.0.2.1:1", password("bea", "right horse")).StatusCode)
}

// Guessing from ever new addresses and names cannot make the counts grow
// without bound.
func TestSignInGuardCountsABoundedNumberOfKeys(t *testing.T) {
	c := &clock{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	g := newSignInGuard(c.Now)
	for i := range 3 * maxTracked {
		g.admit([]string{"addr " + strconv.Itoa(i), "name n" + strconv.Itoa(i)})
		if i%1000 == 0 {
			c.advance(time.Minute)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	require.LessOrEqual(t, len(g.failures), maxTracked)
}

// No more than maxChecks password comparisons run at once; a sign-in that
// finds no slot within checkWait is refused with 429, having compared
// nothing.
func TestSignInComparesFewPasswordsAtOnce(t *testing.T) {
	g := newSignInGuard(time.Now)
	var running, most atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range maxChecks + 3 {
		wg.Go(func() {
			g.check(t.Context(), func() {
				n := running.Add(1)
				for {
					m := most.Load()
					if n <= m || most.CompareAndSwap(m, n) {
						break
					}
				}
				<-release
				running.Add(-1)
			})
		})
	}
	require.Eventually(t, func() bool { return running.Load() == maxChecks }, 5*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	require.EqualValues(t, maxChecks, most.Load())

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	full := newSignInGuard(time.Now)
	for range maxChecks {
		full.checks <- struct{}{}
	}
	compared := false
	require.False(t, full.check(ctx, func() { compared = true }))
	require.False(t, compared)
}

// Guesses sent all at once get no more tries than guesses sent one after
// another: freeFailures of them are checked and the rest wait, for a
// name's password as for tokens.
func TestSignInGuessesSentAtOnceAreCountedBeforeAnyIsChecked(t *testing.T) {
	const burst = 32
	for _, tc := range []struct {
		name  string
		guess func(i int) url.Values
	}{
		{"a name's password", func(i int) url.Values { return password("bea", "guess-"+strconv.Itoa(i)) }},
		{"tokens", func(i int) url.Values { return token("guess-" + strconv.Itoa(i)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
			u := passwordUI(t, c.Now)
			reqs := make([]*http.Request, burst)
			for i := range reqs {
				form := serve(u, "GET", "/admin/signin", nil)
				m := csrfValue.FindStringSubmatch(form.Body.String())
				require.NotNil(t, m)
				fields := tc.guess(i)
				fields.Set(csrfField, m[1])
				reqs[i] = newFormRequest("/admin/signin", fields)
				reqs[i].RemoteAddr = "192.0.2.1:5000"
				reqs[i].AddCookie(cookieOf(t, form, signInCookie))
			}
			codes := make([]int, burst)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, req := range reqs {
				wg.Go(func() {
					<-start
					codes[i] = serveRequest(u, req).StatusCode
				})
			}
			close(start)
			wg.Wait()
			count := map[int]int{}
			for _, code := range codes {
				count[code]++
			}
			require.Equal(t, map[int]int{http.StatusUnauthorized: freeFailures, http.StatusTooManyRequests: burst - freeFailures}, count)
		})
	}
}

// An IPv6 client is counted by its /64, which it commonly holds whole, and
// a name by its hash, whatever its length.
func TestSignInKeysOfAddressesAndNames(t *testing.T) {
	key := func(addr, name string) []string {
		req := httptest.NewRequest("POST", "/admin/signin", nil)
		req.RemoteAddr = addr
		return signInKeys(req, name)
	}
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"[2001:db8::1]:5000", "[2001:db8::ffff:1]:6000", true},
		{"[2001:db8::1]:5000", "[2001:db8:0:0:abcd:ef01:2345:6789]:1", true},
		{"[2001:db8::1]:5000", "[2001:db8:0:1::1]:5000", false},
		{"[2001:DB8::1]:5000", "[2001:db8::2]:5000", true},
		{"192.0.2.1:5000", "192.0.2.1:6000", true},
		{"192.0.2.1:5000", "192.0.2.2:5000", false},
		{"[::ffff:192.0.2.1]:5000", "[::ffff:192.0.2.2]:5000", false},
		{"[::1]:1", "[::2]:1", true},
	} {
		require.Equal(t, tc.same, key(tc.a, "")[0] == key(tc.b, "")[0], "%s and %s", tc.a, tc.b)
	}
	huge := strings.Repeat("ä", maxForm/4)
	for _, name := range []string{"bea", " BEA ", huge, "\u212Aim", "a\x00b"} {
		keys := key("192.0.2.1:5000", name)
		require.Len(t, keys, 2)
		require.Regexp(t, `^name [0-9a-f]{64}$`, keys[1], "a name costs the counts the same few bytes, whatever its length")
	}
	require.Equal(t, key("192.0.2.1:5000", "bea"), key("192.0.2.1:5000", " BEA "))
	require.Equal(t, "bea", loggedName("bea"))
	require.Equal(t, strings.Repeat("ä", 32)+fmt.Sprintf("… (%d bytes)", len(huge)), loggedName(huge))
}

// Guesses from ever new addresses of one IPv6 /64 are one client's.
func TestSignInGuessesFromOneIPv6NetworkWaitTogether(t *testing.T) {
	c := &clock{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	u := passwordUI(t, c.Now)
	for i := range freeFailures {
		addr := fmt.Sprintf("[2001:db8::%x]:5000", i+1)
		require.Equal(t, http.StatusUnauthorized, attempt(t, u, addr, token("guess-"+strconv.Itoa(i))).StatusCode)
	}
	require.Equal(t, http.StatusTooManyRequests, attempt(t, u, "[2001:db8::beef]:1", token(testToken)).StatusCode)
	require.Equal(t, http.StatusSeeOther, attempt(t, u, "[2001:db8:0:1::1]:1", token(testToken)).StatusCode, "another network is not held back")
}

// Someone with a credential of their own cannot sign in with it between
// guesses to start their address's count again: a success forgets the
// failures of the name it proved, not the guesses at other names and
// tokens.
func TestSignInBetweenGuessesDoesNotForgetThem(t *testing.T) {
	for _, tc := range []struct {
		name  string
		guess func(i int) url.Values
		own   url.Values
	}{
		{"tokens", func(i int) url.Values { return token("guess-" + strconv.Itoa(i)) }, token(testToken)},
		{"other names' passwords", func(i int) url.Values { return password("user"+strconv.Itoa(i), "x") }, password("bea", "right horse")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
			u := passwordUI(t, c.Now)
			const addr = "192.0.2.1:5000"
			checked := 0
			for i := range 4 * freeFailures {
				if attempt(t, u, addr, tc.guess(i)).StatusCode == http.StatusUnauthorized {
					checked++
				}
				own := attempt(t, u, addr, tc.own).StatusCode
				require.Contains(t, []int{http.StatusSeeOther, http.StatusTooManyRequests}, own, "one's own sign-in, between guesses %d and %d, goes in or waits with the address", i, i+1)
				c.advance(time.Second)
			}
			require.Less(t, checked, 2*freeFailures, "guesses between sign-ins are counted and wait")
		})
	}
}
