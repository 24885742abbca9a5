package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
	"github.com/switchyard/switchyard/storage/dump"
	"github.com/switchyard/switchyard/storage/postgres"
	"github.com/switchyard/switchyard/storage/postgres/pgtest"
	"github.com/switchyard/switchyard/storage/storetest"
)

var pg *pgtest.Server

func TestMain(m *testing.M) { pgtest.Main(m, &pg) }

// opener gives each directory the suite names a database of its own, and
// the same one when it opens the directory again.
func opener(t *testing.T) func(t *testing.T, dir string) *postgres.Store {
	var (
		mu  sync.Mutex
		dbs = map[string]string{}
	)
	return func(t *testing.T, dir string) *postgres.Store {
		t.Helper()
		mu.Lock()
		dsn, ok := dbs[dir]
		if !ok {
			dsn = pg.Database(t)
			dbs[dir] = dsn
		}
		mu.Unlock()
		s, err := postgres.Open(t.Context(), dsn, postgres.Options{MaxConns: 4})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}

// emptyStore is a store on a database of its own, for a load to fill.
func emptyStore(t *testing.T) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), pg.Database(t), postgres.Options{MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	pg.Skip(t)
	open := opener(t)
	storetest.Run(t, func(t *testing.T, dir string) storetest.Store { return open(t, dir) })
}

func TestSkillsConformance(t *testing.T) {
	pg.Skip(t)
	open := opener(t)
	storetest.RunSkills(t, func(t *testing.T, dir string) storetest.SkillStore { return open(t, dir) })
}

// Replicas starting together apply each migration once; a database whose
// schema is newer than the build is refused, naming both versions.
func TestMigrations(t *testing.T) {
	dsn := pg.EmptyDatabase(t)
	ctx := t.Context()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		applied []string
	)
	for range 4 {
		wg.Go(func() {
			names, err := postgres.Migrate(ctx, dsn)
			require.NoError(t, err)
			mu.Lock()
			applied = append(applied, names...)
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Len(t, applied, postgres.SchemaVersion(), "each migration applied once: %v", applied)
	names, err := postgres.Migrate(ctx, dsn)
	require.NoError(t, err)
	require.Empty(t, names)

	s, err := postgres.Open(ctx, dsn, postgres.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Ping(ctx))
	require.NoError(t, s.Close())

	conn, err := pgxConnect(ctx, dsn)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES (9999, '9999_future')")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	_, err = postgres.Open(ctx, dsn, postgres.Options{})
	require.ErrorContains(t, err, "schema version 9999 is newer than this build supports")
}

// A server that cannot be reached is EUNAVAILABLE, named without the
// password; a DSN that cannot be read is EINVALID, and not repeated.
func TestOpenErrorsNameNoPassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := postgres.Open(ctx, "postgres://switchyard:hunter2-secret@127.0.0.1:1/switchyard?connect_timeout=2", postgres.Options{})
	require.Error(t, err)
	require.Equal(t, bot.EUNAVAILABLE, bot.ErrorCode(err), "%v", err)
	require.NotContains(t, err.Error(), "hunter2")
	require.Contains(t, err.Error(), "127.0.0.1:1")

	_, err = postgres.Open(ctx, "postgres://switchyard:hunter2-secret@host:notaport/db", postgres.Options{})
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err), "%v", err)
	require.NotContains(t, err.Error(), "hunter2")
	require.True(t, strings.HasPrefix(err.Error(), "storage.dsn: "), err.Error())
}

