package slack

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"
)

// identity is who the bot is in the workspace, learned from auth.test.
type identity struct {
	UserID string // the bot user: <@UserID> mentions it, and its own messages carry it
	BotID  string // B…: set on messages the bot posts
	TeamID string
	Name   string // the bot user's name, as people mention it
}

// Adapter is the Slack integration: the inbound core with its two
// transports, and the Sink. Create it with New, serve Handler in HTTP mode,
// and call Run once for its lifetime in either mode.
type Adapter struct {
	opts     Options
	api      *slack.Client
	sink     *Sink
	gate     *Gate
	self     atomic.Pointer[identity]
	refusals chan refusal
	health   *health
	groups   groupMembers
}

// refusal is a polite "no", posted as an ephemeral message to someone
// whose approval click changed nothing, after the attempt was recorded.
type refusal struct {
	channel, user, threadTS string
	text                    string
}

// errNotReady answers requests that arrive before auth.test told the
// adapter who the bot is; Slack retries them.
var errNotReady = errors.New("slack adapter is not connected yet")

// New validates opts and builds the Web API client. It does not touch the
// network; Run does.
func New(opts Options) (*Adapter, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	apiOpts := []slack.Option{
		slack.OptionAPIURL(opts.APIURL),
		slack.OptionHTTPClient(opts.HTTPClient),
		slack.OptionLog(slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug)),
	}
	if opts.AppToken.IsSet() {
		apiOpts = append(apiOpts, slack.OptionAppLevelToken(opts.AppToken.Reveal()))
	}
	api := slack.New(opts.BotToken.Reveal(), apiOpts...)
	a := &Adapter{
		opts:     opts,
		api:      api,
		gate:     NewGate(opts.AllowedChannels, opts.AllowedUsers),
		refusals: make(chan refusal, 64),
		health:   newHealth(opts.Logger),
	}
	a.groups.names = slices.Clone(opts.UserGroups)
	a.sink = NewSink(api, SinkOptions{
		ChannelInterval: opts.ChannelInterval, BotID: a.botID, Opened: a.opened, NotOpened: a.notOpened, Logger: opts.Logger,
	})
	return a, nil
}

// Client is the Web API client, for agent tools.
func (a *Adapter) Client() *slack.Client { return a.api }

// Gate is the adapter's admission rules, for the intake to apply to Slack
// events (bot.IntakeOptions.Gates).
func (a *Adapter) Gate() *Gate { return a.gate }

// Sink delivers outbox messages of Slack threads; it shares the adapter's
// client and per-channel pacing.
func (a *Adapter) Sink() *Sink { return a.sink }

// botID is the bot's id (B…) once known, else "".
func (a *Adapter) botID() string {
	if id := a.self.Load(); id != nil {
		return id.BotID
	}
	return ""
}

// BotUserID is the bot's user id once Run has called auth.test, else "".
func (a *Adapter) BotUserID() string {
	if id := a.self.Load(); id != nil {
		return id.UserID
	}
	return ""
}

// Health reports whether Slack's events reach the daemon now and, when they
// do not, why: in socket mode, whether the Socket Mode connection is up; in
// HTTP mode, whether the bot knows who it is (auth.test answered), without
// which it cannot tell what is addressed to it.
func (a *Adapter) Health() (up bool, reason string) { return a.health.get() }

// Run learns the bot's identity with auth.test, then, in socket mode, holds
// the Socket Mode connection until ctx is cancelled; in HTTP mode it serves
// refusals until then while Handler takes the requests. It never gives up:
// every failure, a refused token included, is retried after a capped,
// jittered backoff, and Health says Slack is down meanwhile. It returns nil
// once ctx is cancelled.
func (a *Adapter) Run(ctx context.Context) error {
	if !a.identify(ctx) {
		return nil
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { a.sendRefusals(runCtx) })
	if a.opts.Mode == ModeSocket {
		_ = a.runSocket(runCtx)
	} else {
		a.health.setUp(slog.String("mode", ModeHTTP))
		<-runCtx.Done()
	}
	cancel()
	wg.Wait()
	return nil
}

// identify calls auth.test until it answers, and reports whether it did
// before ctx ended. A refused token is retried like the network: a token
// that was revoked and restored, or a Slack that answers invalid_auth while
// it is in trouble, must not switch Slack off for good.
func (a *Adapter) identify(ctx context.Context) bool {
	b := newBackoff(a.opts.ReconnectDelay, a.opts.MaxReconnectDelay)
	for {
		res, err := a.api.AuthTestContext(ctx)
		if err == nil {
			id := &identity{UserID: res.UserID, BotID: res.BotID, TeamID: res.TeamID, Name: res.User}
			a.self.Store(id)
			a.opts.Logger.Info("slack bot identified", slog.String("team", res.Team), slog.String("team_id", res.TeamID),
				slog.String("bot_user", res.UserID), slog.String("mode", a.opts.Mode))
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		reason := "auth.test failed: " + err.Error()
		var se slack.SlackErrorResponse
		if errors.As(err, &se) {
			reason = "the bot token was refused (" + se.Err + ")"
		}
		a.health.setDown(reason)
		t := time.NewTimer(b.next())
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// refuse queues a refusal; it never blocks the acknowledgement of an event.
func (a *Adapter) refuse(r refusal) {
	select {
	case a.refusals <- r:
	default:
		a.opts.Logger.Warn("slack refusal dropped: queue full", slog.String("channel", r.channel))
	}
}

// refusalText tells someone outside the allow lists why nothing happens.
const refusalText = "Sorry, I only take requests from the people and channels my administrators allowed. " +
	"Ask them to add you if you need me here."

func (a *Adapter) sendRefusals(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-a.refusals:
			opts := []slack.MsgOption{slack.MsgOptionText(escape(r.text), false)}
			if r.threadTS != "" {
				opts = append(opts, slack.MsgOptionTS(r.threadTS))
			}
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if _, err := a.api.PostEphemeralContext(pctx, r.channel, r.user, opts...); err != nil {
				a.opts.Logger.Warn("slack refusal not delivered", slog.String("channel", r.channel), slog.Any("err", err))
			}
			cancel()
		}
	}
}
