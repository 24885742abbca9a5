package install_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
	"github.com/switchyard/switchyard/skills/install"
	"github.com/switchyard/switchyard/storage/bolt"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
)

var permissions = []string{"read", "write", "exec", "push", "merge", "ci", "deploy", "secrets", "network", "admin"}

// env is a data directory with a real store, a registry and an installer.
type env struct {
	t     *testing.T
	data  string
	store *bolt.Store
	reg   *skills.Registry
	in    *install.Installer
}

func newEnv(t *testing.T, limits install.Limits) *env {
	t.Helper()
	e := &env{t: t, data: t.TempDir()}
	e.store = bolttest.Open(t, e.data)
	e.open(limits)
	return e
}

// open builds the registry and installer over the env's store, as a
// daemon does at start.
func (e *env) open(limits install.Limits) {
	e.t.Helper()
	load := skills.LoadOptions{Masker: bot.NewRedactor(), Permissions: permissions}
	reg, err := skills.NewRegistry(e.t.Context(), skills.Options{Store: e.store, Masker: load.Masker, Permissions: permissions})
	require.NoError(e.t, err)
	in, err := install.New(context.Background(), install.Options{
		Registry: reg, Dir: filepath.Join(e.data, "packages"), Load: load, Limits: limits,
		Env: func() []string { return append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1") },
	})
	require.NoError(e.t, err)
	e.reg, e.in = reg, in
}

func (e *env) install(source string, enable ...string) (install.Result, error) {
	req := install.Request{Source: source}
	for _, s := range enable {
		sc, err := skills.ParseScope(s)
		require.NoError(e.t, err)
		req.Enable = append(req.Enable, sc)
	}
	return e.in.Install(context.Background(), req)
}

// nothingLeft checks that a failed install left nothing: no directory
// under packages/ and no record beyond the ones expected.
func (e *env) nothingLeft(want ...string) {
	e.t.Helper()
	entries, err := os.ReadDir(filepath.Join(e.data, "packages"))
	require.NoError(e.t, err)
	var dirs []string
	for _, d := range entries {
		dirs = append(dirs, d.Name())
	}
	var records []string
	recs, err := e.store.ListPackages(context.Background())
	require.NoError(e.t, err)
	for _, r := range recs {
		records = append(records, r.Name+"@"+r.Version)
	}
	sort.Strings(want)
	require.Equal(e.t, want, dirs, "package directories")
	require.Equal(e.t, want, records, "recorded packages")
	outside, err := filepath.Glob(filepath.Join(e.data, "*"))
	require.NoError(e.t, err)
	for _, o := range outside {
		base := filepath.Base(o)
		require.Contains(e.t, []string{"packages", "switchyard.db"}, base, "nothing written beside the store")
	}
}

func examplePackage(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "examples", "release-helper")
}

// writeTree writes files (name → content; a name ending in "*" is made
// executable) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		mode := fs.FileMode(0o644)
		if n, ok := strings.CutSuffix(name, "*"); ok {
			name, mode = n, 0o755
		}
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
	}
}

func manifest(name, version string, extra ...string) string {
	return fmt.Sprintf("name: %s\nversion: %s\ndescription: The %s package.\n", name, version, name) + strings.Join(extra, "")
}

