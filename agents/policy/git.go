package policy

import (
	"path"
	"slices"
	"strings"
)

// gitGlobals are git's options before the subcommand.
type gitGlobals struct {
	dirs       []word // -C
	gitDir     []word // --git-dir, --work-tree
	unsafeConf []string
	execPath   bool
}

// safeGitConfig are configuration keys git -c may set for any profile:
// they change output and identity, never what runs.
func safeGitConfig(key string) bool {
	key = strings.ToLower(key)
	switch key {
	case "user.name", "user.email", "core.quotepath", "init.defaultbranch", "commit.gpgsign", "tag.gpgsign",
		"gc.auto", "core.autocrlf", "core.safecrlf", "pull.rebase", "pull.ff", "merge.ff", "diff.renames",
		"color.ui", "advice.detachedhead", "core.abbrev", "log.showsignature", "protocol.version":
		return true
	}
	return strings.HasPrefix(key, "color.") || strings.HasPrefix(key, "advice.") || strings.HasPrefix(key, "format.pretty")
}

// gitGlobal splits git's arguments into its global options and the rest,
// which starts with the subcommand.
func gitGlobal(args []word) (gitGlobals, []word) {
	var g gitGlobals
	i := 0
	for ; i < len(args); i++ {
		w := args[i]
		if !w.lit || !strings.HasPrefix(w.s, "-") {
			break
		}
		name, val, hasVal := strings.Cut(w.s, "=")
		next := func() (word, bool) {
			if hasVal {
				return litWord(val), true
			}
			if i+1 < len(args) {
				i++
				return args[i], true
			}
			return word{}, false
		}
		switch name {
		case "-C":
			if v, ok := next(); ok {
				g.dirs = append(g.dirs, v)
			}
		case "-c":
			if v, ok := next(); ok {
				key, _, _ := strings.Cut(v.s, "=")
				if !v.lit || !safeGitConfig(key) {
					g.unsafeConf = append(g.unsafeConf, v.source())
				}
			}
		case "--config-env":
			next()
			g.unsafeConf = append(g.unsafeConf, w.s)
		case "--git-dir", "--work-tree":
			if v, ok := next(); ok {
				g.gitDir = append(g.gitDir, v)
			}
		case "--namespace", "--super-prefix":
			next()
		case "--exec-path":
			if hasVal {
				g.execPath = true
			}
		}
	}
	return g, args[i:]
}

// gitClass is what a git subcommand needs.
type gitClass uint8

const (
	gitRead    gitClass = iota // inspects the repository
	gitWrite                   // changes the working tree, index or refs
	gitNetRead                 // fetches from a remote and updates local refs
	gitUnknown                 // not known: an alias or a git-<name> program
)

func gitSubclass(sub string) gitClass {
	switch sub {
	case "status", "log", "diff", "show", "blame", "annotate", "shortlog", "describe", "rev-parse", "rev-list",
		"ls-files", "ls-tree", "cat-file", "grep", "show-ref", "for-each-ref", "merge-base", "name-rev",
		"count-objects", "cherry", "whatchanged", "version", "help", "var", "check-ignore", "check-attr",
		"check-ref-format", "verify-commit", "verify-tag", "range-diff", "diff-tree", "diff-files", "diff-index",
		"fsck", "show-branch", "get-tar-commit-id", "ls-remote-local", "column", "stripspace", "mailinfo",
		"interpret-trailers", "patch-id":
		return gitRead
	case "add", "commit", "checkout", "switch", "restore", "reset", "rm", "mv", "merge", "rebase", "cherry-pick",
		"revert", "apply", "am", "clean", "init", "gc", "prune", "repack", "pack-refs", "update-index",
		"update-ref", "symbolic-ref", "replace", "format-patch", "archive", "bundle", "commit-tree",
		"hash-object", "read-tree", "write-tree", "checkout-index", "sparse-checkout", "maintenance", "mktag",
		"mktree", "merge-file", "rerere", "tag", "branch", "stash", "worktree", "notes", "reflog", "config",
		"remote", "bisect", "mergetool", "difftool", "filter-branch", "fast-import", "hook", "submodule":
		return gitWrite
	case "fetch", "pull", "clone", "ls-remote", "push", "lfs":
		return gitNetRead
	}
	return gitUnknown
}

