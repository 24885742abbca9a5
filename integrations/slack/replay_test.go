package slack

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// countingResetter and countingCanceller count what /switchyard asked of
// them.
type countingResetter struct {
	mu   sync.Mutex
	keys []string
}

func (r *countingResetter) ResetThread(_ context.Context, key, _ string) ([]bot.Receipt, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = append(r.keys, key)
	return nil, nil
}

func (r *countingResetter) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.keys)
}

type countingCanceller struct {
	mu  sync.Mutex
	ids []string
}

func (c *countingCanceller) CancelWorkItem(_ context.Context, id, _ string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids = append(c.ids, id)
	return nil
}

func (c *countingCanceller) calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ids)
}

// resend is a captured request sent again as it was, with its headers
// changed by edit (nil: none).
func resend(captured *http.Request, body string, edit func(http.Header)) *http.Request {
	r := httptest.NewRequest(captured.Method, captured.URL.Path, strings.NewReader(body))
	r.Header = captured.Header.Clone()
	if edit != nil {
		edit(r.Header)
	}
	return r
}

// A signed Slack command is acted on once: sent again within the timestamp
// window, as it was or with its signature spelled in upper case (which the
// verifier takes), a command that changes something does nothing again and
// says so. A person typing the same command again sends another request,
// which runs.
func TestACapturedCommandRunsOnce(t *testing.T) {
	resetter, canceller := &countingResetter{}, &countingCanceller{}
	h := newHarness(t, ModeHTTP, func(o *Options) { o.Resetter, o.Canceller = resetter, canceller })
	serve := func(r *http.Request) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.a.Handler().ServeHTTP(w, r)
		return w
	}
	text := func(w *httptest.ResponseRecorder) string {
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
		var resp commandResponse
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &resp))
		return resp.Text
	}
	replays := capturedReplays()
	command := func(trigger, sub string) string {
		return url.Values{"team_id": {testTeam}, "channel_id": {"C1"}, "user_id": {"U1"}, "user_name": {"ann"},
			"command": {"/switchyard"}, "text": {sub}, "trigger_id": {trigger}}.Encode()
	}

	for _, tc := range []struct {
		name, sub, done string
		calls           func() int
	}{
		{"reset", "reset slack:T1/C1/1700000000.000001", "Reset `slack:T1/C1/1700000000.000001`", resetter.calls},
		{"cancel", "cancel wi_2", "Cancelled `wi_2`", canceller.calls},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := command("trig-"+tc.name, tc.sub)
			captured := signed(t, "/slack/commands", formType, body, time.Now(), testSecret)
			require.Contains(t, text(serve(resend(captured, body, nil))), tc.done)
			require.Equal(t, 1, tc.calls())
			for name, edit := range replays {
				got := text(serve(resend(captured, body, edit)))
				require.Contains(t, got, "I already ran `/switchyard "+tc.sub+"` for this request, so nothing was done again.", name)
				require.Equal(t, 1, tc.calls(), name)
			}
			// Typed again: another trigger id, another signature.
			again := command("trig-"+tc.name+"-again", tc.sub)
			require.Contains(t, text(serve(signed(t, "/slack/commands", formType, again, time.Now(), testSecret))), tc.done)
			require.Equal(t, 2, tc.calls())
		})
	}
	_, ingress, _, _ := h.store.snapshot()
	require.Len(t, ingress, 4, "each command run is recorded once")
	for _, in := range ingress {
		require.Equal(t, bot.IgnoreAnswered, in.Reason)
		require.Equal(t, bot.KindSlackCommand, in.Kind)
	}

	t.Run("deploy", func(t *testing.T) {
		body := deployForm("trig-deploy", h.fs.hookURL()).Encode()
		captured := signed(t, "/slack/commands", formType, body, time.Now(), testSecret)
		require.Contains(t, text(serve(resend(captured, body, nil))), "Got `/deploy staging`")
		for name, edit := range replays {
			require.Contains(t, text(serve(resend(captured, body, edit))), "I already have that `/deploy`.", name)
		}
	})

}

// An Events API request sent again within the timestamp window makes
// nothing new, whether its event id is known or it has none.
func TestACapturedEventMakesNothingNew(t *testing.T) {
	h := newHarness(t, ModeHTTP, nil)
	serve := func(r *http.Request) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.a.Handler().ServeHTTP(w, r)
		return w
	}
	for name, edit := range capturedReplays() {
		for _, tc := range []struct{ name, eventID string }{{"with its event id", "EvReplay " + name}, {"without an event id", ""}} {
			body := string(eventBody(tc.eventID, mentionEvent("U1", "<@UBOT> @coder fix it "+tc.name+", "+name, "1700000009.000100", "")))
			captured := signed(t, "/slack/events", jsonType, body, time.Now(), testSecret)
			before, _, _, _ := h.store.snapshot()
			require.Equal(t, http.StatusOK, serve(resend(captured, body, nil)).Code)
			after, _, _, _ := h.store.snapshot()
			require.Len(t, after, len(before)+1, tc.name)
			for range 3 {
				require.Equal(t, http.StatusOK, serve(resend(captured, body, edit)).Code, name)
			}
			again, _, _, _ := h.store.snapshot()
			require.Len(t, again, len(after), tc.name)
		}
	}
}

// capturedReplays are the ways a captured request is sent again that its
// signature still verifies.
func capturedReplays() map[string]func(http.Header) {
	return map[string]func(http.Header){
		"as it was": nil,
		"signature in upper case": func(hd http.Header) {
			hd.Set("X-Slack-Signature", "v0="+strings.ToUpper(strings.TrimPrefix(hd.Get("X-Slack-Signature"), "v0=")))
		},
	}
}
