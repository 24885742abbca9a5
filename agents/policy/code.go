package policy

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Bash evaluates more than commands: arithmetic (let, (( )), $(( )),
// for ((…)), [[ x -eq y ]], subscripts, offsets, integer variables) reads
// variables whose values are evaluated as expressions in turn, and names
// with a subscript (read 'a[…]', printf -v, test -v, declare, unset,
// ${!x}) evaluate the subscript. A subscript or value like a[$(rm -rf /)]
// runs the command. So arithmetic and names are code: literal code is
// parsed and checked like any other command, and code whose text the
// policy cannot see is refused.

// valKind is what the policy knows about a variable's value.
type valKind uint8

const (
	valUnknown valKind = iota
	valNumber          // a number, which the policy does not know
	valText            // this text
	valWord            // a path word: a glob, or the entries of a listing
)

// varVal is what the policy knows about a variable.
type varVal struct {
	kind valKind
	text string // valText: the value; a nameref's target
	w    word   // valWord
	// unset means the variable may also be unset: it was assigned only in
	// a branch that may not run.
	unset   bool
	assoc   bool // declared an associative array
	integer bool // declared -i: assignments are arithmetic
	// caseConv is declared -l, -u or -c: bash changes the case of what
	// is assigned, so the value is not the text the script wrote.
	caseConv bool
	nameref  bool // declared -n: text names its target
}

// numeric reports a value arithmetic reads as a plain number.
func (v varVal) numeric() bool {
	return v.kind == valNumber || v.kind == valText && cleanValue(v.text)
}

func sameVal(a, b varVal) bool {
	if a.kind != b.kind || a.unset != b.unset {
		return false
	}
	switch a.kind {
	case valText:
		return a.text == b.text
	case valWord:
		return a.w.s == b.w.s && a.w.glob == b.w.glob && a.w.entries == b.w.entries
	}
	return true
}

// valueOf is the value a variable gets from one expanded word.
func valueOf(w word) varVal {
	switch {
	case w.entries || w.lit && w.glob:
		return varVal{kind: valWord, w: w}
	case w.lit:
		return varVal{kind: valText, text: w.s}
	case w.number:
		return varVal{kind: valNumber}
	}
	return varVal{}
}

// setVal records an assignment. The construct it is in may not run:
// leaving it merges the value with the one before.
func (c *checker) setVal(name string, v varVal) {
	if c.vals == nil {
		c.vals = map[string]varVal{}
	}
	old, had := c.vals[name]
	v.assoc, v.integer, v.caseConv = old.assoc, old.integer, old.caseConv
	if v.caseConv && (v.kind == valText || v.kind == valWord) {
		v = varVal{unset: v.unset, assoc: v.assoc, integer: v.integer, caseConv: true}
	}
	if had && sameVal(old, v) && old.nameref == v.nameref {
		return
	}
	c.vals[name] = v
	c.valGen++
}

// bindLoop gives a loop variable one of its values while the body is
// checked.
func (c *checker) bindLoop(name string, v varVal) {
	if c.vals == nil {
		c.vals = map[string]varVal{}
	}
	c.vals[name] = v
	c.valGen++
}

// setClean records whether a variable's value is known to be a number.
func (c *checker) setClean(name string, clean bool) {
	if clean {
		c.setVal(name, varVal{kind: valNumber})
		return
	}
	c.setVal(name, varVal{})
}

// arith checks an arithmetic expression that is evaluated: its
// substitutions and the variables it reads.
func (c *checker) arith(x syntax.ArithmExpr, cwd cwds) {
	c.subst(x, cwd)
	c.arithVars(x, cwd)
}

// arithVars checks what an arithmetic expression evaluates: quoted text in
// it is an expression of its own, and every variable it reads has its
// value evaluated.
func (c *checker) arithVars(x syntax.ArithmExpr, cwd cwds) {
	syntax.Walk(x, func(n syntax.Node) bool {
		if c.deny != nil {
			return false
		}
		switch y := n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst:
			return false
		case *syntax.BinaryArithm:
			if name, ok := arithName(y.X); ok && arithAssign(y.Op) {
				if !c.numberAssign(name) {
					return false
				}
				// The subscript of an element is code too.
				if w := y.X.(*syntax.Word); isElement(w) {
					if c.arithWord(w, cwd); c.deny != nil {
						return false
					}
				}
				if y.Op == syntax.Assgn {
					c.arithVars(y.Y, cwd)
					c.setClean(name, true)
					return false
				}
			}
		case *syntax.UnaryArithm:
			if name, ok := arithName(y.X); ok && (y.Op == syntax.Inc || y.Op == syntax.Dec) && !c.numberAssign(name) {
				return false
			}
		case *syntax.Word:
			c.arithWord(y, cwd)
			return false
		}
		return true
	})
}

