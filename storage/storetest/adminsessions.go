package storetest

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

func adminSession(id, identity string, expires time.Time) bot.AdminSession {
	h := sha256.Sum256([]byte(id))
	cred := sha256.Sum256([]byte("credential of " + id))
	return bot.AdminSession{Hash: h[:], Identity: identity, Credential: cred[:], CSRF: "csrf-" + id, Expires: expires}
}

// testAdminSessions keeps sessions across a reopen, forgets one signed out
// and drops expired ones a bounded number at a time, oldest first.
func testAdminSessions(t *testing.T, open Opener) {
	h := newHarness(t, open)
	alice := adminSession("alice-id", "alice", at(time.Hour))
	require.NoError(t, h.s.CreateSession(h.ctx, alice))
	unbound := adminSession("unbound-id", "alice", at(time.Hour))
	unbound.Credential = nil
	err := h.s.CreateSession(h.ctx, unbound)
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err), "a session standing for no credential: %v", err)

	_, ok, err := h.s.GetSession(h.ctx, adminSession("nobody", "x", at(0)).Hash)
	require.NoError(t, err)
	require.False(t, ok, "a session never made")

	err = h.s.CreateSession(h.ctx, alice)
	require.Equal(t, bot.ECONFLICT, bot.ErrorCode(err), "a second session with the same id: %v", err)

	h.reopen()
	got, ok, err := h.s.GetSession(h.ctx, alice.Hash)
	require.NoError(t, err)
	require.True(t, ok, "the session outlives a restart")
	require.Equal(t, alice, got)

	require.NoError(t, h.s.DeleteSession(h.ctx, alice.Hash))
	_, ok, err = h.s.GetSession(h.ctx, alice.Hash)
	require.NoError(t, err)
	require.False(t, ok, "signed out")
	require.NoError(t, h.s.DeleteSession(h.ctx, alice.Hash), "signing out twice")

	// Three expired (at 1m, 2m, 3m), one live.
	for i, d := range []time.Duration{3 * time.Minute, time.Minute, 2 * time.Minute} {
		require.NoError(t, h.s.CreateSession(h.ctx, adminSession(string(rune('a'+i)), "bob", at(d))))
	}
	live := adminSession("live", "carol", at(time.Hour))
	require.NoError(t, h.s.CreateSession(h.ctx, live))

	n, err := h.s.DropExpiredSessions(h.ctx, at(3*time.Minute), 2)
	require.NoError(t, err)
	require.Equal(t, 2, n, "at most the limit")
	for id, want := range map[string]bool{"b": false, "c": false, "a": true} {
		_, ok, err := h.s.GetSession(h.ctx, adminSession(id, "bob", at(0)).Hash)
		require.NoError(t, err)
		require.Equal(t, want, ok, "session %s: the longest expired go first", id)
	}
	n, err = h.s.DropExpiredSessions(h.ctx, at(3*time.Minute), 100)
	require.NoError(t, err)
	require.Equal(t, 1, n, "a session expiring at now has expired")
	n, err = h.s.DropExpiredSessions(h.ctx, at(3*time.Minute), 100)
	require.NoError(t, err)
	require.Zero(t, n)
	_, ok, err = h.s.GetSession(h.ctx, live.Hash)
	require.NoError(t, err)
	require.True(t, ok, "a live session stays")
}

// testAdminSessionsRefuseBadInput keeps no session without the SHA-256 of
// its id, an identity, a CSRF token and an expiry.
func testAdminSessionsRefuseBadInput(t *testing.T, open Opener) {
	h := newHarness(t, open)
	good := adminSession("id", "alice", at(time.Hour))
	for name, edit := range map[string]func(*bot.AdminSession){
		"the id, not its hash": func(s *bot.AdminSession) { s.Hash = []byte("id") },
		"no identity":          func(s *bot.AdminSession) { s.Identity = "" },
		"no CSRF token":        func(s *bot.AdminSession) { s.CSRF = "" },
		"no expiry":            func(s *bot.AdminSession) { s.Expires = time.Time{} },
	} {
		t.Run(name, func(t *testing.T) {
			s := good
			edit(&s)
			err := h.s.CreateSession(h.ctx, s)
			require.Equal(t, bot.EINVALID, bot.ErrorCode(err), "%v", err)
			_, ok, err := h.s.GetSession(h.ctx, s.Hash)
			require.NoError(t, err)
			require.False(t, ok)
		})
	}
}
