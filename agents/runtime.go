package agents

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
)

// Runtime defaults, used when neither the agent nor RuntimeOptions say.
const (
	DefaultMaxTurns   = 30
	DefaultMaxTokens  = 400_000
	DefaultTimeBudget = 15 * time.Minute
	// DefaultMaxDepth bounds chains of agents called as tools: the agent
	// the work item was routed to is depth 0.
	DefaultMaxDepth = 3
	// DefaultMaxHistory is how many messages of a conversation are kept for
	// the next run of the thread.
	DefaultMaxHistory = 100
)

// AgentResponse is how one invocation of an agent ended.
type AgentResponse struct {
	// Status is bot.ResultSuccess, bot.ResultError (failed or stopped by a
	// limit; retrying may help) or bot.ResultRefused (the model declined).
	Status string `json:"status"`
	// Content is the answer, or for an error what the agent had said so far.
	Content    string `json:"content"`
	Error      string `json:"error,omitempty"`
	TokensUsed int    `json:"tokens_used"`
	TurnsUsed  int    `json:"turns_used"`
}

// InvocationContext is what an agent called by another agent receives
// instead of the caller's conversation.
type InvocationContext struct {
	ConversationSummary string `json:"conversation_summary,omitempty"`
	UserMessage         string `json:"user_message,omitempty"`
	CorrelationID       string `json:"correlation_id,omitempty"`
	// Requester and Ceilings are the caller's: the callee works for the
	// same person and never gets more than the caller.
	Requester bot.Requester `json:"requester,omitzero"`
	Ceilings  []bot.Ceiling `json:"ceilings,omitempty"`
}

// Limits bound one invocation; zero fields take the defaults.
type Limits struct {
	MaxTurns   int
	MaxTokens  int
	TimeBudget time.Duration
}

// RuntimeOptions configure a Runtime. Agents is required; everything else
// may be left zero.
type RuntimeOptions struct {
	// Agents are the agents in effect, read at every turn: an agent
	// installed while a run goes on is there at its next turn.
	Agents AgentSource
	// Models are the configured models; nil means none, and every run ends
	// with the "has no model" reply.
	Models ModelSource
	// Tools are the core and package tools.
	Tools *tools.Registry
	// Policy decides every tool call; nil means tools.DefaultPolicy with
	// Profiles.
	Policy tools.Policy
	// Profiles decide which tools an agent is shown; nil means
	// tools.BuiltinProfiles.
	Profiles tools.Profiles
	// Approver answers calls the policy wants approved; nil refuses them.
	Approver tools.Approver
	// Workspaces give each thread its directory; a zero Root means runs have
	// no workspace and file tools say so.
	Workspaces    tools.Workspaces
	Conversations ConversationStore
	Transcripts   TranscriptStore
	// Rerouter enables handoff_to; nil leaves it out.
	Rerouter Rerouter
	// Access gives each run the ceiling of whoever asked for its work and
	// says what rights result; nil means a run is bounded by its agent's
	// profile and what it inherited alone (the daemon always sets it).
	Access Access
	// Requesters complete a requester when a run starts (a GitHub
	// permission nobody looked up at intake, Slack user groups); nil leaves
	// requesters as stored.
	Requesters RequesterResolver
	// Skills are the skills and packages enabled where runs happen; nil
	// means runs load no skills and every agent runs wherever it is asked.
	Skills SkillCatalog
	// CommandTools gives each run the command tools of the packages
	// enabled where it happens; nil means none.
	CommandTools CommandTools
	// Installer puts packages the builder writes into effect
	// (install_package); nil leaves the tool out.
	Installer PackageInstaller
	// Redactor masks secrets in tool results before the model reads them,
	// in status messages, stored conversations, transcripts and replies;
	// nil masks common token shapes only.
	Redactor *bot.Redactor
	// Subagents keeps the ledger of subagents, agent calls and handoffs;
	// nil leaves spawn_subagent and its tools out.
	Subagents *Subagents
	// SubagentLimits bound spawning; zero fields take the defaults.
	SubagentLimits SubagentLimits
	// Background stops the background tasks a job started with
	// cleanup_on_run_end when its run ends; nil when there are none.
	Background RunEnder
	// RunStates keep a job's run turn by turn, so a job retried after a
	// crash goes on from its last turn; nil keeps nothing.
	RunStates bot.RunStateStore
	// Budgets count what runs spend and hold them to BudgetLimits; nil
	// counts nothing.
	Budgets      *Budgets
	BudgetLimits BudgetLimits
	// Limits apply to agents that set none.
	Limits     Limits
	MaxDepth   int
	MaxHistory int
	Logger     *slog.Logger
	Now        func() time.Time
}

