package tools_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
)

// confined is a workspace decided by the real policy engine, with a
// directory outside it holding what no file tool may reach.
type confined struct {
	ws, outside string
	r           *tools.Registry
	engine      *policy.Engine
}

const outsideText = "OUTSIDE-hunter2"

func newConfined(t *testing.T) *confined {
	t.Helper()
	e, err := policy.New(policy.Options{})
	require.NoError(t, err)
	c := &confined{ws: workspace(t), outside: t.TempDir(), r: registry(t), engine: e}
	c.write(t, "README.md", "# demo\n")
	c.write(t, ".env", "API_TOKEN=SEKRIT-env\n")
	c.write(t, "deploy/.env.production", "DB=SEKRIT-prod\n")
	c.write(t, "certs/server.key", "SEKRIT-key\n")
	c.write(t, ".env.example", "API_TOKEN=\n")
	require.NoError(t, os.WriteFile(filepath.Join(c.outside, "o.txt"), []byte(outsideText+"\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(c.outside, "dir"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(c.outside, "dir", "f.txt"), []byte(outsideText+"\n"), 0o644))
	return c
}

func (c *confined) write(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(c.ws, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

func (c *confined) toolset(profile string) *tools.Toolset {
	return tools.NewToolset(c.r, tools.Scope{Agent: "a", Profile: profile}, tools.ToolsetOptions{Policy: c.engine})
}

// unchanged checks the outside files still hold what they held.
func (c *confined) unchanged(t *testing.T) {
	t.Helper()
	for _, f := range []string{"o.txt", "dir/f.txt"} {
		got, err := os.ReadFile(filepath.Join(c.outside, f))
		require.NoError(t, err)
		require.Equal(t, outsideText+"\n", string(got), f)
	}
	entries, err := os.ReadDir(c.outside)
	require.NoError(t, err)
	require.Len(t, entries, 2, "nothing new is created outside the workspace")
}

var profiles = []string{"read-only", "contributor"}

func TestFileToolPathsStayInTheWorkspace(t *testing.T) {
	c := newConfined(t)
	rel, err := filepath.Rel(c.ws, filepath.Join(c.outside, "o.txt"))
	require.NoError(t, err)
	for _, p := range []string{
		"..", "../", rel, filepath.Join(c.outside, "o.txt"), "//" + filepath.Join(c.outside, "o.txt"),
		"./../" + filepath.Base(c.ws) + "/../" + filepath.Base(c.ws) + "/" + rel,
		"/proc/self/root" + filepath.Join(c.outside, "o.txt"), "/proc/self/cwd/README.md", "/dev/fd/0",
		"~/../../" + rel, "README.md\x00.txt", "README.md\x00/../" + rel,
		strings.Repeat("a/../", 2000) + rel, "\\..\\" + rel,
	} {
		for _, profile := range profiles {
			ts := c.toolset(profile)
			for _, call := range []struct{ tool, input string }{
				{"read_file", jsonObj("path", p)},
				{"list_directory", jsonObj("path", p)},
				{"search_files", jsonObj("path", p, "pattern", "OUTSIDE")},
				{"write_file", jsonObj("path", p, "content", "pwned")},
				{"edit_file", jsonObj("path", p, "old_string", "OUTSIDE", "new_string", "pwned")},
			} {
				res := exec(t, ts, c.ws, call.tool, call.input)
				require.True(t, res.Refused, "%s %s %q: %s", profile, call.tool, p, res.Output)
				require.NotContains(t, res.Output, "hunter2")
				require.NotContains(t, res.Output, c.ws, "a refusal never shows the host's path")
			}
		}
	}
	c.unchanged(t)
}

func TestFileToolsRefuseLinksOut(t *testing.T) {
	c := newConfined(t)
	link := func(target, name string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(c.ws, name)), 0o755))
		require.NoError(t, os.Symlink(target, filepath.Join(c.ws, name)))
	}
	link(filepath.Join(c.outside, "o.txt"), "to-file")
	link(c.outside, "to-dir")
	link(filepath.Join(c.outside, "missing"), "dangling")
	link("to-dir", "chain")
	link("../to-dir/dir", "nested/parent")
	require.NoError(t, os.Link(filepath.Join(c.outside, "o.txt"), filepath.Join(c.ws, "hard.txt")))
	for _, profile := range profiles {
		ts := c.toolset(profile)
		for _, call := range []struct{ tool, input string }{
			{"read_file", `{"path":"to-file"}`},
			{"read_file", `{"path":"to-dir/o.txt"}`},
			{"read_file", `{"path":"chain/dir/f.txt"}`},
			{"read_file", `{"path":"nested/parent/f.txt"}`},
			{"read_file", `{"path":"hard.txt"}`},
			{"read_file", `{"path":"dangling"}`},
			{"list_directory", `{"path":"chain"}`},
			{"list_directory", `{"path":"nested/parent"}`},
			{"search_files", `{"pattern":"OUTSIDE","path":"chain"}`},
			{"write_file", `{"path":"to-file","content":"pwned"}`},
			{"write_file", `{"path":"hard.txt","content":"pwned"}`},
			{"write_file", `{"path":"dangling","content":"pwned"}`},
			{"write_file", `{"path":"chain/new/x.txt","content":"pwned"}`},
			{"write_file", `{"path":"nested/parent/x.txt","content":"pwned"}`},
			{"edit_file", `{"path":"hard.txt","old_string":"OUTSIDE","new_string":"pwned"}`},
			{"edit_file", `{"path":"chain/o.txt","old_string":"OUTSIDE","new_string":"pwned"}`},
		} {
			res := exec(t, ts, c.ws, call.tool, call.input)
			require.True(t, res.Refused, "%s %s %s: %s", profile, call.tool, call.input, res.Output)
			require.NotContains(t, res.Output, "hunter2")
		}
		// Walking the whole workspace neither follows a link out nor reads
		// a hard link's other name.
		res := exec(t, ts, c.ws, "search_files", `{"pattern":"OUTSIDE"}`)
		require.False(t, res.Refused, res.Output)
		require.NotContains(t, res.Output, "hunter2")
	}
	c.unchanged(t)
}

func TestHardLinkInsideTheWorkspaceIsNotASecretsBackDoor(t *testing.T) {
	c := newConfined(t)
	require.NoError(t, os.Link(filepath.Join(c.ws, ".env"), filepath.Join(c.ws, "notes.txt")))
	for _, profile := range profiles {
		ts := c.toolset(profile)
		for _, call := range []struct{ tool, input string }{
			{"read_file", `{"path":".env"}`},
			{"read_file", `{"path":"notes.txt"}`},
			{"edit_file", `{"path":"notes.txt","old_string":"SEKRIT","new_string":"x"}`},
		} {
			res := exec(t, ts, c.ws, call.tool, call.input)
			require.True(t, res.Refused, "%s %s %s: %s", profile, call.tool, call.input, res.Output)
			require.NotContains(t, res.Output, "SEKRIT")
		}
	}
	got, err := os.ReadFile(filepath.Join(c.ws, ".env"))
	require.NoError(t, err)
	require.Equal(t, "API_TOKEN=SEKRIT-env\n", string(got))
}

func TestSearchFilesReadsNoSecretReadFileRefuses(t *testing.T) {
	c := newConfined(t)
	for _, profile := range profiles {
		ts := c.toolset(profile)
		for _, p := range []string{".env", "deploy/.env.production", "certs/server.key", ".ENV", "certs/SERVER.Key"} {
			res := exec(t, ts, c.ws, "read_file", jsonObj("path", p))
			require.True(t, res.Refused, "%s read_file %s: %s", profile, p, res.Output)
		}
		for _, in := range []string{
			`{"pattern":"SEKRIT"}`,
			`{"pattern":"SEKRIT","glob":"**/.env*"}`,
			`{"pattern":"SEKRIT","path":"certs"}`,
			`{"pattern":"^DB=S","path":"deploy"}`,
		} {
			res := exec(t, ts, c.ws, "search_files", in)
			require.False(t, res.Refused, res.Output)
			require.Contains(t, res.Output, "no matches", "%s search_files %s", profile, in)
			require.Regexp(t, `not searched: \d+ files? that looks? like (a )?secrets?`, res.Output)
			require.NotContains(t, res.Output, "SEKRIT")
		}
		// An example file is no secret and is searched.
		res := exec(t, ts, c.ws, "search_files", `{"pattern":"API_TOKEN=$"}`)
		require.Contains(t, res.Output, ".env.example:1: API_TOKEN=")
	}
}

// jsonObj builds a JSON object of string fields.
func jsonObj(kv ...string) string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	raw, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(raw)
}

func TestSpecKitRefusesHardLinks(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(ws, tools.SpecDir), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "o.md"), []byte(outsideText+"\n"), 0o644))
	require.NoError(t, os.Link(filepath.Join(outside, "o.md"), filepath.Join(ws, tools.SpecDir, "x.md")))
	kit := tools.NewSpecKit(time.Now)
	cc := tools.CallContext{Workspace: ws}
	for _, in := range []string{
		`{"action":"read","name":"x"}`,
		`{"action":"update","name":"x","title":"pwned"}`,
	} {
		out, err := kit.Run(context.Background(), cc, json.RawMessage(in))
		var refused *tools.RefusedError
		require.ErrorAs(t, err, &refused, "%s: %s", in, out)
		require.NotContains(t, err.Error(), "hunter2")
	}
	out, err := kit.Run(context.Background(), cc, json.RawMessage(`{"action":"list"}`))
	require.NoError(t, err)
	require.NotContains(t, out, "hunter2")
	got, err := os.ReadFile(filepath.Join(outside, "o.md"))
	require.NoError(t, err)
	require.Equal(t, outsideText+"\n", string(got))
}

