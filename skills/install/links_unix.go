//go:build unix

package install

import (
	"io/fs"
	"syscall"
)

// linkCount returns how many names the file of info has.
func linkCount(info fs.FileInfo) uint64 {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 1
	}
	return uint64(st.Nlink)
}
