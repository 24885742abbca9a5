package policy

import (
	"slices"
	"strings"
)

// registerWrappers adds the commands that run another command: the command
// they run is checked instead, with their own options known exactly, so an
// option cannot hide the command or a program of its own.
func registerWrappers(reg func(handler, ...string)) {
	reg(envHandler(), "env")
	reg(wrapper(optSpec{short: "n", long: []string{"--adjustment"}, digits: true, strict: true}, 0), "nice")
	reg(wrapper(optSpec{strict: true}, 0), "nohup", "chronic", "caffeinate", "builtin")
	reg(wrapper(optSpec{flags: "p", strict: true}, 0), "unbuffer")
	reg(wrapper(optSpec{short: "sk", flags: "v", long: []string{"--signal", "--kill-after"},
		longFlags: []string{"--preserve-status", "--foreground", "--verbose"}, strict: true}, 1), "timeout")
	reg(wrapper(optSpec{short: "ioe", long: []string{"--input", "--output", "--error"}, strict: true}, 0), "stdbuf")
	reg(wrapper(optSpec{flags: "cfw", longFlags: []string{"--ctty", "--fork", "--wait"}, strict: true}, 0), "setsid")
	reg(wrapper(optSpec{short: "cnpPu", flags: "t", long: []string{"--class", "--classdata", "--pid", "--pgid", "--uid"},
		longFlags: []string{"--ignore"}, strict: true}, 0), "ionice")
	reg(xargsHandler(), "xargs")
	reg(watchHandler(), "watch")
	reg(flockHandler(), "flock")
	reg(parallelHandler, "parallel", "sem")
}

// wrapper returns a handler for a command that runs another: options
// (known exactly), skip more operands (timeout's duration), then the
// command.
func wrapper(spec optSpec, skip int) handler {
	t := spec.compile()
	return func(c *checker, inv *invocation) cwds {
		args := inv.argv[1:]
		i := 0
		for i < len(args) {
			w := args[i]
			if !w.lit || !strings.HasPrefix(w.s, "-") || w.s == "-" {
				break
			}
			if w.s == "--" {
				i++
				break
			}
			opts, next := optsAt(args, i, t)
			if !c.strictOpts(inv, t, opts) {
				return inv.cwd
			}
			i = next
		}
		i += skip
		if i >= len(args) {
			c.need(inv, pRead)
			return inv.cwd
		}
		return c.runExternal(args[i:], inv.cwd)
	}
}

// envHandler checks env: its assignments as the environment rules say,
// -C as a change of directory, -S as the words it splits into, and the
// command it runs.
func envHandler() handler {
	t := optSpec{short: "CSu", flags: "0iv", long: []string{"--chdir", "--split-string", "--unset"},
		longOpt:   []string{"--block-signal", "--default-signal", "--ignore-signal"},
		longFlags: []string{"--ignore-environment", "--null", "--debug", "--list-signal-handling", "--help", "--version"},
		strict:    true}.compile()
	var h handler
	h = func(c *checker, inv *invocation) cwds {
		args := inv.argv[1:]
		cwd := inv.cwd
		i := 0
		for i < len(args) {
			w := args[i]
			if w.lit && w.s == "-" {
				// env - is env -i.
				c.sandboxVarDeny("env -, which clears the environment,")
				return inv.cwd
			}
			if !w.lit || !strings.HasPrefix(w.s, "-") {
				break
			}
			if w.s == "--" {
				i++
				break
			}
			opts, next := optsAt(args, i, t)
			if !c.strictOpts(inv, t, opts) {
				return inv.cwd
			}
			i = next
			for _, o := range opts {
				switch o.name {
				case "-i", "--ignore-environment":
					c.sandboxVarDeny("env " + o.name + ", which clears the environment,")
					return inv.cwd
				case "-u", "--unset":
					switch {
					case o.val != nil && o.val.lit && sandboxVar(o.val.s):
						c.sandboxVarDeny("unsetting " + o.val.s)
						return inv.cwd
					case o.val != nil && !o.val.lit:
						c.denyf("shell:sandbox-environment", "env -u %s is not allowed: the policy cannot see which variable it unsets, and the sandbox's HOME and GIT_CONFIG_GLOBAL must stay", o.val.source())
						return inv.cwd
					}
				case "-S", "--split-string":
					if o.val == nil {
						continue
					}
					split, ok := envSplit(*o.val)
					if !ok {
						c.denyf("shell:dynamic-script", "env -S %s is not allowed: the policy cannot read the words it splits into", o.val.source())
						return inv.cwd
					}
					argv := append(append([]word{inv.argv[0]}, split...), args[i:]...)
					return h(c, c.invocation(invocation{name: inv.name, argv: argv, cwd: cwd, allowed: inv.allowed}))
				case "-C", "--chdir":
					if o.val != nil {
						cwd = c.chdir(inv, *o.val, cwd)
					}
				}
			}
			if c.deny != nil {
				return inv.cwd
			}
		}
		for ; i < len(args); i++ {
			w := args[i]
			name, value, ok := strings.Cut(w.s, "=")
			if !w.lit || !ok || !validName(name) {
				break
			}
			if inv.allowed {
				continue
			}
			if !c.envAssign(name, litWord(value), true, true) {
				return inv.cwd
			}
		}
		if i >= len(args) {
			c.need(inv, pRead)
			return inv.cwd
		}
		c.runExternal(args[i:], cwd)
		return inv.cwd
	}
	return h
}

