package daemon

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// The retention sweep runs hourly, and often enough for a retention of
// minutes or seconds to hold: every half of the shortest one, at most once
// a second. A kind kept forever (0) does not count.
func TestTheRetentionSweepKeepsPaceWithTheShortestRetention(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    bot.Retention
		want time.Duration
	}{
		{"defaults", bot.Retention{Payloads: 720 * time.Hour, Records: 2160 * time.Hour, Audit: 8760 * time.Hour}, time.Hour},
		{"everything kept forever", bot.Retention{}, time.Hour},
		{"records of minutes", bot.Retention{Payloads: 720 * time.Hour, Records: 10 * time.Minute}, 5 * time.Minute},
		{"payloads of seconds, audit forever", bot.Retention{Payloads: 30 * time.Second, Records: time.Hour}, 15 * time.Second},
		{"a second", bot.Retention{Records: time.Second}, time.Second},
		{"under a second", bot.Retention{Audit: time.Millisecond}, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, sweepEvery(tc.r))
		})
	}
}
