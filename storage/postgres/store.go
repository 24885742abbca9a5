package postgres

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/bot"
)

// Defaults of Options.
const (
	DefaultMaxConns = 10
	// DefaultMaxBatchSize and DefaultMaxBatchDelay are Ingest's group
	// commit, as the bbolt store's: events that arrive together are
	// written in one round trip and one commit.
	DefaultMaxBatchSize  = 32
	DefaultMaxBatchDelay = 2 * time.Millisecond
)

// Options configure Open.
type Options struct {
	// MaxConns caps the pool; default 10. Listen holds one more
	// connection of its own.
	MaxConns int
	// MaxBatchSize and MaxBatchDelay tune Ingest's group commit; a batch
	// goes out when it holds MaxBatchSize events or MaxBatchDelay after
	// its first. A MaxBatchSize of 1 writes each event on its own.
	MaxBatchSize  int
	MaxBatchDelay time.Duration
	// Logger receives what the store does on its own: migrations, leases
	// it expires, work it abandons, lost notification connections.
	Logger *slog.Logger
}

// Store is every store interface the daemon uses, in one PostgreSQL
// database that any number of replicas share.
type Store struct {
	pool  *pgxpool.Pool
	cfg   *pgxpool.Config
	where string
	log   *slog.Logger
	batch *batcher
	// id names this store among the replicas: the holder of the outbox
	// messages it claims.
	id string

	closeOnce sync.Once
	closed    chan struct{}
	// deaf says why Listen does not listen now (its connection was lost
	// and is not made again yet); nil while it listens, or before it
	// first tried.
	deaf atomic.Pointer[string]
}

var _ bot.Store = (*Store)(nil)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one numbered step of the schema.
type migration struct {
	version int
	name    string
	sql     string
}

// Migrations returns the schema's steps in order.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: want <number>_<name>.sql", e.Name())
		}
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: strings.TrimSuffix(e.Name(), ".sql"), sql: string(b)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	return out, nil
}

// SchemaVersion is the newest migration this build has.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// migrateLock is the advisory lock migrations run under, so replicas
// starting together apply each migration once.
const migrateLock = 0x5357_4954_4348 // "SWITCH"

// Migrate applies the migrations the database lacks, in order, each in its
// own transaction, under an advisory lock, and returns the names of those
// it applied. A database whose schema is newer than this build is refused.
func Migrate(ctx context.Context, dsn string) ([]string, error) {
	conn, err := connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return migrate(ctx, conn)
}

func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, bot.Errorf(bot.EINVALID, "storage.dsn: %s", dsnError(err))
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, unreachable(describe(cfg.Host, cfg.Port, cfg.Database), err)
	}
	return conn, nil
}

// CheckDSN says what is wrong with a connection string, without repeating
// it (it holds a password), or returns nil: what Open refuses before it
// tries to connect, for the checks of a config that must refuse it too.
func CheckDSN(dsn string) error {
	if _, err := pgxpool.ParseConfig(dsn); err != nil {
		return errors.New(dsnError(err))
	}
	return nil
}

// dsnError says what is wrong with a DSN without repeating it: pgx's
// parse errors quote the string, password and all.
func dsnError(err error) string {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) && pe.Unwrap() != nil {
		return "cannot read the connection string: " + pe.Unwrap().Error()
	}
	return "cannot read the connection string"
}

func migrate(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrateLock); err != nil {
		return nil, fmt.Errorf("migrate: take the migration lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrateLock) //nolint:errcheck // the session ends anyway
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	var current int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&current); err != nil {
		return nil, fmt.Errorf("migrate: read the schema version: %w", err)
	}
	if newest := ms[len(ms)-1].version; current > newest {
		return nil, fmt.Errorf("the database's schema version %d is newer than this build supports (%d); run a newer Switchyard", current, newest)
	}
	var applied []string
	for _, m := range ms {
		if m.version <= current {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("migration %s: %w", m.name, err)
		}
		applied = append(applied, m.name)
	}
	return applied, nil
}

