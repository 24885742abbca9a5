package install

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/switchyard/switchyard/internal/filekind"
	"github.com/switchyard/switchyard/skills"
)

// Limits bound what one package may hold. Zero fields take the defaults.
type Limits struct {
	// MaxBytes bounds the package's files together, uncompressed; default
	// 50 MiB.
	MaxBytes int64
	// MaxFiles bounds its files and directories; default 5,000.
	MaxFiles int
	// MaxDownload bounds an archive as downloaded; default MaxBytes.
	MaxDownload int64
}

// Default limits.
const (
	DefaultMaxBytes = 50 << 20
	DefaultMaxFiles = 5000
	maxPathLen      = 1024
	maxPathDepth    = 64
	// entryOverhead is what an archive may spend on one entry besides its
	// file's bytes: its header, a PAX header for a long name, padding.
	entryOverhead = 4 << 10
)

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxDownload <= 0 {
		l.MaxDownload = l.MaxBytes
	}
	return l
}

// maxEntries bounds an archive's entries, whatever they are: a directory
// named again and archive-wide metadata count too, though they make no
// file. Twice the files allowed leaves room for archives that name each
// directory again before its files.
func (l Limits) maxEntries() int { return 2 * l.MaxFiles }

// maxStream bounds what an archive unpacks to as a stream (headers,
// metadata and files), so one that is mostly metadata ends as soon as
// one that is mostly files.
func (l Limits) maxStream() int64 {
	return l.MaxBytes + int64(l.maxEntries())*entryOverhead
}

// refuse refuses a package for what it holds or how it is built: a path
// leaving the package, a link, a device, a limit passed. Nothing of it is
// kept.
func refuse(format string, args ...any) error {
	return &skills.Error{Kind: skills.ErrInvalid, Msg: fmt.Sprintf(format, args...)}
}

// tree writes a package's files into a directory, the one place every
// source's entries pass: names are checked (no absolute paths, no "..",
// nothing twice, not even in another case), only directories and regular
// files are made, with plain permissions (no setuid, setgid or sticky
// bits), within the limits. Writes go through os.Root, so even a name the
// checks missed cannot leave the directory.
type tree struct {
	root   *os.Root
	limits Limits
	bytes  int64
	count  int
	// entries counts an archive's entries, every one.
	entries int
	seen    map[string]string // lower-case path → the path as first written
	kinds   map[string]bool   // path → is a directory
	origin  string            // what the entries come from, for messages
}

func newTree(dir string, limits Limits, origin string) (*tree, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &tree{root: root, limits: limits.withDefaults(), seen: map[string]string{}, kinds: map[string]bool{}, origin: origin}, nil
}

func (t *tree) close() error { return t.root.Close() }

// clean checks an entry's name and returns it cleaned, '/'-separated and
// relative; "" for the top directory itself.
func (t *tree) clean(name string) (string, error) {
	raw := name
	if strings.ContainsAny(name, "\x00\\") {
		return "", refuse("%s: entry %q: a name with a backslash or NUL byte", t.origin, raw)
	}
	if strings.ContainsFunc(name, unicode.IsControl) || !utf8.ValidString(name) {
		// A newline, a carriage return or an escape in a name would make
		// every message naming the file say something else; a package's
		// files are read as an fs.FS, whose names are UTF-8.
		return "", refuse("%s: entry %q: a name with a control character or bytes that are not UTF-8", t.origin, raw)
	}
	if strings.HasPrefix(name, "/") || len(name) > 1 && name[1] == ':' {
		return "", refuse("%s: entry %q is an absolute path", t.origin, raw)
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", refuse("%s: entry %q leaves the package (..)", t.origin, raw)
		}
	}
	name = path.Clean(strings.TrimPrefix(name, "./"))
	if name == "." {
		return "", nil
	}
	if len(name) > maxPathLen || strings.Count(name, "/") >= maxPathDepth {
		return "", refuse("%s: entry %q: the path is too long or too deep", t.origin, raw)
	}
	return name, nil
}

