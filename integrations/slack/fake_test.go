package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	boltstore "github.com/switchyard/switchyard/storage/bolt"
)

// The fake Slack: the Web API methods the adapter calls and the Socket Mode
// websocket, spoken at the wire so slack-go's real clients run against it.

const (
	testSecret  = "8f742231b10e8888abcd99yyyzzz85a5"
	testBotUser = "UBOT"
	testBotID   = "BBOT"
	testTeam    = "T1"
)

type apiCall struct {
	Method string
	Form   url.Values
	TS     string    // the ts the fake answered chat.postMessage with
	At     time.Time // when the fake received it
}

// fakeFailure is how the fake answers one call of a method instead of
// succeeding.
type fakeFailure struct {
	pass       bool   // answer normally: lets a failure be queued behind successes
	status     int    // HTTP status; 200 when zero
	retryAfter string // Retry-After header
	code       string // Slack error code in {"ok":false}
	// drop, with pass, does what the call asks and then closes the
	// connection without an answer: a request lost on its way back.
	drop bool
	// then, with drop, is called once the call is done, before the
	// connection is closed.
	then func()
}

type socketAck struct {
	EnvelopeID string          `json:"envelope_id"`
	Payload    json.RawMessage `json:"payload"`
}

// fakeMessage is a message the fake Slack shows, as conversations.replies
// and .history return it.
type fakeMessage struct {
	Channel, TS, ThreadTS, Text string
	BotID                       string
	Metadata                    map[string]any // as posted: event_type, event_payload
	Deleted                     bool
}

type fakeSlack struct {
	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	calls    []apiCall
	epoch    int64 // the seconds of every ts it hands out: when it started
	nextTS   int
	failures map[string][]fakeFailure
	messages []*fakeMessage
	hooks    []string // bodies posted to response_url
	// gate, when set, holds every Web API call but auth.test and
	// apps.connections.open until it is closed: a Slack that is slow.
	gate   chan struct{}
	conn   *websocket.Conn
	connMu sync.Mutex // serialises writes to conn
	conns  int

	acks chan socketAck
	// groups are the members of user groups, by group id.
	groups map[string][]string
	// intercept, when set, sees every Web API call but auth.test that no
	// queued failure answers (n counts them from 1) and may answer it with
	// a failure of its own; it may also act itself, such as stopping the
	// client.
	intercept   func(method string, n int) *fakeFailure
	intercepted int
}

func newFakeSlack(t testing.TB) *fakeSlack {
	t.Helper()
	fs := &fakeSlack{t: t, epoch: time.Now().Unix(), failures: map[string][]fakeFailure{}, acks: make(chan socketAck, 64)}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/{method}", fs.serveAPI)
	mux.HandleFunc("/ws", fs.serveSocket)
	mux.HandleFunc("/hooks/", fs.serveHook)
	fs.srv = httptest.NewServer(mux)
	t.Cleanup(fs.srv.Close)
	return fs
}

func (fs *fakeSlack) apiURL() string { return fs.srv.URL + "/api/" }

// fail makes the next call of method answer f.
func (fs *fakeSlack) fail(method string, f fakeFailure) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.failures[method] = append(fs.failures[method], f)
}

// callsOf returns the successful and failed calls of method so far.
func (fs *fakeSlack) callsOf(method string) []apiCall {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []apiCall
	for _, c := range fs.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// hookURL is a response_url that posts to the fake.
func (fs *fakeSlack) hookURL() string { return fs.srv.URL + "/hooks/command" }

func (fs *fakeSlack) serveHook(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	fs.mu.Lock()
	fs.hooks = append(fs.hooks, string(body))
	fs.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (fs *fakeSlack) hookBodies() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return slices.Clone(fs.hooks)
}

// slow holds the Web API (see gate) until the returned func is called.
func (fs *fakeSlack) slow() (release func()) {
	gate := make(chan struct{})
	fs.mu.Lock()
	fs.gate = gate
	fs.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			fs.mu.Lock()
			fs.gate = nil
			fs.mu.Unlock()
			close(gate)
		})
	}
}

