//go:build unix && !linux

package tools

import (
	"os/exec"
	"syscall"
)

func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The negative pid signals the whole group the command leads.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
