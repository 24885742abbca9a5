package bolt_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bbolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/storage/bolt"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
	"github.com/switchyard/switchyard/storage/dump"
)

// The copy's source is opened read only: a daemon holding the file makes
// it fail at once, and records of a kind Dump does not know stop it
// rather than stay behind.
func TestDumpRefuses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "switchyard.db")
	s := bolttest.Open(t, dir)
	_, err := bolt.OpenReadOnly(t.Context(), path, bolt.Options{LockTimeout: 50 * time.Millisecond})
	require.ErrorIs(t, err, bolt.ErrLocked)
	require.NoError(t, s.Close())

	_, err = bolt.OpenReadOnly(t.Context(), filepath.Join(dir, "none.db"), bolt.Options{})
	require.EqualError(t, err, "open "+filepath.Join(dir, "none.db")+": no such file")

	db, err := bbolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("mystery"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	}))
	require.NoError(t, db.Close())
	ro, err := bolt.OpenReadOnly(t.Context(), path, bolt.Options{})
	require.NoError(t, err)
	defer ro.Close()
	err = ro.Dump(t.Context(), func(dump.Record) error { return nil })
	require.ErrorContains(t, err, `the store holds records this build cannot copy (bucket "mystery")`)
}
