//go:build !unix

package policy

import (
	"io/fs"
	"os"
)

// lstatType returns the type of the file at p (fs.ModeDir, fs.ModeSymlink,
// 0 for a regular file …), not following a link at its end.
func lstatType(p string) (fs.FileMode, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return 0, err
	}
	return fi.Mode().Type(), nil
}
