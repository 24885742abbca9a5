-- The admin UI's sessions (bot.AdminSession), by the SHA-256 of their id:
-- the id itself, which the cookie carries, is never stored.

CREATE TABLE admin_sessions (
	hash     bytea PRIMARY KEY,
	identity text NOT NULL,
	csrf     text NOT NULL,
	expires  timestamptz NOT NULL
);

CREATE INDEX admin_sessions_by_expiry ON admin_sessions (expires);
