package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Something that is not a Switchyard daemon, or one that answers garbage,
// never makes a command print a success made of nothing: every command
// exits 1 saying the answer is not one Switchyard gives, in words rather
// than Go's types.
func TestCommandsRefuseAnswersNoDaemonGives(t *testing.T) {
	answers := map[string]struct{ contentType, body string }{
		"html":          {"text/html", "<html><body>It works!</body></html>"},
		"empty":         {"", ""},
		"null":          {"application/json", "null"},
		"empty object":  {"application/json", "{}"},
		"wrong types":   {"application/json", `{"work_item_id": 5, "id": 7, "items": "x", "name": [], "config": 1, "status": false}`},
		"a list":        {"application/json", `[1, 2]`},
		"a bare string": {"application/json", `"ok"`},
	}
	commands := [][]string{
		{"send", "hi"},
		{"send", "--json", "hi"},
		{"workitems", "show", "wi_1"},
		{"workitems", "show", "--json", "wi_1"},
		{"workitems", "cancel", "wi_1"},
		{"agents", "show", "coder"},
		{"agents", "show", "--json", "coder"},
		{"config", "reload"},
	}
	for name, a := range answers {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if a.contentType != "" {
					w.Header().Set("Content-Type", a.contentType)
				}
				_, _ = w.Write([]byte(a.body))
			}))
			defer srv.Close()
			env := []string{"SWITCHYARD_SERVER=" + srv.URL, "SWITCHYARD_API_TOKEN=tok-0123456789abcdef"}
			for _, args := range commands {
				r := run(t, t.TempDir(), env, args...)
				cmd := strings.Join(args, " ")
				require.Equal(t, 1, r.code, "%s: %s%s", cmd, r.stdout, r.stderr)
				require.Empty(t, r.stdout, cmd)
				require.Contains(t, r.stderr, "is not one Switchyard gives", cmd)
				for _, goSyntax := range []string{"Go ", "struct", "github.com/", "json:", "[]", "unmarshal", "invalid character"} {
					require.NotContains(t, r.stderr, goSyntax, cmd)
				}
			}
		})
	}
}

// Every wrong use of a command's words is bad input, exit status 2, with a
// message naming what is wrong: a misspelt command (never the group's
// help and exit 0), a wrong number of arguments, a --limit out of range.
func TestCommandsRefuseWrongUseWithExitStatus2(t *testing.T) {
	env := []string{"SWITCHYARD_SERVER=http://127.0.0.1:1", "SWITCHYARD_API_TOKEN=tok-0123456789abcdef"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `unknown command "bogus" for "switchyard"; see switchyard --help`},
		{[]string{"sned", "hi"}, `unknown command "sned" for "switchyard"; did you mean "send"?`},
		{[]string{"workitems", "lsit"}, `unknown command "lsit" for "switchyard workitems"; did you mean "list"?`},
		{[]string{"config", "relaod"}, `unknown command "relaod" for "switchyard config"; did you mean "reload"?`},
		{[]string{"runs", "cancle", "run_1"}, `unknown command "cancle" for "switchyard runs"; did you mean "cancel"?`},
		{[]string{"skills", "nope"}, `unknown command "nope" for "switchyard skills"`},
		{[]string{"thread"}, "wrong number of arguments for switchyard thread (0 given); usage: switchyard thread"},
		{[]string{"thread", "a", "b"}, "wrong number of arguments for switchyard thread (2 given: a b); usage: switchyard thread"},
		{[]string{"send"}, "wrong number of arguments for switchyard send (0 given); usage: switchyard send"},
		{[]string{"workitems", "show"}, "wrong number of arguments for switchyard workitems show (0 given); usage: switchyard workitems show ID"},
		{[]string{"workitems", "cancel", "wi_1", "wi_2"}, "wrong number of arguments for switchyard workitems cancel (2 given: wi_1 wi_2)"},
		{[]string{"agents", "show"}, "wrong number of arguments for switchyard agents show (0 given); usage: switchyard agents show NAME"},
		{[]string{"version", "extra"}, "wrong number of arguments for switchyard version (1 given: extra); usage: switchyard version"},
		{[]string{"explain", "extra"}, "wrong number of arguments for switchyard explain (1 given: extra)"},
		{[]string{"config", "check", "extra"}, "wrong number of arguments for switchyard config check (1 given: extra)"},
		{[]string{"workitems", "list", "--limit", "0"}, `invalid argument "0" for "--limit" flag: want a number from 1 to 1000`},
		{[]string{"workitems", "list", "--limit", "-1"}, `invalid argument "-1" for "--limit" flag: want a number from 1 to 1000`},
		{[]string{"workitems", "list", "--limit", "1001"}, `invalid argument "1001" for "--limit" flag: want a number from 1 to 1000`},
		{[]string{"ingress", "--limit", "many"}, `invalid argument "many" for "--limit" flag: want a number from 1 to 1000`},
		{[]string{"runs", "list", "--limit", "0"}, `invalid argument "0" for "--limit" flag: want a number from 1 to 1000`},
		{[]string{"audit", "--limit", "10001"}, `invalid argument "10001" for "--limit" flag: want a number from 1 to 10000`},
		{[]string{"explain", "--source", "nope", "--text", "hi"}, `--source: unknown source "nope": want local, github, slack or schedule`},
		{[]string{"explain", "--source", "github", "--kind", "local.message"}, `--kind: "local.message" is not an event of github: want github.…, such as github.issue_comment.created`},
		{[]string{"explain", "--kind", "slack.app_mention", "--text", "@coder"}, `--kind: "slack.app_mention" is not an event of local`},
		{[]string{"explain", "--source", "github", "--repo", "acme/api", "--number", "-5"}, "--number: want a positive issue or pull request number, got -5"},
		{[]string{"explain", "--source", "github", "--repo", "api"}, `--repo: want owner/name, such as acme/api, got "api"`},
		{[]string{"explain", "--source", "github", "--repo", "acme/api", "--permission", "god", "--text", "@coder"}, `--permission "god": want read, triage, write, maintain or admin`},
		{[]string{"explain", "--daemon", "--source", "nope"}, `--source: unknown source "nope"`},
	} {
		r := run(t, t.TempDir(), env, tc.args...)
		cmd := strings.Join(tc.args, " ")
		require.Equal(t, 2, r.code, "%s: %s%s", cmd, r.stdout, r.stderr)
		require.Empty(t, r.stdout, cmd)
		require.True(t, strings.HasPrefix(r.stderr, "switchyard: "+tc.want), "%s: %s", cmd, r.stderr)
		require.NotContains(t, r.stderr, "arg(s)", cmd)
	}
	// A group alone, or asked for help, still shows its help.
	for _, args := range [][]string{{}, {"workitems"}, {"config"}, {"workitems", "--help"}, {"help", "runs"}} {
		r := run(t, t.TempDir(), env, args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stdout, "Usage:", "%v", args)
	}
}

// A permission given to explain counts as GitHub spells it, whatever its
// case.
func TestExplainTakesAPermissionInAnyCase(t *testing.T) {
	for _, p := range []string{"write", "Write", " WRITE "} {
		r := run(t, t.TempDir(), hermeticEnv(), "explain", "--source", "github", "--repo", "acme/api", "--actor", "ana", "--permission", p, "--text", "@coder look")
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "(requested by @ana, write access)", p)
	}
}