func TestInstallExampleDirectory(t *testing.T) {
	e := newEnv(t, install.Limits{})
	res, err := e.install(examplePackage(t))
	require.NoError(t, err)
	require.Equal(t, "release-helper", res.Package)
	require.Equal(t, "1.0.0", res.Version)
	require.Equal(t, []string{"changelog-draft"}, res.Skills)
	require.Equal(t, []string{"release-writer"}, res.Agents)
	require.Equal(t, []string{"changelog_since"}, res.Tools)
	require.Equal(t, []string{"/release-notes"}, res.Commands)
	require.Equal(t, []string{"github.release.published"}, res.Triggers)
	require.Empty(t, res.Enabled, "a new package is enabled nowhere")
	require.Empty(t, res.Warnings)
	require.True(t, strings.HasPrefix(res.Digest, "sha256:"))

	// The registry exposes everything it contributes.
	s, ok := e.reg.Skill("changelog-draft")
	require.True(t, ok)
	require.Contains(t, s.Instructions, "changelog_since")
	agents := e.reg.Agents()
	require.Len(t, agents, 1)
	require.Equal(t, "release-writer", agents[0].Name)
	require.Equal(t, "read-only", agents[0].Profile)
	require.Equal(t, []string{"release notes", "changelog"}, agents[0].Keywords, "the manifest's keywords win")
	require.Equal(t, "release-helper", agents[0].Package)
	tools := e.reg.Tools()
	require.Len(t, tools, 1)
	final := filepath.Join(e.data, "packages", "release-helper@1.0.0")
	require.Equal(t, final, tools[0].Dir)
	info, err := os.Stat(filepath.Join(final, "bin", "changelog-since"))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o755), info.Mode().Perm(), "the program stays executable")
	require.Len(t, e.reg.Entrypoints(), 1)

	// Enabled nowhere until enabled.
	web := skills.Target{Repo: "acme/web"}
	require.False(t, e.reg.Enabled(web, "changelog-draft").Enabled)
	require.False(t, e.reg.PackageEnabled(web, "release-helper").Enabled)

	// Installing it again changes nothing, but may enable it.
	again, err := e.install(examplePackage(t), "repo:acme/web")
	require.NoError(t, err)
	require.True(t, again.Unchanged)
	require.True(t, e.reg.PackageEnabled(web, "release-helper").Enabled)
	e.nothingLeft("release-helper@1.0.0")

	// A restart finds it as it was, enabled where it was.
	e.open(install.Limits{})
	_, ok = e.reg.Skill("changelog-draft")
	require.True(t, ok)
	require.True(t, e.reg.Enabled(web, "changelog-draft").Enabled)
	require.Equal(t, "repo:acme/web", e.reg.Enabled(web, "changelog-draft").Scope)
	lock := e.reg.Installed()
	require.Len(t, lock, 1)
	require.Equal(t, res.Digest, lock[0].Digest)
	require.Equal(t, examplePackage(t), filepath.Clean(lock[0].Source))

	// Files changed on disk: the package no longer loads, and says why.
	require.NoError(t, os.WriteFile(filepath.Join(final, "SKILL.md"), []byte("tampered"), 0o644))
	e.open(install.Limits{})
	_, ok = e.reg.Skill("changelog-draft")
	require.False(t, ok)
	require.Contains(t, e.reg.Installed()[0].Broken, "changed since it was installed")
	require.NotContains(t, e.reg.Installed()[0].Broken, "release-helper:", "whoever shows it names the package; the reason does not again")

	// It can still be uninstalled, which removes its files and settings.
	_, err = e.in.Uninstall(context.Background(), "release-helper")
	require.NoError(t, err)
	e.nothingLeft()
	settings, err := e.store.ListSettings(context.Background())
	require.NoError(t, err)
	require.Empty(t, settings)
}

func TestInstallEnableAtOnce(t *testing.T) {
	e := newEnv(t, install.Limits{})
	res, err := e.install(examplePackage(t), "repo:acme/web", "agent:ops")
	require.NoError(t, err)
	require.Equal(t, []string{"repo:acme/web", "agent:ops"}, res.Enabled)
	require.True(t, e.reg.Enabled(skills.Target{Repo: "acme/web"}, "changelog-draft").Enabled)
	require.True(t, e.reg.Enabled(skills.Target{Repo: "x/y", Agent: "ops"}, "changelog-draft").Enabled)
	require.False(t, e.reg.Enabled(skills.Target{Repo: "acme/api"}, "changelog-draft").Enabled)
}

// gitRepo makes a repository whose first commit (tagged v1.0.0) holds
// version 1.0.0 of a package and whose branch next holds 1.1.0; main has
// 1.2.0.
func gitRepo(t *testing.T) (dir string, tagCommit string) {
	t.Helper()
	dir = t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %s: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	commit := func(version string) {
		writeTree(t, dir, map[string]string{
			"manifest.yaml": manifest("git-kit", version, "skills:\n  - name: git-skill\n    description: d\n    instructions: Do it.\n    allowed_tools: []\n    execution_protocol: [x]\n"),
		})
		git("add", "-A")
		git("commit", "-q", "-m", "version "+version)
	}
	git("init", "-q", "-b", "main")
	commit("1.0.0")
	git("tag", "v1.0.0")
	tagCommit = git("rev-parse", "HEAD")
	git("checkout", "-q", "-b", "next")
	commit("1.1.0")
	git("checkout", "-q", "main")
	commit("1.2.0")
	return dir, tagCommit
}

