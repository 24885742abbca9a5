package tools_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

// plain is a sandbox of mode none: commands run as plain processes, which
// is what these tests of the tools themselves need; sandbox_test.go tests
// them under bubblewrap.
func plain(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.New(context.Background(), sandbox.Options{Mode: sandbox.ModeNone})
	require.NoError(t, err)
	return sb
}

func registry(t *testing.T, extra ...tools.Tool) *tools.Registry {
	t.Helper()
	r, err := tools.NewRegistry(append(tools.Core(tools.CoreOptions{BashTimeout: 10 * time.Second, Sandbox: plain(t)}), extra...)...)
	require.NoError(t, err)
	return r
}

func workspace(t *testing.T) string {
	t.Helper()
	dir, err := tools.Workspaces{Root: t.TempDir()}.Dir("github:acme/app#7")
	require.NoError(t, err)
	return dir
}

func exec(t *testing.T, ts *tools.Toolset, ws, name, input string) tools.Result {
	t.Helper()
	return ts.Execute(context.Background(), tools.CallContext{Workspace: ws, SessionKey: "github:acme/app#7"}, name, json.RawMessage(input))
}

func toolset(r *tools.Registry, s tools.Scope) *tools.Toolset {
	return tools.NewToolset(r, s, tools.ToolsetOptions{Profiles: tools.BuiltinProfiles{}})
}

// markerCommand is a package command tool that proves it ran by creating a
// file in the workspace.
func markerCommand(t *testing.T, name, requiredAgent string) tools.Tool {
	t.Helper()
	tool, err := tools.NewCommand(tools.CommandSpec{
		Name: name, Description: "touches a marker", Package: "db-tools",
		Command: "sh", Args: []string{"-c", "cat > " + name + ".ran"},
		RequiredAgent: requiredAgent, Permissions: []tools.Permission{tools.PermExec}, Sandbox: plain(t),
	})
	require.NoError(t, err)
	return tool
}

func TestRefusalsExecuteNothing(t *testing.T) {
	cases := []struct {
		name   string
		scope  tools.Scope
		tool   string
		input  string
		reason string
		marker string // a file that exists only if something executed
	}{
		{
			name:   "tool outside the agent's list",
			scope:  tools.Scope{Agent: "reviewer", Tools: []string{"read_file", "search_files"}},
			tool:   "bash",
			input:  `{"command":"touch ran"}`,
			reason: `tool "bash" is not in the tools list of agent "reviewer"`,
			marker: "ran",
		},
		{
			name:   "required_agent tool called by another agent",
			scope:  tools.Scope{Agent: "coder", Tools: []string{"execute_sql"}},
			tool:   "execute_sql",
			input:  `{"query":"drop table users"}`,
			reason: `tool "execute_sql" may only be called by agent "database-agent" (required_agent), not by "coder"`,
			marker: "execute_sql.ran",
		},
		{
			name:   "profile forbids it",
			scope:  tools.Scope{Agent: "reviewer", Profile: "read-only"},
			tool:   "write_file",
			input:  `{"path":"ran","content":"x"}`,
			reason: `tool "write_file" is forbidden by profile "read-only" of agent "reviewer"`,
			marker: "ran",
		},
		{
			name:   "unknown tool",
			scope:  tools.Scope{Agent: "coder"},
			tool:   "rm_rf",
			input:  `{}`,
			reason: `unknown tool "rm_rf"; the tools you can call are: bash, edit_file`,
		},
		{
			name:   "path with ..",
			scope:  tools.Scope{Agent: "coder"},
			tool:   "write_file",
			input:  `{"path":"../escaped","content":"x"}`,
			reason: `path "../escaped" is outside the workspace`,
			marker: "../escaped",
		},
		{
			name:   "absolute path",
			scope:  tools.Scope{Agent: "coder"},
			tool:   "read_file",
			input:  `{"path":"/etc/passwd"}`,
			reason: `path "/etc/passwd" is absolute`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := registry(t, markerCommand(t, "execute_sql", "database-agent"))
			ws := workspace(t)
			res := exec(t, toolset(r, tc.scope), ws, tc.tool, tc.input)
			require.True(t, res.Refused, res.Output)
			require.True(t, res.IsError)
			require.True(t, strings.HasPrefix(res.Output, "refused: "), res.Output)
			require.Contains(t, res.Output, tc.reason)
			if tc.marker != "" {
				require.NoFileExists(t, filepath.Join(ws, tc.marker))
			}
		})
	}
}

