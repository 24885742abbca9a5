package policy

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

// ProfileConfig is one custom permission profile as written in the config
// file under profiles.<name>. A profile that extends another starts from
// it: permissions, allowed and denied commands, denied paths and approvals
// add up; tools, allowed paths, approvers and network are replaced when set.
type ProfileConfig struct {
	Description string `yaml:"description" json:"description,omitempty"`
	// Extends names the profile this one starts from: a built-in one or
	// another custom profile.
	Extends string `yaml:"extends" json:"extends,omitempty"`
	// Permissions are granted on top of the extended profile's: read,
	// write, exec, push, merge, ci, deploy, secrets, admin.
	Permissions []Permission `yaml:"permissions" json:"permissions,omitempty"`
	// Tools, when set, is the complete list of tools (globs allowed, such
	// as "github_*") the profile allows; each listed tool is allowed even
	// where the profile's permissions would not cover it.
	Tools []string `yaml:"tools" json:"tools,omitempty"`
	// Commands allow and deny shell commands by name, or by name and
	// subcommand ("git push").
	Commands CommandRules `yaml:"commands" json:"commands"`
	// Paths allow and deny paths for reading and writing.
	Paths PathRules `yaml:"paths" json:"paths"`
	// Approval lists tools and commands that need a person's approval.
	Approval []string `yaml:"approval" json:"approval,omitempty"`
	// Approvers are the users who may approve; "*" lets anyone approve.
	// Required when Approval is not empty.
	Approvers []string `yaml:"approvers" json:"approvers,omitempty"`
	// Network lets bash reach the network (the sandbox shares the host's
	// network) and commands that need it run. Unset inherits.
	Network *bool `yaml:"network" json:"network,omitempty"`
}

// CommandRules allow and deny shell commands. An entry is a command name,
// optionally followed by subcommand words ("git push", "gh pr merge"); each
// word may be a glob ("kube*"). A deny or approval entry may also name
// options ("rm -rf", "git push --force"): it then matches a command that
// carries each of them, however they are spelt (-rf, -r -f, -fr, -R -f,
// --recursive --force, --forc). Deny always wins; an allowed command runs
// even where the profile's permissions would not cover it, but its paths
// are still checked.
type CommandRules struct {
	Allow []string `yaml:"allow" json:"allow,omitempty"`
	Deny  []string `yaml:"deny" json:"deny,omitempty"`
}

// PathRules are the path rules for reading and for writing.
type PathRules struct {
	Read  PathRule `yaml:"read" json:"read"`
	Write PathRule `yaml:"write" json:"write"`
}

// PathRule allows and denies paths by doublestar glob. A relative glob is
// matched against the path inside the workspace; an absolute glob against
// the resolved absolute path, and is the only way to reach outside the
// workspace. A glob that matches a directory covers everything in it. Deny
// always wins; relative Allow globs, when present, are the only places
// inside the workspace the profile may touch.
type PathRule struct {
	Allow []string `yaml:"allow" json:"allow,omitempty"`
	Deny  []string `yaml:"deny" json:"deny,omitempty"`
}

// Built-in profile names.
const (
	ReadOnly    = tools.ProfileReadOnly
	Contributor = tools.ProfileContributor
	Maintainer  = tools.ProfileMaintainer
	Ops         = tools.ProfileOps
)

// AnyApprover in a profile's approvers lets every identified user approve.
const AnyApprover = "*"

// Profile is a resolved permission profile: a built-in one, or a custom one
// with everything it extends folded in. It marshals to the JSON of
// `switchyard policy profiles --json`.
type Profile struct {
	Name        string       `json:"name"`
	Description string       `json:"description"`
	Builtin     bool         `json:"builtin"`
	Extends     string       `json:"extends,omitempty"`
	Permissions []Permission `json:"permissions"`
	Network     bool         `json:"network"`
	// Tools is nil when the profile's permissions decide which tools it
	// may call.
	Tools     []string     `json:"tools,omitempty"`
	Commands  CommandRules `json:"commands"`
	Paths     PathRules    `json:"paths"`
	Approval  []string     `json:"approval,omitempty"`
	Approvers []string     `json:"approvers,omitempty"`

	perms         perms
	allowCmds     []cmdPattern
	denyCmds      []cmdPattern
	approvalCmds  []cmdPattern
	approvalTools []string
	// relRead and relWrite are the workspace-relative globs of
	// paths.read.allow and paths.write.allow.
	relRead, relWrite []string
	// allowRule and allowReason are what an allowed call's decision says,
	// made once rather than on every call.
	allowRule, allowReason string
}

