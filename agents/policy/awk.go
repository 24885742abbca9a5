package policy

import (
	"slices"
	"strings"
)

// An awk program is read for what it does beyond printing: system() and
// "cmd" | getline run commands, print | "cmd" pipes into one, print >
// "file" writes, getline < "file" reads, @include and @load load code, and
// assigning ARGV or ARGC changes the files it reads. A literal command is
// checked as the command it is; one built at run time is refused, and so
// are gawk's indirect calls (@f(), which may name system) and ENVIRON in a
// program that runs commands (gawk passes its changes on to them).

// awkToken is one token of an awk program.
type awkToken struct {
	kind byte   // 's' string, 'r' regex, 'n' name, '0' number, 'p' punctuation, '\n' newline
	text string // a string's value, a name, the punctuation
}

// awkLex splits an awk program into tokens. ok is false for a program the
// lexer cannot read (an unterminated string).
func awkLex(src string) (toks []awkToken, ok bool) {
	operand := false // the previous token ends an operand, so / divides
	for i := 0; i < len(src); {
		ch := src[i]
		switch {
		case ch == '\\' && i+1 < len(src) && src[i+1] == '\n':
			i += 2
		case ch == ' ' || ch == '\t' || ch == '\r':
			i++
		case ch == '\n':
			toks = append(toks, awkToken{kind: '\n', text: "\n"})
			operand = false
			i++
		case ch == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case ch == '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(src) && src[j] != '"'; j++ {
				if src[j] == '\n' {
					return nil, false
				}
				if src[j] == '\\' && j+1 < len(src) {
					j++
					switch src[j] {
					case 'n':
						b.WriteByte('\n')
					case 't':
						b.WriteByte('\t')
					case 'r':
						b.WriteByte('\r')
					case '\\', '"', '/':
						b.WriteByte(src[j])
					case '\n':
					default:
						b.WriteByte('\\')
						b.WriteByte(src[j])
					}
					continue
				}
				b.WriteByte(src[j])
			}
			if j >= len(src) {
				return nil, false
			}
			toks = append(toks, awkToken{kind: 's', text: b.String()})
			operand = true
			i = j + 1
		case ch == '/' && !operand:
			j := i + 1
			inClass := false
			for ; j < len(src); j++ {
				c := src[j]
				if c == '\n' {
					return nil, false
				}
				if c == '\\' {
					j++
					continue
				}
				if c == '[' {
					inClass = true
				} else if c == ']' {
					inClass = false
				} else if c == '/' && !inClass {
					break
				}
			}
			if j >= len(src) {
				return nil, false
			}
			toks = append(toks, awkToken{kind: 'r', text: src[i+1 : j]})
			operand = true
			i = j + 1
		case ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch == '@':
			j := i + 1
			for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' ||
				src[j] >= '0' && src[j] <= '9' || src[j] == ':') {
				j++
			}
			name := src[i:j]
			toks = append(toks, awkToken{kind: 'n', text: name})
			// getline, print and the like are not operands; a name is.
			operand = !awkKeyword(name)
			i = j
		case ch >= '0' && ch <= '9' || ch == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			j := i + 1
			for j < len(src) && (src[j] >= '0' && src[j] <= '9' || src[j] == '.' || src[j] == 'e' || src[j] == 'E' ||
				src[j] == 'x' || src[j] == 'X' || src[j] >= 'a' && src[j] <= 'f' || src[j] >= 'A' && src[j] <= 'F') {
				j++
			}
			toks = append(toks, awkToken{kind: '0', text: src[i:j]})
			operand = true
			i = j
		default:
			p := src[i : i+1]
			for _, two := range []string{"||", "|&", "&&", ">>", "==", "!=", "<=", ">=", "++", "--", "+=", "-=", "*=", "/=", "%=", "^=", "**"} {
				if strings.HasPrefix(src[i:], two) {
					p = two
					break
				}
			}
			toks = append(toks, awkToken{kind: 'p', text: p})
			operand = p == ")" || p == "]" || p == "$" || p == "++" || p == "--"
			i += len(p)
		}
	}
	return toks, true
}

