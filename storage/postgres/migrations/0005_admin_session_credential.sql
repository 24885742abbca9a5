-- What an admin UI session was signed in with (bot.AdminSession.Credential):
-- a session lasts only while that credential is configured. Sessions made
-- before carry none and are refused, so people sign in again once.

ALTER TABLE admin_sessions ADD COLUMN credential bytea NOT NULL DEFAULT ''::bytea;