// Runtime runs agents; it implements bot.Runner and is safe for concurrent
// runs.
type Runtime struct {
	opts     RuntimeOptions
	redactor *bot.Redactor
	log      *slog.Logger
	children *Subagents // nil without subagents
}

var _ bot.Runner = (*Runtime)(nil)

// NewRuntime returns a Runtime.
func NewRuntime(opts RuntimeOptions) (*Runtime, error) {
	if opts.Agents == nil {
		return nil, errors.New("agent runtime: no agent manager")
	}
	if opts.Profiles == nil {
		opts.Profiles = tools.BuiltinProfiles{}
	}
	if opts.Policy == nil {
		opts.Policy = tools.DefaultPolicy{Profiles: opts.Profiles}
	}
	if opts.Limits.MaxTurns <= 0 {
		opts.Limits.MaxTurns = DefaultMaxTurns
	}
	if opts.Limits.MaxTokens <= 0 {
		opts.Limits.MaxTokens = DefaultMaxTokens
	}
	if opts.Limits.TimeBudget <= 0 {
		opts.Limits.TimeBudget = DefaultTimeBudget
	}
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = DefaultMaxDepth
	}
	if opts.MaxHistory <= 0 {
		opts.MaxHistory = DefaultMaxHistory
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Redactor == nil {
		opts.Redactor = bot.NewRedactor()
	}
	return &Runtime{opts: opts, redactor: opts.Redactor, log: opts.Logger, children: opts.Subagents}, nil
}

// RunEnder is told when a job's run ends; *tools.Background stops the
// background tasks the job started that end with their run.
type RunEnder interface {
	EndRun(ctx context.Context, jobID string) int
}

// Access maps requesters to ceilings and says what an agent may do under
// them; *policy.Engine implements it.
type Access interface {
	Ceiling(r bot.Requester) bot.Ceiling
	Effective(agent, profile string, ceilings []bot.Ceiling) bot.EffectiveRights
}

// RequesterResolver completes what a requester record lacks when a run
// starts. An error means the run's rights cannot be known: the run does
// not start, and its job is tried again.
type RequesterResolver interface {
	ResolveRequester(ctx context.Context, r bot.Requester, th bot.Thread) (bot.Requester, error)
}

// run is the state of one invocation of one agent: the top-level run of a
// job, or an agent called as a tool inside it.
type run struct {
	def           Definition
	jobID         string
	workItemID    string // set on the top-level run only: handoff needs it
	sessionKey    string
	workspace     string
	correlationID string
	parentID      string
	chain         []string // agents from the top-level run down to this one
	depth         int
	userMessage   string // the request that started the job
	// historyAt is when the run read the thread's conversation.
	historyAt time.Time
	progress  bot.Progress
	// requester asked for the work (the lead work item's); ceilings bound
	// every call of the run: one per requester of its work items, then
	// inherited. inherited are those from the agents that called this one
	// or handed it the work, which a handoff passes on.
	requester bot.Requester
	ceilings  []bot.Ceiling
	inherited []bot.Ceiling
	// target is where the run happens, as skills and packages are
	// enabled; skills is its record of the skills it loaded.
	target skills.Target
	skills *loadedSkills

	// Where the run sits in its tree, for what it spawns and records:
	// the job's thread, lead work item and dispatch (an agent it calls
	// shares them), the owner of what it starts, the tree's root, how many
	// spawns deep it is, and for a subagent's run its record.
	thread       bot.Thread
	jobItem      string
	dispatchID   string
	owner        bot.Owner
	rootWorkItem string
	spawnDepth   int
	child        *bot.ChildRun

	// kept says the run saved its state (or resumed from one), which its
	// end deletes.
	kept bool
	// retried says its job ran before (a later attempt, or a saved state
	// found): its spawns look for a child an earlier run started for the
	// same call.
	retried bool
	// lastUsage is the usage of the last model call of a run that ends
	// with its job, written with the job's end (see spent).
	lastUsage *bot.Usage

	mu          sync.Mutex
	children    int
	childTokens int
	handoff     *bot.Hop
	// held is the state the turn's spawns save with their children (see
	// holdState).
	held *bot.RunState
	// adopted are the job ends of children the run took to write with its
	// next save (see Subagents.Adopt).
	adopted []*bot.JobEnd
	// outstanding counts the calls of the current turn still running.
	outstanding atomic.Int32
}

// endsWithJob reports whether rn's end is written with its job's, in one
// transaction: a subagent's run, whose job is nothing but the run.
func (rn *run) endsWithJob() bool { return rn.child != nil && len(rn.chain) == 1 }

func (rn *run) nextChildID() string {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.children++
	return fmt.Sprintf("%s.%d", rn.correlationID, rn.children)
}

func (rn *run) addChildTokens(n int) {
	rn.mu.Lock()
	rn.childTokens += n
	rn.mu.Unlock()
}