// cmdPattern is a command rule: a name and leading subcommand words, each a
// glob, and the options a command must carry to match.
type cmdPattern struct {
	text  string
	words []string
	// opts are the options the rule names, one short letter ("-r") or
	// one long name ("--force") each.
	opts []string
}

func builtinProfiles() []*Profile {
	ro := &Profile{
		Name:        ReadOnly,
		Description: "Reads the workspace: file reading tools and read-only shell commands. Cannot change files, push, or run programs.",
		perms:       pRead,
	}
	contrib := &Profile{
		Name:        Contributor,
		Description: "Read-only plus writing files, running builds and tests, creating branches and pull requests. Cannot merge, change CI/CD config or deploy.",
		perms:       ro.perms | pWrite | pExec | pPush,
	}
	maint := &Profile{
		Name:        Maintainer,
		Description: "Contributor plus merging pull requests, pushing to protected branches and changing CI/CD config and git hooks.",
		perms:       contrib.perms | pMerge | pCI,
	}
	ops := &Profile{
		Name:        Ops,
		Description: "Everything, including deployment, secrets and the network; every sensitive call is audited.",
		perms:       maint.perms | pDeploy | pSecrets | pNetwork | pAdmin,
		Network:     true,
	}
	out := []*Profile{ro, contrib, maint, ops}
	for _, p := range out {
		p.Builtin = true
		p.Permissions = p.perms.list()
		p.compile()
	}
	return out
}

