package tools

import (
	"context"
	"encoding/json"
	"slices"
)

// Call is one tool call on its way to execution: who calls, which tool, with
// what input.
type Call struct {
	CallContext
	Tool  Info
	Input json.RawMessage
}

// Verdict is a policy's answer.
type Verdict string

const (
	Allow         Verdict = "allow"
	Deny          Verdict = "deny"
	NeedsApproval Verdict = "needs_approval" // a person must approve first
)

// Decision is a verdict with the reason the model (and the audit log) reads.
type Decision struct {
	Verdict Verdict
	Reason  string
}

// Policy decides every call before it executes. A Toolset consults it once
// per call; nothing runs unless it answers Allow (or NeedsApproval and an
// Approver approves).
type Policy interface {
	Check(ctx context.Context, call Call) Decision
}

// Approver asks a person about a call the policy wants approved. It blocks
// until the answer, the approval's own timeout, or ctx.
type Approver interface {
	Approve(ctx context.Context, call Call, reason string) (bool, error)
}

// Profiles says what a permission profile forbids.
type Profiles interface {
	Forbids(profile string, t Info) bool
}

// DefaultPolicy enforces visibility: the agent's tools list, what its
// profile forbids, and required_agent. It is what runs until agents/policy
// provides full permission profiles.
type DefaultPolicy struct {
	Profiles Profiles
}

var _ Policy = DefaultPolicy{}

// Check implements Policy.
func (p DefaultPolicy) Check(_ context.Context, call Call) Decision {
	if ok, reason := Visible(call.Tool, call.Scope, p.Profiles); !ok {
		return Decision{Verdict: Deny, Reason: reason}
	}
	return Decision{Verdict: Allow}
}

// Built-in permission profile names.
const (
	ProfileReadOnly    = "read-only"
	ProfileContributor = "contributor"
	ProfileMaintainer  = "maintainer"
	ProfileOps         = "ops"
)

// BuiltinProfiles is the coarse tool-level reading of the built-in profiles,
// by the permissions tools declare: read-only grants read, contributor adds
// write, exec and push, maintainer merge and ci, ops everything. Their finer
// command and path rules belong to agents/policy, so read-only may not call
// bash here, whose commands only that policy can check. A tool that
// declares nothing is forbidden everywhere; an unknown profile reads as
// read-only, so a typo fails closed.
type BuiltinProfiles struct{}

var _ Profiles = BuiltinProfiles{}

// Forbids implements Profiles.
func (BuiltinProfiles) Forbids(profile string, t Info) bool {
	grant := []Permission{PermRead}
	switch profile {
	case "", ProfileContributor:
		grant = []Permission{PermRead, PermWrite, PermExec, PermPush}
	case ProfileMaintainer:
		grant = []Permission{PermRead, PermWrite, PermExec, PermPush, PermMerge, PermCI}
	case ProfileOps:
		grant = AllPermissions()
	default:
		if t.Name == Bash && t.Kind == KindCore {
			return true
		}
	}
	if len(t.Permissions) == 0 {
		return true
	}
	for _, p := range t.Permissions {
		if !slices.Contains(grant, p) {
			return true
		}
	}
	return false
}

// Names returns the built-in profile names, for validating definitions.
func (BuiltinProfiles) Names() []string {
	return []string{ProfileContributor, ProfileMaintainer, ProfileOps, ProfileReadOnly}
}
