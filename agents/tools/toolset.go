package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/bot"
)

// DefaultMaxOutput caps what one tool call returns to the model.
const DefaultMaxOutput = 32 << 10

// ToolsetOptions configure a Toolset.
type ToolsetOptions struct {
	// Policy decides every call; nil means DefaultPolicy with Profiles.
	Policy Policy
	// Profiles decide what is listed; nil forbids nothing.
	Profiles Profiles
	// Approver answers NeedsApproval; nil refuses such calls.
	Approver Approver
	// Extra are tools of this run only: agent_<name> and control tools.
	Extra []Tool
	// Hide, when set, leaves out of the listing tools the policy would
	// refuse for reasons visibility cannot see (the skills the agent has
	// loaded); calling one is still decided by the policy.
	Hide func(Info) bool
	// MaxOutput caps a result; 0 means DefaultMaxOutput.
	MaxOutput int
	// Redactor masks secrets in every result before the model reads it;
	// nil masks common token shapes only.
	Redactor *bot.Redactor
	Logger   *slog.Logger
}

// Toolset is what one agent's run calls through: the tools it is shown and
// the single path every call takes to execution.
type Toolset struct {
	scope    Scope
	tools    map[string]entry
	visible  []Info
	policy   Policy
	approver Approver
	max      int
	redact   *bot.Redactor
	log      *slog.Logger
}

type entry struct {
	tool Tool
	info Info
}

