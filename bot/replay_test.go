package bot_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// A stored event is decided again with its thread as it was when it came:
// work made after it does not count, work that finished since was still
// running then.
func TestReplaySeesTheThreadAsItWas(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	router, err := bot.NewRouter(bot.RoutingConfig{}, []bot.AgentInfo{{Name: "coder"}, {Name: "reviewer"}, {Name: "triage"}})
	require.NoError(t, err)
	now := time.Date(2025, 3, 4, 9, 0, 0, 0, time.UTC)
	intake := bot.NewIntake(bot.IntakeOptions{Store: store, Router: router, Threads: store, ThreadWindow: time.Hour,
		Now: func() time.Time { return now }})
	send := func(text string) *bot.WorkItem {
		t.Helper()
		now = now.Add(time.Second)
		res, err := intake.Ingest(ctx, &bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Text: text, Thread: bot.LocalThread("t")})
		require.NoError(t, err)
		return res.WorkItem
	}
	replay := func(wi *bot.WorkItem) bot.Replay {
		t.Helper()
		ev, err := store.GetEvent(ctx, wi.EventRef)
		require.NoError(t, err)
		stored, err := store.GetWorkItem(ctx, wi.ID)
		require.NoError(t, err)
		r, err := intake.Replay(ctx, bot.IngestResult{WorkItem: stored}, ev)
		require.NoError(t, err)
		return r
	}

	first := send("hello")
	require.Equal(t, bot.RouteDefault, first.Route.Kind)
	followUp := send("and another thing")
	require.Equal(t, bot.RouteThread, followUp.Route.Kind)
	// Much more work in the thread since, all of it finished.
	for range 25 {
		send("@reviewer look")
	}
	for {
		claim, err := store.ClaimNext(ctx, bot.ClaimRequest{Owner: "w", Now: now, Lease: time.Minute, MaxAttempts: 3})
		require.NoError(t, err)
		if claim.Job == nil {
			break
		}
		require.NoError(t, store.FinishJob(ctx, bot.JobOutcome{JobID: claim.Job.ID, Owner: "w", Now: now, Success: true}))
	}
	now = now.Add(24 * time.Hour)

	r := replay(first)
	require.False(t, r.Differs, "its own work item and what came after do not count: %+v", r)
	require.Equal(t, bot.RouteDefault, r.Now.Kind)
	r = replay(followUp)
	require.False(t, r.Differs, "%+v", r)
	require.Equal(t, "thread: @triage is working here ("+first.ID+")", r.Now.Reason, "unfinished then")
}
