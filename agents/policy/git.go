package policy

import (
	"path"
	"slices"
	"strings"
)

// gitGlobals are git's options before the subcommand.
type gitGlobals struct {
	dirs     []word // -C
	gitDir   []word // --git-dir
	workTree []word // --work-tree
	configs  []word // -c KEY=VALUE
	// configEnv are --config-env KEY=ENVVAR: git configuration from the
	// environment, which the policy cannot see.
	configEnv []word
	execPath  *word
	unknown   string
}

// safeGitConfig are configuration keys git -c may set for any profile:
// they change output and identity, never what runs.
func safeGitConfig(key string) bool {
	key = strings.ToLower(key)
	switch key {
	case "user.name", "user.email", "author.name", "author.email", "committer.name", "committer.email",
		"core.quotepath", "init.defaultbranch", "commit.gpgsign", "tag.gpgsign", "gc.auto", "gc.autodetach",
		"core.autocrlf", "core.safecrlf", "core.eol", "core.filemode", "core.ignorecase", "core.abbrev",
		"pull.rebase", "pull.ff", "merge.ff", "merge.conflictstyle", "diff.renames", "diff.noprefix",
		"diff.mnemonicprefix", "diff.algorithm", "diff.context", "diff.interhunkcontext", "diff.relative",
		"diff.indentheuristic", "diff.colormoved", "diff.submodule", "diff.statgraphwidth", "color.ui",
		"advice.detachedhead", "log.showsignature", "log.date", "log.decorate", "log.abbrevcommit", "log.follow",
		"log.showroot", "log.mailmap", "protocol.version", "push.default", "fetch.prune", "rebase.autosquash",
		"rebase.autostash", "rebase.updaterefs", "status.short", "status.branch", "status.showuntrackedfiles",
		"status.relativepaths", "grep.linenumber", "grep.patterntype", "grep.extendedregexp", "grep.column",
		"grep.fullname", "blame.date", "blame.coloring", "branch.sort", "tag.sort", "versionsort.suffix",
		"i18n.commitencoding", "i18n.logoutputencoding", "maintenance.auto", "core.pager", "pager.log",
		"pager.diff", "pager.show", "pager.branch", "pager.tag", "pager.status", "pager.grep", "pager.blame",
		"core.precomposeunicode", "core.checkstat", "core.trustctime", "merge.renames", "merge.renamelimit",
		"diff.renamelimit", "format.numbered", "core.commentchar", "core.commentstring", "feature.manyfiles",
		"index.threads", "pack.threads", "checkout.workers", "submodule.recurse", "fetch.recursesubmodules":
		return true
	}
	return strings.HasPrefix(key, "color.") || strings.HasPrefix(key, "advice.") ||
		strings.HasPrefix(key, "format.pretty") || strings.HasPrefix(key, "pretty.") || strings.HasPrefix(key, "column.")
}

// gitCommandKey reports a configuration key whose value is a command or a
// program git runs.
func gitCommandKey(key string) bool {
	key = strings.ToLower(key)
	switch key {
	case "core.pager", "core.editor", "sequence.editor", "core.sshcommand", "core.askpass", "core.gitproxy",
		"diff.external", "core.fsmonitor", "gpg.program", "credential.helper", "sendemail.smtpserver",
		"sendemail.sendmailcmd", "sendemail.tocmd", "sendemail.cccmd", "sendemail.headercmd",
		"uploadpack.packobjectshook", "interactive.difffilter", "core.alternaterefscommand", "imap.tunnel",
		"web.browser", "instaweb.httpd", "ssh.variant", "merge.tool", "diff.tool", "core.hookspath":
		return true
	}
	parts := strings.Split(key, ".")
	last := parts[len(parts)-1]
	switch parts[0] {
	case "pager", "alias":
		return true
	case "diff", "merge", "filter", "mergetool", "difftool", "browser", "man", "guitool", "trailer", "gpg",
		"credential", "remote", "submodule", "url":
		switch last {
		case "command", "textconv", "driver", "clean", "smudge", "process", "cmd", "path", "program", "helper",
			"uploadpack", "receivepack", "update", "proxy":
			return true
		}
	}
	return false
}

