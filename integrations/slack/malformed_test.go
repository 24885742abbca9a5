package slack

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// lockedBuffer is a log destination the handlers and the test share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// What an outsider would send signed (Slack's own signature is right, the
// body is not Slack's): fields twice or missing, a url_verification whose
// challenge is missing or not a string, an interaction carrying two
// payloads. Each is refused with a 400 and a short reason, stores nothing,
// logs none of the body, and the next genuine request is served.
func TestMalformedSignedRequestsAreRefusedAndStoreNothing(t *testing.T) {
	const marker = "BODYMARKER"
	logs := &lockedBuffer{}
	h := newHarness(t, ModeHTTP, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	command := func(edit func(url.Values) string) string {
		f := deployForm("trig-"+marker, "https://hooks.example/commands/1")
		f.Set("text", "staging "+marker)
		return edit(f)
	}
	clickPayload := `{"type":"block_actions","user":{"id":"U1"},"actions":[{"action_id":"` + ActionApprove + `","value":"` + marker + `"}]}`
	for _, tc := range []struct {
		name, path, contentType, body, reason string
	}{
		{"a command naming its user twice", "/slack/commands", formType,
			command(func(f url.Values) string { return f.Encode() + "&user_id=UEVE" }), "malformed command"},
		{"a command naming itself twice", "/slack/commands", formType,
			command(func(f url.Values) string { return f.Encode() + "&command=%2Fswitchyard" }), "malformed command"},
		{"a command with its text twice", "/slack/commands", formType,
			command(func(f url.Values) string { return f.Encode() + "&text=prod" }), "malformed command"},
		{"a command with its channel twice", "/slack/commands", formType,
			command(func(f url.Values) string { return f.Encode() + "&channel_id=C2" }), "malformed command"},
		{"a command without a command", "/slack/commands", formType,
			command(func(f url.Values) string { f.Del("command"); return f.Encode() }), "malformed command"},
		{"a command without a channel", "/slack/commands", formType,
			command(func(f url.Values) string { f.Del("channel_id"); return f.Encode() }), "malformed command"},
		{"a command without a user", "/slack/commands", formType,
			command(func(f url.Values) string { f.Del("user_id"); return f.Encode() }), "malformed command"},
		{"a command that is not a form", "/slack/commands", formType,
			command(func(f url.Values) string { return f.Encode() + "&%zz" }), "malformed command"},
		{"a url_verification without a challenge", "/slack/events", jsonType,
			`{"type":"url_verification","token":"` + marker + `"}`, "malformed payload"},
		{"a url_verification with an empty challenge", "/slack/events", jsonType,
			`{"type":"url_verification","challenge":"","token":"` + marker + `"}`, "malformed payload"},
		{"a url_verification whose challenge is a number", "/slack/events", jsonType,
			`{"type":"url_verification","challenge":5,"token":"` + marker + `"}`, "malformed payload"},
		{"a url_verification whose challenge is an object", "/slack/events", jsonType,
			`{"type":"url_verification","challenge":{"a":"` + marker + `"}}`, "malformed payload"},
		{"an interaction carrying two payloads", "/slack/interactions", formType,
			url.Values{"payload": {clickPayload, `{"type":"view_submission"}`}}.Encode(), "malformed interaction"},
		{"an interaction without a payload", "/slack/interactions", formType, "", "malformed interaction"},
		{"an interaction whose payload is not JSON", "/slack/interactions", formType,
			url.Values{"payload": {"{" + marker}}.Encode(), "malformed interaction"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := h.serve(t, tc.path, tc.contentType, tc.body, nil)
			require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
			require.Equal(t, tc.reason, strings.TrimSpace(w.Body.String()))
		})
	}
	items, ingress, events, _ := h.store.snapshot()
	require.Empty(t, items)
	require.Empty(t, ingress)
	require.Empty(t, events)
	msgs, err := h.store.ListOutbox(t.Context(), "slack:"+testTeam+"/C1")
	require.NoError(t, err)
	require.Empty(t, msgs, "no thread opened")
	require.NotContains(t, logs.String(), marker, "a refusal's log line carries none of the body")

	// Slack's own command is served next.
	w := h.serve(t, "/slack/commands", formType, deployForm("trig-good", "https://hooks.example/commands/1").Encode(), nil)
	require.Equal(t, http.StatusOK, w.Code)
	require.Contains(t, w.Body.String(), "progress follows")
}