func gitHandler(c *checker, inv *invocation) cwds {
	g, rest := gitGlobal(inv.argv[1:])
	cwd := inv.cwd
	for _, d := range g.dirs {
		cwd = c.chdir(inv, d, cwd)
		if c.deny != nil {
			return inv.cwd
		}
	}
	inv = c.invocation(invocation{name: inv.name, argv: inv.argv, cwd: cwd, sub: inv.sub, allowed: inv.allowed})
	for _, d := range g.gitDir {
		c.usePath(inv, d, pathUse{acc: accRead})
	}
	if len(g.unsafeConf) > 0 && !c.needBecause(inv, pExec|pCI, "git -c "+g.unsafeConf[0]+" sets configuration that can run programs") {
		return inv.cwd
	}
	if g.execPath && !c.need(inv, pExec) {
		return inv.cwd
	}
	if len(rest) == 0 {
		c.need(inv, pRead)
		return inv.cwd
	}
	if !rest[0].lit {
		c.denyf("shell:dynamic-command", "git subcommand %s is not a literal (it contains %s)", rest[0].source(), rest[0].dyn)
		return inv.cwd
	}
	sub := rest[0].s
	args := rest[1:]
	opts, pos := parseOpts(args, optSpec{short: "mFCcSnAtboeXsBULOIx", long: []string{"--message", "--file",
		"--reuse-message", "--author", "--date", "--template", "--output", "--output-directory", "--exec",
		"--strategy", "--strategy-option", "--onto", "--format", "--pretty", "--since", "--until", "--grep",
		"--depth", "--branch", "--origin", "--reference", "--separate-git-dir", "--upload-pack", "--receive-pack",
		"--config", "--push-option", "--remote", "--prefix", "--shallow-since", "--jobs", "--set-upstream-to",
		"--contains", "--merged", "--no-merged", "--points-at", "--sort", "--abbrev", "--dst-prefix",
		"--src-prefix", "--worktree-attributes", "--fixup", "--squash", "--cleanup", "--pathspec-from-file"}})

	switch sub {
	case "push":
		return gitPush(c, inv, opts, pos)
	case "clone":
		return gitClone(c, inv, opts, pos)
	case "config":
		return gitConfig(c, inv, opts, pos)
	case "rebase":
		for _, o := range opts {
			if (o.name == "-x" || o.name == "--exec") && o.val != nil {
				if !c.need(inv, pWrite) {
					return inv.cwd
				}
				return c.shellString(inv, *o.val)
			}
		}
		if hasOpt(opts, "-i", "--interactive") {
			c.need(inv, pWrite|pExec)
			return inv.cwd
		}
	case "bisect":
		if len(pos) > 0 && pos[0].lit && pos[0].s == "run" {
			if !c.need(inv, pWrite) {
				return inv.cwd
			}
			if len(pos) > 1 {
				return c.run(pos[1:], inv.cwd)
			}
			return inv.cwd
		}
	case "submodule":
		if len(pos) > 0 && pos[0].lit {
			switch pos[0].s {
			case "status", "summary":
				c.need(inv, pRead)
				return inv.cwd
			case "foreach":
				if !c.need(inv, pWrite) {
					return inv.cwd
				}
				return c.joinedScript(inv, pos[1:])
			}
		}
		c.need(inv, pWrite|pNetwork)
		return inv.cwd
	case "filter-branch", "mergetool", "difftool", "hook":
		c.need(inv, pWrite|pExec)
		return inv.cwd
	case "credential", "credential-store", "credential-cache":
		c.need(inv, pSecrets)
		return inv.cwd
	case "remote":
		return gitRemote(c, inv, pos)
	case "archive":
		if hasOpt(opts, "--remote") {
			c.need(inv, pNetwork)
			return inv.cwd
		}
	}

	class := gitSubclass(sub)
	if class == gitWrite && readOnlyForm(sub, opts, pos) {
		class = gitRead
	}
	switch class {
	case gitRead:
		if !c.need(inv, pRead) {
			return inv.cwd
		}
		gitPathArgs(c, inv, opts, pos, accRead, hasOpt(opts, "--no-index"))
		for _, o := range opts {
			if (o.name == "--output" || o.name == "-o") && o.val != nil {
				if !c.need(inv, pWrite) {
					return inv.cwd
				}
				c.usePath(inv, *o.val, pathUse{acc: accWrite})
			}
		}
	case gitWrite:
		if !c.need(inv, pWrite) {
			return inv.cwd
		}
		acc := accRead
		switch sub {
		case "rm", "mv", "restore", "checkout", "clean", "checkout-index":
			acc = accWrite
		}
		gitPathArgs(c, inv, opts, pos, acc, false)
		for _, o := range opts {
			if o.val == nil {
				continue
			}
			switch o.name {
			case "-o", "--output", "--output-directory":
				c.usePath(inv, *o.val, pathUse{acc: accWrite})
			case "-F", "--file", "--template", "--pathspec-from-file":
				c.usePath(inv, *o.val, pathUse{acc: accRead})
			}
		}
	case gitNetRead:
		if c.need(inv, pWrite|pNetwork) {
			gitPathArgs(c, inv, opts, pos, accRead, false)
		}
		if hasOpt(opts, "--upload-pack") {
			c.need(inv, pExec)
		}
	default:
		if !inv.allowed && !c.perms.has(pExec) {
			c.denyf("git:unknown", "command %q is not allowed: %q is not a git subcommand the policy knows (it may be an alias or a git-%s program; running those needs the exec permission)", "git "+sub, sub, sub)
			return inv.cwd
		}
		c.used |= pExec
	}
	return inv.cwd
}

