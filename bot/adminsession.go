package bot

import (
	"crypto/sha256"
	"time"
)

// AdminSession is one person signed in to the admin UI, as the store keeps
// it: under the SHA-256 of the session's id, never the id itself, so
// nothing stored is a cookie anyone could send.
type AdminSession struct {
	// Hash is the SHA-256 of the id the cookie carries.
	Hash     []byte `json:"hash"`
	Identity string `json:"identity"`
	// Credential stands for what the person signed in with (a token, or
	// a user's password hash) as an HMAC-SHA256 keyed by the session's
	// id: the session lasts only while that credential is configured for
	// its identity, and nothing stored can be checked against a guess at
	// a token without the cookie.
	Credential []byte    `json:"credential"`
	CSRF       string    `json:"csrf"`
	Expires    time.Time `json:"expires"`
}

// Validate refuses a session a store must not keep.
func (s AdminSession) Validate() error {
	switch {
	case len(s.Hash) != sha256.Size:
		return Errorf(EINVALID, "admin session: the hash of its id must be %d bytes, not %d", sha256.Size, len(s.Hash))
	case s.Identity == "":
		return Errorf(EINVALID, "admin session without an identity")
	case len(s.Credential) != sha256.Size:
		return Errorf(EINVALID, "admin session of %q: the credential it stands for must be %d bytes, not %d", s.Identity, sha256.Size, len(s.Credential))
	case s.CSRF == "":
		return Errorf(EINVALID, "admin session of %q without a CSRF token", s.Identity)
	case s.Expires.IsZero():
		return Errorf(EINVALID, "admin session of %q without an expiry", s.Identity)
	}
	return nil
}
