package policy

import (
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"mvdan.cc/sh/v3/syntax"
)

// literalWords splits a line into literal words for the parsers below.
func fuzzWords(s string) []word {
	var out []word
	for _, f := range strings.Fields(s) {
		out = append(out, litWord(f))
	}
	return out
}

// FuzzParseOpts holds the option parser to what getopt does with the words
// it is given: every word is an option, an option's value or an operand,
// and nothing else.
func FuzzParseOpts(f *testing.F) {
	for _, s := range []string{"-la src", "--output=x -o y z", "-ofile a -- -b", "--compress-prog=sh x", "-n5 -- -",
		"--no-index a b", "-abcx -", "---", "-", "--", "--=x", "-o", "--output"} {
		f.Add(s)
	}
	t := optSpec{short: "ox", shortOpt: "O", flags: "abcl", long: []string{"--output", "--compress-program"},
		longOpt: []string{"--color"}, longFlags: []string{"--no-index", "--all"}, digits: true, negate: true, strict: true}.compile()
	f.Fuzz(func(tt *testing.T, s string) {
		args := fuzzWords(s)
		opts, pos := parseOpts(args, t)
		values := 0
		for _, o := range opts {
			if o.val != nil {
				values++
			}
			if !strings.HasPrefix(o.name, "-") {
				tt.Fatalf("%q: option %q does not start with -", s, o.name)
			}
		}
		for _, p := range pos {
			if p.s != "-" && strings.HasPrefix(p.s, "-") && p.s != "--" {
				// An operand that looks like an option only comes after "--".
				if !strings.Contains(s, "--") {
					tt.Fatalf("%q: operand %q is an option", s, p.s)
				}
			}
		}
		if len(pos) > len(args) {
			tt.Fatalf("%q: more operands than words", s)
		}
	})
}

// FuzzAwkScan holds the awk reader to this: a program with no pipe, no
// system, no getline and no redirection does nothing beyond printing.
func FuzzAwkScan(f *testing.F) {
	for _, s := range []string{`{print $1}`, `BEGIN{system("ls")}`, `{print > "x"}`, `{print | "sh"}`,
		`BEGIN{"date" | getline d}`, `{getline l < "f"}`, `$1 > 2 {print}`, `/a\/b/ {print}`, `{print "a" "b"}`,
		`@include "x"`, `BEGIN{ARGV[1]="x"}`, `{ printf "%s\n", $0 > "/dev/stderr" }`, `"`, `/`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		eff, ok := awkScan(src)
		if !ok {
			return
		}
		quiet := !strings.ContainsAny(src, "|>") && !strings.Contains(src, "system") && !strings.Contains(src, "getline") &&
			!strings.Contains(src, "@") && !strings.Contains(src, "ARG")
		if quiet && (len(eff.commands) > 0 || len(eff.sinks) > 0 || len(eff.writes) > 0 || len(eff.reads) > 0 ||
			eff.dynamic != "" || eff.code != "") {
			t.Fatalf("%q: %+v", src, eff)
		}
	})
}

// FuzzSedScript holds the sed reader to this: a script without e, w, W, r
// or R (or a command it does not know) neither runs, writes nor reads.
func FuzzSedScript(f *testing.F) {
	for _, s := range []string{"s/a/b/", "1e ls", "s/x/y/e", "w out", "r /etc/passwd", "1,5p", "/x/{p;q}", "y/ab/cd/",
		"$a\\text", "s|a|b|gw x", "s/a", ":a;N;ba",
		"s/[/]/x/e", "/[/]/e", "s/[[:alpha:]/]*/x/w out", "s/[]/]/x/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		eff := sedScript(src)
		if !strings.ContainsAny(src, "ewWrR") && !eff.unknown &&
			(len(eff.commands) > 0 || eff.dynamic || len(eff.writes) > 0 || len(eff.reads) > 0) {
			t.Fatalf("%q: %+v", src, eff)
		}
	})
}

// FuzzMakeRecipes runs the makefile reader on anything: it never panics,
// and every line it gives back is in the makefile (joined where a
// backslash continues it).
func FuzzMakeRecipes(f *testing.F) {
	for _, s := range []string{"all: x\n\techo a\nx:\n\trm -rf b\n", "a b: c | d ; e\n", "X := 1\nY = a:b\n%.o: %.c\n\tcc $<\n",
		"t: \\\n u\n\tv\n", ":\n\t\n"} {
		f.Add(s, "all")
	}
	f.Fuzz(func(t *testing.T, text, targets string) {
		joined := strings.ReplaceAll(text, "\\\n", " ")
		for _, l := range strings.Split(makeRecipes(text, strings.Fields(targets)), "\n") {
			if l = strings.TrimPrefix(l, "\t"); l != "" && !strings.Contains(joined, l) {
				t.Fatalf("%q: %q is not in the makefile", text, l)
			}
		}
	})
}

