package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The acceptance of skills validate and compose, through the real binary
// and the daemon's API.
func TestSkillsValidateAndCompose(t *testing.T) {
	dir := t.TempDir()
	p := serve(t, dir, freeAddr(t))

	r := run(t, dir, p.env(), "skills", "validate", "opencode-implementer")
	require.Equal(t, 1, r.code, r.stderr)
	require.Equal(t, "missing_companion: opencode-implementer requires specification-engine, which is not in the set; add it\n", r.stdout)

	r = run(t, dir, p.env(), "skills", "validate", "opencode-implementer", "--json")
	require.Equal(t, 1, r.code, r.stderr)
	var res struct {
		Valid  bool
		Errors []struct {
			Code, Message string
			Skills        []string
		}
		Warnings []string
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	require.False(t, res.Valid)
	require.Len(t, res.Errors, 1)
	require.Equal(t, "missing_companion", res.Errors[0].Code)
	require.Equal(t, []string{"opencode-implementer", "specification-engine"}, res.Errors[0].Skills)

	r = run(t, dir, p.env(), "skills", "validate", "opencode-implementer", "specification-engine")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "valid: opencode-implementer, specification-engine\n", r.stdout)
	r = run(t, dir, p.env(), "skills", "validate", "opencode-implementer", "specification-engine", "opencode-implementer")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "valid: opencode-implementer, specification-engine\n", r.stdout, "a name given twice counts once")

	// Installed skills whose tools cannot work as written: warned of at
	// install and with the set, which stays valid (exit 0).
	kit := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(kit, "manifest.yaml"), []byte(`name: tool-kit
version: 1.0.0
description: Skills naming tools.
skills:
  - name: writer
    description: Writes files.
    instructions: Write.
    allowed_tools: [reed_file, write_file]
    execution_protocol: [Write it with write_file.]
`), 0o644))
	r = run(t, dir, p.env(), "skills", "install", kit, "--enable", "global")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "warning: skill writer: allowed_tools names reed_file, which is no tool here (did you mean read_file?); it grants nothing\n")

	// A package agent the daemon cannot run is said so at install, not
	// only in the daemon's log: it is left out of the agents.
	agentKit := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(agentKit, "manifest.yaml"), []byte(`name: agent-kit
version: 1.0.0
description: An agent naming a tool that is not.
agents:
  - name: reeder
    description: Reads.
    instructions: Read.
    tools: [reed_file]
`), 0o644))
	r = run(t, dir, p.env(), "skills", "install", agentKit, "--enable", "global")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `warning: agent reeder cannot run with this configuration (manifest.yaml:8: tools: unknown tool "reed_file"); it is left out until it can`+"\n")
	r = run(t, dir, p.env(), "agents", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, "reeder")
	r = run(t, dir, p.env(), "skills", "validate", "writer", "release-notes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "warning: skill writer: allowed_tools names reed_file, which is no tool here (did you mean read_file?); it grants nothing\n"+
		"warning: skill writer: step 1 names tool write_file, which release-notes forbids; loaded together, that step cannot be taken\n"+
		"valid: writer, release-notes\n", r.stdout)

	r = run(t, dir, p.env(), "skills", "validate", "nope", "release-notes")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stdout, `unknown_skill: unknown skill "nope"`)

	r = run(t, dir, p.env(), "skills", "compose", "opencode-implementer", "specification-engine", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var comp map[string][]string
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &comp))
	require.ElementsMatch(t, []string{"skills", "allowed_tools", "forbidden_tools"}, keysOfStrings(comp))
	require.Equal(t, []string{"opencode-implementer", "specification-engine"}, comp["skills"])
	require.Subset(t, comp["forbidden_tools"], []string{"write_file", "edit_file"})
	require.NotContains(t, comp["allowed_tools"], "write_file")
	require.NotContains(t, comp["allowed_tools"], "edit_file")
	require.Contains(t, comp["allowed_tools"], "spec_kit")

	r = run(t, dir, p.env(), "skills", "compose", "opencode-implementer", "specification-engine")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "forbidden: edit_file, write_file\n")
	r = run(t, dir, p.env(), "skills", "compose", "nope")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, `unknown skill "nope" (HTTP 404)`)
}

