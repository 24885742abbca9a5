package policy

import (
	"path"
	"strings"
)

// registerBuiltins adds bash's builtins: those that touch nothing, and
// those that assign variables by name, read or write history files, run
// code later (trap, complete -C, bind -x) or change where the shell is.
func registerBuiltins(reg func(handler, ...string)) {
	// Builtins that touch no file and run nothing: any profile whose tools
	// include bash may use them.
	reg(needOnly(0), "echo", "true", "false", ":", "pwd", "test", "[", "exit", "return", "break", "continue",
		"shift", "wait", "jobs", "type", "which", "times", "umask", "dirs", "caller", "help", "logout",
		"suspend", "disown", "bg", "fg", "unalias", "compopt")
	reg(testHandler, "test", "[")
	reg(readVarsHandler(), "read", "mapfile", "readarray")
	reg(getoptsHandler, "getopts")
	reg(waitHandler, "wait")
	reg(completionHandler, "compgen", "complete")
	reg(unsetHandler, "unset")
	reg(printfHandler, "printf")
	reg(setHandler, "set")
	reg(shoptHandler, "shopt")
	reg(declHandler, "declare", "typeset", "local", "export", "readonly")
	reg(letHandler, "let")
	reg(trapHandler, "trap")
	reg(aliasHandler, "alias")
	reg(hashHandler, "hash")
	reg(enableHandler, "enable")
	reg(fcHandler, "fc")
	reg(historyHandler, "history")
	reg(ulimitHandler, "ulimit")
	reg(bindHandler, "bind")
	reg(cdHandler, "cd", "pushd")
	reg(popdHandler, "popd")
	reg(commandHandler, "command")
	reg(execHandler, "exec")
	reg(timeHandler, "time")
}

// testHandler checks test and [: -v NAME evaluates a subscript in NAME.
func testHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	for i, w := range args {
		if w.lit && w.s == "-v" && i+1 < len(args) {
			if !c.nameWord(args[i+1], inv.name+" -v", inv.cwd) {
				return inv.cwd
			}
		}
		// A file test reads what stat would of its operand: that it is
		// there, its size, owner or age.
		if !w.lit {
			continue
		}
		switch {
		case strings.Contains("-b -c -d -e -f -g -G -h -k -L -N -O -p -r -s -S -u -w -x", w.s) && len(w.s) == 2 ||
			w.s == "-a" && (i == 0 || args[i-1].lit && (args[i-1].s == "!" || args[i-1].s == "(")):
			if i+1 < len(args) && !(inv.name == "[" && i+1 == len(args)-1) {
				c.usePath(inv, args[i+1], pathUse{acc: accRead})
			}
		case w.s == "-nt" || w.s == "-ot" || w.s == "-ef":
			if i > 0 && i+1 < len(args) {
				c.usePath(inv, args[i-1], pathUse{acc: accRead})
				c.usePath(inv, args[i+1], pathUse{acc: accRead})
			}
		}
		if c.deny != nil {
			return inv.cwd
		}
	}
	return inv.cwd
}

// letHandler checks let reached as a command (builtin let …): every
// argument is an arithmetic expression.
func letHandler(c *checker, inv *invocation) cwds {
	for _, w := range inv.argv[1:] {
		if !w.lit {
			c.refuseCode("an expression that is not a literal")
			if c.deny != nil {
				return inv.cwd
			}
			continue
		}
		c.arithText(w.s, inv.cwd)
		if c.deny != nil {
			return inv.cwd
		}
	}
	return inv.cwd
}

// assignedName checks a name a builtin assigns: a subscript in it is
// evaluated, and a variable that changes what programs run may not be
// given a value the policy cannot see.
func (c *checker) assignedName(inv *invocation, w word) bool {
	if !c.nameWord(w, inv.name, inv.cwd) {
		return false
	}
	base, _, _ := strings.Cut(w.s, "[")
	if c.sensitiveAssign(base, false) {
		return false
	}
	c.setVal(base, varVal{})
	return true
}

