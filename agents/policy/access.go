package policy

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/switchyard/switchyard/bot"
)

// AccessConfig maps who asks for work to a ceiling: a profile that bounds
// every agent working for them, whatever the agent's own profile. It is
// access: in the config file. Every field names a profile (a built-in one
// or one of profiles:); empty fields take the defaults documented on each.
type AccessConfig struct {
	// Default is the ceiling of requesters nothing else names: a GitHub
	// user without access to the repository or whose access is unknown,
	// a source that names nobody. Default read-only.
	Default string `yaml:"default" json:"default,omitempty"`
	// GitHub maps a requester's permission on the repository.
	GitHub GitHubAccess `yaml:"github" json:"github"`
	// Slack maps Slack members, by member id and by user group id.
	Slack SlackAccess `yaml:"slack" json:"slack"`
	// Local maps the users of the local console.
	Local LocalAccess `yaml:"local" json:"local"`
	// Schedules maps schedules by name.
	Schedules ScheduleAccess `yaml:"schedules" json:"schedules"`
}

// GitHubAccess maps GitHub requesters by their permission on the
// repository the work is on.
type GitHubAccess struct {
	// Read defaults to read-only; Triage and Write to contributor;
	// Maintain to maintainer; Admin to ops.
	Read     string `yaml:"read" json:"read,omitempty"`
	Triage   string `yaml:"triage" json:"triage,omitempty"`
	Write    string `yaml:"write" json:"write,omitempty"`
	Maintain string `yaml:"maintain" json:"maintain,omitempty"`
	Admin    string `yaml:"admin" json:"admin,omitempty"`
	// Users maps logins to a ceiling whatever their permission.
	Users map[string]string `yaml:"users" json:"users,omitempty"`
}

// SlackAccess maps Slack requesters.
type SlackAccess struct {
	// Default is the ceiling of members neither Users nor Groups name;
	// default contributor (slack.allowed_users narrows who may ask at all).
	Default string `yaml:"default" json:"default,omitempty"`
	// Users maps member ids (U0123ABCD) to a ceiling.
	Users map[string]string `yaml:"users" json:"users,omitempty"`
	// Groups maps user group ids (S0123ABCD) to a ceiling; a member of
	// several gets the widest.
	Groups map[string]string `yaml:"groups" json:"groups,omitempty"`
}

// LocalAccess maps the local console's users by the name of the API token
// they authenticated with ("admin" for the daemon's own token), never by the
// user name a client writes in its message.
type LocalAccess struct {
	// Default defaults to ops: whoever can reach the console holds the
	// daemon's API token, and with it every approval.
	Default string `yaml:"default" json:"default,omitempty"`
	// Users maps API token names to a ceiling.
	Users map[string]string `yaml:"users" json:"users,omitempty"`
}

// ScheduleAccess maps schedules.
type ScheduleAccess struct {
	// Default defaults to ops: a schedule is written into the config by
	// whoever runs the daemon.
	Default string `yaml:"default" json:"default,omitempty"`
	// Names maps schedule names to a ceiling.
	Names map[string]string `yaml:"names" json:"names,omitempty"`
}

// Default ceilings, for the fields of AccessConfig left empty.
const (
	DefaultCeiling         = ReadOnly
	DefaultSlackCeiling    = Contributor
	DefaultLocalCeiling    = Ops
	DefaultScheduleCeiling = Ops
)

// accessRules is AccessConfig with its defaults filled in.
type accessRules struct {
	cfg    AccessConfig
	github map[string]string // permission → profile
	users  map[string]string // lower-cased GitHub login → profile
}

func compileAccess(c AccessConfig) *accessRules {
	def := func(p *string, d string) {
		if *p == "" {
			*p = d
		}
	}
	def(&c.Default, DefaultCeiling)
	def(&c.GitHub.Read, ReadOnly)
	def(&c.GitHub.Triage, Contributor)
	def(&c.GitHub.Write, Contributor)
	def(&c.GitHub.Maintain, Maintainer)
	def(&c.GitHub.Admin, Ops)
	def(&c.Slack.Default, DefaultSlackCeiling)
	def(&c.Local.Default, DefaultLocalCeiling)
	def(&c.Schedules.Default, DefaultScheduleCeiling)
	a := &accessRules{cfg: c, github: map[string]string{
		"read": c.GitHub.Read, "triage": c.GitHub.Triage, "write": c.GitHub.Write,
		"maintain": c.GitHub.Maintain, "admin": c.GitHub.Admin,
	}, users: map[string]string{}}
	for login, p := range c.GitHub.Users {
		a.users[strings.ToLower(login)] = p
	}
	return a
}

