package policy

import (
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// word is a shell word as the policy sees it after brace expansion, tilde
// expansion and quote removal. A word whose value depends on the run
// (parameters, substitutions) is not literal, and dyn says why.
type word struct {
	s    string // the value, when lit
	lit  bool
	glob bool   // has unquoted glob characters: s is a pattern, pat the escaped form (when lit)
	pat  string // s with quoted glob characters escaped, for filepath.Glob
	dyn  string // what makes it not literal: "a parameter expansion" …
	proc bool   // a process substitution on its own: a /dev/fd path
	// tree marks a stand-in for every path under s (find's {}); entries
	// that it stands for each entry, which a command opens (see pathUse).
	tree, entries, noLinks bool
	names                  []string
	// tilde marks a word that began with ~, which is $HOME.
	tilde bool
	// number marks a word that is not literal but is a number:
	// $((…)), $(wc -l < f).
	number bool
	// src is the word as written, for messages; node gives it when src is
	// empty.
	src  string
	node *syntax.Word
}

// source returns the word as written, for messages.
func (w word) source() string {
	if w.src != "" || w.node == nil {
		if len(w.src) > 80 {
			return strings.ToValidUTF8(w.src[:80], "") + "…"
		}
		return w.src
	}
	return wordSource(w.node)
}

// litWord makes a literal word from a string the policy derived itself,
// such as an option's value cut out of "-ofile".
func litWord(s string) word { return word{s: s, lit: true, pat: escapeGlob(s), src: s} }

func dynWord(why, src string) word { return word{dyn: why, src: src} }

// maxBraceWords bounds brace expansion; a word that expands to more is
// treated as not literal.
const maxBraceWords = 64

// evalWords evaluates w into the words bash would pass: one, or several
// for a brace expansion, appending to dst.
func (c *checker) evalWords(dst []word, w *syntax.Word) []word {
	if len(w.Parts) == 1 {
		// The common case, a plain word or one in single quotes, needs no
		// builder.
		switch p := w.Parts[0].(type) {
		case *syntax.Lit:
			if !strings.ContainsAny(p.Value, `\*?[{~`) {
				return append(dst, word{s: p.Value, lit: true, pat: p.Value, node: w})
			}
		case *syntax.SglQuoted:
			if !p.Dollar {
				return append(dst, word{s: p.Value, lit: true, pat: escapeGlob(p.Value), node: w})
			}
		}
	}
	if pw, ok := c.wholeParam(w); ok {
		return append(dst, pw)
	}
	if c.posKnown && allArgs(w) {
		// "$@": the function's arguments, each a word.
		for _, a := range c.posArgs {
			a.node, a.src = w, ""
			dst = append(dst, a)
		}
		return dst
	}
	if !hasBrace(w) {
		return append(dst, c.evalWord(w, w))
	}
	return c.appendBraces(dst, w)
}

// appendBraces is evalWords for a word with a brace: its own function,
// because the loop over the expansion moves the variables it uses to the
// heap.
func (c *checker) appendBraces(dst []word, w *syntax.Word) []word {
	cp := &syntax.Word{Parts: slices.Clone(w.Parts)}
	if !syntax.SplitBraces(cp) {
		return append(dst, c.evalWord(w, w))
	}
	n := len(dst)
	for ew, err := range expand.BracesSeq(nil, cp) {
		if err != nil || len(dst)-n == maxBraceWords {
			return append(dst[:n], word{dyn: "a brace expansion of too many words", node: w})
		}
		dst = append(dst, c.evalWord(ew, w))
	}
	return dst
}

func hasBrace(w *syntax.Word) bool {
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok && strings.Contains(l.Value, "{") {
			return true
		}
	}
	return false
}

