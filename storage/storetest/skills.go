package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
)

// SkillStore is what the skills registry keeps, and a way to close it.
type SkillStore interface {
	skills.Store
	Close() error
}

// SkillOpener opens, or reopens, a skill store whose files live in dir.
type SkillOpener func(t *testing.T, dir string) SkillStore

// RunSkills runs the conformance suite of skills.Store: installed
// packages (the lock) and settings per scope.
func RunSkills(t *testing.T, open SkillOpener) {
	for _, g := range []struct {
		name string
		run  func(*testing.T, SkillOpener)
	}{
		{"PutPackage", testPutPackage},
		{"DeletePackage", testDeletePackage},
		{"Settings", testSettings},
		{"SettingsRefused", testSettingsRefused},
		{"ConcurrentSettings", testConcurrentSettings},
		{"SkillsReopen", testSkillsReopen},
	} {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			g.run(t, open)
		})
	}
}

type skillHarness struct {
	t    *testing.T
	ctx  context.Context
	open SkillOpener
	dir  string
	s    SkillStore
}

func newSkillHarness(t *testing.T, open SkillOpener) *skillHarness {
	h := &skillHarness{t: t, ctx: t.Context(), open: open, dir: t.TempDir()}
	h.s = open(t, h.dir)
	t.Cleanup(func() { require.NoError(t, h.s.Close()) })
	return h
}

func (h *skillHarness) reopen() {
	h.t.Helper()
	require.NoError(h.t, h.s.Close())
	h.s = h.open(h.t, h.dir)
}

func pkgRecord(name, version string) skills.InstalledPackage {
	return skills.InstalledPackage{
		Name: name, Version: version, Source: "git+https://example.com/" + name + ".git#v" + version,
		Resolved: "0123456789abcdef0123456789abcdef01234567", Digest: "sha256:" + fmt.Sprintf("%064x", len(name)),
		Dependencies: map[string]string{"base": "^1.0"}, Dir: "/data/packages/" + name + "@" + version,
		InstalledAt: epoch(),
	}
}

func scopeOf(t *testing.T, s string) skills.Scope {
	t.Helper()
	sc, err := skills.ParseScope(s)
	require.NoError(t, err)
	return sc
}

func (h *skillHarness) packages() []skills.InstalledPackage {
	h.t.Helper()
	list, err := h.s.ListPackages(h.ctx)
	require.NoError(h.t, err)
	return list
}

func (h *skillHarness) settings() []skills.Setting {
	h.t.Helper()
	list, err := h.s.ListSettings(h.ctx)
	require.NoError(h.t, err)
	return list
}

func testPutPackage(t *testing.T, open SkillOpener) {
	h := newSkillHarness(t, open)
	require.Empty(t, h.packages(), "a new store has no packages")
	require.Empty(t, h.settings())

	b, a := pkgRecord("release-kit", "1.0.0"), pkgRecord("acme-tools", "2.1.0")
	require.NoError(t, h.s.PutPackage(h.ctx, b))
	enable := skills.Setting{Scope: scopeOf(t, "repo:acme/web"), Name: "acme-tools", Enabled: skills.Enabled,
		Settings: map[string]any{"environment": "staging", "retries": int64(3), "ratio": 0.5, "tags": []any{"a", int64(1)}, "nested": map[string]any{"on": true}}}
	require.NoError(t, h.s.PutPackage(h.ctx, a, enable))
	require.Equal(t, []skills.InstalledPackage{a, b}, h.packages(), "sorted by name, exactly as put")
	require.Equal(t, []skills.Setting{enable}, h.settings(), "the settings given with a package are kept with it")

	// A new version replaces the record.
	b2 := pkgRecord("release-kit", "1.1.0")
	require.NoError(t, h.s.PutPackage(h.ctx, b2))
	require.Equal(t, []skills.InstalledPackage{a, b2}, h.packages())

	// A record that says too little changes nothing.
	bad := pkgRecord("broken", "1.0.0")
	bad.Digest = ""
	err := h.s.PutPackage(h.ctx, bad)
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
	err = h.s.PutPackage(h.ctx, pkgRecord("Not A Name", "1.0.0"))
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
	// A bad setting refuses the whole write: the package is not recorded.
	err = h.s.PutPackage(h.ctx, pkgRecord("other", "1.0.0"), skills.Setting{Scope: skills.Global})
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
	require.Equal(t, []skills.InstalledPackage{a, b2}, h.packages())
}