// gitConfigSetting checks one git configuration setting a command passes
// (git -c, git clone -c, GIT_CONFIG_*): a key that changes output is fine;
// one whose value git runs needs exec and the value is checked as the
// command it is; any other (hooks, includes, templates) needs exec and ci.
func (c *checker) gitConfigSetting(key string, val word, where string) bool {
	inv := c.invocation(invocation{name: "git", cwd: c.root[:1]})
	lower := strings.ToLower(key)
	isPager := lower == "core.pager" || strings.HasPrefix(lower, "pager.")
	if val.lit && isPager && (noopCommand(val.s) || strings.EqualFold(val.s, "false")) {
		return true
	}
	if safeGitConfig(key) && !isPager && (lower != "commit.gpgsign" && lower != "tag.gpgsign" || !val.lit || val.s != "true") {
		return true
	}
	if !gitCommandKey(key) {
		return c.needBecause(inv, pExec|pCI, where+" sets git configuration "+key+", which can change what git runs")
	}
	if strings.HasPrefix(lower, "alias.") && val.lit && !strings.HasPrefix(val.s, "!") {
		// An alias for other git arguments: the command it expands to is
		// checked where it is used.
		if strings.ContainsAny(val.s, "$`\"'") {
			c.denyf("shell:dynamic-command", "%s sets %s to %q, which the policy does not expand", where, key, val.s)
			return false
		}
		return true
	}
	if !c.needBecause(inv, pExec, where+" sets git configuration "+key+", whose value git runs") {
		return false
	}
	switch {
	case !val.lit:
		c.denyf("shell:dynamic-script", "%s sets %s to %s, which git runs and which is not a literal", where, key, val.source())
		return false
	case strings.HasPrefix(lower, "alias."):
		if v, ok := strings.CutPrefix(val.s, "!"); ok {
			c.commandValue(inv, where+" "+key, litWord(v))
		}
	case lower == "core.hookspath":
		return c.needBecause(inv, pCI, where+" sets core.hooksPath, which chooses the hooks git runs")
	case lower == "credential.helper" || strings.HasSuffix(lower, ".helper"):
		v := strings.TrimPrefix(val.s, "!")
		if !strings.HasPrefix(val.s, "!") && !strings.HasPrefix(val.s, "/") && val.s != "" {
			v = "git credential-" + val.s
		}
		if !c.needBecause(inv, pSecrets, where+" sets a credential helper") {
			return false
		}
		c.commandValue(inv, where+" "+key, litWord(v))
	case lower == "core.fsmonitor" && (val.s == "true" || val.s == "false" || val.s == ""):
	case lower == "ssh.variant" || lower == "merge.tool" || lower == "diff.tool":
	case strings.HasSuffix(lower, ".url") || strings.HasSuffix(lower, ".proxy"):
	default:
		c.commandValue(inv, where+" "+key, val)
	}
	return c.deny == nil
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
				g.configs = append(g.configs, v)
			}
		case "--config-env":
			if v, ok := next(); ok {
				g.configEnv = append(g.configEnv, v)
			}
		case "--git-dir":
			if v, ok := next(); ok {
				g.gitDir = append(g.gitDir, v)
			}
		case "--work-tree":
			if v, ok := next(); ok {
				g.workTree = append(g.workTree, v)
			}
		case "--namespace", "--super-prefix", "--list-cmds", "--attr-source":
			next()
		case "--exec-path":
			if hasVal {
				v := litWord(val)
				g.execPath = &v
			}
		case "-p", "--paginate", "-P", "--no-pager", "--bare", "--no-replace-objects", "--literal-pathspecs",
			"--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs", "--no-optional-locks", "--html-path",
			"--man-path", "--info-path", "--version", "--help", "-v", "-h", "--no-lazy-fetch", "--no-advice":
		default:
			if g.unknown == "" {
				g.unknown = w.s
			}
		}
	}
	return g, args[i:]
}

// gitDirConfig checks, for a profile with command rules, the configuration
// of a repository git is pointed at with --git-dir or GIT_DIR: the
// commands it sets (diff.external, core.pager, an alias) run as git's, and
// the workspace may hold such a repository with any config in it. It is
// scanned as code the policy does not parse.
func (c *checker) gitDirConfig(d word, cwd cwds) {
	if len(c.p.denyCmds) == 0 && len(c.p.approvalCmds) == 0 || !d.lit || c.deny != nil {
		return
	}
	cfg := litWord(strings.TrimRight(d.s, "/") + "/config")
	switch prog := c.fileText(cfg, cwd); prog.kind {
	case progText:
		c.scanCode(prog.text, langCode, cwd)
	case progHidden:
		c.denyf("shell:git-config", "git with the repository %s is not allowed: its config is %s, and may set commands the rules of profile %q would refuse", d.source(), prog.text, c.p.Name)
	default:
		for _, dir := range cwd {
			if _, exists := c.stats.lstat(c.resolve(dir, cfg.s).abs); exists {
				c.denyf("shell:git-config", "git with the repository %s is not allowed: the policy cannot read its config, which may set commands the rules of profile %q would refuse", d.source(), c.p.Name)
				return
			}
		}
	}
}

