package bot

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Origins of routing rules and commands.
const (
	// OriginConfig is the config file's routing section and the built-in
	// commands.
	OriginConfig = "config"
	// OriginPackage prefixes the origin of a package's entry point:
	// "package:release-helper".
	OriginPackage = "package:"
)

// Entrypoint is a way into an agent that an installed package contributes:
// chat commands and event kinds that go to its handler agent, with skills
// loaded, wherever the package is enabled. Where it is not, they route
// nothing and the event is routed as if they did not exist.
type Entrypoint struct {
	// Name names the decisions it makes, package and entry point:
	// "release-helper/notes".
	Name string
	// Origin is "package:<name>".
	Origin string
	Agent  string
	Skills []string
	// Commands are chat commands without the slash ("release-notes").
	Commands []string
	// Kinds are event kinds ("github.release.published"); globs as in
	// rules.
	Kinds []string
	// Enabled reports whether the package is enabled for an event of an
	// org and a repository ("" when the event has none). It is asked at
	// every decision, so enabling or disabling needs no new router.
	Enabled func(org, repo string) bool
}

// EntrypointInfo describes an entry point the router knows, for listings
// such as `switchyard rules list`: what it routes, to whom, and from which
// package. Commands and triggers another entry point or the config took are
// left out.
type EntrypointInfo struct {
	Name     string   `json:"name"`
	Origin   string   `json:"origin"`
	Agent    string   `json:"agent"`
	Skills   []string `json:"skills"`
	Commands []string `json:"commands"` // without the slash
	Triggers []string `json:"triggers"`
}

// compiledEntry is an entry point as the router checks it.
type compiledEntry struct {
	name     string
	origin   string
	agent    string
	skills   []string
	kinds    []glob
	triggers []string // as written
	enabled  func(org, repo string) bool
	// reasons, made once: `entry point "release-helper/notes"`.
	ruleReason string
	info       RuleInfo
}

func (e *compiledEntry) on(ev *Event) bool { return e.enabled == nil || e.enabled(ev.Org, ev.Repo) }

func (e *compiledEntry) route(kind RouteKind, reason string) Route {
	return Route{Agent: e.agent, Kind: kind, Reason: reason, Rule: e.name, Origin: e.origin, Skills: e.skills}
}

// WithEntrypoints returns a router that also routes eps: their commands
// after the config's (a command the config or the built-in table has keeps
// its agent), their event kinds after the config's rules. What cannot be
// routed (an unknown agent, a command another entry point took first, a
// bad glob) is left out and said in the warnings, one line each; the
// entry points are taken in the order given.
func (r *Router) WithEntrypoints(eps []Entrypoint) (*Router, []string) {
	out := *r
	out.entries, out.entryInfos = nil, nil
	out.entryCommands = map[string]entryCommand{}
	var warnings []string
	warn := func(ep Entrypoint, format string, args ...any) {
		warnings = append(warnings, fmt.Sprintf("entry point %s (%s): ", ep.Name, ep.Origin)+fmt.Sprintf(format, args...))
	}
	for _, ep := range eps {
		a, ok := r.agents[strings.ToLower(ep.Agent)]
		if !ok || a.name != ep.Agent {
			warn(ep, "no agent %q; it routes nothing", ep.Agent)
			continue
		}
		e := &compiledEntry{
			name: ep.Name, origin: ep.Origin, agent: ep.Agent, skills: slices.Clone(ep.Skills), enabled: ep.Enabled,
			ruleReason: fmt.Sprintf("entry point %q of %s", ep.Name, ep.Origin),
		}
		bad := false
		for _, k := range ep.Kinds {
			g, err := compileGlob(k, true)
			if err != nil {
				warn(ep, "trigger %q: %v", k, err)
				bad = true
				continue
			}
			e.kinds = append(e.kinds, g)
		}
		if bad {
			continue
		}
		for _, c := range ep.Commands {
			name := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(c), "/"))
			switch {
			case !isPlainKey(name):
				warn(ep, "bad command %q", c)
				continue
			case r.commands[name].agent != "":
				warn(ep, "/%s is the config's command (for @%s); the config's stays", name, r.commands[name].agent)
				continue
			}
			if prev, taken := out.entryCommands[name]; taken {
				warn(ep, "/%s is taken by entry point %s (%s)", name, prev.entry.name, prev.entry.origin)
				continue
			}
			out.entryCommands[name] = entryCommand{entry: e, reason: fmt.Sprintf("command /%s of %s", name, ep.Origin)}
		}
		if len(e.kinds) > 0 {
			e.triggers = slices.Clone(ep.Kinds)
			e.info = RuleInfo{Name: ep.Name, Agent: ep.Agent, Match: "kinds " + strings.Join(e.triggers, ", "), Origin: ep.Origin}
			out.entries = append(out.entries, e)
		}
		out.entryInfos = append(out.entryInfos, e)
	}
	return &out, warnings
}

// entryCommand is a command an entry point routes.
type entryCommand struct {
	entry  *compiledEntry
	reason string // "command /release-notes of package:release-helper"
}

// entryCommandRoute routes ev's command by an entry point enabled for it.
func (r *Router) entryCommandRoute(ev *Event, name string) (Route, bool) {
	c, ok := r.entryCommands[name]
	if !ok || !c.entry.on(ev) {
		return Route{}, false
	}
	return c.entry.route(RouteCommand, c.reason), true
}

// entryRuleRoute routes ev by the event kinds of the entry points enabled
// for it, after the config's rules.
func (r *Router) entryRuleRoute(in *routeInput) (Route, bool) {
	for _, e := range r.entries {
		if anyGlob(e.kinds, in.kind) && e.on(in.ev) {
			return e.route(RouteRule, e.ruleReason), true
		}
	}
	return Route{}, false
}

// Entrypoints returns the entry points the router routes, in the order
// given to WithEntrypoints. They route only where their package is
// enabled.
func (r *Router) Entrypoints() []EntrypointInfo {
	out := make([]EntrypointInfo, 0, len(r.entryInfos))
	for _, e := range r.entryInfos {
		info := EntrypointInfo{Name: e.name, Origin: e.origin, Agent: e.agent, Skills: nonNilStrings(e.skills),
			Commands: []string{}, Triggers: nonNilStrings(e.triggers)}
		for _, name := range slices.Sorted(maps.Keys(r.entryCommands)) {
			if r.entryCommands[name].entry == e {
				info.Commands = append(info.Commands, name)
			}
		}
		out = append(out, info)
	}
	return out
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
