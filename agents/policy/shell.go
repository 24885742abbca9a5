package policy

import (
	"fmt"
	"maps"
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
	maxLoopValues  = 16 // values a for loop's body is checked with, one by one
)

// finding is why a call is refused or needs approval: the rule that
// decided, without the profile prefix, and the reason the model reads.
type finding struct {
	rule   string
	reason string
}

// checker walks one bash command's syntax tree and checks every command in
// it against a profile. It tracks the directories the script may be in at
// each point (cd), the values of its variables, the links and files it
// makes and what each command reads on standard input, so that paths are
// resolved where they really lead and programs fed to interpreters are
// checked as what they run.
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
	seen   map[*syntax.CallExpr]bool
	dirs   cwds // every directory the script has been in, for popd
	// logical maps a directory cd went to through a link to the path
	// bash's cd keeps for it ($PWD), from which its cd .. goes back; ""
	// when two ways to it disagree.
	logical map[string]string
	root    [1]string // backs dirs and the first cwds: the workspace
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
	// run, or run apart (a branch, a loop, a subshell, a function body):
	// scopes are those constructs, innermost last, each with the values of
	// the variables when it was entered.
	cond      int
	scopes    []scope
	nextScope int

	// stdin is what the command being checked reads on standard input; nil
	// is the tool's, which is empty.
	stdin *source
	// curDirs are the directories the statement being checked may run in,
	// for $PWD.
	curDirs cwds
	// posArgs are the positional parameters of the function being
	// checked, when posKnown: a call's arguments.
	posArgs  []word
	posKnown bool
	// vals are what the script's variables hold as far as the policy
	// knows; valGen counts their changes, so loops are checked until they
	// settle.
	vals   map[string]varVal
	valGen int
	// links are the links the script makes, by where they are (absolute):
	// a symbolic link's target as written, a hard link's absolute target.
	links map[string]string
	// written are the files the script writes, by absolute path, with what
	// it writes when the policy can tell.
	written map[string]source
	// murky are trees a command may have filled with links the policy
	// cannot see (an archive extracted, a tree with links copied): paths
	// under them are refused for the rest of the script.
	murky []string
	// pathSet and ifsSet say the script assigned PATH (so command names
	// may run other programs) or IFS (so an expansion splits where the
	// policy does not know). HOME it may not assign.
	pathSet, ifsSet bool
	// lenient counts the checks of code the policy reads only
	// approximately (a script file run by a profile with exec, command
	// lines found in another language's strings): there only the
	// profile's command rules and the permissions of commands are
	// enforced.
	lenient int

	deny     *finding
	approval *finding
	used     perms
	outside  bool
}

// maxPooledWords and maxPooledEntries bound the word buffer and the maps a
// pooled checker keeps, so one huge script does not pin its memory or make
// clearing the maps cost every later check.
const (
	maxPooledWords   = 1024
	maxPooledEntries = 256
)

// reset clears what a check left in c, so no syntax tree or finding
// outlives it, before c goes back to its pool.
func (c *checker) reset() {
	if len(c.seen) > maxPooledEntries || len(c.stats) > maxPooledEntries {
		c.seen, c.stats = map[*syntax.CallExpr]bool{}, statCache{}
	}
	clear(c.seen)
	clear(c.stats)
	c.active, c.funcs, c.vals, c.links, c.written, c.murky, c.logical = nil, nil, nil, nil, nil, nil, nil
	clear(c.words)
	c.words = c.words[:0]
	if cap(c.words) > maxPooledWords {
		c.words = nil
	}
	clear(c.invs)
	c.invs = c.invs[:0]
	c.reader.Reset("")
	c.p, c.ws, c.src, c.dirs, c.root, c.curDirs = nil, nil, "", nil, [1]string{}, nil
	c.depth, c.steps, c.cond, c.lenient, c.valGen, c.nextScope = 0, 0, 0, 0, 0, 0
	clear(c.scopes)
	c.scopes = c.scopes[:0]
	c.stdin, c.pathSet, c.ifsSet = nil, false, false
	c.posArgs, c.posKnown = nil, false
	c.deny, c.approval, c.used, c.outside = nil, nil, 0, false
}

// funcDef is a function the script defines.
type funcDef struct {
	body *syntax.Stmt
	// sure is false once the script may have removed it (unset -f); scope
	// is where it is defined: a call in that construct or one inside it
	// runs it.
	sure  bool
	scope []scope
	depth int
	// called says a call checked the body; one never called is checked at
	// the end of its script, with its arguments unknown.
	called bool
	cwd    cwds
}

