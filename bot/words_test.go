package bot_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0 schedules", 1: "1 schedule", 2: "2 schedules", 12: "12 schedules"} {
		require.Equal(t, want, bot.Count(n, "schedule", "schedules"))
	}
}
