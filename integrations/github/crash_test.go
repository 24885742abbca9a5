package github

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// The requests a delivery makes: reactions, the comments it creates, edits
// and, after a crash, looks for.
var deliveryCalls = map[string]bool{
	createComment: true, editComment: true, listComments: true,
	"POST /repos/{owner}/{repo}/issues/{number}/reactions":      true,
	"POST /repos/{owner}/{repo}/issues/comments/{id}/reactions": true,
}

// crash says where a delivery is killed: before GitHub acts on a request,
// or after it acted but before its answer reaches the daemon.
type crash int

const (
	crashBefore crash = iota
	crashAfter
)

func (c crash) String() string { return [...]string{"before", "after"}[c] }

// process is the life of one daemon process: killing it cancels what it
// does.
type process struct {
	mu   sync.Mutex
	ctx  context.Context
	stop context.CancelFunc
}

func (p *process) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ctx, p.stop = context.WithCancel(context.Background())
}

func (p *process) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stop()
}

func (p *process) context() context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ctx
}

const finalReply = "Fixed the flaky test in #8: the retry now waits for the server."

// githubSteps are what a work item's reporter enqueues on an issue comment
// that mentions the bot, step by step: 👀 on the comment, a status edited
// as the run goes, the final status with the reply, the reply edited, ✅.
func githubSteps() [][]bot.OutboxMessage {
	th := bot.GitHubThread("octo", "hello", 7)
	started := time.Now().Add(-time.Minute)
	status := func(state, activity string) bot.OutboxMessage {
		v := &bot.StatusView{WorkItemID: "wi_1", Agent: "coder", State: state, Activity: activity, Started: started, Updated: time.Now(), Attempt: 1}
		return bot.OutboxMessage{Key: "wi_1/status", Thread: th, WorkItemID: "wi_1", Kind: bot.OutboxStatus,
			Text: state + ": " + activity, Status: v}
	}
	reply := func(text string) bot.OutboxMessage {
		return bot.OutboxMessage{Key: "wi_1/reply", Thread: th, WorkItemID: "wi_1", Kind: bot.OutboxReply, Text: text}
	}
	reaction := func(name string) bot.OutboxMessage {
		return bot.OutboxMessage{Key: bot.ReactionKey("wi_1", name), Thread: th, WorkItemID: "wi_1", Kind: bot.OutboxReaction,
			Reaction: name, Target: "comment:555"}
	}
	return [][]bot.OutboxMessage{
		{reaction(bot.ReactionSeen)},
		{status("queued", "waiting for a worker")},
		{status("running", "reading main.go")},
		{status("running", "running the tests")},
		{status("done", "finished"), reply("Fixed the flaky test.")},
		{reply(finalReply)},
		{reaction(bot.ReactionSuccess)},
	}
}

// deliverGitHubSteps enqueues the steps on a real store and delivers each
// through the GitHub sink, killing the process that delivers at the
// delivery requests in killAt (counted over the whole run) as c says, and
// starting a new one (a new client and sink over the same store) after
// each kill, as a restart would. It returns the env and the number of
// delivery requests made and of restarts.
func deliverGitHubSteps(t *testing.T, c crash, killAt ...int) (e *env, calls, restarts int) {
	t.Helper()
	e = newEnv(t)
	bg := context.Background()
	var proc process
	proc.start()
	defer proc.kill()
	e.gh.mu.Lock()
	e.gh.intercept = func(pattern string) *failure {
		if !deliveryCalls[pattern] {
			return nil
		}
		calls++
		if !slices.Contains(killAt, calls) {
			return nil
		}
		// The process dies there; the request is cut off with it.
		return &failure{drop: true, after: c == crashAfter, then: proc.kill}
	}
	e.gh.mu.Unlock()

	for _, step := range githubSteps() {
		require.NoError(t, e.store.EnqueueAll(bg, step))
		for {
			client, err := NewClient(ClientOptions{
				AppID: testAppID, PrivateKey: bot.Secret(testKeyPEM()), APIURL: e.gh.url(), Installations: e.store,
			})
			require.NoError(t, err)
			d := bot.NewDeliverer(bot.DelivererOptions{Store: e.store, Sinks: map[string]bot.Sink{bot.SourceGitHub: NewSink(client)},
				MinEditInterval: time.Millisecond})
			ctx := proc.context()
			fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			err = d.Flush(fctx)
			cancel()
			if ctx.Err() == nil {
				require.NoError(t, err)
				break
			}
			// Killed: the next process starts with what the store kept.
			restarts++
			require.LessOrEqual(t, restarts, len(killAt), "restarted more often than killed")
			proc.start()
		}
	}
	e.gh.mu.Lock()
	defer e.gh.mu.Unlock()
	e.gh.intercept = nil
	return e, calls, restarts
}

// TestKilledAtEveryGitHubCallEachMessageAppearsOnce kills the delivery of
// a work item's messages on GitHub at every request it makes (the 👀 and
// ✅ reactions, the status comment's creation and each edit, the reply's
// creation and edit, a search for a comment after a restart), before
// GitHub acts and after it did but before the answer arrives, then at
// pairs of requests: after the restarts the issue has one status comment,
// edited into its final state, and one reply with its latest text, and
// each reaction once.
func TestKilledAtEveryGitHubCallEachMessageAppearsOnce(t *testing.T) {
	_, calls, _ := deliverGitHubSteps(t, crashBefore)
	require.GreaterOrEqual(t, calls, 8)

	check := func(t *testing.T, e *env) {
		t.Helper()
		comments := e.gh.threadComments("octo/hello#7")
		require.Len(t, comments, 2, "one status, one reply: %v", comments)
		require.Equal(t, "done: finished\n\n<!-- switchyard:wi_1/status -->", comments[0].Body)
		require.Equal(t, finalReply+"\n\n<!-- switchyard:wi_1/reply -->", comments[1].Body)
		var contents []string
		for _, r := range e.gh.reactionList() {
			require.Equal(t, "/repos/octo/hello/issues/comments/555/reactions", r.Path)
			contents = append(contents, r.Content)
		}
		require.ElementsMatch(t, []string{"eyes", "rocket"}, contents, "each reaction once")
		msgs, err := e.store.ListOutbox(context.Background(), bot.GitHubThread("octo", "hello", 7).Key())
		require.NoError(t, err)
		for _, m := range msgs {
			require.False(t, m.Dead, "%s: %s", m.Key, m.LastError)
			require.False(t, m.Pending(), "%s is still pending", m.Key)
		}
	}
	var runs [][]int
	for k := 1; k <= calls; k++ {
		runs = append(runs, []int{k})
	}
	for k := 1; k+1 <= calls; k += 2 {
		runs = append(runs, []int{k, k + 1})
	}
	for _, c := range []crash{crashBefore, crashAfter} {
		for _, killAt := range runs {
			t.Run(fmt.Sprintf("%s call %s", c, strings.Trim(fmt.Sprint(killAt), "[]")), func(t *testing.T) {
				e, _, restarts := deliverGitHubSteps(t, c, killAt...)
				require.GreaterOrEqual(t, restarts, 1, "killed")
				check(t, e)
			})
		}
	}
}
