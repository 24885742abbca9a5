package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
)

// commandResponse is the immediate answer to a slash command: the HTTP
// response body, or the Socket Mode acknowledgement's payload.
type commandResponse struct {
	ResponseType string `json:"response_type,omitempty"` // "ephemeral" or "in_channel"
	Text         string `json:"text"`
}

func ephemeral(format string, args ...any) commandResponse {
	return commandResponse{ResponseType: slack.ResponseTypeEphemeral, Text: fmt.Sprintf(format, args...)}
}

// maxListed bounds the lines of a /switchyard answer.
const maxListed = 20

// parseCommand reads a slash command as either transport carries it: a
// form body over HTTP, a JSON payload in a Socket Mode envelope.
func parseCommand(raw []byte) (slack.SlashCommand, error) {
	var cmd slack.SlashCommand
	if trimmed := bytes.TrimSpace(raw); len(trimmed) > 0 && trimmed[0] == '{' {
		if err := json.Unmarshal(raw, &cmd); err != nil {
			return cmd, fmt.Errorf("%w: %v", errBadPayload, err)
		}
		return cmd, nil
	}
	// Slack names each field once; a second user_id or command is not
	// Slack's, whichever copy a reader would take.
	form, err := httpapi.ParseForm(string(raw), "form", "form field")
	if err != nil {
		return cmd, fmt.Errorf("%w: slash command: %s", errBadPayload, bot.ErrorMessage(err))
	}
	cmd = slack.SlashCommand{
		Token: form.Get("token"), TeamID: form.Get("team_id"), TeamDomain: form.Get("team_domain"),
		EnterpriseID: form.Get("enterprise_id"), EnterpriseName: form.Get("enterprise_name"),
		ChannelID: form.Get("channel_id"), ChannelName: form.Get("channel_name"),
		UserID: form.Get("user_id"), UserName: form.Get("user_name"),
		Command: form.Get("command"), Text: form.Get("text"),
		ResponseURL: form.Get("response_url"), TriggerID: form.Get("trigger_id"), APIAppID: form.Get("api_app_id"),
	}
	return cmd, nil
}

// handleCommand answers a slash command from either transport. It fails
// only for a payload that is not a command; everything else, including a
// store that is down, is answered in words to the person who typed it,
// because Slack does not retry commands. It makes no Web API call, so it
// always answers within Slack's 3 seconds.
func (a *Adapter) handleCommand(ctx context.Context, cmd slack.SlashCommand, raw []byte, sig requestSig) (commandResponse, error) {
	name := commandName(cmd)
	if name == "" || cmd.ChannelID == "" || cmd.UserID == "" {
		return commandResponse{}, fmt.Errorf("%w: slash command without command, channel or user", errBadPayload)
	}
	// The trigger id keys the command's record and its thread's opener,
	// the team and channel its thread: Slack's are short ASCII, and no
	// store keeps one that is not text.
	for _, f := range [][2]string{{"trigger_id", cmd.TriggerID}, {"team_id", cmd.TeamID}, {"channel_id", cmd.ChannelID}, {"user_id", cmd.UserID}} {
		if err := bot.ValidText(f[0], f[1]); err != nil {
			return commandResponse{}, fmt.Errorf("%w: slash command: %s", errBadPayload, bot.ErrorMessage(err))
		}
	}
	self := a.self.Load()
	if self == nil {
		return ephemeral("Switchyard is still connecting to Slack. Try again in a moment."), nil
	}
	team := firstNonEmpty(cmd.TeamID, self.TeamID)
	if err := bot.SlackThread(team, cmd.ChannelID, "").Validate(); err != nil {
		return commandResponse{}, fmt.Errorf("%w: slash command: %s", errBadPayload, bot.ErrorMessage(err))
	}
	ev := commandEvent(cmd, raw, team)
	sig.on(ev)
	// A command the gate refuses opens no thread: the intake records the
	// refusal and the person who typed it is told, alone.
	if r := a.gate.Screen(ev); r != nil && r.Code != bot.IgnoreAnswered {
		if _, err := a.opts.Intake.Ingest(ctx, ev); err != nil {
			a.opts.Logger.Error("slack command not recorded", slog.Any("err", err))
		}
		return ephemeral("%s", refusalText), nil
	}
	if name == switchyardCommand {
		return a.switchyard(ctx, cmd, ev, team), nil
	}
	return a.routeCommand(ctx, ev, team), nil
}

// switchyardCommand is the command Switchyard answers itself.
const switchyardCommand = "switchyard"

