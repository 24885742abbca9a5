package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

const (
	jsonType = "application/json"
	formType = "application/x-www-form-urlencoded"
)

// In a channel shared with another organisation (Slack Connect), Slack
// names the author's own workspace: someone of another is recorded as
// such, so access gives them no member's rights.
func TestMentionsFromAnotherWorkspaceAreExternal(t *testing.T) {
	h := newHarness(t, ModeHTTP, nil)
	ours := mentionEvent("U1", "<@UBOT> @coder fix the flaky test", "1700000001.000100", "")
	ours["user_team"] = "T1"
	theirs := mentionEvent("W9", "<@UBOT> @coder push to main", "1700000002.000100", "")
	theirs["user_team"] = "T9"
	dm := map[string]any{"type": "message", "channel": "D1", "channel_type": "im", "user": "W9", "user_team": "T9",
		"text": "@coder deploy", "ts": "1700000003.000100"}
	for i, ev := range []map[string]any{ours, theirs, dm} {
		w := h.serve(t, "/slack/events", jsonType, string(eventBody(fmt.Sprintf("Ev%d", i), ev)), nil)
		require.Equal(t, http.StatusOK, w.Code)
	}
	items, _, _, _ := h.store.snapshot()
	require.Len(t, items, 3)
	var requesters []bot.Requester
	for _, wi := range items {
		requesters = append(requesters, wi.Requester)
	}
	require.ElementsMatch(t, []bot.Requester{
		{Source: bot.SourceSlack, ID: "U1", Team: "T1"},
		{Source: bot.SourceSlack, ID: "W9", Team: "T9", External: true},
		{Source: bot.SourceSlack, ID: "W9", Team: "T9", External: true},
	}, requesters)
}

func TestHTTPMentionBecomesWorkItemOnce(t *testing.T) {
	h := newHarness(t, ModeHTTP, nil)
	body := string(eventBody("Ev1", mentionEvent("U1", "<@UBOT> @coder fix the flaky test", "1700000001.000100", "")))

	w := h.serve(t, "/slack/events", jsonType, body, nil)
	require.Equal(t, http.StatusOK, w.Code)

	items, _, events, _ := h.store.snapshot()
	require.Len(t, items, 1)
	require.Equal(t, "coder", items[0].Agent())
	ev := events[0]
	require.Equal(t, bot.KindSlackMention, ev.Kind)
	require.Equal(t, bot.SourceSlack, ev.Source)
	require.Equal(t, "Ev1", ev.DeliveryID)
	require.Equal(t, "coder", ev.Mentions[0])
	require.Equal(t, "slack:T1/C1/1700000001.000100", ev.Thread.Key())
	require.Equal(t, "1700000001.000100", ev.SourceRef)
	require.Equal(t, "U1", ev.Actor)
	require.Equal(t, bot.Requester{Source: bot.SourceSlack, ID: "U1", Team: "T1"}, items[0].Requester)
	require.Equal(t, "C1", ev.Channel)
	require.Equal(t, "@coder fix the flaky test", ev.Text)
	require.JSONEq(t, body, string(ev.Raw))
	stored, err := h.store.GetEvent(context.Background(), items[0].EventRef)
	require.NoError(t, err)
	require.JSONEq(t, body, string(stored.Raw))
	require.Equal(t, []string{"coder"}, stored.Mentions)

	// Slack retries when it thinks the ack was late: same event_id.
	w = h.serve(t, "/slack/events", jsonType, body, http.Header{"X-Slack-Retry-Num": {"1"}, "X-Slack-Retry-Reason": {"http_timeout"}})
	require.Equal(t, http.StatusOK, w.Code)
	items, ingress, events, dups := h.store.snapshot()
	require.Len(t, items, 1)
	require.Empty(t, ingress)
	require.Len(t, events, 1)
	require.Equal(t, 1, dups)
}

func TestHTTPMentionInThreadKeepsThread(t *testing.T) {
	h := newHarness(t, ModeHTTP, nil)
	body := string(eventBody("Ev2", mentionEvent("U1", "<@UBOT|switchyard> coder: look again", "1700000002.000200", "1700000001.000100")))
	require.Equal(t, http.StatusOK, h.serve(t, "/slack/events", jsonType, body, nil).Code)
	_, _, events, _ := h.store.snapshot()
	require.Equal(t, "slack:T1/C1/1700000001.000100", events[0].Thread.Key())
	require.Equal(t, "1700000002.000200", events[0].SourceRef)
	require.Equal(t, []string{"coder"}, events[0].Mentions)
	require.Equal(t, "coder: look again", events[0].Text)
}

