package slack

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A Socket Mode connection goes through what Slack does to it in a week:
// a 429 with Retry-After when it opens, a disconnect envelope asking for a
// refresh, one saying the link was disabled, and the websocket closed
// while an envelope was on its way. Each time the adapter connects again
// by itself, Slack is reported down only while there is no connection,
// and every event is acted on once, whatever Slack redelivers.
func TestSocketModeLivesThroughWhatSlackDoesToIt(t *testing.T) {
	fs := newFakeSlack(t)
	fs.fail("apps.connections.open", fakeFailure{status: http.StatusTooManyRequests, retryAfter: "1"})
	h := newHarnessWith(t, ModeSocket, fs, newTestStore(t), nil)
	opens := fs.callsOf("apps.connections.open")
	require.Len(t, opens, 2, "one refused, one that worked")
	require.GreaterOrEqual(t, opens[1].At.Sub(opens[0].At), time.Second, "Retry-After is kept")
	require.Eventually(t, func() bool { up, _ := h.a.Health(); return up }, 10*time.Second, 5*time.Millisecond)

	n := 0
	mention := func() ([]byte, string) {
		n++
		ts := fmt.Sprintf("1700000100.%06d", n)
		return eventBody(fmt.Sprintf("EvLife%d", n), mentionEvent("U1", fmt.Sprintf("<@UBOT> @coder job %d", n), ts, "")), ts
	}
	items := func() int {
		got, _, _, _ := h.store.snapshot()
		return len(got)
	}
	reconnected := func(before int) {
		t.Helper()
		require.Eventually(t, func() bool {
			fs.mu.Lock()
			defer fs.mu.Unlock()
			return fs.conns > before && fs.conn != nil
		}, 10*time.Second, 5*time.Millisecond)
		require.Eventually(t, func() bool { up, _ := h.a.Health(); return up }, 10*time.Second, 5*time.Millisecond)
	}
	conns := func() int {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return fs.conns
	}

	for _, reason := range []string{"refresh_requested", "link_disabled", "warning"} {
		body, _ := mention()
		fs.sendEnvelope("env-"+reason, "events_api", body, 0)
		require.Equal(t, "env-"+reason, fs.nextAck(t).EnvelopeID)
		before := conns()
		fs.write(map[string]any{"type": "disconnect", "reason": reason, "debug_info": map[string]any{"host": "fake"}})
		reconnected(before)
		// Events flow on the new connection.
		body, _ = mention()
		fs.sendEnvelope("env-after-"+reason, "events_api", body, 0)
		require.Equal(t, "env-after-"+reason, fs.nextAck(t).EnvelopeID)
	}
	require.Equal(t, n, items())

	// The websocket closes as an envelope goes out: Slack never saw its
	// acknowledgement and sends it again on the next connection.
	body, _ := mention()
	before := conns()
	fs.sendEnvelope("env-cut", "events_api", body, 0)
	fs.dropSocket()
	reconnected(before)
	fs.sendEnvelope("env-cut", "events_api", body, 1)
	require.Equal(t, "env-cut", fs.nextAck(t).EnvelopeID)
	require.Equal(t, n, items(), "the envelope sent twice made one work item")
	// The first copy's acknowledgement, when it made it out before the cut,
	// may still be on its way.
	nextAck := func() string {
		for {
			if id := fs.nextAck(t).EnvelopeID; id != "env-cut" {
				return id
			}
		}
	}

	// A refused open after a drop shows Slack down until the next works.
	fs.fail("apps.connections.open", fakeFailure{status: http.StatusTooManyRequests, retryAfter: "1"})
	before = conns()
	fs.dropSocket()
	// First the connection is lost, then Slack's answer says why it stays
	// so for the Retry-After.
	require.Eventually(t, func() bool {
		up, why := h.a.Health()
		return !up && strings.Contains(why, "rate limit")
	}, 10*time.Second, time.Millisecond)
	reconnected(before)
	body, _ = mention()
	fs.sendEnvelope("env-last", "events_api", body, 0)
	require.Equal(t, "env-last", nextAck())
	require.Equal(t, n, items())
}

// While the websocket is gone and apps.connections.open takes its time (a
// network that lost Slack), Slack is reported down: events do not reach
// the daemon, whatever the reason, until a connection is open again.
func TestSocketModeIsDownWhileItReconnects(t *testing.T) {
	fs := newFakeSlack(t)
	h := newHarnessWith(t, ModeSocket, fs, newTestStore(t), nil)
	require.Eventually(t, func() bool { up, _ := h.a.Health(); return up }, 10*time.Second, 5*time.Millisecond)

	release := make(chan struct{})
	open := sync.OnceFunc(func() { close(release) })
	t.Cleanup(open)
	fs.mu.Lock()
	fs.intercept = func(method string, _ int) *fakeFailure {
		if method == "apps.connections.open" {
			<-release
		}
		return nil
	}
	fs.mu.Unlock()
	fs.dropSocket()
	require.Eventually(t, func() bool { up, _ := h.a.Health(); return !up }, 10*time.Second, 5*time.Millisecond,
		"Slack is down while no connection is open")
	_, why := h.a.Health()
	require.Equal(t, "socket mode connection lost; reconnecting", why)
	open()
	require.Eventually(t, func() bool { up, _ := h.a.Health(); return up }, 10*time.Second, 5*time.Millisecond)
	h.fs.sendEnvelope("env-again", "events_api", eventBody("EvAgain", mentionEvent("U1", "<@UBOT> hi", "1700000050.000100", "")), 0)
	require.Equal(t, "env-again", h.fs.nextAck(t).EnvelopeID)
}
