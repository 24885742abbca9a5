package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/storetest"
)

// openTest opens a store in dir and, when the test ends, checks the file's
// consistency (tx.Check) and closes it. A store the test closed itself is
// checked by reopening its file read-only.
func openTest(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(dir, "switchyard.db"), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { checkAndClose(t, s) })
	return s
}

func checkAndClose(t testing.TB, s *Store) {
	t.Helper()
	err := s.db.View(checkTx)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		db, openErr := bolt.Open(s.path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
		require.NoError(t, openErr)
		err = db.View(checkTx)
		require.NoError(t, db.Close())
	}
	require.NoError(t, err, "consistency check of %s", s.path)
	require.NoError(t, s.Close())
}

func checkTx(tx *bolt.Tx) error { return Check(tx) }

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, dir string) storetest.Store { return openTest(t, dir) })
}

func TestOpenCreatesFileAndDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "nested", "switchyard.db")
	s, err := Open(context.Background(), path, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { checkAndClose(t, s) })

	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), di.Mode().Perm())
	require.NoError(t, s.Ping(t.Context()))
}

func TestOpenLockedFile(t *testing.T) {
	dir := t.TempDir()
	first := openTest(t, dir)
	_, err := Open(context.Background(), first.Path(), Options{LockTimeout: 100 * time.Millisecond})
	require.Error(t, err)
	require.Equal(t, fmt.Sprintf("open %s: locked by another process (waited 100ms)", first.Path()), err.Error())
	// The holder is unaffected.
	require.NoError(t, first.Ping(t.Context()))
}

// requireRefused opens path, expects an error naming the file and containing
// each of wants, and checks the file is byte for byte what it was.
func requireRefused(t *testing.T, path string, wants ...string) {
	t.Helper()
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	info, err := os.Stat(path)
	require.NoError(t, err)

	s, err := Open(context.Background(), path, Options{LockTimeout: time.Second})
	if err == nil {
		_ = s.Close()
	}
	require.Error(t, err)
	require.Contains(t, err.Error(), path)
	for _, w := range wants {
		require.Contains(t, err.Error(), w)
	}

	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(before, after), "the file must not change")
	infoAfter, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, info.Mode(), infoAfter.Mode())
	require.Equal(t, info.ModTime(), infoAfter.ModTime())

	// Refusing released the lock: another open fails the same way at once.
	_, err = Open(context.Background(), path, Options{LockTimeout: 50 * time.Millisecond})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "locked")
}

func TestOpenCorruptFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 64<<10)
	for i := range garbage {
		garbage[i] = byte(rng.UintN(256))
	}
	for _, tc := range []struct {
		name    string
		content []byte
	}{
		{"random bytes", garbage},
		{"short text", []byte("not a database\n")},
		{"zero pages", make([]byte, 16<<10)},
		{"sqlite header", append([]byte("SQLite format 3\x00"), make([]byte, 8<<10)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "switchyard.db")
			require.NoError(t, os.WriteFile(path, tc.content, 0o600))
			requireRefused(t, path)
		})
	}
}

func TestOpenTruncatedDatabase(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	path := s.Path()
	require.NoError(t, s.Close())
	full, err := os.ReadFile(path)
	require.NoError(t, err)
	// Both meta pages damaged: bbolt cannot pick a valid one.
	damaged := append([]byte(nil), full...)
	for i := 0; i < 2*4096 && i < len(damaged); i += 7 {
		damaged[i] ^= 0xff
	}
	bad := filepath.Join(t.TempDir(), "switchyard.db")
	require.NoError(t, os.WriteFile(bad, damaged, 0o600))
	requireRefused(t, bad)
}

