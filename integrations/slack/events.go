package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/slack-go/slack/slackevents"

	"github.com/switchyard/switchyard/bot"
)

// errBadPayload marks input that can never be processed: the HTTP transport
// answers 400 and Socket Mode acknowledges it so Slack stops redelivering.
var errBadPayload = errors.New("malformed slack payload")

// decision is the outcome of normalising one event: an event for the
// intake, which decides with the adapter's gate whether it makes a work
// item, or nothing at all for what does not concern the bot (its own
// echoes, channel chatter, reactions), acknowledged and never stored.
type decision struct {
	ev  *bot.Event // nil: dropped
	why string     // for a dropped event, logged at debug
}

func drop(why string) decision { return decision{why: why} }

// handleEventsPayload processes one Events API payload from either
// transport and returns the url_verification challenge when it is one. It
// returns only after the intake has persisted what had to be persisted, so
// the caller may acknowledge when the error is nil.
func (a *Adapter) handleEventsPayload(ctx context.Context, raw []byte, sig requestSig) (challenge string, err error) {
	var env slackevents.EventsAPICallbackEvent
	if err := json.Unmarshal(raw, &env); err != nil {
		return "", fmt.Errorf("%w: %v", errBadPayload, err)
	}
	switch env.Type {
	case slackevents.URLVerification:
		var v slackevents.EventsAPIURLVerificationEvent
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", fmt.Errorf("%w: %v", errBadPayload, err)
		}
		// Answered with nothing, it would read as an acknowledgement.
		if v.Challenge == "" {
			return "", fmt.Errorf("%w: url_verification without a challenge", errBadPayload)
		}
		return v.Challenge, nil
	case slackevents.CallbackEvent:
	case slackevents.AppRateLimited:
		a.opts.Logger.Warn("slack is rate-limiting event deliveries to this app", slog.String("team", env.TeamID))
		return "", nil
	default:
		a.opts.Logger.Debug("slack envelope ignored", slog.String("type", env.Type))
		return "", nil
	}
	self := a.self.Load()
	if self == nil {
		return "", errNotReady
	}
	d, err := a.decide(ctx, self, &env, raw)
	if err != nil {
		return "", err
	}
	if d.ev != nil {
		if err := keepable(d.ev); err != nil {
			return "", err
		}
		sig.on(d.ev)
	}
	return "", a.apply(ctx, d)
}

// apply hands an event to the intake, which also tells someone who
// addressed the bot from outside the allow lists why nothing happens.
func (a *Adapter) apply(ctx context.Context, d decision) error {
	if d.ev == nil {
		a.opts.Logger.Debug("slack event dropped", slog.String("why", d.why))
		return nil
	}
	_, err := a.opts.Intake.Ingest(ctx, d.ev)
	return err
}

// decide normalises an event_callback.
func (a *Adapter) decide(ctx context.Context, self *identity, env *slackevents.EventsAPICallbackEvent, raw []byte) (decision, error) {
	if env.InnerEvent == nil {
		return decision{}, fmt.Errorf("%w: event_callback without event", errBadPayload)
	}
	inner := []byte(*env.InnerEvent)
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(inner, &head); err != nil {
		return decision{}, fmt.Errorf("%w: event: %v", errBadPayload, err)
	}
	team := env.TeamID
	if team == "" && len(env.Authorizations) > 0 {
		team = env.Authorizations[0].TeamID
	}
	if team == "" {
		team = self.TeamID
	}
	ec := &eventContext{self: self, team: team, eventID: env.EventID, raw: raw}

	var m slackMessage
	if head.Type == "app_mention" || head.Type == "message" {
		if err := json.Unmarshal(inner, &m); err != nil {
			return decision{}, fmt.Errorf("%w: %s event: %v", errBadPayload, head.Type, err)
		}
	}
	switch head.Type {
	case "app_mention":
		if m.Channel == "" || m.TS == "" {
			return drop("app_mention without channel or ts"), nil
		}
		if isSelf(ec.self, m.User, m.BotID) {
			return drop("the bot's own message"), nil
		}
		if m.User == "" && m.BotID == "" {
			return drop("app_mention without an author"), nil
		}
		if !meansUser(m.Text, ec.self.UserID) {
			// Quoting or showing a request is not making one.
			return drop("the bot is mentioned only in code or a quote"), nil
		}
		ev := ec.event(bot.KindSlackMention, m.Channel, m.User, m.TS, firstNonEmpty(m.ThreadTS, m.TS), m.Text, true)
		ec.external(ev, m.UserTeam)
		ev.ActorIsBot = m.BotID != ""
		ev.Edited = m.Edited != nil
		return decision{ev: ev}, nil
	case "message":
		return a.decideMessage(ctx, ec, &m)
	}
	return drop("event type " + head.Type), nil
}