// arithName returns the variable an arithmetic operand names, when it is a
// plain name or an element of one (PATH[0] is PATH).
func arithName(x syntax.ArithmExpr) (string, bool) {
	w, ok := x.(*syntax.Word)
	if !ok || len(w.Parts) != 1 {
		return "", false
	}
	switch p := w.Parts[0].(type) {
	case *syntax.Lit:
		if validName(p.Value) {
			return p.Value, true
		}
	case *syntax.ParamExp:
		if p.Short && p.Param != nil && p.Index != nil && validName(p.Param.Value) {
			return p.Param.Value, true
		}
	}
	return "", false
}

// isElement reports a word that is one array element, a[i].
func isElement(w *syntax.Word) bool {
	pe, ok := w.Parts[0].(*syntax.ParamExp)
	return ok && pe.Index != nil
}

// arithAssign reports the operators that assign to their left operand.
func arithAssign(op syntax.BinAritOperator) bool {
	switch op {
	case syntax.Assgn, syntax.AddAssgn, syntax.SubAssgn, syntax.MulAssgn, syntax.QuoAssgn, syntax.RemAssgn,
		syntax.AndAssgn, syntax.OrAssgn, syntax.XorAssgn, syntax.ShlAssgn, syntax.ShrAssgn, syntax.PowAssgn:
		return true
	}
	return false
}

// numberAssign checks a variable a construct sets to a number: arithmetic
// (let, (( )), $(( ))), a descriptor variable ({fd}>file), a coprocess's
// name. A number is a name too: PATH=0 finds programs in a directory 0.
func (c *checker) numberAssign(name string) bool {
	base, _, _ := strings.Cut(name, "[")
	return c.envAssign(base, word{number: true, dyn: "a number", src: name}, true, false)
}

// arithWord checks one operand of an arithmetic expression.
func (c *checker) arithWord(w *syntax.Word, cwd cwds) {
	if len(w.Parts) == 1 {
		switch p := w.Parts[0].(type) {
		case *syntax.Lit:
			c.readVar(p.Value, false, cwd)
			return
		case *syntax.ParamExp:
			c.arithParam(p, cwd)
			return
		}
	}
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.SglQuoted:
			v := p.Value
			if p.Dollar {
				var ok bool
				if v, ok = dollarQuoted(v); !ok {
					c.refuseCode("an ANSI-C quoted string the policy cannot decode")
					return
				}
			}
			c.arithText(v, cwd)
		case *syntax.DblQuoted:
			if len(p.Parts) == 1 {
				if pe, ok := p.Parts[0].(*syntax.ParamExp); ok {
					c.arithParam(pe, cwd)
					continue
				}
			}
			text, ok := c.dblText(p)
			if !ok {
				c.refuseCode("a quoted expansion")
				return
			}
			c.arithText(text, cwd)
		case *syntax.ParamExp:
			c.arithParam(p, cwd)
		case *syntax.Lit:
			if !cleanValue(p.Value) && !validName(p.Value) {
				c.arithText(p.Value, cwd)
			} else {
				c.readVar(p.Value, false, cwd)
			}
		case *syntax.ArithmExp:
			// A number.
		case *syntax.CmdSubst:
			// Its output is part of the expression's text.
			if !numericSubst(p) {
				c.refuseCode("the output of a command substitution")
			}
		default:
			c.refuseCode(describePart(part))
		}
	}
}

// arithParam checks a parameter expansion read in arithmetic: its value is
// evaluated as an expression.
func (c *checker) arithParam(p *syntax.ParamExp, cwd cwds) {
	c.paramExp(p, cwd)
	if p.Param == nil || p.Length || c.deny != nil {
		return
	}
	if p.Exp != nil || p.Repl != nil || p.Slice != nil || p.Excl || p.Names != 0 {
		c.refuseCode("a parameter expansion whose value the policy cannot see")
		return
	}
	c.readVar(p.Param.Value, p.Dollar.IsValid(), cwd)
}

// refuseCode refuses code whose text the policy cannot see.
func (c *checker) refuseCode(what string) {
	c.denyf("shell:arithmetic", "arithmetic on %s is not allowed: bash evaluates it as an expression, and the policy cannot see what it runs", what)
}

