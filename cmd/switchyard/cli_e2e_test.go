package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
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
		{[]string{"--server", "notaurl", "workitems", "list"}, `--server (or $SWITCHYARD_SERVER) "notaurl": want the daemon's http or https URL, such as http://127.0.0.1:8080`},
		{[]string{"--server", "ftp://x", "workitems", "list"}, `--server (or $SWITCHYARD_SERVER) "ftp://x": want the daemon's http or https URL`},
		{[]string{"--server", "", "send", "hi"}, `--server (or $SWITCHYARD_SERVER) "": want the daemon's http or https URL`},
		{[]string{"--server", "http://[::1", "ingress"}, `--server (or $SWITCHYARD_SERVER) "http://[::1": want the daemon's http or https URL`},
		{[]string{"--server", "http://u:pw@127.0.0.1:1", "thread", "t"}, `--server (or $SWITCHYARD_SERVER) "http://u:pw@127.0.0.1:1": want`},
		{[]string{"workitems", "show", ""}, "argument 1 of switchyard workitems show is empty; usage: switchyard workitems show ID"},
		{[]string{"thread", ""}, "argument 1 of switchyard thread is empty; usage: switchyard thread"},
		{[]string{"send", ""}, "argument 1 of switchyard send is empty; usage: switchyard send"},
		{[]string{"skills", "validate", "a", ""}, "argument 2 of switchyard skills validate is empty"},
		{[]string{"approvals", "list", "--all=maybe"}, `invalid argument "maybe" for "--all" flag: want true or false`},
		{[]string{"workspaces", "delete", "local:x", "--force=2"}, `invalid argument "2" for "--force" flag: want true or false`},
		{[]string{"runs", "await", "run_1", "--timeout", "1y"}, `invalid argument "1y" for "--timeout" flag: want a duration such as 30s, 5m or 1h30m`},
		{[]string{"explain", "--number", "99999999999999999999"}, `invalid argument "99999999999999999999" for "--number" flag: the number is too large`},
		{[]string{"explain", "--number", "seven"}, `invalid argument "seven" for "--number" flag: want a whole number`},
		{[]string{"send", "--wait", "--timeout", "0s", "hi"}, "--timeout 0s: want a positive duration such as 30s or 10m"},
		{[]string{"send", "--wait", "--timeout", "-5s", "hi"}, "--timeout -5s: want a positive duration such as 30s or 10m"},
		{[]string{"explain", "--delivery", "a", "--work-item", "b"}, "--delivery and --work-item cannot go together: give one of them"},
		{[]string{"explain", "--daemon", "--work-item", "b"}, "--daemon and --work-item cannot go together: give one of them"},
		{[]string{"explain", "--delivery", ""}, "--delivery is empty: give the id of a stored delivery or work item"},
		{[]string{"explain", "--work-item", " "}, "--work-item is empty: give the id of a stored delivery or work item"},
		{[]string{"serve", "--listen", ":99999"}, `--listen: bad port "99999": want 0 to 65535 (or a service name such as http)`},
		{[]string{"serve", "--listen", "127.0.0.1:-1"}, `--listen: bad port "-1": want 0 to 65535`},
		{[]string{"serve", "--listen", "::1:8080"}, `--listen: want host:port such as 127.0.0.1:8080, got "::1:8080": an IPv6 address goes in brackets, such as [::1]:8080`},
		{[]string{"serve", "--listen", "localhost"}, `--listen: want host:port such as 127.0.0.1:8080, got "localhost"`},
		{[]string{"serve", "--data-dir", "~/switchyard"}, `--data-dir: "~/switchyard" begins with ~, which is not expanded here: write the full path`},
		{[]string{"serve", "--data-dir", binary}, "--data-dir: " + binary + " is a file, not a directory"},
		{[]string{"storage", "compact", "--data-dir", "~"}, `--data-dir: "~" begins with ~, which is not expanded here`},
	} {
		r := run(t, t.TempDir(), env, tc.args...)
		cmd := strings.Join(tc.args, " ")
		require.Equal(t, 2, r.code, "%s: %s%s", cmd, r.stdout, r.stderr)
		require.Empty(t, r.stdout, cmd)
		require.True(t, strings.HasPrefix(r.stderr, "switchyard: "+tc.want), "%s: %s", cmd, r.stderr)
		require.NotContains(t, r.stderr, "arg(s)", cmd)
		for _, goSyntax := range []string{"strconv.", "time: ", "invalid syntax"} {
			require.NotContains(t, r.stderr, goSyntax, cmd)
		}
	}
	// An administrator's token a bearer header cannot carry is refused
	// before the daemon starts.
	for tok, want := range map[string]string{
		" ":                    "$SWITCHYARD_API_TOKEN: must not hold white space or control characters",
		"correct horse staple": "$SWITCHYARD_API_TOKEN: must not hold white space or control characters",
	} {
		r := run(t, t.TempDir(), append(hermeticEnv(), "SWITCHYARD_API_TOKEN="+tok), "serve", "--listen", "127.0.0.1:0")
		require.Equal(t, 2, r.code, "%q: %s", tok, r.stderr)
		require.Contains(t, r.stderr, "switchyard: "+want+"\n")
		require.NotContains(t, r.stderr, "switchyard serving")
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

// What the daemon refuses as invalid is bad input, exit status 2, as when
// the command finds it itself; what it does not find (404), what it refuses
// to do (409) and a daemon that is down are failures, exit status 1. Text
// a person or a forged cursor put in the daemon's records or answers
// reaches the terminal written out, never as escape sequences, in every
// command's output and error, with or without --json.
func TestCommandsSayWhatTheDaemonRefusedWithItsExitStatus(t *testing.T) {
	dir := t.TempDir()
	p := serve(t, dir, freeAddr(t))
	const esc = "\x1b[2J\x1b]0;pwned\x07\u009b31m"
	r := run(t, dir, p.env(), "send", "--thread", "esc", "@triage look "+esc+" here")
	require.Equal(t, 0, r.code, r.stderr)
	wi, _, _ := strings.Cut(r.stdout, " ")

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"workitems", "list", "--cursor", "x\x1b[31mred"}, 2, `cursor "x\x1b[31mred" is not one this listing gave out (HTTP 400)`},
		{[]string{"workitems", "list", "--json", "--cursor", "garbage"}, 2, `cursor "garbage" is not one this listing gave out (HTTP 400)`},
		{[]string{"ingress", "--cursor", "\x1b]0;t\x07"}, 2, `is not one this listing gave out (HTTP 400)`},
		{[]string{"audit", "--cursor", "garbage"}, 2, `cursor "garbage" is not one this listing gave out (HTTP 400)`},
		{[]string{"runs", "list", "--cursor", "garbage"}, 2, `cursor "garbage" is not one this listing gave out (HTTP 400)`},
		{[]string{"workitems", "list", "--status", "bogus"}, 2, `status "bogus": want queued, running, done, failed or cancelled (HTTP 400)`},
		{[]string{"workitems", "list", "--status", "bogus", "--json"}, 2, `status "bogus"`},
		{[]string{"ingress", "--reason", "bogus"}, 2, `reason "bogus": want no_route, bot_actor, unauthorized, not_allowed, unsupported, edited, deleted, approval, answered (HTTP 400)`},
		{[]string{"runs", "list", "--status", "sleeping"}, 2, `status "sleeping": want queued, running, done, failed, cancelled, timed_out or interrupted`},
		{[]string{"send", "--thread", "a\nb", "hi"}, 2, `local thread name "a\nb": want 1-200 characters, no control characters (HTTP 400)`},
		{[]string{"workitems", "show", "wi_404"}, 1, `work item "wi_404" not found (HTTP 404)`},
		{[]string{"workitems", "show", "--json", "wi_404"}, 1, `work item "wi_404" not found (HTTP 404)`},
		{[]string{"explain", "--work-item", "wi_404"}, 1, `work item "wi_404" not found (HTTP 404)`},
		{[]string{"agents", "show", "nobody"}, 1, `no agent "nobody"`},
		{[]string{"workitems", "list", "--server", "http://" + freeAddr(t)}, 1, "connection refused (is `switchyard serve` running?)"},
	} {
		r := run(t, dir, p.env(), tc.args...)
		cmd := strings.Join(tc.args, " ")
		require.Equal(t, tc.code, r.code, "%s: %s%s", cmd, r.stdout, r.stderr)
		require.Empty(t, r.stdout, cmd)
		require.Contains(t, r.stderr, tc.want, cmd)
		require.False(t, needsEscape([]byte(r.stderr)), "%s: %q", cmd, r.stderr)
	}

	// Waiting longer than --timeout is the command's failure, said as
	// such, not the daemon's: the work item goes on.
	r = run(t, dir, p.env(), "send", "--wait", "--timeout", "1ns", "hi")
	require.Equal(t, 1, r.code, r.stderr)
	next, _, _ := strings.Cut(r.stdout, " ")
	require.Equal(t, "switchyard: "+next+" is not finished after --timeout 1ns; it goes on: switchyard workitems show "+next+"\n", r.stderr)

	// A message's text is shown, written out, wherever it is shown.
	for _, args := range [][]string{
		{"workitems", "show", wi}, {"workitems", "show", "--json", wi}, {"workitems", "list"}, {"workitems", "list", "--json"},
		{"thread", "esc"}, {"thread", "esc", "--json"},
	} {
		r := run(t, dir, p.env(), args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		require.False(t, needsEscape([]byte(r.stdout)), "%v: %q", args, r.stdout)
		if args[1] == "show" && len(args) == 3 {
			require.Contains(t, r.stdout, `@triage look \x1b[2J\x1b]0;pwned\x07\u009b31m here`)
		}
		if slices.Contains(args, "--json") {
			require.True(t, json.Valid([]byte(r.stdout)), "%v: %s", args, r.stdout)
		}
	}
}

