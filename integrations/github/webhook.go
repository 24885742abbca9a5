package github

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	gh "github.com/google/go-github/v60/github"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
)

// MaxWebhookBody is the largest delivery accepted; GitHub caps payloads at
// 25 MB.
const MaxWebhookBody = 25 << 20

// Defaults of WebhookOptions.
const (
	DefaultPermissionTTL = 5 * time.Minute
	// DefaultLookupTimeout bounds the questions asked of GitHub while a
	// delivery waits, so it is answered well inside GitHub's 10 s.
	DefaultLookupTimeout  = 5 * time.Second
	defaultPermissionSize = 10000
	// maxPathPages bounds the changed files fetched for a pull request:
	// GitHub lists at most 3000, 100 a page.
	maxPathPages = 30
)

// Intake decides what a normalised event makes and persists it, applying
// the Gate; *bot.Intake implements it. It returns only after the event (or,
// for a redelivery, nothing) is stored.
type Intake interface {
	Ingest(ctx context.Context, ev *bot.Event) (bot.IngestResult, error)
	// Seen reports, storing nothing, whether the event was ingested
	// before within its dedup window, by its delivery id or its signature.
	Seen(ctx context.Context, ev *bot.Event) (bot.IngestResult, error)
}

// WebhookOptions configure the webhook handler.
type WebhookOptions struct {
	// Secret is github.webhook_secret. Required: without it every delivery
	// is refused.
	Secret bot.Secret
	// Intake persists events. Required; its gate for GitHub is Gate.
	Intake Intake
	// Gate is GitHub's admission rules, the same the intake applies: the
	// handler asks it before it fetches a pull request's changed files for
	// an event the gate would refuse anyway. Required.
	Gate *Gate
	// Client asks GitHub for pull requests' changed files.
	Client *Client
	// Installations records installation events; nil: they are only kept
	// as ingress records.
	Installations InstallationStore
	// Deliveries tells a redelivery from a new delivery before anything is
	// recorded, however long after the first it comes: an old event
	// delivered again (an installation created, then deleted, then the
	// creation redelivered; a comment redelivered after the dedup window)
	// changes nothing. Nil: only the intake's dedup window tells, and every
	// installation event is recorded, redeliveries too.
	Deliveries bot.DeliveryStore
	// Approvals decides approvals from "/approve <id>" and "/deny <id>"
	// comments; nil answers them that approvals are not set up.
	Approvals ApprovalDecider
	// Outbox receives the answer to a refused approval comment, and Wake
	// (when set) is called after one is queued; nil Outbox: refusals are
	// only logged.
	Outbox Outbox
	Wake   func()
	// LookupTimeout bounds the changed-files lookup of one delivery;
	// DefaultLookupTimeout when zero.
	LookupTimeout time.Duration
	// NeedsPaths reports whether any rule matches on changed files; when it
	// does, pull request events carry their changed paths. Nil: never.
	NeedsPaths func() bool
	Logger     *slog.Logger
	// Bodies bounds the memory the bodies of deliveries being read hold
	// together, before their signatures are checked; the daemon shares one
	// with Slack's handler. Nil: one of httpapi.DefaultBodiesLimit of its
	// own.
	Bodies *httpapi.Bodies
	// Now defaults to time.Now.
	Now func() time.Time
}

type webhook struct {
	opts   WebhookOptions
	secret []byte
	bodies *httpapi.Bodies
}

// NewWebhookHandler returns the handler of POST /webhooks/github.
//
// It answers 401 to a missing, wrong or repeated X-Hub-Signature-256
// (nothing is read beyond the body), 413 to bodies over MaxWebhookBody, 503
// (Retry-After) when the bodies arriving at once already hold all the
// memory opts.Bodies allows, 400
// to deliveries without X-GitHub-Event or X-GitHub-Delivery, or with either
// twice, or with a payload that cannot be read, 415 to a body that is
// neither JSON nor a form, or is compressed, 200 to ping and to
// redeliveries, 202 once the event is persisted as a work item or an
// ingress record, 200 to a delivery signed once and sent again under another
// X-GitHub-Delivery (reason "replayed"; nothing is done again), 502 when GitHub could not be asked for a
// commenter's permission or a pull request's files (nothing is stored, so
// the delivery shows as failed and can be redelivered), and 500 when the
// intake fails.
func NewWebhookHandler(opts WebhookOptions) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.LookupTimeout <= 0 {
		opts.LookupTimeout = DefaultLookupTimeout
	}
	if opts.Bodies == nil {
		opts.Bodies = httpapi.NewBodies(0)
	}
	return &webhook{opts: opts, secret: []byte(opts.Secret.Reveal()), bodies: opts.Bodies}
}

