package bot_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// platform is a sink with a memory: what it shows, as a chat platform
// would. A create reaches the platform before the sink answers, so a sink
// call cut short may still leave a message behind, as on a real platform.
type platform struct {
	mu    sync.Mutex
	shown map[string]string // remote id -> text
	keys  map[string]string // remote id -> outbox key
	order []string          // what happened, in order: "create wi_1/status", "update …", "find …"
	// lose makes the next creates reach the platform and then fail.
	lose int
	// hold, when set, makes creates wait for it (or ctx) after reaching the
	// platform; arrived is told when one is waiting.
	hold    chan struct{}
	arrived chan string
}

func newPlatform() *platform {
	return &platform{shown: map[string]string{}, keys: map[string]string{}}
}

var _ bot.Finder = (*platform)(nil)

func (p *platform) Deliver(ctx context.Context, msg bot.OutboxMessage) (string, error) {
	p.mu.Lock()
	if msg.RemoteID != "" {
		p.shown[msg.RemoteID] = msg.Text
		p.order = append(p.order, "update "+msg.Key)
		p.mu.Unlock()
		return msg.RemoteID, nil
	}
	id := fmt.Sprintf("r%d", len(p.keys)+1)
	p.shown[id], p.keys[id] = msg.Text, msg.Key
	p.order = append(p.order, "create "+msg.Key)
	hold, lose := p.hold, p.lose > 0
	if lose {
		p.lose--
	}
	p.mu.Unlock()
	if lose {
		return "", errors.New("connection reset after the request was sent")
	}
	if hold != nil {
		p.arrived <- msg.Key
		select {
		case <-hold:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return id, nil
}

func (p *platform) Find(_ context.Context, msg bot.OutboxMessage) (string, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.order = append(p.order, "find "+msg.Key)
	for id, key := range p.keys {
		if key == msg.Key {
			return id, true, nil
		}
	}
	return "", false, nil
}

// messages returns what the platform shows for key, one entry per message.
func (p *platform) messages(key string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for id, k := range p.keys {
		if k == key {
			out = append(out, p.shown[id])
		}
	}
	return out
}

func (p *platform) log() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.order...)
}

var slackThread = bot.SlackThread("T1", "C1", "1700000000.000100")

func enqueue(t *testing.T, store bot.OutboxStore, key, wi string, kind bot.OutboxKind, text string) {
	t.Helper()
	_, err := store.Enqueue(context.Background(), bot.OutboxMessage{Key: key, Thread: slackThread, WorkItemID: wi, Kind: kind, Text: text})
	require.NoError(t, err)
}

func TestDelivererAdoptsWhatAFailedAttemptPosted(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	now := time.Now()
	p := newPlatform()
	p.lose = 1
	d := bot.NewDeliverer(bot.DelivererOptions{Store: store, Sinks: map[string]bot.Sink{bot.SourceSlack: p}, Now: func() time.Time { return now }})

	enqueue(t, store, "wi_1/status", "wi_1", bot.OutboxStatus, "working")
	_, err := d.DeliverDue(ctx)
	require.NoError(t, err)
	m, err := store.GetOutbox(ctx, "wi_1/status")
	require.NoError(t, err)
	require.True(t, m.Attempted, "the attempt is on record")
	require.True(t, m.Pending())

	enqueue(t, store, "wi_1/status", "wi_1", bot.OutboxStatus, "finished")
	now = now.Add(time.Second)
	_, err = d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"finished"}, p.messages("wi_1/status"), "one message, brought up to date")
	require.Equal(t, []string{"create wi_1/status", "find wi_1/status", "update wi_1/status"}, p.log())
	m, err = store.GetOutbox(ctx, "wi_1/status")
	require.NoError(t, err)
	require.False(t, m.Pending())
	require.False(t, m.Attempted)
	require.Equal(t, "r1", m.RemoteID)

	// Only an attempt that may have posted is looked for: a new message is
	// created straight away.
	enqueue(t, store, "wi_1/reply", "wi_1", bot.OutboxReply, "done")
	_, err = d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Equal(t, "create wi_1/reply", p.log()[3])
	require.Len(t, p.log(), 4)
}

func TestDelivererFindsNothingAndPostsOnce(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	p := newPlatform()
	d := bot.NewDeliverer(bot.DelivererOptions{Store: store, Sinks: map[string]bot.Sink{bot.SourceSlack: p}})
	enqueue(t, store, "wi_1/reply", "wi_1", bot.OutboxReply, "done")
	// The attempt was recorded, and the process died before the request left.
	require.NoError(t, store.MarkAttempts(ctx, []string{"wi_1/reply"}))
	_, err := d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"find wi_1/reply", "create wi_1/reply"}, p.log())
	require.Equal(t, []string{"done"}, p.messages("wi_1/reply"))
}

