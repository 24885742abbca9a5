package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/switchyard/switchyard/bot"
)

// Token is a bearer token of the API and who it speaks for.
type Token struct {
	// Name is the identity of whoever presents the token: the name
	// approvals are decided as.
	Name  string
	Value bot.Secret
}

// Identity is who an API request authenticated as.
type Identity struct {
	// Name is the name of the token the request carried.
	Name string
}

type identityKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns who the request of ctx authenticated as; ok is false
// when it did not.
func IdentityFrom(ctx context.Context) (id Identity, ok bool) {
	id, ok = ctx.Value(identityKey{}).(Identity)
	return id, ok && id.Name != ""
}

// TokenSet is the API's named tokens, for finding whose a presented token
// is: the bearer tokens of /api/v1 and the tokens people sign in to the
// admin UI with. Replace swaps them all at once, so a token withdrawn from
// the config stops authenticating when the config is reloaded.
type TokenSet struct {
	known atomic.Pointer[[]knownToken]
}

type knownToken struct {
	name   string
	digest [sha256.Size]byte
}

// NewTokenSet returns the set of tokens; unset ones are skipped.
func NewTokenSet(tokens []Token) *TokenSet {
	s := &TokenSet{}
	s.Replace(tokens)
	return s
}

// Replace makes tokens the set's tokens in place of those it had; unset
// ones are skipped. A request being authenticated meanwhile is checked
// against either set whole, never a mix.
func (s *TokenSet) Replace(tokens []Token) {
	known := make([]knownToken, 0, len(tokens))
	for _, t := range tokens {
		if t.Value.IsSet() {
			known = append(known, knownToken{t.Name, sha256.Sum256([]byte(t.Value.Reveal()))})
		}
	}
	s.known.Store(&known)
}

// Name returns the name of the token got, ok false when it is none of
// them. Tokens are compared in constant time, every one of them, so the
// timing says nothing about which came close; they are compared by their
// SHA-256, of one length, so it says nothing of a token's length either
// (subtle.ConstantTimeCompare answers at once for lengths that differ).
func (s *TokenSet) Name(got string) (name string, ok bool) {
	digest := sha256.Sum256([]byte(got))
	var known []knownToken // a TokenSet never given tokens has none
	if p := s.known.Load(); p != nil {
		known = *p
	}
	for _, k := range known {
		if subtle.ConstantTimeCompare(digest[:], k.digest[:]) == 1 {
			name = k.name
		}
	}
	return name, name != ""
}