func awkKeyword(name string) bool {
	switch name {
	case "getline", "print", "printf", "return", "in", "if", "else", "while", "for", "do", "break", "continue",
		"next", "nextfile", "exit", "delete", "function", "func", "BEGIN", "END", "BEGINFILE", "ENDFILE":
		return true
	}
	return false
}

// awkBoundary reports a token that ends an expression: what follows a
// redirection's target or precedes a command piped into getline.
func awkBoundary(t awkToken) bool {
	if t.kind == '\n' {
		return true
	}
	if t.kind != 'p' {
		return false
	}
	switch t.text {
	case ";", "{", "}", "(", ")", ",", "=", "!", "&&", "||", "?", ":":
		return true
	}
	return false
}

// awkEffects is what an awk program does beyond printing.
type awkEffects struct {
	commands []string // literal commands it runs
	sinks    []string // literal commands it prints into
	writes   []string // literal files it writes
	reads    []string // literal files it reads
	network  bool     // gawk's /inet special files
	// dynamic is a construct whose command or file is built at run time;
	// code is one that loads or runs code (@include, @load, ARGV games).
	dynamic, code string
}

// awkScan finds what an awk program does beyond printing.
func awkScan(src string) (eff awkEffects, ok bool) {
	toks, ok := awkLex(src)
	if !ok {
		return eff, false
	}
	// single returns the string or number at toks[i] when it stands alone
	// before a boundary.
	single := func(i int) (string, bool) {
		if i >= len(toks) || toks[i].kind != 's' && toks[i].kind != '0' {
			return "", false
		}
		if i+1 < len(toks) && !awkBoundary(toks[i+1]) {
			return "", false
		}
		return toks[i].text, true
	}
	special := func(f string) bool {
		if strings.HasPrefix(f, "/inet") {
			eff.network = true
			return true
		}
		return f == "/dev/stdout" || f == "/dev/stderr" || f == "-" || strings.HasPrefix(f, "/dev/fd/")
	}
	printDepth := -1
	depth := 0
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.kind == 'n' && (t.text == "print" || t.text == "printf"):
			printDepth = depth
		case t.kind == 'p' && t.text == "(":
			depth++
		case t.kind == 'p' && t.text == ")":
			depth--
		case t.kind == '\n' || t.kind == 'p' && (t.text == ";" || t.text == "}"):
			if depth <= printDepth || t.kind == 'p' {
				printDepth = -1
			}
		case t.kind == 'n' && t.text == "system":
			if i+3 < len(toks) && toks[i+1].text == "(" && toks[i+2].kind == 's' && toks[i+3].text == ")" {
				eff.commands = append(eff.commands, toks[i+2].text)
				i += 3
			} else if eff.dynamic == "" {
				eff.dynamic = "system() with a command built at run time"
			}
		case t.kind == 'n' && (t.text == "@include" || t.text == "@load"):
			eff.code = t.text
		case t.kind == 'n' && strings.HasPrefix(t.text, "@") && t.text != "@namespace":
			// gawk's indirect call: @f() calls the function f names,
			// system included.
			if eff.dynamic == "" {
				eff.dynamic = "an indirect function call (" + t.text + "), which may call system()"
			}
		case t.kind == 'n' && (t.text == "ARGV" || t.text == "ARGC"):
			j := i + 1
			if t.text == "ARGV" && j < len(toks) && toks[j].text == "[" {
				for d := 0; j < len(toks); j++ {
					if toks[j].text == "[" {
						d++
					} else if toks[j].text == "]" {
						if d--; d == 0 {
							j++
							break
						}
					}
				}
			}
			if j < len(toks) && toks[j].kind == 'p' {
				switch toks[j].text {
				case "=", "+=", "-=", "*=", "/=", "%=", "^=", "++", "--":
					eff.code = "assigning " + t.text + ", which changes the files awk reads"
				}
			}
			if i > 0 && toks[i-1].kind == 'p' && (toks[i-1].text == "++" || toks[i-1].text == "--") {
				eff.code = "assigning " + t.text + ", which changes the files awk reads"
			}
		case t.kind == 'p' && (t.text == "|" || t.text == "|&"):
			if i+1 < len(toks) && toks[i+1].kind == 'n' && toks[i+1].text == "getline" {
				// "cmd" | getline
				if i > 0 && toks[i-1].kind == 's' && (i == 1 || awkBoundary(toks[i-2])) {
					cmd := toks[i-1].text
					if t.text == "|&" && special(cmd) {
						continue
					}
					eff.commands = append(eff.commands, cmd)
				} else if eff.dynamic == "" {
					eff.dynamic = "a command piped into getline that is built at run time"
				}
				continue
			}
			// print … | "cmd"
			if cmd, ok := single(i + 1); ok {
				if t.text == "|&" && special(cmd) {
					i++
					continue
				}
				eff.sinks = append(eff.sinks, cmd)
				i++
			} else if eff.dynamic == "" {
				eff.dynamic = "output piped into a command built at run time"
			}
		case t.kind == 'p' && (t.text == ">" || t.text == ">>") && printDepth >= 0 && depth == printDepth:
			if f, ok := single(i + 1); ok {
				if !special(f) {
					eff.writes = append(eff.writes, f)
				}
				i++
			} else if eff.dynamic == "" {
				eff.dynamic = "print into a file named at run time"
			}
		case t.kind == 'n' && t.text == "getline":
			j := i + 1
			// An optional variable: a name, or $expr.
			if j < len(toks) && toks[j].kind == 'n' && !awkKeyword(toks[j].text) {
				j++
			} else if j+1 < len(toks) && toks[j].text == "$" {
				j += 2
			}
			if j < len(toks) && toks[j].kind == 'p' && toks[j].text == "<" {
				if f, ok := single(j + 1); ok {
					if !special(f) {
						eff.reads = append(eff.reads, f)
					}
					i = j + 1
				} else if eff.dynamic == "" {
					eff.dynamic = "getline from a file named at run time"
				}
			}
		}
	}
	if (len(eff.commands) > 0 || len(eff.sinks) > 0) && eff.dynamic == "" && slices.ContainsFunc(toks, func(t awkToken) bool {
		return t.kind == 'n' && t.text == "ENVIRON"
	}) {
		// gawk passes a changed ENVIRON to the commands it runs: PATH,
		// LD_PRELOAD or BASH_ENV set there change what they run.
		eff.dynamic = "ENVIRON beside the commands it runs, whose environment it may change"
	}
	return eff, true
}

