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
		{at(-5 * time.Minute), ""},
		{at(5 * time.Minute), ""},
		{at(-5*time.Minute - time.Second), "the timestamp is too old (5m1s ago; at most 5m0s)"},
		{at(5*time.Minute + time.Second), "the timestamp is 5m1s in the future (more than 5m0s off: check this machine's clock)"},
		{at(-6 * time.Minute), "the timestamp is too old (6m0s ago; at most 5m0s)"},
		{at(6 * time.Minute), "the timestamp is 6m0s in the future (more than 5m0s off: check this machine's clock)"},
		{"", "no X-Slack-Request-Timestamp"},
		{"soon", `X-Slack-Request-Timestamp "soon" is not a Unix time`},
		{"+" + at(0), `X-Slack-Request-Timestamp "+1700000000" is not a Unix time`},
		{"0" + at(0), `X-Slack-Request-Timestamp "01700000000" is not a Unix time`},
		{"-9223372036854775808", `X-Slack-Request-Timestamp "-9223372036854775808" is not a Unix time`},
		{"1000000000", "the timestamp is too old (194444h26m40s ago; at most 5m0s)"},
		{"9223372036854775807", "the timestamp is 106751991147624 days in the future (more than 5m0s off: check this machine's clock)"},
	} {
		require.Equal(t, tc.want, timestampProblem(tc.header, now), tc.header)
	}
}
