package policy

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Limits of one shell check. A command beyond them is refused rather than
// half checked.
const (
	maxScriptBytes = 64 << 10
	maxNesting     = 8 // bash -c inside eval inside …
	maxSteps       = 20_000
	maxCwds        = 16 // directories a script may be in at one point
	maxGlobMatches = 256
)

// finding is why a call is refused or needs approval: the rule that
// decided, without the profile prefix, and the reason the model reads.
type finding struct {
	rule   string
	reason string
}

// checker walks one bash command's syntax tree and checks every command in
// it against a profile. It tracks the directories the script may be in at
// each point (cd), so relative paths are resolved against every one of
// them.
type checker struct {
	p        *Profile
	perms    perms
	src      string // the script being checked, for quoting its words
	ws       *workspace
	cmds     map[string]handler
	branches []string
	parser   *syntax.Parser

	funcs  map[string]*funcDef
	active map[string]bool
	clean  map[string]bool
	seen   map[*syntax.CallExpr]bool
	dirs   cwds      // every directory the script has been in, for cd - and popd
	root   [1]string // backs dirs and the first cwds: the workspace
	// words holds the words of this check (argv, expansions), handed out
	// as slices capped at their length, so none is overwritten or grown
	// into until the checker goes back to its pool; invs holds its
	// invocations the same way.
	words  []word
	invs   []invocation
	reader strings.Reader // what the parser reads the script from
	stats  statCache
	depth  int
	steps  int
	// cond counts the constructs around the current point that may not
	// run, or run in a subshell: a function defined inside one may not
	// exist where it is called.
	cond int

	deny     *finding
	approval *finding
	used     perms
	outside  bool
}

// funcDef is a function the script defines. sure means it is defined
// unconditionally at the top of the script it is called from, so a call
// runs it and not a program of the same name.
type funcDef struct {
	body  *syntax.Stmt
	sure  bool
	depth int
}

// cwds is the set of directories (real, absolute, inside the workspace)
// the script may be in.
type cwds []string

func union(a, b cwds) cwds {
	if len(b) == 0 {
		return a
	}
	var out cwds
	for _, d := range b {
		if !slices.Contains(a, d) {
			if out == nil {
				out = slices.Clone(a)
			}
			out = append(out, d)
		}
	}
	if out == nil {
		return a
	}
	return out
}

func (c *checker) denyf(rule, format string, args ...any) {
	if c.deny == nil {
		c.deny = &finding{rule: rule, reason: fmt.Sprintf(format, args...)}
	}
}

func (c *checker) approve(rule, format string, args ...any) {
	if c.approval == nil {
		c.approval = &finding{rule: rule, reason: fmt.Sprintf(format, args...)}
	}
}

// stop reports whether checking is over: something was refused, or the
// work budget is spent.
func (c *checker) stop() bool {
	if c.deny != nil {
		return true
	}
	c.steps++
	if c.steps > maxSteps {
		c.denyf("shell:too-complex", "the command is too complex to check; split it into smaller commands")
		return true
	}
	return false
}

// script parses src and checks every statement in it.
func (c *checker) script(src string, cwd cwds) cwds {
	if len(src) > maxScriptBytes {
		c.denyf("shell:too-long", "the command is longer than %d KiB", maxScriptBytes>>10)
		return cwd
	}
	if c.depth >= maxNesting {
		c.denyf("shell:too-deep", "the command nests shells (bash -c, eval) more than %d deep", maxNesting)
		return cwd
	}
	// The parser has read all of src when Parse returns, so a nested
	// script can reuse the reader.
	c.reader.Reset(src)
	f, err := c.parser.Parse(&c.reader, "")
	if err != nil {
		c.denyf("shell:parse", "the command does not parse: %s", parseMessage(err))
		return cwd
	}
	outer := c.src
	c.src = src
	c.depth++
	out := c.stmts(f.Stmts, cwd)
	c.depth--
	c.src = outer
	if c.deny == nil {
		// Every simple command of the tree must have been checked; one the
		// walk above missed would be a construct it does not know.
		syntax.Walk(f, func(n syntax.Node) bool {
			if ce, ok := n.(*syntax.CallExpr); ok && !c.seen[ce] {
				c.denyf("shell:unsupported", "the command uses a construct the policy does not understand")
			}
			return c.deny == nil
		})
	}
	return out
}

