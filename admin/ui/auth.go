package ui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
)

// Cookie names.
const (
	sessionCookie = "switchyard_session"
	signInCookie  = "switchyard_signin" // the sign-in form's CSRF token
	csrfField     = "csrf_token"
	csrfHeader    = "X-CSRF-Token"
	maxForm       = 1 << 20
)

// session is one person signed in.
type session struct {
	identity string
	csrf     string
}

// SessionStore keeps the sessions of people signed in, by the SHA-256 of
// their id (the store holds nothing a cookie could be made from), so every
// replica sharing the store knows them, across restarts. The bbolt and
// PostgreSQL stores have it.
type SessionStore interface {
	CreateSession(ctx context.Context, s bot.AdminSession) error
	// GetSession returns the session, expired or not.
	GetSession(ctx context.Context, hash []byte) (bot.AdminSession, bool, error)
	// DeleteSession forgets a session; one not there is no error.
	DeleteSession(ctx context.Context, hash []byte) error
	// DropExpiredSessions forgets at most limit sessions expired at now.
	DropExpiredSessions(ctx context.Context, now time.Time, limit int) (int, error)
}

// sweepSessions is how many expired sessions a sign-in drops on its way.
const sweepSessions = 100

// sessions are the UI's sessions, kept in the store.
type sessions struct {
	store SessionStore
	ttl   time.Duration
	now   func() time.Time
	log   *slog.Logger
	// in are what people sign in with now: a session lasts only while
	// the credential it was started with is among them, for its identity.
	// A reload of the config replaces them whole.
	in atomic.Pointer[signers]
}

// signers are the credentials people sign in to the UI with: the API's
// named tokens and the users with passwords.
type signers struct {
	tokens *httpapi.TokenSet
	users  map[string]User // by name in lower case
	creds  []credential
}

func newSigners(tokens []httpapi.Token, users []User) *signers {
	s := &signers{tokens: httpapi.NewTokenSet(tokens), users: map[string]User{}}
	for _, t := range tokens {
		if t.Value.IsSet() {
			s.creds = append(s.creds, tokenCredential(t.Name, t.Value.Reveal()))
		}
	}
	for _, usr := range users {
		s.users[strings.ToLower(usr.Name)] = usr
		s.creds = append(s.creds, userCredential(usr))
	}
	return s
}

// credential is something that signs in as identity: a token, or a
// user's name and password hash.
type credential struct {
	identity string
	secret   []byte
}

func tokenCredential(name, token string) credential {
	return credential{identity: name, secret: []byte("token\x00" + token)}
}

func userCredential(u User) credential {
	return credential{identity: u.Name, secret: []byte("user\x00" + strings.ToLower(u.Name) + "\x00" + u.PasswordHash.Reveal())}
}

// bound is what the store keeps of the credential a session of id was
// started with: keyed by the id, which the store does not hold.
func (c credential) bound(id string) []byte {
	m := hmac.New(sha256.New, []byte(id))
	m.Write(c.secret)
	return m.Sum(nil)
}

// configured reports whether the session of id still stands for a
// credential people sign in with, as its identity: a user removed, a
// password or a token changed or withdrawn ends the sessions started
// with it.
func (s *sessions) configured(id string, stored bot.AdminSession) bool {
	ok := false
	for _, c := range s.in.Load().creds {
		if hmac.Equal(c.bound(id), stored.Credential) && c.identity == stored.Identity {
			ok = true
		}
	}
	return ok
}

func hashID(id string) []byte {
	h := sha256.Sum256([]byte(id))
	return h[:]
}

// randomToken returns 32 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

// start makes a session for who signed in with cred and returns its id;
// expired sessions are dropped on the way, a bounded number at a time.
func (s *sessions) start(ctx context.Context, cred credential) (string, error) {
	id, identity := randomToken(), cred.identity
	now := s.now()
	if _, err := s.store.DropExpiredSessions(ctx, now, sweepSessions); err != nil {
		s.log.Warn("admin sessions: dropping expired sessions failed", "error", err)
	}
	err := s.store.CreateSession(ctx, bot.AdminSession{
		Hash: hashID(id), Identity: identity, Credential: cred.bound(id), CSRF: randomToken(), Expires: now.Add(s.ttl).UTC(),
	})
	if err != nil {
		return "", fmt.Errorf("start a session for %s: %w", identity, err)
	}
	return id, nil
}

// get returns the live session of id; an expired one, or one whose
// credential no longer signs in, is refused and forgotten.
func (s *sessions) get(ctx context.Context, id string) (*session, error) {
	hash := hashID(id)
	stored, ok, err := s.store.GetSession(ctx, hash)
	if err != nil || !ok {
		return nil, err
	}
	if !s.now().Before(stored.Expires) {
		if err := s.store.DeleteSession(ctx, hash); err != nil {
			s.log.Warn("admin sessions: forgetting an expired session failed", "error", err)
		}
		return nil, nil
	}
	if !s.configured(id, stored) {
		s.log.Info("admin session ended: what it was signed in with is no longer configured", "identity", stored.Identity)
		if err := s.store.DeleteSession(ctx, hash); err != nil {
			s.log.Warn("admin sessions: forgetting a session whose credential is gone failed", "error", err)
		}
		return nil, nil
	}
	return &session{identity: stored.Identity, csrf: stored.CSRF}, nil
}