// Authenticate wraps next so that every request must carry
// "Authorization: Bearer <token>" with one of the set's tokens as they are
// when the request comes; next finds the token's name with IdentityFrom.
// Anything else is answered 401. With no token in the set, every request
// is refused.
func Authenticate(set *TokenSet, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The scheme name is case-insensitive (RFC 9110 §11.1).
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		name := ""
		if ok && strings.EqualFold(scheme, "Bearer") {
			name, _ = set.Name(got)
		}
		if name == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="switchyard"`)
			JSON(w, http.StatusUnauthorized, ErrorBody{Error: "missing or wrong bearer token", Code: bot.EUNAUTHORIZED})
			return
		}
		next.ServeHTTP(w, r.WithContext(WithIdentity(r.Context(), Identity{Name: name})))
	})
}

// StrictQuery wraps next so that a query string names each parameter once
// and is well formed: ?force=false&force=true, or a pair that does not
// decode (%zz), is answered 400, rather than read as whichever value the
// handler takes first, which need not be the one a proxy, a log or a
// person reading the address takes.
func StrictQuery(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := ParseForm(r.URL.RawQuery, "query string", "query parameter"); err != nil {
			Error(w, r, nil, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ParseForm reads a query string or an application/x-www-form-urlencoded
// body that names each field once, as every platform Switchyard hears from
// sends them. A pair that does not decode, or a field given twice, is an
// EINVALID error naming it, in the words whole ("query string", "form")
// and field ("query parameter", "form field"): url.Values.Get reads the
// first of two, a proxy, a log or another reader may read the last, and the
// request must not mean one thing to one of them and another to the next.
func ParseForm(raw, whole, field string) (url.Values, error) {
	values, err := url.ParseQuery(raw)
	if err != nil {
		return nil, bot.Errorf(bot.EINVALID, "the %s cannot be read: %v", whole, err)
	}
	for name, vs := range values {
		if len(vs) > 1 {
			return nil, bot.Errorf(bot.EINVALID, "%s %q is given %d times: give it once", field, name, len(vs))
		}
	}
	return values, nil
}

// CodeUnsupportedMediaType is the code of a 415 answer.
const CodeUnsupportedMediaType = "unsupported_media_type"

// RequireJSON wraps next so that a request body must be JSON of at most
// MaxBody bytes: a request with a Content-Type other than application/json
// (parameters such as charset allowed), or with a body and no
// Content-Type, is answered 415. A browser can send text/plain or a form
// anywhere without asking first; it must ask before it sends JSON. A body
// whose Content-Length is over MaxBody is answered 413 by every endpoint,
// those that read no body too; so is one of unknown length (chunked),
// which is read first, at most MaxBody bytes of it, and handed on as read.
func RequireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > MaxBody {
			Error(w, r, nil, bot.Errorf(bot.ETOOLARGE, "request body over %d bytes", MaxBody))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		ct := r.Header.Get("Content-Type")
		hasBody := r.ContentLength != 0 // -1: unknown, chunked
		if ct == "" && !hasBody {
			next.ServeHTTP(w, r)
			return
		}
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			shown := ct
			if shown == "" {
				shown = "none"
			}
			JSON(w, http.StatusUnsupportedMediaType, ErrorBody{
				Error: fmt.Sprintf("request body must be JSON: send Content-Type: application/json (got %s)", shown),
				Code:  CodeUnsupportedMediaType,
			})
			return
		}
		if r.ContentLength < 0 {
			// Of unknown length: an endpoint that reads no body would
			// never find it too large.
			body, err := io.ReadAll(r.Body)
			if err != nil {
				Error(w, r, nil, decodeError(err))
				return
			}
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		next.ServeHTTP(w, r)
	})
}

// Site is where the daemon is reached: its listen address (with
// "localhost" and the loopback addresses when it listens on loopback or on
// every address) and its public URL. Requests from anywhere else are
// refused.
type Site struct {
	port     string
	loopback bool // listening on loopback or on every address
	anyIP    bool // listening on every address
	hosts    map[string]bool
	origins  map[string]bool
	names    []string // for error messages
}

// NewSite returns the site of a daemon listening on listen (host:port) and
// reached at publicURL ("" for none).
func NewSite(listen, publicURL string) (*Site, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, bot.Errorf(bot.EINVALID, "server.listen %q: %v", listen, err)
	}
	s := &Site{port: port, hosts: map[string]bool{}, origins: map[string]bool{}}
	ip, ipErr := netip.ParseAddr(host)
	switch {
	case host == "" || ipErr == nil && ip.IsUnspecified():
		s.anyIP, s.loopback = true, true
	case strings.EqualFold(host, "localhost") || ipErr == nil && ip.IsLoopback():
		s.loopback = true
	default:
		s.add("http", host, port)
	}
	if s.loopback {
		for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
			s.add("http", h, port)
		}
	}
	if publicURL != "" {
		u, err := url.Parse(publicURL)
		if err != nil || u.Hostname() == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, bot.Errorf(bot.EINVALID, "server.public_url: want an http or https URL")
		}
		s.add(u.Scheme, u.Hostname(), portOf(u.Scheme, u.Port()))
	}
	return s, nil
}

func portOf(scheme, port string) string {
	switch {
	case port != "":
		return port
	case scheme == "https":
		return "443"
	default:
		return "80"
	}
}

func hostKey(host, port string) string {
	return strings.ToLower(net.JoinHostPort(strings.Trim(host, "[]"), port))
}

func (s *Site) add(scheme, host, port string) {
	key := hostKey(host, port)
	s.hosts[key] = true
	s.origins[scheme+"://"+key] = true
	shown := scheme + "://" + net.JoinHostPort(strings.Trim(host, "[]"), port)
	if port == portOf(scheme, "") {
		shown = scheme + "://" + host
	}
	if !slices.Contains(s.names, shown) {
		s.names = append(s.names, shown)
	}
}

// knownIP reports whether host:port is an address literal the daemon
// answers on: a loopback address when it listens on loopback, any address
// when it listens on every one. An address literal is no DNS name, so it
// cannot be rebound to the daemon.
func (s *Site) knownIP(host, port string) bool {
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil || port != s.port {
		return false
	}
	return s.anyIP || s.loopback && ip.IsLoopback()
}

// hostOK reports whether a Host header names the daemon.
func (s *Site) hostOK(h string) bool {
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		// No port: the scheme's default, which the header does not say.
		host = h
		return s.hosts[hostKey(host, "80")] || s.hosts[hostKey(host, "443")] || s.knownIP(host, "80")
	}
	return s.hosts[hostKey(host, port)] || s.knownIP(host, port)
}

// originOK reports whether an Origin header is the daemon's own.
func (s *Site) originOK(o string) bool {
	u, err := url.Parse(o)
	if err != nil || u.Hostname() == "" || u.Path != "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // "null", or not an origin at all
	}
	port := portOf(u.Scheme, u.Port())
	return s.origins[u.Scheme+"://"+hostKey(u.Hostname(), port)] || u.Scheme == "http" && s.knownIP(u.Hostname(), port)
}

// foreignReferer reports whether a request without an Origin was sent
// from a page of another site, as its Referer headers say, and that site's
// origin, which is all of the page's address an error shows (the rest may
// hold what the page was given). A browser that sends no Origin (an older
// one, or a form posted by a page whose policy keeps it) still says where
// the request comes from there; one that sends no Referer says nothing.
func (s *Site) foreignReferer(referers []string) (string, bool) {
	for _, ref := range referers {
		u, err := url.Parse(ref)
		if err != nil || u.Scheme == "" && u.Host == "" {
			return "a page whose address cannot be read", true
		}
		origin := u.Scheme + "://" + u.Host
		if !s.originOK(origin) {
			return origin, true
		}
	}
	return "", false
}

func (s *Site) described() string {
	return strings.Join(s.names, ", ")
}

// Guard wraps next so that only requests meant for the daemon reach it:
// a Host header that names another host (a DNS name rebound to the daemon)
// and a cross-site request (an Origin that is not the daemon's, without
// an Origin a Referer from another site, or Sec-Fetch-Site cross-site or
// same-site) are answered 403. site is asked on every request, so the
// daemon can learn its port once it listens.
func Guard(site func() *Site, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := site()
		if !s.hostOK(r.Host) {
			JSON(w, http.StatusForbidden, ErrorBody{
				Error: fmt.Sprintf("Host %q is not this daemon's address (%s); set server.public_url to the address it is reached at",
					r.Host, s.described()),
				Code: bot.EFORBIDDEN,
			})
			return
		}
		if origin, sent := r.Header["Origin"]; sent && (len(origin) != 1 || !s.originOK(origin[0])) {
			JSON(w, http.StatusForbidden, ErrorBody{
				Error: fmt.Sprintf("cross-site request refused: Origin %q is not this daemon's (%s)", strings.Join(origin, ", "), s.described()),
				Code:  bot.EFORBIDDEN,
			})
			return
		}
		if _, sent := r.Header["Origin"]; !sent {
			if from, foreign := s.foreignReferer(r.Header.Values("Referer")); foreign {
				JSON(w, http.StatusForbidden, ErrorBody{
					Error: fmt.Sprintf("cross-site request refused: it was sent from a page of %s, not of this daemon (%s)", from, s.described()),
					Code:  bot.EFORBIDDEN,
				})
				return
			}
		}
		switch site := r.Header.Get("Sec-Fetch-Site"); site {
		case "cross-site", "same-site":
			JSON(w, http.StatusForbidden, ErrorBody{
				Error: fmt.Sprintf("cross-site request refused: the browser says it comes from another site (Sec-Fetch-Site: %s)", site),
				Code:  bot.EFORBIDDEN,
			})
			return
		}
		next.ServeHTTP(w, r)
	})
}