// An error answer that is not the daemon's (a proxy's page, a server that
// writes escape sequences) is shown as its first line, cut short and
// written out, with exit status 1.
func TestCommandsShowAnErrorNoDaemonGivesShortAndWrittenOut(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body string
		status                  int
		want                    string
	}{
		{"a proxy's page", "text/html", "<html><body><h1>502 Bad Gateway</h1>" + strings.Repeat("x", 5000) + "</body></html>", 502,
			"switchyard: <html><body><h1>502 Bad Gateway</h1>" + strings.Repeat("x", 200-len("<html><body><h1>502 Bad Gateway</h1>")) + " … (HTTP 502)\n"},
		{"several lines", "text/plain", "first line\nsecond line\n", 500, "switchyard: first line … (HTTP 500)\n"},
		{"an empty body", "", "", 503, "switchyard: 503 Service Unavailable (HTTP 503)\n"},
		{"escapes in text", "text/plain", "oops \x1b[2J\x1b[31mcleared", 500, `switchyard: oops \x1b[2J\x1b[31mcleared (HTTP 500)` + "\n"},
		{"escapes in the JSON error", "application/json", `{"error":"bad \u001b[31mRED\u0007 \u009b1m","code":"internal"}`, 500,
			`switchyard: bad \x1b[31mRED\x07 \u009b1m (HTTP 500)` + "\n"},
		{"escapes in an invalid answer", "application/json", `{"error":"bad \u001b]0;t\u0007","code":"invalid"}`, 400,
			`switchyard: bad \x1b]0;t\x07 (HTTP 400)` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.contentType != "" {
					w.Header().Set("Content-Type", tc.contentType)
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			env := []string{"SWITCHYARD_SERVER=" + srv.URL, "SWITCHYARD_API_TOKEN=tok-0123456789abcdef"}
			for _, args := range [][]string{{"workitems", "list"}, {"workitems", "list", "--json"}, {"send", "hi"}} {
				r := run(t, t.TempDir(), env, args...)
				want := 1
				if tc.status == http.StatusBadRequest {
					want = 2
				}
				require.Equal(t, want, r.code, "%v: %s", args, r.stderr)
				require.Empty(t, r.stdout)
				require.Equal(t, tc.want, r.stderr, "%v", args)
			}
		})
	}
}