func (rn *run) takeChildTokens() int {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	n := rn.childTokens
	rn.childTokens = 0
	return n
}

func (rn *run) setHandoff(h bot.Hop) {
	rn.mu.Lock()
	rn.handoff = &h
	rn.mu.Unlock()
}

func (rn *run) handedOff() *bot.Hop {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.handoff
}

func (rn *run) attrs() []slog.Attr {
	return []slog.Attr{
		slog.String("agent", rn.def.Name), slog.String("correlation_id", rn.correlationID),
		slog.String("parent_correlation_id", rn.parentID), slog.Int("depth", rn.depth),
		slog.String("job", rn.jobID), slog.String("thread", rn.sessionKey),
	}
}

// Run implements bot.Runner: it runs the job's agent on the job's work items
// with the thread's conversation, and returns the reply for the thread. It
// returns an error only when it could not run at all (the workspace or the
// conversation store failed); an agent that ran and failed is a RunResult
// with status error.
func (r *Runtime) Run(ctx context.Context, req bot.RunRequest, progress bot.Progress) (bot.RunResult, error) {
	if len(req.WorkItems) > 0 && req.WorkItems[0].IsChild() {
		return r.runChild(ctx, req, progress)
	}
	name := req.Agent
	if name == "" {
		name = req.Job.Agent
	}
	def, ok := r.opts.Agents.Get(name)
	if !ok {
		msg := fmt.Sprintf("agent %q is not defined (agents: %s)", name, strings.Join(r.agentNames(), ", "))
		return bot.RunResult{Status: bot.ResultError, Reply: msg, Error: msg}, nil
	}
	thread := req.Thread
	if thread.IsZero() {
		thread = req.Job.Thread
	}
	rn := &run{
		def:           def,
		jobID:         req.Job.ID,
		sessionKey:    thread.Key(),
		correlationID: req.Job.ID,
		chain:         []string{def.Name},
		retried:       req.Job.Attempt > 1,
		progress:      progress,
		target:        targetOf(thread.Key(), def.Name),
		skills:        &loadedSkills{},
	}
	if rn.correlationID == "" {
		rn.correlationID = "run-" + randomID()
	}
	if len(req.WorkItems) > 0 {
		rn.workItemID = req.WorkItems[0].ID
	}
	if msg := r.packageDisabled(rn); msg != "" {
		return bot.RunResult{Status: bot.ResultError, Reply: msg, Error: msg}, nil
	}
	rn.thread, rn.jobItem, rn.rootWorkItem = thread, rn.workItemID, rn.workItemID
	rn.dispatchID = firstID(req.Job.DispatchIDs)
	rn.owner = bot.Owner{SessionKey: rn.sessionKey, AgentID: def.Name}
	if err := r.bound(ctx, rn, req.WorkItems, thread); err != nil {
		return bot.RunResult{}, err
	}
	r.preload(ctx, rn, runSkills(def, req.WorkItems))
	if r.opts.Workspaces.Root != "" {
		dir, err := r.opts.Workspaces.Dir(rn.sessionKey)
		if err != nil {
			return bot.RunResult{}, err
		}
		rn.workspace = dir
		rn.owner.SandboxName = filepath.Base(dir)
	}
	if r.children != nil {
		defer r.children.watchTree(rn.jobItem, func(lines []string) {
			r.report(ctx, rn, bot.ProgressEvent{Kind: bot.ProgressChildren, Children: lines})
		})()
	}
	rn.historyAt = r.opts.Now()
	history, err := r.loadConversation(ctx, rn.sessionKey, def.Name, req.Continuation.ResetAt)
	if err != nil {
		return bot.RunResult{}, err
	}
	rn.userMessage = taskText(req.WorkItems)

	started := r.opts.Now()
	r.log.LogAttrs(ctx, slog.LevelInfo, "agent run started", append(rn.attrs(), slog.String("work_item", rn.workItemID))...)
	out := r.invoke(ctx, rn, history, rn.userMessage, req.Continuation.Text())
	resp := r.redactResponse(out.resp)

	// The run is over; its record is written even when the job's context
	// was cancelled, within a bound of its own.
	saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	r.saveConversation(saveCtx, rn, append(history, out.messages...))
	r.saveTranscript(saveCtx, rn, out, resp, len(history), started)
	r.endRun(saveCtx, rn)
	r.summarize(saveCtx, rn, resp)
	r.log.LogAttrs(ctx, slog.LevelInfo, "agent run finished", append(rn.attrs(),
		slog.String("status", resp.Status), slog.Int("tokens", resp.TokensUsed), slog.Int("turns", resp.TurnsUsed),
		slog.String("error", resp.Error))...)
	return runResult(resp), nil
}

