package bolt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/switchyard/switchyard/bot"
)

// DefaultLockTimeout is how long Open waits for another process holding
// the file to let go, unless Options says otherwise.
const DefaultLockTimeout = 2 * time.Second

// Options configure Open. Zero fields take the defaults.
type Options struct {
	// LockTimeout is how long Open waits for another process holding the
	// file to let go.
	LockTimeout time.Duration
	// Logger receives what the store does on its own: opening the file,
	// leases it expires, work it abandons.
	Logger *slog.Logger
}

// Store is a bot.Store in one bbolt file.
type Store struct {
	db    *bolt.DB
	path  string
	log   *slog.Logger
	bus   bus
	group *groupCommit
	// unreadable are the outbox entries Due found it cannot read, each
	// logged once: they are passed over rather than holding back every
	// destination (the consistency check names them too).
	unreadable sync.Map

	closeOnce sync.Once
	closeErr  error
}

var _ bot.Store = (*Store)(nil)

// Open opens the store in the file at path, creating the file (0600) and its
// directory (0700) when missing. ctx bounds the wait for another process
// holding the file, with opts.LockTimeout. It fails, naming the file, when another
// process holds the file beyond opts.LockTimeout, when the file is not a
// bbolt database or is corrupt, when it belongs to something other than
// Switchyard, or when its schema is newer than this code. An existing file is
// never rewritten on any of these errors.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < opts.LockTimeout {
		opts.LockTimeout = max(time.Until(dl), time.Millisecond)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("open %s: not a regular file", path)
	}
	db, err := openDB(path, opts.LockTimeout)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, path: path, log: opts.Logger, group: &groupCommit{db: db}}
	created, err := s.prepare()
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s.log.Info("store opened", slog.String("path", path), slog.Bool("created", created),
		slog.Int("schema_version", SchemaVersion))
	return s, nil
}

// openDB opens the bbolt file, turning bbolt's errors into ones that name the
// file. bbolt panics on some kinds of corruption while loading the file; the
// panic becomes an error, and the file is unlocked and closed so the caller
// can report it and another process can look at the file. The memory map
// bbolt made of the corrupt file stays until the process exits.
func openDB(path string, timeout time.Duration) (db *bolt.DB, err error) {
	var file *os.File
	defer func() {
		if r := recover(); r != nil {
			if file != nil {
				unlock(file)
				_ = file.Close()
			}
			db, err = nil, fmt.Errorf("open %s: corrupt database: %v", path, r)
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{
		Timeout: timeout,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			file = f
			return f, err
		},
	})
	if err == nil && !samePath(file, path) {
		_ = db.Close()
		err = errReplaced
	}
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, errReplaced):
		// The file was replaced while this process waited for its lock
		// (storage compact renames its copy over it): open the new one.
		return openDB(path, timeout)
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("open %s: %w (waited %s)", path, ErrLocked, timeout)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
		return nil, fmt.Errorf("open %s: not a bbolt database, or a corrupt one: %w", path, err)
	}
	return nil, fmt.Errorf("open %s: %w", path, err)
}

// ErrLocked says another process holds the store file: a running daemon,
// most likely.
var ErrLocked = errors.New("locked by another process")

// errReplaced says the file a lock was won on is no longer at its path.
var errReplaced = errors.New("the file was replaced")

// samePath reports whether f, once locked, is still the file at path.
func samePath(f *os.File, path string) bool {
	if f == nil {
		return true
	}
	a, err := f.Stat()
	if err != nil {
		return true
	}
	b, err := os.Stat(path)
	return err != nil || os.SameFile(a, b)
}

const schemaKey = "schema_version"

// prepare checks the file's schema and creates what is missing. It writes
// only to a file that is empty or already Switchyard's, at a version this
// code knows.
// bbolt panics on some kinds of corruption of the pages it reads; the
// panic becomes an error naming the file.
func (s *Store) prepare() (created bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("open %s: corrupt database: %v", s.path, r)
		}
	}()
	var missing bool
	version := uint64(SchemaVersion)
	err = s.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte(bucketMeta))
		if meta == nil {
			var foreign []byte
			_ = tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
				foreign = append([]byte(nil), name...)
				return errStop
			})
			if foreign != nil {
				return fmt.Errorf("open %s: not a Switchyard database (bucket %q, no %q bucket)", s.path, foreign, bucketMeta)
			}
			created, missing = true, true
			return nil
		}
		raw := meta.Get([]byte(schemaKey))
		version, err = strconv.ParseUint(string(raw), 10, 32)
		if err != nil {
			return fmt.Errorf("open %s: unreadable schema version %q", s.path, raw)
		}
		if version > SchemaVersion {
			return fmt.Errorf("open %s: schema version %d is newer than this build supports (%d); run a newer Switchyard",
				s.path, version, SchemaVersion)
		}
		for _, name := range Buckets() {
			if tx.Bucket(name) == nil {
				missing = true
			}
		}
		return nil
	})
	if err != nil || !missing && version == SchemaVersion {
		return created, err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range Buckets() {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		if !created && version < SchemaVersion {
			if err := (txn{tx}).migrate(version); err != nil {
				return err
			}
			s.log.Info("store migrated", slog.String("path", s.path), slog.Uint64("from", version), slog.Int("to", SchemaVersion))
		}
		return tx.Bucket([]byte(bucketMeta)).Put([]byte(schemaKey), []byte(strconv.Itoa(SchemaVersion)))
	})
	if err != nil {
		return created, fmt.Errorf("open %s: %w", s.path, err)
	}
	return created, nil
}

var errStop = errors.New("stop")

// Path returns the file the store lives in.
func (s *Store) Path() string { return s.path }

// Ping reports whether the store is open and readable.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.view("ping", func(t txn) error {
		if t.bucket(bucketMeta) == nil {
			return fmt.Errorf("bucket %s missing", bucketMeta)
		}
		return nil
	})
}

// Close closes the file. Later calls return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("close %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

func (s *Store) view(op string, fn func(t txn) error) error {
	return s.wrap(op, s.db.View(func(tx *bolt.Tx) error { return fn(txn{tx}) }))
}

func (s *Store) update(op string, fn func(t txn) error) error {
	return s.wrap(op, s.db.Update(func(tx *bolt.Tx) error { return fn(txn{tx}) }))
}

// wrap passes domain errors through unchanged, so callers see their code and
// message, and names the operation on anything else.
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var be *bot.Error
	if errors.As(err, &be) {
		return err
	}
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return bot.Errorf(bot.EUNAVAILABLE, "%s: the store is closed", op)
	}
	return fmt.Errorf("%s: %w", op, err)
}
