package policy

import (
	"os"
	"path/filepath"
	"strings"
)

// globBash expands pattern (with quoted metacharacters escaped) the way
// bash does by default: component by component, where * ? and [...] do not
// match a leading dot unless the component starts with one, a trailing
// slash keeps directories only, and nothing matching leaves no result. A
// relative pattern is expanded in dir. It stops after max matches; more
// reports whether it did.
func globBash(dir, pattern string, max int) (matches []string, more bool) {
	start := dir
	if strings.HasPrefix(pattern, "/") {
		start = "/"
	}
	comps := strings.Split(strings.Trim(pattern, "/"), "/")
	dirsOnly := strings.HasSuffix(pattern, "/")
	cur := []string{start}
	for i, comp := range comps {
		last := i == len(comps)-1
		var next []string
		if !hasMeta(comp) {
			lit := unescape(comp)
			for _, p := range cur {
				q := filepath.Join(p, lit)
				if _, err := os.Lstat(q); err == nil {
					next = append(next, q)
				}
			}
		} else {
			dotOK := strings.HasPrefix(strings.TrimPrefix(comp, `\`), ".")
			for _, p := range cur {
				entries, err := os.ReadDir(p)
				if err != nil {
					continue
				}
				for _, e := range entries {
					name := e.Name()
					if name[0] == '.' && !dotOK {
						continue
					}
					if ok, _ := filepath.Match(comp, name); ok {
						next = append(next, filepath.Join(p, name))
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
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
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
