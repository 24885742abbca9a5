package policy

import (
	"path"
	"strings"
)

// Code the policy cannot parse (python -c, a perl script, vim -c, a
// makefile on standard input, the arguments of docker run or ssh) still
// names the commands it runs: the policy looks for the commands a
// profile's rules name anywhere in it, and reads the command lines it can
// find (strings, backquotes, ! commands, make recipes, exec and spawn
// lines) leniently, enforcing the profile's rules and what the commands
// need. It is a net for a profile that may run code anyway, not a proof.

// maxScanLines bounds the command lines a scan checks.
const maxScanLines = 256

// ruleScan looks for the commands the profile's deny and approval rules
// name in text: a rule's command followed, within a few words, by its
// subcommand words.
func (c *checker) ruleScan(text string) {
	if len(c.p.denyCmds) == 0 && len(c.p.approvalCmds) == 0 || text == "" {
		return
	}
	toks := scanTokens(text)
	for _, pt := range c.p.denyCmds {
		if tokensMatch(pt, toks) {
			c.denyf("commands.deny:"+pt.text, "the code it runs names %q, which commands.deny %q denies", pt.text, pt.text)
			return
		}
	}
	for _, pt := range c.p.approvalCmds {
		if tokensMatch(pt, toks) {
			c.approve("approval:"+pt.text, "the code it runs names %q (profile %q lists %q)", pt.text, c.p.Name, pt.text)
		}
	}
}

// payloadEscapes are the escapes echo -e, printf and $'…' turn into the
// blanks between the words of a command line.
var payloadEscapes = strings.NewReplacer(`\n`, " ", `\t`, " ", `\r`, " ")

// payloadScan is ruleScan over a whole script that ran a program whose
// code the policy does not read (make, npm test, a script in the
// workspace): what the script wrote for it to run (a recipe, a package
// script, a test) is in the script's text or its literal words.
func (c *checker) payloadScan(src string) {
	c.ruleScan(payloadEscapes.Replace(src))
	if c.deny == nil {
		c.ruleScanWords(c.words)
	}
}

// ruleScanWords is ruleScan over a command's literal arguments.
func (c *checker) ruleScanWords(args []word) {
	if len(c.p.denyCmds) == 0 && len(c.p.approvalCmds) == 0 {
		return
	}
	var b strings.Builder
	for _, w := range args {
		if w.lit {
			b.WriteString(w.s)
			b.WriteByte(' ')
		}
	}
	c.ruleScan(b.String())
}

// scanTokens splits text into the words a command line could be made of.
func scanTokens(text string) []string {
	return strings.FieldsFunc(text, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '_' || r == '-' || r == '.' || r == '/' || r == '+' || r == '@' || r == ':' || r == '=' || r == '%' || r >= 0x80)
	})
}

// tokensMatch reports a rule's command among toks with its subcommand
// words after it, in order, within eight words.
func tokensMatch(pt cmdPattern, toks []string) bool {
	for i, t := range toks {
		if !globWord(pt.words[0], t) && !globWord(pt.words[0], path.Base(t)) {
			continue
		}
		j := i + 1
		ok := true
		for _, w := range pt.words[1:] {
			for j < len(toks) && j <= i+8 && !globWord(w, toks[j]) {
				j++
			}
			if j >= len(toks) || j > i+8 {
				ok = false
				break
			}
			j++
		}
		if ok {
			return true
		}
	}
	return false
}

// scanCode checks code in a language the policy cannot parse: the rules'
// commands anywhere in it, and the command lines it can find, leniently.
func (c *checker) scanCode(text string, lang language, cwd cwds) {
	c.ruleScan(text)
	if c.deny != nil || text == "" {
		return
	}
	lines := commandLines(text, lang)
	// Strings inside strings (exec("os.system('…')")) are read too.
	for i := 0; i < len(lines) && i < maxScanLines; i++ {
		if strings.ContainsAny(lines[i], "\"'`") && lines[i] != text {
			lines = append(lines, stringLiterals(lines[i])...)
		}
	}
	for i, l := range lines {
		if i == maxScanLines || c.deny != nil {
			return
		}
		if !c.looksLikeCommand(l) {
			continue
		}
		c.lenient++
		c.enter()
		c.script(l, cwd)
		c.leave()
		c.lenient--
	}
}

