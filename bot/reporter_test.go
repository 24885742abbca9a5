package bot_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

func statusText(t *testing.T, store bot.OutboxStore, key string) string {
	t.Helper()
	m, err := store.GetOutbox(context.Background(), key)
	if bot.ErrorCode(err) == bot.ENOTFOUND {
		return ""
	}
	require.NoError(t, err)
	return m.Text
}

// TestStatusElapsedTimeMovesDuringALongToolCall runs a job whose tool call
// reports nothing for a minute and a half: the status message still shows
// the time passing, counted from the job's start.
func TestStatusElapsedTimeMovesDuringALongToolCall(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)}
	release := make(chan struct{})
	runner := runnerFunc(func(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
		p.Report(ctx, bot.ProgressEvent{Kind: bot.ProgressToolCalled, Tool: "bash"})
		<-release
		return bot.RunResult{Status: bot.ResultSuccess, Reply: "built"}, nil
	})
	store := openStore(t, t.TempDir())
	// The lease is longer than the time the clock jumps.
	c := startCore(t, store, coreOpts{runner: runner, now: clock.Now, refresh: 10 * time.Millisecond, lease: time.Hour})
	wi := c.send(t, "t1", "build it")
	key := wi.ID + "/status"
	require.Eventually(t, func() bool {
		return statusText(t, store, key) == "⏳ triage is working on "+wi.ID+" (0s): calling bash"
	}, 5*time.Second, 5*time.Millisecond)

	clock.Add(83 * time.Second)
	require.Eventually(t, func() bool {
		return statusText(t, store, key) == "⏳ triage is working on "+wi.ID+" (1m23s): calling bash"
	}, 5*time.Second, 5*time.Millisecond, "the status is refreshed while the tool runs")

	clock.Add(7 * time.Second)
	close(release)
	c.waitFinished(t, wi.ID)
	require.Equal(t, "✅ triage finished "+wi.ID+" in 1m30s", statusText(t, store, key))
	// The refresh stopped with the job: the final state stays.
	clock.Add(time.Minute)
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, "✅ triage finished "+wi.ID+" in 1m30s", statusText(t, store, key))
}

// TestStatusCountsTheRequestsOfABatchedJob checks the status of a job that
// took later messages along counts them and says where they are listed,
// instead of listing every id.
func TestStatusCountsTheRequestsOfABatchedJob(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	runner := runnerFunc(func(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
		first := false
		once.Do(func() { first = true })
		if first {
			<-release
		}
		return bot.RunResult{Status: bot.ResultSuccess, Reply: "ok"}, nil
	})
	store := openStore(t, t.TempDir())
	c := startCore(t, store, coreOpts{runner: runner})
	first := c.send(t, "t1", "one")
	require.Eventually(t, func() bool { return statusText(t, store, first.ID+"/status") != "" }, 5*time.Second, 5*time.Millisecond)
	second, third, fourth := c.send(t, "t1", "two"), c.send(t, "t1", "three"), c.send(t, "t1", "four")
	close(release)
	c.waitFinished(t, fourth.ID)
	jobs, err := store.ListJobs(context.Background(), fourth.ID)
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, []string{second.ID, third.ID, fourth.ID}, jobs[0].WorkItemIDs)
	require.Equal(t, "✅ triage finished "+second.ID+" in 0s (3 requests in all: switchyard workitems list --job "+jobs[0].ID+")",
		statusText(t, store, second.ID+"/status"))
}

// TestSeenComesBeforeTheStatusWithoutTheIntakes runs a work item the intake
// did not react to (as one a schedule or a hand-off makes): the reporter
// makes sure of 👀, which still goes out first, and ✅ last.
func TestSeenComesBeforeTheStatusWithoutTheIntakes(t *testing.T) {
	store := openStore(t, t.TempDir())
	sink := &orderSink{}
	runner := runnerFunc(func(context.Context, bot.RunRequest, bot.Progress) (bot.RunResult, error) {
		return bot.RunResult{Status: bot.ResultSuccess, Reply: "done"}, nil
	})
	c := startCore(t, store, coreOpts{runner: runner, noReact: true, sinks: map[string]bot.Sink{bot.SourceSlack: sink}})
	res, err := c.intake.Ingest(context.Background(), &bot.Event{
		Source: bot.SourceSlack, Kind: bot.KindSlackMention, Text: "hi", Thread: slackThread, SourceRef: "1700000000.000100",
	})
	require.NoError(t, err)
	wi := res.WorkItem
	c.waitFinished(t, wi.ID)
	want := []string{wi.ID + "/reaction/eyes", wi.ID + "/status", wi.ID + "/reply", wi.ID + "/reaction/white_check_mark"}
	require.Eventually(t, func() bool {
		got := sink.delivered()
		return len(got) >= 4 && got[len(got)-1] == want[3]
	}, 5*time.Second, 5*time.Millisecond)
	var order []string
	for _, k := range sink.delivered() {
		if len(order) == 0 || order[len(order)-1] != k {
			order = append(order, k) // status edits repeat its key
		}
	}
	require.Equal(t, want, order)
}