// awkProgram checks an awk program: the commands it runs as commands, the
// files it writes and reads against the path policy.
func (c *checker) awkProgram(inv *invocation, src string, cwd cwds) {
	eff, ok := awkScan(src)
	switch {
	case !ok:
		c.needBecause(inv, pExec, "the policy cannot read its program")
		return
	case eff.dynamic != "":
		c.denyf("shell:dynamic-script", "%s program uses %s; the policy cannot see what it would run or touch", inv.name, eff.dynamic)
		return
	case eff.code != "":
		if !c.needBecause(inv, pExec, "its program uses "+eff.code) {
			return
		}
	}
	if eff.network && !c.needBecause(inv, pNetwork, "its program opens a network connection") {
		return
	}
	if len(eff.writes) > 0 && !c.needBecause(inv, pWrite, "its program writes files") {
		return
	}
	for _, f := range eff.writes {
		c.usePath(inv, litWord(f), pathUse{acc: accWrite})
	}
	for _, f := range eff.reads {
		c.usePath(inv, litWord(f), pathUse{acc: accRead})
	}
	for _, cmd := range eff.commands {
		if c.deny != nil {
			return
		}
		c.nestedText(cmd, cwd)
	}
	for _, cmd := range eff.sinks {
		if c.deny != nil {
			return
		}
		c.fedText(cmd, cwd, inv.name)
	}
}

