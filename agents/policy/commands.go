package policy

import (
	"encoding/json"
	"maps"
	"path"
	"slices"
	"strings"
)

// handler checks one command and returns the directories the script may be
// in after it succeeded (only cd and its kin change them).
type handler func(c *checker, inv *invocation) cwds

// subcommands appends to dst, an empty buffer, the words rules match after
// the command name: the first three operands, or for git and gh their
// first two subcommands.
func subcommands(dst []string, name string, args []word) []string {
	switch name {
	case "git":
		_, rest := gitGlobal(args)
		out := dst[:0]
		for _, w := range rest {
			if len(out) == 2 {
				break
			}
			if !w.lit || strings.HasPrefix(w.s, "-") {
				if len(out) == 0 {
					continue
				}
				break
			}
			if len(out) == 0 {
				out = append(out, gitCanonical(w.s))
				continue
			}
			out = append(out, w.s)
		}
		return out
	case "gh":
		dst = dst[:0]
		for i := 0; i < len(args); i++ {
			w := args[i]
			switch {
			case !w.lit || len(dst) == 2:
				return dst
			case w.s == "-R" || w.s == "--repo" || w.s == "--hostname":
				i++
			case strings.HasPrefix(w.s, "-"):
			default:
				dst = append(dst, w.s)
			}
		}
		return dst
	}
	// Options are skipped, "--" makes the rest operands, and the first
	// operand that is not literal ends the words.
	dst = dst[:0]
	for i, w := range args {
		switch {
		case w.lit && w.s == "--":
			return literalWords(dst, args[i+1:], 3)
		case w.lit && w.s != "-" && strings.HasPrefix(w.s, "-"):
			continue
		case len(dst) == 3 || !w.lit:
			return dst
		}
		dst = append(dst, w.s)
	}
	if name == "npm" && len(dst) > 0 {
		dst[0] = npmCanonical(dst[0])
	}
	return dst
}

// npmCommands are npm's commands, and npmAliases its other names for them,
// as npm 11 lists them (lib/utils/cmd-list.js).
var (
	npmCommands = []string{"access", "adduser", "approve-scripts", "audit", "bugs", "cache", "ci", "completion",
		"config", "dedupe", "deny-scripts", "deprecate", "diff", "dist-tag", "docs", "doctor", "edit", "exec",
		"explain", "explore", "find-dupes", "fund", "get", "help", "help-search", "init", "install",
		"install-ci-test", "install-scripts", "install-test", "link", "ll", "login", "logout", "ls", "org",
		"outdated", "owner", "pack", "ping", "pkg", "prefix", "profile", "prune", "publish", "query", "rebuild",
		"repo", "restart", "root", "run", "sbom", "search", "set", "shrinkwrap", "stage", "star", "stars", "start",
		"stop", "team", "test", "token", "trust", "undeprecate", "uninstall", "unpublish", "unstar", "update",
		"version", "view", "whoami"}
	npmAliases = map[string]string{"author": "owner", "home": "docs", "issues": "bugs", "info": "view",
		"show": "view", "find": "search", "add": "install", "unlink": "uninstall", "remove": "uninstall",
		"rm": "uninstall", "r": "uninstall", "un": "uninstall", "rb": "rebuild", "list": "ls", "ln": "link",
		"create": "init", "i": "install", "it": "install-test", "cit": "install-ci-test", "u": "update",
		"up": "update", "c": "config", "s": "search", "se": "search", "tst": "test", "t": "test", "ddp": "dedupe",
		"v": "view", "run-script": "run", "clean-install": "ci", "clean-install-test": "install-ci-test",
		"x": "exec", "why": "explain", "la": "ll", "verison": "version", "ic": "ci", "innit": "init",
		"in": "install", "ins": "install", "inst": "install", "insta": "install", "instal": "install",
		"isnt": "install", "isnta": "install", "isntal": "install", "isntall": "install", "install-clean": "ci",
		"isntall-clean": "ci", "hlep": "help", "dist-tags": "dist-tag", "upgrade": "update", "udpate": "update",
		"rum": "run", "sit": "install-ci-test", "urn": "run", "ogr": "org", "add-user": "adduser"}
)

// npmCanonical is the command npm runs for the word sub, as npm reads it:
// camelCase as dashes, a command, an alias, or a prefix of exactly one of
// them (npm pub is npm publish).
func npmCanonical(sub string) string {
	if strings.ContainsAny(sub, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
		var b strings.Builder
		for _, r := range sub {
			if r >= 'A' && r <= 'Z' {
				b.WriteByte('-')
				r += 'a' - 'A'
			}
			b.WriteRune(r)
		}
		sub = b.String()
	}
	if slices.Contains(npmCommands, sub) {
		return sub
	}
	if a, ok := npmAliases[sub]; ok {
		return a
	}
	found := ""
	for _, c := range npmCommands {
		if strings.HasPrefix(c, sub) {
			if found != "" {
				return sub
			}
			found = c
		}
	}
	for a := range npmAliases {
		if strings.HasPrefix(a, sub) {
			if found != "" {
				return sub
			}
			found = a
		}
	}
	if found == "" {
		return sub
	}
	for npmAliases[found] != "" {
		found = npmAliases[found]
	}
	return found
}

// literalWords appends to dst the values of ws until dst holds n or a word
// is not literal.
func literalWords(dst []string, ws []word, n int) []string {
	for _, w := range ws {
		if len(dst) == n || !w.lit {
			break
		}
		dst = append(dst, w.s)
	}
	return dst
}

// cmdSpec describes a command whose operands are paths.
type cmdSpec struct {
	need  perms
	opts  optSpec
	pos   posRole
	skip  int      // leading operands that are not paths (a mode, a pattern)
	write []string // options whose value is a path written
	read  []string // options whose value is a path read
	// exec are options that run another program, whose value is the
	// command; execFlags options that run programs the policy cannot see.
	exec      []string
	execFlags []string
	// lists are options whose value is a file listing paths to read,
	// which the policy cannot check.
	lists []string
	tree  []string // options that make every path a whole tree (-r)
	// follow are options that read trees through their links (-L);
	// alwaysTree reads every operand as a tree; followAlways reads trees
	// through their links unless noFollow says otherwise.
	follow       []string
	alwaysTree   bool
	followAlways bool
	noFollow     []string
	// writeIf are options that turn a reading command into a writing one
	// (gofmt -w).
	writeIf []string
	// dflt is the operand when there is none (tree and du read ".").
	dflt string
	// meta means the command changes only a path's metadata or removes
	// it (chmod, touch, rm), not what a program would read from it.
	meta bool
}

type posRole uint8

const (
	posRead      posRole = iota // operands are read
	posWrite                    // operands are written
	posNone                     // operands are not paths
	posLastWrite                // all but the last are read, the last written (cp)
	posAllWrite                 // every operand is written, the last as destination (mv)
)

func (s cmdSpec) handler() handler {
	t := s.opts.compile()
	return func(c *checker, inv *invocation) cwds {
		opts, pos := parseOpts(inv.argv[1:], t)
		if !c.strictOpts(inv, t, opts) {
			return inv.cwd
		}
		need := s.need
		writing := s.pos == posWrite || s.pos == posLastWrite || s.pos == posAllWrite || hasOpt(opts, s.writeIf...)
		if writing {
			need |= pWrite
		}
		for _, o := range opts {
			switch {
			case slices.Contains(s.write, o.name):
				need |= pWrite
			case slices.Contains(s.execFlags, o.name):
				if !c.needBecause(inv, pExec, "option "+o.name+" runs programs the policy cannot see") {
					return inv.cwd
				}
			case slices.Contains(s.lists, o.name):
				if !c.needBecause(inv, pExec, "option "+o.name+" reads the paths to use from a file, which the policy cannot check") {
					return inv.cwd
				}
			}
		}
		if !c.need(inv, need) {
			return inv.cwd
		}
		tree := s.alwaysTree || hasOpt(opts, s.tree...)
		follow := tree && (hasOpt(opts, s.follow...) || s.followAlways && !hasOpt(opts, s.noFollow...))
		for _, o := range opts {
			if o.val == nil {
				continue
			}
			switch {
			case slices.Contains(s.exec, o.name):
				c.optionCommand(inv, o)
			case slices.Contains(s.write, o.name):
				c.usePath(inv, *o.val, pathUse{acc: accWrite})
			case slices.Contains(s.read, o.name):
				c.usePath(inv, *o.val, pathUse{acc: accRead})
			case o.val.lit && looksLikePath(o.val.s):
				c.usePath(inv, *o.val, pathUse{acc: accRead})
			}
			if c.deny != nil {
				return inv.cwd
			}
		}
		if s.skip > 0 {
			pos = pos[min(s.skip, len(pos)):]
		}
		if len(pos) == 0 && s.dflt != "" {
			pos = []word{litWord(s.dflt)}
		}
		role := s.pos
		if role == posRead && hasOpt(opts, s.writeIf...) {
			role = posWrite
		}
		for i, w := range pos {
			switch {
			case role == posNone:
			case role == posRead:
				c.usePath(inv, w, pathUse{acc: accRead, tree: tree, follow: follow})
			case role == posWrite:
				c.usePath(inv, w, pathUse{acc: accWrite, tree: tree, meta: s.meta})
			case role == posLastWrite && i < len(pos)-1:
				c.usePath(inv, w, pathUse{acc: accRead, tree: tree})
			case role == posLastWrite:
				c.usePath(inv, w, pathUse{acc: accWrite, tree: tree})
			case role == posAllWrite:
				c.usePath(inv, w, pathUse{acc: accWrite, tree: true})
			}
		}
		return inv.cwd
	}
}

// optionCommand checks the command an option runs (sort
// --compress-program, tar --to-command, ssh -o ProxyCommand): it needs
// exec, and is checked as the command it is.
func (c *checker) optionCommand(inv *invocation, o opt) {
	if !c.needBecause(inv, pExec, "option "+o.name+" runs a program") || o.val == nil {
		return
	}
	c.commandValue(inv, o.name, *o.val)
}

// commandValue checks a command line a program runs, given as one word.
func (c *checker) commandValue(inv *invocation, what string, v word) {
	if !v.lit {
		c.denyf("shell:dynamic-script", "%s %s runs %s, which is not a literal (it contains %s); the policy cannot see what would run", inv.name, what, v.source(), v.dyn)
		return
	}
	if strings.TrimSpace(v.s) == "" {
		return
	}
	c.fedText(v.s, inv.cwd, inv.name)
}

// fedText checks a command line a program runs and feeds data on its
// standard input (a pager, a compression program, a filter): an
// interpreter there would run that data as a program.
func (c *checker) fedText(text string, cwd cwds, feeder string) {
	outer := c.stdin
	c.stdin = hidden("what " + feeder + " writes to it")
	c.nestedText(text, cwd)
	c.stdin = outer
}

// needOnly returns a handler for a command whose arguments are not paths
// and that needs bits.
func needOnly(bits perms) handler {
	return func(c *checker, inv *invocation) cwds {
		c.need(inv, bits)
		return inv.cwd
	}
}

// runsCode returns a handler for a program that runs code the policy
// cannot see (build tools, package managers, deployment tools): it needs
// exec and bits, its arguments that look like paths are checked, and the
// commands the profile's rules name are looked for in them (docker run …
// kubectl apply).
func runsCode(bits perms) handler {
	return func(c *checker, inv *invocation) cwds {
		if c.need(inv, pExec|bits) {
			c.pathLikeArgs(inv, inv.argv[1:])
			c.ruleScanWords(inv.argv[1:])
		}
		return inv.cwd
	}
}

func unknownCommand(c *checker, inv *invocation) cwds {
	if !inv.allowed && !c.perms.has(pExec) {
		c.denyf("permission:exec", "command %q is not allowed (it is not a known read-only command; running other programs needs the exec permission)", inv.name)
		return inv.cwd
	}
	c.used |= pExec
	c.pathLikeArgs(inv, inv.argv[1:])
	c.ruleScanWords(inv.argv[1:])
	return inv.cwd
}

func privileged(c *checker, inv *invocation) cwds {
	c.denyf("shell:privilege", "command %q is never allowed: it runs commands as another user", inv.name)
	return inv.cwd
}

