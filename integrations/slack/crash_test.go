package slack

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// workItemSteps are what a work item's reporter enqueues, step by step: 👀,
// a status edited as the run goes, a long reply with the final status,
// the reply edited longer, then ✅.
func workItemSteps() [][]bot.OutboxMessage {
	started := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	status := func(state, activity string, at time.Duration) bot.OutboxMessage {
		return bot.OutboxMessage{Key: "wi_1/status", Thread: thread, WorkItemID: "wi_1", Kind: bot.OutboxStatus,
			Status: &bot.StatusView{WorkItemID: "wi_1", Agent: "coder", State: state, Activity: activity,
				Started: started, Updated: started.Add(at)}}
	}
	reply := func(text string) bot.OutboxMessage {
		return bot.OutboxMessage{Key: "wi_1/reply", Thread: thread, WorkItemID: "wi_1", Kind: bot.OutboxReply, Text: text}
	}
	reaction := func(name string) bot.OutboxMessage {
		return bot.OutboxMessage{Key: "wi_1/reaction/" + name, Thread: thread, WorkItemID: "wi_1", Kind: bot.OutboxReaction,
			Target: thread.ThreadTS, Reaction: name}
	}
	return [][]bot.OutboxMessage{
		{reaction(bot.ReactionSeen)},
		{status("queued", "waiting for a worker", 0)},
		{status("running", "reading main.go", 5*time.Second)},
		{status("running", "running the tests", 20*time.Second)},
		{status("done", "finished", 40*time.Second), reply(longReply())},
		{reply(longReply() + strings.Repeat("And one more line, to make the reply a part longer.\n", 80))},
		{reaction(bot.ReactionSuccess)},
	}
}

// crash says where a delivery is killed: before the fake Slack acts on a
// call, or after it acted but before its answer reaches the daemon.
type crash int

const (
	crashBefore crash = iota
	crashAfter
)

func (c crash) String() string { return [...]string{"before", "after"}[c] }

// deliverSteps enqueues the steps on a real store and delivers each
// through the Slack sink, killing the deliverer at the API calls in
// killAt (counted over the whole run) as c says, and starting a new one
// after each kill, as a restart would. It returns the fake Slack and the
// number of Web API calls made and of restarts.
func deliverSteps(t *testing.T, c crash, killAt ...int) (fs *fakeSlack, calls, restarts int) {
	t.Helper()
	fs = newFakeSlack(t)
	store := newTestStore(t)
	api := slack.New("xoxb-test", slack.OptionAPIURL(fs.apiURL()))
	sink := NewSink(api, SinkOptions{ChannelInterval: time.Nanosecond, BotID: func() string { return testBotID }})

	bg := context.Background()
	var proc process
	proc.start()
	defer proc.kill()
	fs.mu.Lock()
	fs.intercept = func(_ string, n int) *fakeFailure {
		for _, k := range killAt {
			if n != k {
				continue
			}
			if c == crashBefore {
				proc.kill()
				return &fakeFailure{status: 500}
			}
			// Slack does what the call asks; the daemon dies before the
			// answer comes.
			return &fakeFailure{pass: true, drop: true, then: proc.kill}
		}
		return nil
	}
	fs.mu.Unlock()

	for _, step := range workItemSteps() {
		require.NoError(t, store.EnqueueAll(bg, step))
		for {
			d := bot.NewDeliverer(bot.DelivererOptions{Store: store, Sinks: map[string]bot.Sink{bot.SourceSlack: sink},
				MinEditInterval: time.Millisecond})
			ctx := proc.context()
			fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			err := d.Flush(fctx)
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
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs, fs.intercepted, restarts
}

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

// posted returns every message the fake Slack was asked to create for an
// outbox key, deleted ones included, by part.
func (fs *fakeSlack) posted(key string) map[int][]fakeMessage {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := map[int][]fakeMessage{}
	for _, m := range fs.messages {
		payload, _ := m.Metadata["event_payload"].(map[string]any)
		if payload["key"] != key {
			continue
		}
		part, _ := payload["part"].(float64)
		out[int(part)] = append(out[int(part)], *m)
	}
	return out
}

// TestKilledAtEveryCallEachMessageAppearsOnce kills the delivery of a work
// item's messages at every Web API call it makes, before Slack acts on
// the call and after it did but before the answer arrives, then at every
// pair of calls: after the restarts, the status is one message edited into
// its final state, and the reply is posted once, part by part, with its
// latest text; no message was ever posted twice, not even one later
// deleted.
func TestKilledAtEveryCallEachMessageAppearsOnce(t *testing.T) {
	_, calls, _ := deliverSteps(t, crashBefore)
	require.Greater(t, calls, 10)
	final := workItemSteps()[5][0].Text
	parts := splitMessage(final, maxReplyRunes)
	require.Greater(t, len(parts), 3)

	check := func(t *testing.T, fs *fakeSlack) {
		t.Helper()
		status := fs.posted("wi_1/status")
		require.Len(t, status, 1)
		require.Len(t, status[0], 1, "the status was posted more than once")
		require.False(t, status[0][0].Deleted)
		require.Contains(t, status[0][0].Text, "done")

		reply := fs.posted("wi_1/reply")
		require.Len(t, reply, len(parts))
		for i, part := range parts {
			require.Len(t, reply[i], 1, "part %d of the reply was posted more than once", i)
			require.False(t, reply[i][0].Deleted)
			require.Equal(t, escape(part), reply[i][0].Text, "part %d", i)
		}
	}
	var runs [][]int
	for k := 1; k <= calls; k++ {
		runs = append(runs, []int{k})
	}
	for k := 1; k+2 <= calls; k += 3 {
		runs = append(runs, []int{k, k + 2})
	}
	for _, c := range []crash{crashBefore, crashAfter} {
		for _, killAt := range runs {
			t.Run(fmt.Sprintf("%s call %v", c, killAt), func(t *testing.T) {
				fs, _, restarts := deliverSteps(t, c, killAt...)
				require.GreaterOrEqual(t, restarts, 1, "killed")
				check(t, fs)
			})
		}
	}
}
