// Package install fetches packages and puts them into effect: from a
// directory, a git repository (git+<url>[#ref]), the npm registry
// (npm:<name>[@range]) or an archive over https with its sha256. Every
// source's files pass the same checks on their way into a staging
// directory beside the packages; the manifest and every file it names are
// checked there; only then is the package renamed into place and recorded,
// and nothing is left behind when anything fails.
package install

import (
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
)

// Kind is where a package comes from.
type Kind string

// Source kinds.
const (
	KindDir     Kind = "dir"
	KindGit     Kind = "git"
	KindNPM     Kind = "npm"
	KindArchive Kind = "archive"
)

// Source is a parsed SOURCE of `switchyard skills install`.
type Source struct {
	Kind Kind
	// Raw is the source as given.
	Raw string
	// Path is a directory's absolute path.
	Path string
	// URL is a git repository's or an archive's URL.
	URL string
	// Ref is the git tag, branch or commit to install; "" means the
	// repository's default branch.
	Ref string
	// Name and Range are an npm package's name and version range ("" means
	// the latest).
	Name, Range string
	// SHA256 is the archive's expected digest, lower-case hex.
	SHA256 string
}

var npmNameRe = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$`)

// ParseSource reads a source: git+<url>[#ref], npm:<name>[@range], an
// https:// archive (sha256 required; http:// only to a loopback address),
// or a directory (relative to the current directory). sha256 belongs to
// archives alone.
func ParseSource(raw, sha256 string) (Source, error) {
	s := Source{Raw: raw}
	bad := func(format string, args ...any) (Source, error) {
		return Source{}, fmt.Errorf("source %q: %s", raw, fmt.Sprintf(format, args...))
	}
	switch {
	case strings.TrimSpace(raw) == "":
		return Source{}, fmt.Errorf("no source: give a directory, git+<url>[#ref], npm:<name>[@range] or an https:// archive")
	case strings.HasPrefix(raw, "git+"):
		s.Kind = KindGit
		s.URL, s.Ref, _ = strings.Cut(strings.TrimPrefix(raw, "git+"), "#")
		if s.URL == "" || strings.HasPrefix(s.URL, "-") {
			return bad("want git+<url>[#ref], such as git+https://github.com/acme/kit.git#v1.2.0")
		}
		if strings.Contains(raw, "#") && !refRe.MatchString(s.Ref) || strings.Contains(s.Ref, "..") {
			return bad("%q is not a tag, branch or commit", s.Ref)
		}
		if u, err := url.Parse(s.URL); err == nil && u.User != nil && u.Scheme != "ssh" {
			return bad("credentials do not belong in the URL; let git's credential helper give them")
		} else if err == nil && u.Scheme != "" {
			switch u.Scheme {
			case "https", "http", "ssh", "git", "file":
			default:
				return bad("git over %s is not supported: use https, ssh, git or file", u.Scheme)
			}
		}
		if localPath(s.URL) {
			// git would read a relative path from the directory it runs
			// in, which is the install's own: it is the one given here.
			abs, err := filepath.Abs(s.URL)
			if err != nil {
				return bad("%v", err)
			}
			s.URL = abs
		}
	case strings.HasPrefix(raw, "npm:"):
		s.Kind = KindNPM
		spec := strings.TrimPrefix(raw, "npm:")
		at := strings.LastIndex(spec, "@")
		if at > 0 {
			s.Name, s.Range = spec[:at], spec[at+1:]
		} else {
			s.Name = spec
		}
		if !npmNameRe.MatchString(s.Name) {
			return bad("%q is not an npm package name", s.Name)
		}
		if strings.ContainsAny(s.Range, "\n\r") || strings.HasPrefix(s.Range, "-") || at > 0 && strings.TrimSpace(s.Range) == "" {
			return bad("%q is not a version range", s.Range)
		}
	case strings.HasPrefix(raw, "https://"), strings.HasPrefix(raw, "http://"):
		s.Kind, s.URL = KindArchive, raw
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return bad("not a URL")
		}
		if u.Scheme == "http" && !loopback(u.Hostname()) {
			return bad("http:// is allowed only to this machine (localhost, 127.0.0.1, ::1); use https://")
		}
		if u.User != nil {
			return bad("credentials do not belong in the URL")
		}
		if sha256 == "" {
			return bad("an archive needs --sha256 with the SHA-256 of the file, so what is installed is what was meant")
		}
		sum, err := hex.DecodeString(strings.ToLower(strings.TrimPrefix(sha256, "sha256:")))
		if err != nil || len(sum) != 32 {
			return bad("--sha256 %q is not a SHA-256 (64 hex digits)", sha256)
		}
		s.SHA256 = hex.EncodeToString(sum)
		return s, nil
	case strings.Contains(raw, "://"):
		return bad("unknown kind of source: give a directory, git+<url>[#ref], npm:<name>[@range] or an https:// archive")
	default:
		s.Kind = KindDir
		abs, err := filepath.Abs(raw)
		if err != nil {
			return bad("%v", err)
		}
		s.Path = abs
	}
	if sha256 != "" {
		return bad("--sha256 is for archives; a %s source is checked by its own means", s.Kind)
	}
	return s, nil
}

// localPath reports whether a git URL is a path on this machine, as git
// reads one: no scheme, and no colon before the first slash (host:path is
// ssh).
func localPath(u string) bool {
	if strings.Contains(u, "://") {
		return false
	}
	colon, slash := strings.IndexByte(u, ':'), strings.IndexByte(u, '/')
	return colon < 0 || slash >= 0 && slash < colon
}

// refRe is a tag, branch or commit as git spells them, never an option.
var refRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._/+-]*$`)

// loopback reports whether host is this machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// String gives the source as the lock records it.
func (s Source) String() string {
	switch s.Kind {
	case KindDir:
		return s.Path
	case KindGit:
		if s.Ref != "" {
			return "git+" + s.URL + "#" + s.Ref
		}
		return "git+" + s.URL
	case KindNPM:
		if s.Range != "" {
			return "npm:" + s.Name + "@" + s.Range
		}
		return "npm:" + s.Name
	}
	return s.URL
}