// shown returns the messages the fake shows (not deleted) posted for an
// outbox key.
func (fs *fakeSlack) shown(key string) []fakeMessage {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []fakeMessage
	for _, m := range fs.messages {
		if payload, _ := m.Metadata["event_payload"].(map[string]any); !m.Deleted && payload["key"] == key {
			out = append(out, *m)
		}
	}
	return out
}

// listMessages answers conversations.replies (thread set) and .history:
// top-level messages, or a thread's root and replies, oldest first, with
// their metadata only when include_all_metadata is set, as Slack does.
func (fs *fakeSlack) listMessages(channel, thread, oldest string, withMetadata bool) []map[string]any {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := []map[string]any{}
	for _, m := range fs.messages {
		if m.Deleted || m.Channel != channel || oldest != "" && m.TS < oldest {
			continue
		}
		if thread == "" && m.ThreadTS != "" && m.ThreadTS != m.TS || thread != "" && m.TS != thread && m.ThreadTS != thread {
			continue
		}
		msg := map[string]any{"type": "message", "ts": m.TS, "text": m.Text, "bot_id": m.BotID}
		if m.ThreadTS != "" {
			msg["thread_ts"] = m.ThreadTS
		}
		if withMetadata && m.Metadata != nil {
			msg["metadata"] = m.Metadata
		}
		out = append(out, msg)
	}
	return out
}