// once records a /switchyard command that changes something, through the
// intake (an ingress record, answered), before it is carried out: the same
// request again (its trigger id and its signature are known; a person
// typing it again makes another) is answered that nothing was done again,
// and a nil answer says to go ahead.
func (a *Adapter) once(ctx context.Context, ev *bot.Event) *commandResponse {
	res, err := a.opts.Intake.Ingest(ctx, ev)
	switch {
	case err != nil:
		a.opts.Logger.Error("slack command not recorded", slog.String("command", ev.Text), slog.Any("err", err))
		r := ephemeral("I couldn't accept `%s` right now (%s), so nothing was done. Please try again.", escape(ev.Text), bot.ErrorMessage(err))
		return &r
	case res.Duplicate:
		r := ephemeral("I already ran `%s` for this request, so nothing was done again.", escape(ev.Text))
		return &r
	}
	return nil
}

func commandName(cmd slack.SlashCommand) string {
	return strings.ToLower(strings.TrimPrefix(strings.TrimSpace(cmd.Command), "/"))
}

// commandEvent is the event of a slash command, without a thread: a command
// has no message of its own to reply to.
func commandEvent(cmd slack.SlashCommand, raw []byte, team string) *bot.Event {
	name := commandName(cmd)
	args := strings.TrimSpace(cmd.Text)
	return &bot.Event{
		Source:     bot.SourceSlack,
		Kind:       bot.KindSlackCommand,
		DeliveryID: cmd.TriggerID,
		Actor:      cmd.UserID,
		Requester:  bot.Requester{Source: bot.SourceSlack, ID: cmd.UserID, Name: cmd.UserName, Team: team},
		Channel:    cmd.ChannelID,
		Text:       strings.TrimSpace("/" + name + " " + args),
		Command:    name,
		Args:       args,
		// A command routes by its name; "@name" in its arguments is data.
		Mentions: []string{},
		Raw:      raw,
	}
}

// openerKey is the outbox key of the message that opens a command's
// thread: one per invocation (trigger_id), so a redelivered envelope or a
// replayed request opens nothing new.
func openerKey(triggerID string) string { return "slack/command/" + triggerID }

// routeCommand turns a command such as /deploy into a work item. Its thread
// is opened by a message the bot posts in the channel ("@ann ran /deploy
// staging"), whose ts keys the thread where the status and the reply follow.
// That message is an outbox message persisted here, with the command in it,
// before Slack is answered; the deliverer posts it, exactly once, and the
// work item is made from the command once it exists (Opened). So a slow
// Slack never delays the answer, and no opener is left without its work
// item.
func (a *Adapter) routeCommand(ctx context.Context, ev *bot.Event, team string) commandResponse {
	if a.opts.Outbox == nil {
		return ephemeral("This Switchyard cannot open a thread for `/%s` here.", ev.Command)
	}
	if ev.DeliveryID == "" {
		return ephemeral("Slack sent `/%s` without a trigger id, so I can't tell it from a repeat. Please try again.", ev.Command)
	}
	_, created, err := a.opts.Outbox.EnqueueNew(ctx, bot.OutboxMessage{
		Key:    openerKey(ev.DeliveryID),
		Thread: bot.SlackThread(team, ev.Channel, ""),
		Kind:   bot.OutboxOpener,
		Text:   fmt.Sprintf("<@%s> ran `/%s`", ev.Actor, escape(strings.TrimPrefix(ev.Text, "/"))),
		// The event is made again from the command once its thread exists.
		Payload: ev.Raw,
	})
	if err != nil {
		a.opts.Logger.Error("slack command not accepted", slog.String("command", ev.Command), slog.Any("err", err))
		return ephemeral("I couldn't accept `/%s` right now (%s). Please try again.", ev.Command, bot.ErrorMessage(err))
	}
	if !created {
		return ephemeral("I already have that `/%s`.", ev.Command)
	}
	a.opts.Wake()
	return ephemeral("Got `/%s`: progress follows in the thread I'm opening here.", escape(strings.TrimPrefix(ev.Text, "/")))
}

// opened makes the work item of a command whose opener is posted as ts.
// Handing the same command over again is a duplicate the intake ignores.
func (a *Adapter) opened(ctx context.Context, msg bot.OutboxMessage, ts string) error {
	cmd, err := parseCommand(msg.Payload)
	if err != nil {
		return &bot.DeliveryError{Err: fmt.Errorf("command of %s: %w", msg.Key, err), Permanent: true}
	}
	ev := commandEvent(cmd, msg.Payload, msg.Thread.Team)
	ev.Thread = bot.SlackThread(msg.Thread.Team, msg.Thread.Channel, ts)
	ev.SourceRef = ts
	res, err := a.opts.Intake.Ingest(ctx, ev)
	if err != nil {
		return err
	}
	if res.WorkItem == nil && !res.Duplicate {
		a.opts.Logger.Warn("slack command made no work item", slog.String("command", ev.Command), slog.String("thread", ev.Thread.Key()))
	}
	return nil
}

