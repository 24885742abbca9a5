package github

import (
	"crypto/rsa"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	jwt "github.com/golang-jwt/jwt/v4"
)

// The App's JWT: GitHub takes one issued up to a minute in the past (for
// clocks that differ) and expiring at most ten minutes ahead.
const (
	jwtBackdate = time.Minute
	jwtLifetime = 9 * time.Minute
	// jwtRenew is how long before it expires a JWT is replaced.
	jwtRenew = time.Minute
)

// appJWT signs the App's JWTs for ghinstallation (a ghinstallation.Signer)
// and reuses each for its lifetime. ghinstallation signs a fresh RS256 JWT
// for every request it makes as the App (installation lookups, token
// exchanges); while GitHub was unreachable, that signing was most of what
// a backlog of undelivered messages cost. The claims ghinstallation asks
// for (issued 30 s ago, valid 2 minutes) are replaced by one JWT, issued a
// minute ago and valid nine, shared by every installation.
type appJWT struct {
	key   *rsa.PrivateKey
	appID int64
	now   func() time.Time

	mu      sync.Mutex
	token   string
	expires time.Time
	signed  int // JWTs signed, for tests
}

var _ ghinstallation.Signer = (*appJWT)(nil)

// Sign returns the App's current JWT, signing a new one when it is about
// to expire.
func (s *appJWT) Sign(jwt.Claims) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.token != "" && now.Add(jwtRenew).Before(s.expires) {
		return s.token, nil
	}
	issued := now.Add(-jwtBackdate).Truncate(time.Second)
	expires := now.Add(jwtLifetime).Truncate(time.Second)
	token, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
		IssuedAt:  jwt.NewNumericDate(issued),
		ExpiresAt: jwt.NewNumericDate(expires),
		Issuer:    strconv.FormatInt(s.appID, 10),
	}).SignedString(s.key)
	if err != nil {
		return "", fmt.Errorf("sign the GitHub App's JWT: %w", err)
	}
	s.token, s.expires = token, expires
	s.signed++
	return token, nil
}
