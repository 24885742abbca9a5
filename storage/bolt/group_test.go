package bolt

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// Concurrent callers share transactions; one that fails, or panics, fails
// alone, and every other's write is there.
func TestGroupCommitIsolatesAFailingCaller(t *testing.T) {
	s := openTest(t, t.TempDir())
	const callers = 64
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() {
			errs[i] = s.group.do(func(tx *bolt.Tx) error {
				switch i {
				case 7:
					return errors.New("refused")
				case 9:
					panic("broken")
				}
				b, err := tx.CreateBucketIfNotExists([]byte("group_test"))
				if err != nil {
					return err
				}
				return b.Put([]byte(fmt.Sprint(i)), []byte{1})
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		switch i {
		case 7:
			require.EqualError(t, err, "refused")
		case 9:
			require.ErrorContains(t, err, "panic in a group commit: broken")
		default:
			require.NoError(t, err, "caller %d", i)
		}
	}
	require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
		require.Equal(t, callers-2, countKeys(tx.Bucket([]byte("group_test"))))
		return nil
	}))
}
