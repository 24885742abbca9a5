package github

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

const (
	createComment = "POST /repos/{owner}/{repo}/issues/{number}/comments"
	listComments  = "GET /repos/{owner}/{repo}/issues/{number}/comments"
	editComment   = "PATCH /repos/{owner}/{repo}/issues/comments/{id}"
)

func outboxMessage(kind bot.OutboxKind, key, text string) bot.OutboxMessage {
	return bot.OutboxMessage{
		Key: key, Thread: bot.GitHubThread("octo", "hello", 7), Kind: kind, Text: text,
		Version: 1, CreatedAt: time.Now(),
	}
}

func TestSinkPostsThenEditsTheStatusComment(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	sink := NewSink(e.client)

	msg := outboxMessage(bot.OutboxStatus, "wi_1/status", "⏳ coder is working on wi_1")
	id, err := sink.Deliver(ctx, msg)
	require.NoError(t, err)
	require.NotEmpty(t, id)

	msg.RemoteID, msg.Text, msg.Version = id, "✅ coder finished wi_1", 2
	again, err := sink.Deliver(ctx, msg)
	require.NoError(t, err)
	require.Equal(t, id, again)

	reply, err := sink.Deliver(ctx, outboxMessage(bot.OutboxReply, "wi_1/reply", "Fixed in #8."))
	require.NoError(t, err)
	require.NotEqual(t, id, reply)

	comments := e.gh.threadComments("octo/hello#7")
	require.Len(t, comments, 2)
	require.Equal(t, strconv.FormatInt(comments[0].ID, 10), id)
	require.Equal(t, "✅ coder finished wi_1\n\n<!-- switchyard:wi_1/status -->", comments[0].Body)
	require.Equal(t, "Fixed in #8.\n\n<!-- switchyard:wi_1/reply -->", comments[1].Body)
	require.Equal(t, 1, e.gh.callCount(editComment))
}

// A crash after GitHub created the comment but before the outbox recorded
// it: the deliverer's retry finds the comment by its marker and brings it up
// to date instead of posting a second one. A person's comment quoting the
// marker is not taken for Switchyard's, nor another bot's.
func TestSinkFindsTheCommentPostedBeforeACrash(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	sink := NewSink(e.client)
	e.gh.addComment("octo/hello#7", "look: <!-- switchyard:wi_1/status -->", person("mallory"))
	e.gh.addComment("octo/hello#7", "echo: <!-- switchyard:wi_1/status -->", botUser("github-actions[bot]"))
	for i := range 150 {
		e.gh.addComment("octo/hello#7", fmt.Sprintf("chatter %d", i), person("alice"))
	}
	posted := e.gh.addComment("octo/hello#7", "⏳ starting\n\n<!-- switchyard:wi_1/status -->", botUser("switchyard[bot]"))

	store := e.store
	_, err := store.Enqueue(ctx, outboxMessage(bot.OutboxStatus, "wi_1/status", "⏳ reading main.go"))
	require.NoError(t, err)
	require.NoError(t, store.MarkAttempts(ctx, []string{"wi_1/status"})) // the attempt that crashed
	_, err = store.Enqueue(ctx, outboxMessage(bot.OutboxReply, "wi_1/reply", "done"))
	require.NoError(t, err)
	d := bot.NewDeliverer(bot.DelivererOptions{Store: store, Sinks: map[string]bot.Sink{bot.SourceGitHub: sink}})
	_, err = d.DeliverDue(ctx)
	require.NoError(t, err)

	m, err := store.GetOutbox(ctx, "wi_1/status")
	require.NoError(t, err)
	require.Equal(t, strconv.FormatInt(posted, 10), m.RemoteID)
	require.Equal(t, 2, e.gh.callCount(listComments), "the marker was on the second page")
	comments := e.gh.threadComments("octo/hello#7")
	require.Equal(t, "⏳ reading main.go\n\n<!-- switchyard:wi_1/status -->", comments[len(comments)-2].Body)
	// Only the reply, whose first attempt this is, was created, without a search.
	require.Equal(t, 1, e.gh.callCount(createComment))
	require.Equal(t, "done\n\n<!-- switchyard:wi_1/reply -->", comments[len(comments)-1].Body)

	_, found, err := sink.Find(ctx, outboxMessage(bot.OutboxStatus, "wi_9/status", "x"))
	require.NoError(t, err)
	require.False(t, found, "a key whose marker is not there")
}