// TestAbandonedWorkItemLeavesNoStatusWorking: a work item whose workers kept
// dying ends with its status message saying it failed, beside the reply.
func TestAbandonedWorkItemLeavesNoStatusWorking(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	intake := bot.NewIntake(bot.IntakeOptions{Store: store, Router: toAgent("triage")})
	res, err := intake.Ingest(ctx, &bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Text: "x", Thread: bot.LocalThread("t")})
	require.NoError(t, err)
	wi := res.WorkItem
	// A worker that then died showed the status as working.
	claim, err := store.ClaimNext(ctx, bot.ClaimRequest{Owner: "dead", Now: time.Now(), Lease: time.Millisecond, MaxAttempts: 1})
	require.NoError(t, err)
	rep := bot.NewReporter(bot.ReporterOptions{Outbox: store})
	rep.Start(ctx, claim.Job, claim.WorkItems).Close()
	require.Contains(t, statusText(t, store, wi.ID+"/status"), "is working on")

	c := startCore(t, store, coreOpts{runner: bot.NoRuntime{}, maxAttempts: 1})
	require.Equal(t, bot.StatusFailed, c.waitFinished(t, wi.ID).Status)
	require.Eventually(t, func() bool {
		msgs := c.messages(t, "t")
		return len(msgs) == 2 && msgs[0].Kind == "status" && msgs[1].Kind == "reply" &&
			strings.HasPrefix(msgs[0].Text, "❌ triage failed "+wi.ID) && strings.Contains(msgs[0].Text, "lease expired") &&
			strings.Contains(msgs[1].Text, "could not finish "+wi.ID)
	}, 5*time.Second, 10*time.Millisecond, "%v", c.messages(t, "t"))
}

// TestStatusShowsTheSkillsLoaded checks each skill the agent loads shows in
// its status message for the rest of the run, and one it unloads goes.
func TestStatusShowsTheSkillsLoaded(t *testing.T) {
	runner := runnerFunc(func(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
		p.Report(ctx, bot.ProgressEvent{Kind: bot.ProgressSkills, Skills: []string{"release-notes", "changelog-draft"}})
		p.Report(ctx, bot.ProgressEvent{Kind: bot.ProgressToolCalled, Text: "reading CHANGELOG.md"})
		p.Report(ctx, bot.ProgressEvent{Kind: bot.ProgressSkills, Skills: []string{"release-notes"}})
		return bot.RunResult{Status: bot.ResultSuccess, Reply: "notes"}, nil
	})
	store := openStore(t, t.TempDir())
	c := startCore(t, store, coreOpts{runner: runner})
	wi := c.send(t, "t1", "release notes please")
	c.waitFinished(t, wi.ID)
	require.Equal(t, "✅ triage finished "+wi.ID+" in 0s\n🧩 release-notes", statusText(t, store, wi.ID+"/status"))
	msg, err := store.GetOutbox(context.Background(), wi.ID+"/status")
	require.NoError(t, err)
	require.Equal(t, []string{"release-notes"}, msg.Status.Skills, "the skills are typed fields of the status for sinks")
}

// TestABlankReplySaysTheAgentFinished: an agent that succeeds without a
// word (or only blank lines) still leaves a reply in the thread, which every
// platform accepts, rather than an empty one a platform refuses for good.
func TestABlankReplySaysTheAgentFinished(t *testing.T) {
	for _, reply := range []string{"", " ", "\n\n", "\t \r\n"} {
		store := openStore(t, t.TempDir())
		runner := runnerFunc(func(context.Context, bot.RunRequest, bot.Progress) (bot.RunResult, error) {
			return bot.RunResult{Status: bot.ResultSuccess, Reply: reply}, nil
		})
		c := startCore(t, store, coreOpts{runner: runner})
		wi := c.send(t, "t1", "tidy up")
		c.waitFinished(t, wi.ID)
		require.Equal(t, "triage finished "+wi.ID+" and wrote no reply.", statusText(t, store, wi.ID+"/reply"), "%q", reply)
	}
}

// TestEachRequestOfABatchedJobEndsWithItsReaction: messages a job took
// along each had their 👀; when the job ends, each has ✅ (❌ when it
// failed) too, written with the job's end, so none reads as still being
// worked on. The job's reply is one, on its lead.
func TestEachRequestOfABatchedJobEndsWithItsReaction(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   string
		reaction string
	}{
		{"succeeded", bot.ResultSuccess, bot.ReactionSuccess},
		{"failed", bot.ResultError, bot.ReactionFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			var once sync.Once
			runner := runnerFunc(func(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
				first := false
				once.Do(func() { first = true })
				if first {
					<-release
				}
				return bot.RunResult{Status: tc.status, Reply: "ok", Error: "it broke"}, nil
			})
			store := openStore(t, t.TempDir())
			c := startCore(t, store, coreOpts{runner: runner, sinks: map[string]bot.Sink{bot.SourceSlack: &orderSink{}}})
			send := func(ts string) *bot.WorkItem {
				res, err := c.intake.Ingest(context.Background(), &bot.Event{
					Source: bot.SourceSlack, Kind: bot.KindSlackMention, Text: "hi " + ts, Thread: slackThread, SourceRef: ts,
				})
				require.NoError(t, err)
				require.NotNil(t, res.WorkItem)
				return res.WorkItem
			}
			first := send("1700000000.000100")
			require.Eventually(t, func() bool { return statusText(t, store, first.ID+"/status") != "" }, 5*time.Second, 5*time.Millisecond)
			batched := []*bot.WorkItem{send("1700000001.000100"), send("1700000002.000100"), send("1700000003.000100")}
			close(release)
			for _, wi := range batched {
				c.waitFinished(t, wi.ID)
			}
			msgs, err := store.ListOutbox(context.Background(), slackThread.Key())
			require.NoError(t, err)
			keys := map[string]int{}
			for _, m := range msgs {
				keys[m.Key]++
			}
			for _, wi := range batched {
				require.Equal(t, 1, keys[bot.ReactionKey(wi.ID, bot.ReactionSeen)], wi.ID)
				require.Equal(t, 1, keys[bot.ReactionKey(wi.ID, tc.reaction)], wi.ID)
			}
			lead := batched[0].ID
			require.Equal(t, 1, keys[lead+"/reply"])
			require.Zero(t, keys[batched[1].ID+"/reply"]+keys[batched[2].ID+"/reply"], "one reply for the job")
		})
	}
}