// gitCanonical is the subcommand git's other name for a command stands
// for: its old names, and send-pack, the plumbing under git push, which
// the rules for git push must catch too.
func gitCanonical(sub string) string {
	switch sub {
	case "init-db":
		return "init"
	case "stage":
		return "add"
	case "fsck-objects":
		return "fsck"
	case "pickaxe":
		return "blame"
	case "send-pack":
		return "push"
	}
	return sub
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
		"fsck", "show-branch", "get-tar-commit-id", "column", "stripspace", "interpret-trailers", "patch-id",
		"verify-pack", "show-index", "fast-export", "merge-tree", "name-hash", "bugreport", "diagnose":
		return gitRead
	case "add", "commit", "checkout", "switch", "restore", "reset", "rm", "mv", "merge", "rebase", "cherry-pick",
		"revert", "apply", "am", "clean", "init", "gc", "prune", "repack", "pack-refs", "update-index",
		"update-ref", "symbolic-ref", "replace", "format-patch", "archive", "bundle", "commit-tree",
		"hash-object", "read-tree", "write-tree", "checkout-index", "sparse-checkout", "maintenance", "mktag",
		"mktree", "merge-file", "rerere", "tag", "branch", "stash", "worktree", "notes", "reflog", "config",
		"remote", "bisect", "mergetool", "difftool", "filter-branch", "fast-import", "hook", "submodule",
		"mailinfo", "mailsplit", "prune-packed", "multi-pack-index", "commit-graph", "index-pack", "pack-objects",
		"unpack-objects", "merge-index", "merge-one-file", "update-server-info", "backfill", "replay",
		"merge-octopus", "merge-ours", "merge-recursive", "merge-recursive-ours", "merge-recursive-theirs",
		"merge-resolve", "merge-subtree", "unpack-file":
		return gitWrite
	case "fetch", "pull", "clone", "ls-remote", "push", "lfs", "fetch-pack":
		return gitNetRead
	}
	return gitUnknown
}