// awkHandler checks awk: its program (given, or read with -f) as
// awkProgram says, its input files as reads, and options that load code or
// write files.
func awkHandler() handler {
	t := optSpec{short: "FvfeiElW", shortOpt: "dDop", flags: "bcCghkLMnNOPrsStVy",
		long:    []string{"--field-separator", "--assign", "--file", "--source", "--include", "--load", "--exec"},
		longOpt: []string{"--dump-variables", "--debug", "--pretty-print", "--profile", "--lint"},
		longFlags: []string{"--characters-as-bytes", "--traditional", "--copyright", "--gen-pot", "--help",
			"--csv", "--bignum", "--use-lc-numeric", "--non-decimal-data", "--optimize", "--no-optimize", "--posix",
			"--re-interval", "--sandbox", "--lint-old", "--version", "--trace", "--persist"},
		strict: true}.compile()
	return func(c *checker, inv *invocation) cwds {
		opts, pos := parseOpts(inv.argv[1:], t)
		if !c.strictOpts(inv, t, opts) {
			return inv.cwd
		}
		var progs []program
		for _, o := range opts {
			switch o.name {
			case "-i", "--include", "-l", "--load", "-D", "--debug":
				if !c.needBecause(inv, pExec, "option "+o.name+" loads code") {
					return inv.cwd
				}
			case "-W":
				if o.val == nil || !o.val.lit {
					continue
				}
				switch v, _, _ := strings.Cut(o.val.s, "="); v {
				case "version", "v", "interactive", "i", "posix_space", "usage", "help", "h", "random", "sprintf", "dump", "d":
				case "exec", "e":
					if !c.needBecause(inv, pExec, "-W exec reads its program from a file") {
						return inv.cwd
					}
				default:
					if !c.needBecause(inv, pExec, "option -W "+v+" is not one the policy knows") {
						return inv.cwd
					}
				}
			case "-d", "--dump-variables", "-o", "--pretty-print", "-p", "--profile":
				file := map[string]string{"-d": "awkvars.out", "--dump-variables": "awkvars.out"}[o.name]
				if file == "" {
					file = "awkprof.out"
				}
				f := litWord(file)
				if o.val != nil {
					f = *o.val
				}
				if o.name == "-o" || o.name == "--pretty-print" {
					if o.val == nil {
						f = litWord("awkprof.out")
					}
				}
				if !c.needBecause(inv, pWrite, "option "+o.name+" writes a file") {
					return inv.cwd
				}
				c.usePath(inv, f, pathUse{acc: accWrite})
			case "-f", "--file", "-E", "--exec":
				if o.val != nil {
					progs = append(progs, c.fileProgram(*o.val, inv.cwd))
				}
			case "-e", "--source":
				if o.val != nil {
					if !o.val.lit {
						progs = append(progs, program{kind: progDynamic, where: o.val.source(), text: o.val.dyn})
					} else {
						progs = append(progs, program{kind: progText, text: o.val.s, literal: true})
					}
				}
			}
			if c.deny != nil {
				return inv.cwd
			}
		}
		if len(progs) == 0 {
			if len(pos) == 0 {
				if hasOpt(opts, "--version", "-V", "--help", "-h", "--copyright", "-C", "-W") {
					c.need(inv, pRead)
					return inv.cwd
				}
				c.denyf("shell:parse", "%s names no program", inv.name)
				return inv.cwd
			}
			w := pos[0]
			pos = pos[1:]
			if !w.lit {
				progs = append(progs, program{kind: progDynamic, where: w.source(), text: w.dyn})
			} else {
				progs = append(progs, program{kind: progText, text: w.s, literal: true})
			}
		}
		for _, p := range progs {
			c.runProgram(inv, p, langAwk, inv.cwd, false)
			if c.deny != nil {
				return inv.cwd
			}
		}
		c.need(inv, pRead)
		for _, w := range pos {
			if w.lit {
				if name, _, ok := strings.Cut(w.s, "="); ok && validName(name) {
					// var=value: an assignment, not a file.
					continue
				}
			}
			c.usePath(inv, w, pathUse{acc: accRead})
		}
		return inv.cwd
	}
}
