package policy

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// names lists a listing's entries as name:type letters.
func names(l listing) []string {
	var out []string
	for _, e := range l.entries {
		t := "f"
		switch {
		case e.typ&os.ModeSymlink != 0:
			t = "l"
		case e.typ.IsDir():
			t = "d"
		}
		out = append(out, e.name+":"+t)
	}
	return out
}

// A remembered listing is used only while its directory is unchanged: an
// entry added, removed or renamed, a directory swapped for another, and a
// modification time set back afterwards are all seen at the next look.
func TestListingsSeeEveryChange(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("listings are remembered on Linux only")
	}
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "tree")
	other := filepath.Join(root, "other")
	for _, d := range []string{dir + "/sub", other} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.WriteFile(dir+"/a.go", nil, 0o644))
	require.NoError(t, os.WriteFile(other+"/b.go", nil, 0o644))

	l := newListings()
	got, ok := l.list(dir)
	require.True(t, ok)
	require.Equal(t, []string{"a.go:f", "sub:d"}, names(got))
	require.Empty(t, l.m, "a directory changed a moment ago is not remembered")

	time.Sleep(settleTime + 100*time.Millisecond)
	got, _ = l.list(dir)
	require.Equal(t, []string{"a.go:f", "sub:d"}, names(got))
	require.Contains(t, l.m, dir, "a settled directory is remembered")

	// A link added, then the time set back to the old one: the change
	// time moves all the same.
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.NoError(t, os.Symlink("/etc/passwd", dir+"/p.go"))
	require.NoError(t, os.Chtimes(dir, fi.ModTime(), fi.ModTime()))
	got, _ = l.list(dir)
	require.Equal(t, []string{"a.go:f", "p.go:l", "sub:d"}, names(got))

	// Removed, and renamed.
	require.NoError(t, os.Remove(dir+"/p.go"))
	got, _ = l.list(dir)
	require.Equal(t, []string{"a.go:f", "sub:d"}, names(got))
	require.NoError(t, os.Rename(dir+"/a.go", dir+"/c.go"))
	got, _ = l.list(dir)
	require.Equal(t, []string{"c.go:f", "sub:d"}, names(got))

	// The directory swapped for another under the same name.
	require.NoError(t, os.Rename(dir, root+"/old"))
	require.NoError(t, os.Rename(other, dir))
	got, _ = l.list(dir)
	require.Equal(t, []string{"b.go:f"}, names(got))

	// Replaced by a link: read through it, never remembered for it.
	require.NoError(t, os.Rename(dir, other))
	require.NoError(t, os.Symlink(root+"/old", dir))
	got, _ = l.list(dir)
	require.Equal(t, []string{"c.go:f", "sub:d"}, names(got))
	_, stamped := statDir(dir)
	require.False(t, stamped)

	_, ok = l.list(filepath.Join(root, "missing"))
	require.False(t, ok)
}

// The listings of one workspace stay within their bound: one more past
// it starts them afresh.
func TestListingsBounded(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("listings are remembered on Linux only")
	}
	var dir string
	for _, d := range []string{"/", "/usr", "/etc", "/usr/lib"} {
		if stamp, ok := statDir(d); ok && stamp.settled(time.Now().Add(-settleTime)) {
			dir = d
			break
		}
	}
	if dir == "" {
		t.Skip("no settled directory to list")
	}
	l := newListings()
	l.m["/full"] = listing{entries: make([]listEntry, maxListed)}
	l.entries = maxListed
	got, ok := l.list(dir)
	require.True(t, ok)
	require.Equal(t, map[string]listing{dir: got}, l.m)
	require.Equal(t, len(got.entries), l.entries)
	// Read again over a stale listing of it, it is counted once.
	l.m[dir] = listing{entries: make([]listEntry, 5)}
	l.entries = 5
	got, _ = l.list(dir)
	require.NotEmpty(t, got.entries)
	require.Equal(t, len(got.entries), l.entries)
}
