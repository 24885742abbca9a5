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

// globListings checks the directories bash lists to expand the glob words
// among ws, whatever the command does with the names: echo /etc/* and
// for f in link-out/* read a directory outside the workspace as surely as
// ls does. A pattern whose directory is not known (a variable the policy
// cannot see before the glob) is refused.
func (c *checker) globListings(ws []word, cwd cwds) {
	for _, w := range ws {
		if !w.glob || c.deny != nil {
			continue
		}
		if !w.lit {
			c.denyf("shell:dynamic-path", "expanding %s is not allowed: it is a glob pattern that is not a literal (it contains %s), so the policy cannot check the directory it lists", w.source(), w.dyn)
			return
		}
		for _, dir := range cwd {
			c.globListed(w, dir)
			if c.deny != nil {
				return
			}
		}
	}
}

// globListed checks, as reads, the directories bash lists to expand w in
// dir: the one before each component that holds a glob character.
func (c *checker) globListed(w word, dir string) {
	abs := strings.HasPrefix(w.pat, "/")
	comps := strings.Split(strings.Trim(w.pat, "/"), "/")
	var inv *invocation
	for i, comp := range comps {
		if !hasMeta(comp) {
			continue
		}
		if inv == nil {
			inv = c.invocation(invocation{name: "expanding " + w.source(), cwd: cwds{dir}})
		}
		prefix := strings.Join(comps[:i], "/")
		if abs {
			prefix = "/" + prefix
		}
		switch {
		case prefix == "":
			c.useResolved(inv, c.resolve(dir, "."), pathUse{acc: accRead})
			continue
		case !hasMeta(prefix):
			// Listed if it is there, on the machine the command runs on.
			c.useResolved(inv, c.resolve(dir, unescape(prefix)), pathUse{acc: accRead})
			if c.deny != nil {
				return
			}
			continue
		}
		matches, _ := globBash(c.stats, c.ws.dirs, dir, prefix, maxGlobMatches)
		for _, m := range matches {
			// bash lists the directories among them; globstar's **
			// does not go through a link.
			if !m.real && comps[i-1] == "**" {
				continue
			}
			if fi, err := os.Stat(m.path); err != nil || !fi.IsDir() {
				continue
			}
			c.useResolved(inv, c.resolve(dir, m.path), pathUse{acc: accRead})
			if c.deny != nil {
				return
			}
		}
	}
}