// envSplit splits env -S's string the way env does: on spaces, with single
// and double quotes and backslash escapes; ${VAR} is not literal.
func envSplit(w word) ([]word, bool) {
	if !w.lit {
		return nil, false
	}
	var out []word
	var cur strings.Builder
	inWord := false
	s := w.s
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n':
			if inWord {
				out = append(out, litWord(cur.String()))
				cur.Reset()
				inWord = false
			}
		case ch == '#' && !inWord:
			i = len(s)
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case ch == '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '$' {
					return nil, false
				}
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				cur.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, false
			}
			i = j
			inWord = true
		case ch == '\\' && i+1 < len(s):
			i++
			switch s[i] {
			case '_':
				cur.WriteByte(' ')
			case 'n':
				cur.WriteByte('\n')
			case 't':
				cur.WriteByte('\t')
			case 'c':
				i = len(s)
			default:
				cur.WriteByte(s[i])
			}
			inWord = true
		case ch == '$':
			return nil, false
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		out = append(out, litWord(cur.String()))
	}
	return out, true
}

// chdir resolves a directory a wrapper changes into (env -C, git -C) and
// returns the new directories.
func (c *checker) chdir(inv *invocation, w word, cwd cwds) cwds {
	inv2 := c.invocation(invocation{name: inv.name, cwd: cwd, allowed: inv.allowed})
	c.usePath(inv2, w, pathUse{acc: accRead})
	if c.deny != nil || !w.lit {
		return cwd
	}
	var out cwds
	for _, d := range cwd {
		if r := c.resolve(d, w.s); r.in {
			out = union(out, cwds{r.abs})
		}
	}
	if len(out) == 0 {
		return cwd
	}
	return out
}

