package install_test

import (
	"archive/tar"
	"context"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
	"github.com/switchyard/switchyard/skills/install"
)

// npmRegistry is a registry speaking npm's protocol: a packument per
// package at /<name> and the tarballs it names.
func npmRegistry(t *testing.T, name string, versions map[string][]byte) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/"+name || r.URL.EscapedPath() == "/"+strings.ReplaceAll(name, "/", "%2f") {
			vs := map[string]any{}
			latest := ""
			for v, tarball := range versions {
				s1 := sha1.Sum(tarball)
				s512 := sha512.Sum512(tarball)
				vs[v] = map[string]any{"name": name, "version": v, "dist": map[string]any{
					"tarball":   srv.URL + "/tarballs/" + v + ".tgz",
					"shasum":    hex.EncodeToString(s1[:]),
					"integrity": "sha512-" + base64.StdEncoding.EncodeToString(s512[:]),
				}}
				if v > latest {
					latest = v
				}
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"name": name, "dist-tags": map[string]string{"latest": latest}, "versions": vs})
			return
		}
		if v, ok := strings.CutPrefix(r.URL.Path, "/tarballs/"); ok {
			if data, ok := versions[strings.TrimSuffix(v, ".tgz")]; ok {
				_, _ = w.Write(data)
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestInstallNPM(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Fatal("npm is needed: install Node.js (CI installs it)")
	}
	tarball := func(version string) []byte {
		return tgz(t, []entry{
			{name: "package/package.json", body: `{"name": "@acme/release-kit", "version": "` + version + `"}`},
			{name: "package/manifest.yaml", body: manifest("npm-kit", version, "skills:\n  - name: npm-skill\n    description: d\n    instructions: Do it.\n    allowed_tools: []\n    execution_protocol: [x]\n")},
			{name: "package/bin/run", body: "#!/bin/sh\n", typ: tar.TypeReg, mode: 0o755},
		})
	}
	srv := npmRegistry(t, "@acme/release-kit", map[string][]byte{"1.2.0": tarball("1.2.0"), "1.3.1": tarball("1.3.1"), "2.0.0": tarball("2.0.0")})
	e := newEnv(t, install.Limits{})
	home := t.TempDir()
	in, err := install.New(context.Background(), install.Options{
		Registry: e.reg, Dir: filepath.Join(e.data, "packages"),
		Load: skills.LoadOptions{Masker: bot.NewRedactor(), Permissions: permissions},
		// npm uses the registry it is configured for: here, through its
		// environment, as a deployment would through .npmrc.
		Env: func() []string {
			return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "npm_config_registry=" + srv.URL + "/",
				"npm_config_cache=" + filepath.Join(home, "cache"), "npm_config_update_notifier=false", "OPENAI_API_KEY=sk-never-passed"}
		},
	})
	require.NoError(t, err)
	res, err := in.Install(context.Background(), install.Request{Source: "npm:@acme/release-kit@^1.2"})
	require.NoError(t, err)
	require.Equal(t, "npm-kit", res.Package)
	require.Equal(t, "1.3.1", res.Version, "the highest version in the range")
	require.True(t, strings.HasPrefix(res.Resolved, "@acme/release-kit@1.3.1 sha512-"), res.Resolved)
	info, err := os.Stat(filepath.Join(e.data, "packages", "npm-kit@1.3.1", "bin", "run"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), info.Mode().Perm())
	_, ok := e.reg.Skill("npm-skill")
	require.True(t, ok)

	_, err = in.Install(context.Background(), install.Request{Source: "npm:@acme/release-kit@^9"})
	require.EqualError(t, err, "npm pack: No matching version found for @acme/release-kit@^9.")
	_, err = in.Install(context.Background(), install.Request{Source: "npm:@acme/nothing-here"})
	require.ErrorContains(t, err, "npm pack")
	e.nothingLeft("npm-kit@1.3.1")
}
