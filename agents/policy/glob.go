package policy

import (
	"os"
	"path/filepath"
	"strings"
)

// globMatch is one path a pattern expands to. real means no component of
// it is a symbolic link, so it resolves to itself.
type globMatch struct {
	path string
	real bool
}

// globBash expands pattern (with quoted metacharacters escaped) the way
// bash does by default: component by component, where * ? and [...] do not
// match a leading dot unless the component starts with one, a trailing
// slash keeps directories only, and nothing matching leaves no result. A
// relative pattern is expanded in dir, a real directory. It stops after
// max matches; more reports whether it did. stats answers for the
// components written without a glob, dirs for the directories read.
func globBash(stats statCache, dirs *listings, dir, pattern string, max int) (matches []globMatch, more bool) {
	start := globMatch{path: dir, real: true}
	if strings.HasPrefix(pattern, "/") {
		start = globMatch{path: "/", real: true}
	}
	comps := strings.Split(strings.Trim(pattern, "/"), "/")
	dirsOnly := strings.HasSuffix(pattern, "/")
	cur := []globMatch{start}
	for i, comp := range comps {
		last := i == len(comps)-1
		var next []globMatch
		if !hasMeta(comp) {
			lit := unescape(comp)
			for _, p := range cur {
				q := filepath.Join(p.path, lit)
				if typ, ok := stats.lstat(q); ok {
					next = append(next, globMatch{path: q, real: p.real && typ&os.ModeSymlink == 0 && lit != ".."})
				}
			}
		} else {
			dotOK := strings.HasPrefix(strings.TrimPrefix(comp, `\`), ".")
			for _, p := range cur {
				// Sorted, as bash sorts, so the first refusal is the one
				// a person would see first.
				got, ok := dirs.list(p.path)
				if !ok {
					continue
				}
				for _, e := range got.entries {
					name := e.name
					if name[0] == '.' && !dotOK {
						continue
					}
					if ok, _ := filepath.Match(comp, name); ok {
						next = append(next, globMatch{path: filepath.Join(p.path, name), real: p.real && e.typ&os.ModeSymlink == 0})
						if last && len(next) > max {
							return next[:max], true
						}
					}
				}
			}
		}
		cur = next
		if len(cur) == 0 {
			return nil, false
		}
	}
	if dirsOnly {
		kept := cur[:0]
		for _, p := range cur {
			if fi, err := os.Stat(p.path); err == nil && fi.IsDir() {
				kept = append(kept, p)
			}
		}
		cur = kept
	}
	return cur, false
}

func hasMeta(comp string) bool {
	for i := 0; i < len(comp); i++ {
		switch comp[i] {
		case '\\':
			i++
		case '*', '?', '[':
			return true
		}
	}
	return false
}

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
