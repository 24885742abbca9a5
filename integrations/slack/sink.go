package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/switchyard/switchyard/bot"
)

var (
	_ bot.Sink   = (*Sink)(nil)
	_ bot.Finder = (*Sink)(nil)
)

// SinkOptions configure a Sink.
type SinkOptions struct {
	// ChannelInterval paces messages per channel; DefaultChannelInterval
	// when zero.
	ChannelInterval time.Duration
	// BotID returns the bot's id (B…) once known, else "": Find adopts
	// only messages this bot posted, and finds nothing while it is not
	// known.
	BotID func() string
	// Opened is called when an opener exists in its channel, with its ts,
	// and again for every later delivery of it; it hands the event the
	// opener is for to the intake. An error makes the outbox retry.
	Opened func(ctx context.Context, msg bot.OutboxMessage, ts string) error
	// NotOpened is told when an opener cannot be posted for good, so the
	// person who asked hears why.
	NotOpened func(ctx context.Context, msg bot.OutboxMessage, err error)
	Logger    *slog.Logger
}

// Sink delivers outbox messages of Slack threads: status messages (posted
// once, then edited with chat.update), replies (split when long), reactions
// and thread openers.
//
// Every message it posts carries message metadata naming its outbox key and
// part ({"event_type": "switchyard_outbox", "event_payload": {"key": …,
// "part": …}}), which is how Find recognises it. A reply split into several
// messages has all their ts as its remote id, separated by spaces.
type Sink struct {
	api  *slack.Client
	pace *pacer
	opts SinkOptions
}

