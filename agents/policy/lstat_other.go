//go:build !unix

package policy

import (
	"io"
	"io/fs"
	"os"
)

// readRegular reads the regular file at p, not following a link at its
// end, when it holds at most limit bytes.
func readRegular(p string, limit int) ([]byte, bool) {
	if typ, err := lstatType(p); err != nil || typ != 0 {
		return nil, false
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	buf, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil || len(buf) > limit {
		return nil, false
	}
	return buf, true
}

// lstatType returns the type of the file at p (fs.ModeDir, fs.ModeSymlink,
// 0 for a regular file …), not following a link at its end.
func lstatType(p string) (fs.FileMode, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return 0, err
	}
	return fi.Mode().Type(), nil
}