// NewToolset returns the toolset of an agent in scope s over the tools of r
// (nil: none) and opts.Extra. An extra tool shadows a registered one of the
// same name.
func NewToolset(r *Registry, s Scope, opts ToolsetOptions) *Toolset {
	ts := &Toolset{
		scope:    s,
		tools:    map[string]entry{},
		policy:   opts.Policy,
		approver: opts.Approver,
		max:      opts.MaxOutput,
		redact:   opts.Redactor,
		log:      opts.Logger,
	}
	if ts.policy == nil {
		ts.policy = DefaultPolicy{Profiles: opts.Profiles}
	}
	if ts.max <= 0 {
		ts.max = DefaultMaxOutput
	}
	if ts.log == nil {
		ts.log = slog.New(slog.DiscardHandler)
	}
	var all []Tool
	if r != nil {
		all = r.snapshot()
	}
	for _, t := range append(all, opts.Extra...) {
		info := t.Info()
		ts.tools[info.Name] = entry{tool: t, info: info}
	}
	for _, e := range ts.tools {
		if ok, _ := Visible(e.info, s, opts.Profiles); ok && (opts.Hide == nil || !opts.Hide(e.info)) {
			ts.visible = append(ts.visible, e.info)
		}
	}
	slices.SortFunc(ts.visible, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return ts
}

// Visible returns the tools the agent is shown, sorted by name.
func (ts *Toolset) Visible() []Info { return ts.visible }

// Result is the outcome of one call, as the model will read it.
type Result struct {
	Output string
	// IsError marks a failure or a refusal.
	IsError bool
	// Refused means nothing executed.
	Refused  bool
	Duration time.Duration
}

// Execute runs one call: the tool must exist, the policy must allow it, and
// only then does it run. Refusals and failures come back as a Result the
// model reads, never as a Go error. Whatever the tool returns, secrets are
// masked before the model reads it.
func (ts *Toolset) Execute(ctx context.Context, cc CallContext, name string, input json.RawMessage) Result {
	cc.Scope = ts.scope
	res := ts.execute(WithCall(ctx, cc), cc, name, input)
	res.Output = ts.finish(res.Output)
	return res
}

func (ts *Toolset) execute(ctx context.Context, cc CallContext, name string, input json.RawMessage) Result {
	cc.Scope = ts.scope
	e, ok := ts.tools[name]
	if !ok {
		return ts.refuse(ctx, cc, name, fmt.Sprintf("unknown tool %q; the tools you can call are: %s", name, ts.names()))
	}
	call := e.call(cc, input)
	if c, ok := e.tool.(inputChecker); ok {
		if err := c.CheckInput(call.Input); err != nil {
			return ts.refuse(ctx, cc, name, err.Error())
		}
	}
	d := ts.policy.Check(ctx, call)
	switch d.Verdict {
	case Allow:
	case NeedsApproval:
		if ts.approver == nil {
			return ts.refuse(ctx, cc, name, fmt.Sprintf("%s (needs approval, and no approver is configured)", d.Reason))
		}
		ok, err := ts.approver.Approve(ctx, call, d.Reason)
		if err != nil {
			return ts.refuse(ctx, cc, name, fmt.Sprintf("%s (approval failed: %v)", d.Reason, err))
		}
		if !ok {
			return ts.refuse(ctx, cc, name, fmt.Sprintf("%s (approval denied)", d.Reason))
		}
	default:
		return ts.refuse(ctx, cc, name, d.Reason)
	}
	start := time.Now()
	out, err := e.tool.Run(ctx, cc, call.Input)
	res := Result{Duration: time.Since(start)}
	switch {
	case IsRefused(err):
		ts.logRefusal(ctx, cc, name, err.Error())
		res.Refused, res.IsError, res.Output = true, true, err.Error()
	case err != nil:
		res.IsError = true
		res.Output = "error: " + err.Error()
		if out != "" {
			res.Output += "\n" + out
		}
	default:
		res.Output = out
	}
	return res
}

// inputChecker is a tool that checks its input before the policy and an
// approver see the call, so no one is asked to approve a call that cannot
// run.
type inputChecker interface {
	CheckInput(input json.RawMessage) error
}

// Call is the call of tool name with input under cc, as Execute hands it
// to the policy and the approver; false for a tool the toolset lacks.
func (ts *Toolset) Call(cc CallContext, name string, input json.RawMessage) (Call, bool) {
	e, ok := ts.tools[name]
	if !ok {
		return Call{}, false
	}
	cc.Scope = ts.scope
	return e.call(cc, input), true
}

func (e entry) call(cc CallContext, input json.RawMessage) Call {
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	return Call{CallContext: cc, Tool: e.info, Input: input}
}

type callKey struct{}

// WithCall returns ctx marked as a tool call's: everything a tool does
// runs under it, and what must never happen inside an agent's run (such
// as deciding an approval) checks for it with CallFrom.
func WithCall(ctx context.Context, cc CallContext) context.Context {
	return context.WithValue(ctx, callKey{}, cc)
}

// CallFrom returns the tool call ctx runs in; ok is false outside any.
func CallFrom(ctx context.Context) (cc CallContext, ok bool) {
	cc, ok = ctx.Value(callKey{}).(CallContext)
	return cc, ok
}

// redactMargin is how far beyond the part of a long output that is kept
// it is read for secrets, so a key cut by the cap is still recognised.
const redactMargin = 8 << 10

// finish masks secrets in an output and caps it. A long output is masked in
// the parts that are kept (with a margin), not whole: a 4 MiB file costs no
// more than its head and tail.
func (ts *Toolset) finish(s string) string {
	if len(s) <= ts.max {
		return ts.redact.Redact(s)
	}
	tail := ts.max / 4
	head := ts.max - tail
	if len(s) > ts.max+2*redactMargin {
		h := ts.redact.Redact(s[:head+redactMargin])
		t := ts.redact.Redact(s[len(s)-tail-redactMargin:])
		return joinCapped(h, t, head, tail, len(s)-head-tail)
	}
	return capOutput(ts.redact.Redact(s), ts.max)
}

func (ts *Toolset) refuse(ctx context.Context, cc CallContext, name, reason string) Result {
	ts.logRefusal(ctx, cc, name, reason)
	return Result{Output: "refused: " + reason, IsError: true, Refused: true}
}

func (ts *Toolset) logRefusal(ctx context.Context, cc CallContext, name, reason string) {
	ts.log.LogAttrs(ctx, slog.LevelWarn, "tool call refused",
		slog.String("agent", cc.Agent), slog.String("tool", name), slog.String("reason", reason),
		slog.String("correlation_id", cc.CorrelationID), slog.String("job", cc.JobID))
}

func (ts *Toolset) names() string {
	names := make([]string, len(ts.visible))
	for i, v := range ts.visible {
		names[i] = v.Name
	}
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}

// capOutput keeps the head and the tail of a long output: the start says
// what it is, the end usually says how it ended. A rune cut in half at either
// edge is dropped.
func capOutput(s string, max int) string {
	if len(s) <= max {
		return s
	}
	tail := max / 4
	head := max - tail
	return joinCapped(s, s, head, tail, len(s)-head-tail)
}

// joinCapped keeps the first head bytes of h and the last tail bytes of t,
// saying how many bytes were left out between them.
func joinCapped(h, t string, head, tail, omitted int) string {
	head, tail = min(head, len(h)), min(tail, len(t))
	return fmt.Sprintf("%s\n[… %d bytes omitted …]\n%s",
		strings.ToValidUTF8(h[:head], ""), omitted, strings.ToValidUTF8(t[len(t)-tail:], ""))
}
