package policy

import (
	"path"
	"strings"
)

// Interpreters run programs. A program written in the command itself
// (bash -c 'ls', awk '{print $1}', sed -n 1p) is checked as what it does. A
// program an interpreter reads from standard input or a here-document needs
// exec, and what the policy can see of it is checked too, so a command the
// profile denies or wants approved is caught wherever it is fed. A script
// file is checked as what it does for a profile without exec, and read
// leniently (command rules and permissions of the commands in it) for one
// with it. A program the policy cannot see (base64 -d | sh, sh "$x", a file
// an earlier command of the script filled) is refused.

// language is how the policy reads a program.
type language uint8

const (
	langUnknown    language = iota
	langShell               // bash and POSIX shells: parsed and checked
	langOtherShell          // zsh, fish, csh …: read as shell, leniently
	langAwk
	langSed
	langCode   // python, perl, ruby, node, tcl …: command lines in it scanned
	langEditor // vim, ex, ed: ! commands scanned
	langBinary // a compiled program
)

// runFile checks running the file w with args: a script, with its
// interpreter from its #! line, or a binary.
func (c *checker) runFile(inv *invocation, w word, args []word, lang language) cwds {
	prog := c.fileProgram(w, inv.cwd)
	if c.deny != nil {
		return inv.cwd
	}
	if lang == langUnknown {
		lang = programLanguage(prog)
	}
	out := c.runProgram(inv, prog, lang, inv.cwd, false)
	if c.deny == nil {
		c.pathLikeArgs(inv, args)
		c.ruleScanWords(args)
	}
	return out
}

// programLanguage tells a file's language from its #! line; text without
// one is run by the shell.
func programLanguage(p program) language {
	switch p.kind {
	case progText:
	case progNone:
		return langShell
	default:
		return langBinary
	}
	line, _, _ := strings.Cut(p.text, "\n")
	if !strings.HasPrefix(line, "#!") {
		return langShell
	}
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if len(fields) == 0 {
		return langShell
	}
	interp := path.Base(fields[0])
	if interp == "env" {
		for _, f := range fields[1:] {
			if !strings.HasPrefix(f, "-") {
				interp = path.Base(f)
				break
			}
		}
	}
	switch interp {
	case "sh", "bash", "dash", "ash", "ksh", "mksh", "rbash":
		return langShell
	case "zsh", "fish", "csh", "tcsh", "yash":
		return langOtherShell
	case "awk", "gawk", "mawk", "nawk":
		return langAwk
	case "sed", "gsed":
		return langSed
	}
	return langCode
}

// runProgram checks an interpreter running prog. sourced means it runs in
// the current shell (source), so a cd in it is followed.
func (c *checker) runProgram(inv *invocation, prog program, lang language, cwd cwds, sourced bool) cwds {
	switch prog.kind {
	case progHidden:
		c.denyf("shell:hidden-program", "%s would run a program it reads from %s, which is %s; the policy cannot see what it would run: write the commands out (bash -c '…') so they can be checked",
			inv.name, prog.where, prog.text)
		return cwd
	case progDynamic:
		c.denyf("shell:dynamic-script", "%s would run %s as a program, and it is not a literal (it contains %s); the policy cannot see what would run", inv.name, prog.where, prog.text)
		return cwd
	case progOutside:
		return cwd
	}
	switch lang {
	case langShell:
		return c.runShell(inv, prog, cwd, sourced)
	case langAwk:
		if prog.kind == progText {
			c.awkProgram(inv, prog.text, cwd)
			return cwd
		}
	case langSed:
		if prog.kind == progText {
			c.sedProgram(inv, prog.text, cwd)
			return cwd
		}
	}
	why := "it runs a program the policy cannot read"
	if prog.kind == progText {
		why = "it runs code the policy cannot check"
	}
	if !c.needBecause(inv, pExec, why) {
		return cwd
	}
	if prog.kind == progText {
		c.scanCode(prog.text, lang, cwd)
	}
	return cwd
}