func parseMessage(err error) string {
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return msg
}

func (c *checker) stmts(list []*syntax.Stmt, cwd cwds) cwds {
	for _, s := range list {
		_, cwd = c.stmt(s, cwd)
		if c.deny != nil {
			break
		}
	}
	return cwd
}

// stmt checks one statement and returns the directories the script may be
// in after it succeeded and after it ran at all.
func (c *checker) stmt(s *syntax.Stmt, cwd cwds) (succ, all cwds) {
	if c.stop() {
		return cwd, cwd
	}
	for _, r := range s.Redirs {
		c.redirect(r, cwd)
	}
	if s.Background || s.Coprocess || s.Disown {
		c.cond++
		defer func() { c.cond-- }()
	}
	succ, all = c.command(s.Cmd, cwd)
	switch {
	case s.Background || s.Coprocess || s.Disown:
		return cwd, cwd
	case s.Negated:
		return all, all
	}
	return succ, all
}

func (c *checker) command(cmd syntax.Command, cwd cwds) (succ, all cwds) {
	switch x := cmd.(type) {
	case nil:
		return cwd, cwd
	case *syntax.CallExpr:
		return c.call(x, cwd)
	case *syntax.BinaryCmd:
		c.cond++
		defer func() { c.cond-- }()
		switch x.Op {
		case syntax.AndStmt:
			s1, a1 := c.stmt(x.X, cwd)
			s2, a2 := c.stmt(x.Y, s1)
			return s2, union(a1, a2)
		case syntax.OrStmt:
			_, a1 := c.stmt(x.X, cwd)
			_, a2 := c.stmt(x.Y, a1)
			u := union(a1, a2)
			return u, u
		default:
			// Every element of a pipeline runs in a subshell.
			c.stmt(x.X, cwd)
			c.stmt(x.Y, cwd)
			return cwd, cwd
		}
	case *syntax.Subshell:
		c.cond++
		c.stmts(x.Stmts, cwd)
		c.cond--
		return cwd, cwd
	case *syntax.Block:
		a := c.stmts(x.Stmts, cwd)
		return a, a
	case *syntax.IfClause:
		c.cond++
		a := c.ifClause(x, cwd)
		c.cond--
		return a, a
	case *syntax.WhileClause:
		c.cond++
		defer func() { c.cond-- }()
		a := c.loop(cwd, func(cur cwds) cwds {
			a := c.stmts(x.Cond, cur)
			return union(a, c.stmts(x.Do, a))
		})
		return a, a
	case *syntax.ForClause:
		c.cond++
		defer func() { c.cond-- }()
		switch l := x.Loop.(type) {
		case *syntax.WordIter:
			clean := l.InPos.IsValid()
			for _, w := range l.Items {
				c.subst(w, cwd)
				for _, ew := range c.expand(w) {
					if !ew.lit || ew.glob || !cleanValue(ew.s) {
						clean = false
					}
				}
			}
			c.setClean(l.Name.Value, clean)
		case *syntax.CStyleLoop:
			for _, e := range []syntax.ArithmExpr{l.Init, l.Cond, l.Post} {
				if e != nil {
					c.arith(e, cwd)
				}
			}
		}
		a := c.loop(cwd, func(cur cwds) cwds { return c.stmts(x.Do, cur) })
		return a, a
	case *syntax.CaseClause:
		c.cond++
		defer func() { c.cond-- }()
		c.subst(x.Word, cwd)
		out := cwd
		for _, it := range x.Items {
			for _, p := range it.Patterns {
				c.subst(p, cwd)
			}
			out = union(out, c.stmts(it.Stmts, cwd))
		}
		return out, out
	case *syntax.FuncDecl:
		if x.Name == nil {
			c.denyf("shell:unsupported", "anonymous functions are not supported")
			return cwd, cwd
		}
		if c.funcs == nil {
			c.funcs = map[string]*funcDef{}
		}
		c.funcs[x.Name.Value] = &funcDef{body: x.Body, sure: c.cond == 0 && c.depth == 1, depth: c.depth}
		// Check the body where it is defined, so a function never called
		// is checked too; calls check it again from where they are.
		c.callFunc(x.Name.Value, cwd)
		return cwd, cwd
	case *syntax.ArithmCmd:
		c.arith(x.X, cwd)
		return cwd, cwd
	case *syntax.TestClause:
		c.test(x.X, cwd)
		return cwd, cwd
	case *syntax.DeclClause:
		c.decl(x, cwd)
		return cwd, cwd
	case *syntax.LetClause:
		for _, e := range x.Exprs {
			c.arith(e, cwd)
		}
		return cwd, cwd
	case *syntax.TimeClause:
		if x.Stmt != nil {
			return c.stmt(x.Stmt, cwd)
		}
		return cwd, cwd
	case *syntax.CoprocClause:
		c.cond++
		defer func() { c.cond-- }()
		if x.Name != nil {
			c.subst(x.Name, cwd)
		}
		c.stmt(x.Stmt, cwd)
		return cwd, cwd
	}
	c.denyf("shell:unsupported", "the command uses a construct the policy does not support")
	return cwd, cwd
}

