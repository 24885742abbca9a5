package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

// Agent tool names.
const (
	PostMessageTool = "slack_post_message"
	ReadThreadTool  = "slack_read_thread"
	AddReactionTool = "slack_add_reaction"
	LookupUserTool  = "slack_lookup_user"
)

// ReadTools names the Slack agent tools that change nothing in the
// workspace, for permission profiles.
func ReadTools() []string { return []string{ReadThreadTool, LookupUserTool} }

// WriteTools names the Slack agent tools that post or react, for permission
// profiles.
func WriteTools() []string { return []string{PostMessageTool, AddReactionTool} }

const (
	// defaultThreadMessages and maxThreadMessages bound what one
	// slack_read_thread call returns; longer threads are read on with
	// after_ts.
	defaultThreadMessages = 50
	maxThreadMessages     = 200
	// maxThreadBytes keeps a thread's rendering under the toolset's output
	// cap, so it is cut between messages by us, not in the middle by it.
	maxThreadBytes = 24 << 10
	// maxMessageBytes cuts one very long message, so a single paste cannot
	// take the whole budget.
	maxMessageBytes = 4000
	// maxReplyPages stops paging a thread a server keeps saying has more.
	maxReplyPages = 10
	// maxNameLookups bounds the users.info calls one read makes to name
	// authors and mentioned people.
	maxNameLookups = 20
	// maxPostRunes is four reply-sized messages: enough for a report, not
	// enough to flood a channel.
	maxPostRunes = 4 * maxReplyRunes
	// toolMetadata tags the messages agents post, as outboxMetadata tags
	// the Sink's.
	toolMetadata = "switchyard_tool"
)

// Tools returns the agent tools that act in this workspace:
// slack_post_message, slack_read_thread, slack_add_reaction and
// slack_lookup_user. Register them next to tools.Core; they need no running
// connection (only the marking of the bot's own messages waits for Run's
// auth.test).
//
// They act in the run's own Slack thread (its session key) unless a call
// names another channel, which must then be in AllowedChannels when that is
// set; a run outside Slack must name one. Posts are escaped like the Sink's,
// so an agent cannot ping @channel or anyone, and share the Sink's
// per-channel pacing. Slack-shaped tokens and the adapter's own secrets are
// blanked from everything the tools return, posts included. slack_lookup_user
// never returns email addresses or phone numbers: what agents read ends up in
// transcripts and threads, and finding people by email covers the need.
func (a *Adapter) Tools() []tools.Tool {
	at := &agentTools{a: a, redactor: a.opts.Redactor.With(a.opts.BotToken, a.opts.AppToken, a.opts.SigningSecret)}
	// Reading Slack needs read; what other people see (a post, a
	// reaction) needs push.
	read, push := []tools.Permission{tools.PermRead}, []tools.Permission{tools.PermPush}
	return []tools.Tool{
		at.tool(tools.Info{Name: PostMessageTool, Kind: tools.KindIntegration, Permissions: push, Schema: postMessageSchema,
			Description: "Post a message in Slack. With no channel and no thread_ts it replies in the Slack thread this run belongs to. " +
				"thread_ts alone replies in another thread of the same channel; channel (an id such as C0123ABCD, not a #name) posts in another channel, " +
				"as a new top-level message, or in one of its threads when thread_ts is also given. " +
				"The text is Slack mrkdwn (*bold*, _italic_, `code`, ``` blocks) and is posted literally: <@U…>, <!here> and <!channel> show as text and notify no one. " +
				fmt.Sprintf("Text longer than %d characters is sent as several messages; at most %d characters. Returns the ts of the posted message.", maxReplyRunes, maxPostRunes)},
			at.postMessage),
		at.tool(tools.Info{Name: ReadThreadTool, Kind: tools.KindIntegration, Permissions: read, Schema: readThreadSchema,
			Description: "Read the messages of a Slack thread, oldest first; by default the thread this run belongs to. " +
				"thread_ts (any message of the thread) reads another thread of the same channel; add channel (an id such as C0123ABCD) for a thread elsewhere. " +
				"Each message shows its ts, its time (UTC) and its author as name (user id), marks the bot's own messages, and gives the text with mentions as @name (U…), channels as #name (C…) and links as text (url). " +
				fmt.Sprintf("Returns at most limit messages (default %d, at most %d) and about %d KB; when more follow, the output ends with the after_ts to continue from.", defaultThreadMessages, maxThreadMessages, maxThreadBytes>>10)},
			at.readThread),
		at.tool(tools.Info{Name: AddReactionTool, Kind: tools.KindIntegration, Permissions: push, Schema: addReactionSchema,
			Description: "Add an emoji reaction to a Slack message; by default the first message of the thread this run belongs to. " +
				"ts (from slack_read_thread) picks another message in this channel; channel and ts together pick a message in another channel. " +
				"name is the emoji name without colons, such as white_check_mark, eyes or thumbsup. Reacting with an emoji the bot already added succeeds."},
			at.addReaction),
		at.tool(tools.Info{Name: LookupUserTool, Kind: tools.KindIntegration, Permissions: read, Schema: lookupUserSchema,
			Description: "Look up a Slack user by user id (such as U0123ABCD, as slack_read_thread shows them) or by email address; give exactly one. " +
				"Returns their handle, display name, real name, title, time zone with their local time now, and whether they are a bot, a guest or deactivated. " +
				"Email addresses and phone numbers are never returned."},
			at.lookupUser),
	}
}

