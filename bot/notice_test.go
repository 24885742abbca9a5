package bot_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// refuseStrangers is a gate that refuses everyone but ana, telling them why.
type refuseStrangers struct{}

func (refuseStrangers) Screen(ev *bot.Event) *bot.IngressReason {
	if ev.Actor == "ana" {
		return nil
	}
	return &bot.IngressReason{Code: bot.IgnoreNotAllowed, Detail: ev.Actor + " is a stranger", Tell: "Sorry, I only work for ana."}
}

func (refuseStrangers) Admit(_ context.Context, _ *bot.Event, _ bot.Route) (*bot.IngressReason, string, error) {
	return nil, "", nil
}

func TestPeopleWhoAddressedTheBotAreToldOncePerThreadAndReason(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, dir)
	router, err := bot.NewRouter(bot.RoutingConfig{}, []bot.AgentInfo{{Name: "coder"}, {Name: "reviewer"}, {Name: "triage"}})
	require.NoError(t, err)
	woken := 0
	in := bot.NewIntake(bot.IntakeOptions{
		Store: store, Router: router, Notices: store, Wake: func() { woken++ },
		Gates: map[string]bot.Gate{bot.SourceSlack: refuseStrangers{}},
	})
	n := 0
	send := func(source, thread, actor, text string, addressed, isBot bool) bot.IngestResult {
		t.Helper()
		n++
		th := bot.LocalThread(thread)
		if source == bot.SourceSlack {
			th = bot.SlackThread("T1", "C1", thread)
		}
		res, err := in.Ingest(t.Context(), &bot.Event{
			Source: source, Kind: source + ".message", DeliveryID: fmt.Sprint(n), Actor: actor, ActorIsBot: isBot,
			Text: text, Thread: th, Addressed: addressed,
		})
		require.NoError(t, err)
		return res
	}
	notices := func(thread string) []bot.OutboxMessage {
		t.Helper()
		msgs, err := store.ListOutbox(t.Context(), thread)
		require.NoError(t, err)
		return msgs
	}

	// Naming an agent that does not exist: the default agent has it, the
	// reason says so, and the thread is told which agents there are.
	res := send(bot.SourceLocal, "t1", "ana", "@codr fix the flaky test", true, false)
	require.Equal(t, "triage", res.WorkItem.Route.Agent)
	require.Equal(t, `default: no agent "@codr" (did you mean @coder?)`, res.WorkItem.Route.Reason)
	msgs := notices("local:t1")
	require.Len(t, msgs, 1)
	require.Equal(t, "notice/local:t1/unknown_agent", msgs[0].Key)
	require.Equal(t, bot.OutboxReply, msgs[0].Kind)
	require.Equal(t, `There is no agent "@codr" (did you mean @coder?). The agents here are coder, reviewer and triage. `+
		"@triage has this one; mention another agent to ask it instead.", msgs[0].Text)
	require.Equal(t, 1, woken)

	// Once per thread and reason.
	send(bot.SourceLocal, "t1", "ana", "@revewer look", true, false)
	require.Len(t, notices("local:t1"), 1)
	send(bot.SourceLocal, "t2", "ana", "@revewer look", true, false)
	require.Len(t, notices("local:t2"), 1)
	// A person the bot was not addressed by, and bots, are never told.
	send(bot.SourceLocal, "t3", "ana", "@revewer look", false, false)
	require.Empty(t, notices("local:t3"))

	// Refused: told why, once per thread, never a bot.
	res = send(bot.SourceSlack, "1.1", "mallory", "hi", true, false)
	require.Equal(t, bot.IgnoreNotAllowed, res.Ingress.Reason)
	send(bot.SourceSlack, "1.1", "mallory", "hello?", true, false)
	msgs = notices("slack:T1/C1/1.1")
	require.Len(t, msgs, 1)
	require.Equal(t, "Sorry, I only work for ana.", msgs[0].Text)
	require.Equal(t, "notice/slack:T1/C1/1.1/not_allowed", msgs[0].Key)
	send(bot.SourceSlack, "1.2", "deploybot", "hi", true, true)
	require.Empty(t, notices("slack:T1/C1/1.2"))
	require.Equal(t, 3, woken)

	// The outbox remembers across restarts.
	require.NoError(t, store.Close())
	store = openStore(t, dir)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	in = bot.NewIntake(bot.IntakeOptions{Store: store, Router: router, Notices: store, Wake: func() { woken++ }})
	send(bot.SourceLocal, "t1", "ana", "@codr again", true, false)
	require.Len(t, notices("local:t1"), 1)
	require.Equal(t, 3, woken)
}
