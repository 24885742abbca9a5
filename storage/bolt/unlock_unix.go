//go:build unix

package bolt

import (
	"os"
	"syscall"
)

// unlock drops the flock bbolt took on f. Closing f is not enough after
// bbolt panicked inside Open: its memory map of the file still references
// the open file, and with it the lock.
func unlock(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