func TestHTTPRefusesUnverifiedRequests(t *testing.T) {
	h := newHarness(t, ModeHTTP, nil)
	body := string(eventBody("Ev3", mentionEvent("U1", "<@UBOT> @coder deploy", "1700000003.000100", "")))
	now := time.Now()
	captured := signed(t, "/slack/events", jsonType, body, now, testSecret)

	tests := []struct {
		name string
		req  func() *http.Request
	}{
		{"wrong secret", func() *http.Request { return signed(t, "/slack/events", jsonType, body, now, "not-the-secret") }},
		{"stale timestamp", func() *http.Request {
			return signed(t, "/slack/events", jsonType, body, now.Add(-6*time.Minute), testSecret)
		}},
		{"timestamp from the future", func() *http.Request {
			return signed(t, "/slack/events", jsonType, body, now.Add(6*time.Minute), testSecret)
		}},
		{"replayed with a fresh timestamp", func() *http.Request {
			r := signed(t, "/slack/events", jsonType, body, now, testSecret)
			r.Header.Set("X-Slack-Signature", captured.Header.Get("X-Slack-Signature"))
			r.Header.Set("X-Slack-Request-Timestamp", "1700000000")
			return r
		}},
		{"body changed", func() *http.Request {
			r := signed(t, "/slack/events", jsonType, body, now, testSecret)
			return withBody(r, strings.Replace(body, "deploy", "delete", 1))
		}},
		{"no signature", func() *http.Request {
			r := signed(t, "/slack/events", jsonType, body, now, testSecret)
			r.Header.Del("X-Slack-Signature")
			return r
		}},
		{"not hex", func() *http.Request {
			r := signed(t, "/slack/events", jsonType, body, now, testSecret)
			r.Header.Set("X-Slack-Signature", "v0=zz")
			return r
		}},
		{"command with a stale timestamp", func() *http.Request {
			return signed(t, "/slack/commands", formType, deployForm("trig-stale", "https://hooks.example/commands/1").Encode(), now.Add(-10*time.Minute), testSecret)
		}},
		{"interaction with a wrong secret", func() *http.Request {
			return signed(t, "/slack/interactions", formType, "payload=%7B%7D", now, "nope")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			h.a.Handler().ServeHTTP(w, tc.req())
			require.Equal(t, http.StatusUnauthorized, w.Code)
		})
	}
	items, ingress, events, _ := h.store.snapshot()
	require.Empty(t, items)
	require.Empty(t, ingress)
	require.Empty(t, events)
	require.Empty(t, h.fs.callsOf("chat.postMessage"))
}

func withBody(r *http.Request, body string) *http.Request {
	r2 := httptest.NewRequest(r.Method, r.URL.Path, strings.NewReader(body))
	r2.Header = r.Header
	return r2
}