func TestInstallGitTag(t *testing.T) {
	repo, tagCommit := gitRepo(t)
	e := newEnv(t, install.Limits{})
	res, err := e.install("git+file://" + repo + "#v1.0.0")
	require.NoError(t, err)
	require.Equal(t, "1.0.0", res.Version, "the tag's version, not main's")
	require.Equal(t, tagCommit, res.Resolved, "the lock names the commit")
	_, err = os.Stat(filepath.Join(e.data, "packages", "git-kit@1.0.0", ".git"))
	require.ErrorIs(t, err, fs.ErrNotExist, "no .git comes along")

	// A branch upgrades it; the old version's directory goes.
	res, err = e.install("git+file://" + repo + "#next")
	require.NoError(t, err)
	require.Equal(t, "1.1.0", res.Version)
	require.Equal(t, "1.0.0", res.Previous)
	e.nothingLeft("git-kit@1.1.0")

	// The default branch, and a commit.
	res, err = e.install("git+file://" + repo)
	require.NoError(t, err)
	require.Equal(t, "1.2.0", res.Version)
	res, err = e.install("git+file://" + repo + "#" + tagCommit[:12])
	require.NoError(t, err)
	require.Equal(t, "1.0.0", res.Version)

	_, err = e.install("git+file://" + repo + "#v9.9.9")
	require.ErrorContains(t, err, `no tag, branch or commit "v9.9.9"`)
	_, err = e.install("git+file://" + filepath.Join(repo, "missing"))
	require.ErrorContains(t, err, "git clone: '"+filepath.Join(repo, "missing")+"' does not appear to be a git repository")
	e.nothingLeft("git-kit@1.0.0")
}

// archive builds a tar.gz or a zip of entries.
type entry struct {
	name     string
	body     string
	typ      byte // a tar type; 0 is a regular file
	mode     int64
	linkname string
	size     int64 // a size to claim instead of len(body)
}