func TestSinkReactions(t *testing.T) {
	for _, tc := range []struct {
		reaction, target string
		path, content    string
	}{
		{bot.ReactionSeen, "comment:555", "/repos/octo/hello/issues/comments/555/reactions", "eyes"},
		{bot.ReactionSuccess, "review_comment:8", "/repos/octo/hello/pulls/comments/8/reactions", "rocket"},
		{bot.ReactionFailure, "issue:7", "/repos/octo/hello/issues/7/reactions", "confused"},
		{bot.ReactionSeen, "", "/repos/octo/hello/issues/7/reactions", "eyes"},
		{"heart", "issue:3", "/repos/octo/hello/issues/3/reactions", "heart"},
	} {
		t.Run(tc.reaction+" on "+tc.target, func(t *testing.T) {
			e := newEnv(t)
			sink := NewSink(e.client)
			msg := outboxMessage(bot.OutboxReaction, "wi_1/reaction/"+tc.reaction, "")
			msg.Reaction, msg.Target = tc.reaction, tc.target
			id, err := sink.Deliver(context.Background(), msg)
			require.NoError(t, err)
			got := e.gh.reactionList()
			require.Len(t, got, 1)
			require.Equal(t, fakeReaction{ID: got[0].ID, Path: tc.path, Content: tc.content}, got[0])
			require.Equal(t, strconv.FormatInt(got[0].ID, 10), id)

			// Delivered before: a reaction is never sent again.
			msg.RemoteID = id
			again, err := sink.Deliver(context.Background(), msg)
			require.NoError(t, err)
			require.Equal(t, id, again)
			require.Len(t, e.gh.reactionList(), 1)
		})
	}
}

func TestSinkRefusesWhatGitHubCannotShow(t *testing.T) {
	e := newEnv(t)
	sink := NewSink(e.client)
	reaction := func(name, target string) bot.OutboxMessage {
		m := outboxMessage(bot.OutboxReaction, "k", "")
		m.Reaction, m.Target = name, target
		return m
	}
	status := outboxMessage(bot.OutboxStatus, "k", "x")
	status.RemoteID = "not-a-number"
	local := outboxMessage(bot.OutboxReply, "k", "x")
	local.Thread = bot.LocalThread("t")
	for name, msg := range map[string]bot.OutboxMessage{
		"unknown reaction": reaction("tada", "issue:7"),
		"commit target":    reaction(bot.ReactionSeen, "commit:abc"),
		"bad comment id":   reaction(bot.ReactionSeen, "comment:x"),
		"bad remote id":    status,
		"local thread":     local,
		"unknown kind":     outboxMessage("poll", "k", "x"),
	} {
		_, err := sink.Deliver(context.Background(), msg)
		de, ok := bot.AsDeliveryError(err)
		require.True(t, ok, name)
		require.True(t, de.Permanent, name)
	}
}

func TestSinkClassifiesGitHubErrors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fail      failure
		permanent bool
		retry     time.Duration // 0: a plain error, retried with backoff
	}{
		{name: "429 with Retry-After", fail: failure{status: 429, header: map[string]string{"Retry-After": "30"}, body: `{}`}, retry: 30 * time.Second},
		{name: "429 bare", fail: failure{status: 429, body: `{}`}, retry: time.Minute},
		{
			name:  "primary rate limit",
			fail:  failure{status: 403, header: map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "in 2m"}, body: `{"message":"API rate limit exceeded"}`},
			retry: 2 * time.Minute,
		},
		{
			name: "secondary rate limit",
			fail: failure{status: 403, header: map[string]string{"Retry-After": "45"},
				body: `{"message":"You have exceeded a secondary rate limit","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`},
			retry: 45 * time.Second,
		},
		{
			name: "secondary rate limit without Retry-After",
			fail: failure{status: 403,
				body: `{"message":"You have exceeded a secondary rate limit","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`},
			retry: time.Minute,
		},
		{name: "500", fail: failure{status: 500, body: `{}`}},
		{name: "503 not JSON", fail: failure{status: 503, body: `<html>unicorn</html>`}},
		{name: "403 forbidden", fail: failure{status: 403, body: `{"message":"Resource not accessible by integration"}`}, permanent: true},
		{name: "404", fail: failure{status: 404, body: `{"message":"Not Found"}`}, permanent: true},
		{name: "422", fail: failure{status: 422, body: `{"message":"Validation Failed"}`}, permanent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.fail.header["X-RateLimit-Reset"] == "in 2m" {
				tc.fail.header = map[string]string{
					"X-RateLimit-Remaining": "0",
					"X-RateLimit-Reset":     strconv.FormatInt(time.Now().Add(2*time.Minute).Unix(), 10),
				}
			}
			e.gh.fail(createComment, tc.fail)
			_, err := NewSink(e.client).Deliver(context.Background(), outboxMessage(bot.OutboxReply, "wi_1/reply", "done"))
			require.Error(t, err)
			de, ok := bot.AsDeliveryError(err)
			switch {
			case tc.permanent:
				require.True(t, ok && de.Permanent, "%v", err)
			case tc.retry > 0:
				require.True(t, ok && !de.Permanent, "%v", err)
				// A reset time is counted down from when GitHub answered,
				// however slowly this machine runs the test.
				require.LessOrEqual(t, de.RetryAfter, tc.retry)
				require.Greater(t, de.RetryAfter, tc.retry/2)
			default:
				require.False(t, ok, "%v", err)
			}
			require.NotContains(t, err.Error(), "ghs_")
		})
	}
}

