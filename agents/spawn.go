package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
)

// Control tools of subagents.
const (
	SpawnTool        = "spawn_subagent"
	ListChildrenTool = "list_children"
	AwaitChildTool   = "await_child"
	CancelChildTool  = "cancel_child"
)

// ControlTools are the control tools an agent with an empty tools list
// sees, and may name in its tools list.
func ControlTools() []string {
	return []string{HandoffTool, SpawnTool, ListChildrenTool, AwaitChildTool, CancelChildTool}
}

// ReservedToolNames are the tools the runtime adds to runs beside the
// registry's: the control tools, enable_skill and disable_skill, the
// builder's install_package, and budget, the name an approval to spend
// more carries. No package's command tool takes one of these names.
func ReservedToolNames() []string {
	return append(ControlTools(), EnableSkillTool, DisableSkillTool, InstallPackageTool, BudgetTool)
}

var (
	spawnSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"task":{"type":"string","description":"What the subagent should do, self-contained: it sees only this and context, not this conversation"},` +
		`"context":{"type":"string","description":"A short summary of what it needs to know: file names, decisions, constraints"},` +
		`"agent":{"type":"string","description":"The agent to run; default yourself"},` +
		`"skills":{"type":"array","items":{"type":"string"},"description":"Skills the subagent works with; its tools are narrowed to what they allow"},` +
		`"timeout":{"type":["integer","string"],"description":"Seconds (or a duration such as \"5m\") it may take; default and most: the configured timeout"},` +
		`"background":{"type":"boolean","description":"Return at once with its id instead of waiting; collect the answer with await_child"}},` +
		`"required":["task"],"additionalProperties":false}`)
	listChildrenSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"open":{"type":"boolean","description":"Only those still queued or running"}},"additionalProperties":false}`)
	awaitChildSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"id":{"type":"string","description":"The subagent's id (run_…)"},` +
		`"timeout":{"type":["integer","string"],"description":"Seconds (or a duration such as \"2m\") to wait at most; 0 checks without waiting; default 5 minutes"}},` +
		`"required":["id"],"additionalProperties":false}`)
	cancelChildSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"id":{"type":"string","description":"The subagent's id (run_…)"}},"required":["id"],"additionalProperties":false}`)
)

// duration reads seconds, as a JSON number or a string ("90", "1.5"), or a
// Go duration string ("5m"). null and "" leave it unset (the default).
// Seconds beyond what a time.Duration holds are read as the longest one,
// which every limit caps.
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		n, err := strconv.ParseFloat(string(b), 64)
		if err != nil {
			return errors.New("a timeout wants seconds or a duration such as \"5m\"")
		}
		return d.setSeconds(n)
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		return d.setSeconds(n)
	}
	v, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return fmt.Errorf("timeout %q: want seconds or a duration such as \"5m\"", s)
	case v < 0:
		return errors.New("a timeout cannot be negative")
	}
	*d = duration(v)
	return nil
}

func (d *duration) setSeconds(n float64) error {
	switch {
	case math.IsNaN(n):
		return errors.New("a timeout wants seconds or a duration such as \"5m\"")
	case n < 0:
		return errors.New("a timeout cannot be negative")
	case n >= float64(math.MaxInt64)/float64(time.Second):
		*d = duration(math.MaxInt64)
	default:
		*d = duration(time.Duration(n * float64(time.Second)))
	}
	return nil
}

// optionalDuration is a duration that says whether one was given: null
// and "" are none.
type optionalDuration struct {
	d   duration
	set bool
}

func (o *optionalDuration) UnmarshalJSON(b []byte) error {
	var d duration
	if err := d.UnmarshalJSON(b); err != nil {
		return err
	}
	var s string
	unset := string(b) == "null" || (json.Unmarshal(b, &s) == nil && strings.TrimSpace(s) == "")
	*o = optionalDuration{d: d, set: !unset}
	return nil
}

// wholeSeconds is d rounded up to whole seconds, as a subagent's timeout
// is recorded: a timeout under a second is one second, never none.
func wholeSeconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}

