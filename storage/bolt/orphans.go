package bolt

import (
	"context"
	"time"

	"github.com/switchyard/switchyard/bot"
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
		c := t.bucket(bucketActive).Cursor()
		for _, v := c.First(); v != nil; _, v = c.Next() {
			var j bot.Job
			found, err := t.get(bucketJobs, v, &j)
			if err != nil {
				return err
			}
			if !found || !j.LeaseExpires.After(now) {
				continue
			}
			j.LeaseExpires = utc(now)
			if err := putJSON(t.bucket(bucketJobs), v, &j); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}
