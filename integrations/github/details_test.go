package github

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// The worker reads the stored payload with go-github and tells the run
// what the issue or pull request is.
func TestDetailsSayWhatTheThreadIs(t *testing.T) {
	for _, tc := range []struct {
		file, want string
	}{
		{"pull_request/opened.payload.json",
			`Pull request #2 "Update the README with new information." by @Codertocat (open), Codertocat:changes into master: https://github.com/Codertocat/Hello-World/pull/2`},
		{"issues/opened.payload.json",
			`Issue #1 "Spelling error in the README file" by @Codertocat (open): https://github.com/Codertocat/Hello-World/issues/1`},
		{"issue_comment/created.payload.json",
			"Issue #1 \"Spelling error in the README file\" by @Codertocat (open): https://github.com/Codertocat/Hello-World/issues/1\n" +
				"Comment by @Codertocat: https://github.com/Codertocat/Hello-World/issues/1#issuecomment-492700400"},
		{"push/payload.json", ""},
	} {
		t.Run(tc.file, func(t *testing.T) {
			event, _, _ := strings.Cut(tc.file, "/")
			d, err := readDelivery(event, "d-1", fixture(t, tc.file))
			require.NoError(t, err)
			got, err := Details{}.Details(context.Background(), d.ev)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	got, err := Details{}.Details(context.Background(), &bot.Event{Source: bot.SourceGitHub, Kind: "github.issues.opened"})
	require.NoError(t, err)
	require.Empty(t, got, "a payload no longer kept adds nothing")
}

// A job of a work item made from a pull request starts with what the
// pull request is, read from the stored payload, ahead of its text.
func TestRunsAreToldWhatThePullRequestIs(t *testing.T) {
	e := newEnv(t)
	code, a := e.post("pull_request", "d-1", fixture(t, "pull_request/opened.payload.json"))
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, "accepted", a.Status, "the bug label's rule")

	got := make(chan []bot.WorkItem, 1)
	runner := runnerFunc(func(_ context.Context, req bot.RunRequest, _ bot.Progress) (bot.RunResult, error) {
		got <- req.WorkItems
		return bot.RunResult{Status: bot.ResultSuccess, Reply: "ok"}, nil
	})
	dispatcher := bot.NewDispatcher(bot.DispatcherOptions{
		Queue: e.store, Items: e.store, Runner: runner, Reporter: bot.NewReporter(bot.ReporterOptions{Outbox: e.store}),
		Details: map[string]bot.Detailer{bot.SourceGitHub: Details{}}, Poll: 10 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = dispatcher.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case items := <-got:
		require.Len(t, items, 1)
		require.Equal(t, "Pull request #2 \"Update the README with new information.\" by @Codertocat (open), Codertocat:changes into master: "+
			"https://github.com/Codertocat/Hello-World/pull/2\n\nThis is a pretty simple change that we need to pull into master.", items[0].Text)
		stored, err := e.store.GetWorkItem(ctx, items[0].ID)
		require.NoError(t, err)
		require.Equal(t, "This is a pretty simple change that we need to pull into master.", stored.Text, "the work item keeps its text")
	case <-time.After(10 * time.Second):
		t.Fatal("no job ran")
	}
}

type runnerFunc func(context.Context, bot.RunRequest, bot.Progress) (bot.RunResult, error)

func (f runnerFunc) Run(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
	return f(ctx, req, p)
}
