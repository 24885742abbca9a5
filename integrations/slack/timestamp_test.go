package slack

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTimestampProblemsSayWhich(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	at := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	for _, tc := range []struct {
		header, want string
	}{
		{at(0), ""},
		{at(-4 * time.Minute), ""},
		{at(4 * time.Minute), ""},
		{at(-6 * time.Minute), "the timestamp is too old (6m0s ago; at most 5m0s)"},
		{at(6 * time.Minute), "the timestamp is 6m0s in the future (more than 5m0s off: check this machine's clock)"},
		{"", "no X-Slack-Request-Timestamp"},
		{"soon", `X-Slack-Request-Timestamp "soon" is not a Unix time`},
	} {
		require.Equal(t, tc.want, timestampProblem(tc.header, now), tc.header)
	}
}