// bbolt panics on a damaged freelist page; Open must turn that into an
// error and let go of the file.
func TestOpenDamagedFreelist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchyard.db")
	s, err := Open(context.Background(), path, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	// Each meta page: a 16-byte page header, then magic, version, page size
	// and flags (4 bytes each), the root bucket (16), the freelist page id.
	pageSize := int(binary.LittleEndian.Uint32(b[16+8:]))
	for meta := range 2 {
		freelist := int(binary.LittleEndian.Uint64(b[meta*pageSize+48:]))
		require.Less(t, (freelist+1)*pageSize, len(b)+1)
		for i := range pageSize {
			b[freelist*pageSize+i] = 0xab
		}
	}
	require.NoError(t, os.WriteFile(path, b, 0o600))
	requireRefused(t, path, "corrupt database")
}

func TestOpenForeignBoltFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("registry"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	}))
	require.NoError(t, db.Close())
	requireRefused(t, path, "not a Switchyard database", "registry")
}

func TestOpenNewerSchema(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	path := s.Path()
	require.NoError(t, s.Close())

	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketMeta)).Put([]byte(schemaKey), []byte("7"))
	}))
	require.NoError(t, db.Close())

	requireRefused(t, path, "schema version 7", fmt.Sprintf("supports (%d)", SchemaVersion))
}

func TestOpenKeepsData(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	res, err := s.Ingest(t.Context(), bot.IngestRequest{
		Event: bot.Event{Source: "local", Kind: bot.KindLocalMessage, Thread: bot.LocalThread("t"), Raw: []byte("{}")},
		Route: &bot.Route{Agent: "coder", Kind: bot.RouteDefault, Reason: "default"}, Now: time.Now(),
	})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s = openTest(t, dir)
	wi, err := s.GetWorkItem(t.Context(), res.WorkItem.ID)
	require.NoError(t, err)
	require.Equal(t, res.WorkItem.ID, wi.ID)
}

func TestClosedStore(t *testing.T) {
	s := openTest(t, t.TempDir())
	require.NoError(t, s.Close())
	require.Equal(t, bot.EUNAVAILABLE, bot.ErrorCode(s.Ping(t.Context())))
	_, err := s.Ingest(t.Context(), bot.IngestRequest{
		Event: bot.Event{Source: "local"}, Route: &bot.Route{Agent: "coder", Kind: bot.RouteDefault}, Now: time.Now(),
	})
	require.Equal(t, bot.EUNAVAILABLE, bot.ErrorCode(err))
}

// TestIngestRecordsMatchStore pins the exported layout to what Ingest
// writes: every record IngestRecords describes is in the file, byte for byte.
func TestIngestRecordsMatchStore(t *testing.T) {
	for _, routedEvent := range []bool{true, false} {
		t.Run(fmt.Sprintf("routed=%t", routedEvent), func(t *testing.T) {
			s := openTest(t, t.TempDir())
			now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			req := bot.IngestRequest{
				Event: bot.Event{
					Source: bot.SourceGitHub, Kind: "github.issues.opened", DeliveryID: "abc",
					Thread: bot.GitHubThread("acme", "api", 1), Text: "help", Raw: []byte(`{"action":"opened"}`),
				},
				Now: now, DedupUntil: now.Add(time.Hour),
			}
			seqs := Seqs{Event: 1}
			if routedEvent {
				req.Route = &bot.Route{Agent: "triage", Kind: bot.RouteDefault, Reason: "default"}
				seqs.WorkItem, seqs.Dispatch = 1, 1
			} else {
				req.Ignore = &bot.IngressReason{Code: bot.IgnoreNoRoute}
				seqs.Ingress = 1
			}
			_, err := s.Ingest(t.Context(), req)
			require.NoError(t, err)

			records, err := IngestRecords(req, seqs)
			require.NoError(t, err)
			written := map[string]int{}
			require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
				for _, r := range records {
					b := tx.Bucket([]byte(r.Bucket))
					require.NotNil(t, b, "bucket %s", r.Bucket)
					require.Equal(t, r.Value, b.Get(r.Key), "%s/%x", r.Bucket, r.Key)
				}
				// And nothing else was written.
				for _, name := range Buckets() {
					written[string(name)] = tx.Bucket(name).Stats().KeyN
				}
				return nil
			}))
			want := map[string]int{}
			for _, name := range Buckets() {
				want[string(name)] = 0
			}
			want[bucketMeta] = 1
			for _, r := range records {
				want[string(r.Bucket)]++
			}
			require.Equal(t, want, written)
		})
	}
}