func (fs *fakeSlack) serveAPI(rw http.ResponseWriter, r *http.Request) {
	w := rw
	method := r.PathValue("method")
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if method != "auth.test" && method != "apps.connections.open" {
		fs.mu.Lock()
		gate := fs.gate
		fs.mu.Unlock()
		if gate != nil {
			<-gate
		}
	}
	fs.mu.Lock()
	fs.nextTS++
	ts := fmt.Sprintf("%d.%06d", fs.epoch, fs.nextTS)
	fs.calls = append(fs.calls, apiCall{Method: method, Form: r.PostForm, TS: ts, At: time.Now()})
	var failure *fakeFailure
	if q := fs.failures[method]; len(q) > 0 {
		failure, fs.failures[method] = &q[0], q[1:]
	}
	intercept := fs.intercept
	fs.intercepted++
	n := fs.intercepted
	fs.mu.Unlock()
	if failure == nil && intercept != nil && method != "auth.test" {
		failure = intercept(method, n)
	}

	if failure != nil && failure.pass && failure.drop {
		w = httptest.NewRecorder()
		then := failure.then
		defer func() {
			if then != nil {
				then()
			}
			conn, _, err := http.NewResponseController(rw).Hijack()
			require.NoError(fs.t, err)
			conn.Close()
		}()
	}
	if failure != nil && !failure.pass {
		if failure.retryAfter != "" {
			w.Header().Set("Retry-After", failure.retryAfter)
		}
		if failure.status != 0 && failure.status != http.StatusOK {
			w.WriteHeader(failure.status)
			return
		}
		writeJSON(w, map[string]any{"ok": false, "error": failure.code})
		return
	}
	channel := r.PostForm.Get("channel")
	if blocks := r.PostForm.Get("blocks"); blocks != "" && !validBlocks(blocks) {
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_blocks"})
		return
	}
	switch method {
	case "auth.test":
		writeJSON(w, map[string]any{"ok": true, "url": "https://acme.slack.com/", "team": "Acme", "user": "switchyard",
			"team_id": testTeam, "user_id": testBotUser, "bot_id": testBotID})
	case "chat.postMessage":
		m := &fakeMessage{Channel: channel, TS: ts, ThreadTS: r.PostForm.Get("thread_ts"), Text: r.PostForm.Get("text"), BotID: testBotID}
		if meta := r.PostForm.Get("metadata"); meta != "" {
			require.NoError(fs.t, json.Unmarshal([]byte(meta), &m.Metadata))
		}
		fs.mu.Lock()
		fs.messages = append(fs.messages, m)
		fs.mu.Unlock()
		writeJSON(w, map[string]any{"ok": true, "channel": channel, "ts": ts,
			"message": map[string]any{"text": r.PostForm.Get("text"), "ts": ts, "thread_ts": r.PostForm.Get("thread_ts")}})
	case "chat.update", "chat.delete":
		found := false
		fs.mu.Lock()
		for _, m := range fs.messages {
			if m.Channel == channel && m.TS == r.PostForm.Get("ts") && !m.Deleted {
				found = true
				m.Text, m.Deleted = r.PostForm.Get("text"), method == "chat.delete"
			}
		}
		fs.mu.Unlock()
		if !found {
			writeJSON(w, map[string]any{"ok": false, "error": "message_not_found"})
			return
		}
		writeJSON(w, map[string]any{"ok": true, "channel": channel, "ts": r.PostForm.Get("ts"), "text": r.PostForm.Get("text")})
	case "conversations.replies", "conversations.history":
		thread := r.PostForm.Get("ts")
		if method == "conversations.history" {
			thread = ""
		}
		writeJSON(w, map[string]any{"ok": true, "has_more": false,
			"messages": fs.listMessages(channel, thread, r.PostForm.Get("oldest"), r.PostForm.Get("include_all_metadata") == "1")})
	case "chat.postEphemeral":
		writeJSON(w, map[string]any{"ok": true, "message_ts": ts})
	case "reactions.add":
		writeJSON(w, map[string]any{"ok": true})
	case "usergroups.users.list":
		fs.mu.Lock()
		members, ok := fs.groups[r.PostForm.Get("usergroup")]
		fs.mu.Unlock()
		if !ok {
			writeJSON(w, map[string]any{"ok": false, "error": "no_such_subteam"})
			return
		}
		writeJSON(w, map[string]any{"ok": true, "users": members})
	case "apps.connections.open":
		if r.Header.Get("Authorization") != "Bearer xapp-test" {
			writeJSON(w, map[string]any{"ok": false, "error": "invalid_auth"})
			return
		}
		writeJSON(w, map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(fs.srv.URL, "http") + "/ws"})
	default:
		writeJSON(w, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

// validBlocks checks what Slack checks of Block Kit that the sink could
// get wrong: at most 50 blocks, at most 10 elements in a context block,
// and no text object longer than 3,000 characters.
func validBlocks(raw string) bool {
	var blocks []map[string]any
	if json.Unmarshal([]byte(raw), &blocks) != nil || len(blocks) > 50 {
		return false
	}
	ok := true
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if x["type"] == "context" {
				if els, _ := x["elements"].([]any); len(els) > 10 {
					ok = false
				}
			}
			if text, isText := x["text"].(string); isText && utf8.RuneCountInString(text) > 3000 {
				ok = false
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	for _, b := range blocks {
		walk(b)
	}
	return ok
}

// serveSocket speaks Socket Mode: hello on connect, pings so the client
// keeps the connection, and every message the client sends is an ack.
func (fs *fakeSlack) serveSocket(w http.ResponseWriter, r *http.Request) {
	// slack-go sends Origin: https://api.slack.com, as Slack expects.
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	fs.mu.Lock()
	fs.conn = conn
	fs.conns++
	fs.mu.Unlock()

	fs.write(map[string]any{"type": "hello", "num_connections": 1,
		"connection_info": map[string]any{"app_id": "A1"}, "debug_info": map[string]any{"host": "fake"}})
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if conn.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second)) != nil {
					return
				}
			}
		}
	}()
	for {
		var ack socketAck
		if err := conn.ReadJSON(&ack); err != nil {
			return
		}
		fs.acks <- ack
	}
}

// dropSocket closes the Socket Mode connection from Slack's side.
func (fs *fakeSlack) dropSocket() {
	fs.mu.Lock()
	conn := fs.conn
	fs.conn = nil
	fs.mu.Unlock()
	require.NotNil(fs.t, conn)
	conn.Close()
}

func (fs *fakeSlack) connected() bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.conn != nil
}