func readVarsHandler() handler {
	// read and mapfile spell their options alike but differ in which take
	// a value (read -s and mapfile -t take none): read as the other, the
	// name a flag is followed by would pass for that option's value,
	// unchecked.
	// An option neither knows takes no value, so the word after it is
	// checked as a name.
	readOpts := optSpec{short: "adinNptu", flags: "ers"}.compile()
	mapfileOpts := optSpec{short: "dnOsuCc", flags: "t"}.compile()
	return func(c *checker, inv *invocation) cwds {
		t := readOpts
		if inv.name != "read" {
			t = mapfileOpts
		}
		opts, pos := parseOpts(inv.argv[1:], t)
		if inv.name != "read" && hasOpt(opts, "-C") {
			// mapfile -C runs its callback as shell code.
			v, _ := optVal(opts, "-C")
			if !c.needBecause(inv, pExec, "-C runs a callback") {
				return inv.cwd
			}
			c.commandValue(inv, "-C", v)
			if c.deny != nil {
				return inv.cwd
			}
		}
		if !c.need(inv, pRead) {
			return inv.cwd
		}
		for _, o := range opts {
			if o.name == "-a" && o.val != nil {
				if !c.assignedName(inv, *o.val) {
					return inv.cwd
				}
			}
		}
		if inv.name != "read" && len(pos) > 1 {
			pos = pos[:1]
		}
		if inv.name == "read" && len(pos) == 1 && !hasOpt(opts, "-a", "-d", "-N", "-n", "-u") && c.stdin != nil && c.stdin.kind == srcText {
			// read NAME from text the policy can see: its first line.
			if !c.assignedName(inv, pos[0]) {
				return inv.cwd
			}
			line, _, _ := strings.Cut(c.stdin.text, "\n")
			if !hasOpt(opts, "-r") {
				line = unescapeRead(line)
			}
			base, _, _ := strings.Cut(pos[0].s, "[")
			c.setVal(base, varVal{kind: valText, text: strings.Trim(line, " \t")})
			return inv.cwd
		}
		if len(pos) == 0 {
			if inv.name == "read" {
				c.setVal("REPLY", varVal{})
			} else {
				c.setVal("MAPFILE", varVal{})
			}
		}
		for _, w := range pos {
			if !c.assignedName(inv, w) {
				return inv.cwd
			}
		}
		return inv.cwd
	}
}

// unescapeRead removes the backslashes read without -r removes.
func unescapeRead(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func getoptsHandler(c *checker, inv *invocation) cwds {
	if len(inv.argv) >= 3 {
		c.assignedName(inv, inv.argv[2])
	}
	return inv.cwd
}

// waitHandler: wait -p NAME assigns a variable.
func waitHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	for i, w := range args {
		if w.lit && w.s == "-p" && i+1 < len(args) {
			c.assignedName(inv, args[i+1])
		}
	}
	return inv.cwd
}

// completionHandler: compgen and complete run a command with -C and a
// function with -F; -W is a word list bash expands, substitutions and all.
func completionHandler(c *checker, inv *invocation) cwds {
	t := optSpec{short: "oAGWFCXPSV"}
	opts, pos := parseOpts(inv.argv[1:], t.compile())
	files := false
	for _, o := range opts {
		switch {
		case o.name == "-f" || o.name == "-d":
			files = true
		case o.name == "-A" && o.val != nil && (!o.val.lit || o.val.s == "file" || o.val.s == "directory"):
			files = true
		}
	}
	for _, o := range opts {
		if o.val == nil {
			continue
		}
		switch o.name {
		case "-G":
			// A glob pattern bash expands.
			if o.val.lit {
				c.globListings([]word{{s: o.val.s, lit: true, glob: true, pat: o.val.s, src: o.val.source()}}, inv.cwd)
			} else {
				c.globListings([]word{{dyn: o.val.dyn, glob: true, src: o.val.source()}}, inv.cwd)
			}
		case "-C":
			if !c.needBecause(inv, pExec, "-C runs a command") {
				return inv.cwd
			}
			c.commandValue(inv, "-C", *o.val)
		case "-W":
			c.wordList(inv, *o.val)
		case "-V":
			c.assignedName(inv, *o.val)
		}
		if c.deny != nil {
			return inv.cwd
		}
	}
	if files && inv.name == "compgen" {
		// The names of files that start with the word: its directory
		// is listed.
		w := word{s: ".", lit: true, pat: "./*", glob: true, src: "./*"}
		if len(pos) > 0 {
			w = pos[len(pos)-1]
			if w.lit {
				w.pat, w.glob = escapeGlob(w.s)+"*", true
			} else {
				w.glob = true
			}
		}
		c.globListings([]word{w}, inv.cwd)
	}
	c.need(inv, pRead)
	return inv.cwd
}

