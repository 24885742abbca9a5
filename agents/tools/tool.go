package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
)

// Kind says where a tool comes from; visibility rules differ by kind.
type Kind string

const (
	KindCore        Kind = "core"        // built in: files and shell in the workspace
	KindIntegration Kind = "integration" // a connected platform's tool: github_*, slack_*
	KindCommand     Kind = "command"     // a package's command tool
	KindAgent       Kind = "agent"       // agent_<name>: another agent called as a tool
	KindControl     Kind = "control"     // runtime controls: handoff_to, and later enable_skill, spawn_subagent
)

// Info describes a tool: what the model is told and what visibility needs.
type Info struct {
	Name        string
	Description string
	// Schema is the JSON schema of the input, an object.
	Schema json.RawMessage
	Kind   Kind
	// Permissions are what the tool needs at the least, declared by the
	// tool itself (by a package's manifest for command tools), never
	// guessed from its name. A tool that declares none is refused at
	// registration and by the policy.
	Permissions []Permission
	// Package names the package that contributed a command tool.
	Package string
	// RequiredAgent, when set, is the only agent that may see and call it.
	RequiredAgent string
	// Approval marks a tool every call of which waits for a person's
	// approval, unless the profile's tools list names it: what it does
	// reaches beyond the run (installing a package into the daemon).
	Approval bool
}

// Tool is a named, schema-typed capability an agent may call. Run gets the
// input as the model sent it and returns the text the model reads. Return a
// *RefusedError (see Refuse) for a call that must not happen, such as a path
// outside the workspace; any other error is reported as a failure.
type Tool interface {
	Info() Info
	Run(ctx context.Context, cc CallContext, input json.RawMessage) (string, error)
}

// Scope is the calling agent and what its definition allows.
type Scope struct {
	Agent string
	// Tools is the agent's tools list; empty means every core, agent and
	// control tool and its own package's command tools.
	Tools   []string
	Profile string
	// Package is the package that contributed the agent, "" otherwise.
	Package string
	// Loaded are the tools the skills the agent has loaded allow: they are
	// merged into what it may see and call beside its tools list. Loading
	// a skill never widens the rights the profile and ceilings give.
	Loaded []string
	// Ceilings bound the profile: a call must be allowed by the profile
	// and by each of them. They come from who asked for the work (access:
	// in the config) and from the agents that called this one or handed
	// it the work, so rights never widen down a chain.
	Ceilings []bot.Ceiling
}

// CallContext is what a tool knows about the run that calls it.
type CallContext struct {
	Scope
	SessionKey    string
	JobID         string
	WorkItemID    string
	CorrelationID string
	// Workspace is the absolute directory file and shell tools are confined
	// to; "" when the run has none.
	Workspace string
	// CallID is the model's id for this call.
	CallID string
	// Requester is who asked for the work, for the audit log.
	Requester bot.Requester
	// Owner may manage what the call starts across runs (a background
	// task); Creator started it, for receipts.
	Owner   bot.Owner
	Creator bot.Creator
}

// RefusedError is a call refused before anything executed.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "refused: " + e.Reason }

// Refuse returns a *RefusedError with a formatted reason.
func Refuse(format string, args ...any) error {
	return &RefusedError{Reason: fmt.Sprintf(format, args...)}
}

// IsRefused reports whether err is a refusal.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}

// DecodeInput reads a tool's input into v strictly: a misspelt field is an
// error the model can correct, not a silently ignored option. No input
// reads as {}.
func DecodeInput(input json.RawMessage, v any) error {
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid input: %w", err)
	}
	return nil
}

// ValidName reports whether name can be sent to every provider as a tool
// name.
// Package manifests name tools too, so the rule is the skills package's.
func ValidName(name string) bool { return skills.ValidToolName(name) }

// Registry is every tool the daemon knows: core tools and package command
// tools. Agent and control tools are made per run and passed to NewToolset.
// Packages may be installed while the daemon runs, so it is safe for
// concurrent use.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]Tool
}

// NewRegistry returns a registry holding ts.
func NewRegistry(ts ...Tool) (*Registry, error) {
	r := &Registry{tools: map[string]Tool{}}
	for _, t := range ts {
		if err := r.Register(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds t. Names are unique; the agent_ prefix belongs to agent
// tools.
func (r *Registry) Register(t Tool) error {
	info := t.Info()
	if !ValidName(info.Name) {
		return fmt.Errorf("register tool %q: name must be 1-64 letters, digits, '_' or '-'", info.Name)
	}
	if strings.HasPrefix(info.Name, "agent_") && info.Kind != KindAgent {
		return fmt.Errorf("register tool %q: the agent_ prefix is reserved for agents called as tools", info.Name)
	}
	if err := validSchema(info.Schema); err != nil {
		return fmt.Errorf("register tool %q: %w", info.Name, err)
	}
	if err := checkDeclared(info.Permissions); err != nil {
		return fmt.Errorf("register tool %q: %w", info.Name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[info.Name]; dup {
		return fmt.Errorf("register tool %q: a tool of that name is already registered", info.Name)
	}
	r.tools[info.Name] = t
	return nil
}

// Unregister removes a tool, for packages that are uninstalled.
func (r *Registry) Unregister(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.tools, name)
}

// Get returns the tool of that name.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// Names returns every registered name, sorted: what agent definitions are
// validated against.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.tools))
	for n := range r.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// List returns the Info of every tool, sorted by name.
func (r *Registry) List() []Info {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Info, 0, len(r.tools))
	for _, t := range r.tools {
		out = append(out, t.Info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (r *Registry) snapshot() []Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Tool, 0, len(r.tools))
	for _, t := range r.tools {
		out = append(out, t)
	}
	return out
}

func validSchema(s json.RawMessage) error {
	var v struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(s, &v); err != nil {
		return fmt.Errorf("input schema: %w", err)
	}
	if v.Type != "object" {
		return fmt.Errorf("input schema: type must be \"object\", not %q", v.Type)
	}
	return nil
}

// Visible reports whether an agent in scope s may see and call t, and if not,
// why, in words the model reads. It is the visibility rule listing and
// DefaultPolicy share.
func Visible(t Info, s Scope, p Profiles) (bool, string) {
	if t.RequiredAgent != "" && t.RequiredAgent != s.Agent {
		return false, fmt.Sprintf("tool %q may only be called by agent %q (required_agent), not by %q", t.Name, t.RequiredAgent, s.Agent)
	}
	loaded := skills.MatchTool(s.Loaded, t.Name)
	if len(s.Tools) > 0 {
		if !slices.Contains(s.Tools, t.Name) && !loaded {
			return false, fmt.Sprintf("tool %q is not in the tools list of agent %q", t.Name, s.Agent)
		}
	} else if t.Kind == KindCommand && !(t.Package != "" && t.Package == s.Package) && t.RequiredAgent != s.Agent && !loaded {
		return false, fmt.Sprintf("tool %q comes from package %q and agent %q does not list it in its tools", t.Name, t.Package, s.Agent)
	}
	if p != nil && p.Forbids(s.Profile, t) {
		return false, fmt.Sprintf("tool %q is forbidden by profile %q of agent %q", t.Name, s.Profile, s.Agent)
	}
	for _, c := range s.Ceilings {
		if p != nil && p.Forbids(c.Profile, t) {
			return false, fmt.Sprintf("tool %q is forbidden by the ceiling %q (%s)", t.Name, c.Profile, c.Reason)
		}
	}
	return true, ""
}