// Invoke runs agent on a task with only ic for context, as agent_<name>
// does: no conversation is loaded or kept. It is the entry point for callers
// outside a job (subagents, tests); progress may be nil.
func (r *Runtime) Invoke(ctx context.Context, agent, task string, ic InvocationContext, sessionKey string, progress bot.Progress) AgentResponse {
	def, ok := r.opts.Agents.Get(agent)
	if !ok {
		return AgentResponse{Status: bot.ResultError, Error: fmt.Sprintf("agent %q is not defined", agent)}
	}
	rn := &run{
		def:           def,
		sessionKey:    sessionKey,
		correlationID: ic.CorrelationID,
		chain:         []string{def.Name},
		userMessage:   ic.UserMessage,
		progress:      progress,
		requester:     ic.Requester,
		ceilings:      slices.Clone(ic.Ceilings),
		inherited:     slices.Clone(ic.Ceilings),
		target:        targetOf(sessionKey, def.Name),
		skills:        &loadedSkills{},
	}
	if rn.correlationID == "" {
		rn.correlationID = "invoke-" + randomID()
	}
	if msg := r.packageDisabled(rn); msg != "" {
		return AgentResponse{Status: bot.ResultError, Error: msg}
	}
	r.preload(ctx, rn, def.Skills)
	if r.opts.Workspaces.Root != "" && sessionKey != "" {
		dir, err := r.opts.Workspaces.Dir(sessionKey)
		if err != nil {
			return AgentResponse{Status: bot.ResultError, Error: err.Error()}
		}
		rn.workspace = dir
	}
	return r.redactResponse(r.invoke(ctx, rn, nil, invocationText("", task, ic), "").resp)
}

// bound gives rn its requester and ceilings: the ceiling of the requester
// of each of the job's work items, completed first where the source left
// something to look up, and those the work items inherited from the run
// that handed them off. It reports the resulting rights in the status
// message.
func (r *Runtime) bound(ctx context.Context, rn *run, items []bot.WorkItem, th bot.Thread) error {
	for i, wi := range items {
		requester := wi.Requester
		if r.opts.Requesters != nil && !requester.IsZero() {
			resolved, err := r.opts.Requesters.ResolveRequester(ctx, requester, th)
			if err != nil {
				return fmt.Errorf("the rights of %s, who asked for %s, cannot be known: %w", requester.Handle(), wi.ID, err)
			}
			requester = resolved
		}
		if i == 0 {
			rn.requester = requester
		}
		if r.opts.Access != nil {
			rn.ceilings = appendCeiling(rn.ceilings, r.opts.Access.Ceiling(requester))
		}
		if n := len(wi.Hops); n > 0 {
			for _, c := range wi.Hops[n-1].Ceilings {
				rn.inherited = appendCeiling(rn.inherited, c)
			}
		}
	}
	for _, c := range rn.inherited {
		rn.ceilings = appendCeiling(rn.ceilings, c)
	}
	if r.opts.Access != nil {
		rights := r.opts.Access.Effective(rn.def.Name, rn.def.Profile, rn.ceilings)
		r.log.LogAttrs(ctx, slog.LevelInfo, "agent rights", append(rn.attrs(), slog.String("rights", rights.String()))...)
		r.report(ctx, rn, bot.ProgressEvent{Kind: bot.ProgressRights, Text: rights.String()})
	}
	return nil
}

// Rights says what agent may do when req asks in th, and why: the rights a
// run of it for req starts with, before anything a handoff adds. explain
// shows them.
func (r *Runtime) Rights(ctx context.Context, agent string, req bot.Requester, th bot.Thread) (bot.EffectiveRights, error) {
	def, ok := r.opts.Agents.Get(agent)
	if !ok {
		return bot.EffectiveRights{}, bot.Errorf(bot.ENOTFOUND, "agent %q is not defined", agent)
	}
	if r.opts.Access == nil {
		return bot.EffectiveRights{Profile: def.Profile, Reason: def.Name + "'s own profile"}, nil
	}
	var lookup error
	if r.opts.Requesters != nil && !req.IsZero() {
		resolved, err := r.opts.Requesters.ResolveRequester(ctx, req, th)
		if err == nil {
			req = resolved
		}
		lookup = err
	}
	rights := r.opts.Access.Effective(def.Name, def.Profile, []bot.Ceiling{r.opts.Access.Ceiling(req)})
	if lookup != nil {
		// explain still answers; a run would wait until it can be known.
		rights.Reason += fmt.Sprintf(" (looking it up failed: %v; a run waits until it can be known)", lookup)
	}
	return rights, nil
}