// end forgets the session of id, on every replica.
func (s *sessions) end(ctx context.Context, id string) error {
	return s.store.DeleteSession(ctx, hashID(id))
}

type sessionKey struct{}

// sessionFrom returns the session of a signed-in request.
func sessionFrom(ctx context.Context) *session {
	s, _ := ctx.Value(sessionKey{}).(*session)
	return s
}

// identity is who the request is signed in as.
func identity(r *http.Request) string {
	id, _ := httpapi.IdentityFrom(r.Context())
	return id.Name
}

// securityHeaders sets the headers every answer of the UI has: a strict
// Content-Security-Policy (scripts, styles, images and fetches from the
// daemon only, nothing inline, no framing, forms posted only to it), and
// no sniffing, no referrer for other sites, no caching.
func securityHeaders(next http.Handler) http.Handler {
	const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		// same-origin, not no-referrer: under no-referrer a browser sends
		// "Origin: null" with a form, which httpapi.Guard refuses.
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// secure reports whether cookies must only go over https: the request
// came over TLS, or people reach the daemon at an https URL.
func (u *UI) secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(strings.ToLower(u.opts.PublicURL), "https://")
}

func (u *UI) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: name, Value: value, Path: "/admin/", MaxAge: maxAge,
		HttpOnly: true, Secure: u.secure(r), SameSite: http.SameSiteStrictMode,
	}
}

