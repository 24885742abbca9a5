package bolt

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// After retention removed most of a store, compacting gives the space back
// and keeps everything that was left; a store a daemon holds is refused.
func TestCompactGivesBackWhatRetentionFreed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	path := s.Path()
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	payload := bytes.Repeat([]byte(`{"x":"lorem ipsum dolor sit amet"}`), 1000)
	var kept []string
	for i := range 200 {
		at := start.Add(time.Duration(i) * time.Minute)
		res, err := s.Ingest(ctx, bot.IngestRequest{
			Event: bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, DeliveryID: fmt.Sprint(i),
				Thread: bot.LocalThread(fmt.Sprint("t", i)), Text: "hello", ReceivedAt: at, Raw: payload},
			Route: &bot.Route{Agent: "coder", Kind: bot.RouteMention, Reason: "mention @coder"}, Now: at,
		})
		require.NoError(t, err)
		if i >= 190 {
			kept = append(kept, res.WorkItem.ID)
		}
	}
	_, err := s.Sweep(ctx, start.Add(190*time.Minute), bot.Retention{Payloads: time.Minute})
	require.NoError(t, err)

	_, err = Compact(ctx, path)
	require.ErrorContains(t, err, "the file is in use, by a running daemon most likely; stop it first")
	require.NoError(t, s.Close())

	res, err := Compact(ctx, path)
	require.NoError(t, err)
	t.Logf("compacted: %d → %d bytes", res.Before, res.After)
	require.Less(t, res.After, res.Before/2)
	_, err = os.Stat(path + ".compacting")
	require.ErrorIs(t, err, os.ErrNotExist, "no copy is left behind")

	s = openTest(t, dir)
	for _, id := range kept {
		wi, err := s.GetWorkItem(ctx, id)
		require.NoError(t, err)
		ev, err := s.GetEvent(ctx, wi.EventRef)
		require.NoError(t, err)
		require.Equal(t, payload, ev.Raw, "the payloads retention kept")
	}
	n, err := s.QueueDepth(ctx)
	require.NoError(t, err)
	require.Equal(t, 200, n)

	_, err = Compact(ctx, filepath.Join(dir, "nothing.db"))
	require.ErrorContains(t, err, "no such file")
}
