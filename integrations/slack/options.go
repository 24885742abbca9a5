package slack

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
)

// Transport modes.
const (
	ModeSocket = "socket" // Socket Mode: an outbound websocket, no public URL needed
	ModeHTTP   = "http"   // Events API and slash commands POSTed to Handler
)

// DefaultAPIURL is Slack's Web API.
const DefaultAPIURL = "https://slack.com/api/"

// DefaultChannelInterval paces posts and edits in one channel: Slack allows
// about one message a second per channel.
const DefaultChannelInterval = time.Second

// Intake decides what an event makes and persists it before Slack is
// acknowledged, applying the adapter's Gate; *bot.Intake implements it.
type Intake interface {
	Ingest(ctx context.Context, ev *bot.Event) (bot.IngestResult, error)
}

// WorkItemLister reads work items: whether a thread is one the bot works in,
// and the answers of /switchyard status and runs. bot.WorkItemStore
// implements it.
type WorkItemLister interface {
	ListWorkItems(ctx context.Context, f bot.WorkItemFilter) ([]bot.WorkItem, string, error)
}

// Canceller cancels a work item for /switchyard cancel; by is the Slack user
// who asked.
type Canceller interface {
	CancelWorkItem(ctx context.Context, id, by string) error
}

// Resetter resets a thread for /switchyard reset: what it owns is
// cancelled, stopped or archived, each with a receipt naming by (the Slack
// user who asked), and nothing of it is carried over.
type Resetter interface {
	ResetThread(ctx context.Context, sessionKey, by string) ([]bot.Receipt, error)
}

// Outbox keeps the messages that open commands' threads; bot.OutboxStore
// implements it.
type Outbox interface {
	EnqueueNew(ctx context.Context, msg bot.OutboxMessage) (bot.OutboxMessage, bool, error)
}

// NameLister lists names for /switchyard agents and skills.
type NameLister func(ctx context.Context) ([]string, error)

// Options configure an Adapter. BotToken is always needed; AppToken in
// socket mode; SigningSecret in HTTP mode (without it Handler refuses every
// request).
type Options struct {
	// Mode is ModeSocket (the default) or ModeHTTP.
	Mode string
	// BotToken is the bot user OAuth token (xoxb-…).
	BotToken bot.Secret
	// AppToken is the app-level token (xapp-…) with connections:write, for
	// Socket Mode.
	AppToken bot.Secret
	// SigningSecret verifies HTTP requests (v0 signatures).
	SigningSecret bot.Secret
	// APIURL points the Web API client elsewhere (Enterprise Grid proxies,
	// tests); DefaultAPIURL when empty. It must end with "/".
	APIURL string

	// AllowedChannels and AllowedUsers are Slack ids (C…, U…); empty allows
	// all. Direct messages are governed by AllowedUsers alone.
	AllowedChannels []string
	AllowedUsers    []string

	// Intake receives every event addressed to the bot. Required. It must
	// apply Gate to Slack events (bot.IntakeOptions.Gates).
	Intake Intake
	// Outbox keeps the message that opens a command's thread, which the
	// deliverer posts through this adapter's Sink; Wake (may be nil) tells
	// the deliverer there is one. Without an Outbox, commands other than
	// /switchyard are answered that they cannot run here.
	Outbox Outbox
	Wake   func()
	// WorkItems finds the threads the bot works in and answers status and
	// runs. Without it only mentions and direct messages reach the bot.
	WorkItems WorkItemLister
	// Canceller and Resetter back /switchyard cancel and reset; nil answers
	// that the daemon does not support them.
	Canceller Canceller
	Resetter  Resetter
	// Agents and Skills list names for /switchyard agents and skills.
	Agents NameLister
	Skills NameLister
	// Approvals receives Approve / Deny clicks; nil ignores them.
	Approvals ApprovalDecider
	// UserGroups are the user group ids (S…) access rules name: a run
	// started by a Slack member looks up which of them the member is in
	// (see ResolveRequester). Empty asks Slack nothing.
	UserGroups []string

	// ChannelInterval paces messages per channel; DefaultChannelInterval
	// when zero.
	ChannelInterval time.Duration
	// HTTPClient is used for the Web API; http.DefaultClient's settings with
	// a 30 s timeout when nil.
	HTTPClient *http.Client
	// ReconnectDelay is the first wait before Slack is tried again after a
	// failure (default 1s); it doubles, with jitter, up to
	// MaxReconnectDelay (default 2m).
	ReconnectDelay    time.Duration
	MaxReconnectDelay time.Duration
	// PingInterval is how long Socket Mode waits for Slack's websocket ping
	// before it reconnects; slack-go's default (30 s) when zero.
	PingInterval time.Duration
	// Redactor masks secrets in what the agent tools post and return and in
	// the work items /switchyard lists; the tools mask the adapter's own
	// tokens in any case.
	Redactor *bot.Redactor
	// Bodies bounds the memory the bodies of HTTP requests being read hold
	// together, before their signatures are checked; the daemon shares one
	// with GitHub's webhook. Nil: one of httpapi.DefaultBodiesLimit of its
	// own.
	Bodies *httpapi.Bodies
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

func (o *Options) validate() error {
	switch o.Mode {
	case "":
		o.Mode = ModeSocket
	case ModeSocket, ModeHTTP:
	default:
		return fmt.Errorf("slack: mode %q: want %q or %q", o.Mode, ModeSocket, ModeHTTP)
	}
	if !o.BotToken.IsSet() {
		return fmt.Errorf("slack: bot_token is required")
	}
	if o.Mode == ModeSocket && !o.AppToken.IsSet() {
		return fmt.Errorf("slack: app_token is required in socket mode")
	}
	if o.Mode == ModeHTTP && !o.SigningSecret.IsSet() {
		return fmt.Errorf("slack: signing_secret is required in http mode")
	}
	if o.Intake == nil {
		return fmt.Errorf("slack: an intake is required")
	}
	if o.APIURL == "" {
		o.APIURL = DefaultAPIURL
	}
	if !strings.HasSuffix(o.APIURL, "/") {
		o.APIURL += "/"
	}
	if o.ChannelInterval <= 0 {
		o.ChannelInterval = DefaultChannelInterval
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Bodies == nil {
		o.Bodies = httpapi.NewBodies(0)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ReconnectDelay <= 0 {
		o.ReconnectDelay = time.Second
	}
	if o.MaxReconnectDelay < o.ReconnectDelay {
		o.MaxReconnectDelay = max(2*time.Minute, o.ReconnectDelay)
	}
	if o.Wake == nil {
		o.Wake = func() {}
	}
	return nil
}