// wholeParam is the word a word stands for when it is one variable,
// quoted or not, bound to a path word (a loop over a glob, a listing), or
// one command substitution of a listing or a number.
func (c *checker) wholeParam(w *syntax.Word) (word, bool) {
	part := w.Parts[0]
	quoted := false
	if len(w.Parts) != 1 {
		return word{}, false
	}
	if dq, ok := part.(*syntax.DblQuoted); ok && len(dq.Parts) == 1 {
		part, quoted = dq.Parts[0], true
	}
	switch p := part.(type) {
	case *syntax.ParamExp:
		if p.Param == nil || !simpleParam(p) {
			return word{}, false
		}
		if n := p.Param.Value; c.posKnown && len(n) == 1 && n[0] >= '1' && n[0] <= '9' {
			i := int(n[0] - '1')
			if i >= len(c.posArgs) {
				return word{s: "", lit: true, node: w}, true
			}
			a := c.posArgs[i]
			if !quoted && a.lit && !a.entries && strings.ContainsAny(a.s, " \t\n*?[") {
				return word{dyn: "a parameter that splits into words", node: w}, true
			}
			a.node, a.src = w, ""
			return a, true
		}
		v, ok := c.vals[p.Param.Value]
		if !ok || v.kind != valWord || v.unset && !quoted {
			return word{}, false
		}
		out := v.w
		out.node, out.src = w, ""
		return out, true
	case *syntax.CmdSubst:
		if numericSubst(p) {
			return word{dyn: "a command substitution", number: true, node: w}, true
		}
		if quoted || len(p.Stmts) != 1 || len(c.curDirs) != 1 {
			return word{}, false
		}
		out := c.produce(p.Stmts[0], c.curDirs, nil)
		if out.listing.s == "" {
			return word{}, false
		}
		l := out.listing
		l.node, l.src = w, ""
		return l, true
	case *syntax.ArithmExp:
		return word{dyn: "an arithmetic expansion", number: true, node: w}, true
	}
	return word{}, false
}

// allArgs reports "$@": every positional parameter, each a word.
func allArgs(w *syntax.Word) bool {
	if len(w.Parts) != 1 {
		return false
	}
	dq, ok := w.Parts[0].(*syntax.DblQuoted)
	if !ok || len(dq.Parts) != 1 {
		return false
	}
	p, ok := dq.Parts[0].(*syntax.ParamExp)
	return ok && p.Param != nil && p.Param.Value == "@" && simpleParam(p)
}

// substText is the output of a command substitution the policy can
// compute: $(pwd), $(dirname LIT), $(basename LIT), $(git rev-parse
// --show-toplevel) inside the workspace. Its command is checked where it
// stands, like any other.
func (c *checker) substText(cs *syntax.CmdSubst) (string, bool) {
	if len(cs.Stmts) != 1 || len(c.curDirs) != 1 {
		return "", false
	}
	if out := c.produce(cs.Stmts[0], c.curDirs, nil); out.kind == srcText || out.kind == srcFile || out.kind == srcEmpty {
		// echo, printf, cat of a here-document or a file, $(< file).
		if out.kind == srcFile {
			out = c.fileSource(out)
		}
		if out.kind == srcText || out.kind == srcEmpty {
			// bash drops the NULs of a substitution's output, then
			// its trailing newlines.
			return strings.TrimRight(strings.ReplaceAll(out.text, "\x00", ""), "\n"), true
		}
		return "", false
	}
	ce, ok := cs.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(ce.Assigns) > 0 || len(cs.Stmts[0].Redirs) > 0 {
		return "", false
	}
	args := make([]string, 0, len(ce.Args))
	for _, w := range ce.Args {
		l, ok := literalText(w)
		if !ok {
			return "", false
		}
		args = append(args, l)
	}
	cwd := c.curDirs[0]
	switch {
	case len(args) == 1 && args[0] == "pwd":
		// The path cd took, as $PWD.
		return c.logicalDir(cwd)
	case len(args) == 2 && args[0] == "dirname" && !strings.HasPrefix(args[1], "-"):
		return path.Dir(args[1]), true
	case len(args) == 2 && args[0] == "basename" && !strings.HasPrefix(args[1], "-"):
		return path.Base(args[1]), true
	case len(args) == 3 && args[0] == "git" && args[1] == "rev-parse" && args[2] == "--show-toplevel":
		for dir := cwd; ; dir = path.Dir(dir) {
			if _, in := c.ws.relative(dir); !in {
				return "", false
			}
			if _, ok := c.stats.lstat(dir + "/.git"); ok {
				return dir, true
			}
		}
	}
	return "", false
}