// Open connects to the database of dsn, applies the migrations it lacks
// and returns the store. It fails naming the server (never the password)
// when the server cannot be reached within ctx, and when the schema is
// newer than this build.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.MaxBatchSize <= 0 {
		opts.MaxBatchSize = DefaultMaxBatchSize
	}
	if opts.MaxBatchDelay <= 0 {
		opts.MaxBatchDelay = DefaultMaxBatchDelay
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, bot.Errorf(bot.EINVALID, "storage.dsn: %s", dsnError(err))
	}
	cfg.MaxConns = int32(opts.MaxConns)
	where := describe(cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		return nil, unreachable(where, err)
	}
	applied, err := migrate(ctx, conn)
	conn.Close(context.WithoutCancel(ctx))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", where, err)
	}
	for _, name := range applied {
		opts.Logger.Info("database migrated", slog.String("migration", name), slog.String("database", where))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, unreachable(where, err)
	}
	s := &Store{pool: pool, cfg: cfg, where: where, log: opts.Logger, id: rand.Text(), closed: make(chan struct{})}
	s.batch = newBatcher(s, opts.MaxBatchSize, opts.MaxBatchDelay)
	s.log.Info("store opened", slog.String("database", where), slog.Int("schema_version", SchemaVersion()),
		slog.Int("max_conns", opts.MaxConns))
	return s, nil
}

// describe names a database for people: host, port and database name,
// never the user's password.
func describe(host string, port uint16, db string) string {
	if strings.HasPrefix(host, "/") {
		return fmt.Sprintf("postgres database %s (socket %s, port %d)", db, host, port)
	}
	return fmt.Sprintf("postgres database %s at %s", db, net.JoinHostPort(host, strconv.Itoa(int(port))))
}

// unreachable is the error of a server that cannot be reached: EUNAVAILABLE,
// so the intake answers 503 and the sender tries again.
func unreachable(where string, err error) error {
	return bot.Errorf(bot.EUNAVAILABLE, "cannot reach the %s: %s", where, connError(err))
}

// connError is a connection error's cause, without pgconn's repetition of
// the address (and with it, in some versions, the user name).
func connError(err error) string {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Unwrap() != nil {
		err = ce.Unwrap()
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err
	}
	return err.Error()
}

// Where names the database for people, without the password.
func (s *Store) Where() string { return s.where }

// Ping reports whether the database answers (readiness).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.open(); err != nil {
		return err
	}
	return s.wrap("ping", s.pool.Ping(ctx))
}

// Close stops the group commit and closes the pool. Later calls return nil.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.batch.stop()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.releaseClaims(ctx)
		cancel()
		close(s.closed)
		s.pool.Close()
	})
	return nil
}

func (s *Store) open() error {
	select {
	case <-s.closed:
		return bot.Errorf(bot.EUNAVAILABLE, "the store is closed")
	default:
		return nil
	}
}

// wrap passes domain errors and the caller's context errors through, makes
// a closed store or an unreachable server EUNAVAILABLE, and names the
// operation on anything else.
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var be *bot.Error
	if errors.As(err, &be) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if s.open() != nil {
		return bot.Errorf(bot.EUNAVAILABLE, "%s: the store is closed", op)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if pe.Code == pgBadText {
			return bot.Errorf(bot.EINVALID, "%s: text that is not UTF-8, or holds NUL, cannot be stored", op)
		}
		if pe.Code == "57P01" || strings.HasPrefix(pe.Code, "08") || pe.Code == "53300" {
			return bot.Errorf(bot.EUNAVAILABLE, "%s: the %s is not available: %s", op, s.where, pe.Message)
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	if pgconn.SafeToRetry(err) || isNetError(err) {
		return bot.Errorf(bot.EUNAVAILABLE, "%s: cannot reach the %s: %s", op, s.where, connError(err))
	}
	return fmt.Errorf("%s: %w", op, err)
}

// pgBadText is PostgreSQL's error for text that is not UTF-8 or holds NUL
// (character_not_in_repertoire).
const pgBadText = "22021"

// storable reports whether PostgreSQL could keep s as text: a lookup by
// anything else finds nothing, as on bbolt, rather than failing.
func storable(s string) bool { return bot.ValidText("", s) == nil }

func isNetError(err error) bool {
	var ne net.Error
	var ce *pgconn.ConnectError
	return errors.As(err, &ne) || errors.As(err, &ce) || strings.Contains(err.Error(), "conn closed")
}

// tx runs fn in a transaction, retried when the database aborts it for a
// serialization failure or a deadlock, and wraps its error as op.
func (s *Store) tx(ctx context.Context, op string, fn func(pgx.Tx) error) error {
	if err := s.open(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var err error
	for attempt := range 5 {
		err = pgx.BeginFunc(ctx, s.pool, fn)
		var pe *pgconn.PgError
		if err == nil || !errors.As(err, &pe) || (pe.Code != "40001" && pe.Code != "40P01") {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 5 * time.Millisecond)
	}
	return s.wrap(op, err)
}
