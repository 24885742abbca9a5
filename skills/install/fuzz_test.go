package install

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/skills"
)

func FuzzParseSource(f *testing.F) {
	for _, s := range []string{"git+https://x/y.git#v1", "npm:@a/b@^1", "https://h/x.tgz", "./dir", "git+--x", "npm:", "http://127.0.0.1/x"} {
		f.Add(s, "")
		f.Add(s, strings.Repeat("a", 64))
	}
	f.Fuzz(func(t *testing.T, raw, sum string) {
		s, err := ParseSource(raw, sum)
		if err != nil {
			return
		}
		switch s.Kind {
		case KindGit:
			require.False(t, strings.HasPrefix(s.URL, "-"), "a URL is never an option")
			require.False(t, strings.HasPrefix(s.Ref, "-"), "a ref is never an option")
		case KindNPM:
			require.False(t, strings.HasPrefix(s.Range, "-"))
		case KindArchive:
			require.Len(t, s.SHA256, 64)
			require.True(t, strings.HasPrefix(s.URL, "https://") || strings.HasPrefix(s.URL, "http://"))
		case KindDir:
			require.True(t, filepath.IsAbs(s.Path))
		}
	})
}

// FuzzExtract feeds archives to the tree: whatever they hold, nothing is
// written outside it, and what is written is directories and regular files
// with plain permissions.
func FuzzExtract(f *testing.F) {
	tarOf := func(hdrs ...*tar.Header) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, h := range hdrs {
			_ = tw.WriteHeader(h)
			if h.Typeflag == tar.TypeReg {
				_, _ = tw.Write(make([]byte, h.Size))
			}
		}
		_ = tw.Close()
		return buf.Bytes()
	}
	f.Add(tarOf(&tar.Header{Name: "a/b.txt", Typeflag: tar.TypeReg, Size: 3, Mode: 0o644}))
	f.Add(tarOf(&tar.Header{Name: "../x", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}))
	f.Add(tarOf(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc"}, &tar.Header{Name: "l/x", Typeflag: tar.TypeReg, Size: 1}))
	f.Add(tarOf(&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o7777}, &tar.Header{Name: "d/s", Typeflag: tar.TypeReg, Mode: 0o4755}))
	f.Add([]byte("PK\x03\x04garbage"))
	parent := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := filepath.Join(parent, "tree")
		require.NoError(t, os.RemoveAll(dir))
		tr, err := newTree(dir, Limits{MaxBytes: 1 << 16, MaxFiles: 64}, "fuzz")
		require.NoError(t, err)
		archive := filepath.Join(parent, "archive")
		require.NoError(t, os.WriteFile(archive, data, 0o600))
		af, err := os.Open(archive)
		require.NoError(t, err)
		_ = tr.extract(af)
		af.Close()
		tr.close()
		entries, err := os.ReadDir(parent)
		require.NoError(t, err)
		require.Len(t, entries, 2, "nothing beside the tree and the archive")
		require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			require.NoError(t, err)
			info, err := d.Info()
			require.NoError(t, err)
			require.True(t, info.IsDir() || info.Mode().IsRegular(), "%s is %s", p, info.Mode())
			require.Zero(t, info.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky), p)
			return nil
		}))
		if _, err := skills.Digest(os.DirFS(dir)); err != nil {
			t.Fatalf("a written tree always has a digest: %v", err)
		}
	})
}