func testDeletePackage(t *testing.T, open SkillOpener) {
	h := newSkillHarness(t, open)
	a, b := pkgRecord("acme-tools", "1.0.0"), pkgRecord("release-kit", "1.0.0")
	keepers := []skills.Setting{
		{Scope: skills.Global, Name: "release-kit", Enabled: skills.Enabled},
		{Scope: scopeOf(t, "agent:coder"), Name: "changelog", Enabled: skills.Disabled},
	}
	doomed := []skills.Setting{
		{Scope: skills.Global, Name: "acme-tools", Enabled: skills.Enabled},
		{Scope: scopeOf(t, "org:acme"), Name: "deploy-check", Enabled: skills.Disabled},
	}
	require.NoError(t, h.s.PutPackage(h.ctx, a, doomed...))
	require.NoError(t, h.s.PutPackage(h.ctx, b, keepers...))

	require.NoError(t, h.s.DeletePackage(h.ctx, "acme-tools", []string{"acme-tools", "deploy-check"}))
	require.Equal(t, []skills.InstalledPackage{b}, h.packages())
	require.ElementsMatch(t, keepers, h.settings(), "only the settings naming the package and its skills go")

	require.NoError(t, h.s.DeletePackage(h.ctx, "acme-tools", []string{"acme-tools"}), "deleting twice is not an error")
	require.NoError(t, h.s.DeletePackage(h.ctx, "never-installed", nil))
	require.Equal(t, []skills.InstalledPackage{b}, h.packages())
}

func testSettings(t *testing.T, open SkillOpener) {
	h := newSkillHarness(t, open)
	global := skills.Setting{Scope: skills.Global, Name: "release-notes", Enabled: skills.Disabled}
	repo := skills.Setting{Scope: scopeOf(t, "repo:acme/web"), Name: "release-notes", Enabled: skills.Enabled}
	org := skills.Setting{Scope: scopeOf(t, "org:acme"), Name: "acme-tools", Enabled: skills.Inherit, Settings: map[string]any{"environment": "production"}}
	for _, s := range []skills.Setting{global, repo, org} {
		require.NoError(t, h.s.PutSetting(h.ctx, s))
	}
	require.ElementsMatch(t, []skills.Setting{global, repo, org}, h.settings(), "the same name at two scopes is two settings")

	// Same scope and name: replaced.
	global.Enabled = skills.Enabled
	require.NoError(t, h.s.PutSetting(h.ctx, global))
	require.ElementsMatch(t, []skills.Setting{global, repo, org}, h.settings())

	require.NoError(t, h.s.DeleteSetting(h.ctx, scopeOf(t, "repo:acme/web"), "release-notes"))
	require.ElementsMatch(t, []skills.Setting{global, org}, h.settings())
	require.NoError(t, h.s.DeleteSetting(h.ctx, scopeOf(t, "repo:acme/web"), "release-notes"), "deleting twice is not an error")
	require.NoError(t, h.s.DeleteSetting(h.ctx, skills.Global, "acme-tools"), "a scope the name has no setting at")
	require.ElementsMatch(t, []skills.Setting{global, org}, h.settings())
}

func testSettingsRefused(t *testing.T, open SkillOpener) {
	h := newSkillHarness(t, open)
	for name, s := range map[string]skills.Setting{
		"no name":         {Scope: skills.Global, Enabled: skills.Enabled},
		"no scope":        {Name: "x", Enabled: skills.Enabled},
		"from the config": {Scope: skills.Global, Name: "x", Enabled: skills.Enabled, Origin: "config.yaml:3"},
	} {
		err := h.s.PutSetting(h.ctx, s)
		require.Equal(t, bot.EINVALID, bot.ErrorCode(err), name)
	}
	require.Empty(t, h.settings())
}

func testConcurrentSettings(t *testing.T, open SkillOpener) {
	h := newSkillHarness(t, open)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			s := skills.Setting{Scope: scopeOf(t, fmt.Sprintf("agent:a%d", i)), Name: "release-notes", Enabled: skills.Enabled}
			require.NoError(t, h.s.PutSetting(h.ctx, s))
		})
	}
	wg.Wait()
	require.Len(t, h.settings(), 16)
}

func testSkillsReopen(t *testing.T, open SkillOpener) {
	h := newSkillHarness(t, open)
	a := pkgRecord("acme-tools", "1.0.0")
	a.InstalledAt = epoch().Add(90 * time.Minute)
	s := skills.Setting{Scope: scopeOf(t, "agent:coder"), Name: "acme-tools", Enabled: skills.Enabled, Settings: map[string]any{"n": int64(2)}}
	require.NoError(t, h.s.PutPackage(h.ctx, a, s))
	h.reopen()
	got := h.packages()
	require.Len(t, got, 1)
	require.True(t, a.InstalledAt.Equal(got[0].InstalledAt))
	got[0].InstalledAt = a.InstalledAt
	require.Equal(t, []skills.InstalledPackage{a}, got)
	require.Equal(t, []skills.Setting{s}, h.settings())
}
