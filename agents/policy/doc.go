// Package policy decides, before anything executes, whether an agent's tool
// call may run: permission profiles (built-in read-only, contributor,
// maintainer and ops, and custom ones from config), the shell policy that
// parses every bash command and checks each command in it, the path policy
// that resolves paths (.., symbolic links, the workspace root) before
// matching them, skill restrictions and required_agent. Engine is the one
// enforcement point; it implements tools.Policy and tools.Profiles.
//
// Calls a profile wants a person to approve go through Approvals, which
// implements tools.Approver. Denials, approval decisions and sensitive calls
// are written to the audit log through an Auditor, with secrets redacted.
//
// The shell policy is the first line: it gives the model a clear reason for
// every refusal and keeps read-only agents read-only. Programs that run code
// the policy cannot see (interpreters, build tools) are contained by the
// sandbox (package agents/sandbox), not by this package.
package policy
