package github

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// syncBuffer is a log the deliverer's goroutines write to at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the logged lines at level that contain text.
func (b *syncBuffer) lines(level, text string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
		if strings.Contains(l, "level="+level+" ") && strings.Contains(l, text) {
			out = append(out, l)
		}
	}
	return out
}

// GitHub refuses one installation's work (its token, or every request
// for its repositories) while the other's goes on: the refused
// installation's backlog waits with one shared backoff — one warning, no
// attempt counted, at most one request a round, one App JWT — and, once
// GitHub takes it again, every message is posted once, in order, with one
// line saying it is back. A suspended installation or a refused App key is
// no reason to give its messages up.
func TestAnInstallationGitHubRefusesHoldsOnlyItsOwnBacklog(t *testing.T) {
	const (
		exchange  = "POST /app/installations/{id}/access_tokens"
		secondary = `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`
	)
	for _, tc := range []struct {
		name    string
		pattern string
		fail    failure
	}{
		{"installation suspended", exchange, failure{status: http.StatusForbidden,
			body: `{"message":"This installation has been suspended","documentation_url":"https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app"}`}},
		{"App key refused", exchange, failure{status: http.StatusUnauthorized,
			body: `{"message":"A JSON web token could not be decoded","documentation_url":"https://docs.github.com/rest"}`}},
		{"500", createComment, failure{status: http.StatusInternalServerError, body: `{"message":"Server Error"}`}},
		{"502 with HTML", createComment, failure{status: http.StatusBadGateway, body: "<html><body><h1>502 Bad Gateway</h1></body></html>"}},
		{"connection dropped", createComment, failure{drop: true}},
		{"secondary rate limit", createComment, failure{status: http.StatusForbidden, header: map[string]string{"Retry-After": "1"}, body: secondary}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t)
			e.gh.install("acme/api", testInstallation+1)
			var refusing atomic.Bool
			refuse := func(r *http.Request, pattern string) *failure {
				if !refusing.Load() || pattern != tc.pattern {
					return nil
				}
				if r.PathValue("id") == fmt.Sprint(testInstallation) || r.PathValue("owner") == "octo" {
					f := tc.fail
					return &f
				}
				return nil
			}
			e.gh.refuse.Store(&refuse)

			now := time.Now()
			logs := &syncBuffer{}
			metrics := bot.NewMetrics(prometheus.NewRegistry())
			d := bot.NewDeliverer(bot.DelivererOptions{
				Store: e.store, Sinks: map[string]bot.Sink{bot.SourceGitHub: NewSink(e.client)}, Metrics: metrics,
				Timeout: 5 * time.Second, Now: func() time.Time { return now },
				Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
			})
			round := func() {
				t.Helper()
				_, err := d.DeliverDue(ctx)
				require.NoError(t, err)
				now = now.Add(time.Minute)
			}
			const items = 6
			for _, th := range []bot.Thread{bot.GitHubThread("octo", "hello", 7), bot.GitHubThread("acme", "api", 3)} {
				for i := range items {
					for _, kind := range []bot.OutboxKind{bot.OutboxStatus, bot.OutboxReply} {
						_, err := e.store.Enqueue(ctx, bot.OutboxMessage{
							Key: fmt.Sprintf("%s/wi_%d/%s", th.Owner, i, kind), Thread: th, WorkItemID: fmt.Sprintf("%s-wi_%d", th.Owner, i),
							Kind: kind, Text: fmt.Sprintf("%s of %s wi_%d", kind, th.Owner, i), CreatedAt: now,
						})
						require.NoError(t, err)
					}
				}
			}

			refusing.Store(true)
			round()
			require.Len(t, e.gh.threadComments("acme/api#3"), 2*items, "the other installation's messages went out")
			require.Equal(t, []string{"github/octo"}, keys(d.Down()))
			require.Equal(t, 0.0, testutil.ToFloat64(metrics.SinkUp.WithLabelValues("github/octo")))
			require.Equal(t, 1.0, testutil.ToFloat64(metrics.SinkUp.WithLabelValues("github/acme")))
			for range 5 {
				before := e.gh.callCount(tc.pattern)
				round()
				require.LessOrEqual(t, e.gh.callCount(tc.pattern)-before, 1, "one try a round while refused")
			}
			for i := range items {
				for _, kind := range []bot.OutboxKind{bot.OutboxStatus, bot.OutboxReply} {
					m, err := e.store.GetOutbox(ctx, fmt.Sprintf("octo/wi_%d/%s", i, kind))
					require.NoError(t, err)
					require.False(t, m.Dead, "%s given up: %s", m.Key, m.LastError)
					require.Zero(t, m.Attempts, "%s: GitHub's refusal is not the message's", m.Key)
				}
			}
			require.Len(t, logs.lines("WARN", ""), 1, "one warning")
			require.Len(t, logs.lines("WARN", "github/octo is down"), 1)
			require.Empty(t, e.gh.threadComments("octo/hello#7"))

			refusing.Store(false)
			deadline := time.Now().Add(30 * time.Second)
			for {
				pending, _, err := e.store.OutboxPending(ctx)
				require.NoError(t, err)
				if pending == 0 {
					break
				}
				require.True(t, time.Now().Before(deadline), "%d messages still pending", pending)
				round()
				if len(d.Down()) > 0 {
					// GitHub's client keeps a rate limit's wait itself, by
					// the clock: let it pass.
					time.Sleep(50 * time.Millisecond)
				}
			}
			comments := e.gh.threadComments("octo/hello#7")
			require.Len(t, comments, 2*items, "each message posted once")
			at := map[string]int{}
			for i, c := range comments {
				for _, kind := range []bot.OutboxKind{bot.OutboxStatus, bot.OutboxReply} {
					for w := range items {
						if strings.Contains(c.Body, marker(fmt.Sprintf("octo/wi_%d/%s", w, kind))+"") {
							key := fmt.Sprintf("wi_%d/%s", w, kind)
							_, twice := at[key]
							require.False(t, twice, "%s posted twice", key)
							at[key] = i
						}
					}
				}
			}
			for w := range items {
				require.Less(t, at[fmt.Sprintf("wi_%d/status", w)], at[fmt.Sprintf("wi_%d/reply", w)], "wi_%d: status before reply", w)
			}
			require.Empty(t, d.Down())
			require.Equal(t, 1.0, testutil.ToFloat64(metrics.SinkUp.WithLabelValues("github/octo")))
			require.Len(t, logs.lines("INFO", "github/octo is back"), 1, "one line when it is back")
			require.Len(t, logs.lines("WARN", ""), 1)
			e.client.jwt.mu.Lock()
			signed := e.client.jwt.signed
			e.client.jwt.mu.Unlock()
			require.Equal(t, 1, signed, "one App JWT for the whole test")
		})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A message GitHub will never take (the issue is gone, the comment is
// refused) is given up at once, not retried, and says why in GitHub's
// words, with neither the request's URL nor Go's rendering of the details.
func TestAMessageGitHubRefusesEndsFailedWithItsReason(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail failure
		want string
	}{
		{"issue gone", failure{status: http.StatusNotFound, body: `{"message":"Not Found","documentation_url":"https://docs.github.com/rest/issues/comments#create-an-issue-comment"}`},
			"comment on github:octo/hello#7: GitHub answered 404: Not Found"},
		{"deleted", failure{status: http.StatusGone, body: `{"message":"This issue was deleted"}`},
			"comment on github:octo/hello#7: GitHub answered 410: This issue was deleted"},
		{"refused", failure{status: http.StatusUnprocessableEntity,
			body: `{"message":"Validation Failed","errors":[{"resource":"IssueComment","code":"custom","field":"body","message":"body is too long (maximum is 65536 characters)"}]}`},
			"comment on github:octo/hello#7: GitHub answered 422: Validation Failed (body is too long (maximum is 65536 characters))"},
		{"refused without a message", failure{status: http.StatusUnprocessableEntity, body: `<html>no</html>`},
			"comment on github:octo/hello#7: GitHub answered 422: Unprocessable Entity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t)
			logs := &syncBuffer{}
			d := bot.NewDeliverer(bot.DelivererOptions{
				Store: e.store, Sinks: map[string]bot.Sink{bot.SourceGitHub: NewSink(e.client)},
				Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
			})
			_, err := e.store.Enqueue(ctx, bot.OutboxMessage{Key: "wi_1/reply", Thread: bot.GitHubThread("octo", "hello", 7), WorkItemID: "wi_1", Kind: bot.OutboxReply, Text: "done"})
			require.NoError(t, err)
			e.gh.fail(createComment, tc.fail)
			_, err = d.DeliverDue(ctx)
			require.NoError(t, err)
			m, err := e.store.GetOutbox(ctx, "wi_1/reply")
			require.NoError(t, err)
			require.True(t, m.Dead, "given up at once")
			require.Equal(t, "permanent: "+tc.want, m.LastError)
			require.Equal(t, 1, e.gh.callCount(createComment), "tried once")
			require.Len(t, logs.lines("WARN", "outbox message given up"), 1)
			require.Empty(t, d.Down(), "one message refused is not GitHub down")
		})
	}
}