func TestRequiredAgentRunsForItsAgent(t *testing.T) {
	r := registry(t, markerCommand(t, "execute_sql", "database-agent"))
	ws := workspace(t)
	// Bound to this agent: visible even with no tools list.
	ts := toolset(r, tools.Scope{Agent: "database-agent"})
	require.Contains(t, names(ts.Visible()), "execute_sql")
	res := exec(t, ts, ws, "execute_sql", `{"query":"select 1"}`)
	require.False(t, res.IsError, res.Output)
	got, err := os.ReadFile(filepath.Join(ws, "execute_sql.ran"))
	require.NoError(t, err)
	require.JSONEq(t, `{"query":"select 1"}`, string(got), "the input arrives on stdin")

	require.NotContains(t, names(toolset(r, tools.Scope{Agent: "coder"}).Visible()), "execute_sql")
}

func TestSymlinkEscapeRefused(t *testing.T) {
	r := registry(t)
	ws := workspace(t)
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("hunter2"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(ws, "link")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "secret")))
	ts := toolset(r, tools.Scope{Agent: "coder"})

	for _, call := range []struct{ tool, input string }{
		{"read_file", `{"path":"link/secret.txt"}`},
		{"read_file", `{"path":"secret"}`},
		{"write_file", `{"path":"link/new.txt","content":"x"}`},
		{"edit_file", `{"path":"secret","old_string":"hunter2","new_string":"pwned"}`},
		{"list_directory", `{"path":"link"}`},
		{"search_files", `{"pattern":"hunter","path":"link"}`},
	} {
		res := exec(t, ts, ws, call.tool, call.input)
		require.True(t, res.Refused, "%s %s: %s", call.tool, call.input, res.Output)
		require.Contains(t, res.Output, "outside the workspace through a symbolic link")
		require.NotContains(t, res.Output, "hunter2")
	}
	require.NoFileExists(t, filepath.Join(outside, "new.txt"))
	got, err := os.ReadFile(filepath.Join(outside, "secret.txt"))
	require.NoError(t, err)
	require.Equal(t, "hunter2", string(got))

	// A recursive listing and search of the workspace do not follow the link.
	res := exec(t, ts, ws, "search_files", `{"pattern":"hunter"}`)
	require.Equal(t, "no matches", res.Output)
}

func TestVisibility(t *testing.T) {
	other, err := tools.NewCommand(tools.CommandSpec{Name: "lint", Package: "linters", Command: "true", Permissions: []tools.Permission{tools.PermExec}})
	require.NoError(t, err)
	own, err := tools.NewCommand(tools.CommandSpec{Name: "query", Package: "db-tools", Command: "true", Permissions: []tools.Permission{tools.PermExec}})
	require.NoError(t, err)
	r := registry(t, other, own)

	cases := []struct {
		name  string
		scope tools.Scope
		want  []string
	}{
		{"empty list: core tools only", tools.Scope{Agent: "coder"}, tools.CoreNames()},
		{"package agent also sees its package's tools", tools.Scope{Agent: "dba", Package: "db-tools"}, append(tools.CoreNames(), "query")},
		{"explicit list is exact", tools.Scope{Agent: "x", Tools: []string{"read_file", "lint"}}, []string{"lint", "read_file"}},
		{"read-only profile", tools.Scope{Agent: "reviewer", Profile: "read-only"}, []string{"list_directory", "read_file", "search_files"}},
		{"unknown profile fails closed", tools.Scope{Agent: "x", Profile: "god-mode"}, []string{"list_directory", "read_file", "search_files"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.ElementsMatch(t, tc.want, names(toolset(r, tc.scope).Visible()))
		})
	}
}