func (c *checker) ifClause(x *syntax.IfClause, cwd cwds) cwds {
	a := c.stmts(x.Cond, cwd)
	t := c.stmts(x.Then, a)
	if x.Else != nil {
		return union(t, c.ifClause(x.Else, a))
	}
	return union(t, a)
}

// loop runs body until the directories it may leave the script in stop
// growing, so a cd late in a loop body is seen by the commands before it
// on the next iteration.
func (c *checker) loop(cwd cwds, body func(cwds) cwds) cwds {
	cur := cwd
	for range 4 {
		next := union(cur, body(cur))
		if len(next) == len(cur) || c.deny != nil {
			return next
		}
		cur = next
	}
	return cur
}

func (c *checker) callFunc(name string, cwd cwds) cwds {
	f := c.funcs[name]
	if f == nil || c.active[name] {
		return cwd
	}
	if c.active == nil {
		c.active = map[string]bool{}
	}
	c.active[name] = true
	c.cond++
	_, all := c.stmt(f.body, cwd)
	c.cond--
	delete(c.active, name)
	return all
}

// redirect checks a redirection: an output is a write, an input a read.
func (c *checker) redirect(r *syntax.Redirect, cwd cwds) {
	if r.Word != nil {
		c.subst(r.Word, cwd)
	}
	if r.Hdoc != nil {
		c.subst(r.Hdoc, cwd)
	}
	var acc access
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.AppClob, syntax.RdrAll,
		syntax.RdrAllClob, syntax.AppAll, syntax.AppAllClob, syntax.RdrInOut:
		acc = accWrite
	case syntax.RdrIn:
		acc = accRead
	case syntax.DplIn, syntax.DplOut:
		// <&N and >&N duplicate descriptors; >&file is bash for &>file.
		if w := r.Word.Lit(); w == "-" || isDigits(strings.TrimSuffix(w, "-")) {
			return
		}
		acc = accRead
		if r.Op == syntax.DplOut {
			acc = accWrite
		}
	default:
		// Here-documents and here-strings read no file.
		return
	}
	inv := c.invocation(invocation{name: "redirection", cwd: cwd})
	ws := c.expand(r.Word)
	if len(ws) > 1 {
		c.denyf("shell:dynamic-path", "redirection to %s is not allowed: it expands to several words", ws[0].source())
		return
	}
	c.usePath(inv, ws[0], pathUse{acc: acc})
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// resolve resolves p in the workspace from dir, remembering what it finds
// for the rest of the check.
func (c *checker) resolve(dir, p string) resolved { return c.ws.resolveWith(c.stats, dir, p) }