// wordList checks a word list bash expands (compgen -W): its
// substitutions run.
func (c *checker) wordList(inv *invocation, w word) {
	if !w.lit {
		c.denyf("shell:code", "%s -W %s is not allowed: bash expands the word list, substitutions and all, and it is not a literal", inv.name, w.source())
		return
	}
	if !strings.ContainsAny(w.s, "$`") {
		return
	}
	c.reader.Reset(w.s)
	doc, err := c.parser.Document(&c.reader)
	if err != nil {
		c.denyf("shell:code", "%s -W: the word list does not parse", inv.name)
		return
	}
	outer := c.src
	c.src = w.s
	c.depth++
	c.subst(doc, inv.cwd)
	c.depth--
	c.src = outer
}

// unsetHandler: unset can remove a function, after which its name runs a
// program again; unset 'a[…]' evaluates the subscript.
func unsetHandler(c *checker, inv *invocation) cwds {
	if !c.need(inv, pRead) {
		return inv.cwd
	}
	functions := false
	for _, w := range inv.argv[1:] {
		if w.lit && strings.HasPrefix(w.s, "-") {
			functions = functions || strings.Contains(w.s, "f")
			continue
		}
		if !w.lit {
			for _, f := range c.funcs {
				f.sure = false
			}
		}
		if !functions && !c.nameWord(w, "unset", inv.cwd) {
			return inv.cwd
		}
		if f, ok := c.funcs[w.s]; ok {
			f.sure = false
		}
		if base, _, _ := strings.Cut(w.s, "["); w.lit && !functions {
			if sandboxVar(base) {
				c.sandboxVarDeny("unsetting " + base)
				return inv.cwd
			}
			if classifyEnv(base) == envCd {
				c.envDeny(base, "it changes where cd goes, which the policy must follow", 0)
				return inv.cwd
			}
			if _, ok := c.vals[base]; ok && base == w.s {
				c.setVal(base, varVal{kind: valText})
			}
		}
	}
	return inv.cwd
}

func printfHandler(c *checker, inv *invocation) cwds {
	if !c.need(inv, pRead) {
		return inv.cwd
	}
	args := inv.argv[1:]
	if len(args) >= 2 && args[0].lit && args[0].s == "-v" {
		c.assignedName(inv, args[1])
	}
	return inv.cwd
}

func setHandler(c *checker, inv *invocation) cwds {
	if !c.need(inv, pRead) {
		return inv.cwd
	}
	args := inv.argv[1:]
	for i := 0; i < len(args); i++ {
		w := args[i]
		if !w.lit {
			if !c.perms.has(pExec) {
				c.denyf("shell:environment", "set with an argument that is not a literal is not allowed")
			}
			return inv.cwd
		}
		if w.s == "--" || w.s == "-" {
			break
		}
		if (w.s == "-o" || w.s == "+o") && i+1 < len(args) {
			i++
			if w.s == "-o" {
				switch args[i].s {
				case "allexport", "keyword", "history", "emacs", "vi", "functrace", "errtrace":
					if !c.needBecause(inv, pExec, "set -o "+args[i].s+" changes what runs or is exported") {
						return inv.cwd
					}
				}
			}
			continue
		}
		if strings.HasPrefix(w.s, "-") && strings.ContainsAny(w.s, "akT") {
			if !c.needBecause(inv, pExec, "set "+w.s+" changes what runs or is exported") {
				return inv.cwd
			}
		}
		if !strings.HasPrefix(w.s, "-") && !strings.HasPrefix(w.s, "+") {
			// Positional parameters: the rest are values.
			break
		}
	}
	return inv.cwd
}