// keepable refuses, as a bad payload, an event whose event id or thread no
// store keeps (not UTF-8 text, a NUL, a channel or ts a session key cannot
// be read back from). Slack's ids never are; storing one would fail as an
// internal error, which Slack retries.
func keepable(ev *bot.Event) error {
	if err := bot.ValidText("event_id", ev.DeliveryID); err != nil {
		return fmt.Errorf("%w: %s", errBadPayload, bot.ErrorMessage(err))
	}
	for _, th := range []bot.Thread{ev.Thread, ev.Conversation} {
		if th.IsZero() {
			continue
		}
		if err := th.Validate(); err != nil {
			return fmt.Errorf("%w: %s", errBadPayload, bot.ErrorMessage(err))
		}
	}
	return nil
}

// slackMessage is what the core reads of a message or app_mention event.
// slack-go's full event structs also decode blocks, attachments and files,
// strictly: one field of an unexpected shape there would lose a person's
// message, so only the fields used here are decoded.
type slackMessage struct {
	Type        string `json:"type"`
	Subtype     string `json:"subtype"`
	User        string `json:"user"`
	UserTeam    string `json:"user_team"` // the author's workspace, in a channel shared with others
	BotID       string `json:"bot_id"`
	Text        string `json:"text"`
	TS          string `json:"ts"`
	ThreadTS    string `json:"thread_ts"`
	Channel     string `json:"channel"`
	ChannelType string `json:"channel_type"`
	DeletedTS   string `json:"deleted_ts"`
	Edited      *struct {
		User string `json:"user"`
		TS   string `json:"ts"`
	} `json:"edited"`
	Message         *slackMessage `json:"message"`          // message_changed: the new version
	PreviousMessage *slackMessage `json:"previous_message"` // message_changed, message_deleted
}

