package tools

import (
	"fmt"
	"slices"
	"strings"
)

// Permission is a capability a tool declares it needs and a permission
// profile grants. Every tool declares what it needs at the least, before its
// arguments are looked at; the policy adds what the arguments use (the
// commands of a bash call, the paths of a write).
type Permission string

// Permissions, from the least to the most powerful. Reading the workspace is
// the floor; everything a shell command or tool does beyond that needs one of
// the others.
const (
	// PermRead reads files of the workspace, or information on a platform
	// (an issue, a Slack thread).
	PermRead Permission = "read"
	// PermWrite changes files of the workspace, including local git
	// commits and branches.
	PermWrite Permission = "write"
	// PermExec runs code the policy cannot look into: interpreters, build
	// tools, package managers, scripts, unknown programs.
	PermExec Permission = "exec"
	// PermPush publishes work: pushes branches, opens pull requests and
	// issues, comments, posts messages.
	PermPush Permission = "push"
	// PermMerge merges pull requests and pushes to protected branches.
	PermMerge Permission = "merge"
	// PermCI changes CI/CD configuration, git hooks and repository git
	// configuration.
	PermCI Permission = "ci"
	// PermDeploy runs deployment and infrastructure tools.
	PermDeploy Permission = "deploy"
	// PermSecrets reads secret files and secret stores.
	PermSecrets Permission = "secrets"
	// PermNetwork reaches the network. It follows a profile's network
	// setting, which also decides the sandbox's network.
	PermNetwork Permission = "network"
	// PermAdmin administers the machine: processes, services, mounts.
	PermAdmin Permission = "admin"
)

// AllPermissions returns every permission, from the least to the most
// powerful.
func AllPermissions() []Permission {
	return []Permission{PermRead, PermWrite, PermExec, PermPush, PermMerge, PermCI, PermDeploy, PermSecrets, PermNetwork, PermAdmin}
}

// Valid reports whether p is a known permission.
func (p Permission) Valid() bool { return slices.Contains(AllPermissions(), p) }

// checkDeclared checks the permissions a tool declares: at least one, each
// known. A tool that declares nothing would be granted by omission, so it is
// refused.
func checkDeclared(perms []Permission) error {
	if len(perms) == 0 {
		return fmt.Errorf("it declares no permissions; say what it needs at the least (%s)", permissionNames())
	}
	for _, p := range perms {
		if !p.Valid() {
			return fmt.Errorf("unknown permission %q (want %s)", p, permissionNames())
		}
	}
	return nil
}

func permissionNames() string {
	all := AllPermissions()
	names := make([]string, len(all))
	for i, p := range all {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}
