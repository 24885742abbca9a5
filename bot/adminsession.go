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
	Hash     []byte    `json:"hash"`
	Identity string    `json:"identity"`
	CSRF     string    `json:"csrf"`
	Expires  time.Time `json:"expires"`
}

// Validate refuses a session a store must not keep.
func (s AdminSession) Validate() error {
	switch {
	case len(s.Hash) != sha256.Size:
		return Errorf(EINVALID, "admin session: the hash of its id must be %d bytes, not %d", sha256.Size, len(s.Hash))
	case s.Identity == "":
		return Errorf(EINVALID, "admin session without an identity")
	case s.CSRF == "":
		return Errorf(EINVALID, "admin session of %q without a CSRF token", s.Identity)
	case s.Expires.IsZero():
		return Errorf(EINVALID, "admin session of %q without an expiry", s.Identity)
	}
	return nil
}