// ValidateAccess checks the access section against the profiles the config
// defines, for `switchyard config check` and start-up. Problems come back as
// *bot.FieldError values joined with errors.Join, each at its config path:
// access.github.read: unknown profile "reader".
func ValidateAccess(c AccessConfig, profiles map[string]ProfileConfig) error {
	known := map[string]bool{}
	for _, n := range builtinNames() {
		known[n] = true
	}
	for n := range profiles {
		known[n] = true
	}
	var errs []error
	check := func(field, name string) {
		if name != "" && !known[name] {
			errs = append(errs, &bot.FieldError{Field: field, Msg: fmt.Sprintf("unknown profile %q (want %s or one of profiles:)", name, strings.Join(builtinNames(), ", "))})
		}
	}
	checkMap := func(field string, m map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			at := mapPath(field, k)
			if strings.TrimSpace(k) == "" {
				errs = append(errs, &bot.FieldError{Field: at, Msg: "empty name"})
				continue
			}
			if m[k] == "" {
				errs = append(errs, &bot.FieldError{Field: at, Msg: "name a profile"})
				continue
			}
			check(at, m[k])
		}
	}
	check("access.default", c.Default)
	check("access.github.read", c.GitHub.Read)
	check("access.github.triage", c.GitHub.Triage)
	check("access.github.write", c.GitHub.Write)
	check("access.github.maintain", c.GitHub.Maintain)
	check("access.github.admin", c.GitHub.Admin)
	checkMap("access.github.users", c.GitHub.Users)
	check("access.slack.default", c.Slack.Default)
	checkMap("access.slack.users", c.Slack.Users)
	checkMap("access.slack.groups", c.Slack.Groups)
	check("access.local.default", c.Local.Default)
	checkMap("access.local.users", c.Local.Users)
	check("access.schedules.default", c.Schedules.Default)
	checkMap("access.schedules.names", c.Schedules.Names)
	return errors.Join(errs...)
}

// mapPath is the config path of key in the mapping at field, written as
// the config's errors write it.
func mapPath(field, key string) string {
	plain := key != ""
	for _, r := range key {
		if !(r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			plain = false
			break
		}
	}
	if plain {
		return field + "." + key
	}
	return field + "[" + strconv.Quote(key) + "]"
}

// Access returns the access section in effect with every default filled
// in: the ceiling each kind of requester gets. The maps are copies.
func (e *Engine) Access() AccessConfig {
	c := e.access.cfg
	c.GitHub.Users = maps.Clone(c.GitHub.Users)
	c.Slack.Users = maps.Clone(c.Slack.Users)
	c.Slack.Groups = maps.Clone(c.Slack.Groups)
	c.Local.Users = maps.Clone(c.Local.Users)
	c.Schedules.Names = maps.Clone(c.Schedules.Names)
	return c
}

// SlackGroups returns the user group ids access rules name, so a run only
// looks up the groups that matter.
func (e *Engine) SlackGroups() []string {
	return slices.Sorted(maps.Keys(e.access.cfg.Slack.Groups))
}

// Ceiling returns the ceiling of requester r: the profile access maps them
// to, and why, in words. A requester access does not know gets the default
// ceiling.
func (e *Engine) Ceiling(r bot.Requester) bot.Ceiling {
	a := e.access
	who := r.Handle()
	switch r.Source {
	case bot.SourceGitHub:
		if p, ok := a.users[strings.ToLower(r.ID)]; ok && r.ID != "" {
			return bot.Ceiling{Profile: p, Reason: "requested by " + who + " (access.github.users)"}
		}
		if p, ok := a.github[r.Permission]; ok {
			return bot.Ceiling{Profile: p, Reason: "requested by " + who + ", " + r.Permission + " access"}
		}
		if r.Permission == "none" {
			return bot.Ceiling{Profile: a.cfg.Default, Reason: "requested by " + who + ", who has no access to the repository"}
		}
		return bot.Ceiling{Profile: a.cfg.Default, Reason: "requested by " + who + ", whose access to the repository is unknown"}
	case bot.SourceSlack:
		if p, ok := a.cfg.Slack.Users[r.ID]; ok && r.ID != "" {
			return bot.Ceiling{Profile: p, Reason: "requested by " + who + " (access.slack.users)"}
		}
		if r.External {
			return bot.Ceiling{Profile: a.cfg.Default, Reason: "requested by " + who + ", from another Slack workspace (" + r.Team + ")"}
		}
		if g, p, ok := e.widestGroup(r.Groups); ok {
			return bot.Ceiling{Profile: p, Reason: "requested by " + who + ", a member of " + g + " (access.slack.groups)"}
		}
		return bot.Ceiling{Profile: a.cfg.Slack.Default, Reason: "requested by " + who + ", a member of the Slack workspace"}
	case bot.SourceLocal:
		if p, ok := a.cfg.Local.Users[r.ID]; ok && r.ID != "" {
			return bot.Ceiling{Profile: p, Reason: "requested by " + who + " on the local console (access.local.users)"}
		}
		return bot.Ceiling{Profile: a.cfg.Local.Default, Reason: "requested by " + who + " on the local console"}
	case bot.SourceSchedule:
		if p, ok := a.cfg.Schedules.Names[r.ID]; ok && r.ID != "" {
			return bot.Ceiling{Profile: p, Reason: "started by " + who + " (access.schedules.names)"}
		}
		return bot.Ceiling{Profile: a.cfg.Schedules.Default, Reason: "started by " + who}
	}
	if r.IsZero() {
		return bot.Ceiling{Profile: a.cfg.Default, Reason: "requested by nobody known"}
	}
	return bot.Ceiling{Profile: a.cfg.Default, Reason: fmt.Sprintf("requested by %s from %s, which access does not know", who, r.Source)}
}