// NewSink returns a Sink posting through api.
func NewSink(api *slack.Client, opts SinkOptions) *Sink {
	if opts.ChannelInterval <= 0 {
		opts.ChannelInterval = DefaultChannelInterval
	}
	if opts.BotID == nil {
		opts.BotID = func() string { return "" }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sink{api: api, pace: newPacer(opts.ChannelInterval), opts: opts}
}

// outboxMetadata is the event type of the metadata every post carries.
const outboxMetadata = "switchyard_outbox"

// Bounds of Find's search: pages of conversations.replies or .history, and
// how much earlier than its outbox record a message may be dated (clock
// differences with Slack).
const (
	findPages    = 10
	findPageSize = 200
	findSkew     = 10 * time.Minute
)

// Deliver implements bot.Sink.
func (s *Sink) Deliver(ctx context.Context, msg bot.OutboxMessage) (string, error) {
	th := msg.Thread
	if th.Source != bot.SourceSlack || th.Channel == "" {
		return "", &bot.DeliveryError{Err: fmt.Errorf("slack sink: %s is not a Slack thread", th.Key()), Permanent: true}
	}
	if (th.ThreadTS == "") != (msg.Kind == bot.OutboxOpener) {
		return "", &bot.DeliveryError{Err: fmt.Errorf("slack sink: %s message %s cannot go in %s", msg.Kind, msg.Key, th.Key()), Permanent: true}
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
	case bot.OutboxOpener:
		return s.deliverOpener(ctx, msg)
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
	return s.post(ctx, msg, 0, opts)
}

// deliverReply posts a reply, split at maxReplyRunes into at most
// maxReplyParts messages, or brings the parts
// of a delivered one up to date: parts that exist are edited, missing ones
// posted, surplus ones deleted. When a part fails, the ones posted before
// it are found by the next attempt (Find), which posts only the rest.
func (s *Sink) deliverReply(ctx context.Context, msg bot.OutboxMessage) (string, error) {
	if msg.Text == "" {
		return "", &bot.DeliveryError{Err: errors.New("slack sink: empty reply"), Permanent: true}
	}
	parts := replyParts(msg.Text)
	have := strings.Fields(msg.RemoteID)
	if len(have) > 0 && len(have) < len(parts) && !msg.Attempted {
		// An edit that needs more parts: an earlier try of this edit may
		// have posted some of them. (After an interrupted first post the
		// deliverer has just looked: msg.Attempted.)
		found, ok, err := s.Find(ctx, msg)
		if err != nil {
			return "", err
		}
		if ok {
			have = strings.Fields(found)
		}
	}
	ts := make([]string, 0, len(parts))
	for i, part := range parts {
		text := []slack.MsgOption{slack.MsgOptionText(escape(part), false)}
		if i < len(have) {
			if err := s.update(ctx, msg.Thread.Channel, have[i], text); err != nil {
				return "", err
			}
			ts = append(ts, have[i])
			continue
		}
		t, err := s.post(ctx, msg, i, text)
		if err != nil {
			return "", err
		}
		ts = append(ts, t)
	}
	for _, extra := range have[min(len(parts), len(have)):] {
		if _, _, err := s.api.DeleteMessageContext(ctx, msg.Thread.Channel, extra); err != nil && slackErrCode(err) != "message_not_found" {
			return "", s.classify(msg.Thread.Channel, "chat.delete", err)
		}
	}
	return strings.Join(ts, " "), nil
}

// deliverReaction adds a reaction. Slack answers already_reacted to a
// second one, so a retry after a crash adds nothing: reactions need no Find.
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

// deliverOpener posts a thread opener at the top level of its channel and
// hands its event to the intake (Opened). A delivered opener is never
// edited: a later delivery only hands the event over again, which the
// intake's dedup makes harmless.
func (s *Sink) deliverOpener(ctx context.Context, msg bot.OutboxMessage) (string, error) {
	ts := msg.RemoteID
	if ts == "" {
		var err error
		ts, err = s.post(ctx, msg, 0, []slack.MsgOption{slack.MsgOptionText(msg.Text, false)})
		if err != nil {
			if de, ok := bot.AsDeliveryError(err); ok && de.Permanent && s.opts.NotOpened != nil {
				s.opts.NotOpened(ctx, msg, err)
			}
			return "", err
		}
	}
	if s.opts.Opened != nil {
		if err := s.opts.Opened(ctx, msg, ts); err != nil {
			return "", fmt.Errorf("slack sink: opener %s posted as %s: %w", msg.Key, ts, err)
		}
	}
	return ts, nil
}

// Find implements bot.Finder: it reads the thread (conversations.replies),
// or for an opener the channel (conversations.history), with message
// metadata, and returns the ts of the messages this bot posted for msg's
// key, parts in order. Reactions are never looked for.
func (s *Sink) Find(ctx context.Context, msg bot.OutboxMessage) (string, bool, error) {
	th := msg.Thread
	if msg.Kind == bot.OutboxReaction || th.Source != bot.SourceSlack || th.Channel == "" {
		return "", false, nil
	}
	var oldest string
	if !msg.CreatedAt.IsZero() {
		oldest = strconv.FormatInt(msg.CreatedAt.Add(-findSkew).Unix(), 10) + ".000000"
	}
	// Only the bot's own messages: anyone in the channel can write one
	// whose metadata names the key (an app, a person through a user token),
	// and a message adopted is one the bot then edits.
	botID := s.opts.BotID()
	if botID == "" {
		return "", false, fmt.Errorf("slack sink: look for %s: the bot's id is not known yet (auth.test has not answered)", msg.Key)
	}
	parts := map[int]string{}
	look := func(msgs []slack.Message) {
		for _, m := range msgs {
			if m.Metadata.EventType != outboxMetadata || m.BotID != botID {
				continue
			}
			if key, _ := m.Metadata.EventPayload["key"].(string); key != msg.Key {
				continue
			}
			part := 0
			if p, ok := m.Metadata.EventPayload["part"].(float64); ok && p >= 0 && p < 1000 {
				part = int(p)
			}
			if _, seen := parts[part]; !seen {
				parts[part] = m.Timestamp
			}
		}
	}
	cursor := ""
	for range findPages {
		var (
			msgs    []slack.Message
			hasMore bool
			err     error
			method  string
		)
		if th.ThreadTS == "" {
			method = "conversations.history"
			var res *slack.GetConversationHistoryResponse
			res, err = s.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
				ChannelID: th.Channel, Cursor: cursor, Oldest: oldest, Limit: findPageSize, IncludeAllMetadata: true,
			})
			if err == nil {
				msgs, hasMore, cursor = res.Messages, res.HasMore, res.ResponseMetaData.NextCursor
			}
		} else {
			method = "conversations.replies"
			msgs, hasMore, cursor, err = s.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
				ChannelID: th.Channel, Timestamp: th.ThreadTS, Cursor: cursor, Oldest: oldest, Limit: findPageSize, IncludeAllMetadata: true,
			})
		}
		if err != nil {
			return "", false, s.classify(th.Channel, method, err)
		}
		look(msgs)
		if !hasMore || cursor == "" {
			break
		}
	}
	if len(parts) == 0 {
		return "", false, nil
	}
	// The parts a failed attempt posted are the first ones, without gaps.
	var ts []string
	for i := 0; ; i++ {
		t, ok := parts[i]
		if !ok {
			break
		}
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		return "", false, nil
	}
	return strings.Join(ts, " "), true, nil
}