func TestInvalidRequests(t *testing.T) {
	s := openTest(t, t.TempDir())
	ctx := t.Context()
	now := time.Now()
	for name, req := range map[string]bot.ClaimRequest{
		"no owner":        {Now: now, Lease: time.Minute, MaxAttempts: 1},
		"no lease":        {Owner: "w", Now: now, MaxAttempts: 1},
		"no max attempts": {Owner: "w", Now: now, Lease: time.Minute},
	} {
		_, err := s.ClaimNext(ctx, req)
		require.Equal(t, bot.EINVALID, bot.ErrorCode(err), name)
	}
	_, _, err := s.ListWorkItems(ctx, bot.WorkItemFilter{Status: "sleeping"})
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
	_, err = s.Ingest(ctx, bot.IngestRequest{Event: bot.Event{Source: "local"}, Route: &bot.Route{}})
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
	_, err = s.Enqueue(ctx, bot.OutboxMessage{Key: "k"})
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
	_, err = s.RerouteWorkItem(ctx, "wi_1", bot.Hop{From: "a"})
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
	require.Equal(t, bot.EINVALID, bot.ErrorCode(s.SetLastFired(ctx, "", now)))

	_, err = s.Enqueue(ctx, bot.OutboxMessage{Key: "k", Thread: bot.LocalThread("t")})
	require.NoError(t, err)
	for _, v := range []int{0, 2} {
		err := s.Record(ctx, []bot.DeliveryOutcome{{Key: "k", Delivered: true, Version: v, RemoteID: "r", At: now, Next: now}})
		require.Equal(t, bot.EINVALID, bot.ErrorCode(err), "version %d", v)
	}
}

// Events without a thread have nowhere to be serialised against: each is its
// own unit and they run side by side.
func TestThreadlessWorkRunsInParallel(t *testing.T) {
	s := openTest(t, t.TempDir())
	ctx := t.Context()
	now := time.Now()
	var want []string
	for range 2 {
		res, err := s.Ingest(ctx, bot.IngestRequest{
			Event: bot.Event{Source: bot.SourceSchedule, Kind: bot.KindScheduleTick},
			Route: &bot.Route{Agent: "ops", Kind: bot.RouteRule, Reason: "rule"}, Now: now,
		})
		require.NoError(t, err)
		want = append(want, res.WorkItem.ID)
	}
	var got []string
	for range 2 {
		c, err := s.ClaimNext(ctx, bot.ClaimRequest{Owner: "w", Now: now, Lease: time.Minute, MaxAttempts: 1})
		require.NoError(t, err)
		require.NotNil(t, c.Job)
		got = append(got, c.Job.WorkItemIDs...)
		require.NoError(t, s.FinishJob(ctx, bot.JobOutcome{JobID: c.Job.ID, Owner: "w", Now: now, Success: true}))
	}
	require.Equal(t, want, got)
}

// A request without a dedup window still dedups, for bot's default window.
func TestDedupWindowDefault(t *testing.T) {
	s := openTest(t, t.TempDir())
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	req := bot.IngestRequest{
		Event: bot.Event{Source: bot.SourceSlack, DeliveryID: "Ev1", Thread: bot.LocalThread("t")},
		Route: &bot.Route{Agent: "coder", Kind: bot.RouteDefault, Reason: "default"}, Now: now,
	}
	_, err := s.Ingest(t.Context(), req)
	require.NoError(t, err)
	req.Now = now.Add(bot.DefaultDedupWindow - time.Minute)
	res, err := s.Ingest(t.Context(), req)
	require.NoError(t, err)
	require.True(t, res.Duplicate)
	n, err := s.ExpireDedup(t.Context(), now.Add(bot.DefaultDedupWindow+time.Minute))
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

func TestSkillsConformance(t *testing.T) {
	storetest.RunSkills(t, func(t *testing.T, dir string) storetest.SkillStore { return openTest(t, dir) })
}
