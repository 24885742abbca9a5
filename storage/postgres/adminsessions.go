package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/bot"
)

// CreateSession keeps a new admin UI session.
func (s *Store) CreateSession(ctx context.Context, sess bot.AdminSession) error {
	if err := sess.Validate(); err != nil {
		return err
	}
	if err := s.open(); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, "INSERT INTO admin_sessions (hash, identity, credential, csrf, expires) VALUES ($1, $2, $3, $4, $5)",
		sess.Hash, sess.Identity, sess.Credential, sess.CSRF, sess.Expires.UTC())
	if isUniqueViolation(err) {
		return bot.Errorf(bot.ECONFLICT, "an admin session with this id exists")
	}
	return s.wrap("create admin session", err)
}

// GetSession returns the admin UI session whose id has the SHA-256 hash,
// expired or not.
func (s *Store) GetSession(ctx context.Context, hash []byte) (bot.AdminSession, bool, error) {
	if err := s.open(); err != nil {
		return bot.AdminSession{}, false, err
	}
	sess := bot.AdminSession{Hash: hash}
	err := s.pool.QueryRow(ctx, "SELECT identity, credential, csrf, expires FROM admin_sessions WHERE hash = $1", hash).
		Scan(&sess.Identity, &sess.Credential, &sess.CSRF, &sess.Expires)
	if err == pgx.ErrNoRows {
		return bot.AdminSession{}, false, nil
	}
	if err != nil {
		return bot.AdminSession{}, false, s.wrap("read admin session", err)
	}
	sess.Expires = sess.Expires.UTC()
	return sess, true, nil
}

// DeleteSession forgets the admin UI session whose id has the SHA-256
// hash; forgetting one that is not there is no error.
func (s *Store) DeleteSession(ctx context.Context, hash []byte) error {
	if err := s.open(); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, "DELETE FROM admin_sessions WHERE hash = $1", hash)
	return s.wrap("delete admin session", err)
}

// DropExpiredSessions forgets at most limit admin UI sessions expired at
// now, the longest expired first, and returns how many it forgot.
func (s *Store) DropExpiredSessions(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := s.open(); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM admin_sessions WHERE hash IN (
		SELECT hash FROM admin_sessions WHERE expires <= $1 ORDER BY expires LIMIT $2)`, now.UTC(), limit)
	if err != nil {
		return 0, s.wrap("drop expired admin sessions", err)
	}
	return int(tag.RowsAffected()), nil
}