// isBuiltin reports a shell builtin, which PATH does not change.
func isBuiltin(name string) bool {
	switch name {
	case "echo", "printf", "true", "false", ":", "pwd", "test", "[", "exit", "return", "break", "continue",
		"shift", "wait", "jobs", "type", "cd", "pushd", "popd", "dirs", "read", "mapfile", "readarray", "set",
		"unset", "export", "declare", "typeset", "local", "readonly", "let", "eval", "source", ".", "exec",
		"command", "builtin", "trap", "alias", "unalias", "hash", "enable", "fc", "history", "ulimit", "umask",
		"getopts", "times", "caller", "shopt", "bind", "complete", "compgen", "compopt", "disown", "bg", "fg",
		"kill", "help", "logout", "suspend":
		return true
	}
	return false
}

// newCommandTable returns the handler of every command the policy knows.
// A command it does not know runs other code as far as the policy can
// tell: it needs exec.
func newCommandTable() map[string]handler {
	t := map[string]handler{}
	reg := func(h handler, names ...string) {
		for _, n := range names {
			t[n] = h
		}
	}

	// Commands that only read their operands and can neither run programs
	// nor write: options the policy does not list are harmless.
	reg(cmdSpec{need: pRead}.handler(), "cat", "tac", "rev", "cmp", "comm", "tsort", "md5", "look", "lsattr", "unexpand",
		"expand", "zcat", "bzcat", "xzcat", "zstdcat", "lz4cat", "hexdump", "hd", "sum", "base32", "base64", "basenc",
		"readlink", "realpath", "shellcheck", "hadolint", "yamllint")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "cn", digits: true, long: []string{"--bytes", "--lines"}}}.handler(), "head")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "cns", shortOpt: "f", digits: true,
		long: []string{"--bytes", "--lines", "--max-unchanged-stats", "--pid", "--sleep-interval"}}}.handler(), "tail")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "bdfhilnsvw", long: []string{"--body-numbering", "--footer-numbering",
		"--header-numbering", "--join-blank-lines", "--line-increment", "--number-format", "--number-separator",
		"--number-width", "--section-delimiter", "--starting-line-number"}}}.handler(), "nl")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "ANjt", shortOpt: "Sw", long: []string{"--address-radix", "--endian",
		"--format", "--read-bytes", "--skip-bytes"}}}.handler(), "od")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "TUadefnstw", long: []string{"--bytes", "--unicode", "--encoding",
		"--radix", "--target", "--output-separator"}}}.handler(), "strings")
	reg(cmdSpec{need: pRead, opts: optSpec{long: []string{"--files0-from"}}, lists: []string{"--files0-from"}}.handler(), "wc")
	reg(cmdSpec{need: pRead, opts: optSpec{flags: "bctwz", long: []string{"--algorithm", "--length"}},
		lists: []string{"-c", "--check"}}.handler(), "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum",
		"sha512sum", "b2sum", "cksum", "shasum")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "Fefm", long: []string{"--exclude", "--exclude-quiet", "--files-from",
		"--magic-file", "--separator", "--parameter"}}, read: []string{"-m", "--magic-file"},
		lists: []string{"-f", "--files-from"}, writeIf: []string{"-C", "--compile"}}.handler(), "file")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "c", long: []string{"--format", "--printf", "--cached"}}}.handler(), "stat")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "BXdt", long: []string{"--block-size", "--exclude", "--exclude-from",
		"--files0-from", "--max-depth", "--threshold", "--time", "--time-style"}}, read: []string{"-X", "--exclude-from"},
		lists: []string{"--files0-from"}, alwaysTree: true, follow: []string{"-L", "--dereference"}, dflt: "."}.handler(), "du")
	reg(cmdSpec{need: pRead, opts: optSpec{long: []string{"--output-delimiter"}}}.handler(), "comm")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "12aejotv"}}.handler(), "join")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "d", long: []string{"--delimiters"}}}.handler(), "paste")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "w", long: []string{"--width"}}}.handler(), "fold")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "gpw", long: []string{"--goal", "--prefix", "--width"}}}.handler(), "fmt")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "EHNORTWcilnoprs", long: []string{"--output-separator", "--output-width",
		"--separator", "--table-columns", "--table-columns-limit", "--table-hide", "--table-name", "--table-noextreme",
		"--table-order", "--table-right", "--table-truncate", "--table-wrap", "--tree", "--tree-id", "--tree-parent"}}}.handler(), "column")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "bcdf", long: []string{"--bytes", "--characters", "--delimiter",
		"--fields", "--output-delimiter"}}}.handler(), "cut")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "DFhlowWN", long: []string{"--first-page", "--columns", "--date-format",
		"--header", "--length", "--number-lines", "--indent", "--sep-string", "--width", "--page-width"}}}.handler(), "pr")
	reg(cmdSpec{need: pRead, pos: posNone, opts: optSpec{long: []string{"--format", "--from", "--from-unit", "--to",
		"--to-unit", "--padding", "--field", "--header", "--round", "--suffix", "--grouping", "--invalid"}}}.handler(), "numfmt")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "ITpw", shortOpt: "F", long: []string{"--block-size", "--format", "--hide",
		"--ignore", "--indicator-style", "--quoting-style", "--sort", "--tabsize", "--time", "--time-style", "--width"},
		longOpt: []string{"--classify", "--color", "--hyperlink"}},
		tree: []string{"-R", "--recursive"}, follow: []string{"-L", "--dereference"}}.handler(), "ls", "dir", "vdir")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "DFISWXx", shortOpt: "CUcu", long: []string{"--GTYPE-group-format",
		"--LTYPE-line-format", "--exclude", "--exclude-from", "--from-file", "--horizon-lines", "--ifdef",
		"--ignore-matching-lines", "--label", "--line-format", "--palette", "--show-function-line", "--starting-file",
		"--tabsize", "--to-file", "--width", "--old-line-format", "--new-line-format", "--unchanged-line-format",
		"--old-group-format", "--new-group-format", "--changed-group-format", "--unchanged-group-format"},
		longOpt: []string{"--color", "--context", "--unified"}},
		read: []string{"--to-file", "--from-file", "-X", "--exclude-from"}, tree: []string{"-r", "--recursive"},
		followAlways: true, noFollow: []string{"--no-dereference"}}.handler(), "diff")
	reg(treeHandler(), "tree")
	reg(lessHandler(), "less", "more", "most")
	reg(manHandler(), "man")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "CSTckot", long: []string{"--batch-size", "--buffer-size", "--check",
		"--compress-program", "--field-separator", "--files0-from", "--key", "--output", "--parallel",
		"--random-source", "--sort", "--temporary-directory"},
		flags: "MRVbdfghimnrsuz", longFlags: []string{"--debug", "--dictionary-order", "--general-numeric-sort", "--help",
			"--human-numeric-sort", "--ignore-case", "--ignore-leading-blanks", "--ignore-nonprinting", "--merge",
			"--month-sort", "--numeric-sort", "--random-sort", "--reverse", "--stable", "--unique", "--version",
			"--version-sort", "--zero-terminated"}, strict: true},
		write: []string{"-o", "--output", "-T", "--temporary-directory"}, read: []string{"--random-source"},
		lists: []string{"--files0-from"}, exec: []string{"--compress-program"}}.handler(), "sort")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "IowW", long: []string{"--diff-program", "--ignore-matching-lines",
		"--output", "--tabsize", "--width"}, flags: "BEHWZabdilstv", longFlags: []string{"--expand-tabs", "--help",
		"--ignore-all-space", "--ignore-blank-lines", "--ignore-case", "--ignore-space-change", "--ignore-tab-expansion",
		"--ignore-trailing-space", "--left-column", "--minimal", "--speed-large-files", "--strip-trailing-cr",
		"--suppress-common-lines", "--text", "--version"}, strict: true},
		write: []string{"-o", "--output"}, exec: []string{"--diff-program"}}.handler(), "sdiff")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "L", long: []string{"--diff-program", "--label"}, flags: "3AETXaeimvx",
		longFlags: []string{"--easy-only", "--ed", "--help", "--initial-tab", "--merge", "--overlap-only", "--show-all",
			"--show-overlap", "--strip-trailing-cr", "--text", "--version"}, strict: true},
		exec: []string{"--diff-program"}}.handler(), "diff3")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "fot", long: []string{"--from-code", "--output", "--to-code"},
		flags: "Vcls", longFlags: []string{"--list", "--silent", "--verbose", "--help", "--usage", "--version"}, strict: true},
		write: []string{"-o", "--output"}}.handler(), "iconv")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "ino", long: []string{"--head-count", "--input-range", "--output",
		"--random-source"}, flags: "erz", longFlags: []string{"--echo", "--repeat", "--zero-terminated", "--help", "--version"},
		strict: true}, write: []string{"-o", "--output"}, read: []string{"--random-source"}}.handler(), "shuf")
	reg(goFmtHandler(), "gofmt", "goimports")
	reg(grepHandler(optSpec{short: "ABCDdefm", long: []string{"--after-context", "--before-context", "--binary-files",
		"--context", "--devices", "--directories", "--exclude", "--exclude-dir", "--exclude-from", "--file",
		"--group-separator", "--include", "--label", "--max-count", "--regexp"}, longOpt: []string{"--color", "--colour"},
		digits: true}, nil), "grep", "egrep", "fgrep", "zgrep")
	reg(grepHandler(optSpec{short: "efgtTmABCjMrEd", long: []string{"--regexp", "--file", "--glob", "--iglob",
		"--type", "--type-not", "--max-count", "--after-context", "--before-context", "--context", "--threads",
		"--max-columns", "--replace", "--encoding", "--max-depth", "--pre", "--pre-glob", "--type-add",
		"--ignore-file", "--sort", "--sortr", "--max-filesize", "--colors", "--color", "--path-separator",
		"--context-separator", "--field-context-separator", "--field-match-separator", "--dfa-size-limit",
		"--regex-size-limit", "--engine", "--hostname-bin", "--hyperlink-format", "--type-clear", "--generate"}},
		[]string{"--pre", "--hostname-bin"}), "rg")
	reg(grepHandler(optSpec{short: "GgmABC", long: []string{"--ignore", "--file-search-regex", "--max-count",
		"--after", "--before", "--context", "--pager", "--ignore-dir", "--type-add", "--type-set", "--ackrc",
		"--output", "--files-from", "--range-start", "--range-end"}}, []string{"--pager", "--ackrc", "--files-from", "--output"}), "ag", "ack")
	reg(jqHandler(), "jq", "gojq", "jaq")
	reg(yqHandler(), "yq")
	reg(sedHandler(), "sed", "gsed")
	reg(awkHandler(), "awk", "gawk", "mawk", "nawk")
	reg(findHandler(), "find")
	reg(inOutHandler(optSpec{short: "fsw", long: []string{"--skip-fields", "--skip-chars", "--check-chars"},
		longOpt: []string{"--group", "--all-repeated"}}), "uniq")
	reg(inOutHandler(optSpec{short: "cglnosC", long: []string{"-cols", "-len", "-seek", "-name"}}), "xxd")
	reg(tarHandler(), "tar", "bsdtar", "gtar")
	reg(unzipHandler(), "unzip")
	reg(zipHandler(), "zip")
	reg(compressHandler(optSpec{short: "S", flags: "0123456789LNVcdfhklnqrtv", long: []string{"--suffix", "--synchronous"},
		longFlags: []string{"--best", "--decompress", "--uncompress", "--fast", "--force", "--help", "--keep", "--license",
			"--list", "--name", "--no-name", "--quiet", "--recursive", "--rsyncable", "--stdout", "--to-stdout", "--test",
			"--verbose", "--version"}, strict: true}), "gzip", "gunzip", "pigz", "unpigz", "compress", "uncompress")
	reg(compressHandler(optSpec{flags: "0123456789LVcdfhkqstvz", longFlags: []string{"--best", "--fast", "--compress",
		"--decompress", "--force", "--keep", "--small", "--stdout", "--test", "--quiet", "--verbose", "--help",
		"--version", "--license"}, strict: true}), "bzip2", "bunzip2")
	reg(compressHandler(optSpec{short: "TFCM", flags: "0123456789HVcdefhklqtvz", long: []string{"--threads", "--format",
		"--check", "--memlimit", "--memory", "--block-size", "--block-list", "--suffix", "--filters",
		"--memlimit-compress", "--memlimit-decompress"}, longFlags: []string{"--compress", "--decompress",
		"--uncompress", "--extreme", "--force", "--help", "--keep", "--list", "--long-help", "--quiet", "--stdout",
		"--to-stdout", "--test", "--verbose", "--version", "--robot", "--no-sparse", "--single-stream", "--no-adjust",
		"--info-memory", "--ignore-check", "--flush-timeout", "--lzma1", "--lzma2", "--x86", "--delta"},
		longOpt: []string{"--lzma1", "--lzma2", "--delta"}, strict: true}), "xz", "unxz", "lzma", "unlzma")
	reg(compressHandler(optSpec{short: "BDMTbeio", flags: "0123456789HSVcdfhklqrvt", long: []string{"--auto-threads",
		"--dictID", "--filelist", "--format", "--maxdict", "--output-dir-flat", "--output-dir-mirror", "--patch-from",
		"--priority", "--size-hint", "--stream-size", "--target-compressed-block-size", "--trace", "--memory",
		"--threads"}, longOpt: []string{"--fast", "--long", "--train-cover", "--train-fastcover", "--train-legacy"},
		longFlags: []string{"--adapt", "--asyncio", "--check", "--compress-literals", "--decompress", "--uncompress",
			"--exclude-compressed", "--force", "--help", "--keep", "--no-dictID", "--pass-through", "--progress",
			"--quiet", "--rm", "--row-match-finder", "--rsyncable", "--single-thread", "--sparse", "--stdout", "--test",
			"--train", "--ultra", "--verbose", "--version", "--no-check", "--no-progress"}, strict: true}), "zstd", "unzstd")
	reg(compressHandler(optSpec{flags: "0123456789BDSVcdfhklmqrtvz", longFlags: []string{"--best", "--fast",
		"--decompress", "--uncompress", "--force", "--keep", "--rm", "--stdout", "--to-stdout", "--test", "--quiet",
		"--verbose", "--help", "--version", "--multiple", "--sparse", "--no-sparse", "--favor-decSpeed"},
		longOpt: []string{"--fast"}, strict: true}), "lz4", "unlz4")
	reg(cmdSpec{need: pWrite, opts: optSpec{short: "Cablnt", long: []string{"--additional-suffix", "--bytes", "--filter",
		"--line-bytes", "--lines", "--number", "--separator", "--suffix-length"},
		longOpt: []string{"--hex-suffixes", "--numeric-suffixes"}, flags: "deux",
		longFlags: []string{"--elide-empty-files", "--unbuffered", "--verbose", "--help", "--version"}, strict: true},
		exec: []string{"--filter"}}.handler(), "split")
	reg(cmdSpec{need: pWrite, pos: posNone, opts: optSpec{short: "fbn", long: []string{"--prefix", "--suffix-format",
		"--digits"}, flags: "ksz", longFlags: []string{"--keep-files", "--suppress-matched", "--quiet", "--silent",
		"--elide-empty-files", "--help", "--version"}, strict: true}, write: []string{"-f", "--prefix"}}.handler(), "csplit")
	reg(ddHandler, "dd")
	reg(dateHandler(), "date")
	reg(hostnameHandler(), "hostname")
	reg(actionlintHandler, "actionlint")

	// Commands whose arguments are not paths.
	reg(needOnly(pRead), "tr", "sleep", "yes", "seq", "expr", "basename", "dirname", "whoami", "id", "groups",
		"uname", "nproc", "arch", "getconf", "locale", "tty", "printenv", "logname", "users", "uptime", "which",
		"ps", "pgrep", "free", "df", "lsblk", "tput", "clear", "reset", "stty", "factor", "cal", "ncal", "w", "who",
		"last", "top", "htop", "vmstat", "iostat", "lscpu", "lsb_release", "numfmt")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "fs", flags: "hilqvw", longFlags: []string{"--mathlib", "--quiet",
		"--standard", "--warn", "--version", "--help", "--interactive", "--global-stacks"}, long: []string{"--expression", "--file"}},
		read: []string{"-f", "--file"}}.handler(), "bc")
	registerBuiltins(reg)

	// Commands that write their operands.
	reg(cmdSpec{pos: posWrite, meta: true, opts: optSpec{short: "drt", long: []string{"--date", "--reference", "--time"}},
		read: []string{"-r", "--reference"}}.handler(), "touch")
	reg(cmdSpec{pos: posWrite, meta: true, opts: optSpec{short: "m", long: []string{"--mode"}, longOpt: []string{"--context"}}}.handler(), "mkdir")
	reg(cmdSpec{pos: posWrite, meta: true}.handler(), "rmdir")
	reg(cmdSpec{pos: posWrite, meta: true, opts: optSpec{longOpt: []string{"--interactive", "--preserve-root"}},
		tree: []string{"-r", "-R", "--recursive"}}.handler(), "rm", "unlink")
	reg(cmdSpec{pos: posWrite, opts: optSpec{short: "ns", long: []string{"--iterations", "--size", "--random-source"}},
		read: []string{"--random-source"}}.handler(), "shred")
	reg(chmodHandler(), "chmod")
	reg(cmdSpec{need: pAdmin, pos: posWrite, meta: true, skip: 1, opts: optSpec{long: []string{"--reference", "--from"}},
		tree: []string{"-R", "--recursive"}}.handler(), "chown", "chgrp")
	reg(cmdSpec{pos: posWrite, opts: optSpec{short: "rs", long: []string{"--size", "--reference"}},
		read: []string{"-r", "--reference"}}.handler(), "truncate")
	reg(cmdSpec{pos: posWrite, opts: optSpec{longOpt: []string{"--output-error"}}}.handler(), "tee")
	reg(copyHandler(false), "cp", "install")
	reg(copyHandler(true), "mv")
	reg(lnHandler(), "ln")
	reg(mktempHandler(), "mktemp")
	reg(cmdSpec{pos: posWrite, opts: optSpec{short: "BDFVYdgioprz", long: []string{"--quoting-style", "--read-only",
		"--reject-format", "--input", "--output", "--prefix", "--directory", "--strip", "--reject-file",
		"--backup-if-mismatch", "--basename-prefix", "--suffix", "--ifdef", "--fuzz", "--get", "--version-control"}},
		read: []string{"-i", "--input"}, write: []string{"-o", "--output", "-r", "--reject-file", "-d", "--directory"},
		execFlags: []string{"-e", "--ed"}}.handler(), "patch")

	registerWrappers(reg)
	reg(shellHandler, "bash", "sh", "dash", "rbash", "ash", "ksh", "mksh", "ksh93", "pdksh", "posh")
	reg(otherShellHandler, "zsh", "fish", "csh", "tcsh", "yash", "pwsh", "nu", "elvish", "xonsh", "rc", "es")
	reg(busyboxHandler, "busybox")
	reg(coreutilsHandler, "coreutils")
	reg(evalHandler, "eval")
	reg(sourceHandler, "source", ".")
	reg(scriptHandler(), "script")
	reg(privileged, "sudo", "su", "doas", "pkexec", "runuser", "sg", "newgrp", "run0", "sudoedit")

	// Interpreters: they need exec; their programs are read for the
	// commands they run.
	reg(withModuleTaskFiles(interpreter{lang: langCode, code: "c", vals: "mWXQ", valsLong: []string{"--check-hash-based-pycs"}}.handler()),
		"python", "python2", "python3", "pypy", "pypy3")
	reg(interpreter{lang: langCode, code: "eE", vals: "IMmxil0dDCF"}.handler(), "perl", "perl5")
	reg(interpreter{lang: langCode, code: "e", vals: "IrCxEFK0W", valsLong: []string{"--encoding", "--enable", "--disable", "--dump"}}.handler(), "ruby", "irb", "jruby")
	reg(interpreter{lang: langCode, code: "ep", codeLong: []string{"--eval", "--print"}, vals: "rCi",
		valsLong: []string{"--require", "--import", "--loader", "--input-type", "--conditions", "--experimental-loader",
			"--env-file", "--title", "--stack-size", "--max-old-space-size", "--inspect-port"}}.handler(), "node", "nodejs", "bun", "ts-node", "tsx")
	reg(interpreter{lang: langCode, code: "rBREF", vals: "cdfzt"}.handler(), "php", "php-cli")
	reg(interpreter{lang: langCode, code: "e", vals: "l"}.handler(), "lua", "luajit", "lua5.1", "lua5.3", "lua5.4")
	reg(interpreter{lang: langCode, code: "e", codeLong: []string{"--eval"}}.handler(), "Rscript")
	reg(interpreter{lang: langCode, code: "eE", codeLong: []string{"--eval", "--print"}, vals: "LJp"}.handler(), "julia")
	reg(interpreter{lang: langCode, code: "c", vals: "fbD"}.handler(), "expect")
	reg(interpreter{lang: langCode}.handler(), "tclsh", "wish", "tclsh8.6", "R", "guile", "racket", "sbcl", "clisp",
		"ocaml", "ghci", "runghc", "runhaskell", "scala", "groovy", "kotlin", "jshell", "m4", "deno")
	reg(interpreter{lang: langCode, code: "e"}.handler(), "osascript")
	reg(interpreter{lang: langEditor, code: "ef", codeLong: []string{"--expression"}}.handler(), "dc")
	reg(interpreter{lang: langCode, codeLong: []string{"-ex", "--eval-command", "-iex", "--init-eval-command",
		"-o", "--one-line"}, vals: "xpcs", valsLong: []string{"-x", "--command", "-ix", "--init-command", "-p", "--pid",
		"-s", "--symbols", "-e", "--exec", "-c", "--core", "-cd", "--directory", "-d"}}.handler(), "gdb", "lldb")
	reg(interpreter{lang: langCode, code: "e", codeLong: []string{"--eval"}, vals: "r"}.handler(), "elixir", "iex")
	reg(interpreter{lang: langCode, noScript: true, codeLong: []string{"-cmd"}, valsLong: []string{"-init", "-separator",
		"-newline", "-nullvalue", "-vfs", "-mmap", "-lookaside", "-pagecache", "-maxsize"}}.handler(), "sqlite3", "sqlite")
	reg(editorHandler([]string{"-s", "-S", "-u", "-U", "-i", "-w", "-W", "-T", "-V", "--servername", "-l", "--load",
		"--script", "-x"}, []string{"-c", "--cmd", "--eval", "--exec", "-f", "--funcall"}),
		"vim", "vi", "nvim", "view", "vimdiff", "gvim", "evim", "rvim", "rview", "ex", "ed", "red", "emacs",
		"emacsclient", "nano", "pico", "micro", "joe", "mg", "kak", "helix", "hx")
	reg(makeHandler, "make", "gmake", "bmake", "remake")
	reg(withScripts(runsCode(0)), "npm")

	// Task runners, which run what a file of the repository says.
	for name, files := range taskFiles {
		reg(withTaskFiles(runsCode(0), files), name)
	}

	// Programs that run code the policy cannot see.
	reg(runsCode(0), "pipx", "uv", "uvx",
		"mypy", "ruff", "black", "isort", "flake8", "pylint",
		"npx", "tsc", "eslint",
		"prettier", "jest", "vitest", "mocha", "gem", "bundle", "bundler", "rails", "rspec",
		"cpan", "cpanm", "java", "javac", "jar",
		"kotlinc", "sbt", "cargo", "rustc", "rustup", "rustfmt", "gcc", "g++",
		"cc", "c++", "clang", "clang++", "ld", "cmake", "ninja", "meson", "bazel", "bazelisk",
		"buck", "dotnet", "msbuild", "swift", "swiftc", "xcodebuild", "erl", "erlc", "rebar3", "ghc", "cabal",
		"stack", "dart", "flutter", "zig", "nim", "crystal", "opam", "dune", "mix",
		"protoc", "buf", "pre-commit", "hugo", "jekyll", "mkdocs", "sphinx-build", "doxygen", "pandoc",
		"asciidoctor", "golangci-lint", "staticcheck", "govulncheck", "entr", "openssl", "7z", "7za", "cpio", "ar", "xdg-open",
		"open", "nix", "nix-shell", "asdf", "mise", "nvm",
		"pyenv", "rbenv", "sdk", "conda", "mamba", "micromamba", "air", "reflex", "nodemon")
	reg(goHandler, "go")
	registerRunners(reg)

	registerNetwork(reg)
	reg(gitHandler(), "git")
	reg(ghHandler, "gh")

	// Deployment and infrastructure.
	reg(runsCode(pDeploy), "kubectl", "helm", "terraform", "tofu", "terragrunt", "pulumi", "ansible",
		"ansible-playbook", "ansible-galaxy", "aws", "gcloud", "gsutil", "bq", "az", "doctl", "flyctl", "fly",
		"heroku", "vercel", "netlify", "wrangler", "serverless", "sls", "eksctl", "docker", "docker-compose",
		"podman", "nerdctl", "buildah", "podman-compose", "helmfile", "skaffold", "tilt", "kustomize", "argocd", "flux", "nomad", "consul",
		"packer", "cdk", "sam", "firebase", "railway", "kamal", "cap", "kind", "minikube", "k3d", "k9s", "oc",
		"istioctl", "linkerd", "crane", "skopeo", "gcrane", "ko")

	// Secret stores.
	reg(runsCode(pSecrets), "vault", "op", "pass", "gopass", "gpg", "gpg2", "age", "sops", "security",
		"keyctl", "secret-tool", "lpass", "bw", "doppler", "chamber", "aws-vault", "infisical")

	// The machine itself.
	reg(runsCode(pAdmin), "kill", "pkill", "killall", "systemctl", "service", "journalctl", "crontab", "at",
		"batch", "mount", "umount", "losetup", "modprobe", "insmod", "rmmod", "sysctl", "iptables", "ip6tables",
		"nft", "ufw", "ip", "ifconfig", "route", "shutdown", "reboot", "halt", "poweroff", "init", "telinit",
		"useradd", "userdel", "usermod", "groupadd", "groupdel", "passwd", "chpasswd", "visudo", "chroot",
		"nsenter", "unshare", "setpriv", "capsh", "firejail", "bwrap", "systemd-run", "machinectl", "renice",
		"apt", "apt-get", "dpkg", "yum", "dnf", "rpm", "apk", "brew", "snap", "flatpak", "pacman", "zypper",
		"hwclock", "timedatectl", "hostnamectl", "lsof", "taskset", "chrt", "prlimit", "setcap", "chattr",
		"dmesg", "swapon", "swapoff", "fdisk", "mkfs", "parted", "tcpdump")
	return t
}