func tgz(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, en := range entries {
		hdr := &tar.Header{Name: en.name, Typeflag: en.typ, Mode: en.mode, Size: int64(len(en.body)), Linkname: en.linkname}
		if hdr.Typeflag == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		if hdr.Typeflag != tar.TypeReg {
			hdr.Size = 0
		}
		if en.size > 0 {
			hdr.Size = en.size
		}
		require.NoError(t, tw.WriteHeader(hdr))
		if hdr.Typeflag == tar.TypeReg {
			_, err := tw.Write([]byte(en.body))
			if en.size == 0 {
				require.NoError(t, err)
			}
		}
	}
	if !slicesHasClaimedSize(entries) {
		require.NoError(t, tw.Close())
	}
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func slicesHasClaimedSize(entries []entry) bool {
	for _, e := range entries {
		if e.size > 0 {
			return true
		}
	}
	return false
}

func zipOf(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, en := range entries {
		h := &zip.FileHeader{Name: en.name, Method: zip.Deflate}
		mode := fs.FileMode(0o644)
		if en.typ == tar.TypeSymlink {
			mode = fs.ModeSymlink | 0o777
		}
		h.SetMode(mode)
		w, err := zw.CreateHeader(h)
		require.NoError(t, err)
		body := en.body
		if en.typ == tar.TypeSymlink {
			body = en.linkname
		}
		_, err = w.Write([]byte(body))
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// serve serves archives over https at /<name> and returns the server.
func serve(t *testing.T, files map[string][]byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, ok := files[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func sum(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// envWithClient is an env whose installer trusts the test server.
func envWithClient(t *testing.T, srv *httptest.Server, limits install.Limits) *env {
	t.Helper()
	e := newEnv(t, limits)
	in, err := install.New(context.Background(), install.Options{
		Registry: e.reg, Dir: filepath.Join(e.data, "packages"), Limits: limits, HTTP: srv.Client(),
		Load: skills.LoadOptions{Masker: bot.NewRedactor(), Permissions: permissions},
	})
	require.NoError(t, err)
	e.in = in
	return e
}

var goodManifest = manifest("arch-kit", "1.0.0", "skills:\n  - name: arch-skill\n    description: d\n    instructions_file: SKILL.md\n    allowed_tools: []\n    execution_protocol: [x]\n")

func TestInstallArchive(t *testing.T) {
	good := tgz(t, []entry{{name: "arch-kit-1.0.0/", typ: tar.TypeDir, mode: 0o755}, {name: "arch-kit-1.0.0/manifest.yaml", body: goodManifest}, {name: "arch-kit-1.0.0/SKILL.md", body: "Use it."}})
	goodZip := zipOf(t, []entry{{name: "manifest.yaml", body: goodManifest}, {name: "SKILL.md", body: "Use it."}})
	macZip := zipOf(t, []entry{{name: "arch-kit/manifest.yaml", body: goodManifest}, {name: "arch-kit/SKILL.md", body: "Use it."},
		{name: "__MACOSX/arch-kit/._SKILL.md", body: "\x00\x05\x16\x07"}})
	srv := serve(t, map[string][]byte{"kit.tar.gz": good, "kit.zip": goodZip, "mac.zip": macZip})
	e := envWithClient(t, srv, install.Limits{})

	// A sha256 that differs is refused, and nothing is left.
	_, err := e.in.Install(context.Background(), install.Request{Source: srv.URL + "/kit.tar.gz", SHA256: strings.Repeat("ab", 32)})
	require.ErrorContains(t, err, "its SHA-256 is "+sum(good)+", not "+strings.Repeat("ab", 32)+" as given; nothing was installed")
	e.nothingLeft()
	_, err = e.in.Install(context.Background(), install.Request{Source: srv.URL + "/kit.tar.gz"})
	require.ErrorContains(t, err, "an archive needs --sha256")

	res, err := e.in.Install(context.Background(), install.Request{Source: srv.URL + "/kit.tar.gz", SHA256: sum(good)})
	require.NoError(t, err)
	require.Equal(t, "arch-kit", res.Package, "the archive's one top directory is the package")
	require.Equal(t, "sha256:"+sum(good), res.Resolved)
	s, ok := e.reg.Skill("arch-skill")
	require.True(t, ok)
	require.Equal(t, "Use it.", s.Instructions)

	_, err = e.in.Uninstall(context.Background(), "arch-kit")
	require.NoError(t, err)
	res, err = e.in.Install(context.Background(), install.Request{Source: srv.URL + "/kit.zip", SHA256: "sha256:" + strings.ToUpper(sum(goodZip))})
	require.NoError(t, err)
	require.Equal(t, "arch-kit", res.Package)
	e.nothingLeft("arch-kit@1.0.0")

	// A .tar.gz stored with Content-Encoding: gzip (as object stores
	// keep one uploaded so): its sha256 is the file's, as downloaded.
	encoded := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Type", "application/x-tar")
		_, _ = w.Write(good)
	}))
	defer encoded.Close()
	_, err = e.in.Uninstall(context.Background(), "arch-kit")
	require.NoError(t, err)
	ee := envWithClient(t, encoded, install.Limits{})
	res, err = ee.in.Install(context.Background(), install.Request{Source: encoded.URL + "/kit.tar.gz", SHA256: sum(good)})
	require.NoError(t, err)
	require.Equal(t, "sha256:"+sum(good), res.Resolved)
	_, err = e.in.Install(context.Background(), install.Request{Source: srv.URL + "/kit.zip", SHA256: sum(goodZip)})
	require.NoError(t, err)

	// A zip the Finder made: its __MACOSX is not the package's.
	_, err = e.in.Uninstall(context.Background(), "arch-kit")
	require.NoError(t, err)
	res, err = e.in.Install(context.Background(), install.Request{Source: srv.URL + "/mac.zip", SHA256: sum(macZip)})
	require.NoError(t, err)
	require.Equal(t, "arch-kit", res.Package)
	_, err = os.Stat(filepath.Join(e.data, "packages", "arch-kit@1.0.0", "__MACOSX"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	e.nothingLeft("arch-kit@1.0.0")

	_, err = e.in.Install(context.Background(), install.Request{Source: "http://example.com/kit.tar.gz", SHA256: sum(good)})
	require.ErrorContains(t, err, "http:// is allowed only to this machine")
}

// Hostile archives, by class: each is refused and leaves nothing behind.
func TestInstallRefusesHostileArchives(t *testing.T) {
	man := entry{name: "manifest.yaml", body: goodManifest}
	skill := entry{name: "SKILL.md", body: "Use it."}
	manyFiles := []entry{man, skill}
	for i := range 30 {
		manyFiles = append(manyFiles, entry{name: fmt.Sprintf("f%02d.txt", i), body: "x"})
	}
	bomb := func() []byte { // 4 MiB of zeros, compressed to a few KiB
		return tgz(t, []entry{man, skill, {name: "zeros.bin", body: strings.Repeat("\x00", 4<<20)}})
	}
	cases := []struct {
		name string
		data func() []byte
		want string
	}{
		{"zip slip in tar", func() []byte { return tgz(t, []entry{man, skill, {name: "../../evil.txt", body: "x"}}) }, `entry "../../evil.txt" leaves the package (..)`},
		{"zip slip in zip", func() []byte { return zipOf(t, []entry{man, skill, {name: "a/../../evil.txt", body: "x"}}) }, `entry "a/../../evil.txt" leaves the package (..)`},
		{"backslashes", func() []byte { return zipOf(t, []entry{man, skill, {name: "..\\evil.txt", body: "x"}}) }, "a name with a backslash"},
		{"absolute path", func() []byte { return tgz(t, []entry{man, skill, {name: "/tmp/evil.txt", body: "x"}}) }, `entry "/tmp/evil.txt" is an absolute path`},
		{"a link out", func() []byte {
			return tgz(t, []entry{man, skill, {name: "etc", typ: tar.TypeSymlink, linkname: "/etc"}})
		}, "etc is a symbolic link (to /etc)"},
		{"a symlink, then a file through it", func() []byte {
			return tgz(t, []entry{man, skill, {name: "out", typ: tar.TypeSymlink, linkname: "../../.."}, {name: "out/evil.txt", body: "x"}})
		}, "out is a symbolic link"},
		{"a symlink inside the package", func() []byte {
			return tgz(t, []entry{man, skill, {name: "alias.md", typ: tar.TypeSymlink, linkname: "SKILL.md"}})
		}, "alias.md is a symbolic link"},
		{"a symlink in a zip", func() []byte {
			return zipOf(t, []entry{man, skill, {name: "etc", typ: tar.TypeSymlink, linkname: "/etc"}})
		}, "etc is a symbolic link"},
		{"a hard link", func() []byte {
			return tgz(t, []entry{man, skill, {name: "passwd", typ: tar.TypeLink, linkname: "/etc/passwd"}})
		}, "passwd is a hard link (to /etc/passwd)"},
		{"a device", func() []byte { return tgz(t, []entry{man, skill, {name: "null", typ: tar.TypeChar}}) }, "null is a device"},
		{"a named pipe", func() []byte { return tgz(t, []entry{man, skill, {name: "pipe", typ: tar.TypeFifo}}) }, "pipe is a named pipe"},
		{"setuid", func() []byte { return tgz(t, []entry{man, skill, {name: "bin/su", body: "#!/bin/sh", mode: 0o4755}}) }, "bin/su has the setuid, setgid or sticky bit"},
		{"a huge file", func() []byte { return tgz(t, []entry{man, skill, {name: "big.bin", body: "x", size: 1 << 40}}) }, "big.bin would pass the limit of 1048576 bytes"},
		{"a decompression bomb", bomb, "zeros.bin would pass the limit of 1048576 bytes"},
		{"many files", func() []byte { return tgz(t, manyFiles) }, "more than 20 files and directories"},
		{"a manifest naming a file outside", func() []byte {
			return tgz(t, []entry{{name: "manifest.yaml", body: strings.Replace(goodManifest, "instructions_file: SKILL.md", "instructions_file: ../../../etc/passwd", 1)}})
		}, `"../../../etc/passwd" is outside the package`},
		{"a duplicate entry", func() []byte { return tgz(t, []entry{man, skill, {name: "SKILL.md", body: "Other words."}}) }, "SKILL.md appears twice"},
		{"a duplicate manifest", func() []byte { return tgz(t, []entry{man, skill, {name: "./manifest.yaml", body: "name: evil"}}) }, "manifest.yaml appears twice"},
		{"case tricks", func() []byte { return tgz(t, []entry{man, skill, {name: "skill.md", body: "Other words."}}) }, "SKILL.md and skill.md differ only in case"},
		{"a manifest in another case", func() []byte { return tgz(t, []entry{man, skill, {name: "Manifest.yaml", body: "name: evil"}}) }, "manifest.yaml and Manifest.yaml differ only in case"},
		{"a file beneath a file", func() []byte { return tgz(t, []entry{man, skill, {name: "SKILL.md/x", body: "x"}}) }, "SKILL.md/x is beneath SKILL.md, which is a file"},
		{"not an archive", func() []byte { return []byte("<html>hello</html>") }, "not a readable tar archive"},
		{"a secret in the package", func() []byte {
			return tgz(t, []entry{man, {name: "SKILL.md", body: "token: ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"}})
		}, "SKILL.md:1: looks like a credential"},
	}
	files := map[string][]byte{}
	for i, tc := range cases {
		files[fmt.Sprint(i)] = tc.data()
	}
	srv := serve(t, files)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := envWithClient(t, srv, install.Limits{MaxBytes: 1 << 20, MaxFiles: 20})
			data := files[fmt.Sprint(i)]
			_, err := e.in.Install(context.Background(), install.Request{Source: fmt.Sprintf("%s/%d", srv.URL, i), SHA256: sum(data)})
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			e.nothingLeft()
			_, ok := e.reg.Skill("arch-skill")
			require.False(t, ok, "the registry is untouched")
			for _, dir := range []string{filepath.Dir(e.data), "/tmp"} {
				_, err := os.Stat(filepath.Join(dir, "evil.txt"))
				require.ErrorIs(t, err, fs.ErrNotExist)
			}
		})
	}
}

// An archive inside a package is a file like any other: never opened, its
// entries never written anywhere.
func TestInstallKeepsNestedArchivesClosed(t *testing.T) {
	inner := tgz(t, []entry{{name: "../../evil.txt", body: "x"}})
	outer := tgz(t, []entry{{name: "manifest.yaml", body: goodManifest}, {name: "SKILL.md", body: "Use it."}, {name: "assets/inner.tar.gz", body: string(inner)}})
	srv := serve(t, map[string][]byte{"kit.tgz": outer})
	e := envWithClient(t, srv, install.Limits{})
	_, err := e.in.Install(context.Background(), install.Request{Source: srv.URL + "/kit.tgz", SHA256: sum(outer)})
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(e.data, "packages", "arch-kit@1.0.0", "assets", "inner.tar.gz"))
	require.NoError(t, err)
	require.Equal(t, inner, got)
	_, err = os.Stat(filepath.Join(e.data, "evil.txt"))
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestInstallDirectoryRefusals(t *testing.T) {
	e := newEnv(t, install.Limits{})
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"manifest.yaml": goodManifest, "SKILL.md": "Use it."})
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")))
	_, err := e.install(dir)
	require.ErrorContains(t, err, "passwd is a symbolic link")
	e.nothingLeft()

	for _, name := range []string{"notes\n.md", "evil\xff.md"} {
		odd := t.TempDir()
		writeTree(t, odd, map[string]string{"manifest.yaml": goodManifest, "SKILL.md": "Use it.", name: "x"})
		_, err = e.install(odd)
		require.ErrorContains(t, err, fmt.Sprintf("entry %q: a name with a control character or bytes that are not UTF-8", name))
		e.nothingLeft()
	}

	_, err = e.install(filepath.Join(dir, "missing"))
	require.ErrorContains(t, err, "no such file or directory")
	empty := t.TempDir()
	_, err = e.install(empty)
	require.ErrorContains(t, err, "no manifest")
	e.nothingLeft()
}