// runShell checks a shell running prog.
func (c *checker) runShell(inv *invocation, prog program, cwd cwds, sourced bool) cwds {
	switch {
	case prog.kind != progText:
		c.needBecause(inv, pExec, "it runs "+prog.where+", which the policy cannot read")
		return cwd
	case prog.literal && prog.where == "" && !prog.stdin:
		// bash -c '…'
		return c.nested(prog, cwd, sourced, "")
	case prog.stdin || prog.literal:
		if !c.needBecause(inv, pExec, "it reads its program from "+prog.where) {
			return cwd
		}
		if !prog.literal {
			c.lenient++
			defer func() { c.lenient-- }()
		}
		if prog.stdin {
			// The commands of a program read on standard input read the
			// rest of it.
			outer := c.stdin
			c.stdin = hidden("the rest of the program " + inv.name + " reads")
			defer func() { c.stdin = outer }()
		}
		return c.nested(prog, cwd, sourced, "")
	case !c.perms.has(pExec) && !inv.allowed:
		// A script file: checked as what it does.
		return c.nested(prog, cwd, sourced, prog.where)
	}
	c.used |= pExec
	c.lenient++
	c.nested(prog, cwd, false, prog.where)
	c.lenient--
	return cwd
}

// nested checks a shell program: in a subshell unless sourced. where names
// the file it came from, for messages.
func (c *checker) nested(prog program, cwd cwds, sourced bool, where string) cwds {
	before := c.deny
	if !sourced {
		c.enter()
	}
	outerArgs, outerKnown := c.posArgs, c.posKnown
	if prog.args != nil || !sourced {
		c.posArgs, c.posKnown = prog.args, prog.args != nil
	}
	out := c.script(prog.text, cwd)
	c.posArgs, c.posKnown = outerArgs, outerKnown
	if !sourced {
		c.leave()
		out = cwd
	}
	if before == nil && c.deny != nil && where != "" {
		c.deny.reason = where + ": " + c.deny.reason
	}
	return out
}

// nestedText checks shell code a command runs in a subshell, with no
// arguments.
func (c *checker) nestedText(text string, cwd cwds) {
	c.nested(program{kind: progText, text: text, literal: true, args: []word{}}, cwd, false, "")
}

// shellHandler checks bash, sh and their kin: -c SCRIPT is checked as what
// it does; a script file, standard input or a here-document as runProgram
// says; options that read start-up files need exec.
func shellHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	command := false
	hidden := ""
	fromStdin := false
	i := 0
	for ; i < len(args); i++ {
		w := args[i]
		if !w.lit || (!strings.HasPrefix(w.s, "-") && !strings.HasPrefix(w.s, "+")) || w.s == "-" {
			break
		}
		switch {
		case w.s == "--":
			i++
			goto operands
		case w.s == "-o" || w.s == "+o":
			i++
			if i < len(args) && args[i].lit && (args[i].s == "allexport" || args[i].s == "keyword") && w.s == "-o" {
				hidden = w.s + " " + args[i].s
			}
		case w.s == "-O" || w.s == "+O":
			i++
			if w.s == "-O" && i < len(args) {
				if !args[i].lit {
					c.denyf("shell:environment", "%s -O with an option that is not a literal is not allowed", inv.name)
					return inv.cwd
				}
				if !c.shoptOption(inv, args[i].s) {
					return inv.cwd
				}
			}
		case w.s == "--rcfile" || w.s == "--init-file":
			hidden = w.s
			i++
		case w.s == "--login" || w.s == "--debugger":
			hidden = w.s
		case w.s == "--norc" || w.s == "--noprofile" || w.s == "--posix" || w.s == "--restricted" ||
			w.s == "--verbose" || w.s == "--version" || w.s == "--help" || w.s == "--noediting" ||
			w.s == "--dump-strings" || w.s == "--dump-po-strings" || w.s == "--pretty-print":
		case strings.HasPrefix(w.s, "--"):
			hidden = w.s
		default:
			flags := w.s[1:]
			for j := 0; j < len(flags); j++ {
				switch flags[j] {
				case 'c':
					command = true
				case 's':
					fromStdin = true
				case 'i', 'l', 'a', 'k':
					hidden = w.s
				case 'r', 'D', 'n', 'v', 'x', 'e', 'u', 'f', 'h', 'm', 'p', 't', 'b', 'B', 'C', 'E', 'H', 'P', 'T':
				case 'o', 'O':
					i++
					if flags[j] == 'O' && w.s[0] == '-' && i < len(args) && args[i].lit && !c.shoptOption(inv, args[i].s) {
						return inv.cwd
					}
				default:
					hidden = w.s
				}
			}
		}
	}