// grepHandler handles grep-like commands: the first operand is the pattern
// unless one is given by option; the rest are read, whole trees with -r.
func grepHandler(spec optSpec, execOpts []string) handler {
	t := spec.compile()
	return func(c *checker, inv *invocation) cwds {
		opts, pos := parseOpts(inv.argv[1:], t)
		for _, o := range opts {
			if slices.Contains(execOpts, o.name) {
				if o.name == "--pager" || o.name == "--pre" || o.name == "--hostname-bin" {
					c.optionCommand(inv, o)
				} else if o.name == "--output" {
					// ack 2 evaluates it as Perl.
					c.needBecause(inv, pExec, "option --output is a Perl expression to ack")
				} else if !c.needBecause(inv, pExec, "option "+o.name+" reads options or paths the policy cannot see") {
					return inv.cwd
				}
				if c.deny != nil {
					return inv.cwd
				}
			}
		}
		if !c.need(inv, pRead) {
			return inv.cwd
		}
		if inv.name == "ack" && !c.projectConfig(inv, ".ackrc") {
			return inv.cwd
		}
		tree := hasOpt(opts, "-r", "-R", "--recursive", "--dereference-recursive") || inv.name == "rg" || inv.name == "ag" || inv.name == "ack"
		follow := hasOpt(opts, "-R", "--dereference-recursive") || (inv.name == "rg" || inv.name == "ag") && hasOpt(opts, "-L", "--follow") ||
			inv.name == "ack" && hasOpt(opts, "--follow")
		for _, o := range opts {
			if o.val == nil {
				continue
			}
			switch o.name {
			case "-f", "--file", "--exclude-from", "--ignore-file":
				c.usePath(inv, *o.val, pathUse{acc: accRead})
			}
		}
		// rg --files lists files and takes no pattern: every operand is a
		// directory it reads.
		listing := inv.name == "rg" && hasOpt(opts, "--files")
		if !listing && !hasOpt(opts, "-e", "--regexp", "-f", "--file") && len(pos) > 0 {
			pos = pos[1:]
		}
		for _, w := range pos {
			c.usePath(inv, w, pathUse{acc: accRead, tree: tree, follow: follow})
		}
		if len(pos) == 0 && tree {
			// grep -r with no operand searches the current directory.
			c.usePath(inv, litWord("."), pathUse{acc: accRead, tree: true, follow: follow})
		}
		return inv.cwd
	}
}