type approver struct {
	ok     bool
	called int
}

func (a *approver) Approve(context.Context, tools.Call, string) (bool, error) {
	a.called++
	return a.ok, nil
}

type askPolicy struct{}

func (askPolicy) Check(context.Context, tools.Call) tools.Decision {
	return tools.Decision{Verdict: tools.NeedsApproval, Reason: "writes need approval"}
}

func TestNeedsApproval(t *testing.T) {
	r := registry(t)
	for _, tc := range []struct {
		name     string
		approver *approver
		ran      bool
		reason   string
	}{
		{"no approver", nil, false, "no approver is configured"},
		{"denied", &approver{ok: false}, false, "approval denied"},
		{"approved", &approver{ok: true}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := workspace(t)
			opts := tools.ToolsetOptions{Policy: askPolicy{}}
			if tc.approver != nil {
				opts.Approver = tc.approver
			}
			ts := tools.NewToolset(r, tools.Scope{Agent: "coder"}, opts)
			res := exec(t, ts, ws, "write_file", `{"path":"f","content":"x"}`)
			if tc.ran {
				require.False(t, res.IsError, res.Output)
				require.FileExists(t, filepath.Join(ws, "f"))
				return
			}
			require.True(t, res.Refused)
			require.Contains(t, res.Output, tc.reason)
			require.NoFileExists(t, filepath.Join(ws, "f"))
		})
	}
}

func TestFileTools(t *testing.T) {
	r := registry(t)
	ws := workspace(t)
	ts := toolset(r, tools.Scope{Agent: "coder"})
	ok := func(name, input string) string {
		t.Helper()
		res := exec(t, ts, ws, name, input)
		require.False(t, res.IsError, "%s: %s", name, res.Output)
		return res.Output
	}
	fail := func(name, input, want string) {
		t.Helper()
		res := exec(t, ts, ws, name, input)
		require.True(t, res.IsError, res.Output)
		require.False(t, res.Refused, res.Output)
		require.Contains(t, res.Output, want)
	}

	require.Equal(t, "wrote 29 bytes to cmd/app/main.go", ok("write_file", `{"path":"cmd/app/main.go","content":"package main\n\nfunc main() {}\n"}`))
	require.Equal(t, "package main\n\nfunc main() {}\n", ok("read_file", `{"path":"cmd/app/main.go"}`))
	require.Equal(t, "[lines 3-3 of 4]\nfunc main() {}\n", ok("read_file", `{"path":"cmd/app/main.go","offset":3,"limit":1}`))
	fail("read_file", `{"path":"missing.go"}`, "no such file")
	fail("read_file", `{"path":"cmd"}`, "is a directory")
	fail("read_file", `{"file":"main.go"}`, `unknown field "file"`)

	require.Equal(t, "replaced 1 occurrence(s) in cmd/app/main.go",
		ok("edit_file", `{"path":"cmd/app/main.go","old_string":"func main() {}","new_string":"func main() { run() }"}`))
	ok("write_file", `{"path":"notes.txt","content":"todo\ntodo\n"}`)
	fail("edit_file", `{"path":"notes.txt","old_string":"todo","new_string":"done"}`, "occurs 2 times")
	fail("edit_file", `{"path":"notes.txt","old_string":"nothing","new_string":"done"}`, "not found")
	require.Equal(t, "replaced 2 occurrence(s) in notes.txt",
		ok("edit_file", `{"path":"notes.txt","old_string":"todo","new_string":"done","replace_all":true}`))

	require.Equal(t, "cmd/\nnotes.txt (10 bytes)\n", ok("list_directory", `{}`))
	require.Equal(t, "app/\napp/main.go (36 bytes)\n", ok("list_directory", `{"path":"cmd","recursive":true}`))

	require.Equal(t, "cmd/app/main.go:3: func main() { run() }\n", ok("search_files", `{"pattern":"run\\(\\)"}`))
	require.Equal(t, "notes.txt:1: done\nnotes.txt:2: done\n", ok("search_files", `{"pattern":"DONE","case_insensitive":true,"glob":"*.txt"}`))
	require.Equal(t, "no matches", ok("search_files", `{"pattern":"done","glob":"**/*.go"}`))
	fail("search_files", `{"pattern":"("}`, "pattern")
}

