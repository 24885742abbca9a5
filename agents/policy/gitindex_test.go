package policy

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The paths of a real git index are read in every version git writes,
// with entries whose names are long, short and share prefixes.
func TestIndexPathsReadsWhatGitWrote(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	files := []string{".npmrc", "a", "config/.env.test", "config/.env.testing", "testdata/server.key",
		"very/long/" + filepath.Join("path", "that", "goes", "on", "and", "on", "and", "on", "for", "quite", "a", "while", "file.txt")}
	gitRun := func(args ...string) {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	gitRun("init", "-q")
	for _, f := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644))
	}
	gitRun("add", ".")
	for _, version := range []string{"2", "3", "4"} {
		gitRun("update-index", "--index-version", version)
		if version == "3" {
			// An entry with extended flags is what makes git keep version 3.
			gitRun("update-index", "--skip-worktree", "a")
		}
		data, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
		require.NoError(t, err)
		got, err := indexPaths(data, 20)
		require.NoError(t, err, "version %s", version)
		want := map[string]bool{}
		for _, f := range files {
			want[filepath.ToSlash(f)] = true
		}
		require.Equal(t, want, got, "version %s", version)
	}
	tracked, ok := trackedIn(dir)
	require.True(t, ok)
	require.True(t, tracked["config/.env.test"])
	_, ok = trackedIn(t.TempDir())
	require.True(t, ok, "no repository tracks nothing")
}

// FuzzIndexPaths holds the index reader to never panicking, whatever the
// bytes.
func FuzzIndexPaths(f *testing.F) {
	f.Add([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x01"))
	f.Add([]byte("DIRC\x00\x00\x00\x04\x00\x00\x00\x02" + string(make([]byte, 62)) + "\x00a\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, n := range []int{20, 32} {
			got, err := indexPaths(data, n)
			if err != nil && got != nil {
				t.Fatalf("an error with paths: %v", got)
			}
		}
	})
}
