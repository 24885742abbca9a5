package policy

import (
	"bytes"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// What a command reads on standard input and what a script writes into
// files matter when the reader is an interpreter: echo 'kubectl apply' | sh
// runs kubectl. The policy follows text it can see (echo, printf, cat of a
// here-document or a file, a here-string) into the interpreter, and refuses
// to feed an interpreter a program it cannot see (base64 -d | sh, curl …
// | sh).

// srcKind is what a stream holds as far as the policy can tell.
type srcKind uint8

const (
	srcEmpty  srcKind = iota // nothing: the tool gives commands no input
	srcText                  // text the policy read
	srcFile                  // a file's contents
	srcHidden                // what a program writes, which the policy cannot predict
)

// source is a stream: standard input, or what a script wrote into a file.
type source struct {
	kind srcKind
	text string
	file word // srcFile: the path
	cwd  cwds // srcFile: where it is resolved
	what string
	// listing is, for the output of a command that lists paths (git
	// ls-files, find, grep -l), a word standing for every entry of the
	// tree listed: what one line of it may be.
	listing word
}

// emptySource is a stream that holds nothing.
func emptySource() *source { return &source{} }

func hidden(what string) *source { return &source{kind: srcHidden, what: what} }

// redirectedStdin is the standard input a redirection gives its command, or
// nil if it gives none.
func (c *checker) redirectedStdin(r *syntax.Redirect, cwd cwds) *source {
	if r.N != nil && r.N.Value != "0" {
		return nil
	}
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc:
		if r.Hdoc == nil {
			return emptySource()
		}
		text, ok := heredocText(r)
		if !ok {
			return hidden("a here-document with expansions")
		}
		return &source{kind: srcText, text: text}
	case syntax.WordHdoc:
		w := c.expandOne(r.Word)
		if !w.lit {
			return hidden("a here-string with expansions")
		}
		return &source{kind: srcText, text: w.s + "\n"}
	case syntax.RdrIn, syntax.RdrInOut:
		w := c.expandOne(r.Word)
		if !w.lit {
			return hidden("a file named by an expansion")
		}
		return &source{kind: srcFile, file: w, cwd: cwd}
	case syntax.DplIn:
		if r.Word.Lit() == "-" {
			return emptySource()
		}
		return hidden("another file descriptor")
	}
	return nil
}