// appendCeiling adds c unless a ceiling of the same profile is there.
func appendCeiling(cs []bot.Ceiling, c bot.Ceiling) []bot.Ceiling {
	same := func(x bot.Ceiling) bool {
		if len(c.Skills) == 0 {
			return x.Profile == c.Profile
		}
		// One that holds to skills is the same only as itself.
		return x.Profile == c.Profile && x.Reason == c.Reason && slices.EqualFunc(x.Skills, c.Skills, func(a, b bot.SkillRule) bool {
			return a.Name == b.Name && slices.Equal(a.AllowedTools, b.AllowedTools) && slices.Equal(a.ForbiddenTools, b.ForbiddenTools)
		})
	}
	if slices.ContainsFunc(cs, same) {
		return cs
	}
	return append(cs, c)
}

// passedOn is what rn passes to an agent it calls or hands work to: what
// it inherited, and its own profile, so the next agent never gets more.
func (rn *run) passedOn(how string) []bot.Ceiling {
	return appendCeiling(slices.Clone(rn.inherited),
		bot.Ceiling{Profile: rn.def.Profile, Reason: fmt.Sprintf("%s @%s, %s", how, rn.def.Name, rn.def.Profile)})
}

func (r *Runtime) agentNames() []string {
	list := r.opts.Agents.List()
	names := make([]string, len(list))
	for i, d := range list {
		names[i] = d.Name
	}
	return names
}

// outcome is what one invocation produced.
type outcome struct {
	resp     AgentResponse
	messages []llm.Message // the new messages: the input and everything after
	system   string
	model    string
}

