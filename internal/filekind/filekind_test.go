package filekind_test

import (
	"io/fs"
	"testing"

	"github.com/switchyard/switchyard/internal/filekind"
)

func TestOf(t *testing.T) {
	for mode, want := range map[fs.FileMode]string{
		0o644:                             "regular file",
		fs.ModeDir | 0o755:                "directory",
		fs.ModeSymlink | 0o777:            "symbolic link",
		fs.ModeSymlink | fs.ModeDir:       "symbolic link",
		fs.ModeNamedPipe:                  "named pipe",
		fs.ModeSocket:                     "socket",
		fs.ModeDevice:                     "device",
		fs.ModeDevice | fs.ModeCharDevice: "device",
		fs.ModeIrregular:                  "special file",
	} {
		if got := filekind.Of(mode); got != want {
			t.Errorf("Of(%v) = %q, want %q", mode, got, want)
		}
	}
}