// shoptHandler: expand_aliases makes aliases run, which the policy does
// not follow; sourcepath and the like change where source looks;
// nocaseglob and xpg_echo change how bash reads globs and echo's text,
// which the policy reads as bash does by default. shopt -so NAME is set
// -o NAME.
func shoptHandler(c *checker, inv *invocation) cwds {
	set, setO := false, false
	for _, w := range inv.argv[1:] {
		if !w.lit {
			c.denyf("shell:environment", "shopt with an argument that is not a literal is not allowed")
			return inv.cwd
		}
		if len(w.s) > 1 && w.s[0] == '-' {
			set = set || strings.ContainsRune(w.s, 's')
			setO = setO || strings.ContainsRune(w.s, 'o')
			continue
		}
		if !set {
			continue
		}
		if setO {
			if c.run([]word{litWord("set"), litWord("-o"), w}, inv.cwd); c.deny != nil {
				return inv.cwd
			}
			continue
		}
		if !c.shoptOption(inv, w.s) {
			return inv.cwd
		}
	}
	c.need(inv, pRead)
	return inv.cwd
}

// shoptOption checks turning on the shell option name (shopt -s, bash
// -O) and reports whether the check may go on.
func (c *checker) shoptOption(inv *invocation, name string) bool {
	switch name {
	case "expand_aliases":
		c.denyf("shell:alias", "shopt -s expand_aliases is not allowed: aliases hide what a command name runs; write the commands out")
	case "cdable_vars", "autocd", "cdspell", "dirspell":
		c.denyf("shell:cd", "shopt -s %s is not allowed: it makes cd go where the policy cannot follow", name)
	case "nocaseglob", "xpg_echo":
		c.denyf("shell:environment", "shopt -s %s is not allowed: it changes how bash reads %s, which the policy reads as bash does by default", name,
			map[string]string{"nocaseglob": "a glob (Link-Ou? would match link-out)", "xpg_echo": "echo's text (its escapes)"}[name])
	case "extdebug", "sourcepath":
		return c.needBecause(inv, pExec, "shopt -s "+name+" changes what runs")
	}
	return c.deny == nil
}

// declHandler handles declare and its kin reached as ordinary commands
// (builtin export …), where the parser does not see assignments.
func declHandler(c *checker, inv *invocation) cwds {
	if !c.need(inv, pRead) {
		return inv.cwd
	}
	exported := inv.name == "export"
	integer := false
	for _, w := range inv.argv[1:] {
		if !w.lit {
			c.denyf("shell:code", "%s with an argument that is not a literal (%s) is not allowed: it could assign any variable, and a subscript in a name is evaluated as code", inv.name, w.source())
			return inv.cwd
		}
		if strings.HasPrefix(w.s, "-") {
			exported = exported || strings.Contains(w.s, "x")
			integer = integer || strings.Contains(w.s, "i")
			if strings.Contains(w.s, "n") && !c.perms.has(pExec) {
				c.denyf("shell:environment", "%s %s is not allowed here (needs the exec permission)", inv.name, w.s)
				return inv.cwd
			}
			continue
		}
		name, value, hasVal := strings.Cut(w.s, "=")
		if !c.nameWord(litWord(name), inv.name, inv.cwd) {
			return inv.cwd
		}
		base, _, _ := strings.Cut(name, "[")
		if !c.envAssign(base, litWord(value), hasVal, exported) {
			return inv.cwd
		}
		if integer && hasVal {
			c.arithText(value, inv.cwd)
		}
		c.setVal(base, varVal{})
	}
	return inv.cwd
}

func trapHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	if len(args) > 0 && args[0].lit && args[0].s == "--" {
		args = args[1:]
	}
	if len(args) < 2 || args[0].lit && (args[0].s == "-" || args[0].s == "" || strings.HasPrefix(args[0].s, "-")) {
		c.need(inv, pRead)
		return inv.cwd
	}
	return c.shellString(inv, args[0])
}

