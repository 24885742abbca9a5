package bolt

import (
	"bytes"
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// The admin UI's sessions live in two top-level buckets created by the
// first sign-in, so files written before they existed need no migration:
//
//	admin_sessions             SHA-256 of the id → bot.AdminSession JSON
//	admin_sessions_by_expiry   expiry (8 bytes, timeKey) + SHA-256 → ""
//
// The index lets dropping expired sessions read only those.
var (
	bucketAdminSessions         = []byte("admin_sessions")
	bucketAdminSessionsByExpiry = []byte("admin_sessions_by_expiry")
)

// adminSessionBuckets returns the two buckets; in a read transaction they
// are nil until the first session was written.
func adminSessionBuckets(tx *bolt.Tx) (sessions, byExpiry *bolt.Bucket, err error) {
	if !tx.Writable() {
		return tx.Bucket(bucketAdminSessions), tx.Bucket(bucketAdminSessionsByExpiry), nil
	}
	if sessions, err = tx.CreateBucketIfNotExists(bucketAdminSessions); err != nil {
		return nil, nil, fmt.Errorf("create bucket %s: %w", bucketAdminSessions, err)
	}
	if byExpiry, err = tx.CreateBucketIfNotExists(bucketAdminSessionsByExpiry); err != nil {
		return nil, nil, fmt.Errorf("create bucket %s: %w", bucketAdminSessionsByExpiry, err)
	}
	return sessions, byExpiry, nil
}

func expiryKey(expires time.Time, hash []byte) []byte {
	return append(timeKey(expires), hash...)
}

// CreateSession keeps a new admin UI session.
func (s *Store) CreateSession(ctx context.Context, sess bot.AdminSession) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sess.Validate(); err != nil {
		return err
	}
	sess.Expires = utc(sess.Expires)
	return s.update("create admin session", func(t txn) error {
		b, idx, err := adminSessionBuckets(t.tx)
		if err != nil {
			return err
		}
		if b.Get(sess.Hash) != nil {
			return bot.Errorf(bot.ECONFLICT, "an admin session with this id exists")
		}
		if err := putJSON(b, sess.Hash, sess); err != nil {
			return err
		}
		return idx.Put(expiryKey(sess.Expires, sess.Hash), nil)
	})
}

// GetSession returns the admin UI session whose id has the SHA-256 hash,
// expired or not.
func (s *Store) GetSession(ctx context.Context, hash []byte) (bot.AdminSession, bool, error) {
	if err := ctx.Err(); err != nil {
		return bot.AdminSession{}, false, err
	}
	var sess bot.AdminSession
	var ok bool
	err := s.view("read admin session", func(t txn) error {
		b, _, err := adminSessionBuckets(t.tx)
		if err != nil || b == nil {
			return err
		}
		v := b.Get(hash)
		if v == nil {
			return nil
		}
		if err := unmarshal(v, &sess); err != nil {
			return fmt.Errorf("decode admin session: %w", err)
		}
		ok = true
		return nil
	})
	return sess, ok, err
}

// DeleteSession forgets the admin UI session whose id has the SHA-256
// hash; forgetting one that is not there is no error.
func (s *Store) DeleteSession(ctx context.Context, hash []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.update("delete admin session", func(t txn) error {
		b, idx, err := adminSessionBuckets(t.tx)
		if err != nil {
			return err
		}
		v := b.Get(hash)
		if v == nil {
			return nil
		}
		var sess bot.AdminSession
		if err := unmarshal(v, &sess); err != nil {
			return fmt.Errorf("decode admin session: %w", err)
		}
		if err := idx.Delete(expiryKey(sess.Expires, hash)); err != nil {
			return err
		}
		return b.Delete(hash)
	})
}

// DropExpiredSessions forgets at most limit admin UI sessions expired at
// now, the longest expired first, and returns how many it forgot.
func (s *Store) DropExpiredSessions(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n := 0
	err := s.update("drop expired admin sessions", func(t txn) error {
		b, idx, err := adminSessionBuckets(t.tx)
		if err != nil {
			return err
		}
		until := timeKey(now)
		var expired [][]byte
		c := idx.Cursor()
		for k, _ := c.First(); k != nil && len(expired) < limit && bytes.Compare(k[:8], until) <= 0; k, _ = c.Next() {
			expired = append(expired, bytes.Clone(k))
		}
		for _, k := range expired {
			if err := idx.Delete(k); err != nil {
				return err
			}
			if err := b.Delete(k[8:]); err != nil {
				return err
			}
		}
		n = len(expired)
		return nil
	})
	return n, err
}