// projectConfig refuses, for a profile without exec, a program that would
// read a configuration file the workspace holds in the directory it runs
// in or one above it (ack's .ackrc), which can make it run programs. Start-
// up files in the home directory need no check: the sandbox's home is not
// the workspace.
func (c *checker) projectConfig(inv *invocation, files ...string) bool {
	if c.perms.has(pExec) || inv.allowed {
		return true
	}
	for _, dir := range inv.cwd {
		for d := dir; ; d = path.Dir(d) {
			for _, f := range files {
				if _, ok := c.stats.lstat(d + "/" + f); ok {
					return c.needBecause(inv, pExec, "the workspace holds "+f+", which "+inv.name+" reads as its configuration and which can make it run programs")
				}
			}
			if _, in := c.ws.relative(d); !in || d == c.ws.real || d == c.ws.root || d == "/" {
				break
			}
		}
	}
	return true
}

// jqHandler checks jq: it reads its inputs, --slurpfile and --rawfile;
// a program that imports or includes modules reads them from search paths
// it names. With -f (also in a cluster, -nf) the program is a file: jq
// takes the first operand, and newer ones the word after -f, so each is
// read as the program and must be text the policy has.
func jqHandler() handler {
	return func(c *checker, inv *invocation) cwds {
		if !c.need(inv, pRead) {
			return inv.cwd
		}
		args := inv.argv[1:]
		var pos, files []word
		fromFile, rawArgs := false, false
		var program string
		for i := 0; i < len(args); i++ {
			w := args[i]
			if rawArgs || !w.lit || !strings.HasPrefix(w.s, "-") || w.s == "-" {
				if !rawArgs {
					pos = append(pos, w)
				}
				continue
			}
			switch w.s {
			case "--":
				pos = append(pos, args[i+1:]...)
				i = len(args)
			case "--arg", "--argjson":
				i += 2
			case "--slurpfile", "--rawfile":
				if i+2 < len(args) {
					c.usePath(inv, args[i+2], pathUse{acc: accRead})
				}
				i += 2
			case "-L", "--indent", "--tab-width":
				if w.s == "-L" && i+1 < len(args) {
					c.usePath(inv, args[i+1], pathUse{acc: accRead, tree: true})
				}
				i++
			case "--args", "--jsonargs":
				rawArgs = true
			default:
				if w.s == "--from-file" || !strings.HasPrefix(w.s, "--") && strings.Contains(w.s, "f") {
					fromFile = true
					if i+1 < len(args) && (!args[i+1].lit || !strings.HasPrefix(args[i+1].s, "-") || args[i+1].s == "-") {
						files = append(files, args[i+1])
					}
				}
			}
		}
		if fromFile {
			if len(pos) > 0 {
				files = append(files, pos[0])
			}
			for _, f := range files {
				p := c.fileProgram(f, inv.cwd)
				if c.deny != nil {
					return inv.cwd
				}
				if p.kind == progUnread && c.missing(f, inv.cwd) {
					continue // jq cannot open it
				}
				if p.kind != progText && p.kind != progNone {
					if !c.needBecause(inv, pExec, "it reads its program from "+p.where+", which the policy cannot read") {
						return inv.cwd
					}
				}
				program += "\n" + p.text
			}
		} else if len(pos) > 0 {
			if pos[0].lit {
				program = pos[0].s
			}
			pos = pos[1:]
		}
		if strings.Contains(program, "import") || strings.Contains(program, "include") {
			// Modules are read from search paths the program names.
			if !c.needBecause(inv, pExec, "its program loads modules") {
				return inv.cwd
			}
		}
		for _, w := range pos {
			c.usePath(inv, w, pathUse{acc: accRead})
		}
		return inv.cwd
	}
}

// missing reports a literal path in the workspace that names nothing and
// that the script did not write.
func (c *checker) missing(w word, cwd cwds) bool {
	if !w.lit || w.glob || len(cwd) != 1 {
		return false
	}
	r := c.resolve(cwd[0], w.s)
	if _, written := c.written[r.abs]; written || !r.in {
		return false
	}
	_, exists := c.stats.lstat(r.abs)
	return !exists
}

func yqHandler() handler {
	t := optSpec{short: "pIoeds", long: []string{"--input-format", "--output-format", "--indent", "--from-file",
		"--expression", "--split-exp", "--front-matter", "--xml-attribute-prefix", "--xml-content-name",
		"--lua-prefix", "--lua-suffix", "--properties-separator", "--csv-separator"}}.compile()
	return func(c *checker, inv *invocation) cwds {
		opts, pos := parseOpts(inv.argv[1:], t)
		inPlace := hasOpt(opts, "-i", "--inplace")
		need := pRead
		if inPlace {
			need |= pWrite
		}
		if hasOpt(opts, "-s", "--split-exp") && !c.needBecause(inv, pExec, "-s writes files named by its expression") {
			return inv.cwd
		}
		if !c.need(inv, need) {
			return inv.cwd
		}
		if len(pos) > 0 && pos[0].lit {
			switch pos[0].s {
			case "e", "eval", "ea", "eval-all":
				pos = pos[1:]
			}
		}
		expr := ""
		if v, ok := optVal(opts, "--expression", "-e"); ok && v.lit {
			expr = v.s
		}
		if v, ok := optVal(opts, "--from-file"); ok {
			c.usePath(inv, v, pathUse{acc: accRead})
			if p := c.fileProgram(v, inv.cwd); p.kind == progText {
				expr = p.text
			}
		} else if !hasOpt(opts, "--expression", "-e") && len(pos) > 0 {
			if pos[0].lit {
				expr = pos[0].s
			}
			pos = pos[1:]
		}
		if strings.Contains(expr, "load") && !c.needBecause(inv, pExec, "its expression loads files") {
			return inv.cwd
		}
		acc := accRead
		if inPlace {
			acc = accWrite
		}
		for _, w := range pos {
			c.usePath(inv, w, pathUse{acc: acc})
		}
		return inv.cwd
	}
}

// inOutHandler checks a filter that reads its first operand and, when
// given a second, writes its output there (uniq IN OUT, xxd IN OUT).
func inOutHandler(spec optSpec) handler {
	t := spec.compile()
	return func(c *checker, inv *invocation) cwds {
		_, pos := parseOpts(inv.argv[1:], t)
		need := pRead
		if len(pos) > 1 {
			need |= pWrite
		}
		if !c.need(inv, need) {
			return inv.cwd
		}
		for i, w := range pos {
			acc := accRead
			if i == 1 {
				acc = accWrite
			}
			c.usePath(inv, w, pathUse{acc: acc})
		}
		return inv.cwd
	}
}

func ddHandler(c *checker, inv *invocation) cwds {
	need := pRead
	var reads, writes []word
	for _, w := range inv.argv[1:] {
		if !w.lit {
			c.denyf("shell:dynamic-path", "dd operand %s is not a literal, so the policy cannot check it", w.source())
			return inv.cwd
		}
		if v, ok := strings.CutPrefix(w.s, "if="); ok {
			reads = append(reads, litWord(v))
		}
		if v, ok := strings.CutPrefix(w.s, "of="); ok {
			writes = append(writes, litWord(v))
			need |= pWrite
		}
	}
	if !c.need(inv, need) {
		return inv.cwd
	}
	for _, w := range reads {
		c.usePath(inv, w, pathUse{acc: accRead})
	}
	for _, w := range writes {
		c.usePath(inv, w, pathUse{acc: accWrite})
	}
	return inv.cwd
}