// heredocText is the body of a here-document when it holds no
// expansions: with a quoted delimiter as written, else with bash's
// backslash escapes removed.
func heredocText(r *syntax.Redirect) (string, bool) {
	quoted := false
	for _, p := range r.Word.Parts {
		switch p := p.(type) {
		case *syntax.SglQuoted, *syntax.DblQuoted:
			quoted = true
		case *syntax.Lit:
			if strings.ContainsAny(p.Value, `\`) {
				quoted = true
			}
		}
	}
	var b strings.Builder
	for _, p := range r.Hdoc.Parts {
		l, ok := p.(*syntax.Lit)
		if !ok {
			return "", false
		}
		v := l.Value
		if !quoted {
			v = unescapeHeredoc(v)
		}
		b.WriteString(v)
	}
	text := b.String()
	if r.Op == syntax.DashHdoc {
		lines := strings.Split(text, "\n")
		for i, l := range lines {
			lines[i] = strings.TrimLeft(l, "\t")
		}
		text = strings.Join(lines, "\n")
	}
	return text, true
}

// unescapeHeredoc removes the backslashes an unquoted here-document gives
// meaning to: before $, `, \ and a newline.
func unescapeHeredoc(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for j := 0; j < len(v); j++ {
		if v[j] == '\\' && j+1 < len(v) {
			switch v[j+1] {
			case '$', '`', '\\':
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

// stdoutRedirected reports a statement whose standard output goes
// elsewhere than the pipe.
func stdoutRedirected(s *syntax.Stmt) bool {
	for _, r := range s.Redirs {
		if r.N != nil && r.N.Value != "1" {
			continue
		}
		switch r.Op {
		case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.AppClob, syntax.RdrAll, syntax.AppAll,
			syntax.RdrAllClob, syntax.AppAllClob, syntax.DplOut:
			return true
		}
	}
	return false
}

// produce is what statement s writes on its standard output, given what
// it reads on its standard input.
func (c *checker) produce(s *syntax.Stmt, cwd cwds, in *source) *source {
	if s.Background || s.Coprocess {
		return hidden("a background command")
	}
	if stdoutRedirected(s) {
		return emptySource()
	}
	for _, r := range s.Redirs {
		if rin := c.redirectedStdin(r, cwd); rin != nil {
			in = rin
		}
	}
	if in == nil {
		in = emptySource()
	}
	switch x := s.Cmd.(type) {
	case *syntax.CallExpr:
		return c.produceCall(x, cwd, in)
	case *syntax.Block:
		return c.produceAll(x.Stmts, cwd, in)
	case *syntax.Subshell:
		return c.produceAll(x.Stmts, cwd, in)
	case *syntax.BinaryCmd:
		switch x.Op {
		case syntax.Pipe, syntax.PipeAll:
			return c.produce(x.Y, cwd, c.produce(x.X, cwd, in))
		default:
			// Whether or not the second runs, the stream holds no more
			// than both.
			return concatSources(c.produce(x.X, cwd, in), c.produce(x.Y, cwd, in))
		}
	}
	return hidden("a compound command")
}

func (c *checker) produceAll(list []*syntax.Stmt, cwd cwds, in *source) *source {
	out := emptySource()
	for _, s := range list {
		out = concatSources(out, c.produce(s, cwd, in))
		if out.kind == srcHidden {
			return out
		}
	}
	return out
}

func concatSources(a, b *source) *source {
	switch {
	case a.kind == srcHidden:
		return a
	case b.kind == srcHidden:
		return b
	case a.kind == srcEmpty:
		return b
	case b.kind == srcEmpty:
		return a
	case a.kind == srcText && b.kind == srcText:
		return &source{kind: srcText, text: a.text + b.text}
	}
	return hidden("the output of several commands")
}

// produceCall is what a simple command writes: echo and printf of literal
// words, cat of a file or of its input; anything else is hidden.
func (c *checker) produceCall(ce *syntax.CallExpr, cwd cwds, in *source) *source {
	if len(ce.Args) == 0 {
		// $(< file): bash reads the file.
		return in
	}
	argv := make([]word, 0, len(ce.Args))
	for _, w := range ce.Args {
		argv = c.appendWords(argv, w)
	}
	name := argv[0]
	if !name.lit {
		return hidden("the output of a command the policy cannot see")
	}
	cmd := strings.TrimPrefix(strings.TrimPrefix(name.s, "/usr"), "/bin/")
	for _, w := range argv[1:] {
		if !w.lit || w.glob && cmd != "ls" {
			return hidden("the output of " + cmd + " with words the policy cannot see")
		}
	}
	switch cmd {
	case "echo":
		return &source{kind: srcText, text: echoText(argv[1:])}
	case "printf":
		if text, ok := printfText(argv[1:]); ok {
			return &source{kind: srcText, text: text}
		}
	case "cat":
		args := argv[1:]
		if len(args) > 0 && args[0].s == "--" {
			args = args[1:]
		}
		switch {
		case len(args) == 0 || len(args) == 1 && args[0].s == "-":
			return in
		case len(args) == 1 && !strings.HasPrefix(args[0].s, "-"):
			return &source{kind: srcFile, file: args[0], cwd: cwd}
		}
	case "true", ":", "false":
		return emptySource()
	case "grep", "egrep", "fgrep", "head", "tail", "sort", "uniq", "tac", "shuf":
		// Filters of whole lines: a subset of a listing is still one.
		if in.listing.s != "" && lineFilter(cmd, argv[1:]) {
			out := hidden("the output of " + cmd)
			out.listing = in.listing
			return out
		}
	}
	out := hidden("the output of " + cmd)
	if len(cwd) == 1 {
		out.listing = c.listing(cmd, argv[1:], cwd[0])
	}
	return out
}

// listing is the tree a command lists the paths of, one per line,
// relative to dir, as an entries word; a zero word for any other output.
func (c *checker) listing(cmd string, args []word, dir string) word {
	switch cmd {
	case "git":
		if len(args) == 0 {
			break
		}
		switch args[0].s {
		case "ls-files":
			for _, a := range args[1:] {
				switch a.s {
				case "-c", "--cached", "-o", "--others", "-m", "--modified", "-d", "--deleted", "--exclude-standard",
					"-z", "-i", "--ignored", "--directory", "--no-empty-directory":
				default:
					if strings.HasPrefix(a.s, "-") || strings.HasPrefix(a.s, ":") {
						return word{}
					}
				}
			}
			return entriesWord(litWord("."), false, nil)
		case "diff":
			if dir != c.ws.real || !hasWord(args, "--name-only") {
				break
			}
			for _, a := range args[1:] {
				if strings.HasPrefix(a.s, "--output") || a.s == "--name-status" || a.s == "--stat" || a.s == "-p" {
					return word{}
				}
			}
			return entriesWord(litWord("."), false, nil)
		}
	case "find":
		start := litWord(".")
		noLinks, simple := false, true
		var names []string
		for i, a := range args {
			switch {
			case i == 0 && !strings.HasPrefix(a.s, "-") && a.s != "(" && a.s != "!":
				start = a
			case i > 0 && !strings.HasPrefix(a.s, "-") && !strings.HasPrefix(args[i-1].s, "-") && a.s != "(" && a.s != ")" && a.s != "!":
				// A second starting point, or an expression's operand
				// out of place.
				return word{}
			case a.s == "-L" || a.s == "-follow" || a.s == "-H" || strings.HasPrefix(a.s, "-print") && a.s != "-print" && a.s != "-print0" ||
				a.s == "-ls" || a.s == "-exec" || a.s == "-execdir" || a.s == "-fprint" || a.s == "-fls":
				return word{}
			case a.s == "-o" || a.s == "-or" || a.s == "!" || a.s == "-not" || a.s == "(":
				simple = false
			case a.s == "-type" && i+1 < len(args) && !strings.Contains(args[i+1].s, "l"):
				noLinks = true
			case a.s == "-name" && i+1 < len(args):
				names = append(names, args[i+1].s)
			}
		}
		if !simple {
			noLinks, names = false, nil
		}
		return entriesWord(start, noLinks, names)
	case "grep", "rg":
		recursive, files := cmd == "rg", false
		var operands []word
		for _, a := range args {
			switch {
			case a.s == "-l" || a.s == "--files-with-matches" || a.s == "-L" || a.s == "--files-without-match" || a.s == "--files" && cmd == "rg":
				files = true
			case strings.HasPrefix(a.s, "-") && !strings.HasPrefix(a.s, "--"):
				files = files || strings.ContainsAny(a.s, "lL")
				recursive = recursive || strings.ContainsAny(a.s, "r")
				if strings.ContainsAny(a.s, "RefABCm") {
					return word{}
				}
			case a.s == "--recursive":
				recursive = true
			case strings.HasPrefix(a.s, "-"):
			default:
				operands = append(operands, a)
			}
		}
		if !files || !recursive || len(operands) > 2 {
			break
		}
		start := litWord(".")
		if len(operands) == 2 || cmd == "rg" && hasWord(args, "--files") && len(operands) == 1 {
			start = operands[len(operands)-1]
		}
		return entriesWord(start, false, nil)
	case "ls":
		if len(args) == 0 || len(args) == 1 && (args[0].s == "-1" || args[0].s == "-a" || args[0].s == "-A") {
			return entriesWord(litWord("."), false, nil)
		}
		// ls *.md, ls src: names of the current directory or of one
		// inside it, a component each, so entries of its tree.
		for _, a := range args {
			if !a.lit || a.s != "-1" && (strings.HasPrefix(a.s, "-") || strings.Contains(a.s, "/") || a.s == ".." || a.s == "" || a.glob && strings.HasPrefix(a.s, ".")) {
				return word{}
			}
		}
		return entriesWord(litWord("."), false, nil)
	}
	return word{}
}

// lineFilter reports a command that prints some of the lines it reads
// unchanged: grep PATTERN, head, sort, uniq … without file operands.
func lineFilter(cmd string, args []word) bool {
	grep := cmd == "grep" || cmd == "egrep" || cmd == "fgrep"
	operands, patterns := 0, 0
	for i := 0; i < len(args); i++ {
		a := args[i].s
		switch {
		case a == "-e" || a == "--regexp":
			patterns++
			i++
		case a == "-n" || a == "-c" || a == "-k" || a == "-t" || a == "-m" || a == "--lines" || a == "--bytes":
			if grep && a != "-m" {
				return false
			}
			i++
		case strings.HasPrefix(a, "-"):
			if grep && strings.ContainsAny(strings.TrimLeft(a, "-"), "onbcrRlLHABCfZ") || cmd == "uniq" && strings.Contains(a, "c") ||
				cmd == "sort" && strings.ContainsAny(a, "o") {
				return false
			}
		default:
			operands++
		}
	}
	if grep && patterns == 0 {
		operands--
	}
	return operands == 0
}

func hasWord(ws []word, s string) bool {
	for _, w := range ws {
		if w.s == s {
			return true
		}
	}
	return false
}

// echoText is what bash's echo prints for literal words.
func echoText(args []word) string {
	newline, escapes := true, false
	i := 0
	for ; i < len(args); i++ {
		s := args[i].s
		if len(s) < 2 || s[0] != '-' || strings.Trim(s[1:], "neE") != "" {
			break
		}
		for _, f := range s[1:] {
			switch f {
			case 'n':
				newline = false
			case 'e':
				escapes = true
			case 'E':
				escapes = false
			}
		}
	}
	var b strings.Builder
	for j, w := range args[i:] {
		if j > 0 {
			b.WriteByte(' ')
		}
		if escapes {
			v, stop := echoEscapes(w.s)
			b.WriteString(v)
			if stop {
				return b.String()
			}
			continue
		}
		b.WriteString(w.s)
	}
	if newline {
		b.WriteByte('\n')
	}
	return b.String()
}

// echoEscapes decodes echo -e's escapes (\n and its kin, \0NNN, \xHH,
// \uHHHH); stop reports \c, which ends the output.
func echoEscapes(s string) (string, bool) { return escapes(s, false) }

// bEscapes is what printf's %b makes of s: echo -e's escapes, and an
// octal escape without its leading 0 too (\101 is A).
func bEscapes(s string) (string, bool) { return escapes(s, true) }

func escapes(s string, bareOctal bool) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch e := s[i+1]; e {
		case 'c':
			return b.String(), true
		case '0':
			v, next := octal(s, i+2, 3)
			b.WriteByte(v)
			i = next - 1
		case '1', '2', '3', '4', '5', '6', '7':
			if !bareOctal {
				b.WriteByte('\\')
				continue
			}
			v, next := octal(s, i+1, 3)
			b.WriteByte(v)
			i = next - 1
		case 'a', 'b', 'e', 'E', 'f', 'n', 'r', 't', 'v', '\\', 'x', 'u', 'U':
			v, next, _ := printfEscape(s, i)
			b.WriteString(v)
			i = next - 1
		default:
			b.WriteByte('\\')
		}
	}
	return b.String(), false
}

// printfText is what printf prints for literal words, for the formats the
// policy knows (%s %b %c %d %i %%, widths, escapes); ok is false for
// anything else.
func printfText(args []word) (string, bool) {
	if len(args) > 0 && args[0].s == "--" {
		args = args[1:]
	}
	if len(args) == 0 || strings.HasPrefix(args[0].s, "-") {
		return "", false
	}
	format, rest := args[0].s, args[1:]
	var b strings.Builder
	for round := 0; ; round++ {
		used := 0
		for i := 0; i < len(format); i++ {
			ch := format[i]
			if ch == '\\' {
				v, next, ok := printfEscape(format, i)
				if !ok {
					return "", false
				}
				b.WriteString(v)
				i = next - 1
				continue
			}
			if ch != '%' {
				b.WriteByte(ch)
				continue
			}
			j := i + 1
			for j < len(format) && strings.IndexByte("-+ #0123456789.", format[j]) >= 0 {
				j++
			}
			if j >= len(format) {
				return "", false
			}
			spec := format[i+1 : j]
			if strings.Contains(spec, "*") {
				return "", false
			}
			arg := ""
			if format[j] != '%' {
				if used < len(rest) {
					arg = rest[used].s
				}
				used++
			}
			switch format[j] {
			case '%':
				b.WriteByte('%')
			case 's':
				if spec != "" {
					return "", false
				}
				b.WriteString(arg)
			case 'b':
				v, stop := bEscapes(arg)
				b.WriteString(v)
				if stop {
					return b.String(), true
				}
			case 'c':
				if arg != "" {
					b.WriteByte(arg[0])
				}
			case 'd', 'i':
				if arg == "" {
					arg = "0"
				}
				if !isDigits(strings.TrimPrefix(arg, "-")) || spec != "" {
					return "", false
				}
				b.WriteString(arg)
			default:
				return "", false
			}
			i = j
		}
		if used == 0 || used >= len(rest) || round > 64 {
			break
		}
		rest = rest[used:]
	}
	return b.String(), true
}

// printfEscape decodes the escape at format[i] (a backslash) the way
// printf does in its format: \n and its kin, \NNN in octal, \xHH,
// \uHHHH, \UHHHHHHHH. next is the index after it.
// octal reads up to most octal digits of s from index from, as the byte
// they make (wrapping past 0377 as the shells do), and the index after them.
func octal(s string, from, most int) (byte, int) {
	j, n := from, 0
	for j < len(s) && j < from+most && s[j] >= '0' && s[j] <= '7' {
		n = n*8 + int(s[j]-'0')
		j++
	}
	return byte(n), j
}

func printfEscape(format string, i int) (v string, next int, ok bool) {
	if i+1 >= len(format) {
		return "\\", i + 1, true
	}
	e := format[i+1]
	switch {
	case e >= '0' && e <= '7':
		v, next := octal(format, i+1, 3)
		return string(rune(v)), next, true
	case e == 'x' || e == 'u' || e == 'U':
		digits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
		j := i + 2
		for j < len(format) && j < i+2+digits && isHex(format[j]) {
			j++
		}
		if j == i+2 {
			return format[i : i+2], i + 2, true
		}
		v, ok := ansiC(format[i:j])
		return v, j, ok
	}
	v, ok = ansiC(format[i : i+2])
	return v, i + 2, ok
}

// maxProgramBytes bounds a script file the policy reads to check it.
const maxProgramBytes = 64 << 10

// program is the code an interpreter runs, as far as the policy can see
// it.
type program struct {
	kind  progKind
	text  string
	where string // "standard input", "the here-document", "script.sh"
	// literal means the text is written in the command itself (bash -c,
	// a here-document, echo … | sh), rather than read from a file.
	literal bool
	// stdin means the interpreter reads it on standard input.
	stdin bool
	// args are the positional parameters it runs with (bash -c SCRIPT
	// NAME ARGS…), when args != nil.
	args []word
}

type progKind uint8

const (
	progNone    progKind = iota // nothing
	progText                    // text the policy has
	progUnread                  // a file the policy does not read: too large, binary, a device
	progHidden                  // what a program wrote, which the policy cannot see
	progOutside                 // a path refused by the path policy
	progDynamic                 // a word the policy cannot see
)

// stdinProgram is the program an interpreter reads on standard input.
func (c *checker) stdinProgram(cwd cwds) program {
	in := c.stdin
	if in == nil {
		in = emptySource()
	}
	var p program
	switch in.kind {
	case srcText:
		p = program{kind: progText, text: in.text, where: "standard input", literal: true}
	case srcFile:
		p = c.fileProgram(in.file, in.cwd)
	case srcHidden:
		p = program{kind: progHidden, where: "standard input", text: in.what}
	default:
		p = program{kind: progNone, where: "standard input"}
	}
	p.stdin = true
	return p
}

// fileProgram is the program in a file an interpreter is given: what the
// script wrote there, or what it holds now. The path is checked as a read.
func (c *checker) fileProgram(w word, cwd cwds) program {
	if !w.lit {
		if w.proc {
			return program{kind: progHidden, where: w.source(), text: "a process substitution"}
		}
		return program{kind: progDynamic, where: w.source(), text: w.dyn}
	}
	switch w.s {
	case "/dev/stdin", "/proc/self/fd/0", "/dev/fd/0", "-":
		return c.stdinProgram(cwd)
	}
	if strings.HasPrefix(w.s, "/proc/self/fd/") || strings.HasPrefix(w.s, "/dev/fd/") {
		return program{kind: progHidden, where: w.s, text: "another file descriptor"}
	}
	inv := c.invocation(invocation{name: "reading " + w.s, cwd: cwd})
	c.usePath(inv, w, pathUse{acc: accRead})
	if c.deny != nil {
		return program{kind: progOutside, where: w.s}
	}
	return c.fileText(w, cwd)
}

// fileText is what the file w holds as the script sees it, without
// checking the path: what the script wrote there, or what it holds now.
func (c *checker) fileText(w word, cwd cwds) program {
	if len(cwd) != 1 || w.glob || !w.lit {
		return program{kind: progUnread, where: w.s}
	}
	r := c.resolve(cwd[0], w.s)
	if src, ok := c.written[r.abs]; ok {
		if src.kind == srcText {
			return program{kind: progText, text: src.text, where: w.s, literal: true}
		}
		return program{kind: progHidden, where: w.s, text: src.what}
	}
	if !r.in {
		return program{kind: progUnread, where: w.s}
	}
	text, ok := readSmallFile(r.abs)
	if !ok {
		return program{kind: progUnread, where: w.s}
	}
	return program{kind: progText, text: text, where: w.s}
}

// readSmallFile reads a regular file of at most maxProgramBytes that holds
// text.
func readSmallFile(p string) (string, bool) {
	buf, ok := readRegular(p, maxProgramBytes)
	if !ok || bytes.IndexByte(buf, 0) >= 0 {
		return "", false
	}
	return string(buf), true
}

// markWritten records that the script writes abs with content the policy
// cannot see.
func (c *checker) markWritten(abs string) {
	if c.written == nil {
		c.written = map[string]source{}
	}
	c.written[abs] = source{kind: srcHidden, what: "what an earlier command wrote into it"}
}

// recordOutput records what a statement writes into the files its output
// is redirected to, when the policy can see it.
func (c *checker) recordOutput(s *syntax.Stmt, cwd cwds) {
	if len(cwd) != 1 {
		return
	}
	for _, r := range s.Redirs {
		if r.N != nil && r.N.Value != "1" {
			continue
		}
		appending := false
		switch r.Op {
		case syntax.RdrOut, syntax.RdrClob, syntax.RdrAll, syntax.RdrAllClob:
		case syntax.AppOut, syntax.AppClob, syntax.AppAll, syntax.AppAllClob:
			appending = true
		default:
			continue
		}
		w := c.expandOne(r.Word)
		if !w.lit || w.glob {
			continue
		}
		abs := c.resolve(cwd[0], w.s).abs
		bare := *s
		bare.Redirs = nil
		out := c.produce(&bare, cwd, c.stdin)
		if out.kind == srcFile || out.kind == srcEmpty && !appending {
			if out.kind == srcFile {
				out = c.fileSource(out)
			} else {
				out = &source{kind: srcText}
			}
		}
		if c.written == nil {
			c.written = map[string]source{}
		}
		prev, had := c.written[abs]
		switch {
		case out.kind == srcHidden:
			c.written[abs] = *out
		case appending && had && prev.kind == srcText:
			c.written[abs] = source{kind: srcText, text: prev.text + out.text}
		case appending && !had:
			if text, ok := readSmallFile(abs); ok {
				c.written[abs] = source{kind: srcText, text: text + out.text}
			} else if _, err := lstatType(abs); err != nil {
				c.written[abs] = source{kind: srcText, text: out.text}
			} else {
				c.written[abs] = source{kind: srcHidden, what: "a file the policy cannot read"}
			}
		case appending:
			c.written[abs] = source{kind: srcHidden, what: prev.what}
		default:
			c.written[abs] = source{kind: srcText, text: out.text}
		}
	}
}

// fileSource turns a file stream into its text when the policy can read
// it.
func (c *checker) fileSource(s *source) *source {
	p := c.fileText(s.file, s.cwd)
	if p.kind == progText {
		return &source{kind: srcText, text: p.text}
	}
	return hidden("the contents of " + s.file.s)
}

// numericSubst reports a command substitution whose output is a number:
// $(seq …), $(wc -l < f), $(nproc), $(date +%s), $(git rev-list --count …).
func numericSubst(cs *syntax.CmdSubst) bool {
	if len(cs.Stmts) != 1 {
		return false
	}
	s := cs.Stmts[0]
	ce, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(ce.Args) == 0 {
		if b, ok := s.Cmd.(*syntax.BinaryCmd); ok && (b.Op == syntax.Pipe) {
			// … | wc -l
			return numericSubst(&syntax.CmdSubst{Stmts: []*syntax.Stmt{b.Y}})
		}
		return false
	}
	args := make([]string, 0, len(ce.Args))
	for _, w := range ce.Args {
		l, ok := literalText(w)
		if !ok {
			return false
		}
		args = append(args, l)
	}
	switch args[0] {
	case "seq", "nproc", "expr":
		return true
	case "wc":
		// With no file operand, wc prints only the count.
		for _, a := range args[1:] {
			if !strings.HasPrefix(a, "-") {
				return false
			}
		}
		return true
	case "date":
		return len(args) == 2 && (args[1] == "+%s" || args[1] == "+%Y" || args[1] == "+%s%N")
	case "git":
		return len(args) >= 3 && args[1] == "rev-list" && args[2] == "--count"
	case "grep", "egrep", "fgrep":
		// grep -c PATTERN [FILE]: a count alone.
		count, operands := false, 0
		for _, a := range args[1:] {
			switch {
			case a == "-c" || a == "--count":
				count = true
			case strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "c"):
				count = !strings.ContainsAny(a, "HrR")
			case strings.HasPrefix(a, "-"):
				if a == "-H" || a == "-r" || a == "-R" || strings.HasPrefix(a, "--with-filename") || a == "--recursive" {
					return false
				}
			default:
				operands++
			}
		}
		return count && operands <= 2
	case "id":
		return len(args) == 2 && (args[1] == "-u" || args[1] == "-g")
	}
	return false
}

// literalText is the value of a word that is only literal text.
func literalText(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if strings.ContainsAny(p.Value, `\*?[{~`) {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(unescapeDouble(l.Value))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}
