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
	bolt "go.etcd.io/bbolt"

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

// A store file with a damaged page is refused with an error that says it
// is corrupt, wherever the damage is, and left byte for byte as it was;
// where the damage is in bytes nothing checks (a payload's text), the
// compacted file passes the store's checks. Compact never panics.
func TestCompactRefusesACorruptFileAndLeavesIt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	path := s.Path()
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 120 {
		at := start.Add(time.Duration(i) * time.Minute)
		_, err := s.Ingest(ctx, bot.IngestRequest{
			Event: bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, DeliveryID: fmt.Sprint(i),
				Thread: bot.LocalThread(fmt.Sprint("t", i)), Text: "hello", ReceivedAt: at,
				Raw: bytes.Repeat([]byte(`{"x":"lorem ipsum"}`), 20)},
			Route: &bot.Route{Agent: "coder", Kind: bot.RouteMention, Reason: "mention @coder"}, Now: at,
		})
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	orig, err := os.ReadFile(path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, os.WriteFile(path, orig, 0o600)) })
	page := os.Getpagesize()
	refused := 0
	// Pages 0 and 1 are bbolt's meta pages, which it checksums itself.
	for pg := 2; pg < len(orig)/page; pg++ {
		for _, at := range []int{0, page / 2} {
			t.Run(fmt.Sprintf("page %d at %d", pg, at), func(t *testing.T) {
				bad := bytes.Clone(orig)
				for i := range 64 {
					bad[pg*page+at+i] = byte(0xa5 ^ i)
				}
				require.NoError(t, os.WriteFile(path, bad, 0o600))
				_, err := Compact(ctx, path)
				_, statErr := os.Stat(path + ".compacting")
				require.ErrorIs(t, statErr, os.ErrNotExist, "no copy is left behind")
				if err != nil {
					refused++
					require.ErrorContains(t, err, "corrupt")
					require.ErrorContains(t, err, path)
					got, readErr := os.ReadFile(path)
					require.NoError(t, readErr)
					require.True(t, bytes.Equal(bad, got), "the file is left as it was")
					return
				}
				db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
				require.NoError(t, err)
				defer db.Close()
				require.NoError(t, db.View(Check))
			})
		}
	}
	require.Positive(t, refused)
}

// The compacted file keeps the original's permissions and, when root
// compacts a file another user owns (the daemon's), its owner: the daemon
// opens it afterwards as before.
func TestCompactKeepsTheFilesOwnerAndPermissions(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	path := s.Path()
	_, err := s.Ingest(ctx, bot.IngestRequest{
		Event: bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, DeliveryID: "1",
			Thread: bot.LocalThread("t"), Text: "hello", ReceivedAt: time.Now()},
		Route: &bot.Route{Agent: "coder", Kind: bot.RouteMention, Reason: "mention @coder"}, Now: time.Now(),
	})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, os.Chmod(path, 0o640))
	if os.Geteuid() == 0 {
		require.NoError(t, os.Chown(path, 65534, 65534)) // nobody
	}
	before, err := os.Stat(path)
	require.NoError(t, err)

	_, err = Compact(ctx, path)
	require.NoError(t, err)
	after, err := os.Stat(path)
	require.NoError(t, err)
	require.False(t, os.SameFile(before, after), "the file was rewritten")
	require.Equal(t, os.FileMode(0o640), after.Mode().Perm())
	require.Equal(t, owner(before), owner(after))
}
