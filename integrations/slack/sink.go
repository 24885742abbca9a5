package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/switchyard/switchyard/bot"
)

var _ bot.Sink = (*Sink)(nil)

// SinkOptions configure a Sink.
type SinkOptions struct {
	// ChannelInterval paces messages per channel; DefaultChannelInterval
	// when zero.
	ChannelInterval time.Duration
	Logger          *slog.Logger
}

// Sink delivers outbox messages of Slack threads: status messages (posted
// once, then edited with chat.update), replies (split when long) and
// reactions.
type Sink struct {
	api  *slack.Client
	pace *pacer
	log  *slog.Logger

	mu sync.Mutex
	// partial remembers the parts of a long reply already posted when a
	// later part failed, so the outbox's retry posts only the rest.
	partial map[string]partialReply
}

type partialReply struct {
	version int
	ts      []string
}

// NewSink returns a Sink posting through api.
func NewSink(api *slack.Client, opts SinkOptions) *Sink {
	if opts.ChannelInterval <= 0 {
		opts.ChannelInterval = DefaultChannelInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sink{api: api, pace: newPacer(opts.ChannelInterval), log: opts.Logger, partial: map[string]partialReply{}}
}

// outboxMetadata tags every post with its outbox key, so a message can be
// traced back to the outbox record that made it.
const outboxMetadata = "switchyard_outbox"

// Deliver implements bot.Sink.
func (s *Sink) Deliver(ctx context.Context, msg bot.OutboxMessage) (string, error) {
	th := msg.Thread
	if th.Source != bot.SourceSlack || th.Channel == "" {
		return "", &bot.DeliveryError{Err: fmt.Errorf("slack sink: %s is not a Slack thread", th.Key()), Permanent: true}
	}
	switch msg.Kind {
	case bot.OutboxStatus:
		return s.deliverStatus(ctx, msg)
	case bot.OutboxReply:
		if msg.Approval != nil {
			return s.deliverApproval(ctx, msg)
		}
		return s.deliverReply(ctx, msg)
	case bot.OutboxReaction:
		return s.deliverReaction(ctx, msg)
	}
	return "", &bot.DeliveryError{Err: fmt.Errorf("slack sink: unknown outbox kind %q", msg.Kind), Permanent: true}
}

func (s *Sink) deliverStatus(ctx context.Context, msg bot.OutboxMessage) (string, error) {
	opts := []slack.MsgOption{
		slack.MsgOptionText(truncateEscaped(escape(statusFallback(msg)), maxReplyRunes), false),
		slack.MsgOptionBlocks(statusBlocks(msg)...),
	}
	if msg.RemoteID != "" {
		return msg.RemoteID, s.update(ctx, msg.Thread.Channel, msg.RemoteID, opts)
	}
	return s.post(ctx, msg, opts)
}

func (s *Sink) deliverReply(ctx context.Context, msg bot.OutboxMessage) (string, error) {
	if msg.Text == "" {
		return "", &bot.DeliveryError{Err: errors.New("slack sink: empty reply"), Permanent: true}
	}
	parts := splitMessage(msg.Text, maxReplyRunes)
	text := func(i int) []slack.MsgOption {
		return []slack.MsgOption{slack.MsgOptionText(escape(parts[i]), false)}
	}

	s.mu.Lock()
	p := s.partial[msg.Key]
	if p.version != msg.Version {
		p = partialReply{version: msg.Version}
	}
	s.mu.Unlock()
	save := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.partial) >= 1024 {
			clear(s.partial) // a bound, not a cache: losing it only risks a repeated part
		}
		s.partial[msg.Key] = p
	}

	if len(p.ts) == 0 && msg.RemoteID != "" {
		// A new version of a delivered reply: its first message is edited,
		// any further parts are posted after it.
		if err := s.update(ctx, msg.Thread.Channel, msg.RemoteID, text(0)); err != nil {
			return "", err
		}
		p.ts = []string{msg.RemoteID}
	}
	for i := len(p.ts); i < len(parts); i++ {
		ts, err := s.post(ctx, msg, text(i))
		if err != nil {
			if len(p.ts) > 0 {
				save()
			}
			return "", err
		}
		p.ts = append(p.ts, ts)
	}
	s.mu.Lock()
	delete(s.partial, msg.Key)
	s.mu.Unlock()
	return p.ts[0], nil
}

