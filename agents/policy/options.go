package policy

import (
	"slices"
	"sort"
	"strings"
)

// optKind is what an option takes.
type optKind uint8

const (
	optUnknown optKind = iota
	// optFlag takes no value.
	optFlag
	// optValue takes a value: attached (-ofile, --output=file) or the next
	// word.
	optValue
	// optOptional takes a value only when it is attached (-O<pager>,
	// --color=<when>).
	optOptional
)

// optSpec declares a program's options as written in its manual: the short
// letters and long names that take a value, take one only attached, or take
// none.
type optSpec struct {
	short     string   // short options taking a value: "nfo"
	shortOpt  string   // short options taking a value only attached
	flags     string   // other short options known
	long      []string // long options taking a value
	longOpt   []string // long options taking a value only attached
	longFlags []string // other long options known
	// strict refuses options the spec does not declare, for a program
	// that can run programs or write files: an option the policy does not
	// know may do either (they need the exec permission).
	strict bool
	// digits makes -NUM an option (head -20, git log -5).
	digits bool
	// negate makes --no-NAME known for every declared long NAME, as git's
	// option parser does.
	negate bool
}

// optTable is an optSpec compiled for lookups.
type optTable struct {
	short  [128]optKind
	long   map[string]optKind
	names  []string // the long names, sorted, for abbreviations
	strict bool
	digits bool
	negate bool
}

func (s optSpec) compile() *optTable {
	t := &optTable{long: map[string]optKind{}, strict: s.strict, digits: s.digits, negate: s.negate}
	for _, set := range []struct {
		letters string
		kind    optKind
	}{{s.flags, optFlag}, {s.shortOpt, optOptional}, {s.short, optValue}} {
		for i := 0; i < len(set.letters); i++ {
			t.short[set.letters[i]&0x7f] = set.kind
		}
	}
	for _, set := range []struct {
		names []string
		kind  optKind
	}{{s.longFlags, optFlag}, {s.longOpt, optOptional}, {s.long, optValue}} {
		for _, n := range set.names {
			t.long[n] = set.kind
		}
	}
	for n := range t.long {
		t.names = append(t.names, n)
	}
	sort.Strings(t.names)
	return t
}

// lookupLong returns the canonical name and kind of a long option written
// as name, which getopt_long and git accept abbreviated to any prefix that
// names one option alone. An abbreviation that could be several options
// is an error for the program, and unknown here.
func (t *optTable) lookupLong(name string) (string, optKind) {
	if k, ok := t.long[name]; ok {
		return name, k
	}
	if t.negate {
		if base, ok := strings.CutPrefix(name, "--no-"); ok {
			if _, ok := t.long["--"+base]; ok {
				return name, optFlag
			}
		}
	}
	if len(name) < 3 {
		return name, optUnknown
	}
	i := sort.SearchStrings(t.names, name)
	if i < len(t.names) && strings.HasPrefix(t.names[i], name) &&
		(i+1 == len(t.names) || !strings.HasPrefix(t.names[i+1], name)) {
		return t.names[i], t.long[t.names[i]]
	}
	return name, optUnknown
}

// opt is one parsed option: "-n", "--output", with its value if it takes
// one. unknown marks an option the program's table does not declare.
type opt struct {
	name    string
	val     *word
	unknown bool
	// missing marks an option that takes a value it was not given.
	missing bool
}