func TestBash(t *testing.T) {
	r := registry(t)
	ws := workspace(t)
	ts := toolset(r, tools.Scope{Agent: "coder"})

	res := exec(t, ts, ws, "bash", `{"command":"echo hello > greeting && cat greeting && pwd"}`)
	require.False(t, res.IsError, res.Output)
	require.Equal(t, "hello\n"+ws+"\n", res.Output)

	res = exec(t, ts, ws, "bash", `{"command":"echo oops >&2; exit 3"}`)
	require.True(t, res.IsError)
	require.False(t, res.Refused)
	require.Equal(t, "error: exit code 3\noops\n", res.Output)

	t.Setenv("SWITCHYARD_TEST_TOKEN", "ghp_should_not_leak")
	res = exec(t, ts, ws, "bash", `{"command":"env"}`)
	require.NotContains(t, res.Output, "ghp_should_not_leak")
	require.NotContains(t, res.Output, "HOME="+ws, "the home is never the workspace")
	require.Contains(t, res.Output, "HOME=")
}

func TestBashTimeoutKillsTheGroup(t *testing.T) {
	r, err := tools.NewRegistry(tools.Core(tools.CoreOptions{BashTimeout: 300 * time.Millisecond, Sandbox: plain(t)})...)
	require.NoError(t, err)
	ws := workspace(t)
	start := time.Now()
	res := exec(t, toolset(r, tools.Scope{Agent: "coder"}), ws, "bash", `{"command":"(sleep 30; touch late) & sleep 30"}`)
	require.True(t, res.IsError)
	require.Contains(t, res.Output, "timed out after 300ms and was killed")
	require.Less(t, time.Since(start), 15*time.Second)
	time.Sleep(100 * time.Millisecond)
	require.NoFileExists(t, filepath.Join(ws, "late"))
}

func TestOutputCapped(t *testing.T) {
	r, err := tools.NewRegistry(tools.Core(tools.CoreOptions{BashOutput: 1000, Sandbox: plain(t)})...)
	require.NoError(t, err)
	ws := workspace(t)
	res := exec(t, toolset(r, tools.Scope{Agent: "coder"}), ws, "bash", `{"command":"seq 1 100000"}`)
	require.False(t, res.IsError)
	require.Less(t, len(res.Output), 1100)
	require.True(t, strings.HasPrefix(res.Output, "1\n2\n3\n"))
	require.True(t, strings.HasSuffix(res.Output, "99999\n100000\n"))
	require.Contains(t, res.Output, "bytes omitted")

	big := strings.Repeat("x", 100<<10)
	require.NoError(t, os.WriteFile(filepath.Join(ws, "big.txt"), []byte(big), 0o644))
	res = tools.NewToolset(r, tools.Scope{Agent: "coder"}, tools.ToolsetOptions{MaxOutput: 4096}).
		Execute(context.Background(), tools.CallContext{Workspace: ws}, "read_file", json.RawMessage(`{"path":"big.txt"}`))
	require.Less(t, len(res.Output), 4200)
}