// claim records a path, refusing one seen before in any case, and one
// beneath a file.
func (t *tree) claim(name string, dir bool) error {
	lower := strings.ToLower(name)
	if prev, dup := t.seen[lower]; dup {
		if prev == name && dir && t.kinds[name] {
			return nil // a directory named again, as tar and zip may
		}
		if prev == name {
			return refuse("%s: %s appears twice", t.origin, name)
		}
		return refuse("%s: %s and %s differ only in case", t.origin, prev, name)
	}
	for p := path.Dir(name); p != "."; p = path.Dir(p) {
		if isDir, ok := t.kinds[p]; ok && !isDir {
			return refuse("%s: %s is beneath %s, which is a file", t.origin, name, p)
		}
	}
	t.count++
	if t.count > t.limits.MaxFiles {
		return refuse("%s: more than %d files and directories", t.origin, t.limits.MaxFiles)
	}
	t.seen[lower] = name
	t.kinds[name] = dir
	return nil
}

// entry counts one entry of an archive against Limits.maxEntries.
func (t *tree) entry() error {
	t.entries++
	if max := t.limits.maxEntries(); t.entries > max {
		return refuse("%s: more than %d entries", t.origin, max)
	}
	return nil
}

// streamLimit ends a stream that passes Limits.maxStream with a refusal.
type streamLimit struct {
	r    io.Reader
	left int64
	err  error // the refusal, once the limit is passed
	msg  string
}

func (s *streamLimit) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if int64(len(p)) > s.left+1 {
		p = p[:s.left+1]
	}
	n, err := s.r.Read(p)
	s.left -= int64(n)
	if s.left < 0 {
		s.err = refuse("%s", s.msg)
		return 0, s.err
	}
	return n, err
}

// dir makes a directory and its parents.
func (t *tree) dir(name string) error {
	name, err := t.clean(name)
	if err != nil || name == "" {
		return err
	}
	if err := t.parents(name); err != nil {
		return err
	}
	if err := t.claim(name, true); err != nil {
		return err
	}
	if err := t.root.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s: make %s: %w", t.origin, name, err)
	}
	return nil
}

// parents makes the directories above name that no entry named.
func (t *tree) parents(name string) error {
	parent := path.Dir(name)
	if parent == "." {
		return nil
	}
	if _, ok := t.kinds[parent]; ok {
		return nil
	}
	return t.dir(parent)
}

// file writes a regular file of the given mode from r, which holds size
// bytes (-1 when not known in advance).
func (t *tree) file(name string, mode fs.FileMode, size int64, r io.Reader) error {
	name, err := t.clean(name)
	if err != nil {
		return err
	}
	if name == "" {
		return refuse("%s: a file without a name", t.origin)
	}
	if mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
		return refuse("%s: %s has the setuid, setgid or sticky bit", t.origin, name)
	}
	if err := t.parents(name); err != nil {
		return err
	}
	if err := t.claim(name, false); err != nil {
		return err
	}
	left := t.limits.MaxBytes - t.bytes
	if size > left {
		return refuse("%s: %s would pass the limit of %d bytes for a package", t.origin, name, t.limits.MaxBytes)
	}
	perm := fs.FileMode(0o644)
	if mode&0o111 != 0 {
		perm = 0o755
	}
	f, err := t.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("%s: write %s: %w", t.origin, name, err)
	}
	n, err := io.Copy(f, io.LimitReader(r, left+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: write %s: %w", t.origin, name, err)
	}
	if n > left {
		return refuse("%s: %s would pass the limit of %d bytes for a package", t.origin, name, t.limits.MaxBytes)
	}
	t.bytes += n
	// The umask may have taken bits off; a package's files are as said.
	return t.root.Chmod(name, perm)
}

// special refuses an entry that is neither a directory nor a regular file.
func (t *tree) special(name, kind string) error {
	return refuse("%s: %s is a %s; a package holds only directories and regular files", t.origin, name, kind)
}