func TestHTTPURLVerification(t *testing.T) {
	h := newHarness(t, ModeHTTP, nil)
	w := h.serve(t, "/slack/events", jsonType,
		`{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`, nil)
	require.Equal(t, http.StatusOK, w.Code)
	var got map[string]string
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
	require.Equal(t, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", got["challenge"])
}

func TestHTTPStoreFailureIsNotAcknowledged(t *testing.T) {
	h := newHarness(t, ModeHTTP, nil)
	h.store.failN = 1
	body := string(eventBody("Ev4", mentionEvent("U1", "<@UBOT> hello", "1700000004.000100", "")))
	require.Equal(t, http.StatusInternalServerError, h.serve(t, "/slack/events", jsonType, body, nil).Code)
	// Slack's retry then succeeds.
	require.Equal(t, http.StatusOK, h.serve(t, "/slack/events", jsonType, body, http.Header{"X-Slack-Retry-Num": {"1"}}).Code)
	items, _, _, _ := h.store.snapshot()
	require.Len(t, items, 1)
}

func TestHTTPMalformedEventIsBadRequest(t *testing.T) {
	h := newHarness(t, ModeHTTP, nil)
	require.Equal(t, http.StatusBadRequest, h.serve(t, "/slack/events", jsonType, `{"type":"event_callback","event":`, nil).Code)
	require.Equal(t, http.StatusBadRequest, h.serve(t, "/slack/events", jsonType, `{"type":"event_callback"}`, nil).Code)
}

func TestSocketModeMentionAckedAfterPersisting(t *testing.T) {
	h := newHarness(t, ModeSocket, nil)
	payload := eventBody("Ev5", mentionEvent("U1", "<@UBOT> @coder fix the flaky test", "1700000005.000100", ""))

	// Hold the store: the envelope must not be acknowledged before the
	// event is persisted.
	gate := make(chan struct{})
	h.store.mu.Lock()
	h.store.gate = gate
	h.store.mu.Unlock()
	h.fs.sendEnvelope("env-1", "events_api", payload, 0)
	select {
	case ack := <-h.fs.acks:
		t.Fatalf("envelope %s acknowledged before the event was persisted", ack.EnvelopeID)
	case <-time.After(200 * time.Millisecond):
	}
	h.store.mu.Lock()
	h.store.gate = nil
	h.store.mu.Unlock()
	close(gate)

	require.Equal(t, "env-1", h.fs.nextAck(t).EnvelopeID)
	items, _, events, _ := h.store.snapshot()
	require.Len(t, items, 1)
	require.Equal(t, "coder", items[0].Agent())
	require.Equal(t, bot.KindSlackMention, events[0].Kind)
	require.Equal(t, "coder", events[0].Mentions[0])
	require.Equal(t, "slack:T1/C1/1700000005.000100", events[0].Thread.Key())

	// Slack redelivers the same event in a new envelope.
	h.fs.sendEnvelope("env-2", "events_api", payload, 1)
	require.Equal(t, "env-2", h.fs.nextAck(t).EnvelopeID)
	items, _, events, dups := h.store.snapshot()
	require.Len(t, items, 1)
	require.Len(t, events, 1)
	require.Equal(t, 1, dups)
}

func TestSocketModeStoreFailureLeavesEnvelopeUnacknowledged(t *testing.T) {
	h := newHarness(t, ModeSocket, nil)
	h.store.mu.Lock()
	h.store.failN = 1
	h.store.mu.Unlock()
	payload := eventBody("Ev6", mentionEvent("U1", "<@UBOT> hello", "1700000006.000100", ""))
	h.fs.sendEnvelope("env-3", "events_api", payload, 0)
	require.Eventually(t, func() bool {
		h.store.mu.Lock()
		defer h.store.mu.Unlock()
		return h.store.failN == 0
	}, 10*time.Second, 5*time.Millisecond)
	h.fs.sendEnvelope("env-4", "events_api", payload, 1)
	// Only the redelivery, which found the store back, is acknowledged.
	require.Equal(t, "env-4", h.fs.nextAck(t).EnvelopeID)
	select {
	case ack := <-h.fs.acks:
		t.Fatalf("unexpected ack %s", ack.EnvelopeID)
	case <-time.After(100 * time.Millisecond):
	}
	items, _, _, _ := h.store.snapshot()
	require.Len(t, items, 1)
}

func TestSocketModeUnknownEventIsAcknowledged(t *testing.T) {
	h := newHarness(t, ModeSocket, nil)
	// slack-go has no struct for this type and reports a bad message; the
	// core reads it, finds nothing addressed to the bot and acknowledges.
	payload := eventBody("Ev7", map[string]any{"type": "some_future_event", "channel": "C1"})
	h.fs.sendEnvelope("env-5", "events_api", payload, 0)
	require.Equal(t, "env-5", h.fs.nextAck(t).EnvelopeID)
	_, _, events, _ := h.store.snapshot()
	require.Empty(t, events)
}

func TestSocketModeSlashCommand(t *testing.T) {
	h := newHarness(t, ModeSocket, nil)
	cmd, _ := json.Marshal(map[string]any{"token": "x", "team_id": testTeam, "channel_id": "C1", "user_id": "U1",
		"command": "/deploy", "text": "staging", "trigger_id": "trig-sock", "response_url": h.fs.hookURL()})
	h.fs.sendEnvelope("env-6", "slash_commands", cmd, 0)
	ack := h.fs.nextAck(t)
	require.Equal(t, "env-6", ack.EnvelopeID)
	var resp commandResponse
	require.NoError(t, json.Unmarshal(ack.Payload, &resp))
	require.Equal(t, "ephemeral", resp.ResponseType)
	require.Equal(t, "Got `/deploy staging`: progress follows in the thread I'm opening here.", resp.Text)
	require.Empty(t, h.fs.callsOf("chat.postMessage"), "answered before Slack is asked anything")

	// The deliverer opens the thread; the work item follows in it.
	h.deliverAll(t)
	posts := h.fs.callsOf("chat.postMessage")
	require.Len(t, posts, 1)
	items, _, events, _ := h.store.snapshot()
	require.Len(t, items, 1)
	require.Equal(t, "ops", items[0].Agent())
	require.Equal(t, "deploy", events[0].Command)
	require.Equal(t, "staging", events[0].Args)
	require.Equal(t, "trig-sock", events[0].DeliveryID)
	require.Equal(t, "slack:T1/C1/"+posts[0].TS, items[0].Thread.Key())
	require.JSONEq(t, string(cmd), string(events[0].Raw))
}

func TestSocketModeStopsWithContext(t *testing.T) {
	fs := newFakeSlack(t)
	a, err := New(Options{Mode: ModeSocket, BotToken: "xoxb-test", AppToken: "xapp-test", APIURL: fs.apiURL(),
		Intake: bot.NewIntake(bot.IntakeOptions{Store: newTestStore(t), Router: mentionDecider{}}), PingInterval: 5 * time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	require.Eventually(t, fs.connected, 10*time.Second, 5*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop")
	}
}

// TestSocketModeRefusedAppTokenIsRetried: an app token Slack refuses does
// not switch Slack off for good; the adapter says why it is down and keeps
// trying until it is stopped.
func TestSocketModeRefusedAppTokenIsRetried(t *testing.T) {
	fs := newFakeSlack(t)
	a, err := New(Options{Mode: ModeSocket, BotToken: "xoxb-test", AppToken: "xapp-wrong", APIURL: fs.apiURL(),
		Intake:         bot.NewIntake(bot.IntakeOptions{Store: newTestStore(t), Router: mentionDecider{}}),
		ReconnectDelay: 5 * time.Millisecond, MaxReconnectDelay: 20 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	require.Eventually(t, func() bool { return len(fs.callsOf("apps.connections.open")) >= 3 }, 10*time.Second, 5*time.Millisecond,
		"it keeps trying")
	up, reason := a.Health()
	require.False(t, up)
	require.Equal(t, "the app token was refused (invalid_auth)", reason)
	require.NotContains(t, reason, "xapp-wrong")
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop")
	}
}

// TestSocketModeComesBackAfterA404: apps.connections.open answers 404 once,
// at start and again on a later reconnection: the adapter reports Slack down
// meanwhile and reconnects by itself each time.
func TestSocketModeComesBackAfterA404(t *testing.T) {
	fs := newFakeSlack(t)
	fs.fail("apps.connections.open", fakeFailure{status: http.StatusNotFound})
	h := newHarnessWith(t, ModeSocket, fs, newTestStore(t), nil)
	require.Eventually(t, func() bool { up, _ := h.a.Health(); return up }, 10*time.Second, 5*time.Millisecond)
	require.Len(t, fs.callsOf("apps.connections.open"), 2, "one refused, one that worked")

	// Slack drops the websocket (a refresh) and the next open is refused.
	fs.fail("apps.connections.open", fakeFailure{status: http.StatusNotFound})
	var down string
	fs.dropSocket()
	require.Eventually(t, func() bool {
		up, reason := h.a.Health()
		if !up {
			down = reason
		}
		return len(fs.callsOf("apps.connections.open")) >= 4 && up
	}, 10*time.Second, time.Millisecond)
	require.Equal(t, "apps.connections.open answered HTTP 404", down)

	// Events flow again.
	h.fs.sendEnvelope("env-back", "events_api", eventBody("EvBack", mentionEvent("U1", "<@UBOT> hi", "1700000040.000100", "")), 0)
	require.Equal(t, "env-back", h.fs.nextAck(t).EnvelopeID)
}

// deployForm is the form Slack posts for "/deploy staging"; its
// response_url is hook.
func deployForm(trigger, hook string) url.Values {
	return url.Values{
		"token": {"x"}, "team_id": {testTeam}, "team_domain": {"acme"}, "channel_id": {"C1"}, "channel_name": {"ops"},
		"user_id": {"U1"}, "user_name": {"ann"}, "command": {"/deploy"}, "text": {"staging"},
		"response_url": {hook}, "trigger_id": {trigger}, "api_app_id": {"A1"},
	}
}

func TestHTTPDeployCommand(t *testing.T) {
	h := newHarness(t, ModeHTTP, nil)
	release := h.fs.slow()
	defer release()
	form := deployForm("trig-1", h.fs.hookURL()).Encode()
	w := h.serve(t, "/slack/commands", formType, form, nil)
	require.Equal(t, http.StatusOK, w.Code, "answered while the Web API is stuck")
	var resp commandResponse
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &resp))
	require.Equal(t, "ephemeral", resp.ResponseType)
	require.Contains(t, resp.Text, "progress follows in the thread")

	// The same request again (a replay inside the signature window) opens
	// nothing new.
	w = h.serve(t, "/slack/commands", formType, form, nil)
	require.Equal(t, http.StatusOK, w.Code)
	require.Contains(t, w.Body.String(), "already")
	release()

	h.deliverAll(t)
	posts := h.fs.callsOf("chat.postMessage")
	require.Len(t, posts, 1)
	require.Equal(t, "C1", posts[0].Form.Get("channel"))
	require.Equal(t, "<@U1> ran `/deploy staging`", posts[0].Form.Get("text"))
	require.Empty(t, posts[0].Form.Get("thread_ts"), "the opener starts a thread")
	require.Contains(t, posts[0].Form.Get("metadata"), "slack/command/trig-1")
	opener := posts[0].TS

	items, _, events, _ := h.store.snapshot()
	require.Len(t, items, 1)
	require.Equal(t, "ops", items[0].Agent())
	ev := events[0]
	require.Equal(t, bot.KindSlackCommand, ev.Kind)
	require.Equal(t, "deploy", ev.Command)
	require.Equal(t, "staging", ev.Args)
	require.Equal(t, "trig-1", ev.DeliveryID)
	require.Equal(t, "slack:T1/C1/"+opener, ev.Thread.Key())
	require.Equal(t, opener, ev.SourceRef)
	require.Equal(t, form, string(ev.Raw))
	require.Empty(t, h.fs.callsOf("chat.delete"))
}

// TestCommandOpenerLostInFlightIsFoundNotRepeated: the opener's post reaches
// Slack but its answer is lost; the next attempt finds it in the channel by
// its metadata and makes the work item in its thread, with no second opener.
func TestCommandOpenerLostInFlightIsFoundNotRepeated(t *testing.T) {
	h := newHarness(t, ModeHTTP, nil)
	w := h.serve(t, "/slack/commands", formType, deployForm("trig-9", h.fs.hookURL()).Encode(), nil)
	require.Equal(t, http.StatusOK, w.Code)
	// The post is made, then the connection drops before the answer.
	h.fs.fail("chat.postMessage", fakeFailure{pass: true, drop: true})
	ctx := context.Background()
	d := bot.NewDeliverer(bot.DelivererOptions{Store: h.store, Sinks: map[string]bot.Sink{bot.SourceSlack: h.a.Sink()}})
	_, err := d.DeliverDue(ctx)
	require.NoError(t, err)
	items, _, _, _ := h.store.snapshot()
	require.Empty(t, items)

	h.deliverAll(t)
	require.Len(t, h.fs.callsOf("chat.postMessage"), 1)
	shown := h.fs.shown(openerKey("trig-9"))
	require.Len(t, shown, 1)
	items, _, _, _ = h.store.snapshot()
	require.Len(t, items, 1)
	require.Equal(t, "slack:T1/C1/"+shown[0].TS, items[0].Thread.Key())
	require.NotEmpty(t, h.fs.callsOf("conversations.history"))
}

func TestHTTPDeployCommandWhenBotIsNotInChannel(t *testing.T) {
	h := newHarness(t, ModeHTTP, nil)
	h.fs.fail("chat.postMessage", fakeFailure{code: "not_in_channel"})
	w := h.serve(t, "/slack/commands", formType, deployForm("trig-2", h.fs.hookURL()).Encode(), nil)
	require.Equal(t, http.StatusOK, w.Code)
	h.deliverAll(t)
	hooks := h.fs.hookBodies()
	require.Len(t, hooks, 1, "the person is told through the command's response_url")
	require.Contains(t, hooks[0], "/invite @switchyard")
	require.Contains(t, hooks[0], `"response_type":"ephemeral"`)
	_, _, events, _ := h.store.snapshot()
	require.Empty(t, events)
	m, err := h.store.GetOutbox(context.Background(), openerKey("trig-2"))
	require.NoError(t, err)
	require.True(t, m.Dead)
}

// TestSlowWebAPIDelaysNoAcknowledgement sends 40 /deploy commands while
// every Web API call hangs, then a mention: every envelope is acknowledged
// within Slack's 3 seconds, measured at the Socket Mode fake, and once Slack
// answers again each command gets its one thread and work item.
func TestSlowWebAPIDelaysNoAcknowledgement(t *testing.T) {
	h := newHarness(t, ModeSocket, nil)
	release := h.fs.slow()
	defer release()
	const commands = 40
	sent := map[string]time.Time{}
	for i := range commands {
		id := fmt.Sprintf("env-cmd-%d", i)
		cmd, _ := json.Marshal(map[string]any{"team_id": testTeam, "channel_id": "C1", "user_id": "U1", "command": "/deploy",
			"text": fmt.Sprintf("staging-%d", i), "trigger_id": fmt.Sprintf("trig-%d", i), "response_url": h.fs.hookURL()})
		sent[id] = time.Now()
		h.fs.sendEnvelope(id, "slash_commands", cmd, 0)
	}
	sent["env-mention"] = time.Now()
	h.fs.sendEnvelope("env-mention", "events_api", eventBody("EvSlow", mentionEvent("U2", "<@UBOT> @coder hi", "1700000050.000100", "")), 0)
	var slowest time.Duration
	for range len(sent) {
		ack := h.fs.nextAck(t)
		start, ok := sent[ack.EnvelopeID]
		require.True(t, ok, ack.EnvelopeID)
		took := time.Since(start)
		require.Less(t, took, 3*time.Second, "envelope %s acknowledged past Slack's deadline", ack.EnvelopeID)
		slowest = max(slowest, took)
		delete(sent, ack.EnvelopeID)
	}
	t.Logf("%d envelopes acknowledged with the Web API stuck; the slowest after %s", commands+1, slowest.Round(time.Millisecond))
	require.Empty(t, h.fs.callsOf("chat.postMessage"), "every acknowledgement came while the Web API was stuck")

	release()
	h.deliverAll(t)
	require.Len(t, h.fs.callsOf("chat.postMessage"), commands, "one opener per command")
	items, _, _, _ := h.store.snapshot()
	require.Len(t, items, commands+1)
	threads := map[string]bool{}
	for _, wi := range items {
		threads[wi.Thread.Key()] = true
	}
	require.Len(t, threads, commands+1, "each command in a thread of its own")
}

type fakeCanceller struct{ id, by string }

func (c *fakeCanceller) CancelWorkItem(_ context.Context, id, by string) error {
	if id == "wi_404" {
		return bot.Errorf(bot.ENOTFOUND, "work item %s not found", id)
	}
	c.id, c.by = id, by
	return nil
}

type fakeResetter struct{ key, by string }

func (r *fakeResetter) ResetThread(_ context.Context, key, by string) ([]bot.Receipt, error) {
	r.key, r.by = key, by
	return nil, nil
}

func TestSwitchyardCommand(t *testing.T) {
	canceller, resetter := &fakeCanceller{}, &fakeResetter{}
	full := func(o *Options) {
		o.Canceller = canceller
		o.Resetter = resetter
		o.Agents = func(context.Context) ([]string, error) { return []string{"reviewer", "coder"}, nil }
		o.Skills = func(context.Context) ([]string, error) { return nil, nil }
	}
	bare := newHarness(t, ModeHTTP, nil)
	wired := newHarness(t, ModeHTTP, full)
	ctx := context.Background()
	for _, h := range []*harness{bare, wired} {
		h.store.seed(t, bot.SlackThread(testTeam, "C1", "1700000000.000010"), "docs", "write docs") // wi_1
		job := h.store.claim(t)
		require.NoError(t, h.store.FinishJob(ctx, bot.JobOutcome{JobID: job.ID, Owner: "test", Now: time.Now(), Success: true, Summary: "written"}))
		h.store.seed(t, bot.SlackThread(testTeam, "C1", "1700000000.000020"), "coder", "fix the flaky test") // wi_2
		h.store.claim(t)
		h.store.seed(t, bot.SlackThread(testTeam, "C1", "1700000000.000030"), "ops", "/deploy staging") // wi_3
	}

	tests := []struct {
		name string
		h    *harness
		text string
		want []string
		not  []string
	}{
		{"status lists open work", bare, "status", []string{"`wi_2`", "coder", "running", "`wi_3`", "ops", "queued"}, []string{"wi_1"}},
		{"runs lists recent work", bare, "runs", []string{"`wi_1`", "done", "`wi_2`", "`wi_3`"}, nil},
		{"cancel unsupported", bare, "cancel wi_2", []string{"does not support cancelling"}, []string{"Cancelled"}},
		{"cancel", wired, "cancel wi_2", []string{"Cancelled `wi_2`"}, nil},
		{"cancel unknown", wired, "cancel wi_404", []string{"Could not cancel", "not found"}, nil},
		{"cancel without id", wired, "cancel", []string{"Usage"}, nil},
		{"agents unknown", bare, "agents", []string{"does not list its agents"}, nil},
		{"agents", wired, "agents", []string{"`coder`, `reviewer`"}, nil},
		{"skills without lister", bare, "skills", []string{"No skills are installed"}, nil},
		{"skills none", wired, "skills", []string{"No skills are installed"}, nil},
		{"reset unsupported", bare, "reset slack:T1/C1/1700000000.000001", []string{"does not support resetting"}, nil},
		{"reset by key", wired, "reset slack:T1/C1/1700000000.000001", []string{"Reset `slack:T1/C1/1700000000.000001`"}, nil},
		{"reset by link", wired, "reset <https://acme.slack.com/archives/C9/p1700000000000200?thread_ts=1700000000.000100&amp;cid=C9>",
			[]string{"Reset `slack:T1/C9/1700000000.000100`"}, nil},
		{"reset without thread", wired, "reset", []string{"Usage"}, nil},
		{"help", bare, "help", []string{"/switchyard status", "/deploy"}, nil},
		{"empty is help", bare, "", []string{"/switchyard status"}, nil},
		{"unknown is help", bare, "frobnicate", []string{"/switchyard status"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			form := url.Values{"team_id": {testTeam}, "channel_id": {"C1"}, "user_id": {"U1"},
				"command": {"/switchyard"}, "text": {tc.text}, "trigger_id": {"trig-" + tc.name}}
			w := tc.h.serve(t, "/slack/commands", formType, form.Encode(), nil)
			require.Equal(t, http.StatusOK, w.Code)
			var resp commandResponse
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &resp))
			require.Equal(t, "ephemeral", resp.ResponseType)
			for _, s := range tc.want {
				require.Contains(t, resp.Text, s)
			}
			for _, s := range tc.not {
				require.NotContains(t, resp.Text, s)
			}
		})
	}
	require.Equal(t, "wi_2", canceller.id)
	require.Equal(t, "U1", canceller.by)
	require.Equal(t, "slack:T1/C9/1700000000.000100", resetter.key)
	require.Equal(t, "U1", resetter.by, "the reset is made by who asked")
	// Queries store nothing and post nothing.
	_, _, events, _ := bare.store.snapshot()
	require.Empty(t, events)
	require.Empty(t, bare.fs.callsOf("chat.postMessage"))
}

