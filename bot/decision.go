package bot

import (
	"context"
	"strings"
	"time"
)

// Decision is what the intake does with an event: a work item for
// Route.Agent, or, when Ignore is set, an ingress record with the reason.
// One function makes it (Intake.Decide), for the intake and for explain.
type Decision struct {
	// Route is the routing decision. It is zero when the source's gate
	// refused the event before it was routed.
	Route Route
	// Ignore says why the event makes no work item; nil when it makes one.
	Ignore *IngressReason
	// Needs names a condition the decision rests on that could not be
	// checked where it was made, such as a GitHub requester's permission
	// when explain runs offline; "" when everything was checked.
	Needs string
}

// WorkItem reports whether the decision makes a work item.
func (d Decision) WorkItem() bool { return d.Ignore == nil }

// A Gate is a source's own rules on which of its events may make work
// items: kinds it does not act on, bots, edits, people and channels outside
// allow lists, permissions. Intake.Decide applies it for the source it is
// registered for, around the router.
type Gate interface {
	// Screen applies the rules the event alone decides, before it is
	// routed. It returns why the event makes no work item, or nil.
	Screen(ev *Event) *IngressReason
	// Admit applies the rules that depend on the route (who may ask an
	// agent by name, which routes a source acts on), after routing. It
	// returns why the event makes no work item, or nil, and needs, a
	// condition it could not check (see Decision.Needs). An error means
	// the answer could not be had (a platform lookup failed): the event
	// is not acknowledged, so its source delivers it again.
	Admit(ctx context.Context, ev *Event, route Route) (refusal *IngressReason, needs string, err error)
}

// Explanation is explain's answer, for people and scripts: what intake
// would do with an event. With a work item, Agent, Kind, Reason and Rule
// are the route's; without one, Agent, Kind and Rule are empty, Reason
// says why in words and Ingress is the reason code the ingress record
// carries.
type Explanation struct {
	WorkItem bool      `json:"work_item"`
	Agent    string    `json:"agent"`
	Kind     RouteKind `json:"kind"`
	Reason   string    `json:"reason"`
	Rule     string    `json:"rule"`
	// Origin is the package whose entry point decided ("package:<name>");
	// empty for the config and the built-in commands.
	Origin string `json:"origin,omitempty"`
	// Skills are those the run would start with loaded: the entry point's.
	Skills  []string `json:"skills,omitempty"`
	Ingress string   `json:"ingress,omitempty"`
	Needs   string   `json:"needs,omitempty"`
	// Rights are what the agent may do for the event's requester, and
	// why, when a work item is made and they can be told.
	Rights *EffectiveRights `json:"rights,omitempty"`
}

// Explain returns the explanation of d.
func (d Decision) Explain() Explanation {
	if d.Ignore != nil {
		return Explanation{Reason: d.Ignore.Detail, Ingress: d.Ignore.Code, Needs: d.Needs}
	}
	r := d.Route
	return Explanation{WorkItem: true, Agent: r.Agent, Kind: r.Kind, Reason: r.Reason, Rule: r.Rule, Origin: r.Origin, Skills: r.Skills, Needs: d.Needs}
}

// String renders the explanation on one line: "coder (mention @coder)",
// or "no work item (no_route): no mention, command or rule matched".
func (e Explanation) String() string {
	var s string
	if e.WorkItem {
		s = e.Agent + " (" + e.Reason + ")"
		if len(e.Skills) > 0 {
			s += " with skills " + strings.Join(e.Skills, ", ")
		}
	} else {
		s = "no work item (" + e.Ingress + "): " + e.Reason
	}
	if e.Needs != "" {
		s += ", if " + e.Needs
	}
	if e.Rights != nil {
		s += "; rights " + e.Rights.String()
	}
	return s
}

// Decide returns what Ingest does with ev, without storing anything: the
// source's gate screens it, the router routes it, an agent with work in the
// thread keeps its thread unless a mention, a command or a rule asks for
// another, and the gate admits the route or refuses it. Ingest and explain
// both call it, so explain can never disagree with the intake.
func (in *Intake) Decide(ctx context.Context, ev *Event) (Decision, error) {
	return in.decide(ctx, ev, time.Time{}, nil)
}

