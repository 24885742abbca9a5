package slack

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/switchyard/switchyard/bot"
)

// Gate is Slack's admission rules (bot.Gate): which of the events addressed
// to the bot make work items. Messages, app mentions and commands are acted
// on; bots, edits, deletions, housekeeping subtypes and people or channels
// outside the allow lists are kept as ingress records. Direct messages are
// governed by the user list alone: a DM channel is never in a channel list.
// Which events concern the bot at all (its own echoes, channel chatter) is
// the adapter's business: those are never stored.
type Gate struct {
	lists atomic.Pointer[allowLists]
	// offline decides events described to explain from the config alone:
	// one that names no author is a person's whose id is not known, so
	// the user allow list is a condition of the decision, not a refusal.
	offline bool
}

// allowLists are the allow lists in effect; nil maps allow everyone.
type allowLists struct {
	channels map[string]bool
	users    map[string]bool
}

var _ bot.Gate = (*Gate)(nil)

// NewGate returns the gate of the allow lists (Slack ids, C… and U…); an
// empty list allows everyone.
func NewGate(allowedChannels, allowedUsers []string) *Gate {
	g := &Gate{}
	g.Allow(allowedChannels, allowedUsers)
	return g
}

// NewOfflineGate returns the gate explain decides with from the config
// alone: as NewGate's, but an event that names no author is taken as a
// person's, and the user allow list, when there is one, is what the
// decision rests on.
func NewOfflineGate(allowedChannels, allowedUsers []string) *Gate {
	g := NewGate(allowedChannels, allowedUsers)
	g.offline = true
	return g
}

// Allow replaces the allow lists at once, when the config is reloaded.
func (g *Gate) Allow(allowedChannels, allowedUsers []string) {
	g.lists.Store(&allowLists{channels: set(allowedChannels), users: set(allowedUsers)})
}

// allowedChannels is the channel allow list in effect; nil allows all.
func (g *Gate) allowedChannels() map[string]bool { return g.lists.Load().channels }

func set(ids []string) map[string]bool {
	if len(ids) == 0 {
		return nil
	}
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// personalSubtypes are the message subtypes people write; other subtypes
// (joins, topic changes, huddles…) are housekeeping.
var personalSubtypes = map[string]bool{"": true, "thread_broadcast": true, "file_share": true, "me_message": true}

// notAllowed is the detail of a refusal by the allow lists.
const notAllowed = "user or channel outside slack.allowed_users / allowed_channels"

// Screen implements bot.Gate.
func (g *Gate) Screen(ev *bot.Event) *bot.IngressReason {
	refuse := func(code, detail string) *bot.IngressReason { return &bot.IngressReason{Code: code, Detail: detail} }
	switch ev.Kind {
	case bot.KindSlackMention, bot.KindSlackMessage, bot.KindSlackCommand:
	default:
		if ev.Kind == "" {
			return refuse(bot.IgnoreUnsupported, "an event without a kind is not acted on")
		}
		return refuse(bot.IgnoreUnsupported, ev.Kind+" is not acted on")
	}
	switch {
	case ev.ActorIsBot:
		return refuse(bot.IgnoreBot, "posted by a bot")
	case ev.Edited:
		return refuse(bot.IgnoreEdited, "an edited message; post a new message to ask again")
	case ev.Deleted:
		return refuse(bot.IgnoreDeleted, "a deleted message")
	case !personalSubtypes[ev.Subtype]:
		return refuse(bot.IgnoreUnsupported, "message subtype "+ev.Subtype)
	case ev.Actor == "" && !g.offline:
		return refuse(bot.IgnoreUnsupported, "message without a user")
	case !g.allowed(ev.Channel, ev.Actor):
		r := refuse(bot.IgnoreNotAllowed, notAllowed)
		r.Tell = refusalText
		return r
	case ev.Kind == bot.KindSlackCommand && ev.Command == switchyardCommand:
		return refuse(bot.IgnoreAnswered, "/switchyard is answered at once, by no agent")
	}
	return nil
}

// Admit implements bot.Gate: on Slack, whoever passed the allow lists may
// ask any agent. Offline, an author not named is in the user allow list
// on condition.
func (g *Gate) Admit(_ context.Context, ev *bot.Event, _ bot.Route) (*bot.IngressReason, string, error) {
	if g.offline && ev.Actor == "" && g.lists.Load().users != nil {
		return nil, "the author is in slack.allowed_users", nil
	}
	return nil, "", nil
}

// allowed applies the allow lists. Offline, an author not named passes
// the user list (see Admit).
func (g *Gate) allowed(channel, user string) bool {
	l := g.lists.Load()
	if l.users != nil && !l.users[user] && !(g.offline && user == "") {
		return false
	}
	if l.channels != nil && !isDM(channel) && !l.channels[channel] {
		return false
	}
	return true
}

// isDM reports whether a channel id is a direct message's.
func isDM(channel string) bool { return strings.HasPrefix(channel, "D") }
