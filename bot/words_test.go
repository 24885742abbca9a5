package bot_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0 schedules", 1: "1 schedule", 2: "2 schedules", 12: "12 schedules"} {
		require.Equal(t, want, bot.Count(n, "schedule", "schedules"))
	}
}

func TestAgo(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"}, {400 * time.Millisecond, "0s"}, {40 * time.Second, "40s"}, {5*time.Minute + 59*time.Second, "5m"},
		{2 * time.Hour, "2h"}, {2*time.Hour + 5*time.Minute, "2h 5m"}, {72 * time.Hour, "3d"}, {76*time.Hour + 30*time.Minute, "3d 4h"},
	} {
		require.Equal(t, tt.want, bot.Ago(tt.d), tt.d)
	}
}