// expand evaluates a word of the current script.
func (c *checker) expand(w *syntax.Word) []word {
	n := len(c.words)
	c.words = c.appendWords(c.words, w)
	return c.words[n:len(c.words):len(c.words)]
}

// appendWords evaluates a word of the current script, appending to dst,
// and keeps the word as written for messages.
func (c *checker) appendWords(dst []word, w *syntax.Word) []word {
	n := len(dst)
	dst = appendWords(dst, w, c.ws.home)
	start, end := w.Pos().Offset(), w.End().Offset()
	if start < end && int(end) <= len(c.src) {
		for i := n; i < len(dst); i++ {
			if dst[i].src == "" {
				dst[i].src = c.src[start:end]
			}
		}
	}
	return dst
}

// subst checks every command substitution, process substitution and
// arithmetic expression inside n.
func (c *checker) subst(n syntax.Node, cwd cwds) {
	if w, ok := n.(*syntax.Word); ok && plainWord(w) {
		return
	}
	syntax.Walk(n, func(n syntax.Node) bool {
		if c.deny != nil {
			return false
		}
		switch x := n.(type) {
		case *syntax.CmdSubst:
			c.cond++
			c.stmts(x.Stmts, cwd)
			c.cond--
			return false
		case *syntax.ProcSubst:
			c.cond++
			c.stmts(x.Stmts, cwd)
			c.cond--
			return false
		case *syntax.ArithmExp:
			c.arithVars(x.X)
		case *syntax.ParamExp:
			if x.Index != nil {
				c.arithVars(x.Index)
			}
			if x.Slice != nil {
				if x.Slice.Offset != nil {
					c.arithVars(x.Slice.Offset)
				}
				if x.Slice.Length != nil {
					c.arithVars(x.Slice.Length)
				}
			}
			if x.Exp != nil && x.Exp.Op == syntax.OtherParamOps && x.Exp.Word != nil && strings.Contains(x.Exp.Word.Lit(), "P") {
				c.denyf("shell:prompt-expansion", "${…@P} is not allowed: prompt expansion runs commands hidden in a variable's value")
			}
		}
		return true
	})
}

// plainWord reports whether w is only literal text, quoted or not, so it
// holds nothing subst looks for; most words are.
func plainWord(w *syntax.Word) bool {
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				if _, ok := q.(*syntax.Lit); !ok {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// arith checks an arithmetic expression that is evaluated: its
// substitutions and the variables it reads.
func (c *checker) arith(x syntax.ArithmExpr, cwd cwds) {
	c.subst(x, cwd)
	c.arithVars(x)
}

// arithVars refuses, for profiles that may not run code, arithmetic on
// variables whose values are not known: bash evaluates such a value as an
// expression, and a value like a[$(rm -rf /)] runs the command.
func (c *checker) arithVars(x syntax.ArithmExpr) {
	if c.perms.has(pExec) {
		return
	}
	syntax.Walk(x, func(n syntax.Node) bool {
		if c.deny != nil {
			return false
		}
		switch y := n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst:
			return false
		case *syntax.BinaryArithm:
			if y.Op == syntax.Assgn {
				if w, ok := y.X.(*syntax.Word); ok && len(w.Parts) == 1 {
					if l, ok := w.Parts[0].(*syntax.Lit); ok {
						c.arithVars(y.Y)
						c.setClean(l.Value, true)
						return false
					}
				}
			}
		case *syntax.Word:
			if len(y.Parts) == 1 {
				if l, ok := y.Parts[0].(*syntax.Lit); ok {
					c.readVar(l.Value, false)
				}
			}
		case *syntax.ParamExp:
			if y.Param != nil {
				c.readVar(y.Param.Value, true)
			}
		}
		return true
	})
}

// readVar refuses arithmetic on a variable whose value is not known to be
// a number. param is true for $name, where digits are positional
// parameters rather than numbers.
func (c *checker) readVar(name string, param bool) {
	switch name {
	case "#", "?", "$", "!", "RANDOM", "SECONDS", "LINENO", "BASHPID", "PPID", "UID", "EUID", "EPOCHSECONDS":
		return
	}
	if !param && cleanValue(name) || !param && !validName(name) || c.clean[name] {
		return
	}
	c.denyf("shell:arithmetic", "arithmetic on $%s is not allowed: its value is not known, and bash evaluates it as an expression that can run commands", name)
}

// setClean records whether a variable's value is known to be a number.
func (c *checker) setClean(name string, clean bool) {
	if c.clean == nil {
		c.clean = map[string]bool{}
	}
	c.clean[name] = clean
}

// cleanValue reports whether s, evaluated as arithmetic, is a number: it
// starts with a digit (after a sign), so bash never reads it as a name.
func cleanValue(s string) bool {
	s = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(s), "+-"))
	if s == "" {
		return true
	}
	if s[0] < '0' || s[0] > '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '#' || c == '_' || c == '@') {
			return false
		}
	}
	return true
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// test checks [[ … ]]: its substitutions, and the operands of its
// arithmetic comparisons.
func (c *checker) test(x syntax.TestExpr, cwd cwds) {
	c.subst(x, cwd)
	syntax.Walk(x, func(n syntax.Node) bool {
		if b, ok := n.(*syntax.BinaryTest); ok {
			switch b.Op {
			case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
				for _, op := range []syntax.TestExpr{b.X, b.Y} {
					if w, ok := op.(*syntax.Word); ok {
						c.arithVars(w)
					}
				}
			}
		}
		return c.deny == nil
	})
}