// ToolInfos describes the Slack agent tools without an adapter, for calls
// checked offline (`switchyard policy check`).
func ToolInfos() []tools.Info {
	ts := (&Adapter{}).Tools()
	out := make([]tools.Info, len(ts))
	for i, t := range ts {
		out[i] = t.Info()
	}
	return out
}

var (
	postMessageSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"text":{"type":"string","minLength":1,"maxLength":` + strconv.Itoa(maxPostRunes) + `,"description":"The message in Slack mrkdwn; mentions are shown as text and notify no one"},` +
		`"channel":{"type":"string","description":"Channel id (C…, G… or D…) to post in instead of this run's thread"},` +
		`"thread_ts":{"type":"string","pattern":"^[0-9]+\\.[0-9]+$","description":"ts of the thread to reply in: in this run's channel, or in channel when given"}},` +
		`"required":["text"],"additionalProperties":false}`)
	readThreadSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"channel":{"type":"string","description":"Channel id (C…, G… or D…) of the thread; default this run's channel. Needs thread_ts"},` +
		`"thread_ts":{"type":"string","pattern":"^[0-9]+\\.[0-9]+$","description":"ts of any message of the thread; default this run's thread"},` +
		`"after_ts":{"type":"string","pattern":"^[0-9]+\\.[0-9]+$","description":"Only messages after this ts, to continue a truncated read"},` +
		`"limit":{"type":"integer","minimum":1,"maximum":` + strconv.Itoa(maxThreadMessages) + `,"description":"Most messages to return; default ` + strconv.Itoa(defaultThreadMessages) + `"}},` +
		`"additionalProperties":false}`)
	addReactionSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"name":{"type":"string","description":"Emoji name without colons, e.g. white_check_mark"},` +
		`"ts":{"type":"string","pattern":"^[0-9]+\\.[0-9]+$","description":"ts of the message; default the first message of this run's thread"},` +
		`"channel":{"type":"string","description":"Channel id (C…, G… or D…) of the message when it is not in this run's channel; needs ts"}},` +
		`"required":["name"],"additionalProperties":false}`)
	lookupUserSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"user":{"type":"string","description":"Slack user id, e.g. U0123ABCD"},` +
		`"email":{"type":"string","description":"The user's email address"}},` +
		`"additionalProperties":false}`)
)

// agentTools holds what the four tools share: the adapter (client, pacer,
// allow list, identity) and the redactor that blanks secrets from their
// output.
type agentTools struct {
	a        *Adapter
	redactor *bot.Redactor
}

// tool is one agent tool; Run blanks secrets from whatever run returns.
type tool struct {
	info   tools.Info
	run    func(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error)
	redact func(string) string
}

