package bot

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// NoticeOutbox queues the replies the intake gives people; bot.OutboxStore
// has it. EnqueueNew adds a message only when its key is new, which is what
// makes a notice go out once per thread and reason, across restarts.
type NoticeOutbox interface {
	EnqueueNew(ctx context.Context, msg OutboxMessage) (m OutboxMessage, created bool, err error)
}

// noticeUnknownAgent is the notice reason for naming an agent that does
// not exist; the event still makes its work item for the route it got.
const noticeUnknownAgent = "unknown_agent"

// agentNamer is what a Decider that knows its agents tells; *Router does.
type agentNamer interface {
	Agents() []string
}

// tell gives the author of ev, when they addressed Switchyard (a Slack
// mention or DM, the console, a mention of an agent or a command on
// GitHub), one reply in their thread when nothing will run for them, or
// when they named an agent that does not exist. It is sent at most once per
// thread and reason: the reply's outbox key is made of both, and the
// outbox adds a key only once. Bots are never told. A reply that cannot
// be queued is logged; the event itself is already stored.
func (in *Intake) tell(ctx context.Context, ev *Event, d Decision) {
	if in.opts.Notices == nil || ev.ActorIsBot || ev.Thread.IsZero() {
		return
	}
	addressed := ev.Addressed || d.Route.Kind == RouteMention || d.Route.Kind == RouteCommand
	if !addressed {
		return
	}
	var reason, text, about string
	switch {
	case d.Ignore != nil && d.Ignore.Tell != "":
		reason, text, about = d.Ignore.Code, d.Ignore.Tell, strings.ToLower(d.Ignore.About)
	case d.Ignore == nil && len(d.Route.Unknown) > 0 && !d.Route.Kind.Explicit():
		reason, text = noticeUnknownAgent, in.unknownAgentText(d.Route)
	default:
		return
	}
	msg := OutboxMessage{
		Key:    "notice/" + ev.Thread.Key() + "/" + reason,
		Thread: ev.Thread,
		Kind:   OutboxReply,
		Text:   text,
		Target: ev.SourceRef,
		For:    about,
	}
	told, created, err := in.opts.Notices.EnqueueNew(ctx, msg)
	if err == nil && !created && about != "" && told.For != "" && told.For != about {
		// The thread's reply of this reason spoke to someone else: this
		// person gets one of their own, once.
		msg.Key += "/" + about
		_, created, err = in.opts.Notices.EnqueueNew(ctx, msg)
	}
	if err != nil {
		in.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "reply to the person who asked not queued",
			slog.String("thread", ev.Thread.Key()), slog.String("reason", reason), slog.String("error", err.Error()))
		return
	}
	if created && in.opts.Wake != nil {
		in.opts.Wake()
	}
}

// unknownAgentText says which names are no agents, which agents there are,
// and who has the request now.
func (in *Intake) unknownAgentText(r Route) string {
	var agents []string
	if n, ok := in.rules.Load().router.(agentNamer); ok {
		agents = n.Agents()
	}
	var b strings.Builder
	b.WriteString("There is ")
	b.WriteString(NoAgent(r.Unknown, agents))
	b.WriteString(".")
	if len(agents) > 0 {
		fmt.Fprintf(&b, " The agents here are %s.", joinAnd(agents))
	}
	fmt.Fprintf(&b, " @%s has this one; mention another agent to ask it instead.", r.Agent)
	return b.String()
}

// joinAnd lists names as people write them: "a", "a and b", "a, b and c".
func joinAnd(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