func (fs *fakeSlack) write(v any) {
	fs.mu.Lock()
	conn := fs.conn
	fs.mu.Unlock()
	require.NotNil(fs.t, conn, "no socket mode connection")
	fs.connMu.Lock()
	defer fs.connMu.Unlock()
	require.NoError(fs.t, conn.WriteJSON(v))
}

// sendEnvelope sends a Socket Mode envelope and returns its id.
func (fs *fakeSlack) sendEnvelope(id, typ string, payload []byte, retry int) {
	fs.write(map[string]any{"envelope_id": id, "type": typ, "payload": json.RawMessage(payload),
		"accepts_response_payload": typ != "events_api", "retry_attempt": retry, "retry_reason": ""})
}

// nextAck waits for the next acknowledgement.
func (fs *fakeSlack) nextAck(t *testing.T) socketAck {
	t.Helper()
	select {
	case ack := <-fs.acks:
		return ack
	case <-time.After(10 * time.Second):
		t.Fatal("no socket mode ack")
		return socketAck{}
	}
}

// testStore is the real bbolt store with two knobs for tests: a gate that
// holds Ingest, and failures for the next calls. It also remembers the events
// it newly stored, in order, and counts duplicates.
type testStore struct {
	*boltstore.Store

	mu     sync.Mutex
	events []bot.Event
	dups   int
	gate   chan struct{} // when set, Ingest waits for it
	failN  int           // the next failN calls fail
}

func newTestStore(t testing.TB) *testStore {
	st, err := boltstore.Open(context.Background(), filepath.Join(t.TempDir(), "switchyard.db"), boltstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return &testStore{Store: st}
}

func (s *testStore) Ingest(ctx context.Context, req bot.IngestRequest) (bot.IngestResult, error) {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return bot.IngestResult{}, ctx.Err()
		}
	}
	s.mu.Lock()
	if s.failN > 0 {
		s.failN--
		s.mu.Unlock()
		return bot.IngestResult{}, bot.Errorf(bot.EUNAVAILABLE, "store is down")
	}
	s.mu.Unlock()
	res, err := s.Store.Ingest(ctx, req)
	if err == nil {
		s.mu.Lock()
		if res.Duplicate {
			s.dups++
		} else {
			s.events = append(s.events, req.Event)
		}
		s.mu.Unlock()
	}
	return res, err
}

// snapshot returns the stored work items and ingress records oldest first,
// the events newly stored and the duplicates seen.
func (s *testStore) snapshot() (items []bot.WorkItem, ingress []bot.IngressRecord, events []bot.Event, dups int) {
	ctx := context.Background()
	items, _, err := s.ListWorkItems(ctx, bot.WorkItemFilter{Limit: 1000})
	if err != nil {
		panic(err)
	}
	ingress, _, err = s.ListIngress(ctx, bot.IngressFilter{Limit: 1000})
	if err != nil {
		panic(err)
	}
	slices.Reverse(items)
	slices.Reverse(ingress)
	s.mu.Lock()
	defer s.mu.Unlock()
	return items, ingress, slices.Clone(s.events), s.dups
}

// seed stores a queued work item for agent in th.
func (s *testStore) seed(t testing.TB, th bot.Thread, agent, text string) bot.WorkItem {
	t.Helper()
	res, err := s.Store.Ingest(context.Background(), bot.IngestRequest{
		Event: bot.Event{Source: th.Source, Kind: bot.KindSlackMention, Thread: th, Text: text},
		Route: &bot.Route{Agent: agent, Kind: bot.RouteMention, Reason: "mention @" + agent}, Now: time.Now(),
	})
	require.NoError(t, err)
	return *res.WorkItem
}

// claim starts the next queued work item, as a worker would.
func (s *testStore) claim(t testing.TB) *bot.Job {
	t.Helper()
	c, err := s.ClaimNext(context.Background(), bot.ClaimRequest{Owner: "test", Now: time.Now(), Lease: time.Hour, MaxAttempts: 3})
	require.NoError(t, err)
	require.NotNil(t, c.Job)
	return c.Job
}

// mentionDecider routes like the core's router does for the cases here:
// an explicit mention, then a command, then the default agent.
type mentionDecider struct{}