// scope is a construct that may not run, or runs apart.
type scope struct {
	id int
	// saved are the variables' values when it was entered.
	saved map[string]varVal
}

// enter begins checking a construct that may not run, or runs apart.
func (c *checker) enter() {
	c.cond++
	c.nextScope++
	sc := scope{id: c.nextScope}
	if len(c.vals) > 0 {
		sc.saved = maps.Clone(c.vals)
	}
	c.scopes = append(c.scopes, sc)
}

// leave ends the innermost construct: a variable it assigned may hold
// either value after it, so the two are merged.
func (c *checker) leave() {
	c.cond--
	sc := c.scopes[len(c.scopes)-1]
	c.scopes = c.scopes[:len(c.scopes)-1]
	for name, after := range c.vals {
		before, had := sc.saved[name]
		switch {
		case !had:
			after.unset = true
		case sameVal(before, after) && before.nameref == after.nameref:
			continue
		case before.numeric() && after.numeric():
			after = varVal{kind: valNumber, unset: before.unset || after.unset}
		default:
			after = varVal{unset: before.unset || after.unset}
		}
		after.assoc = after.assoc || had && before.assoc
		after.integer = after.integer || had && before.integer
		c.vals[name] = after
	}
}

// inScope reports whether the current point is inside the constructs
// path names (or the same).
func (c *checker) inScope(path []scope) bool {
	if len(path) > len(c.scopes) {
		return false
	}
	for i, sc := range path {
		if c.scopes[i].id != sc.id {
			return false
		}
	}
	return true
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

// lenientIgnores reports the rules a lenient check does not enforce: those
// about what the policy cannot read exactly, and about places outside the
// workspace, which the sandbox keeps read-only.
func lenientIgnores(rule string) bool {
	switch rule {
	case "shell:privilege", "shell:hidden-program":
		return false
	case "path:outside-workspace", "path:symlink-escape", "path:glob-parent", "path:murky":
		return true
	}
	return strings.HasPrefix(rule, "shell:")
}

func (c *checker) denyf(rule, format string, args ...any) {
	if c.deny == nil {
		if c.lenient > 0 && lenientIgnores(rule) {
			return
		}
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
		return c.deny != nil
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
	c.checkUncalled(c.depth)
	c.depth--
	c.src = outer
	if c.deny == nil && c.lenient == 0 {
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
	c.curDirs = cwd
	outer := c.stdin
	for _, r := range s.Redirs {
		c.redirect(r, cwd)
		if in := c.redirectedStdin(r, cwd); in != nil {
			c.stdin = in
		}
	}
	if len(s.Redirs) > 0 && c.deny == nil {
		c.recordOutput(s, cwd)
	}
	if s.Background || s.Coprocess || s.Disown {
		c.enter()
		defer c.leave()
	}
	succ, all = c.command(s.Cmd, cwd)
	if c.stdin != outer && !permanentRedirect(s) {
		c.stdin = outer
	}
	switch {
	case s.Background || s.Coprocess || s.Disown:
		return cwd, cwd
	case s.Negated:
		return all, all
	}
	return succ, all
}

// permanentRedirect reports exec with redirections and no command, which
// changes the shell's own descriptors for the rest of the script.
func permanentRedirect(s *syntax.Stmt) bool {
	ce, ok := s.Cmd.(*syntax.CallExpr)
	return ok && len(ce.Args) == 1 && ce.Args[0].Lit() == "exec"
}

func (c *checker) command(cmd syntax.Command, cwd cwds) (succ, all cwds) {
	switch x := cmd.(type) {
	case nil:
		return cwd, cwd
	case *syntax.CallExpr:
		return c.call(x, cwd)
	case *syntax.BinaryCmd:
		c.enter()
		defer c.leave()
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
			// Every element of a pipeline runs in a subshell; the right
			// one reads what the left one writes.
			c.stmt(x.X, cwd)
			if c.deny != nil {
				return cwd, cwd
			}
			outer := c.stdin
			c.stdin = c.produce(x.X, cwd, outer)
			c.stmt(x.Y, cwd)
			c.stdin = outer
			return cwd, cwd
		}
	case *syntax.Subshell:
		c.enter()
		c.stmts(x.Stmts, cwd)
		c.leave()
		return cwd, cwd
	case *syntax.Block:
		a := c.stmts(x.Stmts, cwd)
		return a, a
	case *syntax.IfClause:
		c.enter()
		a := c.ifClause(x, cwd)
		c.leave()
		return a, a
	case *syntax.WhileClause:
		c.enter()
		defer c.leave()
		a := c.loop(cwd, func(cur cwds) cwds {
			a := c.stmts(x.Cond, cur)
			return union(a, c.stmts(x.Do, a))
		})
		return a, a
	case *syntax.ForClause:
		return c.forClause(x, cwd)
	case *syntax.CaseClause:
		c.enter()
		defer c.leave()
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
		f := &funcDef{body: x.Body, scope: slices.Clone(c.scopes), depth: c.depth, cwd: cwd, sure: c.lenient == 0}
		c.funcs[x.Name.Value] = f
		if x.Name.Value == "command_not_found_handle" {
			// Bash calls it by itself, with arguments no one sees.
			c.callFunc(x.Name.Value, nil, cwd)
		}
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
		c.enter()
		defer c.leave()
		if x.Name != nil {
			c.subst(x.Name, cwd)
			// coproc NAME sets NAME to its descriptors' numbers.
			if w := c.expandOne(x.Name); c.nameWord(w, "coproc", cwd) && !c.numberAssign(w.s) {
				return cwd, cwd
			}
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

// forClause checks a for loop. A loop over literal words checks its body
// once per word with the variable holding it; over a glob, with the
// variable standing for every match; over a listing (git ls-files,
// find), for every entry of the tree listed.
func (c *checker) forClause(x *syntax.ForClause, cwd cwds) (succ, all cwds) {
	c.enter()
	defer c.leave()
	body := func(cur cwds) cwds { return c.stmts(x.Do, cur) }
	switch l := x.Loop.(type) {
	case *syntax.WordIter:
		name := l.Name.Value
		c.nameArg(name, "for", cwd)
		if c.sensitiveAssign(name, false) {
			return cwd, cwd
		}
		var values []varVal
		known := l.InPos.IsValid()
		for _, w := range l.Items {
			c.subst(w, cwd)
			if c.deny != nil {
				return cwd, cwd
			}
			ws := c.expand(w)
			if c.globListings(ws, cwd); c.deny != nil {
				return cwd, cwd
			}
			for _, ew := range ws {
				values = append(values, valueOf(ew))
			}
		}
		if !known || len(values) > maxLoopValues {
			values = []varVal{c.loopSummary(values)}
		}
		out := cwd
		for _, v := range values {
			c.bindLoop(name, v)
			out = union(out, c.loop(cwd, body))
			if c.deny != nil {
				break
			}
		}
		return out, out
	case *syntax.CStyleLoop:
		for _, e := range []syntax.ArithmExpr{l.Init, l.Cond, l.Post} {
			if e != nil {
				c.arith(e, cwd)
			}
		}
	}
	a := c.loop(cwd, body)
	return a, a
}

// loopSummary is what a loop variable stands for when its values are too
// many to check one by one: a number when they all are, else unknown.
func (c *checker) loopSummary(values []varVal) varVal {
	for _, v := range values {
		if v.kind != valNumber && (v.kind != valText || !cleanValue(v.text)) {
			return varVal{}
		}
	}
	return varVal{kind: valNumber}
}

// loop runs body until the directories it may leave the script in and the
// values of the variables stop changing, so a cd or an assignment late in
// a loop body is seen by the commands before it on the next iteration.
func (c *checker) loop(cwd cwds, body func(cwds) cwds) cwds {
	cur := cwd
	for range 4 {
		gen := c.valGen
		next := union(cur, body(cur))
		if len(next) == len(cur) && gen == c.valGen || c.deny != nil {
			return next
		}
		cur = next
	}
	return cur
}

// callFunc checks a call of a function with args (nil: arguments the
// policy cannot see), which are its positional parameters.
func (c *checker) callFunc(name string, args []word, cwd cwds) cwds {
	f := c.funcs[name]
	if f == nil || c.active[name] {
		return cwd
	}
	if c.active == nil {
		c.active = map[string]bool{}
	}
	f.called = true
	c.active[name] = true
	outerArgs, outerKnown := c.posArgs, c.posKnown
	c.posArgs, c.posKnown = args, args != nil
	c.enter()
	_, all := c.stmt(f.body, cwd)
	c.leave()
	c.posArgs, c.posKnown = outerArgs, outerKnown
	delete(c.active, name)
	return all
}

// checkUncalled checks the functions a script defined and never called,
// as bash might run them anyway (a trap, an exported function) with
// arguments the policy cannot see.
func (c *checker) checkUncalled(depth int) {
	// Checking one may define others (a function that defines functions).
	for more := true; more && c.deny == nil; {
		more = false
		for name, f := range c.funcs {
			if f.depth == depth && !f.called && c.deny == nil && !c.stop() {
				c.callFunc(name, nil, f.cwd)
				more = true
			}
		}
	}
}

// redirect checks a redirection: an output is a write, an input a read.
func (c *checker) redirect(r *syntax.Redirect, cwd cwds) {
	if r.Word != nil {
		c.subst(r.Word, cwd)
	}
	if r.Hdoc != nil {
		c.subst(r.Hdoc, cwd)
	}
	if r.N != nil && !isDigits(r.N.Value) {
		// {fd}>file assigns a descriptor number to a variable.
		c.nameArg(r.N.Value, "redirection", cwd)
		if !c.numberAssign(strings.Trim(r.N.Value, "{}")) {
			return
		}
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

// resolve resolves p in the workspace from dir, through the links the
// script made, remembering what it finds for the rest of the check.
func (c *checker) resolve(dir, p string) resolved { return c.ws.resolveWith(c.stats, c.links, dir, p) }

// expand evaluates a word of the current script.
func (c *checker) expand(w *syntax.Word) []word {
	n := len(c.words)
	c.words = c.appendWords(c.words, w)
	return c.words[n:len(c.words):len(c.words)]
}

// expandOne evaluates a word that is not split: an assignment's value, a
// case subject.
func (c *checker) expandOne(w *syntax.Word) word {
	ws := c.expand(w)
	if len(ws) != 1 {
		return word{dyn: "a brace expansion", node: w}
	}
	return ws[0]
}

// appendWords evaluates a word of the current script, appending to dst,
// and keeps the word as written for messages.
func (c *checker) appendWords(dst []word, w *syntax.Word) []word {
	n := len(dst)
	dst = c.evalWords(dst, w)
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
			c.enter()
			c.stmts(x.Stmts, cwd)
			c.leave()
			return false
		case *syntax.ProcSubst:
			c.enter()
			c.stmts(x.Stmts, cwd)
			c.leave()
			return false
		case *syntax.ArithmExp:
			c.arithVars(x.X, cwd)
		case *syntax.ParamExp:
			c.paramExp(x, cwd)
		case *syntax.ExtGlob:
			// The parser keeps an extended glob's pattern as text, but
			// bash expands it, substitutions and all (and in [[ == ]]
			// without shopt -s extglob).
			if x.Pattern != nil && (strings.ContainsAny(x.Pattern.Value, "$`") || strings.Contains(x.Pattern.Value, "<(") || strings.Contains(x.Pattern.Value, ">(")) {
				c.denyf("shell:code", "the extended glob %s%s) is not allowed: bash expands what is inside it, substitutions and all, and the policy cannot check it there", x.Op, clip(x.Pattern.Value))
				return false
			}
		}
		return true
	})
}

// paramExp checks what a parameter expansion evaluates beyond reading a
// variable: subscripts and offsets are arithmetic, ${!x} names another
// variable by x's value, ${x@P} expands a prompt.
func (c *checker) paramExp(x *syntax.ParamExp, cwd cwds) {
	if x.Index != nil && !c.assoc(x) {
		c.arithVars(x.Index, cwd)
	}
	if x.Slice != nil {
		if x.Slice.Offset != nil {
			c.arithVars(x.Slice.Offset, cwd)
		}
		if x.Slice.Length != nil {
			c.arithVars(x.Slice.Length, cwd)
		}
	}
	if x.Excl && x.Param != nil && x.Names == 0 && !(x.Index != nil && isAllIndex(x.Index)) {
		// ${!x}: the value of x is a name, and a subscript in it is
		// evaluated.
		v, ok := c.vals[x.Param.Value]
		switch {
		case ok && v.kind == valText:
			c.nameArg(v.text, "${!"+x.Param.Value+"}", cwd)
		case ok && v.kind == valNumber:
		default:
			c.denyf("shell:code", "${!%s} is not allowed: it uses the value of %s as a variable name, which the policy cannot see, and a subscript in a name is evaluated as code", x.Param.Value, x.Param.Value)
		}
	}
	if x.Exp != nil && x.Param != nil && (x.Exp.Op == syntax.AssignUnset || x.Exp.Op == syntax.AssignUnsetOrNull) {
		// ${x:=value} assigns x.
		v := varVal{}
		if x.Exp.Word != nil {
			v = valueOf(c.expandOne(x.Exp.Word))
		}
		if c.envAssign(x.Param.Value, dynWord("a default value", x.Param.Value), true, false) {
			v.unset = false
			c.setVal(x.Param.Value, v)
		}
	}
	if x.Exp != nil && x.Exp.Op == syntax.OtherParamOps && x.Exp.Word != nil && strings.Contains(x.Exp.Word.Lit(), "P") {
		c.denyf("shell:prompt-expansion", "${…@P} is not allowed: prompt expansion runs commands hidden in a variable's value")
	}
	if x.Param != nil && x.Exp == nil && x.Repl == nil && !x.Excl && x.Index == nil {
		// A nameref's target is read through it.
		if v, ok := c.vals[x.Param.Value]; ok && v.nameref {
			c.nameArg(v.text, x.Param.Value, cwd)
		}
	}
}

// isAllIndex reports [@] or [*]: every element or key, no arithmetic.
func isAllIndex(e syntax.ArithmExpr) bool {
	w, ok := e.(*syntax.Word)
	if !ok {
		return false
	}
	l := w.Lit()
	return l == "@" || l == "*"
}

// assoc reports an expansion of an associative array, whose subscripts
// are strings rather than arithmetic.
func (c *checker) assoc(x *syntax.ParamExp) bool {
	if x.Param == nil {
		return false
	}
	v, ok := c.vals[x.Param.Value]
	return ok && v.assoc || isAllIndex(x.Index)
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

// call checks a simple command: its assignments, its words and the command
// itself.
func (c *checker) call(ce *syntax.CallExpr, cwd cwds) (succ, all cwds) {
	c.seen[ce] = true
	c.curDirs = cwd
	for _, a := range ce.Assigns {
		if a.Name != nil && a.Name.Value == "IFS" && len(ce.Args) > 0 && readsLines(ce.Args[0].Lit()) {
			// IFS= read: only how read splits its input.
			if a.Value != nil {
				c.subst(a.Value, cwd)
			}
			continue
		}
		c.assign(a, cwd, len(ce.Args) > 0, false)
	}
	if len(ce.Args) == 0 || c.deny != nil {
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
	if c.globListings(argv, cwd); c.deny != nil {
		return cwd, cwd
	}
	succ = c.run(argv, cwd)
	return succ, union(cwd, succ)
}

// oneWord reports a word that expands to exactly one argument: quoted
// whole, without "$@", "$*" or "${a[@]}".
func oneWord(w *syntax.Word) bool {
	if w == nil || len(w.Parts) != 1 {
		return false
	}
	dq, ok := w.Parts[0].(*syntax.DblQuoted)
	if !ok {
		return false
	}
	for _, p := range dq.Parts {
		if pe, ok := p.(*syntax.ParamExp); ok && pe.Param != nil {
			if v := pe.Param.Value; v == "@" || v == "*" || pe.Index != nil && isAllIndex(pe.Index) {
				return false
			}
		}
	}
	return true
}

// readsLines reports the builtins IFS only tells how to split input.
func readsLines(name string) bool {
	return name == "read" || name == "mapfile" || name == "readarray"
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
	// shown names the command in messages when it is what another
	// amounts to (find -delete checked as rm -rf).
	shown string
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
	case inv.shown != "":
		return inv.shown
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
func (c *checker) run(argv []word, cwd cwds) cwds { return c.runArgv(argv, cwd, true) }

// runExternal checks argv as a program another one runs (command, exec,
// env, xargs, find -exec…): never a shell function of its name, which
// only the shell's own command words call.
func (c *checker) runExternal(argv []word, cwd cwds) cwds { return c.runArgv(argv, cwd, false) }

func (c *checker) runArgv(argv []word, cwd cwds, funcs bool) cwds {
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
	if f, ok := c.funcs[name]; ok && funcs {
		args := slices.Clone(argv[1:])
		if args == nil {
			args = []word{}
		}
		for _, a := range args {
			if !a.lit && !oneWord(a.node) {
				// "$@" or an unquoted expansion: how many arguments is
				// not known.
				args = nil
				break
			}
		}
		cwd = union(cwd, c.callFunc(name, args, cwd))
		if f.sure && f.depth == c.depth && c.inScope(f.scope) {
			// The function runs, not a program of its name.
			return cwd
		}
	}
	if strings.Contains(name, "/") {
		dir, base := path.Split(name)
		if !systemBinDir(dir) || base == "" {
			if base != "" {
				inv := c.invocation(invocation{name: base, argv: argv, cwd: cwd})
				inv.sub = subcommands(inv.subBuf[:0], base, argv[1:])
				c.ruleMatch(inv, true)
				if c.deny != nil {
					return cwd
				}
			}
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
	if c.pathSet && !isBuiltin(name) && !inv.allowed && !c.need(inv, pExec) {
		return cwd
	}
	h := c.cmds[name]
	if h == nil {
		return unknownCommand(c, inv)
	}
	return h(c, inv)
}

// program checks a command named by a path: a script or binary in the
// workspace, or a program elsewhere. A link to a system program (made
// before or by the script) is that program.
func (c *checker) program(argv []word, cwd cwds) cwds {
	if len(cwd) == 1 && argv[0].lit {
		if r := c.resolve(cwd[0], argv[0].s); !r.in && !r.special && !r.network {
			if dir, base := path.Split(r.abs); systemBinDir(dir) && base != "" && base != path.Base(argv[0].s) {
				renamed := slices.Clone(argv)
				renamed[0] = litWord(r.abs)
				return c.run(renamed, cwd)
			}
		}
	}
	base := path.Base(argv[0].s)
	inv := c.invocation(invocation{name: base, argv: argv, cwd: cwd})
	c.rules(inv)
	if c.deny != nil {
		return cwd
	}
	c.usePath(inv, argv[0], pathUse{acc: accRead})
	if c.deny != nil {
		return cwd
	}
	return c.runFile(inv, argv[0], argv[1:], langUnknown)
}

// globSpells reports an argument of inv that is a glob pattern matching a
// subcommand word of pt (kubectl de*te): bash replaces it with the name
// of a file, and the script may have made one called delete.
func globSpells(pt cmdPattern, inv *invocation) bool {
	if len(pt.words) < 2 || !globWord(pt.words[0], inv.name) {
		return false
	}
	args := inv.argv[1:]
	if inv.name == "git" {
		// Only the subcommand: git add * is no git push.
		_, rest := gitGlobal(args)
		args = rest[:min(len(rest), 1)]
	}
	for _, w := range args {
		if !w.glob {
			continue
		}
		for _, pw := range pt.words[1:] {
			if ok, _ := path.Match(w.pat, pw); ok {
				return true
			}
		}
	}
	return false
}

// aliasSub is the other subcommand a command's options make it, which deny
// and approval rules for that subcommand hold too: terraform apply
// -destroy is terraform destroy (which says it is its alias). nil for
// most.
func aliasSub(inv *invocation) []string {
	if inv.name != "terraform" || len(inv.sub) == 0 || inv.sub[0] != "apply" {
		return nil
	}
	for _, w := range inv.argv[1:] {
		if w.lit && (w.s == "-destroy" || w.s == "--destroy" || strings.HasPrefix(w.s, "-destroy=") && w.s != "-destroy=false") {
			return []string{"destroy"}
		}
	}
	return nil
}

// otherCmd is a command another amounts to: its program and the
// subcommand words the rules of that program are matched against.
type otherCmd struct {
	name string
	sub  []string
	// anySub is a subcommand the policy cannot see: it may be any.
	anySub bool
}

var (
	composeSub   = []string{"compose"}
	helmUpgrade  = []string{"upgrade"}
	helmUninst   = []string{"uninstall"}
	helmDelete   = []string{"delete"}
	helmfileSubs = map[string][][]string{
		"apply": {helmUpgrade}, "sync": {helmUpgrade}, "deploy": {helmUpgrade},
		"destroy": {helmUninst, helmDelete}, "delete": {helmUninst, helmDelete},
	}
)

// otherCommands are the commands whose deny and approval rules hold inv:
// the programs that are another under its name, or that run it with the
// same subcommand words (oc delete is kubectl delete, terragrunt apply
// runs terraform apply, tofu is terraform's fork, podman and nerdctl are
// docker, docker-compose is docker compose, yarn, pnpm and bun publish
// to npm's registry as npm publish does), and helmfile, whose apply, sync
// and deploy run helm upgrade and whose destroy runs helm uninstall. None
// for most.
func otherCommands(inv *invocation) (out [2]otherCmd, n int) {
	switch inv.name {
	case "oc", "kubecolor", "kubectl.exe":
		out[0] = otherCmd{name: "kubectl", sub: inv.sub}
		return out, 1
	case "tofu", "terragrunt", "terraform.exe":
		out[0] = otherCmd{name: "terraform", sub: inv.sub}
		return out, 1
	case "podman", "nerdctl", "buildah", "docker.exe":
		out[0] = otherCmd{name: "docker", sub: inv.sub}
		return out, 1
	case "docker-compose", "podman-compose":
		out[0] = otherCmd{name: "docker", sub: append(composeSub[:1:1], inv.sub...)}
		return out, 1
	case "yarn", "pnpm", "bun":
		out[0] = otherCmd{name: "npm", sub: inv.sub}
		return out, 1
	case "helmfile":
		for _, w := range inv.argv[1:] {
			if !w.lit {
				// A subcommand the policy cannot see may be any of them.
				out[0] = otherCmd{name: "helm", anySub: true}
				return out, 1
			}
			if subs, ok := helmfileSubs[w.s]; ok {
				for _, sub := range subs {
					out[n] = otherCmd{name: "helm", sub: sub}
					n++
				}
				return out, n
			}
		}
	}
	return out, 0
}

// rules applies the profile's commands.deny, commands.allow and approval
// lists to inv.
func (c *checker) rules(inv *invocation) { c.ruleMatch(inv, false) }

// ruleMatch is rules; for a program named by a path outside the system's
// directories (./kubectl, a copy, a link) named is true: the denial and
// approval rules for its name hold it, commands.allow does not.
func (c *checker) ruleMatch(inv *invocation, named bool) {
	// git's and gh's subcommand words are known exactly, so a rule for
	// "git push" does not catch git stash push.
	exact := inv.name == "git" || inv.name == "gh"
	// A rule's subcommand may hide in an argument the policy cannot see
	// (kubectl $(…), npm "$@"): such a call is taken to match.
	dynamic := false
	if !exact {
		for _, w := range inv.argv[1:] {
			if !w.lit {
				dynamic = true
				break
			}
		}
	}
	alias := aliasSub(inv)
	others, nOthers := otherCommands(inv)
	matchesOther := func(pt cmdPattern) bool {
		for _, o := range others[:nOthers] {
			if pt.matchAny(o.name, o.sub) || (dynamic || o.anySub) && len(pt.words) > 1 && globWord(pt.words[0], o.name) {
				return true
			}
		}
		return false
	}
	matches := func(pt cmdPattern) bool {
		if exact {
			return (pt.match(inv.name, inv.sub) || globSpells(pt, inv)) && c.carries(inv, pt.opts)
		}
		return (pt.matchAny(inv.name, inv.sub) || alias != nil && pt.matchAny(inv.name, alias) || matchesOther(pt) ||
			dynamic && len(pt.words) > 1 && globWord(pt.words[0], inv.name) || globSpells(pt, inv)) &&
			c.carries(inv, pt.opts)
	}
	for _, pt := range c.p.denyCmds {
		if matches(pt) {
			c.denyf("commands.deny:"+pt.text, "command %q is denied by commands.deny %q", inv.display(), pt.text)
			return
		}
	}
	for _, pt := range c.p.allowCmds {
		if !named && pt.match(inv.name, inv.sub) {
			inv.allowed = true
			break
		}
	}
	for _, pt := range c.p.approvalCmds {
		if matches(pt) {
			c.approve("approval:"+pt.text, "command %q needs approval (profile %q lists %q)", inv.display(), c.p.Name, pt.text)
		}
	}
}

// carries reports whether inv may carry every option of opts, as a rule
// names them ("-r", "--force"): spelt alone or in a cluster (-rf, -fr),
// in either case (-R), long for short and short for long by its first
// letter (--recursive for -r, -f for --force), abbreviated (--forc) or
// extended (--force-with-lease), anywhere before "--". An argument the
// policy cannot see, or a glob that matches a name starting with "-", may
// be any option. git push forces with a "+" refspec and --mirror too.
// Reading too much is the safe side: these are deny and approval rules.
func (c *checker) carries(inv *invocation, opts []string) bool {
	if len(opts) == 0 {
		return true
	}
	push := inv.name == "git" && len(inv.sub) > 0 && inv.sub[0] == "push"
	for _, o := range opts {
		if !c.carriesOne(inv, o, push) {
			return false
		}
	}
	return true
}

func (c *checker) carriesOne(inv *invocation, o string, push bool) bool {
	long := strings.HasPrefix(o, "--")
	letter := o[1]
	if long {
		letter = o[2]
	}
	force := push && (o == "--force" || o == "-f")
	for _, a := range inv.argv[1:] {
		if !a.lit || a.glob {
			if c.mayBeOption(a, inv.cwd) {
				return true
			}
			if !a.lit {
				continue
			}
		}
		s := a.s
		switch {
		case s == "--":
			return false
		case force && (strings.HasPrefix(s, "+") || strings.Contains(s, "=+") || s == "--mirror"):
			return true
		case len(s) < 2 || s[0] != '-':
			continue
		case strings.HasPrefix(s, "--"):
			name, _, _ := strings.Cut(s, "=")
			if long && (name == o || len(name) >= 3 && strings.HasPrefix(o, name) || strings.HasPrefix(name, o+"-")) ||
				!long && len(name) > 2 && equalFoldByte(name[2], letter) {
				return true
			}
		default:
			for i := 1; i < len(s); i++ {
				if equalFoldByte(s[i], letter) {
					return true
				}
			}
		}
	}
	return false
}

// mayBeOption reports whether a word that is not a plain literal may
// expand to an option: an expansion that does not start with literal text,
// or a glob matching a name that starts with "-".
func (c *checker) mayBeOption(w word, cwd cwds) bool {
	switch {
	case w.number:
		return false
	case w.lit:
		first, _, _ := strings.Cut(w.pat, "/")
		if !hasMeta(first) {
			return strings.HasPrefix(first, "-")
		}
		for _, dir := range cwd {
			got, ok := c.ws.dirs.list(dir)
			if !ok {
				continue
			}
			for _, e := range got.entries {
				if ok, _ := filepath.Match(first, e.name); ok && strings.HasPrefix(e.name, "-") {
					return true
				}
			}
		}
		return false
	case w.node != nil && len(w.node.Parts) > 0:
		if lit, ok := w.node.Parts[0].(*syntax.Lit); ok && lit.Value != "" {
			return lit.Value[0] == '-'
		}
	}
	return true
}

func equalFoldByte(a, b byte) bool {
	return a == b || 'a' <= a && a <= 'z' && a-'a'+'A' == b || 'A' <= a && a <= 'Z' && a-'A'+'a' == b
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
		return c.deny == nil
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
	if w.entries {
		u.entries, u.noLinks, u.names = true, w.noLinks, w.names
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
	if len(c.murky) > 0 && !r.special {
		for _, t := range c.murky {
			if r.abs == t || under(r.abs, t) {
				c.denyf("path:murky", "%s %q is not allowed in the same command: an earlier command (%s) may have made links under %s that the policy cannot see; run it in a command of its own first",
					u.acc.verb(), r.raw, "an extraction or a copy of links", c.display(t))
				return
			}
		}
	}
	var grant perms
	if inv.allowed {
		grant = pRead | pWrite
	}
	d, outside := c.p.checkPath(r, u, grant)
	if d != nil {
		c.denyf(d.rule, "%s", d.reason)
		return
	}
	if r.in && (u.follow || u.entries) {
		switch link, tooBig := c.ws.linkOut(r.abs, u); {
		case link != "":
			rel, _ := c.ws.relative(link)
			c.denyf("path:symlink-escape", "%s %q through its links is not allowed: %s leads outside the workspace", u.acc.verb(), r.raw, rel)
			return
		case tooBig:
			c.denyf("path:symlink-escape", "%s all of %q through its links is not allowed: the tree is too large to check for links out of the workspace; leave out the option that follows links", u.acc.verb(), r.raw)
			return
		}
	}
	if u.acc == accWrite && !u.meta {
		c.markWritten(r.abs)
	}
	if outside {
		c.outside = true
	}
}

// display names an absolute path for a message: relative to the
// workspace when inside it.
func (c *checker) display(abs string) string {
	if rel, ok := c.ws.relative(abs); ok {
		return rel
	}
	return abs
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
	matches, more := globBash(c.stats, c.ws.dirs, dir, w.pat, maxGlobMatches)
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
		if rel, ok := c.ws.relative(m.path); ok && m.real && len(c.links) == 0 {
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
