package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/switchyard/switchyard/internal/filekind"
)

// Workspaces hands out one directory per session key under Root
// (<data_dir>/workspaces), so every run of a thread works on the same files
// and threads never see each other's.
type Workspaces struct {
	Root string
}

// Dir returns the absolute workspace directory of sessionKey, creating it.
func (w Workspaces) Dir(sessionKey string) (string, error) {
	if w.Root == "" {
		return "", errors.New("workspaces: no root directory configured")
	}
	root, err := filepath.Abs(w.Root)
	if err != nil {
		return "", fmt.Errorf("workspaces: %w", err)
	}
	dir := filepath.Join(root, WorkspaceName(sessionKey))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("create workspace of %s: %w", sessionKey, err)
	}
	return dir, nil
}

// WorkspaceName turns a session key into a directory name: the key's safe
// characters, readable in a listing, then a hash of the whole key, because
// sanitising alone maps "github:a/b#1" and "github:a_b#1" to one name.
func WorkspaceName(sessionKey string) string {
	var b strings.Builder
	for _, r := range sessionKey {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 80 {
			break
		}
	}
	name := strings.Trim(b.String(), "_")
	if name == "" {
		name = "session"
	}
	sum := sha256.Sum256([]byte(sessionKey))
	return name + "-" + hex.EncodeToString(sum[:6])
}

// WorkspacePath is a path found to lie inside a workspace.
type WorkspacePath struct {
	// Rel is the path relative to the workspace, slash-separated, as
	// os.Root takes it; "." for the workspace itself.
	Rel string
	// Abs is the path under the workspace's real directory.
	Abs string
}

// Resolve checks that p, a path the model gave, names something inside
// workspace: not absolute, not out through "..", not through a symbolic
// link that leads out or nowhere. It is the one confinement every tool that
// takes a workspace path uses. The lexical checks give the model a clear
// refusal (a *RefusedError); the link check catches a link that points out;
// opening through os.Root (see the file tools) then enforces the same at
// the system call, which also covers a link swapped in between. "" is the
// workspace itself.
func Resolve(workspace, p string) (WorkspacePath, error) {
	rel, real, err := resolve(workspace, p)
	if err != nil {
		return WorkspacePath{}, err
	}
	return WorkspacePath{Rel: rel, Abs: filepath.Join(real, filepath.FromSlash(rel))}, nil
}

// resolve is Resolve returning the relative path and the workspace's real
// directory.
func resolve(workspace, p string) (rel, realRoot string, err error) {
	if workspace == "" {
		return "", "", errors.New("this run has no workspace")
	}
	if p == "" {
		p = "."
	}
	if strings.ContainsRune(p, 0) {
		return "", "", Refuse("path %q holds a NUL character, which no file name can", p)
	}
	if filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) {
		return "", "", Refuse("path %q is absolute; use a path relative to the workspace", p)
	}
	clean := filepath.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", "", Refuse("path %q is outside the workspace", p)
	}
	realRoot, err = filepath.EvalSymlinks(workspace)
	if err != nil {
		return "", "", fmt.Errorf("workspace: %w", err)
	}
	// Resolve the longest prefix that exists: a file about to be written
	// does not exist yet, but its parent directory might be a link.
	existing := filepath.Join(realRoot, clean)
	for {
		if _, err := os.Lstat(existing); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		existing = parent
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// A dangling link: where it points is outside or nowhere.
			return "", "", Refuse("path %q goes through a symbolic link that leads nowhere inside the workspace", p)
		}
		return "", "", err
	}
	if real != realRoot && !strings.HasPrefix(real, realRoot+string(filepath.Separator)) {
		return "", "", Refuse("path %q leads outside the workspace through a symbolic link", p)
	}
	return filepath.ToSlash(clean), realRoot, nil
}

// checkOpened refuses a file opened in the workspace that has another
// name: a hard link may be the same file as one outside the workspace or as
// a secret inside it, and nothing in the workspace says which. p is the path
// as the model gave it; info describes the open file, so a link swapped in
// after the path was checked is seen.
func checkOpened(p string, info fs.FileInfo) error {
	if !info.Mode().IsRegular() && !info.IsDir() {
		return Refuse("path %q is not a regular file (a %s)", p, filekind.Of(info.Mode()))
	}
	if info.Mode().IsRegular() && linkCount(info) > 1 {
		return Refuse("path %q is a file with %d hard links, which may be a file outside the workspace or a secret under another name", p, linkCount(info))
	}
	return nil
}

// openFile opens rel in root without waiting: opening a named pipe or a
// device for reading or writing may block until something else opens its
// other end, and a file tool must answer. checkOpened then refuses
// anything but a regular file or a directory.
func openFile(root *os.Root, rel string, flag int, perm fs.FileMode) (*os.File, error) {
	return root.OpenFile(rel, flag|openNonblock, perm)
}

// openChecked opens rel in root for reading, without waiting (openFile),
// and refuses the file it opened when checkOpened does; p is the path as
// the model gave it. The caller closes the file.
func openChecked(root *os.Root, p, rel string) (*os.File, fs.FileInfo, error) {
	f, err := openFile(root, rel, os.O_RDONLY, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err == nil {
		err = checkOpened(p, st)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// linkedRel is where rel, a path resolve accepted, leads inside the
// workspace once its links are followed, slash-separated: a rule on a
// file's place (.aws/credentials) holds for the name a link gives it too.
func linkedRel(workspace, rel string) (string, error) {
	real, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	target, err := filepath.EvalSymlinks(filepath.Join(real, filepath.FromSlash(rel)))
	if err != nil {
		return "", err
	}
	out, err := filepath.Rel(real, target)
	if err != nil {
		return "", err
	}
	return filepath.ToSlash(out), nil
}

// openRoot opens the workspace for confined access.
func openRoot(workspace string) (*os.Root, error) {
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	return root, nil
}

// openIn resolves p inside the workspace and opens the workspace as an
// os.Root, so the path is checked once for the model's sake and then
// enforced by the system call. The caller closes the root.
func openIn(workspace, p string) (*os.Root, string, error) {
	rel, _, err := resolve(workspace, p)
	if err != nil {
		return nil, "", err
	}
	root, err := openRoot(workspace)
	if err != nil {
		return nil, "", err
	}
	return root, rel, nil
}