func dateHandler() handler {
	t := optSpec{short: "dfrs", shortOpt: "I", long: []string{"--date", "--file", "--reference", "--rfc-3339", "--set",
		"--resolution"}, longOpt: []string{"--iso-8601"}}.compile()
	return func(c *checker, inv *invocation) cwds {
		opts, _ := parseOpts(inv.argv[1:], t)
		need := pRead
		if hasOpt(opts, "-s", "--set") {
			need |= pAdmin
		}
		if c.need(inv, need) {
			for _, o := range opts {
				if o.val != nil && (o.name == "-f" || o.name == "--file" || o.name == "-r" || o.name == "--reference") {
					c.usePath(inv, *o.val, pathUse{acc: accRead})
				}
			}
		}
		return inv.cwd
	}
}

func hostnameHandler() handler {
	t := optSpec{short: "F", long: []string{"--file"}}.compile()
	return func(c *checker, inv *invocation) cwds {
		opts, pos := parseOpts(inv.argv[1:], t)
		need := pRead
		if len(pos) > 0 || hasOpt(opts, "-F", "--file", "-b", "--boot") {
			need |= pAdmin
		}
		c.need(inv, need)
		return inv.cwd
	}
}

// actionlintHandler: actionlint reads workflows; -shellcheck= and
// -pyflakes= name programs it runs.
func actionlintHandler(c *checker, inv *invocation) cwds {
	for _, w := range inv.argv[1:] {
		if !w.lit {
			continue
		}
		name, val, _ := strings.Cut(strings.TrimLeft(w.s, "-"), "=")
		switch name {
		case "shellcheck", "pyflakes":
			if val != "" {
				c.optionCommand(inv, opt{name: "-" + name, val: &word{s: val, lit: true, src: val}})
				if c.deny != nil {
					return inv.cwd
				}
			}
		case "config-file":
			c.usePath(inv, litWord(val), pathUse{acc: accRead})
		}
	}
	if c.need(inv, pRead) {
		for _, w := range inv.argv[1:] {
			if w.lit && !strings.HasPrefix(w.s, "-") {
				c.usePath(inv, w, pathUse{acc: accRead})
			}
		}
	}
	return inv.cwd
}

// goFmtHandler checks gofmt and goimports, whose options are Go flags: -w
// rewrites files, -cpuprofile writes one.
func goFmtHandler() handler {
	return func(c *checker, inv *invocation) cwds {
		args := inv.argv[1:]
		write := false
		var pos []word
		for i := 0; i < len(args); i++ {
			w := args[i]
			if !w.lit || !strings.HasPrefix(w.s, "-") || w.s == "-" {
				pos = append(pos, args[i:]...)
				break
			}
			name, val, hasVal := strings.Cut(strings.TrimLeft(w.s, "-"), "=")
			switch name {
			case "l", "d", "s", "e", "v", "format-only", "all":
			case "w":
				write = !hasVal || val == "true"
			case "r", "local", "srcdir":
				if !hasVal {
					i++
				}
			case "cpuprofile", "memprofile", "trace":
				if !hasVal && i+1 < len(args) {
					i++
					val = args[i].s
				}
				if !c.needBecause(inv, pWrite, "-"+name+" writes a file") {
					return inv.cwd
				}
				c.usePath(inv, litWord(val), pathUse{acc: accWrite})
			default:
				if !c.needBecause(inv, pExec, "option "+w.s+" is not one the policy knows for "+inv.name) {
					return inv.cwd
				}
			}
		}
		need := pRead
		if write {
			need |= pWrite
		}
		if !c.need(inv, need) {
			return inv.cwd
		}
		acc := accRead
		if write {
			acc = accWrite
		}
		for _, w := range pos {
			c.usePath(inv, w, pathUse{acc: acc, tree: true})
		}
		return inv.cwd
	}
}

// chmodHandler checks chmod: the mode (which may look like an option: -x,
// -w) is not a path; the files are written.
func chmodHandler() handler {
	t := optSpec{long: []string{"--reference"}, flags: "Rcfv", longFlags: []string{"--changes", "--silent", "--quiet",
		"--verbose", "--no-preserve-root", "--preserve-root", "--recursive", "--help", "--version"}}.compile()
	return func(c *checker, inv *invocation) cwds {
		args := inv.argv[1:]
		var rest []word
		modeSeen := false
		for _, w := range args {
			if !modeSeen && w.lit && isMode(w.s) {
				modeSeen = true
				continue
			}
			rest = append(rest, w)
		}
		opts, pos := parseOpts(rest, t)
		if !modeSeen && !hasOpt(opts, "--reference") && len(pos) > 0 {
			pos = pos[1:]
		}
		if !c.need(inv, pWrite) {
			return inv.cwd
		}
		if v, ok := optVal(opts, "--reference"); ok {
			c.usePath(inv, v, pathUse{acc: accRead})
		}
		tree := hasOpt(opts, "-R", "--recursive")
		for _, w := range pos {
			c.usePath(inv, w, pathUse{acc: accWrite, tree: tree, meta: true})
		}
		return inv.cwd
	}
}

// isMode reports a chmod mode: octal, or [ugoa]*[-+=][rwxXst…]… .
func isMode(s string) bool {
	if s == "" {
		return false
	}
	if isDigits(s) {
		return true
	}
	for _, clause := range strings.Split(s, ",") {
		i := 0
		for i < len(clause) && strings.IndexByte("ugoa", clause[i]) >= 0 {
			i++
		}
		if i >= len(clause) || strings.IndexByte("-+=", clause[i]) < 0 {
			return false
		}
		for ; i < len(clause); i++ {
			if strings.IndexByte("-+=rwxXstugo01234567", clause[i]) < 0 {
				return false
			}
		}
	}
	return true
}

// treeHandler checks tree: it lists its directories (default ".") as
// trees, through their links with -l; -o writes its output, -R writes a
// listing into every directory; --fromfile reads listings.
func treeHandler() handler {
	t := optSpec{short: "LPIoHTX", long: []string{"--filelimit", "--charset", "--timefmt", "--sort", "--gitfile",
		"--infofile", "--hintro", "--houtro", "--scheme", "--authority", "--du"}, flags: "adlfxiqNQpugshDFvtcUrnCAScJRX",
		longFlags: []string{"--noreport", "--inodes", "--device", "--dirsfirst", "--filesfirst", "--prune", "--matchdirs",
			"--ignore-case", "--nolinks", "--si", "--help", "--version", "--fromfile", "--fromtabfile", "--gitignore",
			"--info", "--metafirst", "--hyperlink", "--condense", "--opt-toggle", "--fflinks"},
		strict: true}.compile()
	return func(c *checker, inv *invocation) cwds {
		opts, pos := parseOpts(inv.argv[1:], t)
		if !c.strictOpts(inv, t, opts) {
			return inv.cwd
		}
		if hasOpt(opts, "-R") && !c.needBecause(inv, pWrite, "-R writes a listing into every directory") {
			return inv.cwd
		}
		if hasOpt(opts, "--fromfile", "--fromtabfile") && !c.needBecause(inv, pExec, "--fromfile reads paths from files, which the policy cannot check") {
			return inv.cwd
		}
		if v, ok := optVal(opts, "-o"); ok {
			if !c.needBecause(inv, pWrite, "-o writes its output to a file") {
				return inv.cwd
			}
			c.usePath(inv, v, pathUse{acc: accWrite})
		}
		if !c.need(inv, pRead) {
			return inv.cwd
		}
		for _, name := range []string{"--gitfile", "--infofile"} {
			if v, ok := optVal(opts, name); ok {
				c.usePath(inv, v, pathUse{acc: accRead})
			}
		}
		follow := hasOpt(opts, "-l")
		if len(pos) == 0 {
			pos = []word{litWord(".")}
		}
		for _, w := range pos {
			c.usePath(inv, w, pathUse{acc: accRead, tree: true, follow: follow})
		}
		if hasOpt(opts, "-R") {
			for _, w := range pos {
				c.usePath(inv, w, pathUse{acc: accWrite, tree: true})
			}
		}
		return inv.cwd
	}
}

// lessHandler checks less and more: they read their files; -o and -O
// write a log; -T names a tags file it reads, and -t opens the file a tags
// file names; a lesskey file and the LESSOPEN it may set run programs; an
// initial command (+cmd) may run a shell command (!), pipe to one (|) or
// write (s).
func lessHandler() handler {
	t := optSpec{short: "bhjkoOpPtTxyzD#", flags: "aABcCdeEfFgGiIJKLmMnNqQrRsSuUVwWX~",
		long: []string{"--lesskey-file", "--lesskey-src", "--lesskey-content", "--log-file", "--LOG-FILE",
			"--pattern", "--prompt", "--tag", "--tag-file", "--tabs", "--window", "--max-back-scroll",
			"--max-forw-scroll", "--buffers", "--jump-target", "--shift", "--line-num-width", "--status-col-width",
			"--color", "--rscroll", "--header", "--intr", "--wheel-lines", "--mouse", "--exit-follow-on-close",
			"--use-color", "--status-line", "--incsearch", "--file-size", "--follow-name", "--redraw-on-quit",
			"--search-options", "--tilde", "--proc-backspace", "--proc-return", "--proc-tab", "--autosave",
			"--match-shift", "--show-preproc-errors", "--form-feed", "--no-vbell", "--no-number-headers",
			"--quotes", "--cmd"},
		longFlags: []string{"--quit-at-eof", "--QUIT-AT-EOF", "--quit-if-one-screen", "--RAW-CONTROL-CHARS",
			"--raw-control-chars", "--chop-long-lines", "--ignore-case", "--IGNORE-CASE", "--LINE-NUMBERS",
			"--line-numbers", "--long-prompt", "--no-init", "--squeeze-blank-lines", "--silent", "--quiet",
			"--SILENT", "--status-column", "--version", "--help", "--follow-name", "--no-keypad", "--no-histdups",
			"--save-marks", "--clear-screen", "--dumb", "--hilite-search", "--HILITE-SEARCH", "--hilite-unread",
			"--HILITE-UNREAD", "--search-skip-screen", "--underline-special", "--UNDERLINE-SPECIAL",
			"--auto-buffers", "--force", "--no-lessopen", "--LINE-NUMBERS", "--ignore-case"},
		strict: true}.compile()
	return func(c *checker, inv *invocation) cwds {
		var plus []word
		var args []word
		for _, w := range inv.argv[1:] {
			if w.lit && strings.HasPrefix(w.s, "+") {
				plus = append(plus, w)
				continue
			}
			args = append(args, w)
		}
		opts, pos := parseOpts(args, t)
		if !c.strictOpts(inv, t, opts) {
			return inv.cwd
		}
		for _, o := range opts {
			switch o.name {
			case "-k", "--lesskey-file", "--lesskey-src", "--lesskey-content":
				if !c.needBecause(inv, pExec, "a lesskey file can make it run programs") {
					return inv.cwd
				}
			case "-o", "-O", "--log-file", "--LOG-FILE":
				if !c.needBecause(inv, pWrite, "option "+o.name+" writes a log file") {
					return inv.cwd
				}
				if o.val != nil {
					c.usePath(inv, *o.val, pathUse{acc: accWrite})
				}
			case "--cmd":
				if o.val != nil {
					plus = append(plus, *o.val)
				}
			case "-t", "--tag":
				if !c.needBecause(inv, pExec, "option "+o.name+" opens the file a tags file names") {
					return inv.cwd
				}
			case "-T", "--tag-file":
				if o.val != nil {
					c.usePath(inv, *o.val, pathUse{acc: accRead})
				}
			}
		}
		for _, p := range plus {
			cmd := strings.TrimPrefix(p.s, "+")
			if lessCommandSafe(cmd) {
				continue
			}
			if !c.needBecause(inv, pExec, "its initial command "+p.s+" may run or write") {
				return inv.cwd
			}
			c.scanCode(cmd, langEditor, inv.cwd)
		}
		if !c.need(inv, pRead) {
			return inv.cwd
		}
		for _, w := range pos {
			c.usePath(inv, w, pathUse{acc: accRead})
		}
		return inv.cwd
	}
}