// call checks a simple command: its assignments, its words and the command
// itself.
func (c *checker) call(ce *syntax.CallExpr, cwd cwds) (succ, all cwds) {
	c.seen[ce] = true
	for _, a := range ce.Assigns {
		c.assign(a, cwd, len(ce.Args) > 0, false)
	}
	if len(ce.Args) == 0 {
		return cwd, cwd
	}
	// Substitutions first: they check commands of their own, which take
	// words from c.words, and argv must be one run of it.
	for _, w := range ce.Args {
		c.subst(w, cwd)
	}
	if c.deny != nil {
		return cwd, cwd
	}
	n := len(c.words)
	for _, w := range ce.Args {
		c.words = c.appendWords(c.words, w)
	}
	argv := c.words[n:len(c.words):len(c.words)]
	succ = c.run(argv, cwd)
	return succ, union(cwd, succ)
}

// envSafe are environment variables any profile may set for a command:
// they change formatting, never what runs or where it reads.
func envSafe(name string) bool {
	switch name {
	case "LANG", "LANGUAGE", "TZ", "NO_COLOR", "TERM", "COLUMNS", "LINES", "CLICOLOR", "CLICOLOR_FORCE",
		"FORCE_COLOR", "GREP_COLOR", "GREP_COLORS", "POSIXLY_CORRECT":
		return true
	}
	return strings.HasPrefix(name, "LC_")
}

// shellSensitive are variables that change what the shell itself runs or
// where it goes, whether exported or not.
func shellSensitive(name string) bool {
	switch name {
	case "PATH", "CDPATH", "HOME", "BASH_ENV", "ENV", "PS0", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND",
		"BASH_XTRACEFD", "BASH_LOADABLES_PATH", "EXECIGNORE", "SHELLOPTS", "BASHOPTS", "INPUTRC",
		"GLOBIGNORE", "BASH_COMPAT", "IFS", "OLDPWD", "PWD":
		return true
	}
	return strings.HasPrefix(name, "BASH_FUNC_")
}

// assign checks an assignment. exported means the variable reaches
// programs' environments: a prefix assignment, export, declare -x.
func (c *checker) assign(a *syntax.Assign, cwd cwds, exported, integer bool) {
	if a.Value != nil {
		c.subst(a.Value, cwd)
	}
	if a.Array != nil {
		c.subst(a.Array, cwd)
	}
	if a.Index != nil {
		c.arith(a.Index, cwd)
	}
	if a.Name == nil {
		return
	}
	name := a.Name.Value
	if !c.perms.has(pExec) {
		if (exported || shellSensitive(name)) && !envSafe(name) {
			c.denyf("shell:environment", "setting %s is not allowed: environment variables change what programs run and read (needs the exec permission)", name)
			return
		}
	}
	clean := false
	if a.Value != nil && a.Array == nil && !a.Append {
		ws := c.expand(a.Value)
		clean = len(ws) == 1 && ws[0].lit && cleanValue(ws[0].s)
	}
	if a.Naked && a.Value == nil && a.Array == nil {
		// declare NAME: keeps the value it had.
		return
	}
	if integer && !clean && !c.perms.has(pExec) {
		if a.Value != nil {
			c.arithVars(a.Value)
		}
		clean = c.deny == nil
	}
	c.setClean(name, clean)
}