// post posts part of msg in its thread, or at the channel's top level for
// an opener, and returns its ts.
func (s *Sink) post(ctx context.Context, msg bot.OutboxMessage, part int, opts []slack.MsgOption) (string, error) {
	ch := msg.Thread.Channel
	if err := s.pace.wait(ctx, ch); err != nil {
		return "", err
	}
	if msg.Thread.ThreadTS != "" {
		opts = append(opts, slack.MsgOptionTS(msg.Thread.ThreadTS))
	}
	opts = append(opts, slack.MsgOptionMetadata(slack.SlackMetadata{
		EventType: outboxMetadata, EventPayload: map[string]any{"key": msg.Key, "part": part},
	}))
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
	"no_text": true, "invalid_blocks": true, "invalid_blocks_format": true,
	"no_permission": true, "missing_scope": true, "restricted_action": true, "cant_update_message": true,
	"message_not_found": true, "edit_window_closed": true, "invalid_name": true, "too_many_reactions": true,
	"thread_not_found": true, "invalid_arguments": true, "team_access_not_granted": true,
	"ekm_access_denied": true, "invalid_metadata_format": true, "invalid_metadata_schema": true,
	"channel_is_archived": true, "cannot_reply_to_message": true, "duplicate_channel_not_found": true,
	"msg_blocks_too_long": true, "invalid_charset": true, "not_allowed_token_type": true,
}

// refusedToken are the Slack error codes of a bot token Slack refuses. No
// message gets past them, but they are the workspace's trouble, not the
// message's: a token revoked and restored, or put right in the config, lets
// every message through again. They count as Slack failing, so the
// destination goes down and its messages wait, one tried now and then
// until Slack takes the token again, instead of each message being given
// up with a warning.
var refusedToken = map[string]bool{
	"invalid_auth": true, "not_authed": true, "account_inactive": true, "token_revoked": true, "token_expired": true,
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
		case refusedToken[se.Err]:
			return wrapped
		case permanentErrors[se.Err]:
			return &bot.DeliveryError{Err: wrapped, Permanent: true}
		case se.Err == "ratelimited":
			s.pace.hold(channel, time.Second)
			return &bot.DeliveryError{Err: wrapped, RetryAfter: time.Second}
		}
		return wrapped
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) {
		switch {
		case sc.Code == http.StatusTooManyRequests:
			// A 429 without Retry-After (a proxy's): a rate limit still,
			// not Slack failing.
			s.pace.hold(channel, time.Second)
			return &bot.DeliveryError{Err: wrapped, RetryAfter: time.Second}
		case sc.Code >= 400 && sc.Code < 500 && sc.Code != http.StatusRequestTimeout:
			return &bot.DeliveryError{Err: wrapped, Permanent: true}
		}
	}
	return wrapped
}