// TestDelivererHandsOverAnAttemptAcrossARestart cuts a flush short while a
// post is on its way, as a shutdown deadline or kill -9 does, and restarts
// on the same file: the new process finds the post and edits it.
func TestDelivererHandsOverAnAttemptAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, dir)
	p := newPlatform()
	p.hold, p.arrived = make(chan struct{}), make(chan string, 1)
	enqueue(t, store, "wi_1/status", "wi_1", bot.OutboxStatus, "working")
	d := bot.NewDeliverer(bot.DelivererOptions{Store: store, Sinks: map[string]bot.Sink{bot.SourceSlack: p}})
	ctx, cancel := context.WithCancel(context.Background())
	flushed := make(chan error, 1)
	go func() { flushed <- d.Flush(ctx) }()
	require.Equal(t, "wi_1/status", <-p.arrived)
	cancel()
	require.ErrorIs(t, <-flushed, context.Canceled)
	require.NoError(t, store.Close())

	store = openStore(t, dir)
	p.mu.Lock()
	p.hold = nil
	p.mu.Unlock()
	enqueue(t, store, "wi_1/status", "wi_1", bot.OutboxStatus, "finished")
	d = bot.NewDeliverer(bot.DelivererOptions{Store: store, Sinks: map[string]bot.Sink{bot.SourceSlack: p}})
	require.NoError(t, d.Flush(context.Background()))
	require.Equal(t, []string{"finished"}, p.messages("wi_1/status"))
	require.Equal(t, []string{"create wi_1/status", "find wi_1/status", "update wi_1/status"}, p.log())
}

// TestDelivererRunFinishesThePostInFlight stops Run while a post is in
// flight: the post completes and is recorded, so nothing is left to look
// for or to repeat, and the post after it does not start.
func TestDelivererRunFinishesThePostInFlight(t *testing.T) {
	store := openStore(t, t.TempDir())
	p := newPlatform()
	p.hold, p.arrived = make(chan struct{}), make(chan string, 1)
	enqueue(t, store, "wi_1/reply", "wi_1", bot.OutboxReply, "done")
	enqueue(t, store, "wi_1/reaction/white_check_mark", "wi_1", bot.OutboxReaction, "")
	d := bot.NewDeliverer(bot.DelivererOptions{Store: store, Sinks: map[string]bot.Sink{bot.SourceSlack: p}})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- d.Run(ctx) }()
	require.Equal(t, "wi_1/reply", <-p.arrived)
	cancel()
	select {
	case <-stopped:
		t.Fatal("Run returned with a post in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(p.hold)
	require.NoError(t, <-stopped)

	m, err := store.GetOutbox(context.Background(), "wi_1/reply")
	require.NoError(t, err)
	require.False(t, m.Pending(), "the finished post is recorded")
	require.Equal(t, "r1", m.RemoteID)
	m, err = store.GetOutbox(context.Background(), "wi_1/reaction/white_check_mark")
	require.NoError(t, err)
	require.True(t, m.Pending(), "nothing new starts after the stop")
	require.Equal(t, []string{"create wi_1/reply"}, p.log())
}

// TestDelivererKeepsAWorkItemsOrder fails the 👀 reaction of a work item:
// its status, reply and ✅ wait for it, another work item's messages do not,
// and once it goes out the rest follows in order.
func TestDelivererKeepsAWorkItemsOrder(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir())
	now := time.Now()
	p := &orderSink{fail: map[string]int{"wi_1/reaction/eyes": 1}}
	d := bot.NewDeliverer(bot.DelivererOptions{Store: store, Sinks: map[string]bot.Sink{bot.SourceSlack: p}, Now: func() time.Time { return now }})
	enqueue(t, store, "wi_1/reaction/eyes", "wi_1", bot.OutboxReaction, "")
	enqueue(t, store, "wi_1/status", "wi_1", bot.OutboxStatus, "working")
	enqueue(t, store, "wi_2/status", "wi_2", bot.OutboxStatus, "working")
	enqueue(t, store, "wi_1/reply", "wi_1", bot.OutboxReply, "done")
	enqueue(t, store, "wi_1/reaction/white_check_mark", "wi_1", bot.OutboxReaction, "")

	_, err := d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"wi_2/status"}, p.delivered())
	now = now.Add(500 * time.Millisecond)
	_, err = d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"wi_2/status"}, p.delivered(), "nothing of wi_1 before its 👀")

	now = now.Add(time.Second)
	_, err = d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"wi_2/status", "wi_1/reaction/eyes", "wi_1/status", "wi_1/reply", "wi_1/reaction/white_check_mark"}, p.delivered())
}

type orderSink struct {
	mu   sync.Mutex
	fail map[string]int
	done []string
}

func (s *orderSink) Deliver(_ context.Context, msg bot.OutboxMessage) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail[msg.Key] > 0 {
		s.fail[msg.Key]--
		return "", errors.New("timeout")
	}
	s.done = append(s.done, msg.Key)
	return "r-" + strings.ReplaceAll(msg.Key, "/", "-"), nil
}

func (s *orderSink) delivered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.done...)
}
