//go:build linux

package tools

import (
	"os/exec"
	"syscall"
)

// setProcessGroup runs cmd in a process group of its own, which a timeout
// or a cancel kills whole, and has the kernel kill its shell when the
// daemon dies, as a background task's and as bubblewrap's --die-with-parent
// do: a command the daemon was killed during (kill -9, a crash) stops
// rather than go on alone, while the resumed run reports it interrupted.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error {
		// The negative pid signals the whole group the command leads.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