func keysOfStrings(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A directory package installed through the CLI adds its skill, agent,
// command tool and /command to the registry, is enabled nowhere until
// enabled, follows scopes, and stays across a restart.
func TestSkillsInstallEnableAndRestart(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	p := serve(t, dir, addr)
	example, err := filepath.Abs(filepath.Join("..", "..", "examples", "release-helper"))
	require.NoError(t, err)

	r := run(t, dir, p.env(), "skills", "list", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var list []map[string]string
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list, 5, "the built-in skills")
	require.ElementsMatch(t, []string{"name", "package", "version", "description"}, keysOfMap(list[0]))

	// A relative directory is the one next to the CLI.
	rel, err := filepath.Rel(dir, example)
	require.NoError(t, err)
	r = run(t, dir, p.env(), "skills", "install", rel)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "installed release-helper 1.0.0 from "+example+" (sha256:")
	require.Contains(t, r.stdout, "  skills:   changelog-draft\n")
	require.Contains(t, r.stdout, "  agents:   release-writer\n")
	require.Contains(t, r.stdout, "  tools:    changelog_since\n")
	require.Contains(t, r.stdout, "  commands: /release-notes\n")
	require.Contains(t, r.stdout, "enabled nowhere yet: switchyard skills enable release-helper --scope SCOPE")

	r = run(t, dir, p.env(), "skills", "search", "changelog", "draft")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "changelog-draft  release-helper  1.0.0")
	r = run(t, dir, p.env(), "skills", "show", "changelog-draft")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "allowed tools:   changelog_since, read_file")
	r = run(t, dir, p.env(), "skills", "show", "release-helper")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "release-helper 1.0.0 (installed)")
	require.Contains(t, r.stdout, "commands:  /release-notes")

	effective := func(args ...string) map[string]map[string]any {
		t.Helper()
		r := run(t, dir, p.env(), append([]string{"skills", "effective", "--json"}, args...)...)
		require.Equal(t, 0, r.code, r.stderr)
		var rows []map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &rows))
		out := map[string]map[string]any{}
		for _, row := range rows {
			require.ElementsMatch(t, []string{"name", "enabled", "scope"}, keysOfAny(row))
			out[row["name"].(string)] = row
		}
		return out
	}
	e := effective("--repo", "acme/web", "--agent", "coder")
	require.Equal(t, map[string]any{"name": "changelog-draft", "enabled": false, "scope": "default"}, e["changelog-draft"])
	require.Equal(t, map[string]any{"name": "release-notes", "enabled": true, "scope": "default"}, e["release-notes"])

	r = run(t, dir, p.env(), "skills", "enable", "release-helper", "--scope", "repo:acme/web", "--set", "changelog_file=docs/CHANGES.md")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "enabled release-helper at repo:acme/web\n", r.stdout)
	r = run(t, dir, p.env(), "skills", "disable", "changelog-draft", "--scope", "agent:coder")
	require.Equal(t, 0, r.code, r.stderr)
	e = effective("--repo", "acme/web", "--agent", "coder")
	require.Equal(t, map[string]any{"name": "changelog-draft", "enabled": false, "scope": "agent:coder"}, e["changelog-draft"])
	e = effective("--repo", "acme/web", "--agent", "docs")
	require.Equal(t, map[string]any{"name": "changelog-draft", "enabled": true, "scope": "repo:acme/web"}, e["changelog-draft"])

	r = run(t, dir, p.env(), "skills", "enable", "release-helper", "--scope", "repo:acme/web", "--set", "unknown_key=1")
	require.Equal(t, 2, r.code, "a setting the package does not take is bad input, as a scope no kind has is")
	require.Contains(t, r.stderr, "settings of package release-helper")
	r = run(t, dir, p.env(), "skills", "enable", "release-helper", "--scope", "team:x")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, `scope "team:x": unknown kind`)
	r = run(t, dir, p.env(), "skills", "enable", "no-such-thing", "--scope", "global")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, `no package or skill "no-such-thing" (HTTP 404)`)

	r = run(t, dir, p.env(), "skills", "packages", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var lock []struct {
		Name, Version, Source, Digest string
		Builtin                       bool
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &lock))
	var found bool
	for _, l := range lock {
		if l.Name == "release-helper" {
			found = true
			require.Equal(t, example, l.Source)
			require.True(t, strings.HasPrefix(l.Digest, "sha256:"))
		}
	}
	require.True(t, found, r.stdout)

	// The daemon keeps it across a restart, enabled where it was.
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait())
	p = serve(t, dir, addr)
	e = effective("--repo", "acme/web", "--agent", "docs")
	require.Equal(t, true, e["changelog-draft"]["enabled"])

	// Uninstalling removes its files and its settings.
	r = run(t, dir, p.env(), "skills", "uninstall", "release-helper")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "uninstalled release-helper 1.0.0\n", r.stdout)
	entries, err := os.ReadDir(filepath.Join(dir, "data", "packages"))
	require.NoError(t, err)
	require.Empty(t, entries)
	r = run(t, dir, p.env(), "skills", "uninstall", "release-notes")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "package release-notes is built in and cannot be uninstalled; disable it instead (HTTP 409)")

	r = run(t, dir, p.env(), "skills", "install", "https://example.com/x.tar.gz")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "an archive needs --sha256")
}

