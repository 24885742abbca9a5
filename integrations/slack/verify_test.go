package slack

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// forgery is a request an attacker could send: a body for an endpoint and
// the headers it carries, signed or not.
type forgery struct {
	name        string
	path        string
	contentType string
	body        string
	header      http.Header
}

// v0Signature returns the v0 signature of body at stamp with secret, as Slack
// computes it.
func v0Signature(secret, stamp, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%s:%s", stamp, body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// forgeries generates requests every endpoint must refuse with 401: each
// mutation of a genuine request's signature, timestamp, headers and body,
// for events, commands, interactions and url_verification.
func forgeries(now time.Time) []forgery {
	type endpoint struct {
		name, path, contentType, body string
	}
	endpoints := []endpoint{
		{"event", "/slack/events", jsonType, string(eventBody("EvForged", mentionEvent("U1", "<@UBOT> @coder deploy", "1700000003.000100", "")))},
		{"url_verification", "/slack/events", jsonType, `{"token":"x","challenge":"forged-challenge","type":"url_verification"}`},
		{"command", "/slack/commands", formType, deployForm("trig-forged", "https://hooks.example/commands/1").Encode()},
		{"interaction", "/slack/interactions", formType, "payload=" + strings.ReplaceAll(`{"type":"block_actions","user":{"id":"U1"},"actions":[{"action_id":"approve","value":"ap_1"}]}`, `"`, "%22")},
	}
	stamp := strconv.FormatInt(now.Unix(), 10)
	at := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }

	type mutation struct {
		name   string
		header func(body string) http.Header // the request's Slack headers
		body   func(body string) string      // the body sent, when it differs from the one signed
	}
	headers := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	withStamp := func(s string) func(string) http.Header {
		return func(body string) http.Header {
			return headers("X-Slack-Request-Timestamp", s, "X-Slack-Signature", v0Signature(testSecret, s, body))
		}
	}
	withSig := func(sig func(good string) string) func(string) http.Header {
		return func(body string) http.Header {
			return headers("X-Slack-Request-Timestamp", stamp, "X-Slack-Signature", sig(v0Signature(testSecret, stamp, body)))
		}
	}
	good := withStamp(stamp)
	var muts []mutation

	// Signatures: missing, of another secret or body, and every way of
	// spelling the v0 prefix and its hex but the one Slack sends.
	muts = append(muts,
		mutation{"no headers", func(string) http.Header { return http.Header{} }, nil},
		mutation{"no signature", func(string) http.Header { return headers("X-Slack-Request-Timestamp", stamp) }, nil},
		mutation{"no timestamp", func(body string) http.Header {
			return headers("X-Slack-Signature", v0Signature(testSecret, stamp, body))
		}, nil},
		mutation{"empty signature", withSig(func(string) string { return "" }), nil},
		mutation{"wrong secret", func(body string) http.Header {
			return headers("X-Slack-Request-Timestamp", stamp, "X-Slack-Signature", v0Signature("not-the-secret", stamp, body))
		}, nil},
		mutation{"empty secret", func(body string) http.Header {
			return headers("X-Slack-Request-Timestamp", stamp, "X-Slack-Signature", v0Signature("", stamp, body))
		}, nil},
		mutation{"signature of another timestamp", func(body string) http.Header {
			return headers("X-Slack-Request-Timestamp", stamp, "X-Slack-Signature", v0Signature(testSecret, at(-time.Second), body))
		}, nil},
		mutation{"signature of an empty body", func(string) http.Header {
			return headers("X-Slack-Request-Timestamp", stamp, "X-Slack-Signature", v0Signature(testSecret, stamp, ""))
		}, nil},
	)
	for _, v := range []struct {
		name string
		sig  func(good string) string
	}{
		{"bare hex", func(g string) string { return strings.TrimPrefix(g, "v0=") }},
		{"V0 prefix", func(g string) string { return "V" + g[1:] }},
		{"v1 prefix", func(g string) string { return "v1" + g[2:] }},
		{"v0: prefix", func(g string) string { return "v0:" + g[3:] }},
		{"v0 twice", func(g string) string { return "v0=" + g }},
		{"space after v0=", func(g string) string { return "v0= " + g[3:] }},
		{"leading space", func(g string) string { return " " + g }},
		{"trailing space", func(g string) string { return g + " " }},
		{"only the prefix", func(string) string { return "v0=" }},
		{"one digit short", func(g string) string { return g[:len(g)-1] }},
		{"one byte short", func(g string) string { return g[:len(g)-2] }},
		{"one byte more", func(g string) string { return g + "00" }},
		{"last digit changed", func(g string) string {
			if g[len(g)-1] == '0' {
				return g[:len(g)-1] + "1"
			}
			return g[:len(g)-1] + "0"
		}},
		{"not hex", func(g string) string { return "v0=" + strings.Repeat("zz", 32) }},
		{"all zeros", func(string) string { return "v0=" + strings.Repeat("0", 64) }},
		{"two signatures in one header", func(g string) string { return g + "," + g }},
		{"sha1 length", func(g string) string { return g[:43] }},
	} {
		muts = append(muts, mutation{"signature " + v.name, withSig(v.sig), nil})
	}
	// Duplicated headers: a second value, good or bad, is not Slack's.
	muts = append(muts,
		mutation{"a second, wrong signature", func(body string) http.Header {
			h := good(body)
			h.Add("X-Slack-Signature", "v0="+strings.Repeat("ab", 32))
			return h
		}, nil},
		mutation{"a wrong signature, then the right one", func(body string) http.Header {
			h := headers("X-Slack-Request-Timestamp", stamp, "X-Slack-Signature", "v0="+strings.Repeat("ab", 32))
			h.Add("X-Slack-Signature", v0Signature(testSecret, stamp, body))
			return h
		}, nil},
		mutation{"the right signature twice", func(body string) http.Header {
			h := good(body)
			h.Add("X-Slack-Signature", v0Signature(testSecret, stamp, body))
			return h
		}, nil},
		mutation{"a second timestamp", func(body string) http.Header {
			h := good(body)
			h.Add("X-Slack-Request-Timestamp", at(-time.Hour))
			return h
		}, nil},
		mutation{"a stale timestamp, then a fresh one", func(body string) http.Header {
			old := at(-time.Hour)
			h := headers("X-Slack-Request-Timestamp", old, "X-Slack-Signature", v0Signature(testSecret, old, body))
			h.Add("X-Slack-Request-Timestamp", stamp)
			return h
		}, nil},
	)
	// Timestamps, each correctly signed: outside the window either way, or
	// not the decimal Unix time Slack sends.
	for _, d := range []time.Duration{
		-5*time.Minute - 5*time.Second, -6 * time.Minute, -time.Hour, -24 * time.Hour, -365 * 24 * time.Hour,
		5*time.Minute + 5*time.Second, 6 * time.Minute, time.Hour, 24 * time.Hour, 365 * 24 * time.Hour,
	} {
		muts = append(muts, mutation{"timestamp " + d.String() + " off", withStamp(at(d)), nil})
	}
	for _, s := range []string{
		"0", "1", "-1", "-" + stamp, strconv.FormatInt(math.MaxInt64, 10), strconv.FormatInt(math.MinInt64, 10),
		strconv.FormatInt(math.MinInt64/int64(time.Second), 10), strconv.FormatInt(math.MaxInt64/int64(time.Second), 10), strings.Repeat("9", 30),
		"abc", "1e9", stamp + ".5", stamp + "x", " " + stamp, stamp + " ", "+" + stamp, "0" + stamp, "00" + stamp,
		"0x" + strconv.FormatInt(now.Unix(), 16), stamp + "\t", "\u0661" + stamp[1:], stamp[:len(stamp)-1] + "\uff10",
		stamp + "000", stamp[:len(stamp)-3],
	} {
		muts = append(muts, mutation{fmt.Sprintf("timestamp %q", s), withStamp(s), nil})
	}
	// Bodies changed after signing.
	for _, v := range []struct {
		name string
		body func(string) string
	}{
		{"a byte appended", func(b string) string { return b + " " }},
		{"a newline appended", func(b string) string { return b + "\n" }},
		{"a byte removed", func(b string) string { return b[:len(b)-1] }},
		{"a byte prepended", func(b string) string { return " " + b }},
		{"emptied", func(string) string { return "" }},
		{"doubled", func(b string) string { return b + b }},
		{"a byte flipped", func(b string) string {
			i := len(b) / 2
			return b[:i] + string(b[i]^1) + b[i+1:]
		}},
		{"upper-cased", strings.ToUpper},
		{"a NUL appended", func(b string) string { return b + "\x00" }},
	} {
		muts = append(muts, mutation{"body " + v.name, good, v.body})
	}

	var out []forgery
	for _, ep := range endpoints {
		for _, m := range muts {
			body := ep.body
			if m.body != nil {
				body = m.body(ep.body)
			}
			out = append(out, forgery{name: ep.name + "/" + m.name, path: ep.path, contentType: ep.contentType,
				body: body, header: m.header(ep.body)})
		}
	}
	return out
}