// simpleParam reports $x or ${x}: no operator, index or length.
func simpleParam(p *syntax.ParamExp) bool {
	return !p.Excl && !p.Length && !p.Width && p.Index == nil && p.Slice == nil && p.Repl == nil && p.Exp == nil &&
		p.Names == 0 && len(p.Modifiers) == 0 && p.NestedParam == nil && p.Flags == nil
}

// paramText is the value of a simple expansion when the policy knows it:
// a variable the script set to literal text, $PWD when the script is in
// one directory, $HOME while the script has not changed it.
func (c *checker) paramText(p *syntax.ParamExp) (string, bool) {
	if p.Param == nil || !simpleParam(p) {
		return "", false
	}
	name := p.Param.Value
	if c.posKnown && len(name) == 1 && name[0] >= '1' && name[0] <= '9' {
		if i := int(name[0] - '1'); i < len(c.posArgs) {
			if a := c.posArgs[i]; a.lit && !a.glob && !a.entries {
				return a.s, true
			}
			return "", false
		}
		return "", true
	}
	if v, ok := c.vals[name]; ok {
		if v.kind == valText && !v.unset && !v.nameref {
			return v.text, true
		}
		return "", false
	}
	switch name {
	case "HOME":
		return c.ws.home, true
	case "PWD":
		if len(c.curDirs) == 1 {
			// The path cd took, through links and all.
			return c.logicalDir(c.curDirs[0])
		}
	}
	return "", false
}

// evalWord performs quote removal, tilde expansion and the expansion of
// variables the policy knows on a word without brace expansions.
func (c *checker) evalWord(w *syntax.Word, orig *syntax.Word) word {
	var s, pat strings.Builder
	out := word{lit: true, node: orig}
	notLit := func(why string) {
		if out.lit {
			out.lit, out.dyn = false, why
		}
	}
	for i, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			v := p.Value
			if i == 0 && strings.HasPrefix(v, "~") {
				if name, rest, _ := strings.Cut(v[1:], "/"); name != "" {
					notLit("a tilde expansion of another user's home or of a directory stack entry")
					var discard strings.Builder
					unquoted(rest, &discard, &discard, &out)
					continue
				}
				out.tilde = true
				s.WriteString(c.ws.home)
				pat.WriteString(escapeGlob(c.ws.home))
				v = v[1:]
			}
			unquoted(v, &s, &pat, &out)
		case *syntax.SglQuoted:
			v := p.Value
			if p.Dollar {
				var ok bool
				if v, ok = dollarQuoted(v); !ok {
					notLit("an ANSI-C quoted string the policy cannot decode")
					continue
				}
			}
			s.WriteString(v)
			pat.WriteString(escapeGlob(v))
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				switch l := q.(type) {
				case *syntax.Lit:
					v := unescapeDouble(l.Value)
					s.WriteString(v)
					pat.WriteString(escapeGlob(v))
				case *syntax.ParamExp:
					v, ok := c.paramText(l)
					if !ok {
						notLit(describePart(q))
						continue
					}
					if l.Param.Value == "HOME" {
						out.tilde = true
					}
					s.WriteString(v)
					pat.WriteString(escapeGlob(v))
				case *syntax.CmdSubst:
					v, ok := c.substText(l)
					if !ok {
						notLit(describePart(q))
						continue
					}
					s.WriteString(v)
					pat.WriteString(escapeGlob(v))
				default:
					notLit(describePart(q))
				}
			}
		case *syntax.ParamExp:
			v, ok := c.paramText(p)
			if !ok || c.ifsSet || strings.ContainsAny(v, " \t\n*?[") || v == "" {
				// Unquoted, a value is split into words and globbed.
				notLit(describePart(part))
				out.glob = out.glob || ok && strings.ContainsAny(v, "*?[")
				continue
			}
			if p.Param.Value == "HOME" {
				out.tilde = true
			}
			s.WriteString(v)
			pat.WriteString(escapeGlob(v))
		case *syntax.CmdSubst:
			v, ok := c.substText(p)
			if !ok || c.ifsSet || strings.ContainsAny(v, " \t\n*?[") || v == "" {
				notLit(describePart(part))
				out.glob = out.glob || ok && strings.ContainsAny(v, "*?[")
				continue
			}
			s.WriteString(v)
			pat.WriteString(escapeGlob(v))
		case *syntax.ProcSubst:
			if len(w.Parts) == 1 {
				return word{s: "/dev/fd/63", lit: true, proc: true, pat: "/dev/fd/63", node: orig}
			}
			notLit("a process substitution")
		case *syntax.ExtGlob:
			// A pattern bash expands against a directory.
			notLit(describePart(part))
			out.glob = true
		default:
			notLit(describePart(part))
		}
	}
	if !out.lit {
		// glob says bash may list a directory to expand it.
		return word{dyn: out.dyn, node: orig, glob: out.glob}
	}
	out.s, out.pat = s.String(), pat.String()
	return out
}

