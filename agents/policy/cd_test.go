package policy_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCdFollowsBashsLogicalPath holds cd to what bash does: without -P it
// takes .. off the path it went by ($PWD), not off where a link led, so
// through deep, a link to docs/x/y, cd deep/../.. is the workspace's
// parent while cat deep/../../f is docs/f. The parent holds outside/ as a
// sibling of the workspace, and docs/outside/ is inside: a policy that
// followed the link would read the wrong one.
func TestCdFollowsBashsLogicalPath(t *testing.T) {
	f := newFixture(t, deployerConfig())
	require.NoError(t, os.MkdirAll(filepath.Join(f.ws, "docs", "x", "y"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(f.ws, "docs", "outside"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "docs", "outside", "secret.txt"), []byte("inside\n"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join("docs", "x", "y"), filepath.Join(f.ws, "deep")))
	for _, tc := range []struct{ cmd, want string }{
		{"cd deep/../.. && cat outside/secret.txt", "DDDDD"},
		{"cd deep/../.. && ls", "DDDDD"},
		{"cd -L deep/../.. && ls", "DDDDD"},
		{"cd -P -L deep/../.. && ls", "DDDDD"},
		{"pushd deep/../.. && ls", "DDDDD"},
		{"cd deep && cd ../.. && cat outside/secret.txt", "DDDDD"},
		{"cd deep; cd ..; cd ..; ls", "DDDDD"},
		{"cd deep/../../.. && ls", "DDDDD"},
		{"(cd deep/../.. && cat outside/secret.txt)", "DDDDD"},
		{"bash -c 'cd deep/../.. && cat outside/secret.txt'", "DDDDD"},
		{"cd deep && cd \"$PWD/../..\" && ls", "DDDDD"},
		{"cd deep && cd \"$(pwd)/../..\" && ls", "DDDDD"},
		{"if true; then cd deep; else cd -P deep; fi; cd ../..; ls", "DDDDD"},
		{"cd deep/.. && ls", "AAAAA"},
		{"cd deep && cd .. && cat README.md", "AAAAA"},
		{"cd -P deep/../.. && cat outside/secret.txt", "AAAAA"},
		{"cd -L -P deep/../.. && ls", "AAAAA"},
		{"cd deep && cat ../../outside/secret.txt", "AAAAA"},
		{"cat deep/../../outside/secret.txt", "AAAAA"},
		{"cd deep && git -C ../.. status", "AAAAA"},
		{"cd deep && ls && cd .. && ls", "AAAAA"},
		{"cd docs/x && cd ../.. && ls", "AAAAA"},
	} {
		got := make([]byte, len(corpusProfiles))
		for i, p := range corpusProfiles {
			got[i] = letter(f.bash(t, p, tc.cmd).Verdict)
		}
		require.Equal(t, tc.want, string(got), tc.cmd)
	}
}