// looksLikeCommand reports a line whose first word is a command the policy
// knows or a rule names, so a string of prose is not read as a command.
func (c *checker) looksLikeCommand(line string) bool {
	line = strings.TrimLeft(line, " \t@-+(")
	first, rest, _ := strings.Cut(line, " ")
	first = strings.Trim(first, ";&|")
	if first == "" {
		return false
	}
	name := path.Base(first)
	if _, ok := c.cmds[name]; ok {
		// A command alone, without arguments, is more often a word.
		return strings.TrimSpace(rest) != "" || privilegedName(name)
	}
	for _, pt := range c.p.denyCmds {
		if globWord(pt.words[0], name) {
			return true
		}
	}
	for _, pt := range c.p.approvalCmds {
		if globWord(pt.words[0], name) {
			return true
		}
	}
	return false
}

// commandLines finds the command lines in code: the contents of strings
// (and of lists of strings, joined: ["kubectl", "apply"]), ! commands of
// editors, recipes and $(shell …) of makefiles, exec and spawn lines.
func commandLines(text string, lang language) []string {
	var out []string
	if lang == langOtherShell {
		out = append(out, text)
		out = append(out, strings.Split(text, "\n")...)
	}
	out = append(out, stringLiterals(text)...)
	out = append(out, quotedCommands(text)...)
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "\t") {
			// A make recipe.
			out = append(out, strings.TrimLeft(line, "\t@-+ "))
		}
		for rest := line; ; {
			i := strings.IndexByte(rest, '!')
			if i < 0 {
				break
			}
			if lang == langEditor || lang == langCode && i+1 < len(rest) && rest[i+1] != '=' {
				out = append(out, strings.TrimSpace(rest[i+1:]))
			}
			rest = rest[i+1:]
		}
		for _, kw := range []string{"$(shell ", "${shell ", "exec ", "spawn ", "system ", ".shell ", ".system ", "shell ",
			"syscmd(", "esyscmd("} {
			for rest := line; ; {
				i := strings.Index(rest, kw)
				if i < 0 {
					break
				}
				cmd := rest[i+len(kw):]
				if j := strings.IndexAny(cmd, "]);"); j >= 0 && kw != ".shell " && kw != ".system " {
					cmd = cmd[:j]
				}
				out = append(out, cmd)
				rest = rest[i+len(kw):]
			}
		}
		for _, pipe := range []string{".output |", ".once |", ".read |", ".import |", "open(\"|", "open('|", "open \"|"} {
			if i := strings.Index(line, pipe); i >= 0 {
				out = append(out, strings.Trim(line[i+len(pipe):], "\"')"))
			}
		}
	}
	return out
}

// stringLiterals returns the contents of the quoted strings in code (", ',
// `), and of every run of strings separated only by commas and brackets,
// joined with spaces.
func stringLiterals(text string) []string {
	var out []string
	var group []string
	flush := func() {
		if len(group) > 1 {
			out = append(out, strings.Join(group, " "))
		}
		group = group[:0]
	}
	for i := 0; i < len(text); i++ {
		q := text[i]
		switch q {
		case '"', '\'', '`':
		case ',', ' ', '\t', '\n', '[', ']', '(', ')':
			continue
		default:
			flush()
			continue
		}
		var b strings.Builder
		j := i + 1
		for ; j < len(text) && text[j] != q; j++ {
			if text[j] == '\\' && j+1 < len(text) {
				j++
				switch text[j] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				default:
					b.WriteByte(text[j])
				}
				continue
			}
			b.WriteByte(text[j])
		}
		s := b.String()
		out = append(out, s)
		group = append(group, s)
		i = j
	}
	flush()
	return out
}

// quotedCommands returns the commands of perl's and ruby's qx(…), %x(…)
// and their kin, with any of their delimiters.
func quotedCommands(text string) []string {
	var out []string
	for _, kw := range []string{"qx", "%x", "qw", "%w", "%W"} {
		for rest := text; ; {
			i := strings.Index(rest, kw)
			if i < 0 || i+len(kw) >= len(rest) {
				break
			}
			rest = rest[i+len(kw):]
			open := rest[0]
			closer := map[byte]byte{'(': ')', '{': '}', '[': ']', '<': '>'}[open]
			if closer == 0 {
				if open == ' ' || open == '_' || open >= 'a' && open <= 'z' || open >= 'A' && open <= 'Z' || open >= '0' && open <= '9' {
					continue
				}
				closer = open
			}
			if j := strings.IndexByte(rest[1:], closer); j >= 0 {
				out = append(out, rest[1:1+j])
			}
		}
	}
	return out
}

func privilegedName(name string) bool {
	switch name {
	case "sudo", "su", "doas", "pkexec", "runuser", "sg", "newgrp", "run0", "sudoedit":
		return true
	}
	return false
}
