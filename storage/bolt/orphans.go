package bolt

import (
	"context"
	"time"
)

// ExpireOrphanedLeases ends, as of now, the lease of every job still marked
// running, and returns how many it ended. Only one process can hold the
// file (bbolt's flock), so when the daemon starts every such job belongs to
// a process that died: waiting out its lease would only delay the work. The
// next claim then retries the job, counting the attempt.
func (s *Store) ExpireOrphanedLeases(ctx context.Context, now time.Time) (int, error) {
	n := 0
	err := s.update("expire orphaned leases", func(t txn) error {
		n = 0 // Update does not rerun fn, but keep the count honest if it ever does
		active := t.bucket(bucketActive)
		type entry struct {
			unit []byte
			seq  uint64
		}
		var live []entry
		c := active.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			seq, lease, ok := splitActive(v)
			if ok && lease.After(now) {
				live = append(live, entry{append([]byte(nil), k...), seq})
			}
		}
		for _, e := range live {
			j, err := t.jobAt(seqKey(e.seq))
			if err != nil {
				return err
			}
			if j == nil {
				continue
			}
			j.LeaseExpires = utc(now)
			if err := t.putJob(e.seq, j); err != nil {
				return err
			}
			if err := active.Put(e.unit, activeValue(e.seq, j.LeaseExpires)); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}