func TestAccessLists(t *testing.T) {
	h := newHarness(t, ModeHTTP, func(o *Options) {
		o.AllowedUsers = []string{"U1", "U2"}
		o.AllowedChannels = []string{"C1"}
	})

	// A stranger mentions the bot: recorded with a reason and told why in
	// the thread, once, even when Slack retries or they ask again there.
	body := string(eventBody("Ev10", mentionEvent("U9", "<@UBOT> @coder rm -rf", "1700000010.000100", "")))
	require.Equal(t, http.StatusOK, h.serve(t, "/slack/events", jsonType, body, nil).Code)
	require.Equal(t, http.StatusOK, h.serve(t, "/slack/events", jsonType, body, http.Header{"X-Slack-Retry-Num": {"1"}}).Code)
	again := mentionEvent("U9", "<@UBOT> @coder please", "1700000010.000200", "1700000010.000100")
	require.Equal(t, http.StatusOK, h.serve(t, "/slack/events", jsonType, string(eventBody("Ev10b", again)), nil).Code)

	// An allowed user in a channel outside the list.
	other := mentionEvent("U1", "<@UBOT> hi", "1700000011.000100", "")
	other["channel"] = "C2"
	require.Equal(t, http.StatusOK, h.serve(t, "/slack/events", jsonType, string(eventBody("Ev11", other)), nil).Code)

	// An allowed user in a DM: DMs answer to the user list alone.
	dm := map[string]any{"type": "message", "user": "U2", "text": "hello", "ts": "1700000012.000100", "channel": "D1", "channel_type": "im"}
	require.Equal(t, http.StatusOK, h.serve(t, "/slack/events", jsonType, string(eventBody("Ev12", dm)), nil).Code)

	// A stranger's command is answered to them alone and opens no thread.
	form := deployForm("trig-3", "https://hooks.example/commands/1")
	form.Set("user_id", "U9")
	w := h.serve(t, "/slack/commands", formType, form.Encode(), nil)
	require.Equal(t, http.StatusOK, w.Code)
	require.Contains(t, w.Body.String(), "Sorry")

	items, ingress, _, _ := h.store.snapshot()
	require.Len(t, items, 1)
	require.Equal(t, "D1", items[0].Thread.Channel)
	require.Len(t, ingress, 4)
	for _, rec := range ingress {
		require.Equal(t, bot.IgnoreNotAllowed, rec.Reason)
	}

	h.deliverAll(t)
	posts := h.fs.callsOf("chat.postMessage")
	require.Len(t, posts, 2, "one reply in each thread a stranger asked in, none for the command")
	// Threads are delivered side by side: in either order.
	byChannel := map[string]int{posts[0].Form.Get("channel"): 0, posts[1].Form.Get("channel"): 1}
	for _, want := range []struct{ channel, thread string }{{"C1", "1700000010.000100"}, {"C2", "1700000011.000100"}} {
		i, ok := byChannel[want.channel]
		require.True(t, ok, "a reply in %s", want.channel)
		require.Equal(t, want.thread, posts[i].Form.Get("thread_ts"))
		require.Contains(t, posts[i].Form.Get("text"), "only take requests from the people and channels my administrators allowed")
	}
}