func (mentionDecider) Route(ev *bot.Event) bot.Route {
	if len(ev.Mentions) > 0 {
		return bot.Route{Agent: ev.Mentions[0], Kind: bot.RouteMention, Reason: "mention @" + ev.Mentions[0]}
	}
	if agent, ok := bot.DefaultCommands()[ev.Command]; ok {
		return bot.Route{Agent: agent, Kind: bot.RouteCommand, Reason: "command /" + ev.Command}
	}
	return bot.Route{Agent: "triage", Kind: bot.RouteDefault, Reason: "default"}
}

// harness runs an Adapter against the fake Slack and a real bot.Intake.
type harness struct {
	fs    *fakeSlack
	store *testStore
	a     *Adapter
}

func newHarness(t *testing.T, mode string, tweak func(*Options)) *harness {
	t.Helper()
	return newHarnessWith(t, mode, newFakeSlack(t), newTestStore(t), tweak)
}

func newHarnessWith(t *testing.T, mode string, fs *fakeSlack, store *testStore, tweak func(*Options)) *harness {
	t.Helper()
	opts := Options{
		Mode:            mode,
		BotToken:        "xoxb-test",
		AppToken:        "xapp-test",
		SigningSecret:   testSecret,
		APIURL:          fs.apiURL(),
		Outbox:          store,
		WorkItems:       store,
		ReconnectDelay:  10 * time.Millisecond,
		ChannelInterval: time.Millisecond,
		PingInterval:    5 * time.Second,
		Logger:          slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	// The intake applies the adapter's gate, as the daemon wires it.
	gates := map[string]bot.Gate{}
	opts.Intake = bot.NewIntake(bot.IntakeOptions{Store: store, Router: mentionDecider{}, Gates: gates, Notices: store, Threads: store})
	if tweak != nil {
		tweak(&opts)
	}
	a, err := New(opts)
	require.NoError(t, err)
	gates[bot.SourceSlack] = a.Gate()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Error("Run did not stop")
		}
	})
	require.Eventually(t, func() bool { return a.BotUserID() == testBotUser }, 10*time.Second, 5*time.Millisecond)
	if mode == ModeSocket {
		require.Eventually(t, fs.connected, 10*time.Second, 5*time.Millisecond)
	}
	return &harness{fs: fs, store: store, a: a}
}

// deliverAll delivers the outbox through the adapter's sink until nothing
// is pending, as the daemon's deliverer does.
func (h *harness) deliverAll(t *testing.T) {
	t.Helper()
	d := bot.NewDeliverer(bot.DelivererOptions{Store: h.store, Sinks: map[string]bot.Sink{bot.SourceSlack: h.a.Sink()},
		MinEditInterval: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, d.Flush(ctx))
}

// signed returns a request signed with secret at ts.
func signed(t *testing.T, path, contentType, body string, ts time.Time, secret string) *http.Request {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	stamp := strconv.FormatInt(ts.Unix(), 10)
	r.Header.Set("X-Slack-Request-Timestamp", stamp)
	r.Header.Set("X-Slack-Signature", v0Signature(secret, stamp, body))
	return r
}

// serve sends a request freshly signed with the test secret to the handler.
func (h *harness) serve(t *testing.T, path, contentType, body string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	r := signed(t, path, contentType, body, time.Now(), testSecret)
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.a.Handler().ServeHTTP(w, r)
	return w
}

// eventBody wraps an inner event in an event_callback envelope.
func eventBody(eventID string, inner map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{
		"token": "legacy", "team_id": testTeam, "api_app_id": "A1", "type": "event_callback",
		"event_id": eventID, "event_time": 1700000000, "event": inner,
		"authorizations": []map[string]any{{"team_id": testTeam, "user_id": testBotUser, "is_bot": true}},
	})
	return b
}

func mentionEvent(user, text, ts, threadTS string) map[string]any {
	m := map[string]any{"type": "app_mention", "user": user, "text": text, "ts": ts, "channel": "C1", "event_ts": ts}
	if threadTS != "" {
		m["thread_ts"] = threadTS
	}
	return m
}
