package slack

import (
	"context"
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

// anchorTimeout bounds the post that opens a command's thread, so the
// command is still answered within Slack's 3 seconds.
const anchorTimeout = 2 * time.Second

// maxListed bounds the lines of a /switchyard answer.
const maxListed = 20

// handleCommand answers a slash command from either transport. It fails
// only for a payload that is not a command; everything else, including a
// store that is down, is answered in words to the person who typed it,
// because Slack does not retry commands.
func (a *Adapter) handleCommand(ctx context.Context, cmd slack.SlashCommand, raw []byte) (commandResponse, error) {
	name := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(cmd.Command), "/"))
	if name == "" || cmd.ChannelID == "" || cmd.UserID == "" {
		return commandResponse{}, fmt.Errorf("%w: slash command without command, channel or user", errBadPayload)
	}
	self := a.self.Load()
	if self == nil {
		return ephemeral("Switchyard is still connecting to Slack. Try again in a moment."), nil
	}
	team := firstNonEmpty(cmd.TeamID, self.TeamID)
	args := strings.TrimSpace(cmd.Text)
	ev := &bot.Event{
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
	// A command the gate refuses opens no thread: the intake records the
	// refusal and the person who typed it is told, alone.
	if a.gate.Screen(ev) != nil {
		if _, err := a.opts.Intake.Ingest(ctx, ev); err != nil {
			a.opts.Logger.Error("slack command not recorded", slog.Any("err", err))
		}
		return ephemeral("%s", refusalText), nil
	}
	if name == "switchyard" {
		return a.switchyard(ctx, cmd, team), nil
	}
	return a.routeCommand(ctx, ev, team, self.Name), nil
}

// routeCommand turns a command such as /deploy into a work item. Its thread
// is opened by a message the bot posts in the channel ("@ann ran /deploy
// staging"): commands have no message of their own to reply to, and the
// posted message's ts keys the thread, where the status and the reply
// follow. Delivery id is the command's trigger_id, unique per invocation, so
// a redelivered Socket Mode envelope is a duplicate.
func (a *Adapter) routeCommand(ctx context.Context, ev *bot.Event, team, botName string) commandResponse {
	anchor := fmt.Sprintf("<@%s> ran `/%s`", ev.Actor, escape(strings.TrimPrefix(ev.Text, "/")))
	pctx, cancel := context.WithTimeout(ctx, anchorTimeout)
	_, ts, err := a.api.PostMessageContext(pctx, ev.Channel, slack.MsgOptionText(anchor, false))
	cancel()
	if err != nil {
		a.opts.Logger.Warn("slack command thread not opened", slog.String("channel", ev.Channel), slog.Any("err", err))
		var se slack.SlackErrorResponse
		if errors.As(err, &se) && (se.Err == "not_in_channel" || se.Err == "channel_not_found") {
			return ephemeral("I can't post in this channel, so I can't report on `/%s` here. Invite me with `/invite @%s` and try again.",
				ev.Command, firstNonEmpty(botName, "switchyard"))
		}
		return ephemeral("I couldn't start `/%s`: Slack did not let me post here (%v). Try again in a moment.", ev.Command, slackErrCode(err))
	}
	ev.Thread = bot.SlackThread(team, ev.Channel, ts)
	ev.SourceRef = ts
	res, err := a.opts.Intake.Ingest(ctx, ev)
	if err != nil || res.Duplicate {
		// Nothing new will report in this thread: take its opener back.
		if _, _, derr := a.api.DeleteMessageContext(ctx, ev.Channel, ts); derr != nil {
			a.opts.Logger.Warn("slack command thread not removed", slog.String("channel", ev.Channel), slog.Any("err", derr))
		}
	}
	if err != nil {
		a.opts.Logger.Error("slack command not accepted", slog.String("command", ev.Command), slog.Any("err", err))
		return ephemeral("I couldn't accept `/%s` right now (%s). Please try again.", ev.Command, bot.ErrorMessage(err))
	}
	if res.Duplicate {
		return ephemeral("I already have that `/%s`.", ev.Command)
	}
	if res.WorkItem == nil {
		return ephemeral("`/%s` was recorded but nothing will act on it.", ev.Command)
	}
	return ephemeral("Queued `/%s` as `%s` for *%s*; progress follows in the thread.", ev.Command, res.WorkItem.ID, res.WorkItem.Agent())
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
func (a *Adapter) switchyard(ctx context.Context, cmd slack.SlashCommand, team string) commandResponse {
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
		if err := a.opts.Resetter.ResetThread(ctx, th.Key()); err != nil {
			return ephemeral("Could not reset `%s`: %s", th.Key(), escape(bot.ErrorMessage(err)))
		}
		return ephemeral("Reset `%s`: its next run starts fresh.", th.Key())
	}
	return ephemeral("%s", switchyardHelp)
}

func (a *Adapter) statusCommand(ctx context.Context) commandResponse {
	if a.opts.WorkItems == nil {
		return ephemeral("This Switchyard does not show its work items in Slack yet.")
	}
	var open []bot.WorkItem
	for _, st := range []bot.WorkStatus{bot.StatusRunning, bot.StatusQueued} {
		items, err := a.opts.WorkItems.ListWorkItems(ctx, bot.WorkItemFilter{Status: st, Limit: maxListed})
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
	items, err := a.opts.WorkItems.ListWorkItems(ctx, bot.WorkItemFilter{Limit: maxListed / 2})
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
			now.Sub(w.CreatedAt).Round(time.Second), escape(oneLine(w.Text, 80)))
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