operands:
	rest := args[min(i, len(args)):]
	// Start-up files, interactive mode, options that export every
	// assignment: code the policy does not read, beside the script it
	// does, which is checked all the same (bash -lc 'kubectl delete …').
	if hidden != "" && !c.needBecause(inv, pExec, "option "+hidden+" runs code the policy cannot see") {
		return inv.cwd
	}
	switch {
	case command:
		if len(rest) == 0 {
			c.denyf("shell:parse", "%s -c names no command", inv.name)
			return inv.cwd
		}
		return c.shellStringArgs(inv, rest[0], rest[1:])
	case fromStdin || len(rest) == 0:
		return c.runProgram(inv, c.stdinProgram(inv.cwd), langShell, inv.cwd, false)
	}
	out := c.runProgram(inv, c.fileProgram(rest[0], inv.cwd), langShell, inv.cwd, false)
	if c.deny == nil {
		c.pathLikeArgs(inv, rest[1:])
	}
	return out
}

// shellString checks a word a command runs as a shell script, in a
// subshell, with no arguments.
func (c *checker) shellString(inv *invocation, w word) cwds {
	return c.shellStringArgs(inv, w, nil)
}

// shellStringArgs is shellString for bash -c SCRIPT NAME ARGS…: ARGS are
// its positional parameters.
func (c *checker) shellStringArgs(inv *invocation, w word, args []word) cwds {
	if !w.lit {
		c.denyf("shell:dynamic-script", "%s runs %s as shell code, and it is not a literal (it contains %s); the policy cannot see what would run", inv.name, w.source(), w.dyn)
		return inv.cwd
	}
	pos := []word{}
	if len(args) > 1 {
		pos = args[1:]
	}
	return c.runProgram(inv, program{kind: progText, text: w.s, literal: true, args: pos}, langShell, inv.cwd, false)
}

// otherShellHandler checks zsh, fish, csh and other shells whose syntax is
// not bash's: they need exec, and their programs are read leniently.
func otherShellHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	var prog program
	found := false
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.lit && (w.s == "-c" || strings.HasPrefix(w.s, "-") && strings.HasSuffix(w.s, "c") && !strings.HasPrefix(w.s, "--")) {
			if i+1 < len(args) {
				if !args[i+1].lit {
					prog = program{kind: progDynamic, where: args[i+1].source(), text: args[i+1].dyn}
				} else {
					prog = program{kind: progText, text: args[i+1].s, literal: true}
				}
				found = true
			}
			break
		}
		if w.lit && strings.HasPrefix(w.s, "-") {
			continue
		}
		prog, found = c.fileProgram(w, inv.cwd), true
		break
	}
	if !found {
		prog = c.stdinProgram(inv.cwd)
	}
	if c.deny != nil {
		return inv.cwd
	}
	out := c.runProgram(inv, prog, langOtherShell, inv.cwd, false)
	c.ruleScanWords(args)
	return out
}

// interpreter describes a language's interpreter: the options whose value
// is the program (python -c, perl -e), the options that take some other
// value, and whether options may follow the script.
type interpreter struct {
	lang language
	// code are the options whose value is code; codeLong their long
	// forms.
	code     string
	codeLong []string
	// vals are the short options taking some other value; valsLong the
	// long ones.
	vals     string
	valsLong []string
	// noScript means operands are not a script file (sqlite3's database).
	noScript bool
}

