//go:build unix

package bolt

import (
	"os"
	"syscall"
)

// keepOwner gives the file at path the owner and group of fi, so a store
// compacted by root stays the daemon user's. A process that is not root
// can only hand a file to its own group, and a file it made is its own
// already.
func keepOwner(path string, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) == os.Geteuid() && int(st.Gid) == os.Getegid() {
		return nil
	}
	return os.Chown(path, int(st.Uid), int(st.Gid))
}