func TestSinkRetriesWhenGitHubIsUnreachable(t *testing.T) {
	e := newEnv(t)
	e.gh.srv.Close()
	_, err := NewSink(e.client).Deliver(context.Background(), outboxMessage(bot.OutboxReply, "wi_1/reply", "done"))
	require.Error(t, err)
	_, ok := bot.AsDeliveryError(err)
	require.False(t, ok, "a network error is retried with backoff: %v", err)
}

func TestSinkTokenExchangeFailures(t *testing.T) {
	ctx := context.Background()
	t.Run("500", func(t *testing.T) {
		e := newEnv(t)
		e.gh.fail("POST /app/installations/{id}/access_tokens", failure{status: 500, body: `{"message":"no"}`})
		_, err := NewSink(e.client).Deliver(ctx, outboxMessage(bot.OutboxReply, "wi_1/reply", "done"))
		require.Error(t, err)
		_, ok := bot.AsDeliveryError(err)
		require.False(t, ok, "retried with backoff: %v", err)
	})
	t.Run("404: the App was uninstalled", func(t *testing.T) {
		e := newEnv(t)
		sink := NewSink(e.client)
		_, err := sink.Deliver(ctx, outboxMessage(bot.OutboxReply, "wi_1/reply", "done"))
		require.NoError(t, err)
		e.gh.uninstall(testInstallation)
		// The token is refused, then the installation the store remembers
		// is gone, then GitHub says none covers the repository, nor any
		// of the account's: the message waits for the App to be
		// installed there again.
		err = deliverAttempts(t, sink, outboxMessage(bot.OutboxReply, "wi_2/reply", "done"), 3)
		require.Error(t, err)
		_, ok := bot.AsDeliveryError(err)
		require.False(t, ok, "retried: %v", err)
		require.Contains(t, err.Error(), "the GitHub App is not installed on octo; its messages wait until it is installed again")
	})
}

// deliverAttempts delivers msg as the deliverer would, at most attempts
// times while the sink says to try again, and returns the last error: every
// one before it asked for another attempt and named no token.
func deliverAttempts(t *testing.T, sink *Sink, msg bot.OutboxMessage, attempts int) error {
	t.Helper()
	var err error
	for range attempts {
		if _, err = sink.Deliver(context.Background(), msg); err == nil {
			return nil
		}
		require.NotContains(t, err.Error(), "ghs_")
		if de, ok := bot.AsDeliveryError(err); ok && de.Permanent {
			return err
		}
	}
	return err
}

// GitHub refuses an installation token before the client expects it to
// (revoked, or expired by GitHub's clock), or the installation the store
// remembers for a repository is gone because the App was installed again
// while no webhook reached the daemon: the message waits for its next
// attempt, which gets a new token or finds the new installation, and it
// is posted once.
func TestSinkRecoversFromRefusedCredentials(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		refuse func(e *env)
	}{
		{"token revoked", func(e *env) { e.gh.revokeTokens() }},
		{"installed again under a new id", func(e *env) {
			e.gh.uninstall(testInstallation)
			e.gh.install("octo/hello", testInstallation+1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			sink := NewSink(e.client)
			_, err := sink.Deliver(ctx, outboxMessage(bot.OutboxReply, "wi_1/reply", "first"))
			require.NoError(t, err)
			tc.refuse(e)
			require.NoError(t, deliverAttempts(t, sink, outboxMessage(bot.OutboxReply, "wi_2/reply", "second"), 3))
			comments := e.gh.threadComments("octo/hello#7")
			require.Len(t, comments, 2)
			require.Contains(t, comments[1].Body, "second")
		})
	}
}

