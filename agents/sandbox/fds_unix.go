//go:build unix

package sandbox

import (
	"os"
	"strconv"
	"syscall"
)

// closeInheritedOnExec marks every descriptor above standard error close-on-
// exec, so a command inherits none the daemon was started with: a
// supervisor's pipe or socket would be a way out of the sandbox. Go opens
// its own descriptors close-on-exec already.
func closeInheritedOnExec() {
	for _, dir := range []string{"/proc/self/fd", "/dev/fd"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
				syscall.CloseOnExec(fd)
			}
		}
		return
	}
}
