// Package sandbox runs an agent's bash commands and command tools where they
// can do the least harm: under bubblewrap, with no network unless the
// agent's rights grant it, the system read-only, the workspace writable
// only for rights that include writing, private /tmp, /dev and a /proc of
// its own, no capabilities, the daemon's data, config, home and credentials
// out of sight, and process, CPU time and file size limits. The caller
// gives the command an environment of its own making, never the daemon's.
//
// The sandbox is required by default: where bubblewrap cannot run, commands
// are refused with an *UnavailableError that says why and how to fix it.
// ModeNone runs them as plain processes with the same limits, and New warns
// about it every time.
//
// The shell policy (package agents/policy) decides whether a command may
// run at all; the sandbox contains what the policy cannot see, such as the
// code an interpreter or a build runs.
package sandbox
