package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/agents/tools"
)

// workspace is the directory a run is confined to, with its real path
// (symbolic links resolved) that every resolved path is compared with.
type workspace struct {
	root string // absolute and clean, as configured
	real string // root with symbolic links resolved
	home string // what ~ means: the sandbox's home, never the workspace
	// dirs remembers the listings walks for links read, while their
	// directories stay unchanged.
	dirs *listings
}

func newWorkspace(dir string) (*workspace, error) {
	if dir == "" {
		return nil, errors.New("no workspace")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	return &workspace{root: abs, real: real, home: sandbox.Home, dirs: newListings()}, nil
}

// resolved is a path as the kernel would reach it.
type resolved struct {
	raw string // as the command or tool wrote it
	abs string // absolute, every existing symbolic link followed
	rel string // slash-separated, relative to the workspace; "" outside it
	in  bool   // inside the workspace
	// escaped means the path is inside the workspace as written but leads
	// out of it through a symbolic link.
	escaped bool
	// special is a device every profile may use: /dev/null, /dev/stdout …
	special bool
	// network is bash's /dev/tcp or /dev/udp.
	network bool
	// home is in the sandbox's home directory, which holds nothing of the
	// host's: it is not looked up on the host, may be read and may not be
	// written (a start-up file written there would configure what runs
	// next).
	home bool
}

// maxLinks bounds the symbolic links followed for one path, as the kernel
// does (40).
const maxLinks = 40

// statCache remembers, for one check, what lstat said about each path it
// asked about: a script names the same directories again and again
// (src/a.go src/b.go, mkdir -p out && cp x out/), and a check looks at the
// file system as it is at one moment. A nil statCache remembers nothing.
type statCache map[string]statEntry

type statEntry struct {
	typ fs.FileMode
	ok  bool // the path exists
}

// lstat is lstatType through the cache: the type of p, and whether it
// exists.
func (s statCache) lstat(p string) (fs.FileMode, bool) {
	if e, hit := s[p]; hit {
		return e.typ, e.ok
	}
	typ, err := lstatType(p)
	if s != nil {
		s[p] = statEntry{typ: typ, ok: err == nil}
	}
	return typ, err == nil
}

// resolve resolves p, relative to cwd (a real directory inside the
// workspace), the way the kernel would: component by component, following
// every existing symbolic link, including one that points nowhere (writing
// through it creates its target), and treating ".." after a link as the
// parent of where the link leads. Components that do not exist are taken
// as written.
func (w *workspace) resolve(cwd, p string) resolved { return w.resolveWith(nil, nil, cwd, p) }

// resolveWith is resolve asking stats about each component, with links
// the links a script made (absolute path → target), which come first.
func (w *workspace) resolveWith(stats statCache, links map[string]string, cwd, p string) resolved {
	r := resolved{raw: p}
	if !filepath.IsAbs(p) {
		p = cwd + "/" + p
	}
	switch clean := filepath.Clean(p); {
	case isSpecialDevice(clean):
		r.special, r.abs, r.in = true, clean, true
		return r
	case strings.HasPrefix(clean, "/dev/tcp/") || strings.HasPrefix(clean, "/dev/udp/"):
		r.network, r.abs = true, clean
		return r
	case clean == w.home || under(clean, w.home):
		r.home, r.abs = true, clean
		return r
	}
	lexIn := w.within(filepath.Clean(p))

	// Start from the workspace's real path when the path is written under
	// it: that skips resolving the components above, which are known.
	cur, rest := "/", p
	for _, prefix := range [2]string{w.real, w.root} {
		if p == prefix {
			cur, rest = w.real, ""
			break
		}
		if under(p, prefix) {
			cur, rest = w.real, p[len(prefix)+1:]
			break
		}
	}
	hops := 0
	missing := false
	for rest != "" {
		var comp string
		comp, rest, _ = strings.Cut(rest, "/")
		switch comp {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := join(cur, comp)
		target, modelled := links[next]
		if missing && !modelled {
			cur = next
			continue
		}
		if !modelled {
			typ, ok := stats.lstat(next)
			if !ok {
				missing = true
				cur = next
				continue
			}
			if typ&fs.ModeSymlink == 0 {
				cur = next
				continue
			}
		}
		hops++
		var err error
		if !modelled {
			target, err = os.Readlink(next)
		}
		if err != nil || hops > maxLinks {
			// Unreadable or looping: say it leads nowhere we know, which
			// is outside.
			r.abs, r.escaped = next, lexIn
			return r
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		if rest == "" {
			rest = target
		} else {
			rest = target + "/" + rest
		}
	}
	r.abs = cur
	if rel, ok := w.relative(cur); ok {
		r.in, r.rel = true, rel
	} else {
		r.escaped = lexIn
	}
	return r
}

// isDir reports whether p is a directory itself, not a link to one.
func isDir(p string) bool {
	typ, err := lstatType(p)
	return err == nil && typ.IsDir()
}

func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

func (w *workspace) within(abs string) bool {
	return abs == w.real || under(abs, w.real) || abs == w.root || under(abs, w.root)
}

// under reports whether p is below dir: dir followed by a slash.
func under(p, dir string) bool {
	return len(p) > len(dir) && p[len(dir)] == '/' && p[:len(dir)] == dir
}

// relative returns abs relative to the workspace's real path, "." for the
// workspace itself.
func (w *workspace) relative(abs string) (string, bool) {
	if abs == w.real {
		return ".", true
	}
	if under(abs, w.real) {
		return abs[len(w.real)+1:], true
	}
	return "", false
}

func isSpecialDevice(p string) bool {
	switch p {
	case "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
		"/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/tty":
		return true
	}
	return strings.HasPrefix(p, "/dev/fd/")
}

// access is what a command does with a path.
type access uint8

const (
	accRead access = iota
	accWrite
)

func (a access) verb() string {
	if a == accWrite {
		return "writing"
	}
	return "reading"
}

// pathUse is one path a call touches.
type pathUse struct {
	acc access
	// tree means the whole tree under the path may be touched: rm -r, a
	// directory moved or deleted, find -delete.
	tree bool
	// follow means a tree is read through the symbolic links in it (grep
	// -R, cp -rL), which may lead out of the workspace.
	follow bool
	// entries means the path stands for every entry of the tree (find's
	// {}, a line of git ls-files), each of which the command opens,
	// following it if it is a link; recursive says the command also reads
	// into an entry that is a directory. noLinks and names narrow the
	// entries: none is a link (find -type f), or their names match every
	// one of names (find -name).
	entries, recursive, noLinks bool
	names                       []string
	// meta means the command changes only the path's metadata or removes
	// it (chmod, touch, rm, mkdir): what a program would read there stays
	// what it was.
	meta bool
}

// protected reports whether a path inside the workspace (slash-separated,
// relative) is CI/CD configuration, a git hook or repository internals,
// at any depth, so a repository cloned into a subdirectory is covered too.
func protected(rel string) bool {
	if rel == "." || rel == "" {
		return false
	}
	comps := strings.Split(rel, "/")
	for i, c := range comps {
		switch c {
		case ".git", ".circleci", ".buildkite", ".husky", ".woodpecker":
			return true
		case ".config":
			// $HOME is the workspace: git's user configuration.
			if i+1 < len(comps) && comps[i+1] == "git" {
				return true
			}
		case ".github":
			if i+1 < len(comps) {
				switch comps[i+1] {
				case "workflows", "actions", "CODEOWNERS":
					return true
				}
			}
		}
	}
	switch comps[len(comps)-1] {
	case ".gitlab-ci.yml", ".travis.yml", "Jenkinsfile", "azure-pipelines.yml", ".drone.yml",
		".woodpecker.yml", "bitbucket-pipelines.yml", "cloudbuild.yaml", "cloudbuild.yml",
		"appveyor.yml", ".pre-commit-config.yaml", "CODEOWNERS",
		// Start-up files read from $HOME, which is the workspace: git's
		// configuration runs programs (core.fsmonitor, aliases), and the
		// others configure shells and downloads.
		".gitconfig", ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".curlrc", ".wgetrc",
		".inputrc":
		return true
	}
	return false
}

// treeHasProtected probes a directory about to be changed as a whole for
// protected content, two levels deep: its entries and theirs. It reads two
// levels of directory listings and no more; the sandbox and the git
// history are the backstop for deeper trees.
func treeHasProtected(abs, rel string) (string, bool) {
	entries, err := readDirNames(abs)
	if err != nil {
		return "", false
	}
	for _, e := range entries {
		if protected(path.Join(rel, e.name)) {
			return path.Join(rel, e.name), true
		}
	}
	for _, e := range entries {
		if !e.dir {
			continue
		}
		sub, err := readDirNames(abs + "/" + e.name)
		if err != nil {
			continue
		}
		for _, s := range sub {
			if p := path.Join(rel, e.name, s.name); protected(p) || s.name == ".github" && subProtected(abs+"/"+e.name+"/.github") {
				return p, true
			}
		}
	}
	return "", false
}

// subProtected reports whether a .github directory holds workflows or
// actions.
func subProtected(dir string) bool {
	entries, err := readDirNames(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.name == "workflows" || e.name == "actions" || e.name == "CODEOWNERS" {
			return true
		}
	}
	return false
}

type dirEntry struct {
	name string
	dir  bool
}

// readDirNames lists at most 256 entries of dir, unsorted.
func readDirNames(dir string) ([]dirEntry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(256)
	if err != nil && len(entries) == 0 {
		return nil, err
	}
	out := make([]dirEntry, len(entries))
	for i, e := range entries {
		out[i] = dirEntry{name: e.Name(), dir: e.IsDir()}
	}
	return out, nil
}

// secretFile reports whether a file name looks like it holds credentials:
// reading one needs the secrets permission. The rule is the file tools' own
// (tools.SecretLooking), so every tool that reads holds the same line.
func secretFile(rel string) bool { return tools.SecretLooking(rel) }

// covers reports whether glob g matches p or a directory p is in. With tree,
// it also reports a glob that may match something under p, so that a change
// of the whole tree is caught.
func covers(g, p string, tree bool) bool {
	if doublestar.MatchUnvalidated(g, p) {
		return true
	}
	for dir := p; ; {
		i := strings.LastIndexByte(dir, '/')
		if i <= 0 {
			break
		}
		dir = dir[:i]
		if doublestar.MatchUnvalidated(g, dir) {
			return true
		}
	}
	if !tree {
		return false
	}
	// Could g match below p? Walk g's components along p's.
	if p == "." {
		return !strings.HasPrefix(g, "/")
	}
	gc := strings.Split(strings.TrimPrefix(g, "/"), "/")
	pc := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if strings.HasPrefix(g, "/") != strings.HasPrefix(p, "/") {
		return false
	}
	for i, c := range pc {
		if i >= len(gc) {
			return false
		}
		if gc[i] == "**" {
			return true
		}
		if ok, _ := doublestar.Match(gc[i], c); !ok {
			return false
		}
	}
	return len(gc) > len(pc)
}

// pathDenial is why a path may not be used, and the rule that says so.
type pathDenial struct {
	rule, reason string
}

// checkPath applies p's path rules and the built-in protections to one
// resolved path. grant adds the permissions an explicitly allowed command
// or tool brings for plain reading and writing. It returns nil when the use
// is allowed; outside reports a use outside the workspace a profile
// allowed (worth auditing).
func (p *Profile) checkPath(r resolved, u pathUse, grant perms) (d *pathDenial, outside bool) {
	switch {
	case r.special:
		return nil, false
	case r.network:
		if !p.perms.has(pNetwork) {
			return &pathDenial{rule: "path:network", reason: fmt.Sprintf("%q opens a network connection, and the profile has no network access", r.raw)}, false
		}
		return nil, false
	case r.home && u.acc == accWrite:
		return &pathDenial{rule: "path:home", reason: fmt.Sprintf("writing %q is not allowed: it is in the home directory, where a file configures the programs that run after it", r.raw)}, false
	case r.home:
		return nil, false
	case r.escaped:
		return &pathDenial{rule: "path:symlink-escape", reason: fmt.Sprintf("%s %q is not allowed: it leads outside the workspace through a symbolic link (to %s)", u.acc.verb(), r.raw, r.abs)}, false
	}
	rule := p.Paths.Read
	field := "paths.read"
	if u.acc == accWrite {
		rule, field = p.Paths.Write, "paths.write"
	}
	target := r.rel
	if !r.in {
		target = r.abs
	}
	for _, g := range rule.Deny {
		if strings.HasPrefix(g, "/") == !r.in && covers(g, target, u.tree) {
			return &pathDenial{rule: field + ".deny:" + g, reason: fmt.Sprintf("%s %q is denied by %s.deny %q", u.acc.verb(), r.raw, field, g)}, false
		}
	}
	if !r.in {
		for _, g := range rule.Allow {
			if strings.HasPrefix(g, "/") && covers(g, r.abs, false) {
				return nil, true
			}
		}
		return &pathDenial{rule: "path:outside-workspace", reason: fmt.Sprintf("%s %q is not allowed: it is outside the workspace", u.acc.verb(), r.raw)}, false
	}
	if u.acc == accWrite {
		if protected(r.rel) && !p.perms.has(pCI) {
			return &pathDenial{rule: "path:ci", reason: fmt.Sprintf("writing %q is not allowed: CI/CD config, git hooks and repository internals need the ci permission (maintainer)", r.raw)}, false
		}
		if u.tree && !p.perms.has(pCI) {
			if found, ok := treeHasProtected(r.abs, r.rel); ok {
				return &pathDenial{rule: "path:ci", reason: fmt.Sprintf("changing all of %q is not allowed: it holds %s, and CI/CD config, git hooks and repository internals need the ci permission (maintainer)", r.raw, found)}, false
			}
		}
	} else if secretFile(r.rel) && !p.perms.has(pSecrets) {
		return &pathDenial{rule: "path:secrets", reason: fmt.Sprintf("reading %q is not allowed: it looks like a secret, which needs the secrets permission", r.raw)}, false
	}
	relAllow := p.relRead
	if u.acc == accWrite {
		relAllow = p.relWrite
	}
	if len(relAllow) > 0 {
		for _, g := range relAllow {
			if covers(g, r.rel, false) {
				return nil, false
			}
		}
		return &pathDenial{rule: field + ".allow", reason: fmt.Sprintf("%s %q is not allowed: it matches none of %s.allow", u.acc.verb(), r.raw, field)}, false
	}
	need, name := pRead, PermRead
	if u.acc == accWrite {
		need, name = pWrite, PermWrite
	}
	if !(p.perms | grant).has(need) {
		return &pathDenial{rule: "permission:" + string(name), reason: fmt.Sprintf("%s %q is not allowed (needs the %s permission)", u.acc.verb(), r.raw, name)}, false
	}
	return nil, false
}

// sandboxProtected are the paths the sandbox binds read-only for a profile
// without the ci permission, relative to a repository's top: git hooks and
// CI/CD configuration. .git itself stays writable, or git could not commit;
// its config does not, or a core.hooksPath or core.fsmonitor set there would
// run code in the next git command.
var sandboxProtected = []string{
	".git/hooks", ".git/config", ".github/workflows", ".github/actions", ".gitlab-ci.yml", ".circleci", ".travis.yml",
	"Jenkinsfile", "azure-pipelines.yml", ".buildkite", ".drone.yml", ".husky", ".pre-commit-config.yaml",
	".gitconfig", ".config/git",
}

// SandboxReadOnly returns the existing paths inside workspace that the
// sandbox should bind read-only for an agent with profile: hooks and CI/CD
// configuration at the workspace's top and in the repositories one level
// down, when the profile lacks the ci permission. It is the sandbox's
// backstop for what the policy cannot see, such as a build that rewrites a
// workflow.
func (e *Engine) SandboxReadOnly(profile, workspace string) []string {
	p, ok := e.profiles[profile]
	if ok && p.perms.has(pCI) {
		return nil
	}
	return e.protectedPaths(workspace)
}

// protectedPaths returns the existing paths of sandboxProtected at the
// workspace's top and in the repositories one level down.
func (e *Engine) protectedPaths(workspace string) []string {
	ws, err := e.workspace(workspace)
	if err != nil {
		return nil
	}
	var out []string
	add := func(dir string) {
		for _, rel := range sandboxProtected {
			if _, err := os.Lstat(dir + "/" + rel); err == nil {
				out = append(out, dir+"/"+rel)
			}
		}
	}
	add(ws.real)
	entries, _ := readDirNames(ws.real)
	for _, d := range entries {
		if d.dir && d.name != ".git" {
			if _, err := os.Lstat(ws.real + "/" + d.name + "/.git"); err == nil {
				add(ws.real + "/" + d.name)
			}
		}
	}
	return out
}

// maxSecretWalk bounds the entries secretFiles looks at.
const maxSecretWalk = 50_000

// secretFiles returns the untracked secret-looking files of the workspace
// (tools.SecretLooking: .env, .netrc, private keys …), which the sandbox
// shows empty to rights without the secrets permission, so that no command
// reads one by a route the policy lets through whole (grep -r, find -exec
// cat, a build that prints its environment file). It walks the workspace
// through the listings the policy keeps, leaving out .git and
// node_modules, and at most maxSecretWalk entries. A file its repository
// tracks is left as it is: its text is in the repository's history for
// git to show anyway, and the tests or a commit of a contributor would
// find it emptied (a test certificate, a committed .npmrc).
func (e *Engine) secretFiles(workspace string) []string {
	ws, err := e.workspace(workspace)
	if err != nil {
		return nil
	}
	type repo struct {
		top     string
		tracked map[string]bool
		known   bool
	}
	repos := map[string]*repo{}
	repoOf := func(dir string) *repo {
		for d := dir; ; d = filepath.Dir(d) {
			if r, ok := repos[d]; ok {
				return r
			}
			if _, err := os.Lstat(d + "/.git"); err == nil || d == ws.real || !strings.HasPrefix(d, ws.real+"/") {
				r := &repo{top: d}
				r.tracked, r.known = trackedIn(d)
				repos[d] = r
				return r
			}
		}
	}
	var out []string
	add := func(p string) {
		r := repoOf(filepath.Dir(p))
		rel, err := filepath.Rel(r.top, p)
		if r.known && err == nil && !r.tracked[filepath.ToSlash(rel)] {
			out = append(out, p)
		}
	}
	n := 0
	dirs := []string{ws.real}
	for len(dirs) > 0 && n <= maxSecretWalk {
		dir := dirs[len(dirs)-1]
		dirs = dirs[:len(dirs)-1]
		got, ok := ws.dirs.list(dir)
		if !ok {
			continue
		}
		n += len(got.entries)
		for _, en := range got.entries {
			p := dir + "/" + en.name
			switch {
			case en.typ.IsDir():
				if en.name != ".git" && en.name != "node_modules" {
					dirs = append(dirs, p)
				}
			case !tools.SecretLooking(strings.TrimPrefix(p, ws.real+"/")):
			case en.typ.IsRegular():
				add(p)
			case en.typ&fs.ModeSymlink != 0:
				// The file a secret-looking name leads to, when it is in
				// the workspace: bubblewrap binds over what a path leads
				// to.
				if real, err := filepath.EvalSymlinks(p); err == nil && strings.HasPrefix(real, ws.real+"/") {
					if fi, err := os.Stat(real); err == nil && fi.Mode().IsRegular() {
						add(real)
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// maxLinkWalk bounds the entries looked at for links out of a tree a
// command reads through its links.
const maxLinkWalk = 20_000

// linkOut looks through the tree at abs (a real directory, or a file) for a
// symbolic link that leads out of the workspace: any, for a command that
// reads through links (u.follow) or writes entries; for a command that
// opens each entry (u.entries), one to a file outside, or to a directory
// when it reads into directories. tooBig reports a tree larger than the
// walk looks at.
func (w *workspace) linkOut(abs string, u pathUse) (link string, tooBig bool) {
	if u.entries && u.noLinks && !u.follow {
		return "", false
	}
	anyLink := u.follow || u.acc == accWrite || u.recursive
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
			return "", true
		}
		for _, e := range got.entries {
			switch {
			case e.typ&fs.ModeSymlink != 0:
				if !u.follow && !namesMatch(u.names, e.name) {
					continue
				}
				r := w.resolve(dir, e.name)
				if r.in || r.special {
					continue
				}
				if !anyLink {
					// Opened as a file: a directory or nothing there
					// reads nothing.
					fi, err := os.Stat(r.abs)
					if err != nil || fi.IsDir() {
						continue
					}
				}
				return dir + "/" + e.name, false
			case e.typ.IsDir():
				dirs = append(dirs, dir+"/"+e.name)
			}
		}
	}
	return "", false
}

// namesMatch reports whether name matches every pattern of names (find's
// -name tests, which all must hold).
func namesMatch(names []string, name string) bool {
	for _, p := range names {
		if ok, _ := filepath.Match(p, name); !ok {
			return false
		}
	}
	return true
}