// controlTool is one of a run's subagent tools.
type controlTool struct {
	rt     *Runtime
	rn     *run
	name   string
	desc   string
	schema json.RawMessage
	run    func(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error)
}

func (t *controlTool) Info() tools.Info {
	return tools.Info{
		Name: t.name, Description: t.desc, Schema: t.schema, Kind: tools.KindControl,
		// What a subagent does is checked call by call under its own
		// rights, which never exceed its parent's.
		Permissions: []tools.Permission{tools.PermRead},
	}
}

func (t *controlTool) Run(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	return t.run(ctx, cc, input)
}

// subagentTools are the control tools of rn.
func (r *Runtime) subagentTools(rn *run) []tools.Tool {
	return []tools.Tool{
		&controlTool{rt: r, rn: rn, name: SpawnTool, schema: spawnSchema,
			desc: "Start a subagent on a task in this thread's workspace, with its own conversation. Several spawns in one turn run in parallel; " +
				"the answer comes back as the result unless background is set.",
			run: func(ctx context.Context, cc tools.CallContext, in json.RawMessage) (string, error) {
				return r.spawnCall(ctx, rn, cc, in)
			}},
		&controlTool{rt: r, rn: rn, name: ListChildrenTool, schema: listChildrenSchema,
			desc: "List the subagents this thread's runs of you started, with their status, age and answer.",
			run: func(ctx context.Context, _ tools.CallContext, in json.RawMessage) (string, error) {
				return r.listChildren(ctx, rn, in)
			}},
		&controlTool{rt: r, rn: rn, name: AwaitChildTool, schema: awaitChildSchema,
			desc: "Wait for a subagent (also one an earlier run started) and return its answer, or its status when the wait times out.",
			run: func(ctx context.Context, _ tools.CallContext, in json.RawMessage) (string, error) {
				return r.awaitChildCall(ctx, rn, in)
			}},
		&controlTool{rt: r, rn: rn, name: CancelChildTool, schema: cancelChildSchema,
			desc: "Cancel a subagent that is still queued or running (also one an earlier run started).",
			run: func(ctx context.Context, _ tools.CallContext, in json.RawMessage) (string, error) {
				return r.cancelChildCall(ctx, rn, in)
			}},
	}
}

// spawnRequest is what spawn_subagent asks for.
type spawnRequest struct {
	Task       string   `json:"task"`
	Context    string   `json:"context"`
	Agent      string   `json:"agent"`
	Skills     []string `json:"skills"`
	Timeout    duration `json:"timeout"`
	Background bool     `json:"background"`
}

// childAnswer is what the model reads of a subagent.
type childAnswer struct {
	ID      string `json:"id"`
	Agent   string `json:"agent"`
	Status  string `json:"status"`
	Content string `json:"content,omitempty"`
	Error   string `json:"error,omitempty"`
	Tokens  int    `json:"tokens_used"`
	Note    string `json:"note,omitempty"`
}

func answerOf(rec *bot.ChildRun) childAnswer {
	return childAnswer{ID: rec.ID, Agent: rec.Agent, Status: string(rec.Status), Content: rec.Result, Error: rec.Error, Tokens: rec.Tokens}
}

func (a childAnswer) json() string {
	b, _ := json.Marshal(a)
	return string(b)
}