func (a *Adapter) decideMessage(ctx context.Context, ec *eventContext, m *slackMessage) (decision, error) {
	self := ec.self
	// Who wrote what: an edit carries the new message, a deletion the old one.
	user, userTeam, botID, text, ts, threadTS := m.User, m.UserTeam, m.BotID, m.Text, m.TS, m.ThreadTS
	var prevText string
	switch m.Subtype {
	case "message_changed":
		if n := m.Message; n != nil {
			user, userTeam, botID, text, ts, threadTS = n.User, n.UserTeam, n.BotID, n.Text, n.TS, n.ThreadTS
		}
		if m.PreviousMessage != nil {
			prevText = m.PreviousMessage.Text
		}
	case "message_deleted":
		if p := m.PreviousMessage; p != nil {
			user, userTeam, botID, text, ts, threadTS = p.User, p.UserTeam, p.BotID, p.Text, p.TS, p.ThreadTS
		}
		ts = firstNonEmpty(ts, m.DeletedTS)
	}
	if m.Channel == "" || ts == "" {
		return drop("message without channel or ts"), nil
	}
	if isSelf(self, user, botID) {
		// Echoes of the bot's own posts and chat.update edits: recording
		// them would store one record per status edit.
		return drop("the bot's own message"), nil
	}
	dm := m.ChannelType == slackevents.ChannelTypeIM
	mentioned := meansUser(text, self.UserID) || meansUser(prevText, self.UserID)
	personal := personalSubtypes[m.Subtype]

	// Relevance first: the bot sees every message of the channels it is in,
	// and only those addressed to it are worth a record.
	switch {
	case dm:
	case mentioned && personal:
		return drop("mentions the bot: handled by its app_mention event"), nil
	case mentioned:
	case threadTS != "":
		in, err := a.inBotThread(ctx, bot.SlackThread(ec.team, m.Channel, threadTS))
		if err != nil {
			return decision{}, err
		}
		if !in {
			return drop("a thread the bot has no work in"), nil
		}
	default:
		return drop("not addressed to the bot"), nil
	}

	ev := ec.event(bot.KindSlackMessage, m.Channel, user, ts, firstNonEmpty(threadTS, ts), text, mentioned || dm)
	ec.external(ev, userTeam)
	if dm && threadTS == "" {
		// Every direct message starts a thread of its own; the
		// conversation is the channel.
		ev.Conversation = bot.SlackThread(ec.team, m.Channel, "")
	}
	ev.ActorIsBot = botID != "" || m.Subtype == "bot_message"
	ev.Subtype = m.Subtype
	switch m.Subtype {
	case "message_changed":
		ev.Edited, ev.Subtype = true, ""
	case "message_deleted":
		ev.Deleted, ev.Subtype = true, ""
	}
	return decision{ev: ev}, nil
}

// inBotThread reports whether the bot has a work item in the thread.
func (a *Adapter) inBotThread(ctx context.Context, th bot.Thread) (bool, error) {
	if a.opts.WorkItems == nil {
		return false, nil
	}
	items, _, err := a.opts.WorkItems.ListWorkItems(ctx, bot.WorkItemFilter{Thread: th.Key(), Limit: 1})
	if err != nil {
		return false, fmt.Errorf("look up work items of %s: %w", th.Key(), err)
	}
	return len(items) > 0, nil
}

// eventContext is what every event of one envelope shares.
type eventContext struct {
	self    *identity
	team    string
	eventID string
	raw     []byte
}

// external marks ev's requester as of another workspace when the author's
// (userTeam, which Slack gives in channels shared with other
// organisations) is not the bot's.
func (ec *eventContext) external(ev *bot.Event, userTeam string) {
	if userTeam != "" && userTeam != ec.team {
		ev.Requester.Team, ev.Requester.External = userTeam, true
	}
}

// event builds the bot.Event of a message. addressed says the message is
// meant for the bot (a mention, a DM), which makes a leading "name:" an
// agent mention.
func (ec *eventContext) event(kind, channel, user, ts, threadTS, text string, addressed bool) *bot.Event {
	ev := &bot.Event{
		Source:     bot.SourceSlack,
		Kind:       kind,
		DeliveryID: ec.eventID,
		Actor:      user,
		Requester:  bot.Requester{Source: bot.SourceSlack, ID: user, Team: ec.team},
		Channel:    channel,
		SourceRef:  ts,
		Thread:     bot.SlackThread(ec.team, channel, threadTS),
		Raw:        ec.raw,
	}
	ev.Addressed = addressed
	ev.Text, ev.Mentions = cleanText(text, ec.self.UserID, addressed)
	ev.FillFromText()
	return ev
}

func isSelf(self *identity, user, botID string) bool {
	return (user != "" && user == self.UserID) || (botID != "" && botID == self.BotID)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// mentionsUser reports whether Slack text mentions the user: <@U123> or
// <@U123|name>.
func mentionsUser(text, user string) bool {
	if user == "" {
		return false
	}
	return strings.Contains(text, "<@"+user+">") || strings.Contains(text, "<@"+user+"|")
}