// FuzzSplitters runs the small splitters the policy has (env -S, xargs,
// GIT_CONFIG_PARAMETERS, printf, echo) on anything: they never panic, and
// what they give back is valid when what they were given is.
func FuzzSplitters(f *testing.F) {
	for _, s := range []string{`a b 'c d' "e f"`, `\_x\c y`, `${X}`, `'a=b' 'c'='d'`, `%s %d %b\n`, `\x41\101`,
		`-e a\tb`, `"unterminated`, `%*s`, `a\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		envSplit(litWord(s))
		xargsItems(s, ' ', false)
		xargsItems(s, 0, false)
		xargsItems(s, ' ', true)
		splitConfigParameters(s)
		printfText(fuzzWords(s))
		echoText(fuzzWords(s))
		ansiC(s)
	})
}

// TestTextProducersAreBash checks what the policy reads echo and printf to
// print against what bash prints: the text it then checks as a program
// must be the program.
func TestTextProducersAreBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	require.NoError(t, err, "bash is needed")
	for _, cmd := range []string{
		`echo kubectl apply`, `echo -n 'a b'`, `echo -e 'kube\x63tl\tapply'`, `echo -e 'a\101\0102'`, `echo -E 'a\tb'`,
		`echo -ne 'x\cy'`, `echo -- -n`, `echo 'a  b'`, `echo`,
		`printf 'kubectl apply\n'`, `printf '%s %s\n' kubectl apply`, `printf '%s%s apply\n' kube ctl`,
		`printf '\x6bubectl apply'`, `printf '\153ubectl'`, `printf '%b' 'a\x20b'`, `printf '%s\n' a b c`,
		`printf '%d items' 3`, `printf '%c%c' abc def`, `printf '100%%'`, `printf '%s'`, `printf 'a\tb\\c'`,
		`printf '\u00e9t\u00e9'`, `printf -- '%s' x`, `printf '%b' 'r\155 -rf x'`, `printf '%b' 'a\1011\0101\18\7x'`,
		`printf '%b\n' 'r\x6d'`, `echo -e 'a\101'`,
	} {
		f, err := syntax.NewParser().Parse(strings.NewReader(cmd), "")
		require.NoError(t, err)
		ce := f.Stmts[0].Cmd.(*syntax.CallExpr)
		var argv []word
		for _, w := range ce.Args {
			v, ok := literalText(w)
			if !ok {
				v, ok = sglDollar(w)
			}
			require.True(t, ok, cmd)
			argv = append(argv, litWord(v))
		}
		var got string
		switch argv[0].s {
		case "echo":
			got = echoText(argv[1:])
		case "printf":
			var ok bool
			got, ok = printfText(argv[1:])
			require.True(t, ok, cmd)
		}
		want, err := exec.Command(bash, "-c", cmd).Output()
		require.NoError(t, err, cmd)
		require.Equal(t, string(want), got, cmd)
	}
}

// TestDollarQuotesAreBash checks the value the policy gives a $'…' word
// against the one bash gives it, NULs, escapes and all: the name it checks
// must be the program bash runs.
func TestDollarQuotesAreBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	require.NoError(t, err, "bash is needed")
	for _, q := range []string{
		`$'rm\0x'`, `$'rm\x00'`, `$'rm\c@x'`, `$'rm\000x'`, `$'rm\u0000x'`, `$'\x72\x6d'`, `$'\162\155'`,
		`$'\u0072m'`, `$'\U00000072m'`, `$'a\tb'`, `$'a\cAb'`, `$'\e[0m'`, `$'x\'y'`, `$'\q'`, `$'\x7'`,
		`$'\1234'`, `$'caf\u00e9'`,
	} {
		f, err := syntax.NewParser().Parse(strings.NewReader("printf %s "+q), "")
		require.NoError(t, err, q)
		got, ok := sglDollar(f.Stmts[0].Cmd.(*syntax.CallExpr).Args[2])
		require.True(t, ok, q)
		want, err := exec.Command(bash, "-c", "printf %s "+q).Output()
		require.NoError(t, err, q)
		require.Equal(t, string(want), got, q)
	}
}

// sglDollar is the value of a word that is one $'…' string.
func sglDollar(w *syntax.Word) (string, bool) {
	if len(w.Parts) != 1 {
		return "", false
	}
	q, ok := w.Parts[0].(*syntax.SglQuoted)
	if !ok {
		return "", false
	}
	return dollarQuoted(q.Value)
}
