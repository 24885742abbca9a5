package policy

import (
	"math/bits"
	"slices"
	"strings"
)

// Permission is a capability a profile grants and a tool or command needs.
type Permission string

// Permissions, from the least to the most powerful. Reading the workspace is
// the floor; everything a shell command or tool does beyond that needs one of
// the others.
const (
	// PermRead reads files of the workspace.
	PermRead Permission = "read"
	// PermWrite changes files of the workspace, including local git
	// commits and branches.
	PermWrite Permission = "write"
	// PermExec runs code the policy cannot look into: interpreters, build
	// tools, package managers, scripts, unknown programs.
	PermExec Permission = "exec"
	// PermPush publishes work: pushes branches, opens pull requests and
	// issues, comments.
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

// allPermissions lists every permission in the order bits are assigned.
var allPermissions = [...]Permission{
	PermRead, PermWrite, PermExec, PermPush, PermMerge, PermCI, PermDeploy, PermSecrets, PermNetwork, PermAdmin,
}

// Permissions returns every permission, for documentation and validation.
func Permissions() []Permission { return slices.Clone(allPermissions[:]) }

// perms is a set of permissions as bits, so the shell policy's checks are a
// mask test.
type perms uint16

const (
	pRead perms = 1 << iota
	pWrite
	pExec
	pPush
	pMerge
	pCI
	pDeploy
	pSecrets
	pNetwork
	pAdmin
)

func permBit(p Permission) (perms, bool) {
	for i, q := range allPermissions {
		if q == p {
			return 1 << i, true
		}
	}
	return 0, false
}

func (s perms) has(need perms) bool { return s&need == need }

// list returns the permissions of s in canonical order.
func (s perms) list() []Permission {
	out := make([]Permission, 0, bits.OnesCount16(uint16(s)))
	for i, p := range allPermissions {
		if s&(1<<i) != 0 {
			out = append(out, p)
		}
	}
	return out
}

// String names the permissions of s, "write, exec".
func (s perms) String() string {
	names := make([]string, 0, 4)
	for _, p := range s.list() {
		names = append(names, string(p))
	}
	return strings.Join(names, ", ")
}

// sensitivePerms are what makes an allowed call worth an audit record:
// anything that reaches beyond the workspace or changes what others see.
const sensitivePerms = pPush | pMerge | pCI | pDeploy | pSecrets | pNetwork | pAdmin