// lessCommandSafe reports an initial less command that only moves or
// searches: +G, +123, +/pattern, +F.
func lessCommandSafe(cmd string) bool {
	if cmd == "" {
		return true
	}
	switch cmd[0] {
	case '/', '?':
		return !strings.ContainsAny(cmd, "!|")
	}
	for i := 0; i < len(cmd); i++ {
		if strings.IndexByte("0123456789GgFjkqQ%pP", cmd[i]) < 0 {
			return false
		}
	}
	return true
}

// manHandler checks man: it reads manual pages; -P and -H run a pager or a
// browser; -l reads a local file; -C a configuration file.
func manHandler() handler {
	t := optSpec{short: "CELMPRSemprsX", shortOpt: "HT", flags: "7DIKVWZacdfikltuwhQ",
		long: []string{"--config-file", "--encoding", "--extension", "--locale", "--manpath", "--nh", "--no-hyphenation",
			"--pager", "--preprocessor", "--prompt", "--recode", "--sections", "--systems"},
		longOpt: []string{"--gxditview", "--html", "--troff-device", "--warnings"},
		longFlags: []string{"--all", "--apropos", "--ascii", "--catman", "--debug", "--default", "--ditroff",
			"--global-apropos", "--help", "--ignore-case", "--local-file", "--location", "--location-cat", "--match-case",
			"--names-only", "--no-justification", "--no-subpages", "--path", "--regex", "--troff", "--update", "--usage",
			"--version", "--whatis", "--where", "--where-cat", "--wildcard"}, strict: true}.compile()
	return func(c *checker, inv *invocation) cwds {
		opts, pos := parseOpts(inv.argv[1:], t)
		if !c.strictOpts(inv, t, opts) {
			return inv.cwd
		}
		for _, o := range opts {
			switch o.name {
			case "-P", "--pager", "-H", "--html", "-X", "--gxditview", "-p", "--preprocessor":
				if o.val != nil && (o.name == "-P" || o.name == "--pager") && noopCommand(o.val.s) {
					continue
				}
				if o.val == nil && (o.name == "-H" || o.name == "--html") {
					if !c.needBecause(inv, pExec, "option "+o.name+" runs a browser") {
						return inv.cwd
					}
					continue
				}
				c.optionCommand(inv, o)
			case "-C", "--config-file":
				// Its DEFINE lines name the programs man runs
				// (pager, nroff, tbl …).
				if o.val != nil {
					c.runProgram(inv, c.fileProgram(*o.val, inv.cwd), langCode, inv.cwd, false)
				}
			case "-M", "--manpath", "-m", "--systems":
				if o.val != nil && (o.name == "-M" || o.name == "--manpath") {
					c.usePath(inv, *o.val, pathUse{acc: accRead})
				}
				c.needBecause(inv, pExec, "option "+o.name+" takes pages from outside the system's manual, and a page is a troff program whose requests (.so) read any file")
			}
			if c.deny != nil {
				return inv.cwd
			}
		}
		if !c.need(inv, pRead) {
			return inv.cwd
		}
		local := hasOpt(opts, "-l", "--local-file")
		for _, w := range pos {
			if !local && w.lit && !strings.Contains(w.s, "/") {
				continue
			}
			// A page man is given as a file (with -l, or a name
			// with a slash) is not the system's.
			if !c.needBecause(inv, pExec, "it formats "+w.source()+", which is not a page of the system's manual: a page is a troff program whose requests (.so) read any file") {
				return inv.cwd
			}
			if w.lit && w.s == "-" {
				continue
			}
			c.usePath(inv, w, pathUse{acc: accRead})
		}
		return inv.cwd
	}
}

// copyHandler handles cp, install and mv: sources are read (mv: removed,
// so written), the destination written; -t names the destination. Copies
// of links (cp -s, cp -l, cp -P, mv of a link) are modelled as links.
func copyHandler(move bool) handler {
	t := optSpec{short: "tSgmo", long: []string{"--target-directory", "--suffix", "--group", "--mode", "--owner",
		"--sparse", "--no-preserve", "--strip-program"},
		longOpt: []string{"--backup", "--context", "--preserve", "--reflink"},
		longFlags: []string{"--archive", "--attributes-only", "--copy-contents", "--debug", "--force", "--interactive",
			"--link", "--dereference", "--no-clobber", "--no-dereference", "--parents", "--recursive",
			"--remove-destination", "--strip-trailing-slashes", "--symbolic-link", "--no-target-directory", "--update",
			"--verbose", "--one-file-system", "--keep-directory-symlink", "--exchange", "--directory", "--compare",
			"--preserve-context", "--strip", "--help", "--version"}}.compile()
	return func(c *checker, inv *invocation) cwds {
		opts, pos := parseOpts(inv.argv[1:], t)
		if inv.name == "install" && hasOpt(opts, "--strip-program") {
			if v, ok := optVal(opts, "--strip-program"); ok {
				c.optionCommand(inv, opt{name: "--strip-program", val: &v})
				if c.deny != nil {
					return inv.cwd
				}
			}
		}
		if !c.need(inv, pRead|pWrite) {
			return inv.cwd
		}
		tree := move || hasOpt(opts, "-r", "-R", "-a", "--recursive", "--archive")
		follow := !move && tree && hasOpt(opts, "-L", "--dereference")
		var dest *word
		for _, o := range opts {
			if (o.name == "-t" || o.name == "--target-directory") && o.val != nil {
				dest = o.val
			}
		}
		if inv.name == "install" && hasOpt(opts, "-d", "--directory") {
			for _, w := range pos {
				c.usePath(inv, w, pathUse{acc: accWrite, meta: true})
			}
			return inv.cwd
		}
		if dest == nil && len(pos) > 0 {
			dest = &pos[len(pos)-1]
			pos = pos[:len(pos)-1]
		}
		srcAcc := accRead
		if move {
			srcAcc = accWrite
		}
		for _, w := range pos {
			c.usePath(inv, w, pathUse{acc: srcAcc, tree: tree, follow: follow})
		}
		if dest == nil || c.deny != nil {
			return inv.cwd
		}
		c.usePath(inv, *dest, pathUse{acc: accWrite, tree: tree})
		if c.deny != nil {
			return inv.cwd
		}
		kind := linkNone
		switch {
		case move:
			kind = linkMove
		case hasOpt(opts, "-s", "--symbolic-link"):
			kind = linkSymbolic
		case hasOpt(opts, "-l", "--link"):
			kind = linkHard
		case hasOpt(opts, "-P", "-d", "-a", "--no-dereference", "--archive") || tree && !follow:
			kind = linkCopy
		}
		c.copyLinks(inv, pos, *dest, kind, tree && !follow)
		return inv.cwd
	}
}

// mktempHandler: without a directory the file lands in the system's
// temporary directory, outside the workspace.
func mktempHandler() handler {
	t := optSpec{shortOpt: "p", long: []string{"--suffix"}, longOpt: []string{"--tmpdir"}}.compile()
	return func(c *checker, inv *invocation) cwds {
		opts, pos := parseOpts(inv.argv[1:], t)
		if !c.need(inv, pWrite) {
			return inv.cwd
		}
		for _, o := range opts {
			if (o.name == "-p" || o.name == "--tmpdir") && o.val != nil {
				c.usePath(inv, *o.val, pathUse{acc: accWrite, meta: true})
				return inv.cwd
			}
		}
		if len(pos) > 0 && !hasOpt(opts, "-t") {
			c.usePath(inv, pos[0], pathUse{acc: accWrite, meta: true})
			return inv.cwd
		}
		c.usePath(inv, litWord("/tmp/mktemp"), pathUse{acc: accWrite, meta: true})
		return inv.cwd
	}
}

func tarHandler() handler {
	t := optSpec{short: "CFHIKLNTVXbfg", flags: "ABGJMOPRSUWZacdhijklmnoprstuvwxz",
		long: []string{"--add-file", "--after-date", "--blocking-factor", "--checkpoint-action", "--directory",
			"--exclude", "--exclude-caches-under", "--exclude-from", "--exclude-ignore", "--exclude-ignore-recursive",
			"--exclude-tag", "--exclude-tag-all", "--exclude-tag-under", "--file", "--files-from", "--format", "--group",
			"--group-map", "--hole-detection", "--ignore-command-error", "--index-file", "--info-script", "--label",
			"--level", "--listed-incremental", "--mode", "--mtime", "--new-volume-script", "--newer", "--newer-mtime",
			"--no-quote-chars", "--owner", "--owner-map", "--pax-option", "--quote-chars", "--quoting-style",
			"--record-size", "--rmt-command", "--rsh-command", "--sort", "--sparse-version", "--starting-file",
			"--strip-components", "--suffix", "--tape-length", "--to-command", "--transform", "--use-compress-program",
			"--volno-file", "--warning", "--xattrs-exclude", "--xattrs-include", "--xform"},
		longOpt: []string{"--atime-preserve", "--backup", "--checkpoint", "--occurrence", "--one-top-level", "--totals"},
		longFlags: []string{"--absolute-names", "--acls", "--anchored", "--append", "--auto-compress", "--block-number",
			"--bzip2", "--catenate", "--check-device", "--check-links", "--clamp-mtime", "--compare", "--compress",
			"--concatenate", "--confirmation", "--create", "--delay-directory-restore", "--delete", "--dereference",
			"--diff", "--exclude-backups", "--exclude-caches", "--exclude-caches-all", "--exclude-vcs",
			"--exclude-vcs-ignores", "--extract", "--force-local", "--full-time", "--get", "--gunzip", "--gzip",
			"--hard-dereference", "--help", "--ignore-case", "--ignore-failed-read", "--ignore-zeros", "--incremental",
			"--interactive", "--keep-directory-symlink", "--keep-newer-files", "--keep-old-files", "--list", "--lzip",
			"--lzma", "--lzop", "--multi-volume", "--no-acls", "--no-anchored", "--no-auto-compress",
			"--no-check-device", "--no-delay-directory-restore", "--no-ignore-case", "--no-ignore-command-error",
			"--no-null", "--no-overwrite-dir", "--no-recursion", "--no-same-owner", "--no-same-permissions",
			"--no-seek", "--no-selinux", "--no-unquote", "--no-verbatim-files-from", "--no-wildcards",
			"--no-wildcards-match-slash", "--no-xattrs", "--null", "--numeric-owner", "--old-archive",
			"--one-file-system", "--overwrite", "--overwrite-dir", "--portability", "--posix", "--preserve-order",
			"--preserve-permissions", "--read-full-records", "--recursion", "--recursive-unlink", "--remove-files",
			"--restrict", "--same-order", "--same-owner", "--same-permissions", "--seek", "--selinux",
			"--show-defaults", "--show-omitted-dirs", "--show-snapshot-field-ranges", "--show-stored-names",
			"--show-transformed-names", "--skip-old-files", "--sparse", "--test-label", "--to-stdout", "--touch",
			"--uncompress", "--ungzip", "--unlink-first", "--unquote", "--update", "--usage", "--utc",
			"--verbatim-files-from", "--verbose", "--verify", "--version", "--wildcards", "--wildcards-match-slash",
			"--xattrs", "--xz", "--zstd"},
		strict: true}.compile()
	return func(c *checker, inv *invocation) cwds {
		args := inv.argv[1:]
		// Old style: "tar czf file …" with the letters in the first word,
		// each letter that takes a value taking the next word in turn.
		if len(args) > 0 && args[0].lit && !strings.HasPrefix(args[0].s, "-") && args[0].s != "" {
			letters, rest := args[0].s, args[1:]
			expanded := make([]word, 0, len(args)+len(letters))
			for i := 0; i < len(letters); i++ {
				expanded = append(expanded, litWord("-"+letters[i:i+1]))
				if t.short[letters[i]&0x7f] == optValue && len(rest) > 0 {
					expanded = append(expanded, rest[0])
					rest = rest[1:]
				}
			}
			args = append(expanded, rest...)
		}
		opts, pos := parseOpts(args, t)
		if !c.strictOpts(inv, t, opts) {
			return inv.cwd
		}
		creating, extracting := false, false
		for _, o := range opts {
			switch o.name {
			case "-c", "--create", "-r", "--append", "-u", "--update", "-A", "--catenate", "--concatenate", "--delete":
				creating = true
			case "-x", "--extract", "--get":
				extracting = true
			}
		}
		need := pRead
		archive, toStdout := optVal(opts, "-f", "--file")
		toStdout = !toStdout || archive.lit && archive.s == "-"
		extractingFiles := extracting && !hasOpt(opts, "-O", "--to-stdout", "--to-command")
		if creating && !toStdout || extractingFiles || hasOpt(opts, "-g", "--listed-incremental", "--volno-file", "--index-file") {
			need |= pWrite
		}
		for _, o := range opts {
			switch o.name {
			case "-I", "--use-compress-program", "--to-command", "--info-script", "-F", "--new-volume-script",
				"--rsh-command", "--rmt-command":
				c.optionCommand(inv, o)
			case "--checkpoint-action":
				if o.val == nil {
					break
				}
				if !o.val.lit {
					c.optionCommand(inv, o)
					break
				}
				switch act, cmd, _ := strings.Cut(o.val.s, "="); act {
				case "exec":
					c.optionCommand(inv, opt{name: o.name, val: &word{s: cmd, lit: true, src: cmd}})
				case "bell", "dot", ".", "echo", "ttyout", "totals", "wait", "sleep":
				default:
					c.needBecause(inv, pExec, "--checkpoint-action="+act+" is not one the policy knows")
				}
			case "-T", "--files-from":
				if c.needBecause(inv, pExec, "option "+o.name+" reads the paths to archive from a file, which the policy cannot check") && o.val != nil {
					c.usePath(inv, *o.val, pathUse{acc: accRead})
				}
			}
			if c.deny != nil {
				return inv.cwd
			}
		}
		if !c.need(inv, need) {
			return inv.cwd
		}
		dest := litWord(".")
		for _, o := range opts {
			if o.val == nil {
				continue
			}
			switch o.name {
			case "-f", "--file":
				acc := accRead
				if creating {
					acc = accWrite
				}
				if o.val.lit && o.val.s == "-" {
					continue
				}
				if !(o.val.lit && remote(*o.val)) {
					c.usePath(inv, *o.val, pathUse{acc: acc})
				} else if !c.need(inv, pNetwork) {
					return inv.cwd
				}
			case "-C", "--directory":
				dest = *o.val
				c.usePath(inv, *o.val, pathUse{acc: accRead})
			case "-X", "--exclude-from", "--add-file":
				c.usePath(inv, *o.val, pathUse{acc: accRead})
			case "-g", "--listed-incremental", "--volno-file", "--index-file":
				c.usePath(inv, *o.val, pathUse{acc: accWrite})
			}
		}
		switch {
		case extracting:
			if hasOpt(opts, "-O", "--to-stdout", "--to-command") {
				break
			}
			c.usePath(inv, dest, pathUse{acc: accWrite, tree: true})
			// The archive may hold links, which later paths could pass
			// through.
			c.murkyTree(inv, dest)
		case creating:
			follow := hasOpt(opts, "-h", "--dereference")
			for _, w := range pos {
				c.usePath(inv, w, pathUse{acc: accRead, tree: true, follow: follow})
			}
		}
		return inv.cwd
	}
}