// readOnlyForm reports whether a subcommand that can change things is used
// in its listing form: git branch, git tag -l, git stash list.
func readOnlyForm(sub string, opts []opt, pos []word) bool {
	first := ""
	if len(pos) > 0 && pos[0].lit {
		first = pos[0].s
	}
	switch sub {
	case "branch":
		if hasOpt(opts, "-d", "-D", "--delete", "-m", "-M", "--move", "-c", "-C", "--copy", "-f", "--force",
			"--set-upstream-to", "-u", "--unset-upstream", "--edit-description", "-t", "--track") {
			return false
		}
		return len(pos) == 0 || hasOpt(opts, "-l", "--list", "--contains", "--merged", "--no-merged", "--points-at")
	case "tag":
		if hasOpt(opts, "-d", "--delete", "-a", "-s", "-f", "-m", "-F") {
			return false
		}
		return len(pos) == 0 || hasOpt(opts, "-l", "--list", "-v", "--verify", "--contains", "--points-at")
	case "stash":
		return first == "list" || first == "show"
	case "worktree":
		return first == "list"
	case "notes":
		return first == "list" || first == "show" || first == ""
	case "reflog":
		return first == "" || first == "show" || first == "exists"
	case "sparse-checkout":
		return first == "list"
	case "bundle":
		return first == "verify" || first == "list-heads"
	}
	return false
}

// gitPathArgs checks git operands that look like paths. Operands are
// mostly revisions and pathspecs inside the repository, which git itself
// refuses to take outside it; --no-index compares arbitrary files.
func gitPathArgs(c *checker, inv *invocation, opts []opt, pos []word, acc access, all bool) {
	for _, o := range opts {
		if o.val != nil && o.val.lit && looksLikePath(o.val.s) {
			c.usePath(inv, *o.val, pathUse{acc: accRead})
		}
	}
	for _, w := range pos {
		switch {
		case all || acc == accWrite && w.lit:
			c.usePath(inv, w, pathUse{acc: acc})
		case w.lit && looksLikePath(w.s):
			c.usePath(inv, w, pathUse{acc: acc})
		}
	}
}