// decl checks declare, local, export, readonly, typeset and nameref.
func (c *checker) decl(d *syntax.DeclClause, cwd cwds) {
	variant := d.Variant.Value
	exported := variant == "export"
	integer, nameref := false, variant == "nameref"
	for _, a := range d.Args {
		if a.Naked && a.Name == nil && a.Value != nil {
			ws := c.expand(a.Value)
			for _, w := range ws {
				if !w.lit {
					if !c.perms.has(pExec) {
						c.denyf("shell:environment", "%s with an argument that is not a literal (%s) is not allowed: it could assign any variable", variant, w.source())
						return
					}
					continue
				}
				if flags, ok := strings.CutPrefix(w.s, "-"); ok {
					exported = exported || strings.Contains(flags, "x")
					integer = integer || strings.Contains(flags, "i")
					nameref = nameref || strings.Contains(flags, "n")
				}
			}
		}
	}
	if nameref && !c.perms.has(pExec) {
		c.denyf("shell:environment", "%s -n is not allowed: a name reference can assign any variable", variant)
		return
	}
	for _, a := range d.Args {
		if a.Naked && a.Name == nil {
			if a.Value != nil {
				c.subst(a.Value, cwd)
			}
			continue
		}
		c.assign(a, cwd, exported, integer)
	}
}

// invocation is one command about to be checked.
type invocation struct {
	name string // the command, as looked up: rm for /bin/rm
	argv []word
	cwd  cwds
	// sub are the subcommand words rules match ("push" of git push).
	sub    []string
	subBuf [3]string // backs sub
	// allowed means commands.allow named it: its permissions are not
	// checked, its paths are.
	allowed bool
}

// invocation returns a copy of v that lives as long as the check.
func (c *checker) invocation(v invocation) *invocation {
	if len(c.invs) == cap(c.invs) {
		// A new block: the invocations in the full one stay where they
		// are.
		c.invs = make([]invocation, 0, 8)
	}
	c.invs = append(c.invs, v)
	return &c.invs[len(c.invs)-1]
}

func (inv *invocation) display() string {
	switch {
	case len(inv.sub) > 0 && (inv.name == "git" || inv.name == "go"):
		return inv.name + " " + inv.sub[0]
	case len(inv.sub) > 0 && inv.name == "gh":
		return inv.name + " " + strings.Join(inv.sub, " ")
	}
	return inv.name
}

// systemBinDirs hold the programs a bare command name finds, so /bin/rm is
// rm.
func systemBinDir(dir string) bool {
	switch strings.TrimSuffix(dir, "/") {
	case "/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin":
		return true
	}
	return false
}

// run checks argv as a command and returns the directories the script may
// be in once it succeeded.
func (c *checker) run(argv []word, cwd cwds) cwds {
	if len(argv) == 0 || c.stop() {
		return cwd
	}
	w := argv[0]
	switch {
	case !w.lit:
		c.denyf("shell:dynamic-command", "command name %s is not a literal (it contains %s); the policy cannot see what would run", w.source(), w.dyn)
		return cwd
	case w.glob:
		c.denyf("shell:dynamic-command", "command name %s is a glob pattern; the policy cannot see what would run", w.source())
		return cwd
	case w.s == "":
		return cwd
	}
	name := w.s
	if f, ok := c.funcs[name]; ok {
		cwd = union(cwd, c.callFunc(name, cwd))
		if f.sure && f.depth == c.depth {
			// The function runs, not a program of its name.
			return cwd
		}
	}
	if strings.Contains(name, "/") {
		dir, base := path.Split(name)
		if !systemBinDir(dir) || base == "" {
			return c.program(argv, cwd)
		}
		name = base
	}
	inv := c.invocation(invocation{name: name, argv: argv, cwd: cwd})
	inv.sub = subcommands(inv.subBuf[:0], name, argv[1:])
	c.rules(inv)
	if c.deny != nil {
		return cwd
	}
	h := c.cmds[name]
	if h == nil {
		return unknownCommand(c, inv)
	}
	return h(c, inv)
}