// untar writes a tar stream's entries.
func (t *tree) untar(r io.Reader) error {
	max := t.limits.maxStream()
	limit := &streamLimit{r: r, left: max, msg: fmt.Sprintf("%s: the archive unpacks to more than %d bytes", t.origin, max)}
	tr := tar.NewReader(limit)
	for {
		hdr, err := tr.Next()
		if limit.err != nil {
			return limit.err
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return refuse("%s: not a readable tar archive: %v", t.origin, err)
		}
		if err := t.entry(); err != nil {
			return err
		}
		mode := hdr.FileInfo().Mode()
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = t.dir(hdr.Name)
		case tar.TypeReg:
			err = t.file(hdr.Name, mode, hdr.Size, tr)
		case tar.TypeXGlobalHeader:
			continue // pax metadata for the whole archive, as git archive writes
		case tar.TypeSymlink:
			err = t.special(hdr.Name, "symbolic link (to "+hdr.Linkname+")")
		case tar.TypeLink:
			err = t.special(hdr.Name, "hard link (to "+hdr.Linkname+")")
		case tar.TypeChar, tar.TypeBlock:
			err = t.special(hdr.Name, "device")
		case tar.TypeFifo:
			err = t.special(hdr.Name, "named pipe")
		default:
			err = t.special(hdr.Name, fmt.Sprintf("tar entry of type %q", hdr.Typeflag))
		}
		if limit.err != nil {
			return limit.err
		}
		if err != nil {
			return err
		}
	}
}

// unzip writes a zip archive's entries.
func (t *tree) unzip(r io.ReaderAt, size int64) error {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return refuse("%s: not a readable zip archive: %v", t.origin, err)
	}
	if max := t.limits.maxEntries(); len(zr.File) > max {
		return refuse("%s: more than %d entries", t.origin, max)
	}
	for _, f := range zr.File {
		mode := f.Mode()
		switch {
		case mode.IsDir():
			err = t.dir(f.Name)
		case mode.IsRegular():
			var rc io.ReadCloser
			if rc, err = f.Open(); err != nil {
				return refuse("%s: %s: %v", t.origin, f.Name, err)
			}
			err = t.file(f.Name, mode, -1, rc)
			rc.Close()
		default:
			err = t.special(f.Name, filekind.Of(mode))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// copyDir writes the directories and regular files of fsys, leaving out
// version control directories (.git). A file of more than one name (a hard
// link) is refused as in an archive: its other name may be anywhere on the
// machine.
func (t *tree) copyDir(fsys fs.FS) error {
	return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if _, err := t.clean(p); err != nil {
			return err // before opening it: fs.FS refuses a name that is not UTF-8 its own way
		}
		if d.IsDir() && d.Name() == ".git" {
			return fs.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			return t.dir(p)
		case mode.IsRegular():
			f, err := fsys.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			// What was opened is what is checked: the file may have
			// changed since the directory was read.
			if info, err = f.Stat(); err != nil {
				return err
			}
			if !info.Mode().IsRegular() {
				return t.special(p, filekind.Of(info.Mode()))
			}
			if n := linkCount(info); n > 1 {
				return t.special(p, fmt.Sprintf("hard link (a file of %d names)", n))
			}
			return t.file(p, info.Mode(), info.Size(), f)
		default:
			return t.special(p, filekind.Of(mode))
		}
	})
}

// extract writes an archive file: a gzip-compressed tar, a plain tar or a
// zip, told apart by their first bytes.
func (t *tree) extract(f *os.File) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	head := make([]byte, 4)
	n, _ := io.ReadFull(f, head)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	switch {
	case n >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		zr, err := gzip.NewReader(f)
		if err != nil {
			return refuse("%s: not a readable gzip file: %v", t.origin, err)
		}
		defer zr.Close()
		return t.untar(zr)
	case n == 4 && bytes.Equal(head, []byte("PK\x03\x04")):
		return t.unzip(f, info.Size())
	default:
		return t.untar(f)
	}
}