func (r *Runtime) spawnCall(ctx context.Context, rn *run, cc tools.CallContext, input json.RawMessage) (string, error) {
	var in spawnRequest
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	in.Task = strings.TrimSpace(in.Task)
	if in.Task == "" {
		return "", errors.New("invalid input: task is required")
	}
	// A foreground spawn of a run that keeps its state offers to write
	// the child's end with its turn's results, before the child can end.
	var offer func(id string) *adoption
	if !in.Background && r.keepsState(rn) {
		offer = func(id string) *adoption { return r.children.offer(id, rn.lastCall) }
	}
	rec, rebound, adopt, err := r.spawn(ctx, rn, cc.CallID, in, offer)
	if err != nil {
		return "", err
	}
	// A timeout asked beyond the limit is cut to it, and the model is told,
	// so it does not wait on a child for longer than the child can run.
	var said []string
	if limit := time.Duration(rec.TimeoutSeconds) * time.Second; time.Duration(in.Timeout) > limit {
		said = append(said, fmt.Sprintf("its timeout is %s, the most a subagent of @%s may have", limit, rn.def.Name))
	}
	if in.Background {
		a := answerOf(rec)
		a.Note = "runs in the background; await_child with its id collects the answer, cancel_child stops it"
		if rebound {
			a.Note = "spawned before the restart, not again; " + a.Note
		}
		a.Note = strings.Join(append([]string{a.Note}, said...), "; ")
		return a.json(), nil
	}
	limits := r.subagentLimits(rn.def)
	rec, err = r.awaitChild(ctx, rn, rec, rec.CreatedAt.Add(childTimeout(rec, limits)+childGrace), adopt)
	if err != nil {
		return "", err
	}
	if rec.Status.Open() {
		// Its own run stops it at its timeout; one that never got a worker
		// is cancelled here.
		if rec, err = r.children.cancel(ctx, rec, "its timeout passed before it finished", "@"+rn.def.Name); err != nil {
			return "", err
		}
	}
	a := answerOf(rec)
	if rebound {
		said = append([]string{"spawned before the restart and awaited again, not run twice"}, said...)
	}
	a.Note = strings.Join(said, "; ")
	if rec.Status != bot.RunDone {
		return a.json(), fmt.Errorf("subagent %s (@%s) %s", rec.ID, rec.Agent, statusWords(rec))
	}
	return a.json(), nil
}

// childGrace is how long past a child's timeout its parent waits for the
// child's own run to record that it stopped.
const childGrace = 30 * time.Second

func childTimeout(rec *bot.ChildRun, l SubagentLimits) time.Duration {
	if rec.TimeoutSeconds > 0 {
		return time.Duration(rec.TimeoutSeconds) * time.Second
	}
	return l.Timeout
}

func statusWords(rec *bot.ChildRun) string {
	switch rec.Status {
	case bot.RunTimedOut:
		return "timed out and was cancelled"
	case bot.RunCancelled:
		return "was cancelled"
	case bot.RunInterrupted:
		return "was interrupted"
	case bot.RunFailed:
		return "failed"
	}
	return "is " + string(rec.Status)
}

// subagentLimits are the limits a run of d spawns under: the agent's own
// where it sets them, the config's otherwise.
func (r *Runtime) subagentLimits(d Definition) SubagentLimits {
	return r.opts.SubagentLimits.withDefaults().over(d.Subagents)
}