// readVar checks a variable read in arithmetic, whose value bash evaluates
// as an expression: a number is fine, known text is checked as the
// expression it is, and an unknown value is refused. param is true for
// $name, where digits are positional parameters rather than numbers.
func (c *checker) readVar(name string, param bool, cwd cwds) {
	switch name {
	case "#", "?", "$", "!", "RANDOM", "SECONDS", "LINENO", "BASHPID", "PPID", "UID", "EUID", "EPOCHSECONDS",
		"SRANDOM", "COLUMNS", "LINES":
		return
	}
	if !param && cleanValue(name) || !param && !validName(name) {
		return
	}
	if param && c.posKnown && len(name) == 1 && name[0] >= '1' && name[0] <= '9' {
		i := int(name[0] - '1')
		if i >= len(c.posArgs) {
			return
		}
		if a := c.posArgs[i]; a.lit && !a.glob && !a.entries {
			c.arithText(a.s, cwd)
			return
		}
	}
	v, ok := c.vals[name]
	switch {
	case ok && (v.numeric() || v.kind == valUnknown && v.unset && v.integer):
		return
	case ok && v.kind == valText:
		c.arithText(v.text, cwd)
		return
	case !ok && !param && !bashData(name):
		// Never assigned by the script: unset, or one of the few
		// variables of the environment the tool builds, none of which
		// holds an expression.
		return
	case !ok && param && validName(name) && !bashData(name):
		return
	}
	c.denyf("shell:arithmetic", "arithmetic on $%s is not allowed: its value is not known, and bash evaluates it as an expression that can run commands", name)
}

// bashData reports a variable bash fills with data the policy cannot see:
// what read, mapfile and [[ =~ ]] put there, the command being run.
func bashData(name string) bool {
	switch name {
	case "REPLY", "MAPFILE", "BASH_REMATCH", "BASH_COMMAND", "BASH_ARGV", "BASH_ARGV0", "COPROC",
		"BASH_EXECUTION_STRING", "DIRSTACK", "OLDPWD", "READLINE_LINE", "COMP_LINE", "COMP_WORDS", "@", "*", "_":
		return true
	}
	return false
}

// arithText checks text bash evaluates as an arithmetic expression: a
// quoted operand, a variable's value, a subscript in a name.
func (c *checker) arithText(text string, cwd cwds) {
	if cleanValue(text) || validName(text) && c.vals[text].numeric() {
		return
	}
	if c.depth >= maxNesting {
		c.denyf("shell:too-deep", "the command nests arithmetic in values more than %d deep", maxNesting)
		return
	}
	if !strings.ContainsAny(text, "$`[") && !strings.ContainsFunc(text, isNameByte) {
		// Operators and numbers only.
		return
	}
	c.reader.Reset(text)
	x, err := c.parser.Arithmetic(&c.reader)
	if err != nil {
		// Bash evaluates as it parses: the variables before the error
		// are read, and their values evaluated.
		c.denyf("shell:code", "%q is evaluated as arithmetic and does not parse as an expression the policy can check", clip(text))
		return
	}
	if x == nil {
		return
	}
	outer := c.src
	c.src = text
	c.depth++
	c.arith(x, cwd)
	c.depth--
	c.src = outer
}

func isNameByte(r rune) bool { return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }

// clip shortens text for a message.
func clip(s string) string {
	if len(s) > 60 {
		return strings.ToValidUTF8(s[:60], "") + "…"
	}
	return s
}

// nameArg checks a variable name a builtin takes from its arguments (read
// NAME, printf -v NAME, test -v NAME, declare NAME=…): a subscript in it is
// evaluated, as arithmetic, or for an associative array as a word with its
// expansions.
func (c *checker) nameArg(name, what string, cwd cwds) {
	base, sub, ok := strings.Cut(name, "[")
	if !ok || !strings.HasSuffix(sub, "]") || !validName(base) {
		return
	}
	sub = sub[:len(sub)-1]
	if isAllIndex(&syntax.Word{Parts: []syntax.WordPart{&syntax.Lit{Value: sub}}}) {
		return
	}
	if c.vals[base].assoc {
		if !strings.ContainsAny(sub, "$`") {
			return
		}
		c.reader.Reset(sub)
		doc, err := c.parser.Document(&c.reader)
		if err != nil {
			c.denyf("shell:code", "%s: the subscript of %q does not parse", what, clip(name))
			return
		}
		outer := c.src
		c.src = sub
		c.depth++
		c.subst(doc, cwd)
		c.depth--
		c.src = outer
		return
	}
	c.arithText(sub, cwd)
}

