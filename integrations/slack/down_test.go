package slack

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt/bolttest"
)

// Slack refuses the bot's token (revoked and restored, or answering
// invalid_auth while it is in trouble) while replies wait: that is Slack's
// trouble, not any message's, so its messages wait, none counted failed or
// given up, and once Slack takes the token again each is posted once.
func TestARefusedTokenLeavesSlackMessagesWaiting(t *testing.T) {
	for _, code := range []string{"invalid_auth", "token_revoked", "account_inactive"} {
		t.Run(code, func(t *testing.T) {
			ctx := context.Background()
			s, fs := newTestSink(t, time.Millisecond)
			store := bolttest.Open(t, t.TempDir())
			now := time.Now()
			d := bot.NewDeliverer(bot.DelivererOptions{
				Store: store, Sinks: map[string]bot.Sink{bot.SourceSlack: s}, Parallel: 1, Now: func() time.Time { return now },
			})
			const replies = 6
			for i := range replies {
				_, err := store.Enqueue(ctx, bot.OutboxMessage{Key: fmt.Sprintf("wi_%d/reply", i), Thread: thread, WorkItemID: fmt.Sprintf("wi_%d", i),
					Kind: bot.OutboxReply, Text: fmt.Sprintf("reply %d", i)})
				require.NoError(t, err)
			}
			for range 4 {
				fs.fail("chat.postMessage", fakeFailure{code: code})
			}
			_, err := d.DeliverDue(ctx)
			require.NoError(t, err)
			require.Contains(t, d.Down(), bot.SourceSlack)
			for i := range replies {
				m, err := store.GetOutbox(ctx, fmt.Sprintf("wi_%d/reply", i))
				require.NoError(t, err)
				require.False(t, m.Dead, "%s given up: %s", m.Key, m.LastError)
				require.Zero(t, m.Attempts, m.Key)
			}
			for range 10 {
				now = now.Add(time.Minute)
				_, err := d.DeliverDue(ctx)
				require.NoError(t, err)
			}
			require.Empty(t, d.Down())
			pending, dead, err := store.OutboxPending(ctx)
			require.NoError(t, err)
			require.Zero(t, pending)
			require.Zero(t, dead)
			posted := map[string]int{}
			fs.mu.Lock()
			for _, m := range fs.messages {
				if !m.Deleted {
					posted[m.Text]++
				}
			}
			fs.mu.Unlock()
			require.Len(t, posted, replies)
			for text, n := range posted {
				require.Equal(t, 1, n, text)
			}
		})
	}
}
