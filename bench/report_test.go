package bench

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// latencies summarises a set of measured durations.
type latencies []time.Duration

func (l latencies) quantile(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := int(q * float64(len(s)-1))
	return s[i]
}

// report prints a block of figures to stdout, where `make bench` shows it,
// and records the headline ratio as a benchmark metric.
func report(b *testing.B, title string, lines ...string) {
	b.Helper()
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n== %s ==\n", title)
	for _, l := range lines {
		fmt.Fprintf(&sb, "  %s\n", l)
	}
	fmt.Fprint(os.Stdout, sb.String())
}

func verdict(ok bool) string {
	if ok {
		return "meets target"
	}
	return "BELOW TARGET"
}
