//go:build !unix

package install

import "os/exec"

// ownGroup leaves cmd as it is where there are no process groups; its
// WaitDelay still ends the wait for what it started.
func ownGroup(*exec.Cmd) {}
