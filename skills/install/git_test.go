package install_test

import (
	"context"
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

// gitIn runs git in dir with a fixed author and no system or user config,
// and returns what it printed.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_ALLOW_PROTOCOL=file")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", args, out)
	return strings.TrimSpace(string(out))
}

// gitSkillManifest is a package with one skill whose instructions are in
// SKILL.md.
func gitSkillManifest(version string) string {
	return manifest("ref-kit", version, "skills:\n  - name: ref-skill\n    description: d\n    instructions_file: SKILL.md\n    allowed_tools: []\n    execution_protocol: [x]\n")
}

// A git source's ref, as a person writes it: each kind of tag, a branch, a
// name that is both, a submodule, files kept in Git LFS. What installs is
// the version the ref names; what is refused says why and leaves nothing.
func TestInstallGitRefs(t *testing.T) {
	repo := t.TempDir()
	commit := func(version string, files map[string]string) {
		writeTree(t, repo, map[string]string{"manifest.yaml": gitSkillManifest(version), "SKILL.md": "Version " + version + "."})
		writeTree(t, repo, files)
		gitIn(t, repo, "add", "-A")
		gitIn(t, repo, "commit", "-q", "-m", "version "+version)
	}
	gitIn(t, repo, "init", "-q", "-b", "main")
	commit("1.0.0", nil)
	gitIn(t, repo, "tag", "v1.0.0") // lightweight
	commit("1.1.0", nil)
	gitIn(t, repo, "tag", "-a", "v1.1.0", "-m", "release 1.1.0") // annotated
	commit("1.2.0", nil)
	gitIn(t, repo, "tag", "twin") // a tag and, below, a branch of one name
	gitIn(t, repo, "checkout", "-q", "-b", "twin")
	commit("1.3.0", nil)
	gitIn(t, repo, "checkout", "-q", "-b", "lfs", "main")
	// A file kept in Git LFS is a pointer in the repository; without the
	// LFS content the package would load the pointer as its instructions.
	commit("1.4.0", map[string]string{
		".gitattributes": "SKILL.md filter=lfs diff=lfs merge=lfs -text\n",
		"SKILL.md":       "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n",
	})
	gitIn(t, repo, "checkout", "-q", "-b", "lfs-manifest", "main")
	commit("1.4.1", map[string]string{
		".gitattributes": "manifest.yaml filter=lfs diff=lfs merge=lfs -text\n",
		"manifest.yaml":  "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 321\n",
	})
	gitIn(t, repo, "checkout", "-q", "-b", "lfs-asset", "main")
	commit("1.5.0", map[string]string{
		".gitattributes": "*.png filter=lfs diff=lfs merge=lfs -text\n",
		"logo.png":       "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n",
	})
	gitIn(t, repo, "checkout", "-q", "main")
	// A submodule: git archive leaves it out, as a package's files are
	// the repository's own.
	sub := t.TempDir()
	gitIn(t, sub, "init", "-q", "-b", "main")
	writeTree(t, sub, map[string]string{"vendored.md": "Not the package's."})
	gitIn(t, sub, "add", "-A")
	gitIn(t, sub, "commit", "-q", "-m", "sub")
	gitIn(t, repo, "-c", "protocol.file.allow=always", "submodule", "--quiet", "add", "file://"+sub, "vendor")
	commit("2.0.0", nil)
	gitIn(t, repo, "checkout", "-q", "-b", "in-sub")
	commit("2.1.0", nil)
	writeTree(t, repo, map[string]string{"manifest.yaml": strings.Replace(gitSkillManifest("2.1.0"), "SKILL.md", "vendor/vendored.md", 1)})
	gitIn(t, repo, "commit", "-q", "-am", "instructions in the submodule")
	gitIn(t, repo, "checkout", "-q", "main")

	cases := []struct {
		name, ref string
		version   string // installed; "" when refused
		want      string // the refusal
	}{
		{name: "a lightweight tag", ref: "#v1.0.0", version: "1.0.0"},
		{name: "an annotated tag", ref: "#v1.1.0", version: "1.1.0"},
		{name: "a missing tag", ref: "#v9.9.9", want: `no tag, branch or commit "v9.9.9"`},
		{name: "a branch", ref: "#lfs-asset", version: "1.5.0"},
		{name: "a tag and a branch of one name: the tag, as git reads it", ref: "#twin", version: "1.2.0"},
		{name: "the branch of that name, spelled out", ref: "#origin/twin", version: "1.3.0"},
		{name: "the default branch, with a submodule", version: "2.0.0"},
		{name: "instructions inside a submodule", ref: "#in-sub", want: "vendor/vendored.md is not in the package"},
		{name: "instructions kept in Git LFS", ref: "#lfs", want: "SKILL.md is a Git LFS pointer, not the file it stands for"},
		{name: "the manifest kept in Git LFS", ref: "#lfs-manifest", want: "manifest.yaml:1: the manifest is a Git LFS pointer, not the file it stands for"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, install.Limits{})
			res, err := e.install("git+file://" + repo + tc.ref)
			if tc.want != "" {
				require.ErrorContains(t, err, tc.want)
				e.nothingLeft()
				_, ok := e.reg.Skill("ref-skill")
				require.False(t, ok, "the registry is untouched")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.version, res.Version)
			s, ok := e.reg.Skill("ref-skill")
			require.True(t, ok)
			require.Equal(t, "Version "+tc.version+".", s.Instructions)
			e.nothingLeft("ref-kit@" + tc.version)
			_, err = os.Stat(filepath.Join(e.data, "packages", "ref-kit@"+tc.version, "vendor", "vendored.md"))
			require.ErrorIs(t, err, os.ErrNotExist, "a submodule's files are not the package's")
		})
	}
}

