// Package bolttest opens real bbolt stores for tests of other packages and
// checks each file's consistency (bbolt's tx.Check and the store's
// counters) when the test ends.
package bolttest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bbolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/storage/bolt"
)

// Open opens the store of dir (its switchyard.db) and, when the test ends,
// closes it, unless the test did, and checks the file.
func Open(t testing.TB, dir string) *bolt.Store {
	t.Helper()
	path := filepath.Join(dir, "switchyard.db")
	s, err := bolt.Open(context.Background(), path, bolt.Options{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = s.Close() // closing twice is harmless
		Check(t, path)
	})
	return s
}

// Check runs bbolt's consistency check and the store's own (its counters
// against what they count, bolt.Check) on a closed store file.
func Check(t testing.TB, path string) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.View(bolt.Check), "consistency check of %s", path)
}