func TestAllowListsChangeAtOnce(t *testing.T) {
	g := NewGate([]string{"C1"}, nil)
	ev := &bot.Event{Kind: bot.KindSlackMention, Channel: "C2", Actor: "U1"}
	require.Equal(t, bot.IgnoreNotAllowed, g.Screen(ev).Code)
	g.Allow([]string{"C1", "C2"}, []string{"U2"})
	require.Equal(t, bot.IgnoreNotAllowed, g.Screen(ev).Code, "U1 is not in the new user list")
	ev.Actor = "U2"
	require.Nil(t, g.Screen(ev))
	require.Equal(t, map[string]bool{"C1": true, "C2": true}, g.allowedChannels(), "the tools see the new channel list")
}

type recordingDecider struct{ clicks chan ApprovalClick }

func (d recordingDecider) DecideApproval(_ context.Context, c ApprovalClick) error {
	d.clicks <- c
	return nil
}

func TestInteractionsReachTheApprovalDecider(t *testing.T) {
	dec := recordingDecider{clicks: make(chan ApprovalClick, 4)}
	h := newHarness(t, ModeHTTP, func(o *Options) { o.Approvals = dec })
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "user": map[string]any{"id": "U1", "team_id": testTeam}, "team": map[string]any{"id": testTeam},
		"channel":      map[string]any{"id": "C1"},
		"container":    map[string]any{"type": "message", "message_ts": "1700000020.000100", "channel_id": "C1", "thread_ts": "1700000001.000100"},
		"response_url": "https://hooks.example/actions/1", "trigger_id": "trig-a",
		"actions": []map[string]any{
			{"type": "button", "action_id": ActionApprove, "block_id": "b1", "value": "appr_1", "action_ts": "1700000021.000100"},
			{"type": "button", "action_id": "something_else", "block_id": "b1", "value": "x"},
		},
	})
	body := url.Values{"payload": {string(payload)}}.Encode()
	require.Equal(t, http.StatusOK, h.serve(t, "/slack/interactions", formType, body, nil).Code)
	click := <-dec.clicks
	require.Equal(t, ApprovalClick{Approve: true, ApprovalID: "appr_1", User: "U1", Team: testTeam, Channel: "C1",
		MessageTS: "1700000020.000100", ThreadTS: "1700000001.000100", ResponseURL: "https://hooks.example/actions/1"}, click)
	require.Empty(t, dec.clicks)

	require.Equal(t, http.StatusBadRequest, h.serve(t, "/slack/interactions", formType, "payload=%7Bnot+json", nil).Code)
}

