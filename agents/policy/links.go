package policy

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// A script can make a link and write through it in the same command (ln -s
// .git/hooks h && echo x > h/pre-commit): the policy models the links the
// script makes (ln, cp -s, cp -l, cp -P, mv of a link), so every later
// path is resolved through them. What it cannot model (an archive
// extracted, a tree with links copied or moved) makes the tree murky:
// later paths under it are refused in the same command.

// linkKind is how a command makes links.
type linkKind uint8

const (
	linkNone     linkKind = iota
	linkSymbolic          // ln -s, cp -s
	linkHard              // ln, cp -l
	linkCopy              // cp -P, cp -a, rsync -a: links are copied as links
	linkMove              // mv: a link, or a tree with links, moves
)

// maxLinks bounds the links the policy models in one check.
const maxModelledLinks = 64

// addLink records a link at abs (absolute, not resolved at its last
// component) to target: a symbolic link's target as written, or an
// absolute path.
func (c *checker) addLink(abs, target string) {
	if c.links == nil {
		c.links = map[string]string{}
	}
	if len(c.links) >= maxModelledLinks {
		c.denyf("shell:too-complex", "the command makes too many links to follow; split it into smaller commands")
		return
	}
	c.links[abs] = target
}

// locate is where a path written names, resolved through every link up to
// its last component, which is not followed: where ln puts a link.
func (c *checker) locate(dir, p string) string {
	if !filepath.IsAbs(p) {
		p = dir + "/" + p
	}
	p = filepath.Clean(p)
	parent, base := filepath.Dir(p), filepath.Base(p)
	return join(c.resolve(dir, parent).abs, base)
}

// isDirAt reports whether abs is a directory, following real and modelled
// links.
func (c *checker) isDirAt(dir, p string) bool {
	r := c.resolve(dir, p)
	typ, ok := c.stats.lstat(r.abs)
	return ok && typ.IsDir()
}

// lnHandler: the link is written; its target is read, relative to the
// link's directory for a symbolic link, so a link out of the workspace is
// refused when it is made; the link is then modelled for the rest of the
// script.
func lnHandler() handler {
	t := optSpec{short: "tS", long: []string{"--target-directory", "--suffix"}, longOpt: []string{"--backup"},
		flags: "FLPTbdfinrsv", longFlags: []string{"--directory", "--force", "--interactive", "--logical",
			"--no-dereference", "--physical", "--relative", "--symbolic", "--no-target-directory", "--verbose",
			"--help", "--version"}}.compile()
	return func(c *checker, inv *invocation) cwds {
		opts, pos := parseOpts(inv.argv[1:], t)
		if !c.need(inv, pRead|pWrite) {
			return inv.cwd
		}
		symbolic := hasOpt(opts, "-s", "--symbolic")
		noTarget := hasOpt(opts, "-T", "--no-target-directory")
		var dir *word
		for _, o := range opts {
			if (o.name == "-t" || o.name == "--target-directory") && o.val != nil {
				dir = o.val
			}
		}
		targets := pos
		var link word
		switch {
		case dir != nil:
			c.usePath(inv, *dir, pathUse{acc: accWrite})
			link = *dir
		case len(pos) >= 2:
			link, targets = pos[len(pos)-1], pos[:len(pos)-1]
		case len(pos) == 1:
			link = litWord(".")
		}
		for _, tw := range targets {
			if c.deny != nil {
				return inv.cwd
			}
			if !tw.lit || !link.lit || tw.glob || link.glob {
				c.usePath(inv, tw, pathUse{acc: accRead})
				c.usePath(inv, link, pathUse{acc: accWrite})
				if c.deny == nil {
					// Not followed: later paths may pass through it.
					c.denyf("shell:dynamic-path", "ln with operands that are not literals is not allowed: the policy could not follow the link it makes")
				}
				return inv.cwd
			}
			for _, d := range inv.cwd {
				// Where the link goes: into LINK when it is a directory.
				at := link.s
				if dir != nil || !noTarget && c.isDirAt(d, link.s) || len(targets) > 1 {
					at = strings.TrimSuffix(link.s, "/") + "/" + path.Base(tw.s)
				}
				linkAbs := c.locate(d, at)
				c.useResolved(inv, resolved{raw: at, abs: linkAbs, rel: c.relOrEmpty(linkAbs), in: c.within(linkAbs)}, pathUse{acc: accWrite})
				if c.deny != nil {
					return inv.cwd
				}
				// The target, read from where the link is for a relative
				// symbolic link.
				var tr resolved
				switch {
				case !symbolic || path.IsAbs(tw.s):
					tr = c.resolve(d, tw.s)
				case hasOpt(opts, "-r", "--relative"):
					tr = c.resolve(d, tw.s)
				default:
					tr = c.resolve(path.Dir(linkAbs), tw.s)
				}
				tr.raw = tw.s
				c.useResolved(inv, tr, pathUse{acc: accRead})
				if c.deny != nil {
					return inv.cwd
				}
				if symbolic && !hasOpt(opts, "-r", "--relative") {
					c.addLink(linkAbs, tw.s)
				} else {
					c.addLink(linkAbs, tr.abs)
				}
			}
		}
		return inv.cwd
	}
}

