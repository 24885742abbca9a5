package install_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/skills/install"
)

// rawTgz is a gzip-compressed tar of files, then the entry hdr written n
// times over (a directory named again, archive-wide metadata): what tgz
// would tidy away. The entry's blocks are made once and repeated, so a
// large n costs little.
func rawTgz(t *testing.T, files []entry, hdr *tar.Header, n int) []byte {
	t.Helper()
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	for _, f := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.body))}))
		_, err := tw.Write([]byte(f.body))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Flush())
	var one bytes.Buffer
	ow := tar.NewWriter(&one)
	require.NoError(t, ow.WriteHeader(hdr))
	require.NoError(t, ow.Flush())
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	require.NoError(t, err)
	_, err = zw.Write(tarBuf.Bytes())
	require.NoError(t, err)
	_, err = zw.Write(bytes.Repeat(one.Bytes(), n))
	require.NoError(t, err)
	_, err = zw.Write(make([]byte, 1024)) // the end of the archive
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// Archives that stay within the limits on files and bytes yet make the
// installer read without end: entries that add no file (a directory named
// again and again, archive-wide metadata) and metadata far larger than
// the files. Each is refused by its own limit and leaves nothing.
func TestInstallRefusesArchiveBombs(t *testing.T) {
	man := entry{name: "manifest.yaml", body: goodManifest}
	skill := entry{name: "SKILL.md", body: "Use it."}
	dirs := func(n int) []byte {
		return rawTgz(t, []entry{man, skill}, &tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755}, n)
	}
	globals := func(n, size int) []byte {
		return rawTgz(t, []entry{man, skill}, &tar.Header{Typeflag: tar.TypeXGlobalHeader,
			PAXRecords: map[string]string{"comment": strings.Repeat("x", size)}}, n)
	}
	zipDirs := func(n int) []byte {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for _, f := range []entry{man, skill} {
			w, err := zw.Create(f.name)
			require.NoError(t, err)
			_, err = w.Write([]byte(f.body))
			require.NoError(t, err)
		}
		for range n {
			_, err := zw.Create("d/")
			require.NoError(t, err)
		}
		require.NoError(t, zw.Close())
		return buf.Bytes()
	}
	cases := []struct {
		name string
		data []byte
		want string // "" installs
	}{
		{"a directory named twice", dirs(2), ""},
		{"a directory named as often as the limit allows", dirs(38), ""},
		{"a directory named past the limit", dirs(39), "more than 40 entries"},
		{"a directory named 100,000 times", dirs(100_000), "more than 40 entries"},
		{"a zip naming a directory past the limit", zipDirs(39), "more than 40 entries"},
		{"a zip naming a directory 5,000 times", zipDirs(5_000), "more than 40 entries"},
		{"one global header, as git archive writes", globals(1, 40), ""},
		{"global headers past the limit", globals(39, 40), "more than 40 entries"},
		{"global headers of a megabyte each", globals(3, 1000<<10), "unpacks to more than 1212416 bytes"},
	}
	files := map[string][]byte{}
	for i, tc := range cases {
		files[fmt.Sprint(i)] = tc.data
	}
	srv := serve(t, files)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := envWithClient(t, srv, install.Limits{MaxBytes: 1 << 20, MaxFiles: 20})
			_, err := e.in.Install(context.Background(), install.Request{Source: fmt.Sprintf("%s/%d", srv.URL, i), SHA256: sum(tc.data)})
			if tc.want == "" {
				require.NoError(t, err)
				e.nothingLeft("arch-kit@1.0.0")
				return
			}
			require.ErrorContains(t, err, tc.want)
			e.nothingLeft()
		})
	}
}

// A directory's hard links are refused as an archive's are: a file with
// another name, inside the package or out of it (a secret of the daemon's
// machine linked into a package's directory), is not copied.
func TestInstallDirectoryRefusesHardLinks(t *testing.T) {
	e := newEnv(t, install.Limits{})
	outside := filepath.Join(t.TempDir(), "secret.txt")
	require.NoError(t, os.WriteFile(outside, []byte("the machine's own"), 0o600))
	for _, tc := range []struct {
		name, link, target string
	}{
		{"a link to a file outside", "notes.md", outside},
		{"a link inside the package", "copy.md", "SKILL.md"},
		{"a link in a subdirectory", "docs/deep/notes.md", outside},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"manifest.yaml": goodManifest, "SKILL.md": "Use it."})
			target := tc.target
			if !filepath.IsAbs(target) {
				target = filepath.Join(dir, target)
			}
			link := filepath.Join(dir, filepath.FromSlash(tc.link))
			require.NoError(t, os.MkdirAll(filepath.Dir(link), 0o755))
			require.NoError(t, os.Link(target, link))
			_, err := e.install(dir)
			require.ErrorContains(t, err, "is a hard link")
			e.nothingLeft()
		})
	}
}