// parseOpts splits args into options and operands the way GNU getopt
// does: options may follow operands, "--" ends them, "-" is an operand. A
// word that is not literal is an operand: it cannot be read as an option.
// Option values and operands point into args, which nothing changes. Long
// options are returned under their full names, however abbreviated.
func parseOpts(args []word, t *optTable) (opts []opt, pos []word) {
	// While the operands are one run of args (no option between them, the
	// common case), pos is that run, not a copy.
	ps, pe, copied := 0, 0, false
	operand := func(i int) {
		switch {
		case copied:
			pos = append(pos, args[i])
		case ps == pe:
			ps, pe = i, i+1
		case pe == i:
			pe++
		default:
			pos = make([]word, 0, pe-ps+len(args)-i)
			pos = append(append(pos, args[ps:pe]...), args[i])
			copied = true
		}
	}
	add := func(o opt) {
		if opts == nil {
			opts = make([]opt, 0, 4)
		}
		opts = append(opts, o)
	}
	for i := 0; i < len(args); i++ {
		w := &args[i]
		if !w.lit || w.s == "-" || !strings.HasPrefix(w.s, "-") {
			operand(i)
			continue
		}
		if w.s == "--" {
			for j := i + 1; j < len(args); j++ {
				operand(j)
			}
			break
		}
		if strings.HasPrefix(w.s, "--") {
			name, val, hasVal := strings.Cut(w.s, "=")
			full, kind := t.lookupLong(name)
			o := opt{name: full, unknown: kind == optUnknown}
			switch {
			case hasVal:
				v := litWord(val)
				o.val = &v
			case kind == optValue && i+1 < len(args):
				i++
				o.val = &args[i]
			case kind == optValue:
				o.missing = true
			}
			add(o)
			continue
		}
		if t.digits && isDigits(w.s[1:]) {
			add(opt{name: "-NUM"})
			continue
		}
		for j := 1; j < len(w.s); j++ {
			kind := optUnknown
			if b := w.s[j]; b < 128 {
				kind = t.short[b]
			}
			o := opt{name: shortOption(w.s, j), unknown: kind == optUnknown}
			if kind == optValue || kind == optOptional {
				if rest := w.s[j+1:]; rest != "" {
					v := litWord(rest)
					o.val = &v
				} else if kind == optValue && i+1 < len(args) {
					i++
					o.val = &args[i]
				} else if kind == optValue {
					o.missing = true
				}
				add(o)
				break
			}
			add(o)
		}
	}
	if !copied && pe > ps {
		pos = args[ps:pe:pe]
	}
	return opts, pos
}

// shortOption names the short option at cluster[j] ("-l" of "-la"),
// without allocating for letters and digits.
func shortOption(cluster string, j int) string {
	const names = "-0-1-2-3-4-5-6-7-8-9-A-B-C-D-E-F-G-H-I-J-K-L-M-N-O-P-Q-R-S-T-U-V-W-X-Y-Z" +
		"-a-b-c-d-e-f-g-h-i-j-k-l-m-n-o-p-q-r-s-t-u-v-w-x-y-z"
	switch b := cluster[j]; {
	case j == 1 && cluster[0] == '-' && len(cluster) == 2:
		return cluster
	case '0' <= b && b <= '9':
		return names[2*(b-'0') : 2*(b-'0')+2]
	case 'A' <= b && b <= 'Z':
		i := 10 + int(b-'A')
		return names[2*i : 2*i+2]
	case 'a' <= b && b <= 'z':
		i := 36 + int(b-'a')
		return names[2*i : 2*i+2]
	}
	return "-" + cluster[j:j+1]
}

// optsAt parses the option word args[i] (a cluster of short options, or
// a long one) with the value it takes from the next word, for commands
// whose options end at their first operand; next is the index after them.
func optsAt(args []word, i int, t *optTable) (opts []opt, next int) {
	opts, _ = parseOpts(args[i:i+1], t)
	next = i + 1
	if n := len(opts); n > 0 && opts[n-1].missing && next < len(args) {
		opts[n-1].val, opts[n-1].missing = &args[next], false
		next++
	}
	return opts, next
}

func hasOpt(opts []opt, names ...string) bool {
	for _, o := range opts {
		if slices.Contains(names, o.name) {
			return true
		}
	}
	return false
}

// optVal returns the value of the last of the named options given.
func optVal(opts []opt, names ...string) (word, bool) {
	var v word
	found := false
	for _, o := range opts {
		if o.val != nil && slices.Contains(names, o.name) {
			v, found = *o.val, true
		}
	}
	return v, found
}

// strictOpts refuses, for a profile without exec, the options of a strict
// table the policy does not know, naming the first. It reports whether the
// check may go on.
func (c *checker) strictOpts(inv *invocation, t *optTable, opts []opt) bool {
	if !t.strict {
		return true
	}
	for _, o := range opts {
		if o.unknown {
			return c.needBecause(inv, pExec, "option "+o.name+" is not one the policy knows for "+inv.name+
				", which can run programs or write files")
		}
	}
	return true
}