// refusingDecider answers every click with err.
type refusingDecider struct{ err error }

func (d refusingDecider) DecideApproval(context.Context, ApprovalClick) error { return d.err }

func clickBody(t *testing.T, user, approvalID string) string {
	t.Helper()
	payload, err := json.Marshal(map[string]any{
		"type": "block_actions", "user": map[string]any{"id": user}, "team": map[string]any{"id": testTeam},
		"container": map[string]any{"type": "message", "message_ts": "1700000020.000100", "channel_id": "C1", "thread_ts": "1700000001.000100"},
		"actions":   []map[string]any{{"type": "button", "action_id": ActionApprove, "value": approvalID}},
	})
	require.NoError(t, err)
	return url.Values{"payload": {string(payload)}}.Encode()
}

func TestRefusedApprovalClickIsToldToTheClickerAlone(t *testing.T) {
	tests := []struct {
		name     string
		decider  ApprovalDecider
		wantCode int
		wantText string // of the ephemeral; "" when none
	}{
		{"not an approver", refusingDecider{bot.Errorf(bot.EUNAUTHORIZED, `U9 may not decide approval "ap_1"`)},
			http.StatusOK, `U9 may not decide approval "ap_1"`},
		{"already decided", refusingDecider{bot.Errorf(bot.ECONFLICT, `approval "ap_1" is already approved by U1`)},
			http.StatusOK, "already approved by U1"},
		{"no approvals configured", nil, http.StatusOK, "approvals are not set up"},
		{"the store failed", refusingDecider{errors.New("disk on fire")}, http.StatusInternalServerError, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, ModeHTTP, func(o *Options) { o.Approvals = tc.decider })
			require.Equal(t, tc.wantCode, h.serve(t, "/slack/interactions", formType, clickBody(t, "U9", "ap_1"), nil).Code)
			if tc.wantText == "" {
				time.Sleep(50 * time.Millisecond)
				require.Empty(t, h.fs.callsOf("chat.postEphemeral"))
				return
			}
			require.Eventually(t, func() bool { return len(h.fs.callsOf("chat.postEphemeral")) == 1 }, 5*time.Second, 5*time.Millisecond)
			eph := h.fs.callsOf("chat.postEphemeral")[0].Form
			require.Equal(t, "U9", eph.Get("user"))
			require.Equal(t, "C1", eph.Get("channel"))
			require.Equal(t, "1700000001.000100", eph.Get("thread_ts"))
			require.Contains(t, eph.Get("text"), tc.wantText)
			require.Empty(t, h.fs.callsOf("chat.postMessage"), "nothing in the thread for everyone")
		})
	}
}

