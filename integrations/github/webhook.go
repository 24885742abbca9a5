package github

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
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

// Intake persists normalised events; *bot.Intake implements it. Both return
// only after the event (or, for a redelivery, nothing) is stored.
type Intake interface {
	Ingest(ctx context.Context, ev *bot.Event) (bot.IngestResult, error)
	Ignore(ctx context.Context, ev *bot.Event, reason bot.IngressReason) (bot.IngestResult, error)
}

// Outbox queues egress messages; bot.OutboxStore has it.
type Outbox interface {
	Enqueue(ctx context.Context, msg bot.OutboxMessage) (bot.OutboxMessage, error)
}

// WebhookOptions configure the webhook handler.
type WebhookOptions struct {
	// Secret is github.webhook_secret. Required: without it every delivery
	// is refused.
	Secret bot.Secret
	// Intake persists events. Required.
	Intake Intake
	// Client asks GitHub for commenters' permissions and pull requests'
	// changed files. Required for mentions and commands to make work items:
	// without it they cannot be authorised and are answered 502.
	Client *Client
	// Installations records installation events; nil: they are only kept
	// as ingress records.
	Installations InstallationStore
	// Outbox receives the short reply to a refused mention or command; nil:
	// refusals are silent.
	Outbox Outbox
	// Router, when set, tells a mention of an agent or a command from text
	// that only mentions people, so only the former needs a permission
	// check. Without it every mention and command is checked.
	Router bot.Decider
	// AppSlug is the App's slug: events by "<slug>[bot]" are always ignored,
	// so Switchyard never answers itself.
	AppSlug string
	// AllowBots lists bot logins ("dependabot[bot]" or "dependabot") whose
	// events are treated like people's; they skip the permission check.
	AllowBots []string
	// MinPermission a person needs on the repository for a mention or a
	// command to make a work item; DefaultMinPermission when empty. An
	// invalid value is logged and taken as admin, the strictest (validate
	// config with ParsePermission).
	MinPermission Permission
	// PermissionTTL is how long a permission answer is reused;
	// DefaultPermissionTTL when zero.
	PermissionTTL time.Duration
	// LookupTimeout bounds the permission and changed-files lookups of one
	// delivery; DefaultLookupTimeout when zero.
	LookupTimeout time.Duration
	// NeedsPaths reports whether any rule matches on changed files; when it
	// does, pull request events carry their changed paths. Nil: never.
	NeedsPaths func() bool
	Logger     *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

type webhook struct {
	opts      WebhookOptions
	secret    []byte
	allowBots map[string]bool
	perms     *permissionCache
}

// NewWebhookHandler returns the handler of POST /webhooks/github.
//
// It answers 401 to a missing or wrong X-Hub-Signature-256 (nothing is read
// beyond the body), 413 to bodies over MaxWebhookBody, 400 to deliveries
// without X-GitHub-Event or X-GitHub-Delivery or with a payload that cannot be
// read, 200 to ping and to redeliveries, 202 once the event is persisted as a
// work item or an ingress record, 502 when GitHub could not be asked for a
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
	if opts.PermissionTTL <= 0 {
		opts.PermissionTTL = DefaultPermissionTTL
	}
	if opts.LookupTimeout <= 0 {
		opts.LookupTimeout = DefaultLookupTimeout
	}
	if opts.MinPermission == "" {
		opts.MinPermission = DefaultMinPermission
	}
	if p, err := ParsePermission(string(opts.MinPermission)); err != nil {
		opts.Logger.Error("github min_permission is invalid; only admins may ask for work",
			slog.String("min_permission", string(opts.MinPermission)))
		opts.MinPermission = PermissionAdmin
	} else {
		opts.MinPermission = p
	}
	h := &webhook{
		opts:      opts,
		secret:    []byte(opts.Secret.Reveal()),
		allowBots: map[string]bool{},
		perms:     newPermissionCache(opts.PermissionTTL, defaultPermissionSize),
	}
	for _, b := range opts.AllowBots {
		b = strings.ToLower(b)
		h.allowBots[b] = true
		h.allowBots[strings.TrimSuffix(b, "[bot]")+"[bot]"] = true
	}
	return h
}

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
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWebhookBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			httpapi.JSON(w, http.StatusRequestEntityTooLarge, answer{Status: "error", Error: "payload over 25 MiB"})
			return
		}
		httpapi.JSON(w, http.StatusBadRequest, answer{Status: "error", Error: "could not read the body"})
		return
	}
	if !h.verify(r.Header.Get("X-Hub-Signature-256"), body) {
		httpapi.JSON(w, http.StatusUnauthorized, answer{Status: "error", Error: "missing or wrong X-Hub-Signature-256"})
		return
	}
	event, deliveryID := r.Header.Get("X-GitHub-Event"), r.Header.Get("X-GitHub-Delivery")
	if !validEventName(event) || deliveryID == "" || len(deliveryID) > 200 {
		httpapi.JSON(w, http.StatusBadRequest, answer{Status: "error", Error: "X-GitHub-Event and X-GitHub-Delivery are required"})
		return
	}
	if event == "ping" {
		httpapi.JSON(w, http.StatusOK, answer{Status: "pong"})
		return
	}
	payload, err := payloadOf(r.Header.Get("Content-Type"), body)
	if err == nil {
		var d *delivery
		if d, err = normalize(event, deliveryID, payload); err == nil {
			h.serveDelivery(w, r, d)
			return
		}
	}
	h.opts.Logger.LogAttrs(r.Context(), slog.LevelWarn, "github delivery unreadable",
		slog.String("event", event), slog.String("delivery", deliveryID), slog.String("error", err.Error()))
	httpapi.JSON(w, http.StatusBadRequest, answer{Status: "error", Error: "malformed payload"})
}