func (s *Sink) deliverReaction(ctx context.Context, msg bot.OutboxMessage) (string, error) {
	if msg.RemoteID != "" {
		return msg.RemoteID, nil
	}
	if msg.Target == "" || msg.Reaction == "" {
		return "", &bot.DeliveryError{Err: errors.New("slack sink: a reaction needs a target ts and a name"), Permanent: true}
	}
	err := s.api.AddReactionContext(ctx, msg.Reaction, slack.ItemRef{Channel: msg.Thread.Channel, Timestamp: msg.Target})
	var se slack.SlackErrorResponse
	if errors.As(err, &se) && se.Err == "already_reacted" {
		err = nil
	}
	if err != nil {
		return "", s.classify(msg.Thread.Channel, "reactions.add", err)
	}
	return msg.Target + "/" + msg.Reaction, nil
}

// post posts a message in msg's thread and returns its ts.
func (s *Sink) post(ctx context.Context, msg bot.OutboxMessage, opts []slack.MsgOption) (string, error) {
	ch := msg.Thread.Channel
	if err := s.pace.wait(ctx, ch); err != nil {
		return "", err
	}
	opts = append(opts,
		slack.MsgOptionTS(msg.Thread.ThreadTS),
		slack.MsgOptionMetadata(slack.SlackMetadata{EventType: outboxMetadata, EventPayload: map[string]any{"key": msg.Key}}),
	)
	_, ts, err := s.api.PostMessageContext(ctx, ch, opts...)
	if err != nil {
		return "", s.classify(ch, "chat.postMessage", err)
	}
	return ts, nil
}

func (s *Sink) update(ctx context.Context, channel, ts string, opts []slack.MsgOption) error {
	if err := s.pace.wait(ctx, channel); err != nil {
		return err
	}
	if _, _, _, err := s.api.UpdateMessageContext(ctx, channel, ts, opts...); err != nil {
		return s.classify(channel, "chat.update", err)
	}
	return nil
}

// permanentErrors are Slack error codes a retry cannot fix.
var permanentErrors = map[string]bool{
	"channel_not_found": true, "not_in_channel": true, "is_archived": true, "msg_too_long": true,
	"no_text": true, "invalid_blocks": true, "invalid_blocks_format": true, "invalid_auth": true,
	"not_authed": true, "account_inactive": true, "token_revoked": true, "token_expired": true,
	"no_permission": true, "missing_scope": true, "restricted_action": true, "cant_update_message": true,
	"message_not_found": true, "edit_window_closed": true, "invalid_name": true, "too_many_reactions": true,
	"thread_not_found": true, "invalid_arguments": true, "team_access_not_granted": true,
	"ekm_access_denied": true, "invalid_metadata_format": true, "invalid_metadata_schema": true,
	"channel_is_archived": true, "cannot_reply_to_message": true, "duplicate_channel_not_found": true,
}

// classify maps a Web API failure to what the outbox should do with it.
func (s *Sink) classify(channel, method string, err error) error {
	wrapped := fmt.Errorf("slack %s: %w", method, err)
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		wait := max(rl.RetryAfter, time.Second)
		s.pace.hold(channel, wait)
		return &bot.DeliveryError{Err: wrapped, RetryAfter: wait}
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch {
		case permanentErrors[se.Err]:
			return &bot.DeliveryError{Err: wrapped, Permanent: true}
		case se.Err == "ratelimited":
			s.pace.hold(channel, time.Second)
			return &bot.DeliveryError{Err: wrapped, RetryAfter: time.Second}
		}
		return wrapped
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) && sc.Code >= 400 && sc.Code < 500 &&
		sc.Code != http.StatusRequestTimeout && sc.Code != http.StatusTooManyRequests {
		return &bot.DeliveryError{Err: wrapped, Permanent: true}
	}
	return wrapped
}
