//go:build unix

package install

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd as the leader of a process group of its own, which
// its cancel kills whole: the helpers git and npm start (git-remote-https,
// npm's children) end with them.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
