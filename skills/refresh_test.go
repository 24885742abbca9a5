package skills_test

import (
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
)

// logBuffer collects log lines written from any goroutine.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Two registries over one store stand for two replicas: what one stores,
// the other puts in effect when it reads the settings again, telling its
// subscribers; a setting naming a package only the first has is ignored by
// the second, which says so once.
func TestRefreshSettingsPutsAnotherProcesssChangesInEffect(t *testing.T) {
	store := bolttest.Open(t, t.TempDir())
	var storedA, storedB int
	logs := &logBuffer{}
	b, err := skills.NewRegistry(t.Context(), skills.Options{Store: store, Masker: bot.NewRedactor(), Stored: func() { storedB++ },
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	a, err := skills.NewRegistry(t.Context(), skills.Options{Store: store, Masker: bot.NewRedactor(), Stored: func() { storedA++ }})
	require.NoError(t, err)
	var told int
	b.Subscribe(func() { told++ })
	web := skills.Target{Repo: "acme/web", Agent: "coder"}
	repo := scope(t, "repo:acme/web")

	// Nothing changed yet.
	changed, err := b.RefreshSettings(t.Context())
	require.NoError(t, err)
	require.False(t, changed)
	require.Zero(t, told)

	require.NoError(t, a.Set(t.Context(), skills.Setting{Scope: repo, Name: "release-notes", Enabled: skills.Disabled}))
	require.Equal(t, 1, storedA, "a stored change is told")
	require.True(t, b.Enabled(web, "release-notes").Enabled, "not read yet")
	changed, err = b.RefreshSettings(t.Context())
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, 1, told, "subscribers are told as for a change made here")
	require.Equal(t, skills.Effective{Name: "release-notes", Package: "release-notes", Scope: "repo:acme/web", Origin: "store"}, b.Enabled(web, "release-notes"))
	changed, err = b.RefreshSettings(t.Context())
	require.NoError(t, err)
	require.False(t, changed, "read again, nothing new")
	require.Zero(t, storedB, "reading is not a change to tell")

	// A package only a has, with a setting whose number a holds as the
	// API decodes it and the store gives back whole: a finds nothing new.
	addPackage(t, a, acmeTools)
	require.NoError(t, a.Set(t.Context(), skills.Setting{Scope: repo, Name: "acme-tools", Enabled: skills.Enabled, Settings: map[string]any{"retries": float64(2)}}))
	changed, err = a.RefreshSettings(t.Context())
	require.NoError(t, err)
	require.False(t, changed)

	changed, err = b.RefreshSettings(t.Context())
	require.NoError(t, err)
	require.True(t, changed)
	_, ok := b.Skill("deploy-check")
	require.False(t, ok)
	require.False(t, b.PackageEnabled(web, "acme-tools").Enabled, "unknown here")
	st, ok := b.StoredSetting(repo, "acme-tools")
	require.True(t, ok, "kept, for when it is installed here")
	require.Equal(t, map[string]any{"retries": int64(2)}, st.Settings)

	// Cleared on a: b forgets it; the unknown setting was reported once.
	require.NoError(t, a.Set(t.Context(), skills.Setting{Scope: repo, Name: "release-notes", Enabled: skills.Inherit}))
	changed, err = b.RefreshSettings(t.Context())
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, skills.Effective{Name: "release-notes", Package: "release-notes", Enabled: true, Scope: "default"}, b.Enabled(web, "release-notes"))
	require.Equal(t, 1, strings.Count(logs.String(), "names no package or skill installed here"), logs.String())
	require.Contains(t, logs.String(), "name=acme-tools scope=repo:acme/web")
}
