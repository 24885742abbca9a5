//go:build !linux

package tools

import "os/exec"

// setBackgroundGroup leaves the default where processes cannot be tied to
// the daemon's life: a task may then outlive a daemon that dies.
func setBackgroundGroup(*exec.Cmd) {}

// terminateGroup stops a task's process.
func terminateGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

// killGroup stops a task's process.
func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