// spawn starts a subagent for rn's call callID, or finds the one it started
// before (a resumed run asks again): rebound is then true. Limits, an
// unknown agent or skills that do not go together are refusals the model
// reads, before anything starts. With offer, the offer to take the child's
// end is made before the child can start, and returned.
func (r *Runtime) spawn(ctx context.Context, rn *run, callID string, in spawnRequest,
	offer func(id string) *adoption) (rec *bot.ChildRun, rebound bool, adopt *adoption, err error) {
	c := r.children
	if c == nil || rn.jobItem == "" {
		return nil, false, nil, tools.Refuse("subagents are not available in this run")
	}
	limits := r.subagentLimits(rn.def)
	if depth := rn.spawnDepth + 1; depth > limits.MaxDepth {
		if rn.spawnDepth > 0 {
			return nil, false, nil, tools.Refuse("spawn refused: this run is a subagent %d deep and max_depth is %d, so it cannot spawn; do the task yourself or answer with what you have",
				rn.spawnDepth, limits.MaxDepth)
		}
		return nil, false, nil, tools.Refuse("spawn refused: max_depth is %d for @%s; do the task yourself", limits.MaxDepth, rn.def.Name)
	}
	// The task and context are the child's whole brief: kept whole in its
	// record, never clipped, so one too long is the model's to shorten.
	for _, f := range []struct{ name, text string }{{"task", in.Task}, {"context", in.Context}} {
		if len(f.text) > bot.MaxLedgerText {
			return nil, false, nil, tools.Refuse("spawn refused: the %s is %d bytes and a subagent's may be %d at most; "+
				"write the details to a file in the workspace and name the file instead", f.name, len(f.text), bot.MaxLedgerText)
		}
	}
	agent := strings.TrimPrefix(strings.TrimSpace(in.Agent), "@")
	if agent == "" {
		agent = rn.def.Name
	}
	def, ok := r.opts.Agents.Get(agent)
	if !ok {
		return nil, false, nil, tools.Refuse("spawn refused: there is no agent %q (agents: %s)", agent, strings.Join(r.agentNames(), ", "))
	}
	// A package's agent runs only where its package is enabled, as a
	// subagent as much as called as a tool.
	if msg := r.packageOff(rn.target, def); msg != "" {
		return nil, false, nil, tools.Refuse("spawn refused: %s", msg)
	}
	timeout := limits.Timeout
	if t := time.Duration(in.Timeout); t > 0 {
		timeout = min(t, limits.Timeout)
	}
	names := dedup(in.Skills)
	if len(names) > 0 {
		if _, err := r.spawnSkills(targetOf(rn.sessionKey, def.Name), names); err != nil {
			return nil, false, nil, tools.Refuse("spawn refused: %v", err)
		}
	}

	c.spawnMu.Lock()
	defer c.spawnMu.Unlock()
	// A job that ran before looks for the child an earlier run started
	// for this call among all of them; otherwise only the open ones count.
	siblings, err := r.subagentsOf(ctx, rn.jobItem, !rn.retried)
	if err != nil {
		return nil, false, nil, err
	}
	if callID != "" && rn.retried {
		if prev := findCall(siblings, callID); prev != nil {
			if offer != nil && prev.Status.Open() {
				adopt = offer(prev.ID)
			}
			return prev, true, adopt, nil
		}
	}
	open := 0
	for _, s := range siblings {
		if s.Status.Open() {
			open++
		}
	}
	if open >= limits.MaxConcurrent {
		return nil, false, nil, tools.Refuse("spawn refused: %s already open and max_concurrent is %d; "+
			"await_child or cancel_child one of them before spawning another",
			bot.Count(open, "subagent of this run is", "subagents of this run are"), limits.MaxConcurrent)
	}
	now := r.opts.Now().UTC()
	// With a worker free, the child's job is leased in the transaction
	// that spawns it and starts on that worker at once.
	worker, handed := bot.TakeWorker(ctx)
	var claim *bot.ClaimRequest
	if handed {
		cr := worker.Claim(now)
		claim = &cr
	}
	spawned, err := c.store.SpawnChild(ctx, bot.SpawnRequest{
		Run: bot.ChildRun{
			Owner:       rn.owner,
			Creator:     bot.Creator{JobID: rn.jobID, DispatchID: rn.dispatchID, WorkItemID: rn.jobItem},
			ParentLinks: bot.ParentLinks{WorkItemID: rn.jobItem, JobID: rn.jobID, DispatchID: rn.dispatchID},
			// The child gets the parent's ceilings and its profile:
			// never more than the parent.
			RootWorkItemID: rn.rootWorkItem, Agent: def.Name, Task: in.Task, Context: strings.TrimSpace(in.Context),
			Skills: names, CallID: callID, Depth: rn.spawnDepth + 1, Background: in.Background,
			TimeoutSeconds: wholeSeconds(timeout), Ceilings: rn.passedOnHeld("spawned by"),
		},
		Thread: rn.thread, Requester: rn.requester, Now: now, Claim: claim, State: rn.heldState(),
	})
	if err != nil {
		if handed {
			worker.Release()
		}
		return nil, false, nil, fmt.Errorf("spawn %s: %w", def.Name, err)
	}
	created := spawned.Run
	if offer != nil {
		adopt = offer(created.ID)
	}
	if handed {
		worker.Start(spawned.Claim)
	} else {
		c.wake()
	}
	c.treeChanged(rn.jobItem)
	r.log.LogAttrs(ctx, slog.LevelInfo, "subagent spawned", append(rn.attrs(),
		slog.String("run", created.ID), slog.String("child_agent", def.Name), slog.String("child_work_item", created.ChildWorkItemID),
		slog.Bool("background", in.Background), slog.Duration("timeout", timeout), slog.Bool("started_at_once", spawned.Claim.Job != nil))...)
	return &created, false, adopt, nil
}

