package slack

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/switchyard/switchyard/bot"
)

// DefaultGroupTTL is how long a user group's members are reused before
// Slack is asked again.
const DefaultGroupTTL = 5 * time.Minute

// groupMembers remembers the members of user groups for a while.
type groupMembers struct {
	mu sync.Mutex
	// names are the groups access rules name: Options.UserGroups until
	// UseUserGroups replaces them.
	names   []string
	entries map[string]groupEntry
}

// UseUserGroups replaces the user groups access rules name, when the config
// is reloaded; members already looked up are reused.
func (a *Adapter) UseUserGroups(groups []string) {
	a.groups.mu.Lock()
	a.groups.names = slices.Clone(groups)
	a.groups.mu.Unlock()
}

type groupEntry struct {
	members []string
	expires time.Time
}

// ResolveRequester completes a Slack requester with the user groups it
// belongs to among the groups access rules name (Options.UserGroups),
// asking Slack (usergroups.users.list, scope usergroups:read) for each
// group's members at most once every DefaultGroupTTL. Other requesters come
// back as they are. An error means the requester's groups, and so their
// rights, cannot be known.
func (a *Adapter) ResolveRequester(ctx context.Context, r bot.Requester, _ bot.Thread) (bot.Requester, error) {
	a.groups.mu.Lock()
	names := a.groups.names
	a.groups.mu.Unlock()
	if r.Source != bot.SourceSlack || r.ID == "" || len(names) == 0 {
		return r, nil
	}
	r.Groups = nil
	for _, g := range names {
		members, err := a.groupMembers(ctx, g)
		if err != nil {
			return r, fmt.Errorf("members of Slack user group %s: %w", g, err)
		}
		if slices.Contains(members, r.ID) {
			r.Groups = append(r.Groups, g)
		}
	}
	return r, nil
}

func (a *Adapter) groupMembers(ctx context.Context, group string) ([]string, error) {
	now := a.opts.Now()
	a.groups.mu.Lock()
	e, ok := a.groups.entries[group]
	a.groups.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.members, nil
	}
	members, err := a.api.GetUserGroupMembersContext(ctx, group)
	if err != nil {
		return nil, err
	}
	a.groups.mu.Lock()
	if a.groups.entries == nil {
		a.groups.entries = map[string]groupEntry{}
	}
	a.groups.entries[group] = groupEntry{members: members, expires: now.Add(DefaultGroupTTL)}
	a.groups.mu.Unlock()
	return members, nil
}