// invoke runs the model loop of rn's agent: history, then input, then model
// turns and tool calls until a final answer or a limit.
func (r *Runtime) invoke(ctx context.Context, rn *run, history []llm.Message, input, continuation string) outcome {
	def := rn.def
	out := outcome{model: def.ModelName()}
	provider, err := r.model(def)
	if err != nil {
		out.resp = AgentResponse{Status: bot.ResultError, Error: err.Error()}
		return out
	}
	limits := r.limits(def)
	runCtx, cancel := context.WithTimeout(ctx, limits.TimeBudget)
	defer cancel()
	// Every call of the run is decided with the skills it has loaded.
	runCtx = withLoaded(runCtx, rn.skills)

	// What the agent may call and what its prompt says are made again at
	// every turn: a skill it loaded, or an agent installed meanwhile, is
	// there from the next turn on.
	var ts *tools.Toolset
	req := llm.Request{Temperature: def.Temperature, ReasoningEffort: def.ReasoningEffort}
	prepare := func(turn int) {
		r.startTurn(ctx, rn, turn)
		ts = r.toolset(rn)
		visible := ts.Visible()
		defs := make([]llm.ToolDef, len(visible))
		for i, t := range visible {
			defs[i] = llm.ToolDef{Name: t.Name, Description: t.Description, Schema: t.Schema}
		}
		out.system = r.systemPrompt(rn, visible, continuation)
		req.System, req.Tools = out.system, defs
	}
	msgs := make([]llm.Message, len(history), len(history)+16)
	copy(msgs, history)
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: input})
	first := len(history)
	// A child's end the run took is written with its next save; one left
	// over (the run stopped before it) goes back to its job.
	defer func() { giveBack(rn.takeAdopted(), errWaiterGone) }()
	finish := func(resp AgentResponse) outcome {
		r.dropState(ctx, rn)
		out.resp = resp
		out.messages = msgs[first:]
		return out
	}
	cc := tools.CallContext{
		SessionKey: rn.sessionKey, JobID: rn.jobID, WorkItemID: rn.workItemID,
		CorrelationID: rn.correlationID, Workspace: rn.workspace, Requester: rn.requester,
		Owner: rn.owner, Creator: bot.Creator{JobID: rn.jobID, DispatchID: rn.dispatchID, WorkItemID: rn.jobItem},
	}
	var resp AgentResponse
	var said string // the latest text the model wrote, for a run stopped early
	start := 1
	if st, ok := r.resumeState(ctx, rn); ok {
		msgs, first, said = st.Messages, st.First, st.Said
		resp.TokensUsed, resp.TurnsUsed, start = st.Tokens, st.Turn, st.Turn+1
		if calls := unfinished(msgs); len(calls) > 0 {
			prepare(st.Turn)
			msgs = append(msgs, r.settle(ctx, runCtx, rn, ts, cc, st, calls)...)
			resp.TokensUsed += rn.takeChildTokens()
			r.saveState(ctx, rn, runState{Turn: st.Turn, Tokens: resp.TokensUsed, Said: said, First: first, Messages: msgs})
		} else {
			r.resumed(ctx, rn, st, nil, nil, nil)
		}
	}
	for turn := start; ; turn++ {
		why := interruption(ctx, runCtx, limits)
		if why == "" {
			why = exhausted(turn, resp.TokensUsed, limits)
		}
		if why != "" {
			r.stop(ctx, rn, turn-1, why)
			resp.Status, resp.Error, resp.Content = bot.ResultError, why, said
			return finish(resp)
		}
		st, why := r.admitCall(ctx, runCtx, rn)
		if why != "" {
			r.stop(ctx, rn, turn-1, why)
			resp.Status, resp.Error, resp.Content = bot.ResultError, why, said
			return finish(resp)
		}
		prepare(turn)
		r.report(ctx, rn, bot.ProgressEvent{Kind: bot.ProgressTurnStarted, Turn: turn, Text: fmt.Sprintf("turn %d", turn)})
		req.Messages = msgs
		var res llm.Response
		var uncounted error
		func() {
			// Runs waiting for room under the same caps go on once this
			// call is counted, or has failed, however it ends.
			defer st.leave()
			res, err = provider.Chat(runCtx, req)
			if err == nil {
				uncounted = r.spent(ctx, rn, res.Usage, len(res.ToolCalls) == 0, st)
			}
		}()
		resp.TurnsUsed = turn
		if uncounted != nil {
			why := "stopped: " + uncounted.Error()
			r.stop(ctx, rn, turn, why)
			resp.Status, resp.Error, resp.Content = bot.ResultError, why, said
			return finish(resp)
		}
		if err != nil {
			if why := interruption(ctx, runCtx, limits); why != "" {
				r.stop(ctx, rn, turn, why)
				resp.Status, resp.Error, resp.Content = bot.ResultError, why, said
				return finish(resp)
			}
			resp.Status, resp.Error, resp.Content = bot.ResultError, "model call failed: "+err.Error(), said
			return finish(resp)
		}
		resp.TokensUsed += res.Usage.Total()
		r.used(rn, resp.TokensUsed)
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: res.Text, ToolCalls: res.ToolCalls})
		if res.Text != "" {
			said = res.Text
		}
		if res.StopReason == llm.StopMaxTokens {
			// A call in an answer cut off is cut too (arguments that
			// stop halfway, a file's content missing): none runs, and
			// each is answered so the thread's conversation goes on.
			for _, c := range res.ToolCalls {
				msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, IsError: true,
					Content: "not executed: the answer was cut off at max_tokens before the call was complete"})
			}
			resp.Status, resp.Content, resp.Error = bot.ResultError, res.Text, errCutOff
			return finish(resp)
		}
		if len(res.ToolCalls) > 0 {
			st := runState{Turn: turn, Tokens: resp.TokensUsed, Said: said, First: first, Messages: msgs}
			if onlySpawns(res.ToolCalls) && r.children != nil {
				r.holdState(ctx, rn, st)
			} else {
				r.saveState(ctx, rn, st)
			}
		}
		if res.StopReason == llm.StopRefusal {
			resp.Status, resp.Content, resp.Error = bot.ResultRefused, res.Refusal, "the model declined the task"
			return finish(resp)
		}
		if len(res.ToolCalls) == 0 {
			resp.Status, resp.Content = bot.ResultSuccess, res.Text
			return finish(resp)
		}
		results := r.calls(ctx, runCtx, rn, ts, cc, turn, res.ToolCalls)
		rn.releaseState()
		resp.TokensUsed += rn.takeChildTokens()
		r.saveState(ctx, rn, runState{Turn: turn, Tokens: resp.TokensUsed, Said: said, First: first, Messages: msgs, Results: results})
		msgs = append(msgs, results...)
		if hop := rn.handedOff(); hop != nil {
			resp.Status = bot.ResultSuccess
			resp.Content = fmt.Sprintf("Handed off to @%s: %s", hop.To, hop.Reason)
			return finish(resp)
		}
	}
}

// call runs one tool call and returns the tool message for the model.
func (r *Runtime) call(ctx, runCtx context.Context, rn *run, ts *tools.Toolset, cc tools.CallContext, turn int, call llm.ToolCall) llm.Message {
	msg := llm.Message{Role: llm.RoleTool, ToolCallID: call.ID}
	if hop := rn.handedOff(); hop != nil {
		msg.Content, msg.IsError = "not executed: the work item was handed off to @"+hop.To, true
		return msg
	}
	if runCtx.Err() != nil {
		msg.Content, msg.IsError = "not executed: the run was stopped", true
		return msg
	}
	r.report(ctx, rn, bot.ProgressEvent{Kind: bot.ProgressToolCalled, Turn: turn, Tool: call.Name, Text: describeCall(call)})
	cc.CallID = call.ID
	res := ts.Execute(runCtx, cc, call.Name, call.Input)
	state := "done"
	switch {
	case res.Refused:
		state = "refused"
	case res.IsError:
		state = "failed"
	}
	r.report(ctx, rn, bot.ProgressEvent{Kind: bot.ProgressToolFinished, Turn: turn, Tool: call.Name, Text: call.Name + " " + state})
	msg.Content, msg.IsError = res.Output, res.IsError
	return msg
}

