package bot_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// chaosSink is a platform that fails at random, the way platforms do: a
// timeout, a rate limit with a wait, a destination down for a while, a
// channel that is gone for good. What it shows is remembered.
type chaosSink struct {
	mu      sync.Mutex
	rng     *rand.Rand
	down    bool
	gone    map[string]bool     // channels that refuse for good
	shown   map[string]string   // remote id → text
	byKey   map[string][]string // outbox key → remote ids, one per message shown
	created []string            // keys in the order they were first shown
}

func (s *chaosSink) Deliver(_ context.Context, m bot.OutboxMessage) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r := s.rng.IntN(10); {
	case s.down:
		return "", errors.New("connection refused")
	case s.gone[m.Thread.Channel]:
		return "", &bot.DeliveryError{Err: errors.New("channel_not_found"), Permanent: true}
	case r == 0:
		return "", errors.New("timeout")
	case r == 1:
		return "", &bot.DeliveryError{Err: errors.New("ratelimited"), RetryAfter: time.Duration(s.rng.IntN(3000)) * time.Millisecond}
	}
	if m.RemoteID != "" {
		s.shown[m.RemoteID] = m.Text
		return m.RemoteID, nil
	}
	id := fmt.Sprintf("r%d", len(s.created)+1)
	s.created = append(s.created, m.Key)
	s.byKey[m.Key] = append(s.byKey[m.Key], id)
	s.shown[id] = m.Text
	if m.Kind == bot.OutboxReaction {
		return "", nil
	}
	return id, nil
}

func (s *chaosSink) setDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// TestDelivererUnderChaos enqueues 600 messages of 40 work items across
// Slack channels and GitHub issues, status edits among them, while rounds
// of delivery run against a platform that fails at random and goes down
// and back up: in the end every message is shown exactly once with its
// latest text, each work item's in order within its thread's destination,
// those of a channel that is gone are dead, and the file checks out.
func TestDelivererUnderChaos(t *testing.T) {
	for seed := range uint64(2) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			ctx := context.Background()
			store := openStore(t, t.TempDir())
			var clockMu sync.Mutex
			now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
			sink := &chaosSink{rng: rand.New(rand.NewPCG(seed, 1)), gone: map[string]bool{"C4": true},
				shown: map[string]string{}, byKey: map[string][]string{}}
			d := bot.NewDeliverer(bot.DelivererOptions{Store: store, Now: clock, MaxAttempts: 1000,
				Sinks: map[string]bot.Sink{bot.SourceSlack: sink, bot.SourceGitHub: sink}})

			type enqueued struct {
				text, queue string // queue: work item and destination
				seq         uint64
				gone        bool
			}
			var mu sync.Mutex
			latest := map[string]enqueued{}
			rng := rand.New(rand.NewPCG(seed, 2))
			var wg sync.WaitGroup
			wg.Go(func() {
				for i := range 600 {
					wi := fmt.Sprintf("wi_%d", i%40)
					th, suffix := bot.SlackThread("T1", fmt.Sprintf("C%d", i%5), fmt.Sprintf("%d.1", i%40)), ""
					if i%7 == 0 {
						th, suffix = bot.GitHubThread("octo", fmt.Sprintf("r%d", i%3), i%40+1), "/github"
					}
					msg := bot.OutboxMessage{Thread: th, WorkItemID: wi, Text: fmt.Sprintf("text %d", i), Target: "x"}
					var (
						m   bot.OutboxMessage
						err error
					)
					switch rng.IntN(4) {
					case 0:
						msg.Key, msg.Kind = wi+"/status"+suffix, bot.OutboxStatus
						m, err = store.Enqueue(ctx, msg)
					case 1:
						msg.Key, msg.Kind = wi+"/reaction/eyes"+suffix, bot.OutboxReaction
						m, _, err = store.EnqueueNew(ctx, msg)
					default:
						msg.Key, msg.Kind = fmt.Sprintf("%s/reply/%d", wi, i), bot.OutboxReply
						m, err = store.Enqueue(ctx, msg)
					}
					require.NoError(t, err)
					mu.Lock()
					latest[m.Key] = enqueued{text: m.Text, queue: wi + "@" + m.Thread.Destination(), seq: m.Seq, gone: m.Thread.Channel == "C4"}
					mu.Unlock()
				}
			})
			step := rand.New(rand.NewPCG(seed, 3))
			for round := range 400 {
				switch round % 60 {
				case 30:
					sink.setDown(true)
				case 45:
					sink.setDown(false)
				}
				_, _ = d.DeliverDue(ctx)
				clockMu.Lock()
				now = now.Add(time.Duration(step.IntN(2000)) * time.Millisecond)
				clockMu.Unlock()
			}
			wg.Wait()
			sink.setDown(false)
			for range 1000 {
				if pending, _, err := store.OutboxPending(ctx); err == nil && pending == 0 {
					break
				}
				_, _ = d.DeliverDue(ctx)
				clockMu.Lock()
				now = now.Add(5 * time.Minute)
				clockMu.Unlock()
			}

			pending, dead, err := store.OutboxPending(ctx)
			require.NoError(t, err)
			require.Zero(t, pending)
			sink.mu.Lock()
			defer sink.mu.Unlock()
			gone := 0
			for key, e := range latest {
				if e.gone {
					gone++
					require.Empty(t, sink.byKey[key], "%s shown in a channel that is gone", key)
					continue
				}
				ids := sink.byKey[key]
				require.Len(t, ids, 1, "%s shown %d times", key, len(ids))
				require.Equal(t, e.text, sink.shown[ids[0]], "%s shows its latest text", key)
			}
			require.Equal(t, gone, dead, "the messages of the channel that is gone are dead")
			last := map[string]uint64{}
			for _, key := range sink.created {
				e := latest[key]
				require.Greater(t, e.seq, last[e.queue], "%s shown out of its work item's order", key)
				last[e.queue] = e.seq
			}
		})
	}
}