// hostileNames are entry names an archive may carry, by class, each with
// the words its refusal has ("" for names that are only unusual: they are
// written inside the package and nowhere else).
func hostileNames() []struct{ name, want string } {
	var out []struct{ name, want string }
	add := func(want string, names ...string) {
		for _, n := range names {
			out = append(out, struct{ name, want string }{n, want})
		}
	}
	for _, prefix := range []string{"", "a/", "a/b/", "./", "a/./", "a//"} {
		for _, up := range []string{"..", "../..", "../../..", strings.Repeat("../", 12) + ".."} {
			for _, rest := range []string{"", "/evil.txt", "/etc/passwd", "/a/../evil.txt"} {
				add("leaves the package (..)", prefix+up+rest)
			}
		}
	}
	add("leaves the package (..)", "a/b/../../../evil.txt", "a/../evil.txt", "./../evil.txt", "a/..", "a/b/c/../../../../evil.txt")
	add("is an absolute path", "/evil.txt", "//evil.txt", "/../evil.txt", "/tmp/evil.txt", "/etc/passwd", "C:/evil.txt", "c:evil.txt", "///evil.txt")
	add("a name with a backslash or NUL byte", `..\evil.txt`, `a\..\..\evil.txt`, `\evil.txt`, `C:\evil.txt`, `\\server\share\evil.txt`,
		`..\..\..\..\etc\passwd`, `a/..\..\evil.txt`, "evil.txt\x00.md", "a\x00/../../evil.txt", "\x00")
	add("a name with a control character or bytes that are not UTF-8", "evil\n.txt", "a\n/evil.txt", "evil.txt\r", "\x1b[31mevil.txt", "evil\ttxt",
		"evil\x7f.txt", "evil\u0085.txt", "evil\xff.txt", "a/\xc3(/evil.txt")
	add("the path is too long or too deep", strings.Repeat("a/", 64)+"evil.txt", strings.Repeat("d", 1025), strings.Repeat("abcdefgh/", 120)+"evil.txt")
	// Look-alikes of dots and slashes are names like any: inside.
	add("", "\u2024\u2024/evil.txt", "\uff0e\uff0e/evil.txt", "..\u2215evil.txt", "\u2025/evil.txt", ".\u200b./evil.txt",
		"%2e%2e/evil.txt", "%2e%2e%2fevil.txt", "..%2fevil.txt", "...", ".../evil.txt", "..evil.txt", "evil..txt", "a/..b/evil.txt",
		"\u002e\u0338\u002e/evil.txt", "\ufe52\ufe52/evil.txt", "\u2e2e/evil.txt", "~/evil.txt", "$HOME/evil.txt", "a b/evil.txt",
		"évité/naïve.md", "日本語/説明.md", "emoji-🧩.md")
	return out
}