// The skills section of the config decides at its scope, and the CLI may not
// contradict it; a reload with a setting naming nothing installed is
// refused at its line.
func TestSkillsConfigSection(t *testing.T) {
	dir := t.TempDir()
	cfg := "skills:\n  settings:\n    - name: release-notes\n      scope: org:acme\n      enabled: false\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	p := serve(t, dir, freeAddr(t))
	r := run(t, dir, p.env(), "skills", "effective", "--repo", "acme/web")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `release-notes\s+false\s+org:acme\s+config.yaml:3`, r.stdout)

	r = run(t, dir, p.env(), "skills", "enable", "release-notes", "--scope", "org:acme")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "config.yaml:3 sets release-notes at org:acme (enabled: false); change it there")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg+"    - name: release-helpr\n      scope: global\n      enabled: true\n"), 0o600))
	r = run(t, dir, p.env(), "config", "reload")
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, `config.yaml:6: skills.settings[1].name: no package or skill "release-helpr"`)

	// The same config refuses to start.
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait())
	r = run(t, dir, hermeticEnv(), "serve", "--listen", freeAddr(t))
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, `config.yaml:6: skills.settings[1].name: no package or skill "release-helpr"`)
}

func keysOfMap(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func keysOfAny(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Slack's /switchyard skills lists the skills of every package.
func TestSkillsInSlack(t *testing.T) {
	p, _, _ := slackDaemon(t, time.Minute)
	body := url.Values{"command": {"/switchyard"}, "text": {"skills"}, "user_id": {"UANA01"}, "channel_id": {"C1"},
		"team_id": {"T1"}, "trigger_id": {"t-skills"}}.Encode()
	req, err := http.NewRequest(http.MethodPost, "http://"+p.addr+"/slack/commands", strings.NewReader(body))
	require.NoError(t, err)
	stamp := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(e2eSigningSecret))
	fmt.Fprintf(mac, "v0:%s:%s", stamp, body)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", stamp)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var answer struct {
		ResponseType string `json:"response_type"`
		Text         string `json:"text"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&answer))
	require.Equal(t, "ephemeral", answer.ResponseType)
	require.Equal(t, "*Skills*: `code-review-checklist`, `incident-triage`, `opencode-implementer`, `release-notes`, `specification-engine`", answer.Text)
}

// A package from git installs through a daemon started as the README
// starts it (data_dir: data, relative): at a tag, and again at its branch.
func TestSkillsInstallFromGitWithTheDefaultDataDirectory(t *testing.T) {
	repo := t.TempDir()
	example, err := filepath.Abs(filepath.Join("..", "..", "examples", "release-helper"))
	require.NoError(t, err)
	require.NoError(t, os.CopyFS(repo, os.DirFS(example)))
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "release-helper 1.0.0")
	git("tag", "-a", "v1.0.0", "-m", "1.0.0")
	commit := git("rev-parse", "HEAD")

	dir := t.TempDir()
	p := serve(t, dir, freeAddr(t))
	r := run(t, dir, p.env(), "skills", "install", "git+file://"+repo+"#v1.0.0", "--enable", "repo:acme/web")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "installed release-helper 1.0.0 from git+file://"+repo+"#v1.0.0")
	r = run(t, dir, p.env(), "skills", "packages", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var lock []struct{ Name, Resolved string }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &lock))
	require.Contains(t, lock, struct{ Name, Resolved string }{"release-helper", commit}, "the lock names the tag's commit")
	entries, err := os.ReadDir(filepath.Join(dir, "data", "packages"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "the package's directory alone: no staging left")
	require.Equal(t, "release-helper@1.0.0", entries[0].Name())
}

// The same package installed again, changed, upgraded, and uninstalled
// while it is enabled, through the CLI: each says what it did, and what
// is left is one directory per installed version, then none.
func TestSkillsReinstallUpgradeAndUninstallWhileEnabled(t *testing.T) {
	dir := t.TempDir()
	p := serve(t, dir, freeAddr(t))
	kit := t.TempDir()
	write := func(version, instructions string) {
		t.Helper()
		require.NoError(t, os.WriteFile(filepath.Join(kit, "manifest.yaml"), []byte(`name: again-kit
version: `+version+`
description: A kit installed again.
skills:
  - name: again
    description: Does it again.
    instructions: `+instructions+`
    allowed_tools: [read_file]
    execution_protocol: [Read with read_file.]
`), 0o644))
	}
	packages := func() []string {
		t.Helper()
		entries, err := os.ReadDir(filepath.Join(dir, "data", "packages"))
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	install := func(args ...string) string {
		t.Helper()
		r := run(t, dir, p.env(), append([]string{"skills", "install", kit}, args...)...)
		require.Equal(t, 0, r.code, r.stderr)
		return strings.SplitN(r.stdout, " (sha256:", 2)[0]
	}
	write("1.0.0", "Do it.")
	require.Equal(t, "installed again-kit 1.0.0 from "+kit, install())
	require.Equal(t, "again-kit 1.0.0 is installed already", install())
	write("1.0.0", "Do it once more.")
	require.Equal(t, "reinstalled again-kit 1.0.0 with other files, from "+kit, install())
	require.Equal(t, []string{"again-kit@1.0.0"}, packages())
	write("1.1.0", "Do it better.")
	require.Equal(t, "installed again-kit 1.1.0 over 1.0.0, from "+kit, install("--enable", "repo:acme/web"))
	require.Equal(t, []string{"again-kit@1.1.0"}, packages(), "the version replaced is gone")
	r := run(t, dir, p.env(), "skills", "show", "again")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "Do it better.")
	r = run(t, dir, p.env(), "skills", "effective", "--repo", "acme/web")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `again\s+true\s+repo:acme/web`, r.stdout)

	r = run(t, dir, p.env(), "skills", "uninstall", "again-kit")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "uninstalled again-kit 1.1.0\n", r.stdout)
	require.Empty(t, packages())
	r = run(t, dir, p.env(), "skills", "effective", "--repo", "acme/web")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, "again")
	r = run(t, dir, p.env(), "skills", "validate", "again")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stdout, `unknown_skill: unknown skill "again"`)
	// Installed again, it is enabled nowhere: its settings went with it.
	install()
	r = run(t, dir, p.env(), "skills", "effective", "--repo", "acme/web")
	require.Regexp(t, `again\s+false\s+default`, r.stdout)
}