// Every tool's result is masked before the model reads it: the file tools,
// bash, refusals, and the head and tail of an output too long to show.
func TestResultsAreRedactedBeforeTheModelReadsThem(t *testing.T) {
	const configured = "configured-secret-0123456789"
	const pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----"
	const gitlab = "glpat-AbCdEfGhIjKlMnOpQrSt"
	r := registry(t)
	ws := workspace(t)
	secretFile := "key: " + configured + "\n" + pem + "\ntoken " + gitlab + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(ws, "creds.txt"), []byte(secretFile), 0o644))
	long := secretFile + strings.Repeat("filler line\n", 20<<10) + secretFile
	require.NoError(t, os.WriteFile(filepath.Join(ws, "long.txt"), []byte(long), 0o644))
	ts := tools.NewToolset(r, tools.Scope{Agent: "coder"}, tools.ToolsetOptions{
		Profiles: tools.BuiltinProfiles{}, Redactor: bot.NewRedactor(configured), MaxOutput: 4096,
	})
	for _, call := range []struct{ tool, input string }{
		{"read_file", `{"path":"creds.txt"}`},
		{"read_file", `{"path":"long.txt"}`},
		{"bash", `{"command":"cat creds.txt; echo ` + configured + ` >&2; exit 3"}`},
		{"bash", `{"command":"cat long.txt"}`},
		{"search_files", `{"pattern":"glpat"}`},
		{configured, `{}`}, // an unknown tool's refusal names it
	} {
		res := exec(t, ts, ws, call.tool, call.input)
		for _, secret := range []string{configured, "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7", gitlab} {
			require.NotContains(t, res.Output, secret, "%s %s", call.tool, call.input)
		}
		require.Contains(t, res.Output, bot.Redacted, "%s %s: %s", call.tool, call.input, res.Output)
	}
}

func TestRegistry(t *testing.T) {
	r := registry(t)
	require.Equal(t, []string{"bash", "edit_file", "list_directory", "read_file", "search_files", "write_file"}, r.Names())
	require.ErrorContains(t, r.Register(tools.Core(tools.CoreOptions{})[0]), "already registered")
	bad, err := tools.NewCommand(tools.CommandSpec{Name: "agent_x", Command: "true", Permissions: []tools.Permission{tools.PermExec}})
	require.NoError(t, err)
	require.ErrorContains(t, r.Register(bad), "reserved")
	_, err = tools.NewCommand(tools.CommandSpec{Name: "x", Command: "true", Schema: json.RawMessage(`{"type":"string"}`), Permissions: []tools.Permission{tools.PermExec}})
	require.ErrorContains(t, err, `type must be "object"`)
	_, err = tools.NewCommand(tools.CommandSpec{Name: "bad name", Command: "true", Permissions: []tools.Permission{tools.PermExec}})
	require.Error(t, err)

	// Nothing is granted by omission: a tool must say what it needs.
	_, err = tools.NewCommand(tools.CommandSpec{Name: "quiet", Command: "true"})
	require.EqualError(t, err, `command tool "quiet": it declares no permissions; say what it needs at the least (read, write, exec, push, merge, ci, deploy, secrets, network, admin)`)
	_, err = tools.NewCommand(tools.CommandSpec{Name: "odd", Command: "true", Permissions: []tools.Permission{"sudo"}})
	require.ErrorContains(t, err, `unknown permission "sudo"`)
	undeclared := stubTool{info: tools.Info{Name: "github_thing", Kind: tools.KindIntegration, Schema: json.RawMessage(`{"type":"object"}`)}}
	require.EqualError(t, r.Register(undeclared), `register tool "github_thing": it declares no permissions; say what it needs at the least (read, write, exec, push, merge, ci, deploy, secrets, network, admin)`)
	require.NotContains(t, r.Names(), "github_thing")
}

// stubTool is a tool that only describes itself.
type stubTool struct{ info tools.Info }

func (s stubTool) Info() tools.Info { return s.info }
func (s stubTool) Run(context.Context, tools.CallContext, json.RawMessage) (string, error) {
	return "", nil
}

func TestWorkspaceNames(t *testing.T) {
	a := tools.WorkspaceName("github:a/b#1")
	b := tools.WorkspaceName("github:a_b#1")
	require.NotEqual(t, a, b)
	require.True(t, strings.HasPrefix(a, "github_a_b_1-"), a)
	for _, key := range []string{"local:../../etc", "slack:T1/C2/1700000000.000100", "", strings.Repeat("ü", 300)} {
		name := tools.WorkspaceName(key)
		require.NotContains(t, name, "/")
		require.NotContains(t, name, "..")
		require.LessOrEqual(t, len(name), 100)
		require.NotEmpty(t, name)
	}
	root := t.TempDir()
	dir, err := tools.Workspaces{Root: root}.Dir("local:../../etc")
	require.NoError(t, err)
	require.Equal(t, root, filepath.Dir(dir))
	require.DirExists(t, dir)
}

