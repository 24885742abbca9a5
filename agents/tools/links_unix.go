//go:build unix

package tools

import (
	"io/fs"
	"syscall"
)

// openNonblock opens a named pipe or a device without waiting for its
// other end; a regular file reads and writes as without it.
const openNonblock = syscall.O_NONBLOCK

// linkCount is the number of hard links to the file info describes; 1 when
// the system does not say.
func linkCount(info fs.FileInfo) uint64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