var profileName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// compileProfiles resolves the built-in profiles and every custom one,
// reporting each problem as a *bot.FieldError at its config path
// ("profiles.deployer.extends"), joined with errors.Join in name order.
func compileProfiles(cfg map[string]ProfileConfig) (map[string]*Profile, error) {
	out := map[string]*Profile{}
	for _, p := range builtinProfiles() {
		out[p.Name] = p
	}
	names := make([]string, 0, len(cfg))
	for n := range cfg {
		names = append(names, n)
	}
	sort.Strings(names)

	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, &bot.FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	valid := map[string]bool{}
	for _, n := range names {
		at := "profiles." + n
		switch {
		case out[n] != nil:
			fail(at, "%q is a built-in profile and cannot be redefined; give yours another name and extend it", n)
		case !profileName.MatchString(n):
			fail(at, "invalid profile name %q: use 1-64 lower-case letters, digits, '-' or '_'", n)
		default:
			before := len(errs)
			validateProfileConfig(at, cfg[n], fail)
			valid[n] = len(errs) == before
		}
	}

	// Cycles first, so resolving below can simply recurse. Each profile on
	// a cycle reports it; one that merely extends a cycle is left out
	// without a message of its own.
	for _, n := range names {
		if !valid[n] {
			continue
		}
		chain := []string{n}
		for cur := cfg[n].Extends; cur != ""; cur = cfg[cur].Extends {
			if _, ok := cfg[cur]; !ok || out[cur] != nil {
				break
			}
			if i := slices.Index(chain, cur); i >= 0 {
				if i == 0 {
					fail("profiles."+n+".extends", "extends forms a cycle: %s", strings.Join(append(chain, cur), " → "))
				}
				valid[n] = false
				break
			}
			chain = append(chain, cur)
		}
	}

	var resolve func(name string) *Profile
	resolve = func(name string) *Profile {
		if p, ok := out[name]; ok {
			return p
		}
		if !valid[name] {
			return nil
		}
		c := cfg[name]
		at := "profiles." + name
		var base *Profile
		if c.Extends != "" {
			_, builtin := out[c.Extends]
			if _, known := cfg[c.Extends]; !builtin && !known {
				fail(at+".extends", "unknown profile %q (want %s or a custom profile)", c.Extends, strings.Join(builtinNames(), ", "))
				valid[name] = false
				return nil
			}
			if base = resolve(c.Extends); base == nil {
				// The base has a problem of its own, reported there.
				valid[name] = false
				return nil
			}
		}
		p := merge(name, base, c)
		if len(p.Approval) > 0 && len(p.Approvers) == 0 {
			fail(at+".approvers", "required: approval lists %s; name the users who may approve (%q lets anyone)", strings.Join(p.Approval, ", "), AnyApprover)
			valid[name] = false
			return nil
		}
		out[name] = p
		return p
	}
	for _, n := range names {
		resolve(n)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func builtinNames() []string {
	return []string{ReadOnly, Contributor, Maintainer, Ops}
}

func validateProfileConfig(at string, c ProfileConfig, fail func(field, format string, args ...any)) {
	for i, p := range c.Permissions {
		if p == PermNetwork {
			fail(fmt.Sprintf("%s.permissions[%d]", at, i), "network is not a permission here; set network: true")
			continue
		}
		if _, ok := permBit(p); !ok {
			fail(fmt.Sprintf("%s.permissions[%d]", at, i), "unknown permission %q (want one of read, write, exec, push, merge, ci, deploy, secrets, admin)", p)
		}
	}
	for i, t := range c.Tools {
		if !validToolPattern(t) {
			fail(fmt.Sprintf("%s.tools[%d]", at, i), "invalid tool name or glob %q", t)
		}
	}
	checkCmds := func(field string, list []string) {
		for i, s := range list {
			if _, err := parseCmdPattern(s); err != nil {
				fail(fmt.Sprintf("%s.%s[%d]", at, field, i), "%v", err)
			}
		}
	}
	checkCmds("commands.allow", c.Commands.Allow)
	checkCmds("commands.deny", c.Commands.Deny)
	for i, s := range c.Commands.Allow {
		if pt, err := parseCmdPattern(s); err == nil && len(pt.opts) > 0 {
			// An option allowed alone would allow the command with every
			// other option too.
			fail(fmt.Sprintf("%s.commands.allow[%d]", at, i), "%q: allow a command or its subcommands, not an option of it; deny or ask approval for options instead", s)
		}
	}
	checkPaths := func(field string, list []string) {
		for i, g := range list {
			if err := validPathGlob(g); err != nil {
				fail(fmt.Sprintf("%s.%s[%d]", at, field, i), "%v", err)
			}
		}
	}
	checkPaths("paths.read.allow", c.Paths.Read.Allow)
	checkPaths("paths.read.deny", c.Paths.Read.Deny)
	checkPaths("paths.write.allow", c.Paths.Write.Allow)
	checkPaths("paths.write.deny", c.Paths.Write.Deny)
	for i, a := range c.Approval {
		field := fmt.Sprintf("%s.approval[%d]", at, i)
		if strings.TrimSpace(a) == "" {
			fail(field, "empty entry: name a tool or a command")
			continue
		}
		if _, err := parseCmdPattern(a); err != nil {
			fail(field, "%v", err)
		}
	}
	for i, a := range c.Approvers {
		if strings.TrimSpace(a) == "" {
			fail(fmt.Sprintf("%s.approvers[%d]", at, i), "empty approver")
		}
	}
}

func validToolPattern(t string) bool {
	if tools.ValidName(t) {
		return true
	}
	if !strings.ContainsAny(t, "*?[") {
		return false
	}
	_, err := path.Match(t, "")
	return err == nil && !strings.ContainsAny(t, " /")
}

func validPathGlob(g string) error {
	switch {
	case strings.TrimSpace(g) == "":
		return errors.New("empty glob")
	case !doublestar.ValidatePattern(g):
		return fmt.Errorf("invalid glob %q", g)
	case g == ".." || strings.HasPrefix(g, "../"):
		return fmt.Errorf("glob %q leaves the workspace; write an absolute glob for paths outside it", g)
	}
	return nil
}

func parseCmdPattern(s string) (cmdPattern, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return cmdPattern{}, errors.New("empty command")
	}
	pt := cmdPattern{text: strings.Join(fields, " ")}
	for i, w := range fields {
		if strings.ContainsAny(w, "|;&<>()$`\\\"'") {
			return cmdPattern{}, fmt.Errorf("command %q: write a command name and subcommand words, not shell syntax", s)
		}
		if i > 0 && len(w) > 1 && w[0] == '-' {
			switch {
			case w == "--" || strings.ContainsAny(w, "*?[="):
				return cmdPattern{}, fmt.Errorf("command %q: write an option as it is spelt (-rf, --force), without a value or a glob (%q)", s, w)
			case strings.HasPrefix(w, "--"):
				pt.opts = append(pt.opts, w)
			default:
				for _, r := range w[1:] {
					pt.opts = append(pt.opts, "-"+string(r))
				}
			}
			continue
		}
		if _, err := path.Match(w, ""); err != nil {
			return cmdPattern{}, fmt.Errorf("command %q: invalid glob %q", s, w)
		}
		pt.words = append(pt.words, w)
	}
	return pt, nil
}

// merge folds c over base (nil for a profile that extends nothing).
func merge(name string, base *Profile, c ProfileConfig) *Profile {
	p := &Profile{Name: name, Description: c.Description, Extends: c.Extends}
	if base != nil {
		p.perms = base.perms
		p.Network = base.Network
		p.Tools = slices.Clone(base.Tools)
		p.Commands = CommandRules{Allow: slices.Clone(base.Commands.Allow), Deny: slices.Clone(base.Commands.Deny)}
		p.Paths = PathRules{
			Read:  PathRule{Allow: slices.Clone(base.Paths.Read.Allow), Deny: slices.Clone(base.Paths.Read.Deny)},
			Write: PathRule{Allow: slices.Clone(base.Paths.Write.Allow), Deny: slices.Clone(base.Paths.Write.Deny)},
		}
		p.Approval = slices.Clone(base.Approval)
		p.Approvers = slices.Clone(base.Approvers)
	}
	for _, perm := range c.Permissions {
		bit, _ := permBit(perm)
		p.perms |= bit
	}
	if c.Network != nil {
		p.Network = *c.Network
	}
	if p.Network {
		p.perms |= pNetwork
	} else {
		p.perms &^= pNetwork
	}
	if c.Tools != nil {
		p.Tools = slices.Clone(c.Tools)
	}
	p.Commands.Allow = appendNew(p.Commands.Allow, c.Commands.Allow)
	p.Commands.Deny = appendNew(p.Commands.Deny, c.Commands.Deny)
	if c.Paths.Read.Allow != nil {
		p.Paths.Read.Allow = slices.Clone(c.Paths.Read.Allow)
	}
	if c.Paths.Write.Allow != nil {
		p.Paths.Write.Allow = slices.Clone(c.Paths.Write.Allow)
	}
	p.Paths.Read.Deny = appendNew(p.Paths.Read.Deny, c.Paths.Read.Deny)
	p.Paths.Write.Deny = appendNew(p.Paths.Write.Deny, c.Paths.Write.Deny)
	p.Approval = appendNew(p.Approval, c.Approval)
	if c.Approvers != nil {
		p.Approvers = slices.Clone(c.Approvers)
	}
	p.Permissions = p.perms.list()
	p.compile()
	return p
}

func appendNew(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// compile parses the command rules; they were validated before.
func (p *Profile) compile() {
	parse := func(list []string) []cmdPattern {
		var out []cmdPattern
		for _, s := range list {
			if c, err := parseCmdPattern(s); err == nil {
				out = append(out, c)
			}
		}
		return out
	}
	p.allowCmds = parse(p.Commands.Allow)
	p.denyCmds = parse(p.Commands.Deny)
	p.approvalCmds = parse(p.Approval)
	p.approvalTools = nil
	for _, a := range p.Approval {
		if !strings.Contains(strings.TrimSpace(a), " ") {
			p.approvalTools = append(p.approvalTools, strings.TrimSpace(a))
		}
	}
	relative := func(globs []string) []string {
		var out []string
		for _, g := range globs {
			if !strings.HasPrefix(g, "/") {
				out = append(out, g)
			}
		}
		return out
	}
	p.relRead, p.relWrite = relative(p.Paths.Read.Allow), relative(p.Paths.Write.Allow)
	p.allowRule = "profile:" + p.Name + "/allow"
	p.allowReason = fmt.Sprintf("allowed by profile %q", p.Name)
}

// allowsTool reports whether the profile's tools list names t; listed is
// false when the profile has no list.
func (p *Profile) allowsTool(name string) (allowed, listed bool) {
	if p.Tools == nil {
		return false, false
	}
	for _, t := range p.Tools {
		if t == name {
			return true, true
		}
		if ok, _ := path.Match(t, name); ok {
			return true, true
		}
	}
	return false, true
}

// needsApproval reports whether the profile wants tool name approved.
func (p *Profile) toolNeedsApproval(name string) bool {
	for _, t := range p.approvalTools {
		if ok, _ := path.Match(t, name); ok || t == name {
			return true
		}
	}
	return false
}

// match reports whether a command rule matches argv: the name, then each
// subcommand word against the command's subcommand words.
func (c cmdPattern) match(name string, sub []string) bool {
	if !globWord(c.words[0], name) {
		return false
	}
	if len(c.words)-1 > len(sub) {
		return false
	}
	for i, w := range c.words[1:] {
		if !globWord(w, sub[i]) {
			return false
		}
	}
	return true
}

func globWord(pattern, s string) bool {
	if pattern == s {
		return true
	}
	ok, _ := path.Match(pattern, s)
	return ok
}