// xargsHandler checks the command xargs runs, with its arguments from
// standard input standing in: the entries of the tree a listing names
// (git ls-files, find), or words the policy cannot see.
func xargsHandler() handler {
	t := optSpec{short: "EILPadns", shortOpt: "eil", flags: "0oprtx",
		long: []string{"--arg-file", "--delimiter", "--max-args", "--max-chars", "--max-lines", "--max-procs",
			"--process-slot-var"},
		longOpt:   []string{"--eof", "--replace"},
		longFlags: []string{"--null", "--open-tty", "--interactive", "--no-run-if-empty", "--show-limits", "--verbose", "--exit", "--help", "--version"},
		strict:    true}.compile()
	return func(c *checker, inv *invocation) cwds {
		args := inv.argv[1:]
		// xargs stops reading options at its command.
		end := 0
		var opts []opt
		for end < len(args) {
			w := args[end]
			if !w.lit || !strings.HasPrefix(w.s, "-") || w.s == "-" {
				break
			}
			if w.s == "--" {
				end++
				break
			}
			o, next := optsAt(args, end, t)
			opts = append(opts, o...)
			end = next
		}
		if !c.strictOpts(inv, t, opts) {
			return inv.cwd
		}
		replace := ""
		fromFile := false
		for _, o := range opts {
			switch o.name {
			case "-I":
				if o.val != nil {
					replace = o.val.s
				}
			case "-i", "--replace":
				replace = "{}"
				if o.val != nil {
					replace = o.val.s
				}
			case "-a", "--arg-file":
				fromFile = true
				if o.val != nil {
					c.usePath(inv, *o.val, pathUse{acc: accRead})
				}
			}
		}
		cmd := slices.Clone(args[end:])
		if len(cmd) == 0 {
			cmd = []word{litWord("echo")}
		}
		var items []word
		if !fromFile && c.stdin != nil && c.stdin.kind == srcText {
			delim := byte(0)
			if hasOpt(opts, "-0", "--null") {
				delim = 0
			} else if v, ok := optVal(opts, "-d", "--delimiter"); ok && len(v.s) == 1 {
				delim = v.s[0]
			} else {
				delim = ' '
			}
			if texts, ok := xargsItems(c.stdin.text, delim, replace != ""); ok {
				for _, t := range texts {
					items = append(items, litWord(t))
				}
			}
		}
		if items == nil {
			stdin := dynWord("arguments xargs reads from standard input", "(standard input)")
			if !fromFile {
				stdin = c.listedWord(stdin)
			}
			items = []word{stdin}
		}
		if replace == "" {
			return c.runExternal(append(cmd, items...), inv.cwd)
		}
		for _, item := range items {
			inner := slices.Clone(cmd)
			for k, w := range inner {
				if w.lit && strings.Contains(w.s, replace) {
					switch {
					case w.s == replace:
						inner[k] = item
					case item.lit && !item.entries:
						inner[k] = litWord(strings.ReplaceAll(w.s, replace, item.s))
					default:
						inner[k] = dynWord("a word xargs fills in", w.source())
					}
				}
			}
			c.runExternal(inner, inv.cwd)
			if c.deny != nil {
				break
			}
		}
		return inv.cwd
	}
}

// xargsItems splits what xargs reads into its arguments: lines with -I,
// else words separated by blanks with quotes and backslashes, or by delim
// (-0, -d). ok is false for more than the policy checks one by one.
func xargsItems(text string, delim byte, lines bool) ([]string, bool) {
	var out []string
	switch {
	case lines:
		for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
			if strings.TrimSpace(l) != "" {
				out = append(out, strings.TrimLeft(l, " \t"))
			}
		}
	case delim != ' ':
		for _, f := range strings.Split(text, string(delim)) {
			if f != "" {
				out = append(out, f)
			}
		}
	default:
		var cur strings.Builder
		in, quote := false, byte(0)
		for i := 0; i < len(text); i++ {
			ch := text[i]
			switch {
			case quote != 0 && ch == quote:
				quote = 0
			case quote != 0:
				cur.WriteByte(ch)
			case ch == '\'' || ch == '"':
				quote, in = ch, true
			case ch == '\\' && i+1 < len(text):
				i++
				cur.WriteByte(text[i])
				in = true
			case ch == ' ' || ch == '\t' || ch == '\n':
				if in {
					out = append(out, cur.String())
					cur.Reset()
					in = false
				}
			default:
				cur.WriteByte(ch)
				in = true
			}
		}
		if quote != 0 {
			return nil, false
		}
		if in {
			out = append(out, cur.String())
		}
	}
	return out, len(out) <= maxLoopValues*4
}

// listedWord is what one line of standard input stands for when it comes
// from a listing of a tree: git ls-files, find (without -L or printf), ls.
// Otherwise it is w, a word the policy cannot see.
func (c *checker) listedWord(w word) word {
	if c.stdin == nil || c.stdin.listing.s == "" {
		return w
	}
	return c.stdin.listing
}

// watchHandler: watch runs its arguments through sh -c unless -x.
func watchHandler() handler {
	t := optSpec{short: "nq", shortOpt: "d", flags: "bceghptvwxr",
		long: []string{"--equexit", "--interval"}, longOpt: []string{"--differences"},
		longFlags: []string{"--beep", "--color", "--no-color", "--errexit", "--chgexit", "--no-title", "--precise",
			"--exec", "--no-wrap", "--no-linewrap", "--help", "--version", "--no-rerun"}, strict: true}.compile()
	return func(c *checker, inv *invocation) cwds {
		args := inv.argv[1:]
		end := 0
		var opts []opt
		for end < len(args) && args[end].lit && strings.HasPrefix(args[end].s, "-") {
			if args[end].s == "--" {
				end++
				break
			}
			o, next := optsAt(args, end, t)
			opts = append(opts, o...)
			end = next
		}
		if !c.strictOpts(inv, t, opts) {
			return inv.cwd
		}
		rest := args[end:]
		if len(rest) == 0 {
			return inv.cwd
		}
		if hasOpt(opts, "-x", "--exec") {
			return c.runExternal(rest, inv.cwd)
		}
		return c.joinedScript(inv, rest, false)
	}
}