func unzipHandler() handler {
	t := optSpec{short: "dxPIO", flags: "ZlptvzfunoqajCLVXKMUWBDTcsh", strict: true}.compile()
	return func(c *checker, inv *invocation) cwds {
		opts, pos := parseOpts(inv.argv[1:], t)
		if !c.strictOpts(inv, t, opts) {
			return inv.cwd
		}
		listing := hasOpt(opts, "-l", "-t", "-v", "-Z", "-p", "-c", "-z")
		need := pRead
		if !listing {
			need |= pWrite
		}
		if hasOpt(opts, "-M") && !c.needBecause(inv, pExec, "-M runs a pager") {
			return inv.cwd
		}
		if !c.need(inv, need) {
			return inv.cwd
		}
		if len(pos) > 0 {
			c.usePath(inv, pos[0], pathUse{acc: accRead})
		}
		if listing {
			return inv.cwd
		}
		dest := litWord(".")
		for _, o := range opts {
			if o.name == "-d" && o.val != nil {
				dest = *o.val
			}
		}
		c.usePath(inv, dest, pathUse{acc: accWrite, tree: true})
		c.murkyTree(inv, dest)
		return inv.cwd
	}
}

func zipHandler() handler {
	t := optSpec{short: "bnPtxiOsL", flags: "0123456789ADFJTXcdefgjklmoqruvyz@$!", long: []string{"--unzip-command",
		"--temp-path", "--password", "--exclude", "--include", "--output-file", "--suffixes", "--split-size",
		"--compression-method", "--logfile-path", "--from-date", "--before-date", "--archive-clear"},
		longFlags: []string{"--recurse-paths", "--symlinks", "--test", "--quiet", "--verbose", "--move", "--delete",
			"--freshen", "--update", "--junk-paths", "--encrypt", "--help", "--version", "--fix", "--fixfix",
			"--names-stdin", "--latest-time", "--no-dir-entries", "--no-extra", "--adjust-sfx", "--junk-sfx",
			"--copy-entries", "--display-bytes", "--display-counts", "--display-dots", "--display-globaldots",
			"--display-usize", "--display-volume", "--grow", "--show-files", "--sf", "--sf-", "--su", "--sU",
			"--dot-version", "--dif", "--filesync", "--license", "--log-append", "--log-info", "--no-wild",
			"--wild-stop-dirs", "--recurse-patterns"},
		strict: true}.compile()
	return func(c *checker, inv *invocation) cwds {
		var args []word
		for _, w := range inv.argv[1:] {
			// Two-letter options of zip: -TT is --unzip-command, -la -lf -li
			// are logging.
			if w.lit && len(w.s) == 3 && w.s[0] == '-' && w.s[1] != '-' {
				switch w.s {
				case "-TT":
					args = append(args, litWord("--unzip-command"))
					continue
				case "-lf":
					args = append(args, litWord("--logfile-path"))
					continue
				case "-la", "-li", "-ll", "-sf", "-sp", "-sv", "-sb", "-sc", "-so", "-su", "-sU", "-FF", "-FS", "-AC", "-AS", "-dc", "-dd", "-dg", "-ds", "-du", "-dv", "-MM", "-nw", "-ws", "-tt", "-UN", "-ic":
					if w.s == "-tt" {
						args = append(args, litWord("--before-date"))
						continue
					}
					continue
				}
			}
			args = append(args, w)
		}
		opts, pos := parseOpts(args, t)
		if !c.strictOpts(inv, t, opts) {
			return inv.cwd
		}
		for _, o := range opts {
			if o.name == "--unzip-command" {
				c.optionCommand(inv, o)
				if c.deny != nil {
					return inv.cwd
				}
			}
			if o.name == "-@" || o.name == "--names-stdin" {
				if !c.needBecause(inv, pExec, "-@ reads the paths to archive from standard input, which the policy cannot check") {
					return inv.cwd
				}
			}
		}
		if !c.need(inv, pRead|pWrite) {
			return inv.cwd
		}
		tree := hasOpt(opts, "-r", "--recurse-paths", "-R", "--recurse-patterns")
		// zip stores what links point to unless told to store the links.
		follow := !hasOpt(opts, "-y", "--symlinks")
		move := hasOpt(opts, "-m", "--move")
		for i, w := range pos {
			if i == 0 {
				c.usePath(inv, w, pathUse{acc: accWrite})
				continue
			}
			acc := accRead
			if move {
				acc = accWrite
			}
			c.usePath(inv, w, pathUse{acc: acc, tree: tree, follow: follow && tree})
		}
		for _, o := range opts {
			if o.val == nil {
				continue
			}
			switch o.name {
			case "-O", "--output-file", "--logfile-path":
				c.usePath(inv, *o.val, pathUse{acc: accWrite})
			case "-b", "--temp-path":
				c.usePath(inv, *o.val, pathUse{acc: accWrite})
			case "-i", "--include", "-x", "--exclude":
				// -i@FILE reads the patterns from FILE.
				if f, ok := strings.CutPrefix(o.val.s, "@"); ok && o.val.lit {
					c.usePath(inv, litWord(f), pathUse{acc: accRead})
				}
			}
		}
		return inv.cwd
	}
}

// compressHandler checks gzip and its kin: without -c they replace their
// files; -o and --output-dir-* write elsewhere; --filelist reads paths.
func compressHandler(spec optSpec) handler {
	t := spec.compile()
	return func(c *checker, inv *invocation) cwds {
		opts, pos := parseOpts(inv.argv[1:], t)
		if !c.strictOpts(inv, t, opts) {
			return inv.cwd
		}
		toStdout := hasOpt(opts, "-c", "--stdout", "--to-stdout", "-l", "--list", "-t", "--test")
		need := pRead
		if !toStdout && len(pos) > 0 || hasOpt(opts, "-o", "--output-dir-flat", "--output-dir-mirror", "--trace") {
			need |= pWrite
		}
		if hasOpt(opts, "--filelist") && !c.needBecause(inv, pExec, "--filelist reads the paths from a file, which the policy cannot check") {
			return inv.cwd
		}
		if !c.need(inv, need) {
			return inv.cwd
		}
		acc := accRead
		if need.has(pWrite) && !hasOpt(opts, "-o", "--output-dir-flat", "--output-dir-mirror") {
			acc = accWrite
		}
		for _, o := range opts {
			if o.val == nil {
				continue
			}
			switch o.name {
			case "-o", "--output-dir-flat", "--output-dir-mirror", "--trace":
				c.usePath(inv, *o.val, pathUse{acc: accWrite})
			case "-D", "--patch-from":
				c.usePath(inv, *o.val, pathUse{acc: accRead})
			}
		}
		tree := hasOpt(opts, "-r", "--recursive")
		for _, w := range pos {
			c.usePath(inv, w, pathUse{acc: acc, tree: tree})
		}
		return inv.cwd
	}
}

// findExpr returns find's tests and actions with the number of arguments
// they take.
func findExpr() map[string]int {
	return map[string]int{
		"-name": 1, "-iname": 1, "-path": 1, "-ipath": 1, "-wholename": 1, "-iwholename": 1, "-regex": 1, "-iregex": 1,
		"-type": 1, "-xtype": 1, "-size": 1, "-mtime": 1, "-mmin": 1, "-atime": 1, "-amin": 1, "-ctime": 1, "-cmin": 1,
		"-newer": 1, "-anewer": 1, "-cnewer": 1, "-empty": 0, "-executable": 0, "-readable": 0, "-writable": 0,
		"-perm": 1, "-user": 1, "-group": 1, "-uid": 1, "-gid": 1, "-nouser": 0, "-nogroup": 0, "-links": 1,
		"-inum": 1, "-samefile": 1, "-lname": 1, "-ilname": 1, "-maxdepth": 1, "-mindepth": 1, "-depth": 0, "-d": 0,
		"-mount": 0, "-xdev": 0, "-noleaf": 0, "-ignore_readdir_race": 0, "-noignore_readdir_race": 0,
		"-daystart": 0, "-follow": 0, "-regextype": 1, "-warn": 0, "-nowarn": 0, "-print": 0, "-print0": 0,
		"-printf": 1, "-ls": 0, "-fls": 1, "-fprint": 1, "-fprint0": 1, "-fprintf": 2, "-prune": 0, "-quit": 0,
		"-delete": 0, "-true": 0, "-false": 0, "-not": 0, "-a": 0, "-and": 0, "-o": 0, "-or": 0, "-fstype": 1,
		"-used": 1, "-context": 1, "-files0-from": 1, "-help": 0, "--help": 0, "-version": 0, "--version": 0,
	}
}