func aliasHandler(c *checker, inv *invocation) cwds {
	for _, w := range inv.argv[1:] {
		if !w.lit || strings.Contains(w.s, "=") {
			c.denyf("shell:alias", "alias is not allowed: an alias hides what a command name runs; write the command out")
			return inv.cwd
		}
	}
	c.need(inv, pRead)
	return inv.cwd
}

func hashHandler(c *checker, inv *invocation) cwds {
	for _, w := range inv.argv[1:] {
		if !w.lit || strings.HasPrefix(w.s, "-") && strings.Contains(w.s, "p") {
			c.denyf("shell:alias", "hash -p is not allowed: it makes a command name run another program")
			return inv.cwd
		}
	}
	c.need(inv, pRead)
	return inv.cwd
}

func enableHandler(c *checker, inv *invocation) cwds {
	for _, w := range inv.argv[1:] {
		if !w.lit || strings.HasPrefix(w.s, "-") && strings.Contains(w.s, "f") {
			c.needBecause(inv, pExec|pAdmin, "enable -f loads a builtin from a shared library")
			return inv.cwd
		}
	}
	c.need(inv, pRead)
	return inv.cwd
}

// fcHandler: fc re-runs history through an editor, or with -s runs a
// history entry; neither is visible.
func fcHandler(c *checker, inv *invocation) cwds {
	for _, w := range inv.argv[1:] {
		if w.lit && w.s == "-l" {
			c.need(inv, pRead)
			return inv.cwd
		}
	}
	c.needBecause(inv, pExec, "it runs commands from the history")
	return inv.cwd
}

// historyHandler: history -r and -n read a history file, -w and -a write
// one ($HISTFILE, ~/.bash_history by default); -s and -c change the list
// only.
func historyHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	var acc access
	file := false
	for i, w := range args {
		if !w.lit {
			c.denyf("shell:dynamic-path", "history with an argument that is not a literal is not allowed")
			return inv.cwd
		}
		if !strings.HasPrefix(w.s, "-") {
			continue
		}
		switch {
		case strings.ContainsAny(w.s, "wa"):
			acc, file = accWrite, true
		case strings.ContainsAny(w.s, "rn"):
			if !file {
				acc, file = accRead, true
			}
		case strings.Contains(w.s, "s"):
			// history -s ARGS: the rest are the entry.
			_ = i
			c.need(inv, pRead)
			return inv.cwd
		}
	}
	if !file {
		c.need(inv, pRead)
		return inv.cwd
	}
	need := pRead
	if acc == accWrite {
		need |= pWrite
	}
	if !c.needBecause(inv, need, "it reads or writes a history file") {
		return inv.cwd
	}
	var target word
	if v, ok := c.vals["HISTFILE"]; ok {
		if v.kind != valText {
			c.denyf("shell:dynamic-path", "history %s is not allowed: $HISTFILE is not known, so the policy cannot check the file", "-"+map[access]string{accRead: "r", accWrite: "w"}[acc])
			return inv.cwd
		}
		target = litWord(v.text)
	} else {
		target = litWord(c.ws.home + "/.bash_history")
	}
	for _, w := range args {
		if !strings.HasPrefix(w.s, "-") {
			target = w
		}
	}
	c.usePath(inv, target, pathUse{acc: acc})
	return inv.cwd
}

// ulimitHandler: querying limits is reading; setting one may raise what
// the sandbox set.
func ulimitHandler(c *checker, inv *invocation) cwds {
	for _, w := range inv.argv[1:] {
		if !w.lit || !strings.HasPrefix(w.s, "-") || w.s == "-S" || w.s == "-H" {
			if w.lit && (w.s == "-a" || w.s == "-S" || w.s == "-H") {
				continue
			}
			c.needBecause(inv, pExec, "setting a limit may raise what the sandbox set")
			return inv.cwd
		}
	}
	c.need(inv, pRead)
	return inv.cwd
}