// gitHandler checks git: its global options (-C follows the directory, -c
// is configuration checked as gitConfigSetting says), then the subcommand
// with its options known exactly.
func gitHandler() handler {
	readTables := map[string]*optTable{}
	for sub, spec := range gitReadOpts() {
		spec.strict, spec.negate = true, true
		readTables[sub] = spec.compile()
	}
	writeTables := map[string]*optTable{}
	for sub, spec := range gitWriteOpts() {
		spec.strict, spec.negate = true, true
		writeTables[sub] = spec.compile()
	}
	// Subcommands without a table of their own: their options are parsed
	// for values only, and need no more than the subcommand does.
	loose := optSpec{short: "mFCcSnAtboeXsBULOIxupv", long: []string{"--message", "--file", "--reuse-message",
		"--author", "--date", "--template", "--output", "--output-directory", "--exec", "--strategy",
		"--strategy-option", "--onto", "--format", "--pretty", "--since", "--until", "--grep", "--depth", "--branch",
		"--origin", "--reference", "--separate-git-dir", "--upload-pack", "--receive-pack", "--config",
		"--push-option", "--remote", "--prefix", "--shallow-since", "--jobs", "--set-upstream-to", "--contains",
		"--merged", "--no-merged", "--points-at", "--sort", "--abbrev", "--dst-prefix", "--src-prefix",
		"--fixup", "--squash", "--cleanup", "--pathspec-from-file", "--filter", "--shallow-exclude",
		"--server-option", "--recurse-submodules", "--export-marks", "--import-marks", "--index-filter",
		"--tree-filter", "--msg-filter", "--env-filter", "--commit-filter", "--parent-filter", "--tag-name-filter",
		"--subdirectory-filter", "--setup", "--original", "--state-branch", "--extcmd", "--tool", "--reason",
		"--expire", "--bundle-uri", "--object-format", "--ref-format", "--shared", "--access-hook", "--base-path",
		"--interpolated-path", "--listen", "--port", "--user", "--group", "--pid-file", "--sendmail-cmd",
		"--smtp-server", "--to-cmd", "--cc-cmd", "--header-cmd", "--to", "--cc"}}.compile()
	var h handler
	h = func(c *checker, inv *invocation) cwds {
		g, rest := gitGlobal(inv.argv[1:])
		if g.unknown != "" && !c.needBecause(inv, pExec, "global option "+g.unknown+" is not one the policy knows for git") {
			return inv.cwd
		}
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
			if d.lit && path.Base(strings.TrimRight(d.s, "/")) != ".git" && !strings.HasSuffix(d.s, "/.git/") {
				if !c.needBecause(inv, pExec, "--git-dir makes git read configuration from another repository, which can run programs") {
					return inv.cwd
				}
				c.gitDirConfig(d, cwd)
				if c.deny != nil {
					return inv.cwd
				}
			}
		}
		for _, d := range g.workTree {
			c.usePath(inv, d, pathUse{acc: accRead})
		}
		aliases := map[string]string{}
		for _, cf := range g.configs {
			if !cf.lit {
				c.denyf("shell:dynamic-script", "git -c %s is not allowed: the configuration is not a literal", cf.source())
				return inv.cwd
			}
			key, val, _ := strings.Cut(cf.s, "=")
			if !c.gitConfigSetting(key, litWord(val), "git -c") {
				return inv.cwd
			}
			if name, ok := strings.CutPrefix(strings.ToLower(key), "alias."); ok {
				aliases[name] = val
			}
		}
		for _, cf := range g.configEnv {
			if !cf.lit {
				c.denyf("shell:dynamic-script", "git --config-env %s is not allowed: the configuration is not a literal", cf.source())
				return inv.cwd
			}
			key, env, _ := strings.Cut(cf.s, "=")
			if !c.gitConfigSetting(key, dynWord("an environment variable", "the value of $"+env), "git --config-env") {
				return inv.cwd
			}
		}
		if g.execPath != nil {
			c.usePath(inv, *g.execPath, pathUse{acc: accRead})
			if !c.needBecause(inv, pExec, "--exec-path makes git run its programs from another directory") {
				return inv.cwd
			}
		}
		if len(rest) == 0 {
			c.need(inv, pRead)
			return inv.cwd
		}
		if !rest[0].lit {
			c.denyf("shell:dynamic-command", "git subcommand %s is not a literal (it contains %s)", rest[0].source(), rest[0].dyn)
			return inv.cwd
		}
		if rest[0].glob {
			c.denyf("shell:dynamic-command", "git subcommand %s is a glob pattern; the policy cannot see which subcommand it names", rest[0].source())
			return inv.cwd
		}
		sub := gitCanonical(rest[0].s)
		if a, ok := aliases[sub]; ok && !strings.HasPrefix(a, "!") {
			// An alias for other git arguments: check what it expands to.
			words := []word{inv.argv[0]}
			for _, f := range strings.Fields(a) {
				words = append(words, litWord(f))
			}
			words = append(words, rest[1:]...)
			next := c.invocation(invocation{name: "git", argv: words, cwd: cwd})
			next.sub = subcommands(next.subBuf[:0], "git", words[1:])
			c.rules(next)
			if c.deny != nil {
				return inv.cwd
			}
			return h(c, next)
		} else if ok {
			return inv.cwd
		}
		args := rest[1:]
		if t, ok := readTables[sub]; ok && gitSubclass(sub) == gitRead {
			return gitReadSub(c, inv, sub, args, t)
		}
		if len(args) > 0 && args[0].lit && (sub == "stash" || sub == "reflog") && (args[0].s == "list" || args[0].s == "show") {
			// Listing forms take log's options.
			return gitReadSub(c, inv, sub, args[1:], readTables["log"])
		}
		t := writeTables[sub]
		if t == nil {
			t = loose
		}
		opts, pos := parseOpts(args, t)
		if t != loose && !c.strictOpts(inv, t, opts) {
			return inv.cwd
		}
		return gitOther(c, inv, sub, opts, pos)
	}
	return h
}

