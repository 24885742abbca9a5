package bench

import (
	"os"
	"testing"

	"github.com/switchyard/switchyard/daemon"
)

// TestMain runs every benchmark with the runtime tuned as `switchyard
// serve` tunes it (the garbage collector's target), so each measures the
// process production runs, whatever order the benchmarks run in.
func TestMain(m *testing.M) {
	daemon.TuneRuntime()
	os.Exit(m.Run())
}