// bindHandler: bind -x runs a command on a key, -f reads a file.
func bindHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	for i := 0; i < len(args); i++ {
		w := args[i]
		if !w.lit {
			c.denyf("shell:dynamic-script", "bind with an argument that is not a literal is not allowed")
			return inv.cwd
		}
		switch w.s {
		case "-x":
			if i+1 < len(args) {
				i++
				if !c.needBecause(inv, pExec, "bind -x runs a command") {
					return inv.cwd
				}
				_, cmd, _ := strings.Cut(args[i].s, ":")
				c.commandValue(inv, "-x", litWord(strings.Trim(strings.TrimSpace(cmd), `"'`)))
			}
		case "-f":
			if i+1 < len(args) {
				i++
				c.usePath(inv, args[i], pathUse{acc: accRead})
			}
		case "-m", "-q", "-u", "-r":
			i++
		}
		if c.deny != nil {
			return inv.cwd
		}
	}
	c.need(inv, pRead)
	return inv.cwd
}

// cdHandler changes the directories the script may be in. Only a literal
// directory inside the workspace is followed: cd with no operand, cd -, cd
// ~ and cd $DIR go where the policy cannot see (HOME, OLDPWD and CDPATH
// may say anything), so they are refused.
func cdHandler(c *checker, inv *invocation) cwds {
	// Changing directory reads nothing; the commands that follow are
	// checked from where it leads.
	inv = c.invocation(invocation{name: inv.name, argv: inv.argv, cwd: inv.cwd, sub: inv.sub, allowed: true})
	args := inv.argv[1:]
	var w word
	found, physical := false, false
	for i, a := range args {
		if a.lit && (a.s == "-L" || a.s == "-P" || a.s == "-e" || a.s == "-@" || a.s == "-n" && inv.name == "pushd") {
			// The last of -L and -P holds.
			if a.s == "-L" || a.s == "-P" {
				physical = a.s == "-P"
			}
			continue
		}
		if a.lit && a.s == "--" {
			if i+1 < len(args) {
				w, found = args[i+1], true
			}
			break
		}
		w, found = a, true
		break
	}
	switch {
	case !found:
		c.denyf("shell:cd", "%s with no directory is not allowed: it goes to $HOME, which the policy cannot follow; name the directory", inv.name)
		return inv.cwd
	case w.lit && w.s == "-":
		c.denyf("shell:cd", "%s - is not allowed: it goes to $OLDPWD, which the policy cannot follow; name the directory", inv.name)
		return inv.cwd
	case inv.name == "pushd" && w.lit && (strings.HasPrefix(w.s, "+") || strings.HasPrefix(w.s, "-")):
		c.denyf("shell:cd", "pushd %s is not allowed: it rotates the directory stack, which the policy does not follow; name the directory", w.s)
		return inv.cwd
	case !w.lit || w.glob:
		c.denyf("shell:cd", "%s %s is not allowed: the directory is not a literal (it contains %s), so the policy cannot follow it", inv.name, w.source(), w.dyn)
		return inv.cwd
	case w.tilde:
		c.denyf("shell:cd", "%s %s is not allowed: ~ is $HOME, which the policy cannot follow; name the directory", inv.name, w.source())
		return inv.cwd
	}
	var out cwds
	for _, d := range inv.cwd {
		// Without -P, bash's cd takes .. off the path it has ($PWD)
		// before it looks at any link: cd link/.. is where cd started,
		// wherever the link leads.
		target, logical := w.s, ""
		if !physical {
			from, ok := c.logicalDir(d)
			if !ok && dotDot(w.s) {
				c.denyf("shell:cd", "%s %q is not allowed: the script reached this directory through links in more than one way, so where .. leads is not known; use cd -P", inv.name, w.s)
				return inv.cwd
			}
			logical = path.Clean(path.Join(from, w.s))
			if path.IsAbs(w.s) {
				logical = path.Clean(w.s)
			}
			target = logical
		}
		r := c.resolve(d, target)
		if !r.in || logical != "" && !c.ws.within(logical) {
			c.denyf("path:outside-workspace", "%s %q is not allowed: it is outside the workspace", inv.name, w.s)
			return inv.cwd
		}
		c.useResolved(inv, r, pathUse{acc: accRead})
		if c.deny != nil {
			return inv.cwd
		}
		if logical == "" {
			logical = r.abs
		}
		c.setLogical(r.abs, logical)
		out = union(out, cwds{r.abs})
	}
	if len(out) > maxCwds {
		c.denyf("shell:too-complex", "the command changes directory too often to follow")
		return inv.cwd
	}
	c.dirs = union(c.dirs, out)
	return out
}