func names(infos []tools.Info) []string {
	out := make([]string, len(infos))
	for i, in := range infos {
		out[i] = in.Name
	}
	return out
}

// A package's command tool takes only the input its input_schema
// describes: a call with a field of the wrong type, a field it does not
// name, a required field missing, or an input too large is refused naming
// what is wrong, before an approver is asked and before the command runs.
func TestCommandToolInputHeldToItsSchema(t *testing.T) {
	tool, err := tools.NewCommand(tools.CommandSpec{
		Name: "release", Description: "tags a release", Package: "releaser",
		Command: "sh", Args: []string{"-c", "cat > release.ran"},
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"tag":{"type":"string","pattern":"^v[0-9]+"},"count":{"type":"integer","maximum":10}},` +
			`"required":["tag"],"additionalProperties":false}`),
		Permissions: []tools.Permission{tools.PermExec}, Sandbox: plain(t),
	})
	require.NoError(t, err)
	r := registry(t, tool)
	huge := `{"tag":"v1","pad":"` + strings.Repeat("x", 2<<20) + `"}`
	cases := []struct {
		name, input string
		want        []string // in the refusal
	}{
		{"wrong type", `{"tag":"v1","count":"3"}`, []string{"invalid input for release", "at /count", "want integer"}},
		{"extra field", `{"tag":"v1","force":true}`, []string{"invalid input for release", "force"}},
		{"missing required field", `{"count":2}`, []string{"invalid input for release", "tag"}},
		{"value the schema bounds", `{"tag":"v1","count":11}`, []string{"at /count", "10"}},
		{"pattern", `{"tag":"latest"}`, []string{"at /tag"}},
		{"null", `null`, []string{"invalid input: want a JSON object, got null"}},
		{"array", `[{"tag":"v1"}]`, []string{"invalid input: want a JSON object, got an array"}},
		{"not JSON", `{"tag":`, []string{"invalid input for release: not JSON"}},
		{"huge", huge, []string{"more than the 1048576 a command tool takes"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := workspace(t)
			a := &approver{ok: true}
			ts := tools.NewToolset(r, tools.Scope{Agent: "coder", Tools: []string{"release"}},
				tools.ToolsetOptions{Policy: askPolicy{}, Approver: a})
			res := exec(t, ts, ws, "release", tc.input)
			require.True(t, res.Refused, res.Output)
			for _, w := range tc.want {
				require.Contains(t, res.Output, w)
			}
			require.NotContains(t, res.Output, "switchyard.invalid", "the schema's made-up address is no one's business")
			require.Less(t, len(res.Output), 4<<10, "the refusal does not echo a huge input")
			require.Zero(t, a.called, "no one is asked to approve a call that cannot run")
			require.NoFileExists(t, filepath.Join(ws, "release.ran"))

			// The tool holds its input to the schema however it is called.
			_, err := tool.Run(context.Background(), tools.CallContext{Workspace: ws}, json.RawMessage(tc.input))
			require.True(t, tools.IsRefused(err), "%v", err)
			require.NoFileExists(t, filepath.Join(ws, "release.ran"))
		})
	}

	ws := workspace(t)
	a := &approver{ok: true}
	ts := tools.NewToolset(r, tools.Scope{Agent: "coder", Tools: []string{"release"}},
		tools.ToolsetOptions{Policy: askPolicy{}, Approver: a})
	res := exec(t, ts, ws, "release", `{"tag":"v1.2.0","count":3}`)
	require.False(t, res.IsError, res.Output)
	require.Equal(t, 1, a.called)
	data, err := os.ReadFile(filepath.Join(ws, "release.ran"))
	require.NoError(t, err)
	require.JSONEq(t, `{"tag":"v1.2.0","count":3}`, string(data))
}