var _ tools.Tool = (*tool)(nil)

func (at *agentTools) tool(info tools.Info, run func(context.Context, tools.CallContext, json.RawMessage) (string, error)) *tool {
	return &tool{info: info, run: run, redact: at.redact}
}

func (t *tool) Info() tools.Info { return t.info }

// Run implements tools.Tool. Errors are rebuilt from their redacted text:
// an error chain from the HTTP client is not ours to trust with secrets, and
// the model reads only the text anyway.
func (t *tool) Run(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	out, err := t.run(ctx, cc, input)
	out = t.redact(out)
	switch {
	case err == nil:
		return out, nil
	case tools.IsRefused(err):
		var r *tools.RefusedError
		errors.As(err, &r)
		return out, &tools.RefusedError{Reason: t.redact(r.Reason)}
	default:
		return out, errors.New(t.redact(err.Error()))
	}
}

// redact blanks the adapter's own secrets, whatever their shape, every
// configured secret and anything shaped like a token: a token pasted into a
// thread must not travel on through an agent.
func (at *agentTools) redact(s string) string { return at.redactor.Redact(s) }

// place is where a call acts: a channel, and the run's own Slack thread
// (zero outside Slack).
type place struct {
	channel string
	current bot.Thread
}

// inCurrentChannel reports whether the call acts in the run's own channel.
func (p place) inCurrentChannel() bool { return p.channel == p.current.Channel }

// where resolves the channel a call names. An empty channel means the run's
// own Slack thread; another channel must be in the allow list when one is
// configured. The run's own channel is always allowed: the bot was asked
// there.
func (at *agentTools) where(name string, cc tools.CallContext, channel string) (place, error) {
	var cur bot.Thread
	if th, err := bot.ParseThread(cc.SessionKey); err == nil && th.Source == bot.SourceSlack {
		cur = th
	}
	if channel == "" {
		if cur.IsZero() {
			session := cc.SessionKey
			if session == "" {
				session = "none"
			}
			return place{}, tools.Refuse("%s: this run is not in a Slack thread (its thread is %s), so there is no current Slack thread; name a channel to act elsewhere", name, session)
		}
		return place{channel: cur.Channel, current: cur}, nil
	}
	id, err := channelID(channel)
	if err != nil {
		return place{}, err
	}
	allowed := at.a.gate.allowedChannels()
	if id != cur.Channel && allowed != nil && !allowed[id] {
		list := make([]string, 0, len(allowed))
		for ch := range allowed {
			list = append(list, ch)
		}
		slices.Sort(list)
		if len(list) > 20 {
			list = append(list[:20], "…")
		}
		here := ""
		if !cur.IsZero() {
			here = "this run's channel " + cur.Channel + " and "
		}
		return place{}, tools.Refuse("%s: channel %s is not in slack.allowed_channels; allowed are %s%s", name, id, here, strings.Join(list, ", "))
	}
	return place{channel: id, current: cur}, nil
}

var (
	channelIDRe = regexp.MustCompile(`^[CGD][A-Z0-9]{1,20}$`)
	userIDRe    = regexp.MustCompile(`^[UW][A-Z0-9]{1,20}$`)
	tsRe        = regexp.MustCompile(`^[0-9]{1,12}\.[0-9]{1,9}$`)
	emojiRe     = regexp.MustCompile(`^[a-zA-Z0-9_+'.-]{1,100}(::skin-tone-[2-6])?$`)
)

// channelID accepts a channel id as models tend to write it: C0123ABCD,
// #C0123ABCD or Slack's <#C0123ABCD|name>.
func channelID(s string) (string, error) {
	id := strings.TrimSpace(s)
	if body, ok := strings.CutPrefix(id, "<#"); ok {
		id, _, _ = strings.Cut(strings.TrimSuffix(body, ">"), "|")
	}
	id = strings.TrimPrefix(id, "#")
	if !channelIDRe.MatchString(id) {
		return "", fmt.Errorf("invalid input: channel %q is not a channel id; give an id such as C0123ABCD (names such as #general are not accepted)", s)
	}
	return id, nil
}