func describePart(p syntax.WordPart) string {
	switch p.(type) {
	case *syntax.ParamExp:
		return "a parameter expansion"
	case *syntax.CmdSubst:
		return "a command substitution"
	case *syntax.ArithmExp:
		return "an arithmetic expansion"
	case *syntax.ProcSubst:
		return "a process substitution"
	case *syntax.ExtGlob:
		return "an extended glob"
	case *syntax.BraceExp:
		return "a brace expansion"
	}
	return "an expansion"
}

// unquoted removes backslashes from an unquoted literal and notes glob
// characters, which only count when not escaped.
func unquoted(v string, s, pat *strings.Builder, out *word) {
	for j := 0; j < len(v); j++ {
		c := v[j]
		if c == '\\' {
			if j+1 < len(v) {
				j++
				s.WriteByte(v[j])
				pat.WriteString(escapeGlob(v[j : j+1]))
			}
			continue
		}
		switch c {
		case '*', '?':
			out.glob = true
		case '[':
			if strings.IndexByte(v[j+1:], ']') >= 0 {
				out.glob = true
			}
		}
		s.WriteByte(c)
		pat.WriteByte(c)
	}
}

// unescapeDouble removes the backslashes double quotes give meaning to.
func unescapeDouble(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for j := 0; j < len(v); j++ {
		if v[j] == '\\' && j+1 < len(v) {
			switch v[j+1] {
			case '$', '`', '"', '\\':
				j++
			case '\n':
				j++
				continue
			}
		}
		b.WriteByte(v[j])
	}
	return b.String()
}

func escapeGlob(s string) string {
	if !strings.ContainsAny(s, `*?[\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ansiC decodes the body of $'…' as bash does, so that $'\x72\x6d' is
// seen as rm.
func ansiC(v string) (string, bool) {
	if !strings.Contains(v, `\`) {
		return v, true
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\\' || i+1 == len(v) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := v[i]; e {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'e', 'E':
			b.WriteByte(0x1b)
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '\\', '\'', '"', '?':
			b.WriteByte(e)
		case 'c':
			if i+1 == len(v) {
				return "", false
			}
			i++
			b.WriteByte(v[i] & 0x1f)
		case 'x', 'u', 'U':
			max := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			j := i + 1
			for j < len(v) && j-i-1 < max && isHex(v[j]) {
				j++
			}
			if j == i+1 {
				b.WriteByte('\\')
				b.WriteByte(e)
				continue
			}
			n, err := strconv.ParseUint(v[i+1:j], 16, 32)
			if err != nil {
				return "", false
			}
			if e == 'x' {
				b.WriteByte(byte(n))
			} else {
				if !utf8.ValidRune(rune(n)) {
					return "", false
				}
				b.WriteRune(rune(n))
			}
			i = j - 1
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(v) && j-i < 3 && v[j] >= '0' && v[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint(v[i:j], 8, 16)
			b.WriteByte(byte(n))
			i = j - 1
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return b.String(), true
}

// dollarQuoted is the value of a $'…' string as bash makes it: ansiC's
// escapes, cut at the first NUL they make, since bash's strings end there
// ($'rm\0x' is rm).
func dollarQuoted(v string) (string, bool) {
	out, ok := ansiC(v)
	if i := strings.IndexByte(out, 0); i >= 0 {
		out = out[:i]
	}
	return out, ok
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// wordSource prints a word as written, for messages; long words are cut.
func wordSource(w *syntax.Word) string {
	var b strings.Builder
	if err := syntax.NewPrinter(syntax.Minify(true)).Print(&b, w); err != nil {
		return "?"
	}
	s := b.String()
	if len(s) > 80 {
		s = strings.ToValidUTF8(s[:80], "") + "…"
	}
	return s
}