// requireSession lets signed-in requests through with their identity; a
// page asked for without a session (GET, or HEAD, which is answered as GET
// is) leads to the sign-in form, anything else is answered 401.
func (u *UI) requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sess *session
		if c, err := r.Cookie(sessionCookie); err == nil {
			var gerr error
			if sess, gerr = u.sessions.get(r.Context(), c.Value); gerr != nil {
				u.fail(w, r, gerr)
				return
			}
		}
		if sess == nil {
			if (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.Header.Get("X-Live") == "" {
				http.Redirect(w, r, "/admin/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			u.fail(w, r, bot.Errorf(bot.EUNAUTHORIZED, "sign in first: this session has ended or never began"))
			return
		}
		ctx := context.WithValue(r.Context(), sessionKey{}, sess)
		ctx = httpapi.WithIdentity(ctx, httpapi.Identity{Name: sess.identity})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// checkCSRF refuses a POST, PUT, PATCH or DELETE that does not carry the
// session's CSRF token.
func (u *UI) checkCSRF(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			next.ServeHTTP(w, r)
			return
		}
		if err := readForm(w, r); err != nil {
			u.fail(w, r, err)
			return
		}
		got := r.Header.Get(csrfHeader)
		if got == "" {
			got = r.PostFormValue(csrfField)
		}
		if !sameToken(got, sessionFrom(r.Context()).csrf) {
			u.fail(w, r, bot.Errorf(bot.EFORBIDDEN, "this form is missing its CSRF token or has an old one: reload the page and send it again"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readForm reads a form of at most maxForm bytes, so that a handler never
// goes on with a form cut short: a bigger one is refused with 413, one
// that cannot be read with 400.
func readForm(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return bot.Errorf(bot.ETOOLARGE, "the form is over %d bytes", maxForm)
		}
		return bot.Errorf(bot.EINVALID, "the form cannot be read: %v", err)
	}
	return nil
}

func sameToken(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// signInView is what the sign-in form shows.
type signInView struct {
	Next    string
	Error   string
	Name    string
	HasUser bool // users are configured: the password form is shown
}

// signInForm shows the sign-in form with a fresh form token.
func (u *UI) signInForm(w http.ResponseWriter, r *http.Request) {
	u.showSignIn(w, r, http.StatusOK, signInView{Next: localNext(r.URL.Query().Get("next"))})
}

func (u *UI) showSignIn(w http.ResponseWriter, r *http.Request, status int, v signInView) {
	token := randomToken()
	http.SetCookie(w, u.cookie(r, signInCookie, token, 3600))
	v.HasUser = len(u.sessions.in.Load().users) > 0
	u.renderWith(w, r, status, "signin.html", token, v)
}

// dummyHash is the hash of a random password nobody knows, compared
// against when no user has the name given, so that a wrong name costs as
// long as a wrong password (at the cost switchyard admin hash-password
// uses).
const dummyHash = "$2a$12$kAVMS1k7A7EWnfI/2/tMYO18hPnp/3/2wrGwcsLP30o5jrfi62tbG"

// signIn checks a token or a name and password and starts a session.
func (u *UI) signIn(w http.ResponseWriter, r *http.Request) {
	if err := readForm(w, r); err != nil {
		u.fail(w, r, err)
		return
	}
	v := signInView{Next: localNext(r.PostFormValue("next")), Name: r.PostFormValue("name")}
	c, err := r.Cookie(signInCookie)
	if err != nil || !sameToken(r.PostFormValue(csrfField), c.Value) {
		v.Error = "This sign-in form has expired: sign in again."
		u.showSignIn(w, r, http.StatusForbidden, v)
		return
	}
	token := r.PostFormValue("token")
	keys := signInKeys(r, "")
	if token == "" {
		keys = signInKeys(r, v.Name)
	}
	d, slowed := u.guard.admit(keys)
	if d > 0 {
		u.tooMany(w, r, v, d, "Too many failed sign-ins")
		return
	}
	refused := func(msg, logMsg string, attrs ...any) {
		v.Error = msg
		u.opts.Logger.Warn(logMsg, append(attrs, "remote", r.RemoteAddr)...)
		if slowed {
			u.opts.Logger.Warn("admin sign-in slowed down: too many failures", append(attrs, "remote", r.RemoteAddr)...)
		}
		u.showSignIn(w, r, http.StatusUnauthorized, v)
	}
	var who credential
	in := u.sessions.in.Load()
	if token != "" {
		name, ok := in.tokens.Name(token)
		if !ok {
			refused("Wrong token.", "admin sign-in refused: wrong token")
			return
		}
		who = tokenCredential(name, token)
	} else {
		usr, known := in.users[strings.ToLower(v.Name)]
		hash := dummyHash
		if known {
			hash = usr.PasswordHash.Reveal()
		}
		var err error
		if !u.guard.check(r.Context(), func() { err = bcrypt.CompareHashAndPassword([]byte(hash), []byte(r.PostFormValue("password"))) }) {
			u.guard.unchecked(keys)
			u.tooMany(w, r, v, checkWait, "Too many sign-ins at once")
			return
		}
		if err != nil || !known {
			refused("Wrong name or password.", "admin sign-in refused: wrong name or password", "name", loggedName(v.Name))
			return
		}
		who = userCredential(usr)
	}
	u.guard.succeeded(keys)
	// A session the browser brought is ended, not carried on: whoever
	// made it (someone who planted their own in this browser) holds
	// nothing of the one started now, whose id is new.
	if c, err := r.Cookie(sessionCookie); err == nil {
		if err := u.sessions.end(r.Context(), c.Value); err != nil {
			u.fail(w, r, err)
			return
		}
	}
	id, err := u.sessions.start(r.Context(), who)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	http.SetCookie(w, u.cookie(r, signInCookie, "", -1))
	http.SetCookie(w, u.cookie(r, sessionCookie, id, int(u.opts.SessionTTL.Seconds())))
	u.log.Info("admin signed in", "identity", who.identity)
	next := v.Next
	if next == "" {
		next = "/admin/"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// loggedName is how a name tried at sign-in is logged: as it was given up
// to the length a user's name may have, and anything longer (no user's)
// cut there with its size, so that a guesser does not write megabytes to
// the log.
func loggedName(name string) string {
	const longest = 64 // config's check of admin.users
	if len(name) <= longest {
		return name
	}
	return fmt.Sprintf("%s… (%d bytes)", strings.ToValidUTF8(name[:longest], ""), len(name))
}

// tooMany refuses a sign-in that must wait d, with 429 and Retry-After.
func (u *UI) tooMany(w http.ResponseWriter, r *http.Request, v signInView, d time.Duration, why string) {
	secs := max(1, int(math.Ceil(d.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	v.Error = fmt.Sprintf("%s: try again in %s.", why, bot.Count(secs, "second", "seconds"))
	u.showSignIn(w, r, http.StatusTooManyRequests, v)
}

// signOut ends the session.
func (u *UI) signOut(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		if err := u.sessions.end(r.Context(), c.Value); err != nil {
			u.fail(w, r, err)
			return
		}
	}
	http.SetCookie(w, u.cookie(r, sessionCookie, "", -1))
	http.Redirect(w, r, "/admin/signin", http.StatusSeeOther)
}

// localNext returns next when it is a path of the UI, else "": sign-in
// leads nowhere else. It must read as that path to every reader, so what a
// browser drops or reads otherwise (control characters and spaces, which
// it strips, a backslash, which it takes for a slash) and a path that is
// not clean (dot segments, doubled slashes, spelled or escaped) are none.
func localNext(next string) string {
	if strings.ContainsFunc(next, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '\\' }) {
		return ""
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return ""
	}
	clean := path.Clean(u.Path)
	if strings.HasSuffix(u.Path, "/") {
		clean += "/"
	}
	if clean != u.Path || !strings.HasPrefix(clean, "/admin/") {
		return ""
	}
	return next
}