// gitReadSub checks a subcommand that reads the repository: its options are
// known exactly; --output writes, -O of grep runs a pager, --ext-diff and
// --textconv run configured programs, and a few options read files.
func gitReadSub(c *checker, inv *invocation, sub string, args []word, t *optTable) cwds {
	opts, pos := parseOpts(args, t)
	if !c.strictOpts(inv, t, opts) {
		return inv.cwd
	}
	for _, o := range opts {
		switch o.name {
		case "-O", "--open-files-in-pager":
			if sub == "grep" {
				if o.val != nil && noopCommand(o.val.s) {
					continue
				}
				if o.val == nil {
					c.needBecause(inv, pExec, "-O runs a pager on the files found")
				} else {
					c.optionCommand(inv, o)
				}
			}
		case "--ext-diff", "--textconv", "--filters":
			c.needBecause(inv, pExec, o.name+" runs the programs configured for it")
		case "--output", "--output-directory":
			if !c.needBecause(inv, pWrite, o.name+" writes a file") {
				return inv.cwd
			}
		case "--no-index":
			if sub == "grep" || sub == "diff" {
				continue
			}
		}
		if c.deny != nil {
			return inv.cwd
		}
	}
	if !c.need(inv, pRead) {
		return inv.cwd
	}
	noIndex := hasOpt(opts, "--no-index")
	for _, o := range opts {
		if o.val == nil {
			continue
		}
		switch {
		case o.name == "--output" || o.name == "--output-directory":
			c.usePath(inv, *o.val, pathUse{acc: accWrite})
		case o.name == "-f" && sub == "grep", o.name == "--file" && sub == "grep", o.name == "-O" && sub != "grep",
			o.name == "--orderfile", o.name == "--contents", o.name == "--ignore-revs-file", o.name == "-S" && sub == "blame",
			o.name == "--exclude-from", o.name == "-X" && sub == "ls-files":
			c.usePath(inv, *o.val, pathUse{acc: accRead})
		case o.val.lit && looksLikePath(o.val.s):
			c.usePath(inv, *o.val, pathUse{acc: accRead})
		}
		if c.deny != nil {
			return inv.cwd
		}
	}
	switch sub {
	case "grep":
		if !hasOpt(opts, "-e", "-f", "--regexp", "--file") && len(pos) > 0 {
			pos = pos[1:]
		}
		if noIndex {
			for _, w := range pos {
				c.usePath(inv, w, pathUse{acc: accRead, tree: true, follow: true})
			}
			if len(pos) == 0 {
				c.usePath(inv, litWord("."), pathUse{acc: accRead, tree: true, follow: true})
			}
			return inv.cwd
		}
	case "diff":
		if noIndex {
			for _, w := range pos {
				c.usePath(inv, w, pathUse{acc: accRead, tree: true, follow: true})
			}
			return inv.cwd
		}
	case "branch", "tag":
		if !gitListing(sub, opts, pos) {
			return gitOther(c, inv, sub, opts, pos)
		}
	case "config":
		return gitConfig(c, inv, opts, pos)
	}
	gitPathArgs(c, inv, pos, accRead)
	return inv.cwd
}

// gitListing reports git branch or git tag used to list.
func gitListing(sub string, opts []opt, pos []word) bool {
	switch sub {
	case "branch":
		return len(pos) == 0 || hasOpt(opts, "-l", "--list", "--contains", "--merged", "--no-merged", "--points-at")
	case "tag":
		return len(pos) == 0 || hasOpt(opts, "-l", "--list", "-v", "--verify", "--contains", "--points-at")
	}
	return false
}

// gitPathArgs checks git operands that look like paths. Operands are
// mostly revisions and pathspecs inside the repository, which git itself
// refuses to take outside it.
func gitPathArgs(c *checker, inv *invocation, pos []word, acc access) {
	for _, w := range pos {
		switch {
		case acc == accWrite && w.lit:
			c.usePath(inv, w, pathUse{acc: acc})
		case w.lit && looksLikePath(w.s):
			c.usePath(inv, w, pathUse{acc: acc})
		}
	}
}

// gitStrategy checks a merge strategy: one git does not build in is a
// git-merge-<name> program.
func gitStrategy(c *checker, inv *invocation, opts []opt) bool {
	if v, ok := optVal(opts, "-s", "--strategy"); ok {
		switch v.s {
		case "ort", "recursive", "resolve", "octopus", "ours", "subtree":
		default:
			return c.needBecause(inv, pExec, "merge strategy "+v.source()+" is a program git runs")
		}
	}
	return true
}