// With a relative data directory (data_dir: data, as the default config
// has it) every kind of source installs, and the lock records where the
// package is, whatever directory the daemon is started from next.
func TestInstallIntoARelativeDirectory(t *testing.T) {
	repo, _ := gitRepo(t)
	e := newEnv(t, install.Limits{})
	t.Chdir(e.data)
	home := t.TempDir()
	tarball := tgz(t, []entry{
		{name: "package/package.json", body: `{"name": "rel-kit", "version": "1.0.0"}`},
		{name: "package/manifest.yaml", body: manifest("npm-kit", "1.0.0", "skills:\n  - name: npm-skill\n    description: d\n    instructions: Do it.\n    allowed_tools: []\n    execution_protocol: [x]\n")},
	})
	srv := npmRegistry(t, "rel-kit", map[string][]byte{"1.0.0": tarball})
	in, err := install.New(context.Background(), install.Options{
		Registry: e.reg, Dir: "packages",
		Load: skills.LoadOptions{Masker: bot.NewRedactor(), Permissions: permissions},
		Env: func() []string {
			return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "npm_config_registry=" + srv.URL + "/",
				"npm_config_cache=" + filepath.Join(home, "cache"), "npm_config_update_notifier=false"}
		},
	})
	require.NoError(t, err)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"manifest.yaml": goodManifest, "SKILL.md": "Use it."})
	for _, source := range []string{"git+file://" + repo + "#v1.0.0", "npm:rel-kit", dir} {
		res, err := in.Install(context.Background(), install.Request{Source: source})
		require.NoError(t, err, source)
		rec, ok := e.reg.Record(res.Package)
		require.True(t, ok)
		require.Equal(t, filepath.Join(e.data, "packages", res.Package+"@"+res.Version), rec.Dir, "the lock records an absolute directory")
	}
	e.nothingLeft("arch-kit@1.0.0", "git-kit@1.0.0", "npm-kit@1.0.0")

	// An upgrade removes the version it replaces; an uninstall, the last.
	// A repository given as a relative path is the one from here.
	rel, err := filepath.Rel(e.data, repo)
	require.NoError(t, err)
	res, err := in.Install(context.Background(), install.Request{Source: "git+" + rel + "#next"})
	require.NoError(t, err)
	require.Equal(t, "git+"+repo+"#next", res.Source)
	_, err = in.Uninstall(context.Background(), "npm-kit")
	require.NoError(t, err)
	e.nothingLeft("arch-kit@1.0.0", "git-kit@1.1.0")
}