func flockHandler() handler {
	return func(c *checker, inv *invocation) cwds {
		args := inv.argv[1:]
		i := 0
		for ; i < len(args) && args[i].lit && strings.HasPrefix(args[i].s, "-"); i++ {
			switch s := args[i].s; s {
			case "-c", "--command":
				if i+1 < len(args) {
					return c.shellString(inv, args[i+1])
				}
			case "-w", "--timeout", "-E", "--conflict-exit-code":
				i++
			case "-s", "--shared", "-x", "-e", "--exclusive", "-u", "--unlock", "-n", "--nb", "--nonblock", "-o",
				"--close", "-F", "--no-fork", "--verbose", "-h", "--help", "-V", "--version":
			default:
				if !c.needBecause(inv, pExec, "option "+s+" is not one the policy knows for flock") {
					return inv.cwd
				}
			}
		}
		if i >= len(args) {
			return inv.cwd
		}
		lock := args[i]
		if !(lock.lit && isDigits(lock.s)) {
			c.need(inv, pWrite)
			c.usePath(inv, lock, pathUse{acc: accWrite, meta: true})
		}
		rest := args[i+1:]
		if len(rest) >= 2 && rest[0].lit && (rest[0].s == "-c" || rest[0].s == "--command") {
			return c.shellString(inv, rest[1])
		}
		if len(rest) == 0 {
			return inv.cwd
		}
		return c.runExternal(rest, inv.cwd)
	}
}

// parallelHandler checks GNU parallel: it runs its command template
// through a shell for every argument (after :::, or read from standard
// input), or runs each argument as a command when it has none. It needs
// exec (it reads its profile and configuration from the workspace), and
// every command it would run is checked.
func parallelHandler(c *checker, inv *invocation) cwds {
	if !c.needBecause(inv, pExec, "it reads options from ~/.parallel, which the workspace holds") {
		return inv.cwd
	}
	args := inv.argv[1:]
	i := 0
	for ; i < len(args); i++ {
		w := args[i]
		if !w.lit || !strings.HasPrefix(w.s, "-") || w.s == ":::" || w.s == "::::" {
			break
		}
		switch w.s {
		case "-j", "--jobs", "-S", "--sshlogin", "--sshloginfile", "-a", "--arg-file", "--colsep", "-d", "--delimiter",
			"-E", "-I", "--timeout", "--joblog", "--results", "--tmpdir", "--workdir", "--wd", "-N", "-n", "--max-args",
			"-L", "--max-lines", "--retries", "--memfree", "--load", "--delay", "--tag-string", "--basefile", "--bf",
			"--return", "--env", "--profile", "-J", "--shebang", "--hostgroups", "--limit", "--termseq", "--tmux":
			i++
		}
	}
	var template []word
	for ; i < len(args); i++ {
		if args[i].lit && (args[i].s == ":::" || args[i].s == "::::" || args[i].s == ":::+" || args[i].s == "::::+") {
			break
		}
		template = append(template, args[i])
	}
	var inputs []word
	for ; i < len(args); i++ {
		if args[i].lit && strings.HasPrefix(args[i].s, "::::") {
			c.denyf("shell:dynamic-script", "parallel :::: reads its arguments from a file; the policy cannot see the commands it would run")
			return inv.cwd
		}
		if args[i].lit && strings.HasPrefix(args[i].s, ":::") {
			continue
		}
		inputs = append(inputs, args[i])
	}
	if len(inputs) == 0 {
		inputs = []word{c.listedWord(dynWord("arguments parallel reads from standard input", "(standard input)"))}
	}
	for _, in := range inputs {
		if len(template) == 0 {
			c.shellString(inv, in)
		} else {
			var parts []string
			replaced := false
			for _, w := range template {
				if !w.lit {
					c.denyf("shell:dynamic-script", "parallel runs %s as shell code, and it is not a literal", w.source())
					return inv.cwd
				}
				s := w.s
				if strings.Contains(s, "{") {
					if !in.lit {
						c.denyf("shell:dynamic-script", "parallel fills %s with %s, which the policy cannot see", w.source(), in.source())
						return inv.cwd
					}
					s = replaceParallel(s, in.s)
					replaced = true
				}
				parts = append(parts, s)
			}
			if !replaced {
				if !in.lit {
					argv := append(slices.Clone(template), in)
					c.runExternal(argv, inv.cwd)
					continue
				}
				parts = append(parts, quoteShell(in.s))
			}
			c.nestedText(strings.Join(parts, " "), inv.cwd)
		}
		if c.deny != nil {
			return inv.cwd
		}
	}
	return inv.cwd
}

