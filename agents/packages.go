package agents

import (
	"context"

	"github.com/switchyard/switchyard/skills"
)

// PackageAgents are the agents installed packages contribute, as the
// skills registry read them; *skills.Registry is one.
type PackageAgents interface {
	Agents() []skills.Agent
}

// FromPackages is the PackageSource of src's agents, with the defaults of
// what they leave unset and source package:<name>. keep, when set, says
// which to take: the daemon leaves out those it cannot run (a model that
// is not configured, a tool that does not exist), saying why.
func FromPackages(src PackageAgents, keep func(Definition) bool) PackageSource {
	return packageSource{src: src, keep: keep}
}

type packageSource struct {
	src  PackageAgents
	keep func(Definition) bool
}

func (p packageSource) Agents(context.Context) ([]Definition, error) {
	var out []Definition
	for _, a := range p.src.Agents() {
		d := FromSkills(a)
		if p.keep == nil || p.keep(d) {
			out = append(out, d)
		}
	}
	return out, nil
}