// userID accepts U0123ABCD, @U0123ABCD and Slack's <@U0123ABCD|name>.
func userID(s string) (string, error) {
	id := strings.TrimSpace(s)
	if body, ok := strings.CutPrefix(id, "<@"); ok {
		id, _, _ = strings.Cut(strings.TrimSuffix(body, ">"), "|")
	}
	id = strings.TrimPrefix(id, "@")
	if !userIDRe.MatchString(id) {
		return "", fmt.Errorf("invalid input: user %q is not a user id; give an id such as U0123ABCD, or use email", s)
	}
	return id, nil
}

func checkTS(field, ts string) error {
	if ts != "" && !tsRe.MatchString(ts) {
		return fmt.Errorf("invalid input: %s %q is not a Slack message ts such as 1700000000.000100", field, ts)
	}
	return nil
}

func (at *agentTools) postMessage(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Text     string `json:"text"`
		Channel  string `json:"channel"`
		ThreadTS string `json:"thread_ts"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	if strings.TrimSpace(in.Text) == "" {
		return "", errors.New("invalid input: text is empty")
	}
	if n := utf8.RuneCountInString(in.Text); n > maxPostRunes {
		return "", fmt.Errorf("invalid input: text is %d characters; at most %d may be posted at once", n, maxPostRunes)
	}
	if err := checkTS("thread_ts", in.ThreadTS); err != nil {
		return "", err
	}
	p, err := at.where(PostMessageTool, cc, in.Channel)
	if err != nil {
		return "", err
	}
	threadTS := in.ThreadTS
	if in.Channel == "" && threadTS == "" {
		threadTS = p.current.ThreadTS
	}
	// Redacted before escaping, so a token cannot hide behind an escape.
	parts := splitMessage(at.redact(in.Text), maxReplyRunes)
	var posted []string
	for _, part := range parts {
		ts, err := at.post(ctx, cc, p.channel, threadTS, escape(part))
		if err != nil {
			if len(posted) > 0 {
				return "", fmt.Errorf("posted %d of %d parts (ts %s), then: %w", len(posted), len(parts), strings.Join(posted, ", "), err)
			}
			return "", err
		}
		posted = append(posted, ts)
	}
	where := "as a new message in channel " + p.channel
	if threadTS != "" {
		where = fmt.Sprintf("in thread %s of channel %s", threadTS, p.channel)
	}
	if len(posted) == 1 {
		return fmt.Sprintf("Posted %s; message ts %s.", where, posted[0]), nil
	}
	return fmt.Sprintf("Posted %d messages %s; message ts %s.", len(posted), where, strings.Join(posted, ", ")), nil
}

// post sends one message at the channel's pace. A 429 asking for a short
// wait is waited out once; a longer one goes back to the model.
func (at *agentTools) post(ctx context.Context, cc tools.CallContext, channel, threadTS, text string) (string, error) {
	opts := []slack.MsgOption{
		slack.MsgOptionText(text, false),
		slack.MsgOptionMetadata(slack.SlackMetadata{EventType: toolMetadata,
			EventPayload: map[string]any{"work_item": cc.WorkItemID, "job": cc.JobID, "agent": cc.Agent}}),
	}
	if threadTS != "" {
		opts = append(opts, slack.MsgOptionTS(threadTS))
	}
	pace := at.a.sink.pace
	for attempt := 0; ; attempt++ {
		if err := pace.wait(ctx, channel); err != nil {
			if de, ok := bot.AsDeliveryError(err); ok && errors.Is(err, errHeld) {
				return "", fmt.Errorf("slack chat.postMessage: Slack is rate limiting channel %s; try again in %s", channel, de.RetryAfter.Round(time.Second))
			}
			return "", fmt.Errorf("slack chat.postMessage: %w", err)
		}
		_, ts, err := at.a.api.PostMessageContext(ctx, channel, opts...)
		if err == nil {
			return ts, nil
		}
		var rl *slack.RateLimitedError
		if errors.As(err, &rl) {
			wait := max(rl.RetryAfter, time.Second)
			pace.hold(channel, wait)
			if attempt == 0 && wait <= maxPaceWait {
				continue
			}
		}
		return "", apiError("chat.postMessage", err)
	}
}

// errorHints explain Slack's error codes in terms of what the model or a
// person can do about them.
var errorHints = map[string]string{
	"channel_not_found":   "no such channel, or the bot cannot see it",
	"not_in_channel":      "the bot is not a member of that channel; someone must invite it first",
	"is_archived":         "the channel is archived",
	"channel_is_archived": "the channel is archived",
	"thread_not_found":    "no thread with that ts in that channel",
	"message_not_found":   "no message with that ts in that channel",
	"user_not_found":      "no Slack user with that id",
	"users_not_found":     "no Slack user with that email address",
	"invalid_name":        "no emoji of that name in this workspace",
	"too_many_reactions":  "the message has as many reactions as Slack allows",
	"restricted_action":   "the workspace does not let the bot post there",
	"missing_scope":       "the Slack app lacks a scope this needs; an administrator must add it to the app and reinstall it",
	"invalid_auth":        "Slack refused the bot's credentials; an administrator must check slack.bot_token",
	"not_authed":          "Slack refused the bot's credentials; an administrator must check slack.bot_token",
	"token_revoked":       "Slack refused the bot's credentials; an administrator must check slack.bot_token",
	"account_inactive":    "Slack refused the bot's credentials; an administrator must check slack.bot_token",
	"invalid_cursor":      "the thread changed while it was being read; read it again",
}

// apiError says what went wrong with a Web API call in words the model can
// act on.
func apiError(method string, err error) error {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		if hint, ok := errorHints[se.Err]; ok {
			return fmt.Errorf("slack %s: %s (%s)", method, hint, se.Err)
		}
		return fmt.Errorf("slack %s: %s", method, se.Err)
	}
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return fmt.Errorf("slack %s: rate limited by Slack; try again in %s", method, max(rl.RetryAfter, time.Second).Round(time.Second))
	}
	return fmt.Errorf("slack %s: %w", method, err)
}

func (at *agentTools) readThread(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Channel  string `json:"channel"`
		ThreadTS string `json:"thread_ts"`
		AfterTS  string `json:"after_ts"`
		Limit    int    `json:"limit"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	limit := in.Limit
	switch {
	case limit == 0:
		limit = defaultThreadMessages
	case limit < 0 || limit > maxThreadMessages:
		return "", fmt.Errorf("invalid input: limit must be between 1 and %d", maxThreadMessages)
	}
	if err := checkTS("thread_ts", in.ThreadTS); err != nil {
		return "", err
	}
	if err := checkTS("after_ts", in.AfterTS); err != nil {
		return "", err
	}
	p, err := at.where(ReadThreadTool, cc, in.Channel)
	if err != nil {
		return "", err
	}
	threadTS := in.ThreadTS
	if threadTS == "" {
		if !p.inCurrentChannel() {
			return "", fmt.Errorf("invalid input: thread_ts is required to read a thread in channel %s", p.channel)
		}
		threadTS = p.current.ThreadTS
	}

	msgs, more, err := at.replies(ctx, p.channel, threadTS, in.AfterTS, limit)
	if err != nil {
		return "", err
	}
	if len(msgs) == 0 {
		if in.AfterTS != "" {
			return fmt.Sprintf("No messages after %s in thread %s of channel %s.", in.AfterTS, threadTS, p.channel), nil
		}
		return fmt.Sprintf("Thread %s of channel %s has no messages.", threadTS, p.channel), nil
	}
	truncated := more || len(msgs) > limit
	msgs = msgs[:min(limit, len(msgs))]
	names := at.names(ctx, msgs)
	self := at.a.self.Load()

	var body strings.Builder
	shown := 0
	for _, m := range msgs {
		s := renderMessage(m, names, self)
		if shown > 0 && body.Len()+len(s) > maxThreadBytes {
			truncated = true
			break
		}
		body.WriteString(s)
		shown++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Thread %s of channel %s", threadTS, p.channel)
	if in.AfterTS != "" {
		fmt.Fprintf(&b, ", messages after %s", in.AfterTS)
	}
	fmt.Fprintf(&b, ": %d shown, oldest first.\n", shown)
	b.WriteString(body.String())
	if truncated {
		fmt.Fprintf(&b, "\n[truncated: more messages follow; call %s again with the same channel and thread_ts and after_ts %q to read on]\n",
			ReadThreadTool, msgs[shown-1].Timestamp)
	}
	return b.String(), nil
}

// replies reads up to limit+1 messages of a thread after afterTS (all when
// empty), oldest first, and whether Slack said more follow.
func (at *agentTools) replies(ctx context.Context, channel, threadTS, afterTS string, limit int) ([]slack.Message, bool, error) {
	params := slack.GetConversationRepliesParameters{ChannelID: channel, Timestamp: threadTS, Oldest: afterTS}
	var msgs []slack.Message
	for page := 1; ; page++ {
		params.Limit = min(maxThreadMessages, limit+1-len(msgs))
		got, hasMore, next, err := at.a.api.GetConversationRepliesContext(ctx, &params)
		if err != nil {
			return nil, false, apiError("conversations.replies", err)
		}
		for _, m := range got {
			// The parent message may come first whatever oldest says.
			if afterTS != "" && compareTS(m.Timestamp, afterTS) <= 0 {
				continue
			}
			msgs = append(msgs, m)
		}
		more := hasMore && next != ""
		if !more || len(msgs) > limit || page == maxReplyPages {
			return msgs, more, nil
		}
		params.Cursor = next
	}
}

// names looks up the display names of the authors of msgs and the people
// they mention, at most maxNameLookups of them. A failed lookup leaves the
// id alone: names are a courtesy, the ids are what matter.
func (at *agentTools) names(ctx context.Context, msgs []slack.Message) map[string]string {
	var ids []string
	add := func(id string) {
		if id != "" && !slices.Contains(ids, id) && len(ids) < maxNameLookups {
			ids = append(ids, id)
		}
	}
	for _, m := range msgs {
		add(m.User)
		for _, id := range mentionedUsers(m.Text) {
			add(id)
		}
	}
	names := make(map[string]string, len(ids))
	for _, id := range ids {
		u, err := at.a.api.GetUserInfoContext(ctx, id)
		if err != nil {
			at.a.opts.Logger.Debug("slack users.info failed; showing the id alone", slog.String("user", id), slog.String("err", at.redact(err.Error())))
			continue
		}
		if n := displayName(u); n != "" {
			names[id] = n
		}
	}
	return names
}

func displayName(u *slack.User) string {
	for _, n := range []string{u.Profile.DisplayName, u.Profile.RealName, u.RealName, u.Name} {
		if n = strings.TrimSpace(n); n != "" {
			return n
		}
	}
	return ""
}

// renderMessage writes one message for the model: a header line with its
// ts, time and author, then its text, attachments and files.
func renderMessage(m slack.Message, names map[string]string, self *identity) string {
	var b strings.Builder
	b.WriteString("--- ")
	b.WriteString(m.Timestamp)
	if t, ok := tsTime(m.Timestamp); ok {
		b.WriteString(" · ")
		b.WriteString(t.UTC().Format("2006-01-02 15:04 UTC"))
	}
	b.WriteString(" · ")
	b.WriteString(author(m, names, self))
	b.WriteByte('\n')
	text := strings.TrimSpace(plainText(m.Text, names))
	if len(text) > maxMessageBytes {
		cut := maxMessageBytes
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = fmt.Sprintf("%s… [message cut: %d bytes not shown]", text[:cut], len(text)-cut)
	}
	if text != "" {
		b.WriteString(text)
		b.WriteByte('\n')
	}
	for _, a := range m.Attachments {
		s := a.Fallback
		if s == "" {
			s = a.Text
		}
		if s = strings.TrimSpace(plainText(s, names)); s != "" {
			fmt.Fprintf(&b, "[attachment: %s]\n", truncateRunes(s, 300))
		}
	}
	for _, f := range m.Files {
		name := f.Name
		if name == "" {
			name = f.Title
		}
		fmt.Fprintf(&b, "[file: %s]\n", name)
	}
	if text == "" && len(m.Attachments) == 0 && len(m.Files) == 0 {
		b.WriteString("(no text)\n")
	}
	return b.String()
}

func author(m slack.Message, names map[string]string, self *identity) string {
	var s string
	switch {
	case m.User != "" && names[m.User] != "":
		s = names[m.User] + " (" + m.User + ")"
	case m.User != "":
		s = m.User
	case m.Username != "":
		s = m.Username + " (bot " + m.BotID + ")"
	case m.BotProfile != nil && m.BotProfile.Name != "":
		s = m.BotProfile.Name + " (bot " + m.BotID + ")"
	case m.BotID != "":
		s = "bot " + m.BotID
	default:
		s = "unknown author"
	}
	if self != nil && (m.User != "" && m.User == self.UserID || m.BotID != "" && m.BotID == self.BotID) {
		s += " [this bot]"
	}
	return s
}

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// tsTime reads the time out of a message ts.
func tsTime(ts string) (time.Time, bool) {
	sec, _, _ := strings.Cut(ts, ".")
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

// compareTS orders two message timestamps ("seconds.fraction") as numbers,
// without the rounding of a float.
func compareTS(a, b string) int {
	as, af, _ := strings.Cut(a, ".")
	bs, bf, _ := strings.Cut(b, ".")
	as, bs = strings.TrimLeft(as, "0"), strings.TrimLeft(bs, "0")
	if c := len(as) - len(bs); c != 0 {
		return c
	}
	if c := strings.Compare(as, bs); c != 0 {
		return c
	}
	w := max(len(af), len(bf))
	return strings.Compare(af+strings.Repeat("0", w-len(af)), bf+strings.Repeat("0", w-len(bf)))
}

// plainText renders Slack message text for a model: entities become
// readable text that keeps their ids (@name (U…), #name (C…), label (url)),
// and Slack's three HTML escapes are undone. In Slack text a literal "<" is
// always escaped, so every "<" opens an entity.
func plainText(text string, names map[string]string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(text, '<')
		if i < 0 {
			break
		}
		j := strings.IndexByte(text[i:], '>')
		if j < 0 {
			break
		}
		b.WriteString(unescape(text[:i]))
		b.WriteString(entity(text[i+1:i+j], names))
		text = text[i+j+1:]
	}
	b.WriteString(unescape(text))
	return b.String()
}

func entity(e string, names map[string]string) string {
	body, label, _ := strings.Cut(e, "|")
	label = unescape(label)
	switch {
	case strings.HasPrefix(body, "@"):
		id := body[1:]
		name := strings.TrimPrefix(label, "@")
		if name == "" {
			name = names[id]
		}
		if name == "" || name == id {
			return "@" + id
		}
		return "@" + name + " (" + id + ")"
	case strings.HasPrefix(body, "#"):
		id := body[1:]
		if label == "" || label == id {
			return "#" + id
		}
		return "#" + label + " (" + id + ")"
	case strings.HasPrefix(body, "!"):
		cmd := body[1:]
		base, _, _ := strings.Cut(cmd, "^")
		switch {
		case base == "here" || base == "channel" || base == "everyone":
			return "@" + base
		case label != "":
			return label // <!subteam^S1|@oncall>, <!date^…|fallback>
		case base == "subteam":
			return "@" + strings.TrimPrefix(cmd, "subteam^")
		}
		return cmd
	}
	url := unescape(body)
	_, bare, _ := strings.Cut(url, ":")
	if label == "" || label == url || label == strings.TrimPrefix(bare, "//") {
		if strings.HasPrefix(url, "mailto:") {
			return strings.TrimPrefix(url, "mailto:")
		}
		return url
	}
	return label + " (" + url + ")"
}

// mentionedUsers returns the user ids of <@U…> entities in text.
func mentionedUsers(text string) []string {
	var ids []string
	for {
		i := strings.Index(text, "<@")
		if i < 0 {
			return ids
		}
		text = text[i+2:]
		j := strings.IndexAny(text, "|>")
		if j < 0 {
			return ids
		}
		if id := text[:j]; userIDRe.MatchString(id) {
			ids = append(ids, id)
		}
		text = text[j:]
	}
}

func (at *agentTools) addReaction(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Name    string `json:"name"`
		TS      string `json:"ts"`
		Channel string `json:"channel"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	name := strings.Trim(strings.TrimSpace(in.Name), ":")
	if !emojiRe.MatchString(name) {
		return "", fmt.Errorf("invalid input: name %q is not an emoji name such as white_check_mark", in.Name)
	}
	if err := checkTS("ts", in.TS); err != nil {
		return "", err
	}
	p, err := at.where(AddReactionTool, cc, in.Channel)
	if err != nil {
		return "", err
	}
	ts := in.TS
	if ts == "" {
		if !p.inCurrentChannel() {
			return "", fmt.Errorf("invalid input: ts is required to react to a message in channel %s", p.channel)
		}
		ts = p.current.ThreadTS
	}
	err = at.a.api.AddReactionContext(ctx, name, slack.ItemRef{Channel: p.channel, Timestamp: ts})
	var se slack.SlackErrorResponse
	if errors.As(err, &se) && se.Err == "already_reacted" {
		return fmt.Sprintf("The bot had already reacted with :%s: to message %s in channel %s.", name, ts, p.channel), nil
	}
	if err != nil {
		return "", apiError("reactions.add", err)
	}
	return fmt.Sprintf("Reacted with :%s: to message %s in channel %s.", name, ts, p.channel), nil
}

func (at *agentTools) lookupUser(ctx context.Context, _ tools.CallContext, input json.RawMessage) (string, error) {
	var in struct {
		User  string `json:"user"`
		Email string `json:"email"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	email := strings.TrimSpace(in.Email)
	var (
		u   *slack.User
		err error
	)
	switch {
	case in.User != "" && email != "":
		return "", errors.New("invalid input: give user or email, not both")
	case in.User != "":
		id, verr := userID(in.User)
		if verr != nil {
			return "", verr
		}
		if u, err = at.a.api.GetUserInfoContext(ctx, id); err != nil {
			return "", apiError("users.info", err)
		}
	case email != "":
		if len(email) > 254 || strings.ContainsAny(email, " \t\r\n<>") || strings.Count(email, "@") != 1 ||
			strings.HasPrefix(email, "@") || strings.HasSuffix(email, "@") {
			return "", fmt.Errorf("invalid input: email %q is not an email address", in.Email)
		}
		if u, err = at.a.api.GetUserByEmailContext(ctx, email); err != nil {
			var se slack.SlackErrorResponse
			if errors.As(err, &se) && se.Err == "missing_scope" {
				return "", errors.New("slack users.lookupByEmail: the Slack app lacks the users:read.email scope; an administrator must add it to the app and reinstall it, or look the user up by id")
			}
			return "", apiError("users.lookupByEmail", err)
		}
	default:
		return "", errors.New("invalid input: give user (an id such as U0123ABCD) or email")
	}
	return renderUser(u, at.a.opts.Now()), nil
}

// renderUser describes a user without their email address or phone number.
func renderUser(u *slack.User, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Slack user %s\n", u.ID)
	line := func(k, v string) {
		if v = strings.TrimSpace(v); v != "" {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	line("handle", u.Name)
	line("display name", u.Profile.DisplayName)
	realName := u.Profile.RealName
	if realName == "" {
		realName = u.RealName
	}
	line("real name", realName)
	line("title", u.Profile.Title)
	if u.TZ != "" {
		zone := u.TZ
		if u.TZLabel != "" {
			zone += ", " + u.TZLabel
		}
		local := now.In(time.FixedZone(u.TZ, u.TZOffset))
		line("time zone", fmt.Sprintf("%s (UTC%s); local time now %s", zone, local.Format("-07:00"), local.Format("Mon 15:04")))
	}
	if u.IsBot {
		line("bot", "yes")
	}
	if u.IsRestricted || u.IsUltraRestricted {
		line("guest", "yes")
	}
	if u.Deleted {
		line("deactivated", "yes")
	}
	return b.String()
}