// program checks a command named by a path: a script or binary in the
// workspace, or a program elsewhere.
func (c *checker) program(argv []word, cwd cwds) cwds {
	base := path.Base(argv[0].s)
	inv := c.invocation(invocation{name: base, argv: argv, cwd: cwd})
	c.rules(inv)
	if c.deny != nil {
		return cwd
	}
	c.usePath(inv, argv[0], pathUse{acc: accRead})
	if !inv.allowed && !c.perms.has(pExec) {
		c.denyf("permission:exec", "running %q is not allowed (needs the exec permission)", argv[0].s)
		return cwd
	}
	c.used |= pExec
	c.pathLikeArgs(inv, argv[1:])
	return cwd
}

// rules applies the profile's commands.deny, commands.allow and approval
// lists to inv.
func (c *checker) rules(inv *invocation) {
	for _, pt := range c.p.denyCmds {
		if pt.matchAny(inv.name, inv.sub) {
			c.denyf("commands.deny:"+pt.text, "command %q is denied by commands.deny %q", inv.display(), pt.text)
			return
		}
	}
	for _, pt := range c.p.allowCmds {
		if pt.match(inv.name, inv.sub) {
			inv.allowed = true
			break
		}
	}
	for _, pt := range c.p.approvalCmds {
		if pt.matchAny(inv.name, inv.sub) {
			c.approve("approval:"+pt.text, "command %q needs approval (profile %q lists %q)", inv.display(), c.p.Name, pt.text)
		}
	}
}

// matchAny is match with the subcommand words anywhere among sub, in
// order: a deny or approval rule for "kubectl delete" also catches
// kubectl -n prod delete.
func (pt cmdPattern) matchAny(name string, sub []string) bool {
	if !globWord(pt.words[0], name) {
		return false
	}
	i := 0
	for _, w := range pt.words[1:] {
		for i < len(sub) && !globWord(w, sub[i]) {
			i++
		}
		if i == len(sub) {
			return false
		}
		i++
	}
	return true
}

// need checks that the profile grants bits to inv's command and records
// them as used.
func (c *checker) need(inv *invocation, bits perms) bool {
	return c.needBecause(inv, bits, "")
}

// needBecause is need with a reason added to a refusal: why the command
// needs what it needs.
func (c *checker) needBecause(inv *invocation, bits perms, why string) bool {
	if c.deny != nil {
		return false
	}
	if missing := bits &^ c.perms; missing != 0 && !inv.allowed {
		reason := fmt.Sprintf("command %q is not allowed (needs the %s permission)", inv.display(), missing)
		if why != "" {
			reason += ": " + why
		}
		c.denyf("permission:"+missingName(missing), "%s", reason)
		return false
	}
	c.used |= bits
	return true
}

func missingName(p perms) string {
	return strings.ReplaceAll(p.String(), ", ", "+")
}

// usePath checks one path argument for every directory the script may be
// in.
func (c *checker) usePath(inv *invocation, w word, u pathUse) {
	if c.deny != nil {
		return
	}
	if w.tree {
		u.tree = true
	}
	switch {
	case w.proc:
		return
	case !w.lit:
		c.denyf("shell:dynamic-path", "%s %s is not allowed: it is not a literal (it contains %s), so the policy cannot check the path", u.acc.verb(), w.source(), w.dyn)
		return
	case w.s == "-" || w.s == "":
		return
	}
	for _, dir := range inv.cwd {
		if w.glob {
			c.useGlob(inv, w, dir, u)
		} else {
			c.useResolved(inv, c.resolve(dir, w.s), u)
		}
		if c.deny != nil {
			return
		}
	}
}

