package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzResolve checks the workspace confinement: whatever the model sends as
// a path, an accepted one names something inside the workspace, also after
// following the workspace's symbolic links.
func FuzzResolve(f *testing.F) {
	for _, seed := range []string{
		"", ".", "main.go", "a/b/../c", "../x", "a/../../x", "/etc/passwd", `\\server\share`,
		"out/secret", "out", "in/x", "./out/../in", "a//b", "..\\x", "\x00", "dangling/x",
	} {
		f.Add(seed)
	}
	ws := f.TempDir()
	outside := f.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "in"), 0o750); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "out")); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink("in", filepath.Join(ws, "inner")); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "gone"), filepath.Join(ws, "dangling")); err != nil {
		f.Fatal(err)
	}
	realWS, err := filepath.EvalSymlinks(ws)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, p string) {
		wp, err := Resolve(ws, p)
		if err != nil {
			return
		}
		rel := wp.Rel
		if strings.HasPrefix(rel, "/") || rel == ".." || strings.HasPrefix(rel, "../") {
			t.Fatalf("Resolve(%q) = %q: leaves the workspace", p, rel)
		}
		full := filepath.Join(realWS, filepath.FromSlash(rel))
		if wp.Abs != full {
			t.Fatalf("Resolve(%q): Abs %s, want %s", p, wp.Abs, full)
		}
		if full != realWS && !strings.HasPrefix(full, realWS+string(filepath.Separator)) {
			t.Fatalf("Resolve(%q) = %q: joins to %s outside %s", p, rel, full, realWS)
		}
		first, _, _ := strings.Cut(rel, "/")
		if first == "out" || first == "dangling" {
			t.Fatalf("Resolve(%q) = %q: goes through a link out of the workspace", p, rel)
		}
	})
}
