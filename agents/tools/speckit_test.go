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

	"github.com/switchyard/switchyard/agents/tools"
)

func TestSpecKit(t *testing.T) {
	ws := t.TempDir()
	now := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	kit := tools.NewSpecKit(func() time.Time { return now })
	info := kit.Info()
	require.Equal(t, "spec_kit", info.Name)
	require.Equal(t, tools.KindCommand, info.Kind)
	require.Equal(t, "specification-engine", info.Package, "it belongs to its package: visible where its skill allows it")
	require.Equal(t, []tools.Permission{tools.PermWrite}, info.Permissions)
	cc := tools.CallContext{Workspace: ws}
	call := func(in map[string]any) (string, error) {
		b, err := json.Marshal(in)
		require.NoError(t, err)
		return kit.Run(context.Background(), cc, b)
	}

	out, err := call(map[string]any{"action": "list"})
	require.NoError(t, err)
	require.Equal(t, "no specifications yet (specs/ does not exist)", out)

	out, err = call(map[string]any{"action": "create", "name": "login-timeout", "title": "Logins time out after 30 s",
		"sections": map[string]string{"Problem": "Logins on slow links fail.", "Requirements": "- FR-001: The login MUST wait 60 s.\n- the form should remember the user"}})
	require.NoError(t, err)
	require.Equal(t, `created specs/login-timeout.md (status draft); check finds 3 problems: section "User stories" is missing or empty; section "Acceptance scenarios" is missing or empty; requirement "- the form should remember the user" is not numbered FR-001, FR-002 …`, out)

	_, err = call(map[string]any{"action": "create", "name": "login-timeout", "title": "again"})
	require.EqualError(t, err, "specs/login-timeout.md exists: read it and update it instead")

	_, err = call(map[string]any{"action": "update", "name": "login-timeout", "status": "approved"})
	require.ErrorContains(t, err, "specs/login-timeout.md cannot be approved: section \"User stories\" is missing or empty")

	out, err = call(map[string]any{"action": "update", "name": "login-timeout", "sections": map[string]string{
		"User stories":         "As a user on a train, I want to log in, so that I can work.",
		"Requirements":         "- FR-001: The login MUST wait 60 s.\n- FR-002: The form MUST keep the user name after a failure.",
		"Acceptance scenarios": "Given a link of 50 kbit/s, when I log in, then I am logged in within 60 s.",
		"Open questions":       "Should 60 s be configurable?",
	}})
	require.NoError(t, err)
	require.Equal(t, "updated specs/login-timeout.md (status draft)", out)
	_, err = call(map[string]any{"action": "update", "name": "login-timeout", "status": "approved"})
	require.EqualError(t, err, "specs/login-timeout.md cannot be approved: open questions remain; answer them or keep the specification a draft")
	_, err = call(map[string]any{"action": "update", "name": "login-timeout", "status": "approved", "sections": map[string]string{"Open questions": "None."}})
	require.NoError(t, err)

	out, err = call(map[string]any{"action": "check", "name": "login-timeout"})
	require.NoError(t, err)
	require.Equal(t, "specs/login-timeout.md: complete; nothing to fix", out)
	out, err = call(map[string]any{"action": "list"})
	require.NoError(t, err)
	require.Equal(t, "login-timeout [approved] Logins time out after 30 s", out)

	data, err := os.ReadFile(filepath.Join(ws, "specs", "login-timeout.md"))
	require.NoError(t, err)
	doc := string(data)
	require.True(t, strings.HasPrefix(doc, "---\ntitle: \"Logins time out after 30 s\"\nstatus: approved\nupdated: 2026-03-04T10:00:00Z\n---\n\n## Problem\n"), doc)
	require.Less(t, strings.Index(doc, "## Problem"), strings.Index(doc, "## User stories"), "sections in their order")
	out, err = call(map[string]any{"action": "read", "name": "login-timeout"})
	require.NoError(t, err)
	require.Equal(t, doc, out)

	for in, want := range map[string]string{
		`{"action":"read","name":"../etc/passwd"}`:                           `name "../etc/passwd": want lower-case words`,
		`{"action":"read","name":"missing"}`:                                 "no specification specs/missing.md: create it first",
		`{"action":"delete","name":"x"}`:                                     `action "delete"`,
		`{"action":"create","name":"x","title":"t","sections":{"Notes":""}}`: `unknown section "Notes"`,
		`{"action":"create","name":"x"}`:                                     "create needs a title",
		`{"action":"list","extra":1}`:                                        `unknown field "extra"`,
	} {
		_, err := kit.Run(context.Background(), cc, json.RawMessage(in))
		require.ErrorContains(t, err, want, in)
	}

	// A link under specs/ cannot lead the tool out of the workspace.
	outside := t.TempDir()
	require.NoError(t, os.RemoveAll(filepath.Join(ws, "specs")))
	require.NoError(t, os.Symlink(outside, filepath.Join(ws, "specs")))
	_, err = call(map[string]any{"action": "create", "name": "escape", "title": "t"})
	require.Error(t, err)
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Empty(t, entries)
}
