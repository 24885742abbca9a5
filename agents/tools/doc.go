// Package tools holds what an agent can do besides talking: the Tool
// interface, the Registry of every tool the daemon knows, the core tools
// (read_file, list_directory, search_files, write_file, edit_file, bash)
// confined to the run's workspace, command tools contributed by packages, and
// the Toolset an agent's run calls through.
//
// A Toolset is the one enforcement point: every call passes its Policy before
// anything executes, and a refusal goes back to the model as the tool result.
// DefaultPolicy enforces what an agent may see (its tools list, its profile,
// required_agent); agents/policy replaces it with full permission profiles.
package tools
