package bolt_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt"
)

func openInstallationsStore(t *testing.T, path string) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(path, bolt.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestInstallationsFollowTheirRepositories(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "switchyard.db")
	s := openInstallationsStore(t, path)

	// A store that never saw an installation knows none, without failing.
	id, err := s.InstallationForRepo(ctx, "octo/hello")
	require.NoError(t, err)
	require.Zero(t, id)

	require.NoError(t, s.SaveInstallation(ctx, 1, "octo", false, []string{"octo/Hello", "octo/world"}, nil))
	require.NoError(t, s.SaveInstallation(ctx, 2, "acme", false, []string{"acme/api"}, nil))

	for _, tc := range []struct {
		repo string
		want int64
	}{
		{"octo/hello", 1}, // GitHub's names compare case-insensitively
		{"OCTO/HELLO", 1},
		{"octo/world", 1},
		{"acme/api", 2},
		{"acme/other", 0},
	} {
		id, err := s.InstallationForRepo(ctx, tc.repo)
		require.NoError(t, err, tc.repo)
		require.Equal(t, tc.want, id, tc.repo)
	}

	// installation_repositories.removed, then the repository moving to
	// another installation (an org transferring it).
	require.NoError(t, s.SaveInstallation(ctx, 1, "", false, nil, []string{"octo/world"}))
	require.NoError(t, s.SaveInstallation(ctx, 2, "acme", false, []string{"octo/hello"}, nil))
	id, err = s.InstallationForRepo(ctx, "octo/world")
	require.NoError(t, err)
	require.Zero(t, id)
	id, err = s.InstallationForRepo(ctx, "octo/hello")
	require.NoError(t, err)
	require.EqualValues(t, 2, id)

	// Deleting installation 1 must not take the repository it lost with it;
	// deleting it twice is fine (GitHub redelivers).
	require.NoError(t, s.DeleteInstallation(ctx, 1))
	require.NoError(t, s.DeleteInstallation(ctx, 1))
	id, err = s.InstallationForRepo(ctx, "octo/hello")
	require.NoError(t, err)
	require.EqualValues(t, 2, id)

	// Survives a restart.
	require.NoError(t, s.Close())
	s = openInstallationsStore(t, path)
	id, err = s.InstallationForRepo(ctx, "acme/api")
	require.NoError(t, err)
	require.EqualValues(t, 2, id)

	require.NoError(t, s.DeleteInstallation(ctx, 2))
	for _, repo := range []string{"acme/api", "octo/hello"} {
		id, err = s.InstallationForRepo(ctx, repo)
		require.NoError(t, err)
		require.Zero(t, id, repo)
	}
}

func TestInstallationsRefuseBadInput(t *testing.T) {
	ctx := context.Background()
	s := openInstallationsStore(t, filepath.Join(t.TempDir(), "switchyard.db"))
	for name, err := range map[string]error{
		"zero id":        s.SaveInstallation(ctx, 0, "octo", false, nil, nil),
		"repo sans name": s.SaveInstallation(ctx, 1, "octo", false, []string{"octo"}, nil),
		"nested repo":    s.SaveInstallation(ctx, 1, "octo", false, nil, []string{"octo/a/b"}),
	} {
		require.Equal(t, bot.EINVALID, bot.ErrorCode(err), name)
	}
	_, err := s.InstallationForRepo(ctx, "/hello")
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))

	// A refused save wrote nothing.
	id, err := s.InstallationForRepo(ctx, "octo/a")
	require.NoError(t, err)
	require.Zero(t, id)
}