// interruption says why the run cannot go on, or "": the job was
// cancelled (or the caller's budget ran out), or the agent's own time budget
// did.
func interruption(ctx, runCtx context.Context, l Limits) string {
	switch {
	case ctx.Err() != nil:
		return "cancelled: " + context.Cause(ctx).Error()
	case runCtx.Err() != nil:
		return fmt.Sprintf("stopped: time_budget (%s) used up before a final answer", l.TimeBudget)
	}
	return ""
}

// exhausted says which limit stops the run before turn, or "".
func exhausted(turn, tokens int, l Limits) string {
	switch {
	case turn > l.MaxTurns:
		return fmt.Sprintf("stopped: reached max_turns (%d) before a final answer", l.MaxTurns)
	case tokens >= l.MaxTokens:
		return fmt.Sprintf("stopped: used %d tokens, over max_tokens (%d), before a final answer", tokens, l.MaxTokens)
	}
	return ""
}

// stop reports a limit; a cancellation is the caller's doing and needs no
// report.
func (r *Runtime) stop(ctx context.Context, rn *run, turn int, why string) {
	r.log.LogAttrs(ctx, slog.LevelWarn, "agent run stopped", append(rn.attrs(), slog.String("reason", why))...)
	if !strings.HasPrefix(why, "cancelled") {
		r.report(ctx, rn, bot.ProgressEvent{Kind: bot.ProgressLimitReached, Turn: turn, Text: why})
	}
}

func (r *Runtime) report(ctx context.Context, rn *run, ev bot.ProgressEvent) {
	if rn.progress == nil {
		return
	}
	// What a call does ("running `curl -H 'Authorization: …'`") is shown
	// in the thread.
	ev.Text = r.redactor.Redact(ev.Text)
	ev.At = r.opts.Now()
	rn.progress.Report(ctx, ev)
}

// model returns the provider of d's model, or the error that becomes the
// reply when it is not configured.
func (r *Runtime) model(d Definition) (llm.Provider, error) {
	if r.opts.Models != nil {
		if p, ok := r.opts.Models.Model(d.ModelName()); ok {
			return p, nil
		}
	}
	if d.Model == "" {
		return nil, fmt.Errorf("agent %q has no model: set models.default in config.yaml (see config.example.yaml)", d.Name)
	}
	return nil, fmt.Errorf("agent %q uses model %q, which is not configured: add models.%s to config.yaml (see config.example.yaml)", d.Name, d.Model, d.Model)
}

func (r *Runtime) limits(d Definition) Limits {
	l := r.opts.Limits
	if d.MaxTurns > 0 {
		l.MaxTurns = d.MaxTurns
	}
	if d.MaxTokens > 0 {
		l.MaxTokens = d.MaxTokens
	}
	if d.TimeBudget > 0 {
		l.TimeBudget = d.TimeBudget
	}
	return l
}

// toolset builds what rn's agent may call: the registry's tools, every
// other tool-mode agent as agent_<name>, and handoff_to on a top-level run
// that owns a work item.
func (r *Runtime) toolset(rn *run) *tools.Toolset {
	var extra []tools.Tool
	for _, d := range r.opts.Agents.List() {
		if d.Mode == ModeTool && d.Name != rn.def.Name && r.packageOff(rn.target, d) == "" {
			extra = append(extra, &agentTool{rt: r, caller: rn, callee: d})
		}
	}
	if r.opts.Rerouter != nil && rn.workItemID != "" && rn.child == nil {
		extra = append(extra, &handoffTool{rt: r, rn: rn})
	}
	extra = append(extra, r.packageTools(rn)...)
	if r.children != nil && rn.jobItem != "" {
		extra = append(extra, r.subagentTools(rn)...)
	}
	var approver tools.Approver
	if r.opts.Approver != nil {
		approver = reportingApprover{next: r.opts.Approver, rt: r, rn: rn}
	}
	return tools.NewToolset(r.opts.Tools, tools.Scope{
		Agent: rn.def.Name, Tools: rn.def.Tools, Profile: rn.def.Profile, Package: rn.def.Package,
		Ceilings: rn.ceilings, Loaded: rn.skills.tools(),
	}, tools.ToolsetOptions{
		Policy: r.opts.Policy, Profiles: r.opts.Profiles, Approver: approver, Extra: extra,
		Hide: rn.skills.hideRefused(rn.ceilings), Redactor: r.redactor, Logger: r.log,
	})
}

// reportingApprover shows in the run's status message that a call waits
// for a person, so the thread does not read as stuck on the tool.
type reportingApprover struct {
	next tools.Approver
	rt   *Runtime
	rn   *run
}

