package bolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// compactLock is how long Compact waits for the file: a daemon holds it
// for as long as it runs, so waiting longer would not help.
const compactLock = time.Second

// compactTxSize bounds one transaction of the copy.
const compactTxSize = 64 << 20

// Compacted is what Compact did: the file's size before and after.
type Compacted struct {
	Before, After int64
}

// Compact rewrites the store file at path without the free pages bbolt
// keeps after records are deleted (bbolt never shrinks a file), so the
// space retention freed goes back to the file system. It works only on a
// file nobody has open: a running daemon holds its file, and Compact then
// fails saying so. The original is checked first (bbolt's check and the
// counters), and a corrupt one is refused rather than copied: bbolt's copy
// would carry over what it can read and drop or panic on the rest. The copy
// is made beside the file with the file's permissions and owner, checked
// (the same checks, and the same number of keys in every bucket as the
// original) and then renamed over it; until then
// the original is untouched, and on any failure it stays as it was.
func Compact(ctx context.Context, path string) (Compacted, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Compacted{}, fmt.Errorf("compact %s: %w", path, err)
	}
	out := Compacted{Before: fi.Size()}
	s, err := Open(ctx, path, Options{LockTimeout: compactLock})
	if err != nil {
		if errors.Is(err, ErrLocked) {
			return out, fmt.Errorf("compact %s: the file is in use, by a running daemon most likely; stop it first: compacting works only on a file nobody has open", path)
		}
		return out, fmt.Errorf("compact: %w", err)
	}
	defer s.Close()

	if err := unpanic(func() error { return s.db.View(Check) }); err != nil {
		return out, fmt.Errorf("compact %s: the store is corrupt and is left as it was: %w", path, err)
	}
	tmp := path + ".compacting"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return out, fmt.Errorf("compact %s: %w", path, err)
	}
	if err := unpanic(func() error { return copyCompact(tmp, s.db) }); err != nil {
		_ = os.Remove(tmp)
		return out, fmt.Errorf("compact %s: %w", path, err)
	}
	// The copy is the file's: its permissions and owner, so a daemon that
	// runs as another user than the one who compacted opens it as before.
	if err := os.Chmod(tmp, fi.Mode().Perm()); err != nil {
		_ = os.Remove(tmp)
		return out, fmt.Errorf("compact %s: %w", path, err)
	}
	if err := keepOwner(tmp, fi); err != nil {
		_ = os.Remove(tmp)
		return out, fmt.Errorf("compact %s: give the copy the file's owner: %w", path, err)
	}
	if err := unpanic(func() error { return verifyCopy(tmp, s.db) }); err != nil {
		_ = os.Remove(tmp)
		return out, fmt.Errorf("compact %s: the copy does not match, the store is left as it was: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return out, fmt.Errorf("compact %s: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return out, fmt.Errorf("compact %s: %w", path, err)
	}
	if fi, err := os.Stat(path); err == nil {
		out.After = fi.Size()
	}
	return out, nil
}

// unpanic runs fn, turning a panic into an error: bbolt panics on some
// kinds of corruption when it reads the pages.
func unpanic(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("a page cannot be read: %v", r)
		}
	}()
	return fn()
}

// copyCompact copies src into a new file at dst with bbolt's Compact and
// makes it durable.
func copyCompact(dst string, src *bolt.DB) error {
	db, err := bolt.Open(dst, 0o600, &bolt.Options{Timeout: compactLock})
	if err != nil {
		return err
	}
	if err := bolt.Compact(db, src, compactTxSize); err != nil {
		_ = db.Close()
		return err
	}
	if err := db.Sync(); err != nil {
		_ = db.Close()
		return err
	}
	return db.Close()
}

// verifyCopy checks the copy at path: bbolt's check, the store's counters,
// and as many keys in every bucket as src.
func verifyCopy(path string, src *bolt.DB) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: compactLock})
	if err != nil {
		return err
	}
	defer db.Close()
	var want, got map[string]int
	if err := src.View(func(tx *bolt.Tx) (err error) { want, err = keyCounts(tx); return err }); err != nil {
		return err
	}
	return db.View(func(tx *bolt.Tx) error {
		if err := Check(tx); err != nil {
			return err
		}
		var err error
		if got, err = keyCounts(tx); err != nil {
			return err
		}
		for name, n := range want {
			if got[name] != n {
				return fmt.Errorf("bucket %s holds %d keys, the original %d", name, got[name], n)
			}
		}
		if len(got) != len(want) {
			return fmt.Errorf("%d buckets, the original %d", len(got), len(want))
		}
		return nil
	})
}

// keyCounts counts the keys of every bucket, nested ones by their path.
func keyCounts(tx *bolt.Tx) (map[string]int, error) {
	out := map[string]int{}
	var walk func(path string, b *bolt.Bucket) error
	walk = func(path string, b *bolt.Bucket) error {
		out[path] = 0
		return b.ForEach(func(k, v []byte) error {
			out[path]++
			if v == nil {
				if inner := b.Bucket(k); inner != nil {
					return walk(path+"/"+string(k), inner)
				}
			}
			return nil
		})
	}
	err := tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(string(name), b) })
	return out, err
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