// The installation of a repository the webhook never told about is asked of
// GitHub once and remembered in the store.
func TestSinkFindsTheInstallationOnce(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	sink := NewSink(e.client)
	const lookup = "GET /repos/{owner}/{repo}/installation"
	for i := range 3 {
		_, err := sink.Deliver(ctx, outboxMessage(bot.OutboxReply, fmt.Sprintf("wi_%d/reply", i), "done"))
		require.NoError(t, err)
	}
	require.Equal(t, 1, e.gh.callCount(lookup))
	id, err := e.store.InstallationForRepo(ctx, "octo/hello")
	require.NoError(t, err)
	require.EqualValues(t, testInstallation, id)

	// Not installed there: nothing will ever deliver, so the message dies.
	msg := outboxMessage(bot.OutboxReply, "wi_9/reply", "done")
	msg.Thread = bot.GitHubThread("elsewhere", "repo", 1)
	_, err = sink.Deliver(ctx, msg)
	de, ok := bot.AsDeliveryError(err)
	require.True(t, ok && de.Permanent, "%v", err)
}

func TestCommentBodyFitsGitHubsLimit(t *testing.T) {
	msg := outboxMessage(bot.OutboxReply, "wi_1/reply", strings.Repeat("é", 40000)) // 80000 bytes
	body := commentBody(msg)
	require.True(t, utf8.ValidString(body))
	require.LessOrEqual(t, utf8.RuneCountInString(body), 65536)
	require.True(t, strings.HasSuffix(body, "<!-- switchyard:wi_1/reply -->"))
	require.Contains(t, body, "cut to fit")
}

func TestMarkerCannotEndTheHTMLCommentEarly(t *testing.T) {
	require.Equal(t, "<!-- switchyard:github/4f1c-9a/refusal -->", marker("github/4f1c-9a/refusal"))
	for _, key := range []string{"a-->b", "a--b", "x y", "<script>", ""} {
		m := marker(key)
		inner := strings.TrimSuffix(strings.TrimPrefix(m, "<!-- "), " -->")
		require.NotContains(t, inner, "--", key)
		require.NotContains(t, inner, ">", key)
		require.NotEqual(t, marker("other"), m)
	}
	require.NotEqual(t, marker("a-->b"), marker("a--b"))
}