// notOpened tells the person who ran a command that its thread could not be
// opened, through the command's response_url: it works where the bot may
// not post.
func (a *Adapter) notOpened(ctx context.Context, msg bot.OutboxMessage, why error) {
	cmd, err := parseCommand(msg.Payload)
	if err != nil || cmd.ResponseURL == "" {
		return
	}
	name := commandName(cmd)
	text := fmt.Sprintf("I couldn't start `/%s`: Slack did not let me post here (%s).", name, slackErrCode(why))
	if code := slackErrCode(why); code == "not_in_channel" || code == "channel_not_found" {
		botName := "switchyard"
		if self := a.self.Load(); self != nil && self.Name != "" {
			botName = self.Name
		}
		text = fmt.Sprintf("I can't post in this channel, so I can't report on `/%s` here. Invite me with `/invite @%s` and try again.", name, botName)
	}
	if u, err := url.Parse(cmd.ResponseURL); err != nil || u.Scheme != "https" && u.Scheme != "http" {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := slack.PostWebhookCustomHTTPContext(rctx, cmd.ResponseURL, a.opts.HTTPClient,
		&slack.WebhookMessage{ResponseType: slack.ResponseTypeEphemeral, Text: text}); err != nil {
		a.opts.Logger.Warn("slack command refusal not delivered", slog.String("command", name), slog.Any("err", err))
	}
}

func slackErrCode(err error) string {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		return se.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return "network error"
}

const switchyardHelp = "*Switchyard*\n" +
	"• `/switchyard status`: open work items (queued and running)\n" +
	"• `/switchyard runs`: the latest work items\n" +
	"• `/switchyard cancel <id>`: cancel a work item\n" +
	"• `/switchyard agents`: the agents you can mention\n" +
	"• `/switchyard skills`: installed skills\n" +
	"• `/switchyard reset <thread>`: forget what a thread carries over (a session key `slack:T…/C…/ts` or a message link)\n" +
	"• `/switchyard help`: this text\n" +
	"Mention me with `@switchyard @coder fix the flaky test`, or run `/deploy <target>`."

// switchyard answers /switchyard subcommands at once.
func (a *Adapter) switchyard(ctx context.Context, cmd slack.SlashCommand, ev *bot.Event, team string) commandResponse {
	sub, rest, _ := strings.Cut(strings.TrimSpace(cmd.Text), " ")
	rest = strings.TrimSpace(rest)
	switch strings.ToLower(sub) {
	case "status":
		return a.statusCommand(ctx)
	case "runs":
		return a.runsCommand(ctx)
	case "cancel":
		if a.opts.Canceller == nil {
			return ephemeral("This Switchyard does not support cancelling work items yet.")
		}
		if rest == "" || strings.ContainsAny(rest, " \n") {
			return ephemeral("Usage: `/switchyard cancel <work item id>` (see `/switchyard status`).")
		}
		if r := a.once(ctx, ev); r != nil {
			return *r
		}
		if err := a.opts.Canceller.CancelWorkItem(ctx, rest, cmd.UserID); err != nil {
			return ephemeral("Could not cancel `%s`: %s", escape(rest), escape(bot.ErrorMessage(err)))
		}
		return ephemeral("Cancelled `%s`.", escape(rest))
	case "agents":
		return a.listCommand(ctx, a.opts.Agents, "agents", "This Switchyard does not list its agents yet.", "No agents are configured.")
	case "skills":
		return a.listCommand(ctx, a.opts.Skills, "skills", "No skills are installed.", "No skills are installed.")
	case "reset":
		if a.opts.Resetter == nil {
			return ephemeral("This Switchyard does not support resetting threads yet.")
		}
		th, ok := parseThreadRef(rest, team)
		if !ok {
			return ephemeral("Usage: `/switchyard reset <thread>`, where the thread is its session key (`slack:T…/C…/1700000000.000100`) or a link to one of its messages.")
		}
		if r := a.once(ctx, ev); r != nil {
			return *r
		}
		receipts, err := a.opts.Resetter.ResetThread(ctx, th.Key(), cmd.UserID)
		if err != nil {
			return ephemeral("Could not reset `%s`: %s", th.Key(), escape(bot.ErrorMessage(err)))
		}
		if len(receipts) == 0 {
			return ephemeral("Reset `%s`: its next run starts fresh.", th.Key())
		}
		var b strings.Builder
		fmt.Fprintf(&b, "Reset `%s`: its next run starts fresh. Closed %s:", th.Key(), bot.Count(len(receipts), "record", "records"))
		for _, r := range receipts {
			fmt.Fprintf(&b, "\n• `%s` (%s, was %s) %s", r.RecordID, strings.ReplaceAll(r.Kind, "_", " "), r.PreviousStatus, r.Action)
		}
		return ephemeral("%s", escape(b.String()))
	}
	return ephemeral("%s", switchyardHelp)
}

func (a *Adapter) statusCommand(ctx context.Context) commandResponse {
	if a.opts.WorkItems == nil {
		return ephemeral("This Switchyard does not show its work items in Slack yet.")
	}
	var open []bot.WorkItem
	for _, st := range []bot.WorkStatus{bot.StatusRunning, bot.StatusQueued} {
		items, _, err := a.opts.WorkItems.ListWorkItems(ctx, bot.WorkItemFilter{Status: st, Limit: maxListed})
		if err != nil {
			return ephemeral("Could not read the work items: %s", escape(bot.ErrorMessage(err)))
		}
		open = append(open, items...)
	}
	if len(open) == 0 {
		return ephemeral("Nothing is queued or running.")
	}
	return ephemeral("*Open work items*\n%s", a.workItemLines(open))
}

func (a *Adapter) runsCommand(ctx context.Context) commandResponse {
	if a.opts.WorkItems == nil {
		return ephemeral("This Switchyard does not show its work items in Slack yet.")
	}
	items, _, err := a.opts.WorkItems.ListWorkItems(ctx, bot.WorkItemFilter{Limit: maxListed / 2})
	if err != nil {
		return ephemeral("Could not read the work items: %s", escape(bot.ErrorMessage(err)))
	}
	if len(items) == 0 {
		return ephemeral("No work items yet.")
	}
	return ephemeral("*Latest work items*\n%s", a.workItemLines(items))
}

func (a *Adapter) workItemLines(items []bot.WorkItem) string {
	now := a.opts.Now()
	var b strings.Builder
	for i, w := range items {
		if i == maxListed {
			fmt.Fprintf(&b, "…and %d more\n", len(items)-i)
			break
		}
		fmt.Fprintf(&b, "• `%s` %s *%s* %s, %s ago: %s\n", w.ID, stateEmoji(string(w.Status)), escape(w.Agent()), w.Status,
			now.Sub(w.CreatedAt).Round(time.Second), escape(oneLine(a.opts.Redactor.Redact(w.Text), 80)))
	}
	return strings.TrimRight(b.String(), "\n")
}

func (a *Adapter) listCommand(ctx context.Context, list NameLister, what, missing, empty string) commandResponse {
	if list == nil {
		return ephemeral("%s", missing)
	}
	names, err := list(ctx)
	if err != nil {
		return ephemeral("Could not list the %s: %s", what, escape(bot.ErrorMessage(err)))
	}
	if len(names) == 0 {
		return ephemeral("%s", empty)
	}
	names = slices.Sorted(slices.Values(names))
	for i, n := range names {
		names[i] = "`" + escape(n) + "`"
	}
	return ephemeral("*%s%s*: %s", strings.ToUpper(what[:1]), what[1:], strings.Join(names, ", "))
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max]) + "…"
	}
	return s
}