// verify checks the HMAC-SHA256 of body under the webhook secret, in
// constant time. An unset secret verifies nothing.
func (h *webhook) verify(header string, body []byte) bool {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok || len(h.secret) == 0 {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, h.secret)
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
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

// payloadOf returns the JSON of a delivery, which a webhook configured with
// content type application/x-www-form-urlencoded sends as the form field
// "payload". The signature covers the body as sent.
func payloadOf(contentType string, body []byte) ([]byte, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt != "application/x-www-form-urlencoded" {
		return body, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("%w: form body: %v", errMalformed, err)
	}
	return []byte(form.Get("payload")), nil
}

// lookupError is a failed question to GitHub during intake: answered 502 so
// the delivery is not acknowledged.
type lookupError struct{ err error }

func (e *lookupError) Error() string { return e.err.Error() }
func (e *lookupError) Unwrap() error { return e.err }

func (h *webhook) serveDelivery(w http.ResponseWriter, r *http.Request, d *delivery) {
	ctx := r.Context()
	res, err := h.handle(ctx, d)
	log := h.opts.Logger.With(slog.String("kind", d.ev.Kind), slog.String("delivery", d.ev.DeliveryID))
	if err != nil {
		var le *lookupError
		if errors.As(err, &le) {
			log.LogAttrs(ctx, slog.LevelWarn, "github delivery not accepted: lookup failed", slog.String("error", err.Error()))
			httpapi.JSON(w, http.StatusBadGateway, answer{Status: "error", Error: "GitHub API lookup failed; redeliver later"})
			return
		}
		log.LogAttrs(ctx, slog.LevelError, "github delivery not accepted", slog.String("error", err.Error()))
		httpapi.JSON(w, http.StatusInternalServerError, answer{Status: "error", Error: "internal error"})
		return
	}
	switch {
	case res.Duplicate:
		log.LogAttrs(ctx, slog.LevelDebug, "github redelivery")
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

// handle applies the trigger rules and hands the event to the intake. The
// order puts the checks that cost nothing before the ones that ask GitHub.
func (h *webhook) handle(ctx context.Context, d *delivery) (bot.IngestResult, error) {
	ev := d.ev
	if ch := d.installation; ch != nil {
		if h.opts.Installations != nil {
			if err := ch.record(ctx, h.opts.Installations); err != nil {
				return bot.IngestResult{}, err
			}
		}
		return h.opts.Intake.Ignore(ctx, ev, bot.IngressReason{
			Code: bot.IgnoreUnsupported, Detail: "installation change recorded; it makes no work item",
		})
	}
	if d.ignore != nil {
		return h.opts.Intake.Ignore(ctx, ev, *d.ignore)
	}
	if detail := h.botDetail(ev); detail != "" {
		return h.opts.Intake.Ignore(ctx, ev, bot.IngressReason{Code: bot.IgnoreBot, Detail: detail})
	}
	if d.edited {
		added := addedMentions(d.previous, ev.Text)
		switch {
		case len(added) > 0:
			ev.Mentions = added
		case d.comment:
			return h.opts.Intake.Ignore(ctx, ev, bot.IngressReason{Code: bot.IgnoreEdited, Detail: "the edit adds no mention"})
		default:
			// An issue edit that adds no mention may still match a rule; the
			// mentions already answered must not trigger again.
			ev.Text = ""
		}
	}
	ev.FillFromText()
	allowed, perm, err := h.lookups(ctx, d)
	if err != nil {
		return bot.IngestResult{}, &lookupError{err}
	}
	if !allowed {
		return h.refuse(ctx, ev, perm)
	}
	return h.opts.Intake.Ingest(ctx, ev)
}

// lookups asks GitHub what the trigger rules need, within LookupTimeout: the
// actor's permission when they ask an agent by name (allowed is false, with
// the permission they have, when it is not enough), and the changed files of
// a pull request when rules need them.
func (h *webhook) lookups(ctx context.Context, d *delivery) (allowed bool, perm Permission, err error) {
	ev := d.ev
	ctx, cancel := context.WithTimeout(ctx, h.opts.LookupTimeout)
	defer cancel()
	if h.needsPermission(ev) {
		if perm, err = h.permission(ctx, ev); err != nil {
			return false, "", err
		}
		// The permission was looked up anyway: the run's ceiling needs it.
		ev.Requester.Permission = string(perm)
		if !perm.AtLeast(h.opts.MinPermission) {
			return false, perm, nil
		}
	}
	if d.pr && h.opts.NeedsPaths != nil && h.opts.NeedsPaths() {
		paths, err := h.changedPaths(ctx, ev)
		if err != nil {
			return false, "", err
		}
		ev.Paths = paths
	}
	return true, perm, nil
}

// botDetail says why ev's actor is a bot Switchyard does not listen to, or "".
func (h *webhook) botDetail(ev *bot.Event) string {
	login := strings.ToLower(ev.Actor)
	if h.opts.AppSlug != "" && login == strings.ToLower(h.opts.AppSlug)+"[bot]" {
		return "sent by Switchyard itself"
	}
	if ev.ActorIsBot && !h.allowBots[login] {
		return "sent by bot " + ev.Actor + ", not in github.allow_bots"
	}
	return ""
}

// addedMentions returns the mentions of text that previous did not have, in
// order. A nil previous means the body did not change.
func addedMentions(previous *string, text string) []string {
	if previous == nil {
		return nil
	}
	had := map[string]bool{}
	for _, m := range bot.ParseMentions(*previous) {
		had[strings.ToLower(m)] = true
	}
	var out []string
	for _, m := range bot.ParseMentions(text) {
		if k := strings.ToLower(m); !had[k] {
			had[k] = true
			out = append(out, m)
		}
	}
	return out
}

// needsPermission reports whether ev asks an agent for work by name: a
// mention or a command. Allowed bots are trusted by configuration.
func (h *webhook) needsPermission(ev *bot.Event) bool {
	if ev.ActorIsBot {
		return false
	}
	if h.opts.Router != nil {
		switch h.opts.Router.Route(ev).Kind {
		case bot.RouteMention, bot.RouteCommand:
			return true
		}
		return false
	}
	return len(ev.Mentions) > 0 || ev.Command != ""
}

func (h *webhook) permission(ctx context.Context, ev *bot.Event) (Permission, error) {
	key := permissionKey(ev.Repo, ev.Actor)
	if p, ok := h.perms.get(key, h.opts.Now()); ok {
		return p, nil
	}
	c, err := h.installationClient(ctx, ev)
	if err != nil {
		return "", err
	}
	p, err := lookupPermission(ctx, c, ev.Thread.Owner, ev.Thread.Repo, ev.Actor)
	if err != nil {
		return "", closeTokenError(err)
	}
	h.perms.put(key, p, h.opts.Now())
	return p, nil
}

// installationClient returns the client of ev's installation; events from a
// repository webhook carry none, so the repository is looked up.
func (h *webhook) installationClient(ctx context.Context, ev *bot.Event) (*gh.Client, error) {
	if h.opts.Client == nil {
		return nil, errors.New("no GitHub App is configured (github.app_id)")
	}
	if ev.InstallationID > 0 {
		return h.opts.Client.Installation(ev.InstallationID)
	}
	c, _, err := h.opts.Client.ForRepo(ctx, ev.Thread.Owner, ev.Thread.Repo)
	return c, err
}

// changedPaths lists the files a pull request changes, with the old names of
// renamed files, as path rules expect.
func (h *webhook) changedPaths(ctx context.Context, ev *bot.Event) ([]string, error) {
	c, err := h.installationClient(ctx, ev)
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

// refuse records ev as unauthorised and queues a short reply in its thread.
// A redelivery of a refused event queues the reply again under the same key,
// which edits nothing visible, so a reply lost to a crash after the record
// was written still goes out.
func (h *webhook) refuse(ctx context.Context, ev *bot.Event, perm Permission) (bot.IngestResult, error) {
	res, err := h.opts.Intake.Ignore(ctx, ev, bot.IngressReason{
		Code:   bot.IgnoreUnauthorized,
		Detail: fmt.Sprintf("%s has %s permission on %s, %s is required", ev.Actor, perm, ev.Repo, h.opts.MinPermission),
	})
	if err != nil || h.opts.Outbox == nil || res.Ingress == nil || res.Ingress.Reason != bot.IgnoreUnauthorized {
		return res, err
	}
	_, err = h.opts.Outbox.Enqueue(ctx, bot.OutboxMessage{
		Key:    "github/" + ev.DeliveryID + "/refusal",
		Thread: ev.Thread,
		Kind:   bot.OutboxReply,
		Text: fmt.Sprintf("Sorry @%s, only people with %s access to %s can ask Switchyard for work.",
			ev.Actor, h.opts.MinPermission, ev.Repo),
	})
	if err != nil {
		return bot.IngestResult{}, fmt.Errorf("queue refusal of %s: %w", ev.DeliveryID, err)
	}
	return res, nil
}
