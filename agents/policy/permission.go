package policy

import (
	"math/bits"
	"slices"
	"strings"

	"github.com/switchyard/switchyard/agents/tools"
)

// Permission is a capability a profile grants and a tool or command needs;
// tools declare theirs (see tools.Permission).
type Permission = tools.Permission

// The permissions, from the least to the most powerful; see tools.PermRead
// and the others for what each allows.
const (
	PermRead    = tools.PermRead
	PermWrite   = tools.PermWrite
	PermExec    = tools.PermExec
	PermPush    = tools.PermPush
	PermMerge   = tools.PermMerge
	PermCI      = tools.PermCI
	PermDeploy  = tools.PermDeploy
	PermSecrets = tools.PermSecrets
	PermNetwork = tools.PermNetwork
	PermAdmin   = tools.PermAdmin
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
