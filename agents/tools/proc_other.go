//go:build !unix

package tools

import "os/exec"

// setProcessGroup leaves the default: exec.CommandContext kills the process
// itself on cancellation.
func setProcessGroup(*exec.Cmd) {}