// DecideWith decides ev as Decide does, but routed by router instead of
// the router in effect, and with the threads as they were at asOf (zero:
// now; see Replay): what a change of the rules would decide, before it is
// made. Nothing is stored.
func (in *Intake) DecideWith(ctx context.Context, ev *Event, router Decider, asOf time.Time) (Decision, error) {
	return in.decide(ctx, ev, asOf, router)
}

// decide decides with the threads as they are now, or, when asOf is set,
// as they were then: only work items made before asOf count, unfinished if
// they finished after it. A router of nil is the one in effect.
func (in *Intake) decide(ctx context.Context, ev *Event, asOf time.Time, router Decider) (Decision, error) {
	ev.FillFromText()
	gate := in.opts.Gates[ev.Source]
	if gate != nil {
		if refusal := gate.Screen(ev); refusal != nil {
			return Decision{Ignore: refusal}, nil
		}
	}
	rules := in.rules.Load()
	if router == nil {
		router = rules.router
	}
	route := router.Route(ev)
	// Mentions, commands and rules ask for an agent explicitly; anything
	// else in a thread an agent works in is for that agent.
	if !route.Kind.Explicit() && in.opts.Threads != nil && !ev.Thread.IsZero() {
		owner, ok, gone := in.owner(ctx, ev, asOf, rules.threadWindow, router)
		switch {
		case ok:
			owner.Unknown = route.Unknown
			route = owner
		case gone != "":
			route.Reason += "; @" + gone + ", who had work in this thread, is no agent now"
		}
	}
	d := Decision{Route: route}
	if gate != nil {
		refusal, needs, err := gate.Admit(ctx, ev, route)
		if err != nil {
			return Decision{}, err
		}
		d.Ignore, d.Needs = refusal, needs
	}
	return d, nil
}

// Replay is explain for a stored event: what was decided when it arrived,
// and what the config in effect now decides for it.
type Replay struct {
	Source     string      `json:"source"`
	Kind       string      `json:"kind"`
	DeliveryID string      `json:"delivery_id,omitempty"`
	Thread     Thread      `json:"thread"`
	WorkItemID string      `json:"work_item_id,omitempty"` // what it made then
	IngressID  string      `json:"ingress_id,omitempty"`
	Then       Explanation `json:"then"`
	Now        Explanation `json:"now"`
	// Differs says the decision now is not the one made then: a work item
	// or none, another agent, another kind of route, another rule or
	// another ingress reason (reasons are words for people and may differ
	// in detail without that).
	Differs bool `json:"differs"`
}

// Replay decides ev, the stored event of what was made then (a work item
// or an ingress record), again, against the config and the agents in effect
// now, with its thread as it was when the event came. Nothing is stored.
func (in *Intake) Replay(ctx context.Context, then IngestResult, ev *Event) (Replay, error) {
	r := Replay{Source: ev.Source, Kind: ev.Kind, DeliveryID: ev.DeliveryID, Thread: ev.Thread}
	switch {
	case then.WorkItem != nil && then.WorkItem.ParentID != "":
		return Replay{}, Errorf(EINVALID, "%s was made by an agent's run in %s, not routed from an event", then.WorkItem.ID, then.WorkItem.ParentID)
	case then.WorkItem != nil && then.WorkItem.Route.Kind == RouteSchedule:
		return Replay{}, Errorf(EINVALID, "%s was made by %s, not routed from an event", then.WorkItem.ID, then.WorkItem.Route.Reason)
	case then.WorkItem != nil:
		wi := then.WorkItem
		route := wi.Route
		if wi.FirstRoute != nil {
			route = *wi.FirstRoute
		}
		r.WorkItemID, r.Then = wi.ID, Decision{Route: route}.Explain()
	case then.Ingress != nil:
		in := then.Ingress
		r.IngressID, r.Then = in.ID, Explanation{Reason: in.Detail, Ingress: in.Reason}
	default:
		return Replay{}, Errorf(EINVALID, "replay: nothing was made of the event")
	}
	again := *ev
	d, err := in.decide(ctx, &again, ev.ReceivedAt, nil)
	if err != nil {
		return Replay{}, err
	}
	r.Now = d.Explain()
	t, n := r.Then, r.Now
	r.Differs = t.WorkItem != n.WorkItem || t.Agent != n.Agent || t.Kind != n.Kind || t.Rule != n.Rule || t.Ingress != n.Ingress
	return r, nil
}