// subagentsOf lists the subagents of parentWorkItem: the open ones, or all
// of them (a resumed run looks its calls up among them).
func (r *Runtime) subagentsOf(ctx context.Context, parentWorkItem string, open bool) ([]bot.ChildRun, error) {
	var out []bot.ChildRun
	f := bot.RunFilter{ParentWorkItemID: parentWorkItem, Open: open, Limit: 1000}
	for {
		rs, next, err := r.children.store.ListRuns(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("list the subagents of %s: %w", parentWorkItem, err)
		}
		for _, rec := range rs {
			if rec.Kind == bot.RunSubagent {
				out = append(out, rec)
			}
		}
		if next == "" {
			return out, nil
		}
		f.Cursor = next
	}
}

func findCall(rs []bot.ChildRun, callID string) *bot.ChildRun {
	for i := range rs {
		if rs[i].CallID == callID {
			return &rs[i]
		}
	}
	return nil
}

func dedup(names []string) []string {
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// awaitChild waits, holding no worker, until rec ends or deadline. With
// adopt, the run's offer to write the child's end with its turn's results
// (see Subagents.Adopt), a child's end handed over is kept for rn's next
// save: the child's job then costs no commit of its own.
func (r *Runtime) awaitChild(ctx context.Context, rn *run, rec *bot.ChildRun, deadline time.Time, adopt *adoption) (*bot.ChildRun, error) {
	var out *bot.ChildRun
	err := bot.Await(ctx, func() error {
		var end *bot.JobEnd
		var err error
		out, end, err = r.children.wait(ctx, rec.ID, deadline, adopt)
		if end != nil {
			rn.adopt(end)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for %s: %w", rec.ID, err)
	}
	return out, nil
}

// owned returns record id if rn's owner owns it, and refuses otherwise:
// knowing an id is not owning it.
func (r *Runtime) owned(ctx context.Context, rn *run, id string) (*bot.ChildRun, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return nil, errors.New("invalid input: id is required")
	}
	if r.children == nil {
		return nil, tools.Refuse("subagents are not available in this run")
	}
	rec, err := r.children.store.GetRun(ctx, id)
	if bot.ErrorCode(err) == bot.ENOTFOUND {
		return nil, tools.Refuse("there is no subagent %q; list_children lists yours", id)
	}
	if err != nil {
		return nil, err
	}
	if !rn.owner.Owns(rec.Owner) {
		return nil, tools.Refuse("%s is not yours: it belongs to another thread or agent, and only the runs of its owner may manage it", id)
	}
	return rec, nil
}

// defaultAwait is how long await_child waits when not told.
const defaultAwait = 5 * time.Minute

func (r *Runtime) awaitChildCall(ctx context.Context, rn *run, input json.RawMessage) (string, error) {
	var in struct {
		ID string `json:"id"`
		// Timeout is unset when not given (the default); 0 checks
		// without waiting.
		Timeout optionalDuration `json:"timeout"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	rec, err := r.owned(ctx, rn, in.ID)
	if err != nil {
		return "", err
	}
	wait := defaultAwait
	if in.Timeout.set {
		wait = time.Duration(in.Timeout.d)
	}
	if rec.Status.Open() && wait > 0 {
		if rec, err = r.awaitChild(ctx, rn, rec, r.opts.Now().Add(wait), nil); err != nil {
			return "", err
		}
	}
	a := answerOf(rec)
	if rec.Status.Open() {
		a.Note = fmt.Sprintf("still %s after waiting %s; await again later, or cancel_child", rec.Status, wait)
		if wait == 0 {
			a.Note = fmt.Sprintf("still %s; await it (with a timeout) to wait for its answer, or cancel_child", rec.Status)
		}
		return a.json(), nil
	}
	if rec.Status != bot.RunDone {
		return a.json(), fmt.Errorf("subagent %s (@%s) %s", rec.ID, rec.Agent, statusWords(rec))
	}
	return a.json(), nil
}

func (r *Runtime) cancelChildCall(ctx context.Context, rn *run, input json.RawMessage) (string, error) {
	var in struct {
		ID string `json:"id"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	rec, err := r.owned(ctx, rn, in.ID)
	if err != nil {
		return "", err
	}
	if !rec.Status.Open() {
		a := answerOf(rec)
		a.Note = "it had ended already; nothing was cancelled"
		return a.json(), nil
	}
	if rec.Kind != bot.RunSubagent {
		what := "a handoff"
		if rec.Kind == bot.RunAgentCall {
			what = "an agent call"
		}
		return "", tools.Refuse("%s is %s, not a subagent: cancel_child cancels subagents", rec.ID, what)
	}
	rec, err = r.children.cancel(ctx, rec, fmt.Sprintf("cancelled by @%s (%s)", rn.def.Name, rn.jobID), "@"+rn.def.Name)
	if err != nil {
		return "", err
	}
	return answerOf(rec).json(), nil
}

func (r *Runtime) listChildren(ctx context.Context, rn *run, input json.RawMessage) (string, error) {
	var in struct {
		Open bool `json:"open"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	if r.children == nil {
		return "", tools.Refuse("subagents are not available in this run")
	}
	rs, _, err := r.children.store.ListRuns(ctx, bot.RunFilter{
		OwnerSessionKey: rn.owner.SessionKey, OwnerAgent: rn.owner.AgentID, Open: in.Open, Unarchived: true, Limit: 50,
	})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	n := 0
	now := r.opts.Now()
	for _, rec := range rs {
		if rec.Kind != bot.RunSubagent {
			continue
		}
		n++
		fmt.Fprintf(&b, "- %s @%s [%s, spawned %s ago", rec.ID, rec.Agent, rec.Status, bot.Ago(now.Sub(rec.CreatedAt)))
		if rec.Tokens > 0 {
			fmt.Fprintf(&b, ", %s", bot.Count(rec.Tokens, "token", "tokens"))
		}
		fmt.Fprintf(&b, "] %s", oneLine(rec.Task, 120))
		switch {
		case rec.Result != "":
			fmt.Fprintf(&b, " → %s", oneLine(rec.Result, 200))
		case rec.Error != "":
			fmt.Fprintf(&b, " → %s", oneLine(rec.Error, 200))
		}
		b.WriteByte('\n')
	}
	if n == 0 {
		return "no subagents", nil
	}
	return b.String(), nil
}

// spawnSkills resolves the skills a subagent is spawned with, exactly as
// named (duplicates merged): the set must be valid (known names, every
// companion present, no incompatible pair) and each skill enabled where the
// child runs. It is checked before anything starts, and again when the
// child starts: a child whose skills cannot be loaded does not run, since
// without them it would be allowed more than its parent meant.
func (r *Runtime) spawnSkills(t skills.Target, names []string) ([]*skills.Skill, error) {
	if r.opts.Skills == nil {
		return nil, errors.New("this daemon has no skills registry, so a subagent cannot be given skills")
	}
	if v := r.opts.Skills.Validate(names); !v.Valid {
		return nil, fmt.Errorf("the skills do not go together: %s", validationText(v))
	}
	out := make([]*skills.Skill, 0, len(names))
	for _, name := range names {
		s, ok := r.opts.Skills.Skill(name)
		if !ok {
			return nil, fmt.Errorf("there is no skill %q", name)
		}
		if e := r.opts.Skills.Enabled(t, name); !e.Enabled {
			return nil, fmt.Errorf("skill %q is not enabled %s", name, where(t))
		}
		out = append(out, s)
	}
	return out, nil
}