func gitConfig(c *checker, inv *invocation, opts []opt, pos []word) cwds {
	read := hasOpt(opts, "--get", "--get-all", "--get-regexp", "--get-urlmatch", "-l", "--list", "--get-color",
		"--get-colorbool")
	if len(pos) > 0 && pos[0].lit {
		switch pos[0].s {
		case "get", "list":
			read = true
		case "set", "unset", "edit", "rename-section", "remove-section":
			read = false
		default:
			if len(pos) == 1 && !hasOpt(opts, "--unset", "--unset-all", "--add", "--replace-all", "-e", "--edit",
				"--rename-section", "--remove-section") {
				read = true
			}
		}
	}
	if len(pos) == 0 && !hasOpt(opts, "-e", "--edit") {
		read = true
	}
	need := pRead
	if !read {
		need |= pCI
		if hasOpt(opts, "--system") {
			need |= pAdmin
		}
	}
	if !c.need(inv, need) {
		return inv.cwd
	}
	for _, o := range opts {
		if (o.name == "--file" || o.name == "-f") && o.val != nil {
			acc := accRead
			if !read {
				acc = accWrite
			}
			c.usePath(inv, *o.val, pathUse{acc: acc})
		}
	}
	return inv.cwd
}

func gitRemote(c *checker, inv *invocation, pos []word) cwds {
	first := ""
	if len(pos) > 0 && pos[0].lit {
		first = pos[0].s
	}
	switch first {
	case "", "-v", "--verbose", "get-url":
		c.need(inv, pRead)
	case "show", "update", "prune":
		c.need(inv, pNetwork|pWrite)
	default:
		// Adding or changing a remote rewrites .git/config, which decides
		// where pushes go; an ext:: URL runs a program.
		need := pWrite | pCI
		for _, w := range pos {
			if w.lit && strings.HasPrefix(w.s, "ext::") {
				need |= pExec
			}
		}
		c.need(inv, need)
	}
	return inv.cwd
}

func gitClone(c *checker, inv *invocation, opts []opt, pos []word) cwds {
	need := pNetwork | pWrite
	if hasOpt(opts, "--template", "--upload-pack", "-u", "--config", "-c", "--separate-git-dir") {
		need |= pExec | pCI
	}
	if len(pos) > 0 && pos[0].lit && strings.HasPrefix(pos[0].s, "ext::") {
		need |= pExec
	}
	if !c.need(inv, need) {
		return inv.cwd
	}
	var dest word
	switch {
	case len(pos) >= 2:
		dest = pos[1]
	case len(pos) == 1 && pos[0].lit:
		name := strings.TrimSuffix(path.Base(strings.TrimRight(pos[0].s, "/")), ".git")
		dest = litWord(name)
	default:
		dest = litWord(".")
	}
	if len(pos) > 0 && pos[0].lit && !strings.Contains(pos[0].s, "://") && !strings.Contains(pos[0].s, "@") {
		c.usePath(inv, pos[0], pathUse{acc: accRead, tree: true})
	}
	c.usePath(inv, dest, pathUse{acc: accWrite})
	return inv.cwd
}

// gitPush allows pushing named, unprotected branches with push; anything
// that may change a protected branch (a push naming none, --all, --mirror,
// deletions, a protected destination) needs merge.
func gitPush(c *checker, inv *invocation, opts []opt, pos []word) cwds {
	need := pNetwork | pPush
	why := ""
	if hasOpt(opts, "--receive-pack", "--exec") {
		need |= pExec
	}
	switch {
	case hasOpt(opts, "--all", "--mirror", "--branches"):
		need |= pMerge
		why = "it pushes every branch"
	case hasOpt(opts, "-d", "--delete", "--prune"):
		need |= pMerge
		why = "it deletes remote branches"
	case len(pos) < 2:
		need |= pMerge
		why = "it names no branch, so it may push a protected one; name it: git push origin BRANCH"
	}
	if len(pos) >= 2 {
		for _, w := range pos[1:] {
			if !w.lit {
				need |= pMerge
				why = "a refspec is not a literal"
				break
			}
			if dst, ok := pushTarget(w.s); !ok || c.protectedBranch(dst) {
				need |= pMerge
				switch {
				case ok:
					why = "branch " + dst + " is protected"
				case strings.HasPrefix(strings.TrimPrefix(w.s, "+"), ":"):
					why = "it deletes a remote branch"
				default:
					why = "it pushes HEAD, which may be a protected branch; name the branch"
				}
				break
			}
		}
	}
	c.needBecause(inv, need, why)
	return inv.cwd
}

