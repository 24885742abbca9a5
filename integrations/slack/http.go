package slack

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
)

// maxBodyBytes bounds a request body; Slack's payloads are a few kilobytes.
const maxBodyBytes = 1 << 20

// Handler serves Slack's HTTP requests: POST /slack/events (Events API),
// /slack/commands (slash commands) and /slack/interactions (buttons).
// Every request must carry a valid v0 signature whose timestamp is within
// five minutes; anything else is answered 401 and stored nowhere. Mount it
// at "/slack/" on the daemon's mux.
func (a *Adapter) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /slack/events", a.serveEvents)
	mux.HandleFunc("POST /slack/commands", a.serveCommands)
	mux.HandleFunc("POST /slack/interactions", a.serveInteractions)
	return mux
}

// requestSig is what a verified request's signature says of it: the
// signature (lower-case hex), which the intake keeps as a dedup key so the
// request is acted on once, and when the timestamp window refuses the
// request anyway. Zero for Socket Mode, which signs nothing.
type requestSig struct {
	signature string
	until     time.Time
}

// on sets the signature on an event of the request.
func (s requestSig) on(ev *bot.Event) {
	ev.Signature, ev.SignedUntil = s.signature, s.until
}

// verified reads the body and checks its signature. On failure it has
// answered the request. A request that cannot be Slack's (no signing
// secret to check it with, signature headers missing or repeated, a
// timestamp out of the window) is refused before its body is read.
func (a *Adapter) verified(w http.ResponseWriter, r *http.Request) ([]byte, requestSig, bool) {
	if !a.opts.SigningSecret.IsSet() {
		a.opts.Logger.Warn("slack request refused: no signing secret is configured", slog.String("path", r.URL.Path))
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return nil, requestSig{}, false
	}
	// Slack sends each header once; a request with two signatures or two
	// timestamps was made by someone else, whichever of them is right.
	// Timestamps more than five minutes off are refused, so a captured
	// request cannot be replayed later; within the window the intake knows
	// it by its signature (and by its event_id or trigger_id), so a replay
	// changes nothing.
	// NewSecretsVerifier checks the window too, but calls a timestamp from
	// the future "too old": this says which.
	why := headerProblem(r.Header)
	if why == "" {
		why = timestampProblem(r.Header.Get(timestampHeader), a.opts.Now())
	}
	if why != "" {
		a.opts.Logger.Warn("slack request refused", slog.String("path", r.URL.Path), slog.String("reason", why))
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return nil, requestSig{}, false
	}
	body, release, err := a.opts.Bodies.Read(w, r, maxBodyBytes)
	if err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		case errors.Is(err, httpapi.ErrBodiesBusy):
			a.opts.Logger.Warn("slack request refused: too many bodies arriving at once", slog.String("path", r.URL.Path))
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many requests arriving at once", http.StatusServiceUnavailable)
		default:
			http.Error(w, "cannot read request body", http.StatusBadRequest)
		}
		return nil, requestSig{}, false
	}
	sv, err := slack.NewSecretsVerifier(r.Header, a.opts.SigningSecret.Reveal())
	if err == nil {
		_, _ = sv.Write(body)
		err = sv.Ensure() // constant-time comparison
	}
	// Only bodies nobody has verified yet are counted: once verified, the
	// body is an event's payload or a command like any other.
	release()
	if err != nil {
		a.opts.Logger.Warn("slack request refused", slog.String("path", r.URL.Path), slog.String("reason", err.Error()))
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return nil, requestSig{}, false
	}
	return body, signedBy(r.Header), true
}

// signedBy reads a verified request's signature in one spelling,
// lower-case hex (the verifier takes either case), and the end of its
// timestamp window.
func signedBy(h http.Header) requestSig {
	mac, _ := hex.DecodeString(strings.TrimPrefix(h.Get(signatureHeader), "v0="))
	sec, _ := strconv.ParseInt(h.Get(timestampHeader), 10, 64)
	return requestSig{signature: hex.EncodeToString(mac), until: time.Unix(sec, 0).Add(maxClockSkew)}
}