func TestHTTPBeforeAuthIsNotReady(t *testing.T) {
	fs := newFakeSlack(t)
	a, err := New(Options{Mode: ModeHTTP, BotToken: "xoxb-test", SigningSecret: testSecret, APIURL: fs.apiURL(),
		Intake: bot.NewIntake(bot.IntakeOptions{Store: newTestStore(t), Router: mentionDecider{}})})
	require.NoError(t, err)
	body := string(eventBody("Ev30", mentionEvent("U1", "<@UBOT> hi", "1700000030.000100", "")))
	w := httptest.NewRecorder()
	a.Handler().ServeHTTP(w, signed(t, "/slack/events", jsonType, body, time.Now(), testSecret))
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
}

func TestNewValidatesOptions(t *testing.T) {
	in := bot.NewIntake(bot.IntakeOptions{Store: newTestStore(t), Router: mentionDecider{}})
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"no bot token", Options{Intake: in, AppToken: "xapp"}, "bot_token"},
		{"socket without app token", Options{Intake: in, BotToken: "xoxb"}, "app_token"},
		{"http without signing secret", Options{Mode: ModeHTTP, Intake: in, BotToken: "xoxb"}, "signing_secret"},
		{"unknown mode", Options{Mode: "carrier-pigeon", Intake: in, BotToken: "xoxb"}, "mode"},
		{"no intake", Options{BotToken: "xoxb", AppToken: "xapp"}, "intake"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestSocketModeInteraction(t *testing.T) {
	dec := recordingDecider{clicks: make(chan ApprovalClick, 1)}
	h := newHarness(t, ModeSocket, func(o *Options) { o.Approvals = dec })
	payload, _ := json.Marshal(map[string]any{"type": "block_actions", "user": map[string]any{"id": "U1"},
		"container": map[string]any{"type": "message", "message_ts": "1700000020.000100", "channel_id": "C1"},
		"actions":   []map[string]any{{"type": "button", "action_id": ActionDeny, "value": "appr_2"}}})
	h.fs.sendEnvelope("env-i1", "interactive", payload, 0)
	require.Equal(t, "env-i1", h.fs.nextAck(t).EnvelopeID)
	click := <-dec.clicks
	require.False(t, click.Approve)
	require.Equal(t, "appr_2", click.ApprovalID)
	require.Equal(t, "U1", click.User)
	require.Equal(t, "C1", click.Channel)
}