// rawAfter returns the arguments of inv that follow pos[0] as written:
// the command git bisect run and git submodule foreach run, whose options
// are its own, not git's.
func rawAfter(inv *invocation, pos []word) []word {
	w := pos[0]
	for i, a := range inv.argv {
		if a.node == w.node && a.s == w.s && a.lit == w.lit {
			return inv.argv[i+1:]
		}
	}
	return pos[1:]
}

// gitOther checks the subcommands that change things, reach the network or
// run programs.
func gitOther(c *checker, inv *invocation, sub string, opts []opt, pos []word) cwds {
	first := ""
	if len(pos) > 0 && pos[0].lit {
		first = pos[0].s
	}
	switch sub {
	case "push":
		return gitPush(c, inv, opts, pos)
	case "clone":
		return gitClone(c, inv, opts, pos)
	case "config":
		return gitConfig(c, inv, opts, pos)
	case "rebase":
		if !gitStrategy(c, inv, opts) || !c.need(inv, pWrite) {
			return inv.cwd
		}
		for _, o := range opts {
			if (o.name == "-x" || o.name == "--exec") && o.val != nil {
				c.shellString(inv, *o.val)
				if c.deny != nil {
					return inv.cwd
				}
			}
		}
		if hasOpt(opts, "-i", "--interactive") {
			c.needBecause(inv, pExec, "an interactive rebase runs an editor")
		}
		return inv.cwd
	case "merge", "cherry-pick", "revert", "pull":
		if !gitStrategy(c, inv, opts) {
			return inv.cwd
		}
	case "bisect":
		if first == "run" {
			if !c.need(inv, pWrite) || len(pos) < 2 {
				return inv.cwd
			}
			return c.runExternal(rawAfter(inv, pos), inv.cwd)
		}
		if first == "visualize" || first == "view" {
			c.needBecause(inv, pExec, "git bisect visualize runs gitk or a pager")
			return inv.cwd
		}
		if first == "replay" && len(pos) > 1 {
			c.usePath(inv, pos[1], pathUse{acc: accRead})
		}
	case "submodule":
		switch first {
		case "status", "summary", "":
			c.need(inv, pRead)
			return inv.cwd
		case "foreach":
			if !c.need(inv, pWrite) {
				return inv.cwd
			}
			rest := rawAfter(inv, pos)
			for len(rest) > 0 && rest[0].lit && (rest[0].s == "--recursive" || rest[0].s == "-q" || rest[0].s == "--quiet") {
				rest = rest[1:]
			}
			return c.joinedScript(inv, rest, false)
		}
		c.need(inv, pWrite|pNetwork)
		return inv.cwd
	case "filter-branch":
		if !c.needBecause(inv, pWrite|pExec, "it runs its filters on every commit") {
			return inv.cwd
		}
		for _, o := range opts {
			switch o.name {
			case "--tree-filter", "--index-filter", "--msg-filter", "--env-filter", "--commit-filter",
				"--parent-filter", "--tag-name-filter", "--setup":
				if o.val != nil {
					c.shellString(inv, *o.val)
				}
			case "-d":
				if o.val != nil {
					c.usePath(inv, *o.val, pathUse{acc: accWrite, tree: true})
				}
			}
			if c.deny != nil {
				return inv.cwd
			}
		}
		return inv.cwd
	case "difftool", "mergetool":
		if !c.needBecause(inv, pWrite|pExec, "it runs a diff or merge tool") {
			return inv.cwd
		}
		for _, o := range opts {
			if (o.name == "-x" || o.name == "--extcmd") && o.val != nil {
				c.commandValue(inv, o.name, *o.val)
			}
		}
		return inv.cwd
	case "hook":
		c.needBecause(inv, pWrite|pExec, "it runs a hook")
		return inv.cwd
	case "for-each-repo":
		c.denyf("git:for-each-repo", "git for-each-repo is not allowed: it runs git in the repositories its configuration lists, which the policy cannot see")
		return inv.cwd
	case "credential", "credential-store", "credential-cache":
		c.need(inv, pSecrets)
		return inv.cwd
	case "remote":
		return gitRemote(c, inv, pos)
	case "archive":
		for _, o := range opts {
			switch o.name {
			case "--remote":
				if !c.need(inv, pNetwork) {
					return inv.cwd
				}
			case "--exec":
				c.optionCommand(inv, o)
			case "--add-file":
				if o.val != nil {
					c.usePath(inv, *o.val, pathUse{acc: accRead})
				}
			case "-o", "--output":
				if o.val != nil {
					c.need(inv, pWrite)
					c.usePath(inv, *o.val, pathUse{acc: accWrite})
				}
			}
			if c.deny != nil {
				return inv.cwd
			}
		}
		c.need(inv, pRead)
		return inv.cwd
	case "daemon", "instaweb", "web--browse", "send-email", "imap-send", "request-pull", "p4", "svn", "cvsimport",
		"cvsserver", "cvsexportcommit", "archimport", "quiltimport", "http-backend", "http-fetch", "http-push",
		"upload-pack", "receive-pack", "upload-archive", "shell", "remote-ext", "remote-fd", "remote-http",
		"remote-https", "remote-ftp", "remote-ftps":
		if !c.needBecause(inv, pExec|pNetwork, "git "+sub+" serves or reaches the network and runs programs") {
			return inv.cwd
		}
		for _, o := range opts {
			switch o.name {
			case "--access-hook", "--sendmail-cmd", "--to-cmd", "--cc-cmd", "--header-cmd":
				c.optionCommand(inv, o)
			}
			if c.deny != nil {
				return inv.cwd
			}
		}
		return inv.cwd
	case "init":
		if hasOpt(opts, "--template") && !c.needBecause(inv, pExec|pCI, "--template copies hooks into the new repository") ||
			hasOpt(opts, "--separate-git-dir") && !c.needBecause(inv, pExec|pCI, "--separate-git-dir puts the repository, its hooks and configuration, where it names") {
			return inv.cwd
		}
		c.separateGitDir(inv, opts)
	case "apply", "am":
		if hasOpt(opts, "--unsafe-paths") {
			c.denyf("git:unsafe-paths", "git %s --unsafe-paths is not allowed: it lets a patch write outside the work tree, where the policy cannot check", sub)
			return inv.cwd
		}
	case "maintenance":
		switch first {
		case "start", "stop", "register", "unregister":
			c.needBecause(inv, pAdmin|pCI, "git maintenance "+first+" changes the user's configuration and schedules")
			return inv.cwd
		}
	case "checkout-index":
		for _, o := range opts {
			if o.name == "--prefix" && o.val != nil {
				c.usePath(inv, *o.val, pathUse{acc: accWrite, tree: true})
			}
		}
	case "fast-import", "fast-export":
		for _, o := range opts {
			if o.val == nil {
				continue
			}
			switch o.name {
			case "--export-marks", "--export-pack-edges":
				c.need(inv, pWrite)
				c.usePath(inv, *o.val, pathUse{acc: accWrite})
			case "--import-marks", "--import-marks-if-exists":
				c.usePath(inv, *o.val, pathUse{acc: accRead})
			}
		}
		if sub == "fast-export" {
			c.need(inv, pRead)
			return inv.cwd
		}
	case "bugreport", "diagnose":
		// Both write their report into -o's directory, the current one by
		// default.
		if !c.needBecause(inv, pWrite, "git "+sub+" writes a report file") {
			return inv.cwd
		}
		dir := litWord(".")
		for _, o := range opts {
			if (o.name == "-o" || o.name == "--output-directory") && o.val != nil {
				dir = *o.val
			}
		}
		c.usePath(inv, dir, pathUse{acc: accWrite})
		return inv.cwd
	case "merge-tree":
		// Unless asked for the trivial merge of three trees, merge-tree
		// writes the merged trees into the object database.
		if !hasOpt(opts, "--trivial-merge") && len(pos) != 3 && !c.needBecause(inv, pWrite, "git merge-tree writes the merged tree into the repository") {
			return inv.cwd
		}
	case "help":
		if hasOpt(opts, "-w", "--web", "-i", "--info", "-m", "--man") {
			c.needBecause(inv, pExec, "it runs a browser, info or man")
			return inv.cwd
		}
	}

	class := gitSubclass(sub)
	if sub == "ls-remote" && hasOpt(opts, "--get-url") {
		class = gitRead
	}
	if class == gitWrite && readOnlyForm(sub, opts, pos) {
		class = gitRead
	}
	switch class {
	case gitRead:
		if !c.need(inv, pRead) {
			return inv.cwd
		}
		gitPathArgs(c, inv, pos, accRead)
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
		case "rm", "mv", "restore", "checkout", "clean", "checkout-index", "mailinfo", "bundle":
			acc = accWrite
		case "worktree":
			if first == "add" || first == "move" {
				acc = accWrite
			}
		}
		gitPathArgs(c, inv, pos, acc)
		for _, o := range opts {
			if o.val == nil {
				continue
			}
			switch o.name {
			case "-o", "--output", "--output-directory", "--build-fake-ancestor", "--directory":
				c.usePath(inv, *o.val, pathUse{acc: accWrite})
			case "-F", "--file", "--template", "--pathspec-from-file", "--signature-file", "--reuse-message":
				if o.name == "--reuse-message" {
					continue
				}
				c.usePath(inv, *o.val, pathUse{acc: accRead})
			}
		}
	case gitNetRead:
		if c.need(inv, pWrite|pNetwork) {
			gitPathArgs(c, inv, pos, accRead)
		}
		for _, o := range opts {
			if o.name == "--upload-pack" || o.name == "-u" && sub != "pull" {
				c.optionCommand(inv, o)
			}
		}
		c.ruleScanWords(pos)
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
	case "remote":
		return first == "" || first == "-v" || first == "get-url"
	}
	return false
}