func TestDependencies(t *testing.T) {
	e := newEnv(t, install.Limits{})
	pkg := func(name, version string, deps map[string]string) string {
		dir := t.TempDir()
		var extra string
		if len(deps) > 0 {
			extra = "dependencies:\n"
			for n, r := range deps {
				extra += fmt.Sprintf("  %s: %q\n", n, r)
			}
		}
		writeTree(t, dir, map[string]string{"manifest.yaml": manifest(name, version, extra)})
		return dir
	}
	_, err := e.install(pkg("app", "1.0.0", map[string]string{"base": "^1.2"}))
	require.ErrorContains(t, err, "app requires base ^1.2, which is not installed; install it first")

	_, err = e.install(pkg("base", "1.4.0", nil))
	require.NoError(t, err)
	_, err = e.install(pkg("app", "1.0.0", map[string]string{"base": "^1.2"}))
	require.NoError(t, err)

	// A conflict names both constraints.
	_, err = e.install(pkg("other", "1.0.0", map[string]string{"base": "^2.0"}))
	require.ErrorContains(t, err, "other requires base ^2.0, but base 1.4.0 is installed (app requires base ^1.2)")
	_, err = e.install(pkg("base", "2.0.0", nil))
	require.ErrorContains(t, err, "base 2.0.0 does not satisfy base ^1.2 that app requires")
	_, err = e.install(pkg("base", "1.5.0", nil))
	require.NoError(t, err, "an upgrade within the range")

	// Uninstall refuses while another package depends on it.
	_, err = e.in.Uninstall(context.Background(), "base")
	require.EqualError(t, err, "base cannot be uninstalled: app depends on it")
	_, err = e.in.Uninstall(context.Background(), "app")
	require.NoError(t, err)
	_, err = e.in.Uninstall(context.Background(), "base")
	require.NoError(t, err)
	_, err = e.in.Uninstall(context.Background(), "base")
	require.EqualError(t, err, "package base is not installed")
	_, err = e.in.Uninstall(context.Background(), "release-notes")
	require.EqualError(t, err, "package release-notes is built in and cannot be uninstalled; disable it instead")
	_, err = e.install(pkg("release-notes", "9.0.0", nil))
	require.ErrorContains(t, err, "package release-notes is built in and cannot be replaced")
	e.nothingLeft()
}