// Every hostile name, in a tar and in a zip, is refused for what it is or
// written inside the package, and nothing reaches outside.
func TestInstallEntryNamesCorpus(t *testing.T) {
	man := entry{name: "manifest.yaml", body: goodManifest}
	skill := entry{name: "SKILL.md", body: "Use it."}
	names := hostileNames()
	files := map[string][]byte{}
	for i, n := range names {
		files[fmt.Sprintf("%d.zip", i)] = zipOf(t, []entry{man, skill, {name: n.name, body: "x"}})
		if !strings.Contains(n.name, "\x00") { // tar's writer refuses NUL, and its reader ends a name there
			files[fmt.Sprintf("%d.tgz", i)] = tgz(t, []entry{man, skill, {name: n.name, body: "x"}})
		}
	}
	srv := serve(t, files)
	e := envWithClient(t, srv, install.Limits{})
	parent := filepath.Dir(e.data)
	tried := 0
	for i, n := range names {
		for _, ext := range []string{"zip", "tgz"} {
			data, ok := files[fmt.Sprintf("%d.%s", i, ext)]
			if !ok {
				continue
			}
			tried++
			_, err := e.in.Install(context.Background(), install.Request{Source: fmt.Sprintf("%s/%d.%s", srv.URL, i, ext), SHA256: sum(data)})
			if n.want != "" {
				require.ErrorContains(t, err, n.want, "%q in a %s", n.name, ext)
				e.nothingLeft()
				continue
			}
			require.NoError(t, err, "%q in a %s", n.name, ext)
			got, err := os.ReadFile(filepath.Join(e.data, "packages", "arch-kit@1.0.0", filepath.FromSlash(n.name)))
			require.NoError(t, err, "%q is written inside the package", n.name)
			require.Equal(t, "x", string(got))
			_, err = e.in.Uninstall(context.Background(), "arch-kit")
			require.NoError(t, err)
			e.nothingLeft()
		}
	}
	require.Greater(t, tried, 250)
	for _, dir := range []string{parent, e.data, filepath.Join(e.data, "packages"), "/tmp"} {
		_, err := os.Stat(filepath.Join(dir, "evil.txt"))
		require.ErrorIs(t, err, fs.ErrNotExist, dir)
	}
	require.NoError(t, filepath.WalkDir(parent, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		require.NotEqual(t, "evil.txt", d.Name(), "%s is outside every package", p)
		return nil
	}))
}

// An archive's server that redirects is followed only to https: never to a
// plain http:// address, not even this machine's (a service listening
// there is not the server's to point the daemon at), and never round in
// circles. A refused redirect installs nothing.
func TestInstallFollowsRedirectsOnlyToHTTPS(t *testing.T) {
	data := tgz(t, []entry{{name: "manifest.yaml", body: goodManifest}, {name: "SKILL.md", body: "Use it."}})
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(data) }))
	t.Cleanup(local.Close)
	var srv *httptest.Server
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/kit.tgz":
			_, _ = w.Write(data)
		case "/moved":
			http.Redirect(w, r, srv.URL+"/kit.tgz", http.StatusFound)
		case "/to-local":
			http.Redirect(w, r, local.URL+"/kit.tgz", http.StatusFound)
		case "/to-localhost":
			http.Redirect(w, r, strings.Replace(local.URL, "127.0.0.1", "localhost", 1)+"/kit.tgz", http.StatusMovedPermanently)
		case "/to-http":
			http.Redirect(w, r, "http://example.com/kit.tgz", http.StatusTemporaryRedirect)
		case "/loop":
			http.Redirect(w, r, srv.URL+"/loop", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	client := srv.Client()
	e := newEnv(t, install.Limits{})
	in, err := install.New(context.Background(), install.Options{Registry: e.reg, Dir: filepath.Join(e.data, "packages"), HTTP: client})
	require.NoError(t, err)
	e.in = in
	for _, tc := range []struct{ path, want string }{
		{"/to-local", "which is not https"},
		{"/to-localhost", "which is not https"},
		{"/to-http", "which is not https"},
		{"/loop", "too many redirects"},
		{"/missing", "the server answered 404 Not Found"},
	} {
		_, err := e.in.Install(context.Background(), install.Request{Source: srv.URL + tc.path, SHA256: sum(data)})
		require.ErrorContains(t, err, tc.want, tc.path)
		e.nothingLeft()
	}
	_, err = e.in.Install(context.Background(), install.Request{Source: srv.URL + "/moved", SHA256: sum(data)})
	require.NoError(t, err, "a redirect to https is followed")
	e.nothingLeft("arch-kit@1.0.0")
}

// A git server that takes the connection and never answers ends the
// install at its timeout, with every program it started: the helpers git
// runs for http hold its output open, and would otherwise keep the install
// (and every install after it, which waits its turn) from ever ending.
func TestInstallFromAServerThatNeverAnswersEndsAtItsTimeout(t *testing.T) {
	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(hold) })
	e := newEnv(t, install.Limits{})
	in, err := install.New(context.Background(), install.Options{
		Registry: e.reg, Dir: filepath.Join(e.data, "packages"), Timeout: 2 * time.Second,
		Env: func() []string { return append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1") },
	})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := in.Install(context.Background(), install.Request{Source: "git+" + srv.URL + "/kit.git"})
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorContains(t, err, "git clone: context deadline exceeded")
	case <-time.After(time.Minute):
		t.Fatal("the install did not end at its timeout")
	}
	e.nothingLeft()
}
