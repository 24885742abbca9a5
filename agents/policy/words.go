package policy

import (
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
	glob bool   // has unquoted glob characters: s is a pattern, pat the escaped form
	pat  string // s with quoted glob characters escaped, for filepath.Glob
	dyn  string // what makes it not literal: "a parameter expansion" …
	proc bool   // a process substitution on its own: a /dev/fd path
	// tree marks a stand-in for every path under s (find's {}).
	tree bool
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

// expandWord evaluates w into the words bash would pass: one, or several
// for a brace expansion. home is what ~ stands for.
func expandWord(w *syntax.Word, home string) []word {
	return appendWords(nil, w, home)
}

// appendWords is expandWord appending to dst.
func appendWords(dst []word, w *syntax.Word, home string) []word {
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
	if !hasBrace(w) {
		return append(dst, evalWord(w, home, w))
	}
	return appendBraces(dst, w, home)
}

// appendBraces is appendWords for a word with a brace: its own function,
// because the loop over the expansion moves the variables it uses to the
// heap.
func appendBraces(dst []word, w *syntax.Word, home string) []word {
	cp := &syntax.Word{Parts: slices.Clone(w.Parts)}
	if !syntax.SplitBraces(cp) {
		return append(dst, evalWord(w, home, w))
	}
	n := len(dst)
	for ew, err := range expand.BracesSeq(nil, cp) {
		if err != nil || len(dst)-n == maxBraceWords {
			return append(dst[:n], word{dyn: "a brace expansion of too many words", node: w})
		}
		dst = append(dst, evalWord(ew, home, w))
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

// evalWord performs quote removal and tilde expansion on a word without
// brace expansions.
func evalWord(w *syntax.Word, home string, orig *syntax.Word) word {
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
				if name, _, _ := strings.Cut(v[1:], "/"); name != "" {
					notLit("a tilde expansion of another user's home or of a directory stack entry")
					continue
				}
				s.WriteString(home)
				pat.WriteString(escapeGlob(home))
				v = v[1:]
			}
			unquoted(v, &s, &pat, &out)
		case *syntax.SglQuoted:
			v := p.Value
			if p.Dollar {
				var ok bool
				if v, ok = ansiC(v); !ok {
					notLit("an ANSI-C quoted string the policy cannot decode")
					continue
				}
			}
			s.WriteString(v)
			pat.WriteString(escapeGlob(v))
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					notLit(describePart(q))
					continue
				}
				v := unescapeDouble(l.Value)
				s.WriteString(v)
				pat.WriteString(escapeGlob(v))
			}
		case *syntax.ProcSubst:
			if len(w.Parts) == 1 {
				return word{s: "/dev/fd/63", lit: true, proc: true, pat: "/dev/fd/63", node: orig}
			}
			notLit("a process substitution")
		default:
			notLit(describePart(part))
		}
	}
	if !out.lit {
		return word{dyn: out.dyn, node: orig}
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