// Replicas listing due outbox messages together each get their own: a
// message one lists is another's only after its outcome is recorded, and
// the later messages of its work item wait with it, so each message is
// sent by one replica, in its work item's order.
func TestOutboxClaimsAcrossReplicas(t *testing.T) {
	pg.Skip(t)
	dsn := pg.Database(t)
	ctx := t.Context()
	open := func() *postgres.Store {
		s, err := postgres.Open(ctx, dsn, postgres.Options{MaxConns: 2})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b := open(), open()
	th := bot.LocalThread("t")
	for _, m := range []bot.OutboxMessage{
		{Key: "wi_1/status", Thread: th, WorkItemID: "wi_1", Kind: bot.OutboxStatus, Text: "running"},
		{Key: "wi_1/reply", Thread: th, WorkItemID: "wi_1", Kind: bot.OutboxReply, Text: "done"},
		{Key: "note", Thread: th, Kind: bot.OutboxReply, Text: "note"},
	} {
		_, err := a.Enqueue(ctx, m)
		require.NoError(t, err)
	}
	keys := func(s *postgres.Store) []string {
		t.Helper()
		msgs, err := s.Due(ctx, time.Now(), 10, nil)
		require.NoError(t, err)
		out := []string{}
		for _, m := range msgs {
			out = append(out, m.Key)
		}
		return out
	}
	require.Equal(t, []string{"wi_1/status", "wi_1/reply", "note"}, keys(a))
	require.Empty(t, keys(b), "every message is a's to send")
	require.Equal(t, []string{"wi_1/status", "wi_1/reply", "note"}, keys(a), "a lists its own again")

	now := time.Now()
	require.NoError(t, a.Record(ctx, []bot.DeliveryOutcome{{Key: "wi_1/status", Delivered: true, Version: 1, RemoteID: "r1", At: now, Next: now}}))
	require.Empty(t, keys(b), "the reply waits for its work item's message a still holds")

	// The status changes again while a still holds the reply: b may send
	// the new version, and the reply after it waits for b's delivery.
	_, err := b.Enqueue(ctx, bot.OutboxMessage{Key: "wi_1/status", Thread: th, WorkItemID: "wi_1", Kind: bot.OutboxStatus, Text: "finished"})
	require.NoError(t, err)
	require.Equal(t, []string{"wi_1/status"}, keys(b))
	require.Equal(t, []string{"note"}, keys(a))
	require.NoError(t, b.Record(ctx, []bot.DeliveryOutcome{{Key: "wi_1/status", Delivered: true, Version: 2, At: now, Next: now}}))
	require.Equal(t, []string{"wi_1/reply", "note"}, keys(a))
	require.Empty(t, keys(b))

	// A replica that closes gives its claims up.
	require.NoError(t, a.Close())
	require.Equal(t, []string{"wi_1/reply", "note"}, keys(b))
}

// storage copy moves every record of a bbolt store into an empty
// database, and the database answers as the file did.
func TestCopyFromBolt(t *testing.T) {
	pg.Skip(t)
	from := bolttest.Open(t, t.TempDir())
	to, err := postgres.Open(t.Context(), pg.Database(t), postgres.Options{MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(func() { _ = to.Close() })
	storetest.RunCopy(t, from, to)
}

// A load sets each sequence past the last id the source gave out, even
// when the record that had it is gone, and past the highest id loaded.
func TestLoadGoesOnAfterTheSourcesSequences(t *testing.T) {
	pg.Skip(t)
	ctx := t.Context()
	s := emptyStore(t)
	th := bot.LocalThread("seq")
	now := time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)
	err := s.Load(ctx, func(fn func(dump.Record) error) error {
		for _, r := range []dump.Record{
			// Retention removed wi_6 to wi_100 and their events.
			{Sequence: &dump.Sequence{Series: dump.SeriesWorkItems, Last: 100}},
			{Sequence: &dump.Sequence{Series: dump.SeriesEvents, Last: 100}},
			// The dispatch series' last id is lower than one loaded.
			{Sequence: &dump.Sequence{Series: dump.SeriesDispatches, Last: 3}},
			{Event: &dump.Event{Seq: 5, Event: bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Thread: th, Text: "hi", ReceivedAt: now}}},
			{WorkItem: &dump.WorkItem{WorkItem: bot.WorkItem{ID: "wi_5", EventRef: "ev_5", Thread: th, Status: bot.StatusDone,
				Route: bot.Route{Agent: "coder", Kind: bot.RouteMention}, CreatedAt: now, UpdatedAt: now}, DispatchID: "d_7"}},
			{Dispatch: &bot.Dispatch{ID: "d_7", WorkItemID: "wi_5", Agent: "coder", Thread: th, Status: bot.DispatchDone, CreatedAt: now, UpdatedAt: now}},
		} {
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	wi, err := s.GetWorkItem(ctx, "wi_5")
	require.NoError(t, err)
	require.Equal(t, "ev_5", wi.EventRef)
	res, err := s.Ingest(ctx, bot.IngestRequest{
		Event: bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, DeliveryID: "new", Thread: th, Text: "next", ReceivedAt: now},
		Route: &bot.Route{Agent: "coder", Kind: bot.RouteMention, Reason: "mention @coder"}, Now: now,
	})
	require.NoError(t, err)
	require.Equal(t, "wi_101", res.WorkItem.ID)
	require.Equal(t, "ev_101", res.WorkItem.EventRef)
	c, err := s.ClaimNext(ctx, bot.ClaimRequest{Owner: "w", Now: now, Lease: time.Minute, MaxAttempts: 3})
	require.NoError(t, err)
	require.NotNil(t, c.Job)
	require.Equal(t, []string{"d_8"}, c.Job.DispatchIDs, "the dispatch after the highest loaded")
}

// A load whose source fails midway keeps nothing: the database is as empty
// as it was, and the source's error comes back as it was.
func TestLoadThatFailsKeepsNothing(t *testing.T) {
	pg.Skip(t)
	ctx := t.Context()
	s := emptyStore(t)
	now := time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)
	item := dump.Record{WorkItem: &dump.WorkItem{WorkItem: bot.WorkItem{ID: "wi_1", Thread: bot.LocalThread("x"), Status: bot.StatusDone,
		Route: bot.Route{Agent: "coder", Kind: bot.RouteMention}, CreatedAt: now, UpdatedAt: now}}}
	broken := errors.New("read the source: the disk is gone")
	err := s.Load(ctx, func(fn func(dump.Record) error) error {
		if err := fn(item); err != nil {
			return err
		}
		return broken
	})
	require.ErrorIs(t, err, broken)
	require.Equal(t, broken.Error(), err.Error())
	_, err = s.GetWorkItem(ctx, "wi_1")
	require.Equal(t, bot.ENOTFOUND, bot.ErrorCode(err))
	require.NoError(t, s.Load(ctx, func(fn func(dump.Record) error) error { return fn(item) }), "the database is still empty")
}

// A load of a record with text PostgreSQL cannot keep (a schedule an older
// bbolt store took with a name that is not UTF-8) fails naming the record
// and the text, and keeps nothing.
func TestLoadRefusesTextPostgresCannotKeep(t *testing.T) {
	pg.Skip(t)
	ctx := t.Context()
	s := emptyStore(t)
	now := time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)
	for _, name := range []string{"nightly\xff", "night\x00ly"} {
		err := s.Load(ctx, func(fn func(dump.Record) error) error {
			if err := fn(dump.Record{Schedule: &dump.Schedule{Name: "fine", Last: now}}); err != nil {
				return err
			}
			return fn(dump.Record{Schedule: &dump.Schedule{Name: name, Last: now}})
		})
		require.Equal(t, bot.EINVALID, bot.ErrorCode(err), "%v", err)
		require.ErrorContains(t, err, fmt.Sprintf("schedule firings: %q is not UTF-8 text without NUL", name))
		_, ok, err := s.LastFired(ctx, "fine")
		require.NoError(t, err)
		require.False(t, ok, "nothing is kept")
	}
}

// The server's clock is read against the clock of the replica asking,
// however far that one is off: replicas keep the server's time by it.
func TestClockOffsetIsTheServersTime(t *testing.T) {
	pg.Skip(t)
	s := emptyStore(t)
	for _, skew := range []time.Duration{0, time.Hour, -90 * time.Second} {
		host := func() time.Time { return time.Now().Add(skew) }
		offset, err := s.ClockOffset(t.Context(), host)
		require.NoError(t, err)
		require.InDelta(t, (-skew).Seconds(), offset.Seconds(), 1, "the host's clock %s off", skew)
	}
	require.NoError(t, s.Close())
	_, err := s.ClockOffset(t.Context(), time.Now)
	require.Equal(t, bot.EUNAVAILABLE, bot.ErrorCode(err), "%v", err)
}

// lockedBuffer is a log's output that tests read while the store writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A replica whose listening connection is cut (pg_terminate_backend, a
// proxy dropping it) listens again after the shortest pause each time,
// however often that happens, and is told to look again for what it
// missed meanwhile.
func TestListeningAgainAfterTheConnectionIsCut(t *testing.T) {
	pg.Skip(t)
	dsn := pg.Database(t)
	logs := &lockedBuffer{}
	s, err := postgres.Open(t.Context(), dsn, postgres.Options{MaxConns: 2, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	resyncs := make(chan struct{}, 16)
	go func() {
		_ = s.Listen(t.Context(), func(topic, _ string) {
			if topic == bot.TopicResync {
				resyncs <- struct{}{}
			}
		})
	}()
	admin, err := pgxConnect(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	listener := func() int {
		var pid int
		err := admin.QueryRow(t.Context(), `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
			WHERE datname = current_database() AND query = 'LISTEN switchyard' AND pid <> pg_backend_pid()`).Scan(&pid)
		require.NoError(t, err)
		return pid
	}
	const cuts = 6
	prev := 0
	for range cuts {
		var pid int
		require.Eventually(t, func() bool { pid = listener(); return pid != 0 && pid != prev }, 15*time.Second, 5*time.Millisecond,
			"the replica listens again")
		_, err := admin.Exec(t.Context(), "SELECT pg_terminate_backend($1)", pid)
		require.NoError(t, err)
		select {
		case <-resyncs:
		case <-time.After(15 * time.Second):
			t.Fatal("the replica was not told to look again")
		}
		prev = pid
	}
	pauses := regexp.MustCompile(`"retry_in":(\d+)`).FindAllStringSubmatch(logs.String(), -1)
	require.Len(t, pauses, cuts, logs.String())
	for _, p := range pauses {
		require.Equal(t, strconv.FormatInt((100*time.Millisecond).Nanoseconds(), 10), p[1], "the pause after a connection that listened")
	}
}