// findHandler: find reads its starting points as trees; -delete writes
// them; -exec and its kin run a command checked like any other, with {}
// standing for every entry under the starting points.
func findHandler() handler {
	findExpr := findExpr()
	return func(c *checker, inv *invocation) cwds {
		args := inv.argv[1:]
		i := 0
		follow := false
		for ; i < len(args); i++ {
			w := args[i]
			if !w.lit {
				break
			}
			switch {
			case w.s == "-H" || w.s == "-P":
			case w.s == "-L":
				follow = true
			case w.s == "-D":
				i++
			case strings.HasPrefix(w.s, "-O"):
			default:
				goto starts
			}
		}
	starts:
		var startPoints []word
		for ; i < len(args); i++ {
			w := args[i]
			if w.lit && (strings.HasPrefix(w.s, "-") || w.s == "(" || w.s == "!" || w.s == ")" || w.s == ",") {
				break
			}
			startPoints = append(startPoints, w)
		}
		if len(startPoints) == 0 {
			startPoints = []word{litWord(".")}
		}
		expr := args[i:]
		need := pRead
		writes, execdir := false, false
		var execs [][]word
		noLinks, simple := false, true
		var names []string
		for j := 0; j < len(expr); j++ {
			w := expr[j]
			if !w.lit {
				continue
			}
			switch w.s {
			case "(", ")", "!", ",", "-not", "-o", "-or":
				simple = false
				continue
			case "-L", "-follow":
				follow = true
				continue
			case "-delete":
				writes = true
				// It removes what it finds, directories too, the
				// deepest first: rules that name rm -rf hold it.
				rm := c.invocation(invocation{name: "rm", argv: []word{litWord("rm"), litWord("-r"), litWord("-f")}, cwd: inv.cwd, shown: "find -delete"})
				if c.rules(rm); c.deny != nil {
					return inv.cwd
				}
				continue
			case "-execdir", "-okdir":
				execdir = true
				fallthrough
			case "-exec", "-ok":
				k := j + 1
				for k < len(expr) && !(expr[k].lit && (expr[k].s == ";" || expr[k].s == "+")) {
					k++
				}
				execs = append(execs, expr[j+1:k])
				j = k
				continue
			case "-fprint", "-fprint0", "-fprintf", "-fls":
				writes = true
				if j+1 < len(expr) {
					c.usePath(inv, expr[j+1], pathUse{acc: accWrite})
				}
				j += findExpr[w.s]
				continue
			case "-newer", "-anewer", "-cnewer", "-samefile":
				if j+1 < len(expr) {
					c.usePath(inv, expr[j+1], pathUse{acc: accRead})
				}
			case "-files0-from":
				if !c.needBecause(inv, pExec, "-files0-from reads the starting points from a file, which the policy cannot check") {
					return inv.cwd
				}
				if j+1 < len(expr) {
					c.usePath(inv, expr[j+1], pathUse{acc: accRead})
				}
			case "-type":
				if j+1 < len(expr) && expr[j+1].lit && !strings.Contains(expr[j+1].s, "l") {
					noLinks = true
				}
			case "-name":
				if j+1 < len(expr) && expr[j+1].lit {
					names = append(names, expr[j+1].s)
				}
			}
			n, known := findExpr[w.s]
			if !known && strings.HasPrefix(w.s, "-newer") && len(w.s) == 8 {
				n, known = 1, true
			}
			if !known {
				if !c.needBecause(inv, pExec, "expression "+w.s+" is not one the policy knows for find") {
					return inv.cwd
				}
				continue
			}
			j += n
		}
		if execdir {
			// -execdir runs in every directory it finds, where relative paths
			// and links mean something else than from here.
			need |= pExec
		}
		if writes {
			need |= pWrite
		}
		if !c.need(inv, need) {
			return inv.cwd
		}
		for _, s := range startPoints {
			acc := accRead
			if writes {
				acc = accWrite
			}
			c.usePath(inv, s, pathUse{acc: acc, tree: true, follow: follow})
		}
		if !simple || follow {
			noLinks, names = false, nil
		}
		for _, argv := range execs {
			for _, s := range startPoints {
				inner := make([]word, len(argv))
				for k, w := range argv {
					switch {
					case w.lit && w.s == "{}":
						inner[k] = entriesWord(s, noLinks && !follow, names)
					case w.lit && strings.Contains(w.s, "{}"):
						inner[k] = dynWord("a path find fills in", w.source())
					default:
						inner[k] = w
					}
				}
				if len(inner) == 0 {
					c.denyf("shell:parse", "find -exec names no command")
					return inv.cwd
				}
				c.runExternal(inner, inv.cwd)
			}
		}
		return inv.cwd
	}
}

// entriesWord is a stand-in for every entry under the tree s names: what
// find's {} and a listing's lines are.
func entriesWord(s word, noLinks bool, names []string) word {
	w := s
	w.tree, w.entries, w.noLinks, w.names = true, true, noLinks, names
	return w
}

// taskFiles are the files of the directory it runs in that a task runner
// or build tool runs the commands of: a justfile, a Taskfile, a Rakefile,
// tasks.py, noxfile.py, tox.ini, conftest.py, setup.py, composer.json's
// scripts, a Gradle or Maven build, a Procfile (and direnv's .envrc, in
// registerRunners).
var taskFiles = map[string][]string{
	"just":     {"justfile", "Justfile", ".justfile"},
	"task":     {"Taskfile.yml", "Taskfile.yaml", "taskfile.yml", "taskfile.yaml", "Taskfile.dist.yml"},
	"go-task":  {"Taskfile.yml", "Taskfile.yaml", "taskfile.yml", "taskfile.yaml", "Taskfile.dist.yml"},
	"rake":     {"Rakefile", "rakefile", "Rakefile.rb", "rakefile.rb"},
	"invoke":   {"tasks.py", "invoke.yaml"},
	"inv":      {"tasks.py", "invoke.yaml"},
	"nox":      {"noxfile.py"},
	"tox":      {"tox.ini", "pyproject.toml", "setup.cfg"},
	"pytest":   {"conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"},
	"py.test":  {"conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"},
	"pip":      {"setup.py", "pyproject.toml"},
	"pip3":     {"setup.py", "pyproject.toml"},
	"poetry":   {"pyproject.toml"},
	"pdm":      {"pyproject.toml"},
	"hatch":    {"pyproject.toml"},
	"pipenv":   {"Pipfile"},
	"poe":      {"pyproject.toml", "poe_tasks.toml"},
	"earthly":  {"Earthfile"},
	"mage":     {"magefile.go"},
	"composer": {"composer.json"},
	"gradle":   {"build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts"},
	"mvn":      {"pom.xml"},
	"foreman":  {"Procfile"},
	"honcho":   {"Procfile"},
}

// withTaskFiles checks a task runner as h does, and, for a profile with
// command rules, holds the text of the files it runs the commands of
// (files, in the directory it runs in) to them, as make is held to its
// recipes and npm to its scripts: a justfile whose recipe is kubectl
// delete makes just deploy kubectl delete. The text is scanned as code
// the policy does not parse, leniently.
func withTaskFiles(h handler, files []string) handler {
	return func(c *checker, inv *invocation) cwds {
		out := h(c, inv)
		if c.deny != nil || len(inv.cwd) != 1 || len(c.p.denyCmds) == 0 && len(c.p.approvalCmds) == 0 {
			return out
		}
		for _, f := range files {
			if p := c.fileText(litWord(f), inv.cwd); p.kind == progText {
				c.ruleScan(p.text)
				if c.deny != nil {
					break
				}
			}
		}
		return out
	}
}

// withModuleTaskFiles checks python as h does, and python -m MODULE, for
// a module that is a task runner (pytest, tox, pip …), as withTaskFiles
// checks that runner.
func withModuleTaskFiles(h handler) handler {
	return func(c *checker, inv *invocation) cwds {
		out := h(c, inv)
		for i, w := range inv.argv[1:] {
			if !w.lit {
				continue
			}
			module := ""
			switch {
			case w.s == "-m" && i+2 < len(inv.argv) && inv.argv[i+2].lit:
				module = inv.argv[i+2].s
			case strings.HasPrefix(w.s, "-m") && len(w.s) > 2:
				module = w.s[2:]
			}
			if files, ok := taskFiles[module]; ok {
				return withTaskFiles(func(*checker, *invocation) cwds { return out }, files)(c, inv)
			}
			if module != "" || !strings.HasPrefix(w.s, "-") {
				break // the module or the script: the rest are its arguments
			}
		}
		return out
	}
}

// withScripts checks npm, yarn and pnpm as h does, and holds the scripts
// of the workspace's package.json the command runs (npm run clean, npm
// test, an install's lifecycle scripts, with their pre and post scripts)
// to the profile's rules, as make is held to its recipes.
func withScripts(h handler) handler {
	return func(c *checker, inv *invocation) cwds {
		out := h(c, inv)
		if c.deny == nil && len(inv.cwd) == 1 {
			c.packageScripts(inv)
		}
		return out
	}
}

func (c *checker) packageScripts(inv *invocation) {
	names := scriptNames(inv)
	if len(names) == 0 {
		return
	}
	p := c.fileText(litWord("package.json"), inv.cwd)
	if p.kind != progText {
		return
	}
	var pkg struct {
		Scripts map[string]string `json:"scripts"`
	}
	if json.Unmarshal([]byte(p.text), &pkg) != nil {
		return
	}
	var code strings.Builder
	if names[0] == "*" {
		names = slices.Sorted(maps.Keys(pkg.Scripts))
	}
	for _, n := range names {
		for _, k := range []string{"pre" + n, n, "post" + n} {
			if s, ok := pkg.Scripts[k]; ok {
				// Each line as a recipe line: sh runs it.
				code.WriteString("\t" + strings.ReplaceAll(s, "\n", "\n\t") + "\n")
			}
		}
	}
	c.scanCode(code.String(), langCode, inv.cwd)
}

// scriptNames returns the package.json scripts a command of npm, yarn or
// pnpm runs; a script the policy cannot name (npm run "$x") is every
// script.
func scriptNames(inv *invocation) []string {
	var words []word
	for _, w := range inv.argv[1:] {
		if w.lit && strings.HasPrefix(w.s, "-") {
			continue
		}
		words = append(words, w)
	}
	install := []string{"install", "prepare", "prepublish"}
	if len(words) == 0 {
		if inv.name == "npm" {
			return nil
		}
		return install
	}
	first := words[0]
	if !first.lit {
		return []string{"*"}
	}
	cmd := first.s
	if inv.name == "npm" {
		cmd = npmCanonical(cmd)
	}
	switch cmd {
	case "run", "run-script", "rum", "urn":
		if len(words) < 2 {
			return nil
		}
		if !words[1].lit {
			return []string{"*"}
		}
		return []string{words[1].s}
	case "test", "t", "tst":
		return []string{"test"}
	case "start", "stop", "restart":
		return []string{cmd}
	case "install", "i", "add", "ci", "clean-install", "install-clean", "isntall", "in":
		return install
	case "install-test", "install-ci-test", "it", "cit":
		return append(install, "test")
	}
	if inv.name == "npm" || yarnBuiltin(cmd) {
		return nil
	}
	// yarn NAME and pnpm NAME run the script NAME.
	return []string{cmd}
}

// yarnBuiltin reports a command of yarn or pnpm that is not a script.
func yarnBuiltin(cmd string) bool {
	switch cmd {
	case "add", "remove", "rm", "upgrade", "up", "update", "outdated", "audit", "info", "view", "why", "list", "ls",
		"link", "unlink", "pack", "publish", "init", "create", "dlx", "exec", "x", "config", "cache", "global",
		"import", "store", "env", "licenses", "version", "versions", "bin", "dedupe", "fetch", "patch", "rebuild",
		"prune", "server", "setup", "self-update", "workspace", "workspaces", "plugin", "node", "explain", "help",
		"set", "constraints", "npm", "login", "logout", "owner", "tag", "team", "generate-lock-entry",
		"check", "autoclean", "policies", "recursive", "root", "doctor", "deploy":
		return true
	}
	return false
}