// widestGroup returns the group among groups that access names whose
// profile covers the others' (the first by id when none does).
func (e *Engine) widestGroup(groups []string) (group, profile string, ok bool) {
	var named []string
	for _, g := range groups {
		if _, in := e.access.cfg.Slack.Groups[g]; in {
			named = append(named, g)
		}
	}
	slices.Sort(named)
	named = slices.Compact(named)
	if len(named) == 0 {
		return "", "", false
	}
	best := named[0]
	for _, g := range named[1:] {
		if e.covers(e.access.cfg.Slack.Groups[g], e.access.cfg.Slack.Groups[best]) &&
			!e.covers(e.access.cfg.Slack.Groups[best], e.access.cfg.Slack.Groups[g]) {
			best = g
		}
	}
	return best, e.access.cfg.Slack.Groups[best], true
}

// Effective says what an agent with profile may do under ceilings, and
// why: the narrowest of them when one is narrower than all the others
// ("read-only: requested by @stranger, read access"), otherwise the
// profiles joined with " ∩ " and each reason.
func (e *Engine) Effective(agent, profile string, ceilings []bot.Ceiling) bot.EffectiveRights {
	names := []string{profile}
	reasons := []string{agent + "'s own profile"}
	for _, c := range ceilings {
		switch {
		case slices.ContainsFunc(names, func(n string) bool { return e.covers(c.Profile, n) }):
			// The ceiling allows at least what one bound already allows.
			continue
		case slices.ContainsFunc(names, func(n string) bool { return !e.covers(n, c.Profile) }):
			names, reasons = append(names, c.Profile), append(reasons, c.Reason)
		default:
			// Narrower than every bound so far: it alone decides.
			names, reasons = []string{c.Profile}, []string{c.Reason}
		}
	}
	if len(names) == 1 && names[0] == profile && len(ceilings) > 0 {
		return bot.EffectiveRights{Profile: profile, Reason: fmt.Sprintf("%s's own profile, within %s (%s)", agent, ceilings[0].Profile, ceilings[0].Reason)}
	}
	return bot.EffectiveRights{Profile: strings.Join(names, " ∩ "), Reason: strings.Join(reasons, "; ")}
}

// covers reports whether profile a allows everything profile b allows.
// It compares the rules as written, so it may say no where a could be
// shown to allow as much; it never says yes where it does not. An unknown
// profile covers nothing and is covered by nothing.
func (e *Engine) covers(a, b string) bool {
	if a == b {
		_, ok := e.profiles[a]
		return ok
	}
	pa, ok := e.profiles[a]
	if !ok {
		return false
	}
	pb, ok := e.profiles[b]
	if !ok {
		return false
	}
	subset := func(x, y []string) bool { // every x is in y
		for _, s := range x {
			if !slices.Contains(y, s) {
				return false
			}
		}
		return true
	}
	absolute := func(globs []string) []string {
		var out []string
		for _, g := range globs {
			if strings.HasPrefix(g, "/") {
				out = append(out, g)
			}
		}
		return out
	}
	switch {
	case !pa.perms.has(pb.perms), pb.Network && !pa.Network:
		return false
	case (pa.Tools != nil || pb.Tools != nil) && (pa.Tools == nil || pb.Tools == nil || !subset(pb.Tools, pa.Tools)):
		// A tools list is both a limit and a grant beyond permissions:
		// only lists compare.
		return false
	case !subset(pb.Commands.Allow, pa.Commands.Allow), !subset(pa.Commands.Deny, pb.Commands.Deny):
		return false
	case !subset(pa.Paths.Read.Deny, pb.Paths.Read.Deny), !subset(pa.Paths.Write.Deny, pb.Paths.Write.Deny):
		return false
	case pa.relRead != nil && (pb.relRead == nil || !subset(pb.relRead, pa.relRead)),
		pa.relWrite != nil && (pb.relWrite == nil || !subset(pb.relWrite, pa.relWrite)):
		return false
	case !subset(absolute(pb.Paths.Read.Allow), absolute(pa.Paths.Read.Allow)),
		!subset(absolute(pb.Paths.Write.Allow), absolute(pa.Paths.Write.Allow)):
		return false
	case !subset(pa.Approval, pb.Approval):
		return false
	}
	return true
}
