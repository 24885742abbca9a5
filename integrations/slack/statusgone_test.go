package slack

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// stepRunner waits until its status message is posted, then has the test
// break it (refuse) and reports steps a while, so the status is edited
// into the refusal, before it answers.
type stepRunner struct {
	fs     *fakeSlack
	refuse func()
}

func (r stepRunner) Run(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
	for len(r.fs.callsOf("chat.postMessage")) == 0 {
		select {
		case <-ctx.Done():
			return bot.RunResult{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	r.refuse()
	for i := range 5 {
		p.Report(ctx, bot.ProgressEvent{Kind: bot.ProgressToolCalled, Tool: "read_file", Text: "reading file " + string(rune('a'+i))})
		select {
		case <-ctx.Done():
			return bot.RunResult{}, ctx.Err()
		case <-time.After(30 * time.Millisecond):
		}
	}
	return bot.RunResult{Status: bot.ResultSuccess, Reply: pipelineReply}, nil
}

// A status message a person deleted, one Slack will no longer let the bot
// edit, or an edit Slack rate-limits: the run still reports once where the
// person sees it (its reply and ✅, each once), the status is given up
// after Slack's refusal rather than tried again and again, and a rate
// limit is waited out so the final state shows.
func TestAStatusMessageSlackWillNotEditStillReportsOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		failure fakeFailure
		forGood bool
	}{
		{"deleted by a person", fakeFailure{code: "message_not_found"}, true},
		{"cannot be updated", fakeFailure{code: "cant_update_message"}, true},
		{"edit window closed", fakeFailure{code: "edit_window_closed"}, true},
		{"rate limited", fakeFailure{status: http.StatusTooManyRequests, retryAfter: "1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFakeSlack(t)
			store := newTestStore(t)
			var (
				mu         sync.Mutex
				dispatcher *bot.Dispatcher
				deliverer  *bot.Deliverer
				refusals   int
			)
			gates := map[string]bot.Gate{}
			h := newHarnessWith(t, ModeHTTP, fs, store, func(o *Options) {
				o.Intake = bot.NewIntake(bot.IntakeOptions{Store: store, Router: mentionDecider{}, Gates: gates, React: true,
					Accepted: func(context.Context, *bot.WorkItem, *bot.Event) {
						mu.Lock()
						defer mu.Unlock()
						dispatcher.Wake()
					},
					Wake: func() { deliverer.Wake() }})
			})
			gates[bot.SourceSlack] = h.a.Gate()
			refuse := func() {
				fs.mu.Lock()
				defer fs.mu.Unlock()
				fs.intercept = func(method string, _ int) *fakeFailure {
					if method != "chat.update" {
						return nil
					}
					fs.mu.Lock()
					defer fs.mu.Unlock()
					refusals++
					if !tc.forGood && refusals > 1 {
						return nil
					}
					f := tc.failure
					return &f
				}
			}
			deliverer = bot.NewDeliverer(bot.DelivererOptions{Store: store, Sinks: map[string]bot.Sink{bot.SourceSlack: h.a.Sink()},
				MinEditInterval: 10 * time.Millisecond, Poll: 10 * time.Millisecond})
			mu.Lock()
			reporter := bot.NewReporter(bot.ReporterOptions{Outbox: store, Wake: deliverer.Wake, MinInterval: 10 * time.Millisecond})
			dispatcher = bot.NewDispatcher(bot.DispatcherOptions{Queue: store, Items: store, Runner: stepRunner{fs, refuse}, Reporter: reporter,
				Poll: 10 * time.Millisecond, Grace: time.Second})
			mu.Unlock()
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { _ = deliverer.Run(ctx) })
			wg.Go(func() { _ = dispatcher.Run(ctx) })
			t.Cleanup(func() { cancel(); wg.Wait() })

			const ts = "1700000078.000100"
			payload := eventBody("EvGone", mentionEvent("U1", "<@UBOT> @coder fix the flaky test", ts, ""))
			require.Equal(t, http.StatusOK, h.serve(t, "/slack/events", jsonType, string(payload), nil).Code)

			settled := func() bool {
				pending, _, err := store.OutboxPending(ctx)
				return err == nil && pending == 0 && len(fs.callsOf("reactions.add")) == 2
			}
			require.Eventually(t, settled, 20*time.Second, 10*time.Millisecond)
			// A while more: nothing is tried again behind the refusal.
			time.Sleep(200 * time.Millisecond)

			posts := fs.callsOf("chat.postMessage")
			require.Len(t, posts, 2, "one status message and one reply, nothing posted twice")
			require.Equal(t, pipelineReply, posts[1].Form.Get("text"), "the run's reply reaches the thread")
			reactions := fs.callsOf("reactions.add")
			require.Equal(t, "white_check_mark", reactions[1].Form.Get("name"))

			updates := fs.callsOf("chat.update")
			_, dead, err := store.OutboxPending(ctx)
			require.NoError(t, err)
			if tc.forGood {
				require.Len(t, updates, 1, "a status Slack refused for good is not edited again")
				require.Equal(t, 1, dead, "the status is given up, visibly")
				return
			}
			require.Equal(t, 0, dead)
			require.Contains(t, updates[len(updates)-1].Form.Get("blocks"), "done", "the final state shows once the limit is waited out")
		})
	}
}
