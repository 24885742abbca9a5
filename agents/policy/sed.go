package policy

import (
	"path"
	"strings"
)

// sedHandler checks sed: its script (given, or read with -f) as sedProgram
// says, its files as reads, or writes with -i.
func sedHandler() handler {
	t := optSpec{short: "efl", shortOpt: "i", flags: "nrEszubc",
		long:    []string{"--expression", "--file", "--line-length"},
		longOpt: []string{"--in-place"},
		longFlags: []string{"--quiet", "--silent", "--debug", "--follow-symlinks", "--posix", "--regexp-extended",
			"--separate", "--sandbox", "--unbuffered", "--null-data", "--zero-terminated", "--help", "--version",
			"--binary"},
		strict: true}.compile()
	return func(c *checker, inv *invocation) cwds {
		opts, pos := parseOpts(inv.argv[1:], t)
		if !c.strictOpts(inv, t, opts) {
			return inv.cwd
		}
		inPlace := hasOpt(opts, "-i", "--in-place")
		var progs []program
		fromOpts := false
		for _, o := range opts {
			switch o.name {
			case "-e", "--expression":
				fromOpts = true
				if o.val != nil {
					progs = append(progs, c.inlineProgram(*o.val))
				}
			case "-f", "--file":
				fromOpts = true
				if o.val != nil {
					progs = append(progs, c.fileProgram(*o.val, inv.cwd))
				}
			}
		}
		if !fromOpts {
			if len(pos) == 0 {
				c.denyf("shell:parse", "%s names no script", inv.name)
				return inv.cwd
			}
			progs, pos = append(progs, c.inlineProgram(pos[0])), pos[1:]
		}
		if c.deny != nil {
			return inv.cwd
		}
		if inPlace && !c.needBecause(inv, pWrite, "-i rewrites its files") {
			return inv.cwd
		}
		c.used |= pRead
		for _, p := range progs {
			c.runProgram(inv, p, langSed, inv.cwd, false)
			if c.deny != nil {
				return inv.cwd
			}
		}
		acc := accRead
		if inPlace {
			acc = accWrite
		}
		for _, w := range pos {
			c.usePath(inv, w, pathUse{acc: acc})
		}
		if inPlace {
			c.sedBackups(inv, opts, pos)
		}
		return inv.cwd
	}
}

// sedBackups checks the backups sed -iSUFFIX writes: a suffix with a * is
// the backup's name with * for the file's, and one with a / puts it in
// that directory (-i'../outside/*'), which is a write there.
func (c *checker) sedBackups(inv *invocation, opts []opt, files []word) {
	for _, o := range opts {
		if o.name != "-i" && o.name != "--in-place" || o.val == nil {
			continue
		}
		if !o.val.lit {
			c.denyf("shell:dynamic-script", "%s %s is not allowed: the backup name is not a literal, so the policy cannot see where it is written", inv.name, o.name)
			return
		}
		suffix := o.val.s
		if !strings.Contains(suffix, "*") {
			continue // appended to each file's name, beside it
		}
		for _, f := range files {
			if !f.lit {
				continue // refused as a path already
			}
			dir, base := path.Split(f.s)
			backup := strings.ReplaceAll(suffix, "*", base)
			if !strings.Contains(backup, "/") {
				backup = dir + backup
			}
			c.usePath(inv, litWord(backup), pathUse{acc: accWrite})
			if c.deny != nil {
				return
			}
		}
	}
}

// inlineProgram is a program written in the command (awk's, sed's).
func (c *checker) inlineProgram(w word) program {
	if !w.lit {
		return program{kind: progDynamic, where: w.source(), text: w.dyn}
	}
	return program{kind: progText, text: w.s, literal: true}
}

// sedProgram checks a sed script: e COMMAND is checked as the command; e
// and s///e run the pattern space, which the policy cannot see; w and r
// write and read files.
func (c *checker) sedProgram(inv *invocation, src string, cwd cwds) {
	eff := sedScript(src)
	switch {
	case eff.dynamic:
		c.denyf("shell:dynamic-script", "%s script runs its input as a command (e, s///e); the policy cannot see what would run", inv.name)
		return
	case eff.unknown:
		if !c.needBecause(inv, pExec, "its script uses a command the policy does not know") {
			return
		}
	}
	if len(eff.writes) > 0 && !c.needBecause(inv, pWrite, "its script writes files") {
		return
	}
	for _, w := range eff.writes {
		if w == "/dev/stdout" || w == "/dev/stderr" {
			continue
		}
		c.usePath(inv, litWord(w), pathUse{acc: accWrite})
	}
	for _, r := range eff.reads {
		c.usePath(inv, litWord(r), pathUse{acc: accRead})
	}
	for _, cmd := range eff.commands {
		if c.deny != nil {
			return
		}
		c.nestedText(cmd, cwd)
	}
}

// sedEffects are what a sed script does beyond printing.
type sedEffects struct {
	writes, reads []string
	// commands are the literal commands of e COMMAND; dynamic is a
	// construct that runs the pattern space (e, s///e); unknown a command
	// the policy does not know.
	commands []string
	dynamic  bool
	unknown  bool
}