// gitConfig checks git config: reading is fine; writing changes
// .git/config (needs ci); -f names the file; --includes follows include
// paths inside it; --edit runs an editor.
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
	if hasOpt(opts, "-e", "--edit") && !c.needBecause(inv, pExec, "git config --edit runs an editor") {
		return inv.cwd
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
	file := false
	for _, o := range opts {
		if (o.name == "--file" || o.name == "-f") && o.val != nil {
			file = true
			acc := accRead
			if !read {
				acc = accWrite
			}
			c.usePath(inv, *o.val, pathUse{acc: acc})
		}
	}
	if file && hasOpt(opts, "--includes") && !c.needBecause(inv, pExec, "--includes follows include paths the file names, which the policy cannot check") {
		return inv.cwd
	}
	if !read && len(pos) >= 2 && pos[0].lit {
		// git config KEY VALUE, git config set KEY VALUE: a setting that
		// runs a program is checked as the program.
		key, val := pos[0], pos[1]
		if key.s == "set" && len(pos) >= 3 {
			key, val = pos[1], pos[2]
		}
		if gitCommandKey(key.s) {
			c.commandValue(inv, "sets "+key.s+" to", val)
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
	case "show":
		// Without a name it lists the remotes; with -n it shows what
		// the configuration says without asking the remote.
		if len(pos) == 1 || hasWord(rawAfter(inv, pos), "-n") {
			c.need(inv, pRead)
			return inv.cwd
		}
		c.need(inv, pNetwork|pWrite)
	case "update", "prune":
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

// separateGitDir checks the directory git init and git clone put the
// repository in with --separate-git-dir as a tree written.
func (c *checker) separateGitDir(inv *invocation, opts []opt) {
	for _, o := range opts {
		if o.name == "--separate-git-dir" && o.val != nil && c.deny == nil {
			c.usePath(inv, *o.val, pathUse{acc: accWrite, tree: true})
		}
	}
}

func gitClone(c *checker, inv *invocation, opts []opt, pos []word) cwds {
	need := pNetwork | pWrite
	if hasOpt(opts, "--template", "--separate-git-dir") {
		need |= pExec | pCI
	}
	if len(pos) > 0 && pos[0].lit && strings.HasPrefix(pos[0].s, "ext::") {
		need |= pExec
	}
	if !c.need(inv, need) {
		return inv.cwd
	}
	c.separateGitDir(inv, opts)
	for _, o := range opts {
		switch o.name {
		case "--upload-pack", "-u":
			c.optionCommand(inv, o)
		case "--config", "-c":
			if o.val != nil {
				key, val, _ := strings.Cut(o.val.s, "=")
				if !o.val.lit {
					c.denyf("shell:dynamic-script", "git clone -c %s is not allowed: the configuration is not a literal", o.val.source())
				} else {
					c.gitConfigSetting(key, litWord(val), "git clone -c")
				}
			}
		case "--reference", "--reference-if-able":
			if o.val != nil {
				c.usePath(inv, *o.val, pathUse{acc: accRead, tree: true})
			}
		}
		if c.deny != nil {
			return inv.cwd
		}
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
	for _, o := range opts {
		if o.name == "--receive-pack" || o.name == "--exec" {
			c.optionCommand(inv, o)
			if c.deny != nil {
				return inv.cwd
			}
		}
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