// interpHandler checks an interpreter: it needs exec, its program is read
// for command lines, the commands the profile's rules name are looked for
// in it, and a program it cannot see is refused.
func (ip interpreter) handler() handler {
	return func(c *checker, inv *invocation) cwds {
		args := inv.argv[1:]
		var code []string
		var prog program
		hasProg := false
		i := 0
		for ; i < len(args); i++ {
			w := args[i]
			if !w.lit || w.s == "-" || !strings.HasPrefix(w.s, "-") {
				break
			}
			if w.s == "--" {
				i++
				break
			}
			if strings.HasPrefix(w.s, "--") || contains(ip.codeLong, w.s) || contains(ip.valsLong, w.s) {
				name, val, hasVal := strings.Cut(w.s, "=")
				isCode := contains(ip.codeLong, name)
				takes := isCode || contains(ip.valsLong, name)
				if takes && !hasVal && i+1 < len(args) {
					i++
					if !args[i].lit {
						prog, hasProg = program{kind: progDynamic, where: args[i].source(), text: args[i].dyn}, true
						continue
					}
					val = args[i].s
				}
				if isCode {
					code = append(code, val)
				}
				continue
			}
			for j := 1; j < len(w.s); j++ {
				ch := w.s[j]
				isCode := strings.IndexByte(ip.code, ch) >= 0
				if !isCode && strings.IndexByte(ip.vals, ch) < 0 {
					continue
				}
				val := w.s[j+1:]
				if val == "" && i+1 < len(args) {
					i++
					if !args[i].lit {
						if isCode {
							prog, hasProg = program{kind: progDynamic, where: args[i].source(), text: args[i].dyn}, true
						}
						break
					}
					val = args[i].s
				}
				if isCode {
					code = append(code, val)
				}
				break
			}
		}
		rest := args[min(i, len(args)):]
		switch {
		case hasProg:
		case len(code) > 0:
			prog = program{kind: progText, text: strings.Join(code, "\n"), literal: true}
		case ip.noScript:
			prog = c.stdinProgram(inv.cwd)
			if len(rest) > 1 {
				var b strings.Builder
				for _, w := range rest[1:] {
					b.WriteString(w.s)
					b.WriteByte('\n')
				}
				prog = program{kind: progText, text: b.String(), literal: true}
			}
		case len(rest) == 0:
			prog = c.stdinProgram(inv.cwd)
		default:
			prog = c.fileProgram(rest[0], inv.cwd)
			rest = rest[1:]
		}
		if c.deny != nil {
			return inv.cwd
		}
		out := c.runProgram(inv, prog, ip.lang, inv.cwd, false)
		if c.deny == nil {
			c.pathLikeArgs(inv, rest)
			// Code the options above did not find (an option the table
			// does not know takes it) is in the arguments.
			var b strings.Builder
			for _, w := range inv.argv[1:] {
				if w.lit {
					b.WriteString(w.s)
					b.WriteByte('\n')
				}
			}
			c.scanCode(b.String(), ip.lang, inv.cwd)
		}
		return out
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// sourceHandler checks source and .: the file runs in the current shell.
// A literal file in the workspace is checked as what it does; anything
// else needs exec, and a program the policy cannot see is refused.
func sourceHandler(c *checker, inv *invocation) cwds {
	if len(inv.argv) < 2 {
		c.denyf("shell:parse", "%s names no file", inv.name)
		return inv.cwd
	}
	prog := c.fileProgram(inv.argv[1], inv.cwd)
	if c.deny != nil {
		return inv.cwd
	}
	return c.runProgram(inv, prog, langShell, inv.cwd, true)
}

// evalHandler: eval runs its words, joined, in the current shell.
func evalHandler(c *checker, inv *invocation) cwds {
	return c.joinedScript(inv, inv.argv[1:], true)
}

// joinedScript checks words a command joins with spaces and hands to a
// shell (watch, eval, git submodule foreach).
func (c *checker) joinedScript(inv *invocation, args []word, sameShell bool) cwds {
	parts := make([]string, 0, len(args))
	for _, w := range args {
		if !w.lit {
			c.denyf("shell:dynamic-script", "%s runs %s as shell code, and it is not a literal (it contains %s); the policy cannot see what would run", inv.name, w.source(), w.dyn)
			return inv.cwd
		}
		parts = append(parts, w.s)
	}
	if sameShell {
		return c.script(strings.Join(parts, " "), inv.cwd)
	}
	c.nestedText(strings.Join(parts, " "), inv.cwd)
	return inv.cwd
}

// scriptHandler checks script(1): -c COMMAND is run by a shell, anything
// else starts an interactive shell reading standard input; the typescript
// is written to FILE, ./typescript by default.
func scriptHandler() handler {
	t := optSpec{short: "cIOBTEom", shortOpt: "t", flags: "aefqhVdk",
		long: []string{"--command", "--log-in", "--log-out", "--log-io", "--log-timing", "--echo",
			"--output-limit", "--logging-format"},
		longOpt:   []string{"--timing"},
		longFlags: []string{"--append", "--return", "--flush", "--force", "--quiet", "--help", "--version"},
		strict:    true}.compile()
	return func(c *checker, inv *invocation) cwds {
		opts, pos := parseOpts(inv.argv[1:], t)
		if !c.strictOpts(inv, t, opts) {
			return inv.cwd
		}
		file := litWord("typescript")
		if len(pos) > 0 {
			file = pos[0]
		}
		logs := []word{file}
		for _, o := range opts {
			if o.val != nil && (o.name == "-I" || o.name == "-O" || o.name == "-B" || o.name == "-T" || o.name == "-t" ||
				o.name == "--log-in" || o.name == "--log-out" || o.name == "--log-io" || o.name == "--log-timing" || o.name == "--timing") {
				logs = append(logs, *o.val)
			}
		}
		for _, l := range logs {
			if l.lit && (l.s == "/dev/null" || l.s == "-") {
				continue
			}
			if !c.need(inv, pWrite) {
				return inv.cwd
			}
			c.usePath(inv, l, pathUse{acc: accWrite})
		}
		if cmd, ok := optVal(opts, "-c", "--command"); ok {
			return c.shellString(inv, cmd)
		}
		return c.runProgram(inv, c.stdinProgram(inv.cwd), langShell, inv.cwd, false)
	}
}

// busyboxHandler: busybox APPLET runs the applet, which is checked as the
// command of that name.
func busyboxHandler(c *checker, inv *invocation) cwds {
	if len(inv.argv) < 2 {
		c.need(inv, pRead)
		return inv.cwd
	}
	if w := inv.argv[1]; w.lit && strings.HasPrefix(w.s, "-") {
		c.need(inv, pRead)
		return inv.cwd
	}
	return c.runExternal(inv.argv[1:], inv.cwd)
}

// coreutilsHandler: the multi-call coreutils runs the program its
// --coreutils-prog option names with the arguments after it, which is
// checked as the command of that name.
func coreutilsHandler(c *checker, inv *invocation) cwds {
	if len(inv.argv) < 2 {
		c.need(inv, pRead)
		return inv.cwd
	}
	w := inv.argv[1]
	if w.lit {
		for _, opt := range []string{"--coreutils-prog=", "--coreutils-prog-shebang="} {
			if prog, ok := strings.CutPrefix(w.s, opt); ok {
				argv := append([]word{litWord(prog)}, inv.argv[2:]...)
				return c.runExternal(argv, inv.cwd)
			}
		}
		if w.s == "--help" || w.s == "--version" {
			c.need(inv, pRead)
			return inv.cwd
		}
	}
	c.needBecause(inv, pExec, "the program it runs is not one the policy can see")
	return inv.cwd
}

// editorHandler checks an editor run as a program: editors read start-up
// files from the workspace (.vimrc, .emacs) and run commands from their
// command lines (vim -c '!…', emacs --eval), so they need exec; the
// commands in -c, +cmd, --cmd, --eval and what they read on standard input
// are scanned.
func editorHandler(valueOpts []string, codeOpts []string) handler {
	return func(c *checker, inv *invocation) cwds {
		if !c.needBecause(inv, pExec, "editors run commands from their start-up files and command lines") {
			return inv.cwd
		}
		args := inv.argv[1:]
		var code strings.Builder
		stdin := false
		for i := 0; i < len(args); i++ {
			w := args[i]
			if !w.lit {
				continue
			}
			switch {
			case strings.HasPrefix(w.s, "+"):
				code.WriteString(w.s[1:])
				code.WriteByte('\n')
			case contains(codeOpts, w.s):
				if i+1 < len(args) {
					i++
					if !args[i].lit {
						c.denyf("shell:dynamic-script", "%s runs %s as editor commands, and it is not a literal", inv.name, args[i].source())
						return inv.cwd
					}
					code.WriteString(args[i].s)
					code.WriteByte('\n')
				}
			case contains(valueOpts, w.s):
				if i+1 < len(args) {
					i++
					if args[i].lit && args[i].s == "-" {
						stdin = true
					} else {
						c.usePath(inv, args[i], pathUse{acc: accRead})
						if p := c.fileProgram(args[i], inv.cwd); p.kind == progText {
							code.WriteString(p.text)
						} else if p.kind == progHidden || p.kind == progDynamic {
							c.runProgram(inv, p, langEditor, inv.cwd, false)
							return inv.cwd
						}
					}
				}
			case w.s == "-es" || w.s == "-Es" || w.s == "-e" || w.s == "-E" || w.s == "--script" || w.s == "-s":
				stdin = stdin || strings.HasSuffix(w.s, "s") || inv.name == "ex"
			case strings.HasPrefix(w.s, "-"):
			default:
				c.usePath(inv, w, pathUse{acc: accWrite})
			}
			if c.deny != nil {
				return inv.cwd
			}
		}
		if stdin || inv.name == "ed" || inv.name == "red" || inv.name == "ex" || inv.name == "dc" {
			p := c.stdinProgram(inv.cwd)
			if p.kind == progHidden || p.kind == progDynamic {
				c.runProgram(inv, p, langEditor, inv.cwd, false)
				return inv.cwd
			}
			if p.kind == progText {
				code.WriteString(p.text)
			}
		}
		c.scanCode(code.String(), langEditor, inv.cwd)
		c.ruleScanWords(args)
		return inv.cwd
	}
}

// makeHandler: make runs the recipes of a makefile, which needs exec; the
// variables and --eval text on its command line, and a makefile read from
// standard input, are scanned for commands.
func makeHandler(c *checker, inv *invocation) cwds {
	if !c.needBecause(inv, pExec, "it runs the recipes of a makefile") {
		return inv.cwd
	}
	args := inv.argv[1:]
	var code strings.Builder
	var targets []string
	makefile, dir := false, ""
	var onDisk []string
	for i := 0; i < len(args); i++ {
		w := args[i]
		if !w.lit {
			continue
		}
		name, val, hasVal := strings.Cut(w.s, "=")
		switch {
		case w.s == "-f" || w.s == "--file" || w.s == "--makefile":
			makefile = true
			if i+1 < len(args) {
				i++
				if p := c.fileProgram(args[i], inv.cwd); p.kind == progHidden || p.kind == progDynamic {
					c.runProgram(inv, p, langCode, inv.cwd, false)
					return inv.cwd
				} else if p.literal {
					code.WriteString(p.text)
				} else if p.kind == progText {
					onDisk = append(onDisk, p.text)
				}
			}
		case !strings.HasPrefix(w.s, "-") && !hasVal:
			targets = append(targets, w.s)
		case w.s == "-C" || w.s == "--directory" || w.s == "-I" || w.s == "--include-dir" || w.s == "-o" ||
			w.s == "-W" || w.s == "--old-file" || w.s == "--what-if" || w.s == "--new-file" || w.s == "--assume-new" ||
			w.s == "--assume-old" || w.s == "-j" || w.s == "-l":
			if i+1 < len(args) && w.s != "-j" && w.s != "-l" {
				i++
				c.usePath(inv, args[i], pathUse{acc: accRead})
				if (w.s == "-C" || w.s == "--directory") && args[i].lit {
					dir = path.Join(dir, args[i].s)
				}
			}
		case strings.HasPrefix(w.s, "--directory=") || strings.HasPrefix(w.s, "-C") && len(w.s) > 2:
			d := strings.TrimPrefix(strings.TrimPrefix(w.s, "--directory="), "-C")
			c.usePath(inv, litWord(d), pathUse{acc: accRead})
			dir = path.Join(dir, d)
		case strings.HasPrefix(w.s, "--eval="):
			code.WriteString(strings.TrimPrefix(w.s, "--eval="))
			code.WriteByte('\n')
		case w.s == "--eval" || w.s == "-E":
			if i+1 < len(args) {
				i++
				code.WriteString(args[i].s)
				code.WriteByte('\n')
			}
		case !strings.HasPrefix(w.s, "-") && hasVal && validName(strings.TrimSuffix(strings.TrimSuffix(name, ":"), "+")):
			// VAR=value: a recipe may run it ($(CC)), and $(shell …) in it
			// runs.
			code.WriteString("\t" + val + "\n")
		}
		if c.deny != nil {
			return inv.cwd
		}
	}
	if !makefile && len(inv.cwd) == 1 {
		// The makefile make finds first in its directory.
		for _, name := range []string{"GNUmakefile", "makefile", "Makefile"} {
			if p := c.fileText(litWord(path.Join(dir, name)), inv.cwd); p.kind == progText {
				if p.literal {
					code.WriteString(p.text)
				} else {
					onDisk = append(onDisk, p.text)
				}
				break
			}
		}
	}
	// Of a makefile the repository holds, the recipes the targets run
	// (and their prerequisites'), with its variables: a net for the
	// profile's rules (make clean running rm -rf), not the file's every
	// target.
	for _, text := range onDisk {
		code.WriteString(makeRecipes(text, targets))
	}
	c.scanCode(code.String(), langCode, inv.cwd)
	c.ruleScanWords(args)
	return inv.cwd
}

// makeRecipes returns the recipe lines of text, a makefile, that making
// targets (its first target when none) runs: theirs and their
// prerequisites', every variable assignment, and every recipe when a
// target has no rule of its own (a pattern rule may make it).
func makeRecipes(text string, targets []string) string {
	lines := strings.Split(strings.ReplaceAll(text, "\\\n", " "), "\n")
	rules := map[string][]string{}
	prereqs := map[string][]string{}
	var vars strings.Builder
	var cur []string
	first := ""
	for _, l := range lines {
		if strings.HasPrefix(l, "\t") {
			for _, t := range cur {
				rules[t] = append(rules[t], l)
			}
			continue
		}
		cur = nil
		trimmed := strings.TrimSpace(l)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		colon := strings.Index(l, ":")
		eq := strings.Index(l, "=")
		if colon < 0 || eq >= 0 && eq < colon || strings.HasPrefix(l[colon:], ":=") || strings.HasPrefix(l[colon:], "::=") {
			vars.WriteString("\t" + l + "\n")
			continue
		}
		deps, inline, _ := strings.Cut(l[colon+1:], ";")
		deps = strings.ReplaceAll(strings.TrimPrefix(deps, ":"), "|", " ")
		for _, t := range strings.Fields(l[:colon]) {
			if first == "" && !strings.HasPrefix(t, ".") && !strings.Contains(t, "%") {
				first = t
			}
			cur = append(cur, t)
			prereqs[t] = append(prereqs[t], strings.Fields(deps)...)
			if strings.TrimSpace(inline) != "" {
				rules[t] = append(rules[t], "\t"+inline)
			}
			if _, ok := rules[t]; !ok {
				rules[t] = nil
			}
		}
	}
	if len(targets) == 0 && first != "" {
		targets = []string{first}
	}
	var out strings.Builder
	out.WriteString(vars.String())
	seen := map[string]bool{}
	for len(targets) > 0 {
		t := targets[0]
		targets = targets[1:]
		if seen[t] {
			continue
		}
		seen[t] = true
		recipe, ok := rules[t]
		if !ok {
			// No rule of its own: whatever rule makes it.
			for _, r := range rules {
				out.WriteString(strings.Join(r, "\n") + "\n")
			}
			continue
		}
		out.WriteString(strings.Join(recipe, "\n") + "\n")
		targets = append(targets, prereqs[t]...)
	}
	return out.String()
}
