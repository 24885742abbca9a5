package daemon_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
)

// socketSlack is Slack for Socket Mode, at the wire: auth.test,
// apps.connections.open (answering 404 until opened) and the websocket,
// which says hello and pings.
type socketSlack struct {
	srv    *httptest.Server
	open   atomic.Bool
	opens  atomic.Int32
	mu     sync.Mutex
	joined int
}

func newSocketSlack(t *testing.T) *socketSlack {
	s := &socketSlack{}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/auth.test", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "team_id": "T1", "user_id": "UBOT", "bot_id": "BBOT", "user": "switchyard"})
	})
	mux.HandleFunc("/api/apps.connections.open", func(w http.ResponseWriter, _ *http.Request) {
		s.opens.Add(1)
		if !s.open.Load() {
			http.NotFound(w, nil)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/ws"})
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		s.mu.Lock()
		s.joined++
		s.mu.Unlock()
		_ = conn.WriteJSON(map[string]any{"type": "hello", "num_connections": 1})
		for {
			if conn.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second)) != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

// TestSlackDownIsVisibleUntilItReconnects: Slack refuses to open a Socket
// Mode connection (404) for a while. Meanwhile the daemon serves, /readyz
// says it is degraded and names Slack, switchyard_source_up is 0, and one
// warning is logged however often it retries. Once Slack opens again the
// daemon connects by itself.
func TestSlackDownIsVisibleUntilItReconnects(t *testing.T) {
	fake := newSocketSlack(t)
	logs := &syncBuffer{}
	r := start(t, func(o *daemon.Options) {
		o.Setup.Config.Slack = &config.Slack{Mode: config.SlackSocket, AppToken: "xapp-1-test", BotToken: "xoxb-test", APIURL: fake.srv.URL + "/api/"}
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	require.Eventually(t, func() bool { return fake.opens.Load() >= 2 }, 10*time.Second, 10*time.Millisecond, "it retries")

	code, body := r.do(t, "GET", "/readyz", "")
	require.Equal(t, http.StatusOK, code, "webhooks and the API still work: the daemon stays in its load balancer")
	var ready struct {
		Status string            `json:"status"`
		Down   map[string]string `json:"down"`
	}
	require.NoError(t, json.Unmarshal(body, &ready))
	require.Equal(t, "degraded", ready.Status)
	require.Equal(t, map[string]string{"slack": "apps.connections.open answered HTTP 404"}, ready.Down)
	_, metrics := r.do(t, "GET", "/metrics", "")
	require.Contains(t, string(metrics), `switchyard_source_up{source="slack"} 0`)
	require.Equal(t, 1, strings.Count(logs.String(), "slack is down"), "one warning, not one per retry:\n%s", logs)
	require.Equal(t, http.StatusAccepted, r.status(t, "POST", "/api/v1/messages", `{"text":"@triage still there?"}`))

	fake.open.Store(true)
	require.Eventually(t, func() bool {
		_, body := r.do(t, "GET", "/readyz", "")
		var now map[string]any
		return json.Unmarshal(body, &now) == nil && len(now) == 1 && now["status"] == "ready"
	}, 10*time.Second, 10*time.Millisecond, "%s", logs)
	_, metrics = r.do(t, "GET", "/metrics", "")
	require.Contains(t, string(metrics), `switchyard_source_up{source="slack"} 1`)
	require.Contains(t, logs.String(), "slack connected")
	require.NotContains(t, logs.String(), "xapp-1-test")
}

// TestSlackRefusingTheBotTokenIsVisibleWhileEventsArrive: Slack's Socket
// Mode connection stays up (the app token is fine), but every Web API call
// with the bot token is refused (token_revoked). The daemon still takes
// the mention, its messages wait instead of being given up, and /readyz
// says so: degraded, naming Slack and why, not "ready" with a backlog that
// grows unseen.
func TestSlackRefusingTheBotTokenIsVisibleWhileEventsArrive(t *testing.T) {
	var srv *httptest.Server
	mux := http.NewServeMux()
	mux.HandleFunc("/api/auth.test", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "team_id": "T1", "user_id": "UBOT", "bot_id": "BBOT", "user": "switchyard"})
	})
	mux.HandleFunc("/api/apps.connections.open", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"})
	})
	var refused atomic.Int32
	mux.HandleFunc("/api/", func(w http.ResponseWriter, _ *http.Request) {
		refused.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "token_revoked"})
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.WriteJSON(map[string]any{"type": "hello", "num_connections": 1})
		_ = conn.WriteJSON(map[string]any{"envelope_id": "env-1", "type": "events_api", "accepts_response_payload": false,
			"payload": map[string]any{"team_id": "T1", "api_app_id": "A1", "type": "event_callback", "event_id": "Ev1", "event_time": time.Now().Unix(),
				"event": map[string]any{"type": "app_mention", "user": "UANA01", "text": "<@UBOT> @triage look at this", "ts": "1700000000.000100",
					"channel": "C1", "event_ts": "1700000000.000100"}}})
		for {
			if conn.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second)) != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	r := start(t, func(o *daemon.Options) {
		o.Setup.Config.Slack = &config.Slack{Mode: config.SlackSocket, AppToken: "xapp-1-test", BotToken: "xoxb-test", APIURL: srv.URL + "/api/"}
	})
	require.Eventually(t, func() bool {
		_, metrics := r.do(t, "GET", "/metrics", "")
		return strings.Contains(string(metrics), `switchyard_source_up{source="slack"} 1`) &&
			strings.Contains(string(metrics), `switchyard_sink_up{sink="slack"} 0`)
	}, 30*time.Second, 20*time.Millisecond, "events arrive, and Slack goes down as a destination")

	code, body := r.do(t, "GET", "/readyz", "")
	require.Equal(t, http.StatusOK, code, "webhooks and the API still work: the daemon stays in its load balancer")
	var ready struct {
		Status string            `json:"status"`
		Down   map[string]string `json:"down"`
	}
	require.NoError(t, json.Unmarshal(body, &ready))
	require.Equal(t, "degraded", ready.Status, "a Slack that refuses every message is named")
	require.Equal(t, map[string]string{"slack": "its messages wait: slack reactions.add: token_revoked"}, ready.Down)
	require.GreaterOrEqual(t, refused.Load(), int32(3))
	_, metrics := r.do(t, "GET", "/metrics", "")
	require.NotContains(t, string(metrics), "switchyard_outbox_pending 0", "nothing was given up")
}