// permalinkPath matches the channel and message of a Slack message link:
// https://acme.slack.com/archives/C0123/p1700000000000100.
var permalinkPath = regexp.MustCompile(`^/archives/([A-Z0-9]+)/p([0-9]{16})$`)

// parseThreadRef reads the thread /switchyard reset names: a Slack session
// key, or a message link (Slack wraps links in <…>), whose thread_ts, when
// it is a reply, names the thread.
func parseThreadRef(s, team string) (bot.Thread, bool) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "<") && strings.HasSuffix(s, ">") {
		s, _, _ = strings.Cut(s[1:len(s)-1], "|")
	}
	if strings.HasPrefix(s, bot.SourceSlack+":") {
		// A channel's top level (slack:T/C) is not a conversation.
		th, err := bot.ParseThread(s)
		return th, err == nil && th.ThreadTS != ""
	}
	u, err := url.Parse(unescape(s))
	if err != nil || u.Host == "" {
		return bot.Thread{}, false
	}
	m := permalinkPath.FindStringSubmatch(u.Path)
	if m == nil {
		return bot.Thread{}, false
	}
	ts := m[2][:10] + "." + m[2][10:]
	if t := u.Query().Get("thread_ts"); t != "" {
		ts = t
	}
	return bot.SlackThread(team, m[1], ts), true
}
