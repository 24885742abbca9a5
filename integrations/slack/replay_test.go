package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
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

// Ids that no store keeps (not UTF-8 text, a NUL, a channel a session key
// cannot be read back from) are no Slack request's: each is refused as
// malformed (400; over Socket Mode acknowledged and dropped, so Slack
// stops sending it), and nothing is stored or run, rather than failing as
// an internal error Slack retries.
func TestIDsNoStoreKeepsAreMalformed(t *testing.T) {
	resetter := &countingResetter{}
	h := newHarness(t, ModeHTTP, func(o *Options) { o.Resetter = resetter })
	bad := []string{"%00", "a%00b", "%FF%FE", "x%C3%28"}
	n := 0
	for _, field := range []string{"trigger_id", "channel_id", "user_id", "team_id"} {
		for _, b := range bad {
			for _, cmd := range []string{"command=%2Fdeploy&text=prod", "command=%2Fswitchyard&text=reset+slack%3AT1%2FC1%2F1700000000.000001"} {
				n++
				form := map[string]string{"trigger_id": fmt.Sprintf("trig-%d", n), "channel_id": "C1", "user_id": "U1", "team_id": testTeam}
				form[field] += b
				body := fmt.Sprintf("team_id=%s&channel_id=%s&user_id=%s&trigger_id=%s&%s", form["team_id"], form["channel_id"], form["user_id"], form["trigger_id"], cmd)
				w := h.serve(t, "/slack/commands", formType, body, nil)
				require.Equal(t, http.StatusBadRequest, w.Code, "%s %s", field, b)
			}
		}
	}
	for _, ch := range []string{"C1/x", "C\u0000", "/C1"} {
		n++
		w := h.serve(t, "/slack/commands", formType, url.Values{"team_id": {testTeam}, "channel_id": {ch}, "user_id": {"U1"},
			"command": {"/deploy"}, "text": {"prod"}, "trigger_id": {fmt.Sprintf("trig-%d", n)}}.Encode(), nil)
		require.Equal(t, http.StatusBadRequest, w.Code, "channel %q", ch)
	}
	for _, tc := range []struct{ eventID, channel, ts string }{
		{"Ev\u0000x", "C1", "1700000001.000100"},
		{"Ev1", "C\u00001", "1700000001.000100"},
		{"Ev2", "C1/x", "1700000001.000100"},
		{"Ev3", "C1", "1700000001/000100"},
		{"Ev4", "C1", "17000\u000001.000100"},
	} {
		n++
		ev := mentionEvent("U1", "<@UBOT> @coder fix it", tc.ts, "")
		ev["channel"] = tc.channel
		w := h.serve(t, "/slack/events", jsonType, string(eventBody(tc.eventID, ev)), nil)
		require.Equal(t, http.StatusBadRequest, w.Code, "%+v", tc)
	}
	t.Logf("%d requests", n)
	items, ingress, _, _ := h.store.snapshot()
	require.Empty(t, items)
	require.Empty(t, ingress)
	require.Zero(t, resetter.calls())
	msgs, err := h.store.ListOutbox(t.Context(), bot.SlackThread(testTeam, "C1", "").Key())
	require.NoError(t, err)
	require.Empty(t, msgs)
}

// Slack retries an event it got no 200 for with a fresh timestamp, so a
// fresh signature, and X-Slack-Retry-Num: the retry is acknowledged and
// known by its event id, not refused, and makes nothing new. Two events
// whose bodies differ only in white space are two requests: both are
// accepted.
func TestARetryWithAFreshSignatureIsKnownByItsEventID(t *testing.T) {
	h := newHarness(t, ModeHTTP, nil)
	serve := func(r *http.Request) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.a.Handler().ServeHTTP(w, r)
		return w
	}
	body := string(eventBody("EvRetry1", mentionEvent("U1", "<@UBOT> @coder fix it", "1700000019.000100", "")))
	now := time.Now()
	require.Equal(t, http.StatusOK, serve(signed(t, "/slack/events", jsonType, body, now.Add(-2*time.Minute), testSecret)).Code)
	before, _, _, _ := h.store.snapshot()
	for i, at := range []time.Duration{-time.Minute, 0} {
		r := signed(t, "/slack/events", jsonType, body, now.Add(at), testSecret)
		r.Header.Set("X-Slack-Retry-Num", strconv.Itoa(i+1))
		r.Header.Set("X-Slack-Retry-Reason", "http_timeout")
		w := serve(r)
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	}
	after, _, _, _ := h.store.snapshot()
	require.Len(t, after, len(before))

	a := string(eventBody("", mentionEvent("U1", "<@UBOT> @coder fix that", "1700000029.000100", "")))
	b := strings.Replace(a, ",", ", ", 1)
	require.Equal(t, http.StatusOK, serve(signed(t, "/slack/events", jsonType, a, now, testSecret)).Code)
	require.Equal(t, http.StatusOK, serve(signed(t, "/slack/events", jsonType, b, now, testSecret)).Code)
	two, _, _, _ := h.store.snapshot()
	require.Len(t, two, len(after)+2)
}