func TestEditFileIsNoOracleForASecret(t *testing.T) {
	c := newConfined(t)
	ts := c.toolset("contributor")
	for _, in := range []string{
		`{"path":".env","old_string":"API_TOKEN=SE","new_string":"API_TOKEN=x"}`,
		`{"path":".env","old_string":"API_TOKEN=X","new_string":"x"}`,
		`{"path":"certs/server.key","old_string":"S","new_string":"x","replace_all":true}`,
	} {
		res := exec(t, ts, c.ws, "edit_file", in)
		require.True(t, res.Refused, "%s: %s", in, res.Output)
		require.Contains(t, res.Output, "looks like a secret")
	}
	got, err := os.ReadFile(filepath.Join(c.ws, ".env"))
	require.NoError(t, err)
	require.Equal(t, "API_TOKEN=SEKRIT-env\n", string(got))
}

// A named pipe with nothing at its other end would hold a tool that opened
// it forever; every file tool answers instead.
func TestFileToolsDoNotWaitOnANamedPipe(t *testing.T) {
	c := newConfined(t)
	require.NoError(t, syscall.Mkfifo(filepath.Join(c.ws, "pipe"), 0o644))
	ts := c.toolset("contributor")
	for _, call := range []struct{ tool, input string }{
		{"read_file", `{"path":"pipe"}`},
		{"edit_file", `{"path":"pipe","old_string":"a","new_string":"b"}`},
		{"list_directory", `{"path":"pipe"}`},
		{"list_directory", `{"path":"pipe","recursive":true}`},
	} {
		res := exec(t, ts, c.ws, call.tool, call.input)
		require.True(t, res.Refused, "%s: %s", call.tool, res.Output)
		require.Contains(t, res.Output, `"pipe" is not a regular file (a named pipe)`)
	}
	res := exec(t, ts, c.ws, "write_file", `{"path":"pipe","content":"x"}`)
	require.True(t, res.IsError, res.Output)
	res = exec(t, ts, c.ws, "search_files", `{"pattern":"x"}`)
	require.False(t, res.Refused, res.Output)
}

// A file judged secret by where it is (.aws/credentials) stays one when
// search_files reaches it through a link to its directory.
func TestSearchFilesJudgesASecretByWhereItIs(t *testing.T) {
	c := newConfined(t)
	c.write(t, ".aws/credentials", "aws_secret_access_key = SEKRIT-aws\n")
	require.NoError(t, os.Symlink(".aws", filepath.Join(c.ws, "cloud")))
	for _, profile := range profiles {
		ts := c.toolset(profile)
		res := exec(t, ts, c.ws, "read_file", `{"path":"cloud/credentials"}`)
		require.True(t, res.Refused, res.Output)
		res = exec(t, ts, c.ws, "search_files", `{"pattern":"SEKRIT","path":"cloud"}`)
		require.False(t, res.Refused, res.Output)
		require.NotContains(t, res.Output, "SEKRIT")
		require.Contains(t, res.Output, "not searched: 1 file that looks like a secret")
	}
}