// popdHandler: popd goes back to a directory the script has been in.
func popdHandler(c *checker, inv *invocation) cwds {
	for _, w := range inv.argv[1:] {
		if !w.lit || w.s != "-n" {
			c.denyf("shell:cd", "popd %s is not allowed: it picks from the directory stack, which the policy does not follow", w.source())
			return inv.cwd
		}
	}
	return union(inv.cwd, c.dirs)
}

func timeHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	i := 0
	for ; i < len(args); i++ {
		w := args[i]
		if !w.lit || !strings.HasPrefix(w.s, "-") {
			break
		}
		switch {
		case w.s == "-o" || w.s == "--output":
			if i+1 < len(args) {
				i++
				c.need(inv, pWrite)
				c.usePath(inv, args[i], pathUse{acc: accWrite})
			}
		case strings.HasPrefix(w.s, "--output="):
			c.need(inv, pWrite)
			c.usePath(inv, litWord(strings.TrimPrefix(w.s, "--output=")), pathUse{acc: accWrite})
		case w.s == "-f" || w.s == "--format":
			i++
		case w.s == "-p" || w.s == "-v" || w.s == "-a" || w.s == "-q" || w.s == "--portability" || w.s == "--verbose" ||
			w.s == "--append" || w.s == "--quiet" || strings.HasPrefix(w.s, "--format="):
		case w.s == "--":
			i++
			goto run
		default:
			if !c.needBecause(inv, pExec, "option "+w.s+" is not one the policy knows for time") {
				return inv.cwd
			}
		}
	}
run:
	if i >= len(args) || c.deny != nil {
		return inv.cwd
	}
	return c.run(args[i:], inv.cwd)
}

func commandHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	i := 0
	for ; i < len(args) && args[i].lit && strings.HasPrefix(args[i].s, "-"); i++ {
		if args[i].s == "--" {
			i++
			break
		}
		if strings.ContainsAny(args[i].s, "vV") {
			c.need(inv, pRead)
			return inv.cwd
		}
	}
	if i >= len(args) {
		return inv.cwd
	}
	return c.runExternal(args[i:], inv.cwd)
}

func execHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	i := 0
	for ; i < len(args) && args[i].lit && strings.HasPrefix(args[i].s, "-"); i++ {
		if args[i].s == "--" {
			i++
			break
		}
		if strings.Contains(args[i].s, "c") && !strings.HasPrefix(args[i].s, "--") {
			// exec -c runs the command with an empty environment.
			c.sandboxVarDeny("exec -c, which clears the environment,")
			return inv.cwd
		}
		if args[i].s == "-a" {
			i++
		}
	}
	if i >= len(args) {
		return inv.cwd
	}
	return c.runExternal(args[i:], inv.cwd)
}

// logicalDir is the path bash's cd keeps for the directory d the script
// is in: d itself unless cd reached it through a link. ok is false when
// two ways to d disagree.
func (c *checker) logicalDir(d string) (string, bool) {
	l, known := c.logical[d]
	if !known {
		return d, true
	}
	return l, l != ""
}

// setLogical records that cd went to the directory abs by the path
// logical.
func (c *checker) setLogical(abs, logical string) {
	prev, known := c.logical[abs]
	switch {
	case !known && logical == abs:
		return
	case known && prev != logical:
		logical = ""
	}
	if c.logical == nil {
		c.logical = map[string]string{}
	}
	c.logical[abs] = logical
}

// dotDot reports a path with a .. component.
func dotDot(p string) bool {
	for _, comp := range strings.Split(p, "/") {
		if comp == ".." {
			return true
		}
	}
	return false
}