// Installs never close a dependency cycle (an upgrade of a package others
// need, made to need them back): both would refuse to be uninstalled
// forever. Each cycle is refused naming its path, and nothing changes.
func TestDependencyCyclesAreRefused(t *testing.T) {
	pkg := func(name, version string, deps ...string) string {
		dir := t.TempDir()
		var extra string
		if len(deps) > 0 {
			extra = "dependencies:\n"
			for _, d := range deps {
				extra += fmt.Sprintf("  %s: \">=1.0.0\"\n", d)
			}
		}
		writeTree(t, dir, map[string]string{"manifest.yaml": manifest(name, version, extra)})
		return dir
	}
	cases := []struct {
		name    string
		chain   int    // packages p0 … p(chain-1), each needing the next
		upgrade string // the package upgraded to need p0
		want    string
	}{
		{"two", 2, "p1", "p1 2.0.0 would close a dependency cycle: p1 → p0 → p1"},
		{"three", 3, "p2", "p2 2.0.0 would close a dependency cycle: p2 → p0 → p1 → p2"},
		{"eight", 8, "p7", "p7 2.0.0 would close a dependency cycle: p7 → p0 → p1 → p2 → p3 → p4 → p5 → p6 → p7"},
		{"in the middle", 5, "p3", "p3 2.0.0 would close a dependency cycle: p3 → p0 → p1 → p2 → p3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, install.Limits{})
			var want []string
			for i := tc.chain - 1; i >= 0; i-- {
				var deps []string
				if i+1 < tc.chain {
					deps = []string{fmt.Sprintf("p%d", i+1)}
				}
				_, err := e.install(pkg(fmt.Sprintf("p%d", i), "1.0.0", deps...))
				require.NoError(t, err)
				want = append(want, fmt.Sprintf("p%d@1.0.0", i))
			}
			var deps []string
			if n := tc.upgrade; n != fmt.Sprintf("p%d", tc.chain-1) {
				var i int
				_, _ = fmt.Sscanf(n, "p%d", &i)
				deps = append(deps, fmt.Sprintf("p%d", i+1))
			}
			_, err := e.install(pkg(tc.upgrade, "2.0.0", append(deps, "p0")...))
			require.EqualError(t, err, tc.want)
			e.nothingLeft(want...)
			// The chain still comes apart from its top.
			for i := range tc.chain {
				_, err := e.in.Uninstall(context.Background(), fmt.Sprintf("p%d", i))
				require.NoError(t, err)
			}
		})
	}
}