func (a reportingApprover) Approve(ctx context.Context, call tools.Call, reason string) (bool, error) {
	a.rt.report(ctx, a.rn, bot.ProgressEvent{Kind: bot.ProgressNote, Tool: call.Tool.Name,
		Text: "waiting for a person to approve " + call.Tool.Name})
	return a.next.Approve(ctx, call, reason)
}

// errCutOff ends a run whose model stopped an answer at its max_tokens.
const errCutOff = "the answer was cut off at the model's max_tokens; raise max_tokens of the model in config.yaml"

// runResult maps an AgentResponse to what the reporter posts. The reply of
// a run that failed is what the agent got to say, if anything: the reporter
// puts the error before it, so the thread reads the error once.
func runResult(resp AgentResponse) bot.RunResult {
	res := bot.RunResult{Status: resp.Status, Error: resp.Error, Reply: resp.Content, TokensUsed: resp.TokensUsed, TurnsUsed: resp.TurnsUsed}
	if resp.Status != bot.ResultSuccess && resp.Content == "" {
		res.Reply = resp.Error
	}
	return res
}

func (r *Runtime) redactResponse(resp AgentResponse) AgentResponse {
	resp.Content = r.redactor.Redact(resp.Content)
	resp.Error = r.redactor.Redact(resp.Error)
	return resp
}

// taskText is the user message of a job: its work items' text, with where
// each came from. Several items arrived while an earlier run was busy and are
// answered together.
func taskText(items []bot.WorkItem) string {
	if len(items) == 0 {
		return "(no message)"
	}
	one := func(w bot.WorkItem) string {
		var from strings.Builder
		from.WriteString("[" + w.Kind)
		if w.Actor != "" {
			from.WriteString(" from @" + w.Actor)
		}
		from.WriteString("]\n")
		text := strings.TrimSpace(w.Text)
		if text == "" {
			text = "(no text)"
		}
		return from.String() + text
	}
	if len(items) == 1 {
		return one(items[0])
	}
	var b strings.Builder
	b.WriteString("Several messages arrived in this thread; answer them together.\n")
	for i, w := range items {
		fmt.Fprintf(&b, "\n%d. %s\n", i+1, one(w))
	}
	return b.String()
}

// describeCall says what a call does, for the thread's status message.
func describeCall(call llm.ToolCall) string {
	var in map[string]any
	_ = json.Unmarshal(call.Input, &in)
	str := func(k string) string {
		s, _ := in[k].(string)
		return oneLine(s, 80)
	}
	switch call.Name {
	case tools.ReadFile:
		return "reading " + str("path")
	case tools.WriteFile:
		return "writing " + str("path")
	case tools.EditFile:
		return "editing " + str("path")
	case tools.ListDirectory:
		if p := str("path"); p != "" {
			return "listing " + p
		}
		return "listing files"
	case tools.SearchFiles:
		return "searching for " + str("pattern")
	case tools.Bash:
		return "running `" + str("command") + "`"
	case HandoffTool:
		return "handing off to @" + str("agent")
	case EnableSkillTool:
		return "loading skill " + str("name")
	case DisableSkillTool:
		return "unloading skill " + str("name")
	}
	if callee, ok := strings.CutPrefix(call.Name, "agent_"); ok {
		return "asking @" + callee + ": " + str("task")
	}
	return "calling " + call.Name
}

func oneLine(s string, max int) string {
	s = joinFields(s)
	if len(s) > max {
		return strings.ToValidUTF8(s[:max], "") + "…"
	}
	return s
}

// joinFields is strings.Join(strings.Fields(s), " ") in one pass: s's
// words with one space between them, white space being what
// unicode.IsSpace says. A text already so is returned as it is, without
// a copy; the system prompt has one for every tool at every turn.
func joinFields(s string) string {
	var b []byte // nil while the words so far are s[:end] as it is
	end := 0
	for i := 0; i < len(s); {
		start := skipSpace(s, i, true)
		if start == len(s) {
			break
		}
		i = skipSpace(s, start, false)
		if b == nil {
			if (end == 0 && start == 0) || (end > 0 && start == end+1 && s[end] == ' ') {
				end = i
				continue
			}
			b = make([]byte, 0, len(s))
			b = append(b, s[:end]...)
		}
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = append(b, s[start:i]...)
	}
	if b == nil {
		return s[:end]
	}
	return string(b)
}

// skipSpace returns the index of the first rune at or after i in s that
// is white space (space false) or is not (space true), or len(s).
func skipSpace(s string, i int, space bool) int {
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			if (c == ' ' || '\t' <= c && c <= '\r') != space {
				return i
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) != space {
			return i
		}
		i += n
	}
	return i
}

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