func (c *checker) useResolved(inv *invocation, r resolved, u pathUse) {
	var grant perms
	if inv.allowed {
		grant = pRead | pWrite
	}
	d, outside := c.p.checkPath(r, u, grant)
	if d != nil {
		c.denyf(d.rule, "%s", d.reason)
		return
	}
	if u.follow && r.in {
		switch link, tooBig := c.ws.linkOut(r.abs); {
		case link != "":
			rel, _ := c.ws.relative(link)
			c.denyf("path:symlink-escape", "%s %q through its links is not allowed: %s leads outside the workspace", u.acc.verb(), r.raw, rel)
			return
		case tooBig:
			c.denyf("path:symlink-escape", "%s all of %q through its links is not allowed: the tree is too large to check for links out of the workspace; leave out the option that follows links", u.acc.verb(), r.raw)
			return
		}
	}
	if outside {
		c.outside = true
	}
}

// useGlob checks a glob the way bash expands it: every match, and where
// nothing matches, the pattern as a literal name.
func (c *checker) useGlob(inv *invocation, w word, dir string, u pathUse) {
	for _, comp := range strings.Split(w.pat, "/") {
		// Only a component written with a leading dot can match "..";
		// bash before 5.2 lets it.
		if ok, _ := filepath.Match(comp, ".."); ok && comp != ".." && strings.HasPrefix(strings.TrimPrefix(comp, `\`), ".") {
			c.denyf("path:glob-parent", "%s %s is not allowed: the pattern can match \"..\"", u.acc.verb(), w.source())
			return
		}
	}
	matches, more := globBash(c.stats, dir, w.pat, maxGlobMatches)
	if len(matches) == 0 {
		c.useResolved(inv, c.resolve(dir, w.s), u)
		return
	}
	if more {
		// Check the directory the pattern lists instead, as a tree.
		c.useResolved(inv, c.resolve(dir, staticPrefix(w.s)), pathUse{acc: u.acc, tree: true})
		return
	}
	for _, m := range matches {
		var r resolved
		if rel, ok := c.ws.relative(m.path); ok && m.real {
			// Every component came from a directory listing or a check
			// that it is no link: it is where it says.
			r = resolved{abs: m.path, rel: rel, in: true}
		} else {
			r = c.resolve(dir, m.path)
		}
		r.raw = m.path
		if rel, err := filepath.Rel(dir, m.path); err == nil && !strings.HasPrefix(w.s, "/") {
			r.raw = rel
		}
		c.useResolved(inv, r, u)
		if c.deny != nil {
			return
		}
	}
}

// staticPrefix is the directory part of a pattern before its first glob
// character.
func staticPrefix(pat string) string {
	i := strings.IndexAny(pat, "*?[")
	if i < 0 {
		return pat
	}
	d := path.Dir(pat[:i] + "x")
	return d
}

// pathLikeArgs checks the arguments of a program whose arguments the
// policy does not know: those that look like paths (absolute, ~, or with
// ..) are checked as reads, so a program is not pointed outside the
// workspace in plain sight. What the program does inside is the sandbox's
// business.
func (c *checker) pathLikeArgs(inv *invocation, args []word) {
	for _, w := range args {
		if !w.lit {
			continue
		}
		s := w.s
		if strings.HasPrefix(s, "--") {
			_, v, ok := strings.Cut(s, "=")
			if !ok {
				continue
			}
			s = v
		} else if strings.HasPrefix(s, "-") {
			continue
		}
		if looksLikePath(s) {
			c.usePath(inv, litWord(s), pathUse{acc: accRead})
		}
	}
}

func looksLikePath(s string) bool {
	if strings.Contains(s, "://") {
		return false
	}
	return strings.HasPrefix(s, "/") || s == ".." || strings.HasPrefix(s, "../") ||
		strings.Contains(s, "/../") || strings.HasSuffix(s, "/..")
}