func (a *Adapter) serveEvents(w http.ResponseWriter, r *http.Request) {
	body, sig, ok := a.verified(w, r)
	if !ok {
		return
	}
	if n := r.Header.Get("X-Slack-Retry-Num"); n != "" {
		a.opts.Logger.Debug("slack event retry", slog.String("attempt", n), slog.String("reason", r.Header.Get("X-Slack-Retry-Reason")))
	}
	challenge, err := a.handleEventsPayload(r.Context(), body, sig)
	switch {
	case errors.Is(err, errBadPayload):
		a.opts.Logger.Warn("slack event refused", slog.Any("err", err))
		http.Error(w, "malformed payload", http.StatusBadRequest)
	case errors.Is(err, errNotReady):
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	case err != nil:
		// Not acknowledged: Slack retries, and the retry is deduplicated.
		a.opts.Logger.Error("slack event not persisted", slog.Any("err", err))
		http.Error(w, "internal error", http.StatusInternalServerError)
	case challenge != "":
		writeJSON(w, map[string]string{"challenge": challenge})
	default:
		w.WriteHeader(http.StatusOK)
	}
}

func (a *Adapter) serveCommands(w http.ResponseWriter, r *http.Request) {
	body, sig, ok := a.verified(w, r)
	if !ok {
		return
	}
	cmd, err := parseCommand(body)
	if err != nil {
		a.opts.Logger.Warn("slack command refused", slog.Any("err", err))
		http.Error(w, "malformed command", http.StatusBadRequest)
		return
	}
	resp, err := a.handleCommand(r.Context(), cmd, body, sig)
	if err != nil {
		a.opts.Logger.Warn("slack command refused", slog.Any("err", err))
		http.Error(w, "malformed command", http.StatusBadRequest)
		return
	}
	writeJSON(w, resp)
}

func (a *Adapter) serveInteractions(w http.ResponseWriter, r *http.Request) {
	body, _, ok := a.verified(w, r)
	if !ok {
		return
	}
	form, err := httpapi.ParseForm(string(body), "form", "form field")
	if err == nil {
		err = a.handleInteraction(r.Context(), []byte(form.Get("payload")))
	} else {
		err = fmt.Errorf("%w: interaction: %s", errBadPayload, bot.ErrorMessage(err))
	}
	switch {
	case errors.Is(err, errBadPayload):
		a.opts.Logger.Warn("slack interaction refused", slog.Any("err", err))
		http.Error(w, "malformed interaction", http.StatusBadRequest)
		return
	case err != nil:
		a.opts.Logger.Error("slack interaction failed", slog.Any("err", err))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// maxClockSkew is how far a request's timestamp may be from now.
const maxClockSkew = 5 * time.Minute

// The headers that carry a request's signature and when it was signed.
const (
	signatureHeader = "X-Slack-Signature"
	timestampHeader = "X-Slack-Request-Timestamp"
)

// headerProblem says what is wrong with how often a request carries the
// signature headers, or "": Slack sends each exactly once.
func headerProblem(h http.Header) string {
	for _, name := range []string{signatureHeader, timestampHeader} {
		switch n := len(h.Values(name)); {
		case n == 0:
			return "no " + name
		case n > 1:
			return fmt.Sprintf("%s is given %d times", name, n)
		}
	}
	return ""
}

// timestampProblem says what is wrong with a request's
// X-Slack-Request-Timestamp at now, or "". Slack sends the Unix time in
// decimal digits, without sign, spaces or leading zeros: any other
// spelling is refused, since the signature covers the header as written.
func timestampProblem(header string, now time.Time) string {
	if header == "" {
		return "no " + timestampHeader
	}
	sec, err := strconv.ParseInt(header, 10, 64)
	if err != nil || header[0] < '1' || header[0] > '9' {
		return fmt.Sprintf("%s %q is not a Unix time", timestampHeader, header)
	}
	// In seconds, which cannot overflow for a positive sec, rather than
	// as a Duration, which would for a timestamp centuries away.
	off := sec - now.Unix()
	window := int64(maxClockSkew / time.Second)
	switch {
	case off > window:
		return fmt.Sprintf("the timestamp is %s in the future (more than %s off: check this machine's clock)", offset(off), maxClockSkew)
	case -off > window:
		return fmt.Sprintf("the timestamp is too old (%s ago; at most %s)", offset(-off), maxClockSkew)
	}
	return ""
}

// offset shows a positive number of seconds as a duration, or as days when
// a Duration cannot hold it.
func offset(sec int64) string {
	if sec >= int64(math.MaxInt64/time.Second) {
		return strconv.FormatInt(sec/86400, 10) + " days"
	}
	return (time.Duration(sec) * time.Second).String()
}
