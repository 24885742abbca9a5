package policy

import (
	"github.com/switchyard/switchyard/agents/tools"
)

var _ tools.Confiner = (*Engine)(nil)

// Confine implements tools.Confiner: how the sandbox holds the commands of
// an agent in scope s, from the same rights its calls are decided by: its
// profile and every ceiling of its run. The network only when all of them
// grant it; the workspace read-only unless all may write; hooks, git config
// and CI configuration read-only unless all have ci; secret-looking files
// (tools.SecretLooking) seen empty unless all have secrets. An unknown
// profile grants nothing.
func (e *Engine) Confine(s tools.Scope, workspace string) tools.Confinement {
	granted, network := ^perms(0), true
	bound := func(name string) {
		p, ok := e.profiles[name]
		if !ok {
			granted, network = 0, false
			return
		}
		granted &= p.perms
		network = network && p.Network
	}
	bound(s.Profile)
	for _, c := range s.Ceilings {
		bound(c.Profile)
	}
	c := tools.Confinement{Network: network, WorkspaceReadOnly: !granted.has(pWrite)}
	if !granted.has(pCI) {
		c.ReadOnly = e.protectedPaths(workspace)
	}
	if !granted.has(pSecrets) {
		c.Masked = e.secretFiles(workspace)
	}
	return c
}