// GitHub did what was asked but its answer was lost (a 502 from a proxy, a
// connection cut, an answer that never came): the outbox tries again, and
// each comment still appears once, the status edited in place, each
// reaction once.
func TestLostAnswersLeaveOneCommentEach(t *testing.T) {
	const react = "POST /repos/{owner}/{repo}/issues/comments/{id}/reactions"
	lost := map[string]failure{
		"502":       {after: true, status: http.StatusBadGateway, body: `<html>bad gateway</html>`},
		"503":       {after: true, status: http.StatusServiceUnavailable, body: `{"message":"Service Unavailable"}`},
		"no answer": {after: true, hang: true},
		"401":       {after: true, status: http.StatusUnauthorized, body: `{"message":"Bad credentials"}`},
	}
	for name, fail := range lost {
		for _, pattern := range []string{createComment, editComment, react} {
			t.Run(name+" "+pattern, func(t *testing.T) {
				ctx := context.Background()
				e := newEnv(t)
				now := time.Now()
				d := bot.NewDeliverer(bot.DelivererOptions{
					Store: e.store, Sinks: map[string]bot.Sink{bot.SourceGitHub: NewSink(e.client)},
					MinEditInterval: time.Nanosecond, Timeout: 2 * time.Second, Now: func() time.Time { return now },
				})
				deliver := func() {
					t.Helper()
					for range 20 {
						if _, err := d.DeliverDue(ctx); err != nil {
							require.NoError(t, err)
						}
						n, _, err := e.store.OutboxPending(ctx)
						require.NoError(t, err)
						if n == 0 {
							return
						}
						now = now.Add(10 * time.Minute)
					}
					t.Fatal("messages still pending")
				}
				th := bot.GitHubThread("octo", "hello", 7)
				enqueue := func(m bot.OutboxMessage) {
					t.Helper()
					m.Thread, m.WorkItemID, m.CreatedAt = th, "wi_1", now
					_, err := e.store.Enqueue(ctx, m)
					require.NoError(t, err)
				}
				e.gh.fail(pattern, fail)
				enqueue(bot.OutboxMessage{Key: "wi_1/reaction/eyes", Kind: bot.OutboxReaction, Reaction: bot.ReactionSeen, Target: "comment:555"})
				enqueue(bot.OutboxMessage{Key: "wi_1/status", Kind: bot.OutboxStatus, Text: "⏳ working"})
				deliver()
				enqueue(bot.OutboxMessage{Key: "wi_1/status", Kind: bot.OutboxStatus, Text: "✅ finished"})
				enqueue(bot.OutboxMessage{Key: "wi_1/reply", Kind: bot.OutboxReply, Text: "Fixed the flaky test."})
				deliver()

				comments := e.gh.threadComments("octo/hello#7")
				require.Len(t, comments, 2, "one status, one reply")
				require.True(t, strings.HasPrefix(comments[0].Body, "✅ finished"), comments[0].Body)
				require.True(t, strings.HasPrefix(comments[1].Body, "Fixed the flaky test."), comments[1].Body)
				require.Len(t, e.gh.reactionList(), 1)
				for _, key := range []string{"wi_1/reaction/eyes", "wi_1/status", "wi_1/reply"} {
					m, err := e.store.GetOutbox(ctx, key)
					require.NoError(t, err)
					require.False(t, m.Dead, "%s: %s", key, m.LastError)
				}
			})
		}
	}
}

// Outbox keys are easy to guess: a comment another App or a workflow's bot
// posted with the marker of a message Switchyard was posting when it
// stopped is not taken for its own (it could not edit it): its own is
// posted.
func TestSinkFindsOnlyItsOwnComments(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	for _, u := range []ghUser{botUser("github-actions[bot]"), botUser("switchyard-evil[bot]"), botUser("xswitchyard[bot]"), person("switchyard[bot]")} {
		e.gh.addComment("octo/hello#7", "planted <!-- switchyard:wi_1/status -->", u)
	}
	store := e.store
	_, err := store.Enqueue(ctx, outboxMessage(bot.OutboxStatus, "wi_1/status", "⏳ working"))
	require.NoError(t, err)
	require.NoError(t, store.MarkAttempts(ctx, []string{"wi_1/status"}))
	d := bot.NewDeliverer(bot.DelivererOptions{Store: store, Sinks: map[string]bot.Sink{bot.SourceGitHub: NewSink(e.client)}})
	_, err = d.DeliverDue(ctx)
	require.NoError(t, err)

	m, err := store.GetOutbox(ctx, "wi_1/status")
	require.NoError(t, err)
	require.False(t, m.Dead, m.LastError)
	comments := e.gh.threadComments("octo/hello#7")
	require.Len(t, comments, 5)
	own := comments[4]
	require.Equal(t, strconv.FormatInt(own.ID, 10), m.RemoteID)
	require.Equal(t, "switchyard[bot]", own.User.Login)
	require.Equal(t, "⏳ working\n\n<!-- switchyard:wi_1/status -->", own.Body)
}

