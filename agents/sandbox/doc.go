// Package sandbox runs an agent's bash commands where they can do the least
// harm: under bubblewrap, with no network unless the agent's profile
// allows it, the system read-only, only the workspace writable, private
// /tmp, /dev and /proc, no capabilities, and process, CPU time and file
// size limits. Where bubblewrap cannot run, commands run as plain processes
// with the same limits, and New logs a warning.
//
// The shell policy (package agents/policy) decides whether a command may
// run at all; the sandbox contains what the policy cannot see, such as the
// code an interpreter or a build runs.
package sandbox