// sedScript reads a sed script far enough to find the commands that write
// files (w, W, s///w), read files (r, R) or run commands (e, s///e).
func sedScript(s string) sedEffects {
	var eff sedEffects
	i := 0
	unterminated := false
	toEOL := func() string {
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			j = len(s) - i
		}
		v := strings.TrimSpace(s[i : i+j])
		i += j
		return v
	}
	skipDelimited := func(d byte) bool {
		for i < len(s) {
			switch s[i] {
			case '\\':
				i += 2
				continue
			case d:
				i++
				return true
			}
			i++
		}
		return false
	}
	// skipRegex skips a regex up to its delimiter d as GNU sed reads
	// one: a bracket expression is read whole, so a d inside it ([/],
	// [[:alpha:]/]) does not end the regex. A regex that does not end
	// before the line does is reported as such.
	skipRegex := func(d byte) bool {
		for i < len(s) {
			switch ch := s[i]; {
			case ch == '\\':
				i += 2
				continue
			case ch == d:
				i++
				return true
			case ch == '\n':
				return false
			case ch == '[':
				j, ok := bracketEnd(s, i)
				if !ok {
					return false
				}
				i = j
				continue
			}
			i++
		}
		return false
	}
	address := func() {
		for i < len(s) {
			switch ch := s[i]; {
			case ch >= '0' && ch <= '9' || ch == '$' || ch == ',' || ch == '~' || ch == '+' || ch == '!' || ch == ' ' || ch == '\t':
				i++
			case ch == '/':
				i++
				if !skipRegex('/') {
					unterminated = true
					return
				}
			case ch == '\\' && i+1 < len(s):
				d := s[i+1]
				i += 2
				if !skipRegex(d) {
					unterminated = true
					return
				}
			case ch == 'I' || ch == 'M':
				// Address flags after a regex.
				if i > 0 && s[i-1] == '/' {
					i++
					continue
				}
				return
			default:
				return
			}
		}
	}
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', ';', '{', '}':
			i++
			continue
		case '#':
			toEOL()
			continue
		}
		address()
		if unterminated {
			eff.unknown = true
			return eff
		}
		if i >= len(s) {
			break
		}
		cmd := s[i]
		i++
		switch cmd {
		case '{', '}', ';', '\n':
		case 'p', 'P', 'd', 'D', 'n', 'N', 'g', 'G', 'h', 'H', 'x', '=', 'z', 'F', 'l', 'q', 'Q', 'L':
			for i < len(s) && s[i] >= '0' && s[i] <= '9' {
				i++
			}
		case ':', 'b', 't', 'T', 'v':
			for i < len(s) && s[i] != ';' && s[i] != '\n' {
				i++
			}
		case 'a', 'i', 'c':
			for {
				line := toEOL()
				if !strings.HasSuffix(line, `\`) || i >= len(s) {
					break
				}
				i++
			}
		case 'w', 'W':
			eff.writes = append(eff.writes, toEOL())
		case 'r', 'R':
			eff.reads = append(eff.reads, toEOL())
		case 'e':
			if cmd := toEOL(); cmd != "" {
				eff.commands = append(eff.commands, cmd)
			} else {
				eff.dynamic = true
			}
		case 's', 'y':
			if i >= len(s) {
				eff.unknown = true
				return eff
			}
			d := s[i]
			i++
			// The pattern, then the replacement; y has no regex.
			pattern := skipRegex
			if cmd == 'y' {
				pattern = skipDelimited
			}
			if ok := pattern(d); !ok || !skipDelimited(d) {
				eff.unknown = true
				return eff
			}
			if cmd == 'y' {
				continue
			}
		flags:
			for i < len(s) {
				switch f := s[i]; {
				case f == 'g' || f == 'p' || f == 'i' || f == 'I' || f == 'm' || f == 'M' || f >= '0' && f <= '9':
					i++
				case f == 'e':
					eff.dynamic = true
					i++
				case f == 'w':
					i++
					eff.writes = append(eff.writes, toEOL())
					break flags
				default:
					break flags
				}
			}
		default:
			eff.unknown = true
			return eff
		}
	}
	return eff
}

// bracketEnd returns the index just past the bracket expression that
// starts at s[i] ('['), as POSIX reads one: a ']' first (after an optional
// '^') is literal, [:class:], [.coll.] and [=equiv=] are read whole, and a
// backslash is literal. ok is false when the expression does not end
// before the line does.
func bracketEnd(s string, i int) (end int, ok bool) {
	j := i + 1
	if j < len(s) && s[j] == '^' {
		j++
	}
	if j < len(s) && s[j] == ']' {
		j++
	}
	for j < len(s) && s[j] != '\n' {
		switch {
		case s[j] == '[' && j+1 < len(s) && strings.IndexByte(".:=", s[j+1]) >= 0:
			k := strings.Index(s[j+2:], string(s[j+1])+"]")
			if k < 0 || strings.IndexByte(s[j+2:j+2+k], '\n') >= 0 {
				return 0, false
			}
			j += 2 + k + 2
		case s[j] == ']':
			return j + 1, true
		default:
			j++
		}
	}
	return 0, false
}