// A status comment a person deleted while the run worked: the edit GitHub
// answers 404 gives the status up (never edited again, however often the
// run reports), and the run still reports once in the issue, its reply a
// comment of its own and its reaction on the request.
func TestADeletedStatusCommentStillReportsOnce(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.gh.setPermission("octo/hello", "alice", "write", "write")
	reporter := bot.NewReporter(bot.ReporterOptions{Outbox: e.store})
	deliverer := bot.NewDeliverer(bot.DelivererOptions{
		Store: e.store, Sinks: map[string]bot.Sink{bot.SourceGitHub: NewSink(e.client)},
		MinEditInterval: time.Millisecond,
	})
	flush := func() {
		t.Helper()
		fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		require.NoError(t, deliverer.Flush(fctx))
	}
	body := issueCommentPayload("created", person("alice"), "@triage please look", nil).bytes(t)
	code, _ := e.post("issue_comment", "delivery-gone", body)
	require.Equal(t, http.StatusAccepted, code)
	items := e.workItems()
	require.Len(t, items, 1)
	wi := items[0]

	run := reporter.Start(ctx, &bot.Job{ID: "job_1", Agent: wi.Route.Agent, Attempt: 1}, items)
	flush()
	comments := e.gh.threadComments("octo/hello#7")
	require.Len(t, comments, 1)

	// A person deletes the status comment.
	e.gh.mu.Lock()
	e.gh.comments["octo/hello#7"] = nil
	e.gh.mu.Unlock()

	for i := range 3 {
		run.Report(ctx, bot.ProgressEvent{Kind: bot.ProgressToolCalled, Tool: "read_file", Text: fmt.Sprintf("reading file %d", i)})
		time.Sleep(5 * time.Millisecond)
		flush()
	}
	require.NoError(t, e.store.EnqueueAll(ctx, run.Finish(true, "The test waited on a real clock; it uses a fake one now.", "")))
	flush()
	flush()

	edits := e.gh.callCount("PATCH /repos/{owner}/{repo}/issues/comments/{id}")
	require.Equal(t, 1, edits, "the status GitHub said is gone is tried once and not edited again")
	comments = e.gh.threadComments("octo/hello#7")
	require.Len(t, comments, 1, "the reply, once; the deleted status is not posted again")
	require.Contains(t, comments[0].Body, "uses a fake one now")
	reactions := e.gh.reactionList()
	require.Equal(t, "rocket", reactions[len(reactions)-1].Content)
	pending, dead, err := e.store.OutboxPending(ctx)
	require.NoError(t, err)
	require.Zero(t, pending)
	require.Equal(t, 1, dead, "the status is given up, visibly")
}

// mentionRE is how GitHub finds mentions in a comment: an @ not inside a
// word, then a login.
var mentionRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_])@([A-Za-z0-9][A-Za-z0-9-]*)`)

// An approval request on an issue shows the arguments an agent wants to
// run as code the approver reads as they run: whatever the model put in
// them (Markdown, a fence of its own, a heading that passes for the
// request's words, a mention, controls that reorder text) stays inside one
// code block and renders as nothing else.
func TestAnApprovalRequestShowsTheArgumentsAsTheyRun(t *testing.T) {
	args := "rm -rf build\n````\n\n## ✅ Checked by the security team: approve\n@octo/security <img src=x> [docs](https://evil.example)\n```\necho \u202Egnp.exe\u202C\x1b[2J done"
	msg := outboxMessage(bot.OutboxReply, "approval/ap_3", "🔐 coder wants to run bash ("+args+"): needs approval\nApprove with a comment `/approve ap_3` or deny with `/deny ap_3` before 3:04PM; it is denied then.")
	msg.Approval = &bot.ApprovalView{ID: "ap_3", Agent: "coder", Tool: "bash", Arguments: args, Reason: "needs approval: rule deploys",
		State: "pending", ExpiresAt: time.Date(2025, 3, 4, 15, 4, 0, 0, time.UTC)}
	body := commentBody(msg)

	// One fenced block, longer than any run of backticks inside it.
	lines := strings.Split(body, "\n")
	open := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "```") })
	require.GreaterOrEqual(t, open, 0, body)
	fence := lines[open]
	require.Equal(t, strings.Repeat("`", 5), fence, "longer than the arguments' four")
	end := open + 1 + slices.Index(lines[open+1:], fence)
	require.Greater(t, end, open, body)
	shown := strings.Join(lines[open+1:end], "\n")
	require.Equal(t, bot.Plain(args), shown, "the arguments, whole, as plain text")
	require.NotContains(t, body, "\u202E")
	require.NotContains(t, body, "\x1b")

	// Outside the block: the request's own words, mentioning nobody the
	// arguments named.
	outside := strings.Join(lines[:open], "\n") + "\n" + strings.Join(lines[end+1:], "\n")
	require.Empty(t, mentionRE.FindAllString(outside, -1), outside)
	require.NotContains(t, outside, "Checked by")
	require.Contains(t, outside, "coder wants to run bash")
	require.Contains(t, outside, "`/approve ap_3`")
	require.Contains(t, outside, "before 15:04 UTC")

	// Decided, it says so in the words it was given.
	msg.Approval.State, msg.Approval.DecidedBy = "approved", "alice"
	msg.Text = "🔐 ap_3 approved by alice: coder runs bash."
	require.Equal(t, msg.Text+"\n\n"+marker(msg.Key), commentBody(msg))
}
