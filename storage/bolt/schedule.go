package bolt

import (
	"context"
	"time"

	"github.com/switchyard/switchyard/bot"
)

// LastFired returns when the named schedule last fired, in UTC.
func (s *Store) LastFired(ctx context.Context, name string) (time.Time, bool, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, false, err
	}
	var at time.Time
	var ok bool
	err := s.view("last firing of schedule", func(t txn) error {
		if v := t.bucket(bucketSchedules).Get([]byte(name)); len(v) == 8 {
			at, ok = decodeTime(v), true
		}
		return nil
	})
	return at, ok, err
}

// SetLastFired records when the named schedule fired.
func (s *Store) SetLastFired(ctx context.Context, name string, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if name == "" {
		return bot.Errorf(bot.EINVALID, "schedule without a name")
	}
	if err := bot.ValidText("schedule name", name); err != nil {
		return err
	}
	return s.update("record schedule firing", func(t txn) error {
		return t.bucket(bucketSchedules).Put([]byte(name), timeKey(at))
	})
}