// TestForgedRequestsAreRefused sends every forgery to every endpoint: each
// is answered 401 before anything is read from its body, and nothing is
// stored, posted or answered with a challenge.
func TestForgedRequestsAreRefused(t *testing.T) {
	h := newHarness(t, ModeHTTP, nil)
	corpus := forgeries(time.Now())
	require.Greater(t, len(corpus), 250)
	for _, f := range corpus {
		t.Run(f.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, f.path, strings.NewReader(f.body))
			r.Header.Set("Content-Type", f.contentType)
			for k, vs := range f.header {
				r.Header[k] = vs
			}
			w := httptest.NewRecorder()
			h.a.Handler().ServeHTTP(w, r)
			require.Equal(t, http.StatusUnauthorized, w.Code)
			require.NotContains(t, w.Body.String(), "forged-challenge")
		})
	}
	items, ingress, events, dups := h.store.snapshot()
	require.Empty(t, items)
	require.Empty(t, ingress)
	require.Empty(t, events)
	require.Zero(t, dups)
	pending, _, err := h.store.OutboxPending(t.Context())
	require.NoError(t, err)
	require.Zero(t, pending, "no command opener was queued")
}

// TestGenuineRequestVariantsAreAccepted: what Slack really sends passes,
// at the edges of the window and whatever the content type says.
func TestGenuineRequestVariantsAreAccepted(t *testing.T) {
	h := newHarness(t, ModeHTTP, nil)
	now := time.Now()
	body := `{"token":"x","challenge":"real-challenge","type":"url_verification"}`
	for _, tc := range []struct {
		name        string
		at          time.Time
		contentType string
	}{
		{"now", now, jsonType},
		{"4m30s ago", now.Add(-4*time.Minute - 30*time.Second), jsonType},
		{"4m30s ahead", now.Add(4*time.Minute + 30*time.Second), jsonType},
		{"json with a charset", now, jsonType + "; charset=utf-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			h.a.Handler().ServeHTTP(w, signed(t, "/slack/events", tc.contentType, body, tc.at, testSecret))
			require.Equal(t, http.StatusOK, w.Code)
			require.Contains(t, w.Body.String(), "real-challenge")
		})
	}
}

// TestOversizedBodiesAreRefusedUnread: a body over the limit is refused
// whether or not it is signed, and nothing of it is stored.
func TestOversizedBodiesAreRefusedUnread(t *testing.T) {
	h := newHarness(t, ModeHTTP, nil)
	big := string(eventBody("EvBig", mentionEvent("U1", "<@UBOT> "+strings.Repeat("x", maxBodyBytes), "1700000004.000100", "")))
	for _, path := range []string{"/slack/events", "/slack/commands", "/slack/interactions"} {
		for _, secret := range []string{testSecret, "not-the-secret"} {
			w := httptest.NewRecorder()
			h.a.Handler().ServeHTTP(w, signed(t, path, jsonType, big, time.Now(), secret))
			require.Contains(t, []int{http.StatusRequestEntityTooLarge, http.StatusUnauthorized}, w.Code, path)
		}
	}
	items, ingress, events, _ := h.store.snapshot()
	require.Empty(t, items)
	require.Empty(t, ingress)
	require.Empty(t, events)
}
