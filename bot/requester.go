package bot

import "strings"

// Requester is who asked for a work item: the person, or the schedule, whose
// rights bound what the agents working on it may do. Sources fill it when
// they normalise an event; what they could not know then (a GitHub
// permission nobody looked up, Slack user groups) is completed when a run
// starts.
type Requester struct {
	// Source is where the request came from: github, slack, local or
	// schedule.
	Source string `json:"source"`
	// ID names the requester on that source: a GitHub login, a Slack member
	// id, the local console's user, a schedule's name.
	ID string `json:"id,omitempty"`
	// Name is how the source displays the requester, when it says.
	Name string `json:"name,omitempty"`
	// Permission is a GitHub requester's permission on the repository
	// (none, read, triage, write, maintain, admin), or "" when it was not
	// looked up yet.
	Permission string `json:"permission,omitempty"`
	// Team is a Slack requester's workspace id: their own, which is not the
	// bot's when External.
	Team string `json:"team,omitempty"`
	// External marks a Slack requester from another workspace, writing in
	// a channel shared with it (Slack Connect): no member of the bot's.
	External bool `json:"external,omitempty"`
	// Groups are the Slack user groups the requester belongs to, among
	// those access rules name. They are looked up when a run starts and
	// never stored.
	Groups []string `json:"-"`
}

// IsZero reports whether r names nobody: events stored before requesters
// were recorded, or from a source that knows no one.
func (r Requester) IsZero() bool { return r.Source == "" && r.ID == "" }

// Handle is how the requester is named in text people read: "@alice" for a
// GitHub login, Slack member or console user ("@ana (token ci)" when a
// console client wrote another name than its token's), "schedule weekday-triage" for
// a schedule, "nobody known" for a zero Requester.
func (r Requester) Handle() string {
	switch {
	case r.IsZero():
		return "nobody known"
	case r.Source == SourceSchedule:
		return "schedule " + r.ID
	case r.ID == "":
		return "an unnamed " + r.Source + " user"
	case r.Source == SourceLocal && r.Name != "" && r.Name != r.ID:
		// A console requester is its API token; the name the client
		// wrote is said too, so the thread reads as it was asked.
		return "@" + strings.TrimPrefix(r.Name, "@") + " (token " + r.ID + ")"
	}
	return "@" + strings.TrimPrefix(r.ID, "@")
}

// Ceiling is a permission profile that bounds an agent's own: a call runs
// only if the agent's profile and every ceiling of its run allow it. The
// requester's access gives the first; agents that call others or hand work
// on add their own effective rights, so rights never widen down a chain.
type Ceiling struct {
	// Profile names a permission profile.
	Profile string `json:"profile"`
	// Reason says where the ceiling comes from, for people: "requested by
	// @stranger, read access", "called by @reviewer (read-only)".
	Reason string `json:"reason"`
	// Skills, when set, bound the run as the skills of the run that spawned
	// it did (those it could not unload): a call must be one they allow
	// too, so a run cannot be rid of its skills by spawning.
	Skills []SkillRule `json:"skills,omitempty"`
}

// SkillRule is what one skill allows and forbids, as a ceiling keeps it.
// AllowedTools is explicit: empty allows no tool.
type SkillRule struct {
	Name           string   `json:"name"`
	AllowedTools   []string `json:"allowed_tools"`
	ForbiddenTools []string `json:"forbidden_tools,omitempty"`
}

// EffectiveRights are what an agent may do in a run: its own profile
// narrowed by every ceiling of the run, and why, in words. Profile names the
// narrowest profile when one of them is; otherwise it joins them with " ∩ ".
type EffectiveRights struct {
	Profile string `json:"profile"`
	Reason  string `json:"reason"`
}

// String is how people read it: "read-only: requested by @stranger, read
// access".
func (r EffectiveRights) String() string {
	if r.Reason == "" {
		return r.Profile
	}
	return r.Profile + ": " + r.Reason
}