func (c *checker) relOrEmpty(abs string) string {
	rel, _ := c.ws.relative(abs)
	return rel
}

func (c *checker) within(abs string) bool {
	_, ok := c.ws.relative(abs)
	return ok
}

// copyLinks models the links a copy or move makes at dest from sources.
func (c *checker) copyLinks(inv *invocation, sources []word, dest word, kind linkKind, trees bool) {
	if kind == linkNone || !dest.lit || dest.glob || len(inv.cwd) != 1 {
		if kind != linkNone && (!dest.lit || dest.glob) {
			c.murkyWord(inv, dest)
		}
		return
	}
	d := inv.cwd[0]
	intoDir := len(sources) > 1 || c.isDirAt(d, dest.s)
	for _, s := range sources {
		if !s.lit || s.glob {
			c.murkyWord(inv, dest)
			return
		}
		at := dest.s
		if intoDir {
			at = strings.TrimSuffix(dest.s, "/") + "/" + path.Base(s.s)
		}
		linkAbs := c.locate(d, at)
		switch kind {
		case linkSymbolic:
			c.addLink(linkAbs, c.resolve(d, s.s).abs)
		case linkHard:
			c.addLink(linkAbs, c.resolve(d, s.s).abs)
		case linkCopy, linkMove:
			src := c.locate(d, s.s)
			if t, ok := c.links[src]; ok {
				c.addLink(linkAbs, t)
				continue
			}
			typ, ok := c.stats.lstat(src)
			switch {
			case !ok:
			case typ&fs.ModeSymlink != 0:
				if t, err := os.Readlink(src); err == nil {
					c.addLink(linkAbs, t)
				} else {
					c.murkyTree(inv, litWord(at))
				}
			case typ.IsDir() && trees:
				if c.ws.hasLinks(src) {
					c.murkyTree(inv, litWord(at))
				}
			}
		}
		if c.deny != nil {
			return
		}
	}
}

// hasLinks reports whether the tree at abs holds a symbolic link, or is
// too large to tell.
func (w *workspace) hasLinks(abs string) bool {
	n := 0
	dirs := []string{abs}
	for len(dirs) > 0 {
		dir := dirs[len(dirs)-1]
		dirs = dirs[:len(dirs)-1]
		got, ok := w.dirs.list(dir)
		if !ok {
			continue
		}
		if n += len(got.entries); n > maxLinkWalk {
			return true
		}
		for _, e := range got.entries {
			switch {
			case e.typ&fs.ModeSymlink != 0:
				return true
			case e.typ.IsDir():
				dirs = append(dirs, dir+"/"+e.name)
			}
		}
	}
	return false
}

// murkyTree marks the tree w names as holding links the policy cannot
// see.
func (c *checker) murkyTree(inv *invocation, w word) {
	if !w.lit || w.glob {
		c.murkyWord(inv, w)
		return
	}
	for _, d := range inv.cwd {
		c.murky = append(c.murky, c.resolve(d, w.s).abs)
	}
}

// murkyWord handles a destination the policy cannot see: every path after
// it may be anywhere.
func (c *checker) murkyWord(inv *invocation, w word) {
	c.murky = append(c.murky, c.ws.real)
}
