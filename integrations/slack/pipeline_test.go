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

// threadRunner is an agent that waits until its status message is shown,
// reports one step and answers, so the test sees the message edited in
// place rather than posted once in its final state.
type threadRunner struct{ fs *fakeSlack }

const pipelineReply = "Fixed the flaky test: the clock is injected now."

func (r threadRunner) Run(ctx context.Context, req bot.RunRequest, p bot.Progress) (bot.RunResult, error) {
	for len(r.fs.callsOf("chat.postMessage")) == 0 {
		select {
		case <-ctx.Done():
			return bot.RunResult{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	p.Report(ctx, bot.ProgressEvent{Kind: bot.ProgressToolCalled, Tool: "read_file", Text: "reading login_test.go"})
	return bot.RunResult{Status: bot.ResultSuccess, Reply: pipelineReply}, nil
}

// TestPipelineReportsInThread runs a Slack mention end to end through the
// core's intake, dispatcher, reporter and deliverer: a mention becomes a
// work item routed to coder, gets 👀, one status message edited in place,
// the reply in the thread and ✅; a retried delivery adds nothing.
func TestPipelineReportsInThread(t *testing.T) {
	for _, mode := range []string{ModeHTTP, ModeSocket} {
		t.Run(mode, func(t *testing.T) {
			fs := newFakeSlack(t)
			store := newTestStore(t)
			var (
				mu         sync.Mutex
				reporter   *bot.Reporter
				dispatcher *bot.Dispatcher
			)
			accepted := func(context.Context, *bot.WorkItem, *bot.Event) {
				mu.Lock()
				defer mu.Unlock()
				dispatcher.Wake()
			}
			gates := map[string]bot.Gate{}
			var deliverer *bot.Deliverer
			h := newHarnessWith(t, mode, fs, store, func(o *Options) {
				o.Intake = bot.NewIntake(bot.IntakeOptions{Store: store, Router: mentionDecider{}, Gates: gates, React: true,
					Accepted: accepted, Wake: func() { deliverer.Wake() }})
			})
			gates[bot.SourceSlack] = h.a.Gate()
			deliverer = bot.NewDeliverer(bot.DelivererOptions{Store: store, Sinks: map[string]bot.Sink{bot.SourceSlack: h.a.Sink()},
				MinEditInterval: 10 * time.Millisecond, Poll: 10 * time.Millisecond})
			mu.Lock()
			reporter = bot.NewReporter(bot.ReporterOptions{Outbox: store, Wake: deliverer.Wake})
			dispatcher = bot.NewDispatcher(bot.DispatcherOptions{Queue: store, Items: store, Runner: threadRunner{fs}, Reporter: reporter,
				Poll: 10 * time.Millisecond, Grace: time.Second})
			mu.Unlock()
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { _ = deliverer.Run(ctx) })
			wg.Go(func() { _ = dispatcher.Run(ctx) })
			t.Cleanup(func() { cancel(); wg.Wait() })

			const ts = "1700000077.000100"
			payload := eventBody("EvP", mentionEvent("U1", "<@UBOT> @coder fix the flaky test", ts, ""))
			deliver := func(envelope string, retry int) {
				if mode == ModeHTTP {
					hdr := http.Header{}
					if retry > 0 {
						hdr.Set("X-Slack-Retry-Num", "1")
					}
					require.Equal(t, http.StatusOK, h.serve(t, "/slack/events", jsonType, string(payload), hdr).Code)
					return
				}
				fs.sendEnvelope(envelope, "events_api", payload, retry)
				require.Equal(t, envelope, fs.nextAck(t).EnvelopeID)
			}
			deliver("env-p1", 0)

			// The deliverer belongs to its Run goroutine: wait for it to
			// empty the outbox rather than flushing alongside it.
			settled := func() bool {
				pending, dead, err := store.OutboxPending(ctx)
				return err == nil && pending == 0 && dead == 0
			}
			require.Eventually(t, func() bool { return len(fs.callsOf("reactions.add")) == 2 && settled() },
				10*time.Second, 10*time.Millisecond)

			items, _, _, _ := store.snapshot()
			require.Len(t, items, 1)
			require.Equal(t, "coder", items[0].Agent())

			reactions := fs.callsOf("reactions.add")
			require.Equal(t, "eyes", reactions[0].Form.Get("name"))
			require.Equal(t, "white_check_mark", reactions[1].Form.Get("name"))
			for _, r := range reactions {
				require.Equal(t, ts, r.Form.Get("timestamp"))
				require.Equal(t, "C1", r.Form.Get("channel"))
			}

			posts := fs.callsOf("chat.postMessage")
			require.Len(t, posts, 2, "one status message and one reply")
			status, reply := posts[0], posts[1]
			for _, p := range posts {
				require.Equal(t, ts, p.Form.Get("thread_ts"))
			}
			require.Contains(t, status.Form.Get("blocks"), "*coder*")
			require.Equal(t, pipelineReply, reply.Form.Get("text"))

			updates := fs.callsOf("chat.update")
			require.NotEmpty(t, updates)
			for _, u := range updates {
				require.Equal(t, status.TS, u.Form.Get("ts"), "edits go to the one status message")
			}
			require.Contains(t, updates[len(updates)-1].Form.Get("blocks"), "done")

			// Slack delivers the event again: nothing new anywhere.
			deliver("env-p2", 1)
			require.Eventually(t, settled, 10*time.Second, 10*time.Millisecond)
			items, _, _, dups := store.snapshot()
			require.Len(t, items, 1)
			require.Equal(t, 1, dups)
			require.Len(t, fs.callsOf("chat.postMessage"), 2)
			require.Len(t, fs.callsOf("reactions.add"), 2)
		})
	}
}