func TestInstallLeavesNoStagingAfterACrash(t *testing.T) {
	e := newEnv(t, install.Limits{})
	leftover := filepath.Join(e.data, "packages", ".install-123")
	require.NoError(t, os.MkdirAll(filepath.Join(leftover, "tree"), 0o755))
	e.open(install.Limits{})
	_, err := os.Stat(leftover)
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestParseSource(t *testing.T) {
	ok := []struct{ raw, sha string }{
		{"git+https://github.com/acme/kit.git#v1.2.0", ""},
		{"git+ssh://git@github.com/acme/kit.git", ""},
		{"git+file:///srv/kit#0123abc", ""},
		{"npm:@acme/kit@^1.2", ""},
		{"npm:kit", ""},
		{"https://example.com/kit.tar.gz", strings.Repeat("a", 64)},
		{"http://127.0.0.1:8080/kit.zip", strings.Repeat("a", 64)},
		{"./examples/release-helper", ""},
	}
	for _, c := range ok {
		_, err := install.ParseSource(c.raw, c.sha)
		require.NoError(t, err, c.raw)
	}
	// A repository given as a path is one on this machine, made absolute
	// as a directory is; host:path is ssh's.
	wd, err := os.Getwd()
	require.NoError(t, err)
	for raw, want := range map[string]string{
		"git+../kit#v1":                 "git+" + filepath.Join(filepath.Dir(wd), "kit") + "#v1",
		"git+kit":                       "git+" + filepath.Join(wd, "kit"),
		"git+/srv/kit.git":              "git+/srv/kit.git",
		"git+git@github.com:acme/kit":   "git+git@github.com:acme/kit",
		"git+file:///srv/kit#v1":        "git+file:///srv/kit#v1",
		"git+https://github.com/a/b#v1": "git+https://github.com/a/b#v1",
	} {
		s, err := install.ParseSource(raw, "")
		require.NoError(t, err, raw)
		require.Equal(t, want, s.String(), raw)
	}
	bad := []struct{ raw, sha, want string }{
		{"", "", "no source"},
		{"git+", "", "want git+<url>[#ref]"},
		{"git+--upload-pack=evil", "", "want git+<url>[#ref]"},
		{"git+https://x/y#--evil", "", `"--evil" is not a tag, branch or commit`},
		{"git+ext::sh -c evil", "", "git over ext is not supported"},
		{"git+https://user:pw@github.com/x/y", "", "credentials do not belong in the URL"},
		{"npm:Not_Valid!", "", "is not an npm package name"},
		{"npm:kit@--evil", "", `"--evil" is not a version range`},
		{"http://example.com/k.tgz", strings.Repeat("a", 64), "http:// is allowed only to this machine"},
		{"https://example.com/k.tgz", "", "an archive needs --sha256"},
		{"https://example.com/k.tgz", "xyz", `--sha256 "xyz" is not a SHA-256`},
		{"ftp://example.com/k.tgz", "", "unknown kind of source"},
		{"./dir", strings.Repeat("a", 64), "--sha256 is for archives"},
	}
	for _, c := range bad {
		_, err := install.ParseSource(c.raw, c.sha)
		require.ErrorContains(t, err, c.want, c.raw)
	}
}
