package github

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	gh "github.com/google/go-github/v60/github"

	"github.com/switchyard/switchyard/bot"
)

// GateOptions configure GitHub's admission rules.
type GateOptions struct {
	// Client asks GitHub for requesters' permissions. Required unless
	// Offline: without it a mention or a command cannot be authorised and
	// its delivery is answered 502.
	Client *Client
	// Offline checks no permission: a decision that needs one says what it
	// needs instead (explain run from the config file alone).
	Offline bool
	// AppSlug is the App's slug: events by "<slug>[bot]" are always
	// ignored, so Switchyard never answers itself.
	AppSlug string
	// AllowBots lists bot logins ("dependabot[bot]" or "dependabot") whose
	// events are treated like people's; they skip the permission check.
	AllowBots []string
	// MinPermission a person needs on the repository for a mention or a
	// command to make a work item; DefaultMinPermission when empty. An
	// invalid value is logged and taken as admin, the strictest (validate
	// config with ParsePermission).
	MinPermission Permission
	// PermissionTTL is how long a permission answer is reused;
	// DefaultPermissionTTL when zero.
	PermissionTTL time.Duration
	// LookupTimeout bounds one permission lookup; DefaultLookupTimeout when
	// zero.
	LookupTimeout time.Duration
	Logger        *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

// Gate is GitHub's admission rules (bot.Gate): which deliveries make work
// items. The webhook's intake and explain share it.
//
//   - Only issues, pull requests, their comments and reviews are acted on;
//     deletions and other events are kept as ingress records.
//   - Bots are ignored unless listed in AllowBots; the App itself always is.
//   - An edited comment counts only for the mentions the edit added.
//   - Only explicit requests make work: a mention of an agent, a command or
//     a rule. Everything else, including a follow-up comment in a thread an
//     agent works in, needs one of them.
//   - A mention or a command needs MinPermission on the repository.
//   - A new comment "/approve <id>" or "/deny <id>" by a person decides an
//     approval and makes no work item; a bot's is ignored. The daemon asks
//     PermissionNow whether the commenter has MinPermission before it
//     counts.
type Gate struct {
	opts  GateOptions
	rules atomic.Pointer[gateRules]
	perms *permissionCache
}

// gateRules are the settings Configure replaces.
type gateRules struct {
	appSlug   string
	allowBots map[string]bool
	min       Permission
}

var _ bot.Gate = (*Gate)(nil)

// NewGate returns the gate opts describe.
func NewGate(opts GateOptions) *Gate {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PermissionTTL <= 0 {
		opts.PermissionTTL = DefaultPermissionTTL
	}
	if opts.LookupTimeout <= 0 {
		opts.LookupTimeout = DefaultLookupTimeout
	}
	g := &Gate{opts: opts, perms: newPermissionCache(opts.PermissionTTL, defaultPermissionSize)}
	g.Configure(opts.AppSlug, opts.AllowBots, opts.MinPermission)
	return g
}

// Configure replaces the App's slug, the allowed bots and the permission a
// person needs at once, when the config is reloaded; GateOptions describes
// each. Permissions already looked up stay cached: they are GitHub's, not
// the config's.
func (g *Gate) Configure(appSlug string, allowBots []string, min Permission) {
	if min == "" {
		min = DefaultMinPermission
	}
	if p, err := ParsePermission(string(min)); err != nil {
		g.opts.Logger.Error("github.min_permission is invalid; only admins may ask for work",
			slog.String("min_permission", string(min)))
		min = PermissionAdmin
	} else {
		min = p
	}
	r := &gateRules{appSlug: appSlug, allowBots: map[string]bool{}, min: min}
	for _, b := range allowBots {
		b = strings.ToLower(b)
		r.allowBots[b] = true
		r.allowBots[strings.TrimSuffix(b, "[bot]")+"[bot]"] = true
	}
	g.rules.Store(r)
}

// kindParts splits "github.<event>.<action>".
func kindParts(kind string) (event, action string) {
	rest, _ := strings.CutPrefix(kind, "github.")
	event, action, _ = strings.Cut(rest, ".")
	return event, action
}

// Screen implements bot.Gate: what the delivery alone decides.
func (g *Gate) Screen(ev *bot.Event) *bot.IngressReason {
	event, action := kindParts(ev.Kind)
	switch {
	case event == "installation" || event == "installation_repositories":
		return &bot.IngressReason{Code: bot.IgnoreUnsupported,
			Detail: "installation events make no work item; they change which repositories the App may act on"}
	case !supported(event, action) && action == "deleted":
		return &bot.IngressReason{Code: bot.IgnoreDeleted, Detail: ev.Kind + " is a deletion"}
	case !supported(event, action):
		return &bot.IngressReason{Code: bot.IgnoreUnsupported, Detail: kindName(ev.Kind) + " is not acted on"}
	}
	if detail := g.botDetail(ev); detail != "" {
		return &bot.IngressReason{Code: bot.IgnoreBot, Detail: detail}
	}
	if c, ok := approvalComment(ev); ok {
		if ev.ActorIsBot {
			// Even an allowed bot: an approval is a person's to give.
			return &bot.IngressReason{Code: bot.IgnoreBot, Detail: "bot " + ev.Actor + " cannot decide approvals"}
		}
		if ev.Actor == "" && !g.opts.Offline {
			return &bot.IngressReason{Code: bot.IgnoreUnauthorized, Detail: "the delivery names no sender to decide an approval as"}
		}
		verb := "deny"
		if c.Approve {
			verb = "approve"
		}
		who := "the author"
		if ev.Actor != "" {
			who = "@" + ev.Actor
		}
		return &bot.IngressReason{Code: bot.IgnoreApproval,
			Detail: fmt.Sprintf("%s asks to %s %s; the decision is in the audit log", who, verb, cmp.Or(c.ApprovalID, "(no id)"))}
	}
	if action == "edited" && isComment(event) && len(ev.Mentions) == 0 {
		return &bot.IngressReason{Code: bot.IgnoreEdited, Detail: "the edit adds no mention"}
	}
	return nil
}

func kindName(kind string) string {
	if kind == "" || kind == "github." {
		return "an event without a kind"
	}
	return kind
}

func isComment(event string) bool {
	return event == "issue_comment" || event == "pull_request_review_comment"
}

// botDetail says why ev's actor is a bot Switchyard does not listen to, or "".
func (g *Gate) botDetail(ev *bot.Event) string {
	login := strings.ToLower(ev.Actor)
	r := g.rules.Load()
	if r.appSlug != "" && login == strings.ToLower(r.appSlug)+"[bot]" {
		return "sent by Switchyard itself"
	}
	if ev.ActorIsBot && !r.allowBots[login] {
		return "sent by bot " + ev.Actor + ", not in github.allow_bots"
	}
	return ""
}

// Admit implements bot.Gate: only explicit requests make work, and a
// person who asks an agent by name needs MinPermission. The permission
// looked up is recorded as the requester's.
func (g *Gate) Admit(ctx context.Context, ev *bot.Event, route bot.Route) (*bot.IngressReason, string, error) {
	if r := editAsks(ev, route); r != nil {
		return r, "", nil
	}
	if !route.Kind.Explicit() {
		detail := "no mention, command or rule matched"
		if len(route.Unknown) > 0 {
			// A person, most likely, but a misspelt agent reads the same.
			detail += "; " + bot.NoAgent(route.Unknown, nil)
		}
		if ev.Command != "" {
			// Another bot's, most likely, but a misspelt command reads
			// the same.
			detail += "; /" + ev.Command + " is not a command (routing.commands)"
		}
		return &bot.IngressReason{Code: bot.IgnoreNoRoute, Detail: detail}, "", nil
	}
	if ev.ActorIsBot || (route.Kind != bot.RouteMention && route.Kind != bot.RouteCommand) {
		// Allowed bots are trusted by configuration; rules are the
		// configuration's own request.
		return nil, "", nil
	}
	repo := cmp.Or(ev.Repo, "the repository")
	min := g.rules.Load().min
	if g.opts.Offline {
		if perm, err := ParsePermission(ev.Requester.Permission); err == nil && ev.Requester.Permission != "" {
			// Given with the event (explain --permission): a fact, not a
			// condition.
			return admitted(ev, perm, min, repo), "", nil
		}
		who := "the author"
		if ev.Actor != "" {
			who = "@" + ev.Actor
		}
		return nil, fmt.Sprintf("%s has %s permission on %s (github.min_permission; not checked offline)", who, min, repo), nil
	}
	if ev.Actor == "" {
		// Nobody to ask about, and nobody to tell.
		return &bot.IngressReason{Code: bot.IgnoreUnauthorized,
			Detail: fmt.Sprintf("the delivery names no sender, so nobody can be checked for %s permission on %s", min, repo)}, "", nil
	}
	perm, err := g.Permission(ctx, ev)
	if err != nil {
		return nil, "", &lookupError{err}
	}
	// The permission was looked up anyway: the run's ceiling needs it.
	ev.Requester.Permission = string(perm)
	return admitted(ev, perm, min, repo), "", nil
}

// admitted refuses ev's mention or command when its author's permission
// is below min, and says so in words its author is told.
func admitted(ev *bot.Event, perm, min Permission, repo string) *bot.IngressReason {
	if perm.AtLeast(min) {
		return nil
	}
	who := cmp.Or(ev.Actor, "the author")
	return &bot.IngressReason{Code: bot.IgnoreUnauthorized,
		Detail: fmt.Sprintf("%s has %s permission on %s, %s is required", who, perm, repo, min),
		Tell: fmt.Sprintf("Sorry @%s, only people with %s access to %s can ask Switchyard for work.",
			ev.Actor, min, repo),
		About: ev.Actor,
	}
}

// editAsks refuses what an edit did not add. An edit asks only for the
// agents it mentions anew (its event's mentions are those it added): the
// command and the text of the body were there before and were acted on
// then, so an edit that adds "cc @bob" to a "/deploy prod" comment deploys
// nothing again. An issue or pull request edit still matches rules, which
// read its labels; a comment edit matches none. What asks for nobody is
// left to the no_route answer every event gets.
func editAsks(ev *bot.Event, route bot.Route) *bot.IngressReason {
	// By its kind, as Screen reads an edit: explain describes an edit by
	// its kind alone.
	event, action := kindParts(ev.Kind)
	if action != "edited" && !ev.Edited || !route.Kind.Explicit() || route.Kind == bot.RouteMention || route.Kind == bot.RouteRule && !isComment(event) {
		return nil
	}
	detail := "the edit adds no mention of an agent"
	if len(route.Unknown) > 0 {
		detail += "; " + bot.NoAgent(route.Unknown, nil)
	}
	return &bot.IngressReason{Code: bot.IgnoreEdited, Detail: detail}
}

// MinPermission is what a person needs to ask for work.
func (g *Gate) MinPermission() Permission { return g.rules.Load().min }

// Permission returns ev's actor's permission on ev's repository, from the
// cache or from GitHub within LookupTimeout.
func (g *Gate) Permission(ctx context.Context, ev *bot.Event) (Permission, error) {
	if p, ok := g.perms.get(permissionKey(ev.Repo, ev.Actor), g.opts.Now()); ok {
		return p, nil
	}
	return g.PermissionNow(ctx, ev)
}

// PermissionNow is Permission asked of GitHub whatever the cache holds, for
// a decision a demotion minutes ago must already count for (an approval);
// the answer refreshes the cache.
func (g *Gate) PermissionNow(ctx context.Context, ev *bot.Event) (Permission, error) {
	key := permissionKey(ev.Repo, ev.Actor)
	ctx, cancel := context.WithTimeout(ctx, g.opts.LookupTimeout)
	defer cancel()
	c, err := clientFor(ctx, g.opts.Client, ev)
	if err != nil {
		return "", err
	}
	p, err := lookupPermission(ctx, c, ev.Thread.Owner, ev.Thread.Repo, ev.Actor)
	if err != nil {
		return "", closeTokenError(err)
	}
	g.perms.put(key, p, g.opts.Now())
	return p, nil
}

// ResolveRequester completes a GitHub requester whose permission was not
// looked up at intake (work a rule started, an allowed bot's): through the
// same cached lookup as mentions and commands, on the thread's repository.
// Other requesters, and threads not on GitHub, come back as they are.
func (g *Gate) ResolveRequester(ctx context.Context, r bot.Requester, th bot.Thread) (bot.Requester, error) {
	if r.Source != bot.SourceGitHub || r.Permission != "" || r.ID == "" || th.Source != bot.SourceGitHub || g.opts.Offline {
		return r, nil
	}
	perm, err := g.Permission(ctx, &bot.Event{Repo: th.Owner + "/" + th.Repo, Actor: r.ID, Thread: th})
	if err != nil {
		return r, err
	}
	r.Permission = string(perm)
	return r, nil
}

// clientFor returns the client of ev's installation; events from a
// repository webhook carry none, so the repository is looked up.
func clientFor(ctx context.Context, client *Client, ev *bot.Event) (*gh.Client, error) {
	if client == nil {
		return nil, errors.New("no GitHub App is configured (github.app_id)")
	}
	if ev.InstallationID > 0 {
		return client.Installation(ev.InstallationID)
	}
	c, _, err := client.ForRepo(ctx, ev.Thread.Owner, ev.Thread.Repo)
	return c, err
}