// ReasonReplayed is the reason of a duplicate known by its signature: a
// delivery GitHub signed once, sent again under another delivery id.
const ReasonReplayed = "replayed"

// answer is the JSON body of every webhook response. It names outcomes and
// reason codes, never internal detail.
type answer struct {
	Status   string `json:"status"` // accepted, ignored, duplicate, pong, error
	WorkItem string `json:"work_item,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Error    string `json:"error,omitempty"`
}

func (h *webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		httpapi.JSON(w, http.StatusMethodNotAllowed, answer{Status: "error", Error: "POST only"})
		return
	}
	// GitHub sends each header once. A second copy is someone else's, and
	// which one a proxy or a reader takes is not to be guessed. A request
	// that cannot be GitHub's (no secret to check it with, no signature or
	// one GitHub would not spell) is refused before its body is read.
	sigs := r.Header.Values("X-Hub-Signature-256")
	var mac []byte
	if len(sigs) == 1 {
		mac = h.signature(sigs[0])
	}
	if mac == nil {
		httpapi.JSON(w, http.StatusUnauthorized, answer{Status: "error", Error: "missing or wrong X-Hub-Signature-256"})
		return
	}
	body, release, err := h.bodies.Read(w, r, MaxWebhookBody)
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			httpapi.JSON(w, http.StatusRequestEntityTooLarge, answer{Status: "error", Error: "payload over 25 MiB"})
		case errors.Is(err, httpapi.ErrBodiesBusy):
			h.opts.Logger.LogAttrs(r.Context(), slog.LevelWarn, "github delivery refused: too many bodies arriving at once",
				slog.Int64("announced", r.ContentLength))
			w.Header().Set("Retry-After", "1")
			httpapi.JSON(w, http.StatusServiceUnavailable, answer{Status: "error", Error: "too many deliveries arriving at once; redeliver later"})
		default:
			httpapi.JSON(w, http.StatusBadRequest, answer{Status: "error", Error: "could not read the body"})
		}
		return
	}
	verified := h.verify(mac, body)
	// Only bodies nobody has verified yet are counted: once it is known to
	// be GitHub's, the delivery is handled as any other.
	release()
	if !verified {
		httpapi.JSON(w, http.StatusUnauthorized, answer{Status: "error", Error: "missing or wrong X-Hub-Signature-256"})
		return
	}
	events, deliveries := r.Header.Values("X-GitHub-Event"), r.Header.Values("X-GitHub-Delivery")
	if len(events) != 1 || len(deliveries) != 1 || !validEventName(events[0]) || deliveries[0] == "" || len(deliveries[0]) > 200 {
		httpapi.JSON(w, http.StatusBadRequest, answer{Status: "error", Error: "X-GitHub-Event and X-GitHub-Delivery are required, once each"})
		return
	}
	event, deliveryID := events[0], deliveries[0]
	form, ok := contentType(r.Header)
	if !ok {
		httpapi.JSON(w, http.StatusUnsupportedMediaType, answer{Status: "error",
			Error: "Content-Type must be application/json or application/x-www-form-urlencoded, without Content-Encoding"})
		return
	}
	if event == "ping" {
		httpapi.JSON(w, http.StatusOK, answer{Status: "pong"})
		return
	}
	payload, err := payloadOf(form, body)
	if err == nil {
		var d *delivery
		if d, err = readDelivery(event, deliveryID, payload); err == nil {
			// The delivery id is not signed; the body is, and GitHub never
			// sends the same body for two events: a captured delivery sent
			// again under a new id is known by its signature (verify
			// accepts it in one spelling only, lower-case hex).
			d.ev.Signature = strings.TrimPrefix(sigs[0], "sha256=")
			h.serveDelivery(w, r, d)
			return
		}
	}
	h.opts.Logger.LogAttrs(r.Context(), slog.LevelWarn, "github delivery unreadable",
		slog.String("event", event), slog.String("delivery", deliveryID), slog.String("error", err.Error()))
	httpapi.JSON(w, http.StatusBadRequest, answer{Status: "error", Error: "malformed payload"})
}

// signature reads an X-Hub-Signature-256 spelt as GitHub spells it,
// "sha256=" and 64 lower-case hex digits, as GitHub's own examples compare
// it, into the MAC it names; nil for any other spelling, or when no secret
// is set, which verifies nothing.
func (h *webhook) signature(header string) []byte {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok || len(h.secret) == 0 || len(hexSig) != 2*sha256.Size {
		return nil
	}
	for _, c := range []byte(hexSig) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return nil
		}
	}
	mac, err := hex.DecodeString(hexSig)
	if err != nil {
		return nil
	}
	return mac
}

// verify checks, in constant time, that mac is the HMAC-SHA256 of body
// under the webhook secret.
func (h *webhook) verify(mac, body []byte) bool {
	m := hmac.New(sha256.New, h.secret)
	m.Write(body)
	return hmac.Equal(mac, m.Sum(nil))
}

// validEventName accepts GitHub's event names: they become part of kinds and
// metric labels.
func validEventName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// contentType reads how a delivery's body is sent: JSON, or (form set) a
// form, GitHub's two content types. No Content-Type is read as JSON. Any
// other, or a Content-Encoding (GitHub compresses nothing), is not ok.
func contentType(h http.Header) (form, ok bool) {
	if enc := h.Values("Content-Encoding"); len(enc) > 1 || len(enc) == 1 && !strings.EqualFold(enc[0], "identity") {
		return false, false
	}
	cts := h.Values("Content-Type")
	switch len(cts) {
	case 0:
		return false, true
	case 1:
	default:
		return false, false
	}
	mt, _, err := mime.ParseMediaType(cts[0])
	switch {
	case err != nil:
		return false, false
	case mt == "application/x-www-form-urlencoded":
		return true, true
	}
	return false, mt == "application/json"
}

// payloadOf returns the JSON of a delivery, which a webhook configured with
// content type application/x-www-form-urlencoded sends (form set) as the
// form field "payload". The signature covers the body as sent.
func payloadOf(form bool, body []byte) ([]byte, error) {
	if !form {
		return body, nil
	}
	// GitHub sends the one field once: a second payload is no delivery of
	// GitHub's, whichever copy a reader would take.
	values, err := httpapi.ParseForm(string(body), "form", "form field")
	if err != nil {
		return nil, fmt.Errorf("%w: %s", errMalformed, bot.ErrorMessage(err))
	}
	return []byte(values.Get("payload")), nil
}

// lookupError is a failed question to GitHub during intake: answered 502 so
// the delivery is not acknowledged.
type lookupError struct{ err error }

func (e *lookupError) Error() string { return e.err.Error() }
func (e *lookupError) Unwrap() error { return e.err }

func (h *webhook) serveDelivery(w http.ResponseWriter, r *http.Request, d *delivery) {
	ctx := r.Context()
	res, err := h.handle(ctx, d)
	// The delivery's attributes go with each line rather than into a
	// logger of its own made for every delivery: an accepted one logs
	// nothing here.
	kind, delivery := slog.String("kind", d.ev.Kind), slog.String("delivery", d.ev.DeliveryID)
	log := h.opts.Logger
	if err != nil {
		var le *lookupError
		if errors.As(err, &le) {
			log.LogAttrs(ctx, slog.LevelWarn, "github delivery not accepted: lookup failed", kind, delivery, slog.String("error", err.Error()))
			httpapi.JSON(w, http.StatusBadGateway, answer{Status: "error", Error: "GitHub API lookup failed; redeliver later"})
			return
		}
		log.LogAttrs(ctx, slog.LevelError, "github delivery not accepted", kind, delivery, slog.String("error", err.Error()))
		httpapi.JSON(w, http.StatusInternalServerError, answer{Status: "error", Error: "internal error"})
		return
	}
	switch {
	case res.Duplicate && res.Replayed:
		// The intake logs it: someone sent a captured delivery again.
		httpapi.JSON(w, http.StatusOK, answer{Status: "duplicate", Reason: ReasonReplayed})
	case res.Duplicate:
		log.LogAttrs(ctx, slog.LevelDebug, "github redelivery", kind, delivery)
		httpapi.JSON(w, http.StatusOK, answer{Status: "duplicate"})
	case res.WorkItem != nil:
		httpapi.JSON(w, http.StatusAccepted, answer{Status: "accepted", WorkItem: res.WorkItem.ID})
	default:
		reason := ""
		if res.Ingress != nil {
			reason = res.Ingress.Reason
		}
		httpapi.JSON(w, http.StatusAccepted, answer{Status: "ignored", Reason: reason})
	}
}

// handle records what an installation event changes, fetches a pull
// request's changed files when rules need them, and hands the event to the
// intake, whose decision applies the gate.
func (h *webhook) handle(ctx context.Context, d *delivery) (bot.IngestResult, error) {
	ev := d.ev
	if then, ok, err := h.redelivered(ctx, ev); err != nil || ok {
		return then, err
	}
	if ch := d.installation; ch != nil && h.opts.Installations != nil {
		seen, err := h.opts.Intake.Seen(ctx, ev)
		if err != nil {
			return bot.IngestResult{}, err
		}
		if !seen.Duplicate {
			if err := ch.record(ctx, h.opts.Installations); err != nil {
				return bot.IngestResult{}, err
			}
			if ch.deleted && h.opts.Client != nil {
				h.opts.Client.markLost(ch.account)
			}
		}
	}
	ev.FillFromText()
	if d.pr && h.opts.NeedsPaths != nil && h.opts.NeedsPaths() && h.opts.Gate.Screen(ev) == nil {
		ctx, cancel := context.WithTimeout(ctx, h.opts.LookupTimeout)
		paths, err := h.changedPaths(ctx, ev)
		cancel()
		if err != nil {
			return bot.IngestResult{}, &lookupError{err}
		}
		ev.Paths = paths
	}
	res, err := h.opts.Intake.Ingest(ctx, ev)
	if err != nil || res.Duplicate || res.Ingress == nil || res.Ingress.Reason != bot.IgnoreApproval {
		// A redelivered approval comment was decided (or refused) when it
		// was first delivered.
		return res, err
	}
	return res, h.decide(ctx, ev)
}

// redelivered returns what ev's delivery id made when it was delivered
// before: GitHub's redelivery of it, which is the same event whenever it
// comes. The delivery index outlives the dedup window, so a delivery sent
// again days later, after the intake forgot its keys, is still answered
// as a redelivery rather than acted on twice. Without Deliveries only the
// intake's window tells.
func (h *webhook) redelivered(ctx context.Context, ev *bot.Event) (bot.IngestResult, bool, error) {
	if h.opts.Deliveries == nil || ev.DeliveryID == "" {
		return bot.IngestResult{}, false, nil
	}
	then, err := h.opts.Deliveries.FindDelivery(ctx, bot.SourceGitHub, ev.DeliveryID)
	switch {
	case err == nil:
		then.Duplicate = true
		return then, true, nil
	case bot.ErrorCode(err) != bot.ENOTFOUND:
		return bot.IngestResult{}, false, fmt.Errorf("look up github delivery %q: %w", ev.DeliveryID, err)
	}
	return bot.IngestResult{}, false, nil
}

// addedMentions returns the mentions of text that previous did not have, in
// order. A nil previous means the body did not change.
func addedMentions(previous *string, text string) []string {
	if previous == nil {
		return nil
	}
	had := map[string]bool{}
	for _, m := range bot.Markdown.Mentions(*previous) {
		had[strings.ToLower(m)] = true
	}
	var out []string
	for _, m := range bot.Markdown.Mentions(text) {
		if k := strings.ToLower(m); !had[k] {
			had[k] = true
			out = append(out, m)
		}
	}
	return out
}

// changedPaths lists the files a pull request changes, with the old names of
// renamed files, as path rules expect.
func (h *webhook) changedPaths(ctx context.Context, ev *bot.Event) ([]string, error) {
	c, err := clientFor(ctx, h.opts.Client, ev)
	if err != nil {
		return nil, err
	}
	var paths []string
	opts := &gh.ListOptions{PerPage: 100}
	for range maxPathPages {
		files, resp, err := c.PullRequests.ListFiles(ctx, ev.Thread.Owner, ev.Thread.Repo, ev.Number, opts)
		if err != nil {
			return nil, fmt.Errorf("files of %s: %w", ev.Thread, closeTokenError(err))
		}
		for _, f := range files {
			paths = append(paths, f.GetFilename())
			if prev := f.GetPreviousFilename(); prev != "" {
				paths = append(paths, prev)
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return paths, nil
}
