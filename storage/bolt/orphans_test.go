package bolt_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt"
)

func TestOrphanedLeasesAreReclaimedAtOnceAfterRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "switchyard.db")
	s, err := bolt.Open(context.Background(), path, bolt.Options{})
	require.NoError(t, err)
	now := time.Now()
	_, err = s.Ingest(ctx, bot.IngestRequest{
		Event: bot.Event{Source: "local", Kind: "local.message", Thread: bot.LocalThread("t")},
		Route: &bot.Route{Agent: "coder", Kind: bot.RouteDefault, Reason: "default"}, Now: now,
	})
	require.NoError(t, err)
	claim, err := s.ClaimNext(ctx, bot.ClaimRequest{Owner: "dead", Now: now, Lease: time.Hour, MaxAttempts: 3})
	require.NoError(t, err)
	require.NotNil(t, claim.Job)
	require.NoError(t, s.Close()) // the process "dies" holding a one-hour lease

	s, err = bolt.Open(context.Background(), path, bolt.Options{})
	require.NoError(t, err)
	defer s.Close()
	n, err := s.ExpireOrphanedLeases(ctx, now.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	claim, err = s.ClaimNext(ctx, bot.ClaimRequest{Owner: "new", Now: now.Add(2 * time.Second), Lease: time.Minute, MaxAttempts: 3})
	require.NoError(t, err)
	require.NotNil(t, claim.Job, "the work is claimable without waiting out the old lease")
	require.Equal(t, 2, claim.Job.Attempt)
}