// replaceParallel fills parallel's replacement strings ({}, {.}, {/} …)
// with an argument, quoted as parallel quotes it.
func replaceParallel(s, arg string) string {
	for _, r := range []string{"{}", "{.}", "{/}", "{//}", "{/.}", "{#}", "{%}", "{1}", "{2}"} {
		s = strings.ReplaceAll(s, r, quoteShell(arg))
	}
	return s
}

// quoteShell quotes s as one shell word.
func quoteShell(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// registerRunners adds programs that run a command they are given: the
// program needs exec, and the command is checked as the command it is.
func registerRunners(reg func(handler, ...string)) {
	reg(runner(optSpec{short: "abeEIoOpPsSuUX", flags: "cCdDfFhiknqrtTvVwxyzZ"}, 0, ""), "strace", "ltrace")
	reg(runner(optSpec{}, 0, ""), "valgrind", "xvfb-run", "dbus-run-session", "fakeroot", "chronic")
	reg(runner(optSpec{short: "pc", long: []string{"--package", "--call"}, flags: "yq", longFlags: []string{"--yes", "--no", "--quiet"}}, 0, "-c"), "npx", "bunx", "pnpx")
	reg(runner(optSpec{short: "en", long: []string{"--event", "--pid"}}, 1, ""), "perf")
	reg(runner(optSpec{long: []string{"--with", "--python", "--directory", "--project", "--env-file", "--index-url"}}, 1, ""), "uv", "poetry", "pipenv", "hatch", "pdm")
	reg(runner(optSpec{}, 1, ""), "bundle", "asdf", "mise", "rtx", "conda", "micromamba", "mamba")
	// direnv runs the .envrc of the directory before the command.
	reg(withTaskFiles(runner(optSpec{}, 1, ""), []string{".envrc"}), "direnv")
	reg(withScripts(runner(optSpec{}, 1, "")), "pnpm", "yarn")
	reg(runner(optSpec{long: []string{"--run", "--command", "-p", "--packages", "-I", "--arg", "--argstr"}}, 0, "--run"), "nix-shell")
}

// runner returns a handler for a program that runs a command: after its
// options (and sub leading words, a subcommand such as uv run), the rest
// is the command, or the value of shellOpt is a shell command line. A
// subcommand that runs nothing needs only exec.
func runner(spec optSpec, sub int, shellOpt string) handler {
	t := spec.compile()
	return func(c *checker, inv *invocation) cwds {
		if !c.needBecause(inv, pExec, "it runs programs") {
			return inv.cwd
		}
		args := inv.argv[1:]
		c.ruleScanWords(args)
		if c.deny != nil {
			return inv.cwd
		}
		if sub > 0 && len(args) > 0 && args[0].lit {
			switch args[0].s {
			case "run", "exec", "x", "dlx", "record", "stat", "trace":
			default:
				c.pathLikeArgs(inv, args)
				return inv.cwd
			}
		}
		i := min(sub, len(args))
		for i < len(args) {
			w := args[i]
			if !w.lit || !strings.HasPrefix(w.s, "-") || w.s == "-" {
				break
			}
			if w.s == "--" {
				i++
				break
			}
			opts, next := optsAt(args, i, t)
			for _, o := range opts {
				if shellOpt != "" && o.name == shellOpt && o.val != nil {
					c.shellString(inv, *o.val)
					return inv.cwd
				}
			}
			i = next
		}
		if i >= len(args) {
			return inv.cwd
		}
		if inv.name == "direnv" && i+1 < len(args) {
			// direnv exec DIR COMMAND
			i++
		}
		return c.runExternal(args[i:], inv.cwd)
	}
}
