package policy

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

// argumentPerms are the permissions a command may need only for some
// arguments: a branch that may be protected, a path under CI configuration
// or among secrets. An approval pattern names a command without them, so
// they are granted while it is checked; everything else a command needs it
// needs whatever its arguments.
const argumentPerms = pMerge | pCI | pSecrets

// deadApprovals returns a *bot.FieldError for every approval entry of a
// custom profile that can never ask anyone, because the profile refuses
// outright what the entry names: a tool it does not allow (not in its
// tools list, or lacking the permission the tool declares), a command
// commands.deny names or that needs a permission the profile lacks. The
// core tools and infos are the tools an entry may name; any other entry is
// a command. Entries with glob characters are not checked. cfg gives the
// positions of the entries as written.
func (e *Engine) deadApprovals(cfg map[string]ProfileConfig, infos []tools.Info) []error {
	known := map[string]tools.Info{}
	for _, n := range tools.CoreNames() {
		known[n], _ = tools.CoreInfo(n)
	}
	for _, info := range infos {
		known[info.Name] = info
	}
	var errs []error
	for _, name := range e.Names() {
		p := e.profiles[name]
		if p.Builtin {
			continue
		}
		for _, entry := range p.Approval {
			entry = strings.TrimSpace(entry)
			if strings.ContainsAny(entry, "*?[") {
				continue
			}
			var why string
			info, isTool := known[entry]
			switch {
			case isTool:
				if f := e.toolGate(p, info); f != nil {
					why = f.reason
				}
			case infos == nil && platformTool(entry):
				// Only a daemon with the platform connected knows what
				// the tool declares: CheckApprovals.
				continue
			default:
				why = e.commandRefusal(p, entry)
			}
			if why == "" {
				continue
			}
			field := "profiles." + name
			msg := fmt.Sprintf("approval %q never asks anyone: the profile refuses it outright (%s); grant what it needs or remove it from approval", entry, why)
			if i := slices.Index(cfg[name].Approval, entry); i >= 0 {
				field = fmt.Sprintf("profiles.%s.approval[%d]", name, i)
				msg = fmt.Sprintf("%q never asks anyone: the profile refuses it outright (%s); grant what it needs (permissions, commands.allow or tools) or remove it from approval", entry, why)
			}
			errs = append(errs, &bot.FieldError{Field: field, Msg: msg})
		}
	}
	return errs
}

// platformTool reports whether entry is named like a tool of a platform or
// an agent (github_merge_pull_request, agent_coder) rather than a command.
func platformTool(entry string) bool {
	return strings.Contains(entry, "_") && !strings.ContainsRune(entry, ' ')
}

// commandRefusal says why p refuses the command an approval entry names,
// whatever its arguments, or "".
func (e *Engine) commandRefusal(p *Profile, entry string) string {
	ws, err := e.workspace(os.TempDir())
	if err != nil {
		return ""
	}
	c := e.newChecker(p, ws)
	defer e.releaseChecker(c)
	c.perms |= argumentPerms
	c.script(entry, c.dirs)
	if c.deny == nil {
		return ""
	}
	return c.deny.reason
}

// CheckApprovals checks the approval entries of custom profiles that name
// tools of connected platforms (infos), as New checks those naming core
// tools and commands: an entry the profile refuses outright is a
// *bot.FieldError, joined with errors.Join.
func (e *Engine) CheckApprovals(infos []tools.Info) error {
	if infos == nil {
		infos = []tools.Info{}
	}
	return errors.Join(e.deadApprovals(e.cfg, infos)...)
}