// dblText is the text of a double-quoted string with only literal parts.
func (c *checker) dblText(p *syntax.DblQuoted) (string, bool) {
	var b strings.Builder
	for _, q := range p.Parts {
		l, ok := q.(*syntax.Lit)
		if !ok {
			return "", false
		}
		b.WriteString(unescapeDouble(l.Value))
	}
	return b.String(), true
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

// test checks [[ … ]]: its substitutions, the operands of its arithmetic
// comparisons and the names -v tests.
func (c *checker) test(x syntax.TestExpr, cwd cwds) {
	c.subst(x, cwd)
	syntax.Walk(x, func(n syntax.Node) bool {
		switch b := n.(type) {
		case *syntax.BinaryTest:
			switch b.Op {
			case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
				for _, op := range []syntax.TestExpr{b.X, b.Y} {
					if w, ok := op.(*syntax.Word); ok {
						c.arithVars(w, cwd)
					}
				}
			}
			if b.Op == syntax.TsNewer || b.Op == syntax.TsOlder || b.Op == syntax.TsDevIno {
				c.testFile(b.X, cwd)
				c.testFile(b.Y, cwd)
			}
		case *syntax.UnaryTest:
			if b.Op == syntax.TsVarSet || b.Op == syntax.TsRefVar {
				if w, ok := b.X.(*syntax.Word); ok {
					c.nameWord(c.expandOne(w), "[[ -v ]]", cwd)
				}
			}
			if b.Op >= syntax.TsExists && b.Op <= syntax.TsNoEmpty {
				c.testFile(b.X, cwd)
			}
		}
		return c.deny == nil
	})
}

// testFile checks the operand of a file test of [[ ]] (-e, -f, -s, -nt
// …) as a read: what it tells of a file outside the workspace (that it is
// there, its size, its owner, its age) is what stat would.
func (c *checker) testFile(x syntax.TestExpr, cwd cwds) {
	w, ok := x.(*syntax.Word)
	if !ok || c.deny != nil {
		return
	}
	inv := c.invocation(invocation{name: "[[", cwd: cwd})
	c.usePath(inv, c.expandOne(w), pathUse{acc: accRead})
}

// nameWord checks a name argument as expanded: a name the policy cannot see
// is refused, a literal one checked.
func (c *checker) nameWord(w word, what string, cwd cwds) bool {
	if !w.lit {
		c.denyf("shell:code", "%s with a name that is not a literal (%s) is not allowed: a subscript in a name is evaluated as code", what, w.source())
		return false
	}
	c.nameArg(w.s, what, cwd)
	return c.deny == nil
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
	if a.Name == nil {
		return
	}
	name := a.Name.Value
	cur := c.vals[name]
	if a.Index != nil {
		if cur.assoc {
			c.subst(a.Index, cwd)
		} else {
			c.arith(a.Index, cwd)
		}
	}
	if c.deny != nil {
		return
	}
	integer = integer || cur.integer
	if cur.nameref && a.Naked {
		return
	}
	target := name
	if cur.nameref && cur.kind == valText {
		target, _, _ = strings.Cut(cur.text, "[")
	}
	var val word
	hasVal := a.Value != nil && a.Array == nil
	if hasVal {
		val = c.expandOne(a.Value)
	} else if !a.Naked && a.Array == nil {
		// NAME= : the empty value.
		hasVal, val = true, word{lit: true}
	}
	if a.Naked && a.Value == nil && a.Array == nil {
		// declare NAME: keeps the value it had, but local, +x and -n
		// unset, unexport or redirect it.
		if sandboxVar(target) {
			c.sandboxVarDeny("declaring " + target)
			return
		}
		if exported {
			c.envAssign(target, word{lit: true}, false, true)
		}
		return
	}
	if !c.envAssign(target, val, hasVal, exported) {
		return
	}
	if a.Array != nil {
		c.arrayValue(name, a.Array, cwd, integer)
		return
	}
	if integer && hasVal {
		c.arithWord(a.Value, cwd)
		if c.deny == nil {
			c.setVal(name, varVal{kind: valNumber})
		}
		return
	}
	switch {
	case a.Append && a.Index == nil && hasVal && val.lit && cur.kind == valText && !cur.unset:
		c.setVal(name, varVal{kind: valText, text: cur.text + val.s})
	case a.Append || a.Index != nil:
		if a.Index == nil {
			c.setVal(name, varVal{})
		}
	case hasVal:
		c.setVal(name, valueOf(val))
	default:
		c.setVal(name, varVal{kind: valText})
	}
}

// arrayValue checks an array assignment: explicit subscripts are
// arithmetic; the array is a number when all its elements are.
func (c *checker) arrayValue(name string, arr *syntax.ArrayExpr, cwd cwds, integer bool) {
	assoc := c.vals[name].assoc
	numbers := true
	for _, e := range arr.Elems {
		if e.Index != nil {
			if assoc {
				c.subst(e.Index, cwd)
			} else {
				c.arith(e.Index, cwd)
			}
		}
		if e.Value == nil {
			continue
		}
		if integer {
			c.arithWord(e.Value, cwd)
			continue
		}
		ws := c.expand(e.Value)
		if c.globListings(ws, cwd); c.deny != nil {
			return
		}
		for _, w := range ws {
			if !w.lit || !cleanValue(w.s) {
				numbers = false
			}
		}
	}
	if c.deny == nil {
		c.setClean(name, numbers || integer)
	}
}

// decl checks declare, local, export, readonly, typeset and nameref.
func (c *checker) decl(d *syntax.DeclClause, cwd cwds) {
	variant := d.Variant.Value
	exported := variant == "export"
	integer, nameref, assoc, caseConv := false, variant == "nameref", false, false
	for _, a := range d.Args {
		if !(a.Naked && a.Name == nil && a.Value != nil) {
			continue
		}
		c.subst(a.Value, cwd)
		for _, w := range c.expand(a.Value) {
			if !w.lit {
				c.denyf("shell:code", "%s with an argument that is not a literal (%s) is not allowed: it could assign any variable, and a subscript in a name is evaluated as code", variant, w.source())
				return
			}
			if flags, ok := strings.CutPrefix(w.s, "-"); ok {
				exported = exported || strings.Contains(flags, "x")
				integer = integer || strings.Contains(flags, "i")
				nameref = nameref || strings.Contains(flags, "n")
				assoc = assoc || strings.Contains(flags, "A")
				caseConv = caseConv || strings.ContainsAny(flags, "luc")
				continue
			}
			if strings.HasPrefix(w.s, "+") {
				continue
			}
			// A quoted NAME[SUB]=VALUE the parser did not see as an
			// assignment: bash does.
			name, value, hasVal := strings.Cut(w.s, "=")
			if !c.nameWord(litWord(name), variant, cwd) {
				return
			}
			base, _, _ := strings.Cut(name, "[")
			if !c.envAssign(base, litWord(value), hasVal, exported) {
				return
			}
			if integer && hasVal {
				c.arithText(value, cwd)
			}
			c.setVal(base, varVal{})
		}
	}
	if c.deny != nil {
		return
	}
	for _, a := range d.Args {
		if a.Naked && a.Name == nil {
			continue
		}
		if a.Name == nil {
			continue
		}
		name := a.Name.Value
		if sandboxVar(name) && a.Naked {
			// local, +x and -n unset, unexport or redirect it.
			c.sandboxVarDeny("declaring " + name)
			return
		}
		if assoc || integer || caseConv {
			v := c.vals[name]
			if c.vals == nil {
				c.vals = map[string]varVal{}
			}
			v.assoc, v.integer, v.caseConv = v.assoc || assoc, v.integer || integer, v.caseConv || caseConv
			c.vals[name] = v
		}
		if nameref {
			if !c.declareNameref(variant, name, a, cwd) {
				return
			}
			continue
		}
		c.assign(a, cwd, exported, integer)
		if c.deny != nil {
			return
		}
	}
}

// declareNameref checks declare -n NAME=TARGET: every later use of NAME
// reads or assigns TARGET, so TARGET is checked as a name, and as the
// variable assigned.
func (c *checker) declareNameref(variant, name string, a *syntax.Assign, cwd cwds) bool {
	if a.Value == nil {
		c.setVal(name, varVal{})
		v := c.vals[name]
		v.nameref = true
		c.vals[name] = v
		return true
	}
	t := c.expandOne(a.Value)
	if !c.nameWord(t, variant+" -n", cwd) {
		return false
	}
	base, _, _ := strings.Cut(t.s, "[")
	if c.sensitiveAssign(base, false) {
		return false
	}
	c.setVal(name, varVal{kind: valText, text: t.s})
	v := c.vals[name]
	v.nameref = true
	c.vals[name] = v
	return true
}
