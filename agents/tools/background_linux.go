//go:build linux

package tools

import (
	"os/exec"
	"syscall"
)

// setBackgroundGroup starts a background task in a process group of its
// own, killed when the daemon's thread that started it ends: bubblewrap
// does the same for what runs inside the sandbox (--die-with-parent).
func setBackgroundGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// terminateGroup asks a task's process group to stop.
func terminateGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }

// killGroup stops a task's process group at once.
func killGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