// pushTarget returns the remote branch a refspec updates; ok is false when
// it cannot tell (HEAD, a deletion).
func pushTarget(spec string) (string, bool) {
	spec = strings.TrimPrefix(spec, "+")
	src, dst, hasColon := strings.Cut(spec, ":")
	if !hasColon {
		dst = src
	} else if src == "" {
		// ":branch" deletes it.
		return "", false
	}
	if dst == "" || dst == "HEAD" || strings.HasPrefix(dst, "@") {
		return "", false
	}
	if strings.HasPrefix(dst, "refs/tags/") {
		return dst, true
	}
	return strings.TrimPrefix(dst, "refs/heads/"), true
}

func (c *checker) protectedBranch(name string) bool {
	for _, b := range c.branches {
		if ok, _ := path.Match(b, name); ok || b == name {
			return true
		}
	}
	return false
}

// DefaultProtectedBranches are the branches pushing to needs merge.
func DefaultProtectedBranches() []string {
	return []string{"main", "master", "trunk", "develop", "development", "production", "prod", "staging",
		"release", "release/*", "releases/*", "stable", "gh-pages"}
}

// gh subcommands by what they need.
func ghNeeds(group, cmd string) (perms, bool) {
	read := func(cmds ...string) bool { return slices.Contains(cmds, cmd) }
	switch group {
	case "pr":
		switch {
		case cmd == "merge":
			return pMerge, true
		case read("view", "list", "diff", "checks", "status"):
			return pRead, true
		case cmd == "checkout":
			return pWrite, true
		case read("create", "comment", "review", "edit", "close", "reopen", "ready", "lock", "unlock", "update-branch"):
			return pPush, true
		}
	case "issue":
		switch {
		case read("view", "list", "status"):
			return pRead, true
		case read("create", "comment", "edit", "close", "reopen", "lock", "unlock", "pin", "unpin", "develop"):
			return pPush, true
		case read("delete", "transfer"):
			return pAdmin, true
		}
	case "repo":
		switch {
		case read("view", "list"):
			return pRead, true
		case cmd == "clone":
			return pWrite, true
		case read("fork", "sync", "set-default"):
			return pPush, true
		default:
			return pAdmin, true
		}
	case "run":
		switch {
		case read("list", "view", "watch"):
			return pRead, true
		case cmd == "download":
			return pWrite, true
		case read("rerun", "cancel", "delete"):
			return pCI, true
		}
	case "workflow":
		if read("list", "view") {
			return pRead, true
		}
		return pCI, true
	case "release":
		switch {
		case read("list", "view"):
			return pRead, true
		case cmd == "download":
			return pWrite, true
		default:
			return pDeploy, true
		}
	case "secret", "variable", "ssh-key", "gpg-key":
		return pSecrets, true
	case "auth":
		if cmd == "status" {
			return pRead, true
		}
		return pSecrets, true
	case "api":
		return pDeploy | pSecrets, true
	case "search", "status", "browse", "org":
		return pRead, true
	case "label", "gist":
		if read("list", "view") {
			return pRead, true
		}
		return pPush, true
	case "cache":
		if cmd == "list" {
			return pRead, true
		}
		return pCI, true
	case "extension", "alias":
		return pExec, true
	case "codespace", "project", "ruleset", "attestation":
		return pAdmin, true
	}
	return 0, false
}

func ghHandler(c *checker, inv *invocation) cwds {
	group, cmd := "", ""
	if len(inv.sub) > 0 {
		group = inv.sub[0]
	}
	if len(inv.sub) > 1 {
		cmd = inv.sub[1]
	}
	need, ok := ghNeeds(group, cmd)
	if !ok {
		if !inv.allowed {
			c.denyf("gh:unknown", "command %q is not allowed: it is not a gh command the policy knows", strings.TrimSpace("gh "+group+" "+cmd))
		}
		return inv.cwd
	}
	c.need(inv, need|pNetwork)
	return inv.cwd
}
