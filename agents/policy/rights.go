package policy

import (
	"github.com/switchyard/switchyard/agents/tools"
)

var _ tools.Confiner = (*Engine)(nil)

// Confine implements tools.Confiner: how the sandbox holds the commands of
// an agent in scope s, from the same rights its calls are decided by. The
// network only when the profile grants it; the workspace read-only unless
// the profile may write; hooks, git config and CI configuration read-only
// unless it has ci. An unknown profile gets the tightest confinement.
func (e *Engine) Confine(s tools.Scope, workspace string) tools.Confinement {
	var granted perms
	network := false
	if p, ok := e.profiles[s.Profile]; ok {
		granted, network = p.perms, p.Network
	}
	c := tools.Confinement{Network: network, WorkspaceReadOnly: !granted.has(pWrite)}
	if !granted.has(pCI) {
		c.ReadOnly = e.protectedPaths(workspace)
	}
	return c
}
