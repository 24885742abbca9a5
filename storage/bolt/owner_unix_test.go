//go:build unix

package bolt

import (
	"os"
	"syscall"
)

// owner is a file's owner and group.
func owner(fi os.FileInfo) [2]uint32 {
	st := fi.Sys().(*syscall.Stat_t)
	return [2]uint32{st.Uid, st.Gid}
}