// The App is uninstalled from an account while its replies wait, and
// installed again (under a new id): the replies wait meanwhile, none given
// up, with one warning, and are posted once each when it is back. A
// repository the App is not installed on, on an account it never was,
// gives its message up at once.
func TestMessagesWaitForTheAppToBeInstalledAgain(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	now := time.Now()
	e.client.now = func() time.Time { return now }
	logs := &syncBuffer{}
	metrics := bot.NewMetrics(prometheus.NewRegistry())
	d := bot.NewDeliverer(bot.DelivererOptions{
		Store: e.store, Sinks: map[string]bot.Sink{bot.SourceGitHub: NewSink(e.client)}, Metrics: metrics,
		Now:    func() time.Time { return now },
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	round := func() {
		t.Helper()
		_, err := d.DeliverDue(ctx)
		require.NoError(t, err)
		now = now.Add(time.Minute)
	}
	th := bot.GitHubThread("octo", "hello", 7)
	put := func(key string) {
		t.Helper()
		_, err := e.store.Enqueue(ctx, bot.OutboxMessage{Key: key, Thread: th, WorkItemID: strings.Split(key, "/")[0], Kind: bot.OutboxReply, Text: key})
		require.NoError(t, err)
	}
	put("wi_0/reply")
	round()
	require.Len(t, e.gh.threadComments("octo/hello#7"), 1)

	e.gh.uninstall(testInstallation)
	for i := 1; i <= 6; i++ {
		put(fmt.Sprintf("wi_%d/reply", i))
	}
	for range 6 {
		round()
	}
	require.Contains(t, d.Down(), "github/octo")
	require.Equal(t, 0.0, testutil.ToFloat64(metrics.SinkUp.WithLabelValues("github/octo")))
	for i := 1; i <= 6; i++ {
		m, err := e.store.GetOutbox(ctx, fmt.Sprintf("wi_%d/reply", i))
		require.NoError(t, err)
		require.False(t, m.Dead, "%s given up: %s", m.Key, m.LastError)
	}
	require.Len(t, logs.lines("WARN", ""), 1, "one warning")
	require.Contains(t, logs.lines("WARN", "")[0], "not installed on octo")

	e.gh.install("octo/hello", testInstallation+1)
	for range 6 {
		round()
	}
	require.Empty(t, d.Down())
	comments := e.gh.threadComments("octo/hello#7")
	require.Len(t, comments, 7, "each reply posted once")
	for i, c := range comments {
		require.True(t, strings.HasPrefix(c.Body, fmt.Sprintf("wi_%d/reply", i)), "in order: %s", c.Body)
	}
	require.Len(t, logs.lines("INFO", "github/octo is back"), 1)

	// An account the App was never installed on: nothing will deliver.
	_, err := e.store.Enqueue(ctx, bot.OutboxMessage{Key: "wi_9/reply", Thread: bot.GitHubThread("elsewhere", "repo", 1), WorkItemID: "wi_9", Kind: bot.OutboxReply, Text: "x"})
	require.NoError(t, err)
	round()
	m, err := e.store.GetOutbox(ctx, "wi_9/reply")
	require.NoError(t, err)
	require.True(t, m.Dead)
	require.Contains(t, m.LastError, "not installed on elsewhere/repo")
}

// The App is uninstalled from an account (GitHub's installation.deleted
// webhook reached the daemon) while its replies wait, and the daemon is
// restarted before the App is installed again: the replies from before the
// restart still wait, none given up, and are posted once each when it is.
func TestMessagesWaitingForTheAppSurviveARestart(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	th := bot.GitHubThread("octo", "hello", 7)
	for i := range 3 {
		_, err := e.store.Enqueue(ctx, bot.OutboxMessage{Key: fmt.Sprintf("wi_%d/reply", i), Thread: th, WorkItemID: fmt.Sprintf("wi_%d", i), Kind: bot.OutboxReply, Text: fmt.Sprintf("wi_%d/reply", i)})
		require.NoError(t, err)
	}
	e.gh.uninstall(testInstallation)
	require.NoError(t, e.store.DeleteInstallation(ctx, testInstallation))

	// The next start: a client that has seen nothing of the account yet.
	client, err := NewClient(ClientOptions{
		AppID: testAppID, PrivateKey: bot.Secret(testKeyPEM()), APIURL: e.gh.url(), Installations: e.store,
	})
	require.NoError(t, err)
	now := time.Now()
	client.now = func() time.Time { return now }
	d := bot.NewDeliverer(bot.DelivererOptions{
		Store: e.store, Sinks: map[string]bot.Sink{bot.SourceGitHub: NewSink(client)},
		Now: func() time.Time { return now },
	})
	round := func() {
		t.Helper()
		_, err := d.DeliverDue(ctx)
		require.NoError(t, err)
		now = now.Add(time.Minute)
	}
	for range 6 {
		round()
	}
	require.Contains(t, d.Down(), "github/octo")
	for i := range 3 {
		m, err := e.store.GetOutbox(ctx, fmt.Sprintf("wi_%d/reply", i))
		require.NoError(t, err)
		require.False(t, m.Dead, "%s given up: %s", m.Key, m.LastError)
	}

	e.gh.install("octo/hello", testInstallation+1)
	for range 6 {
		round()
	}
	require.Empty(t, d.Down())
	comments := e.gh.threadComments("octo/hello#7")
	require.Len(t, comments, 3, "each reply posted once")
	for i, c := range comments {
		require.True(t, strings.HasPrefix(c.Body, fmt.Sprintf("wi_%d/reply", i)), "in order: %s", c.Body)
	}
}
