package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

// BudgetLimits are the caps runs are held to; a zero field caps nothing.
type BudgetLimits struct {
	// TreeTokens and TreeWallTime cap a work item tree: the request, the
	// agents it calls and hands off to, and every subagent spawned under
	// it. Wall time counts from the tree's first model call.
	TreeTokens   int64
	TreeWallTime time.Duration
	// Tokens per UTC day of each requester, agent and repository.
	RequesterTokens int64
	AgentTokens     int64
	RepoTokens      int64
	// TreeCost caps what a tree's calls of models with Prices cost, in
	// Currency.
	TreeCost float64
	Currency string
	// Prices are the models' prices by model name.
	Prices map[string]ModelPrices
}

// ModelPrices are a model's prices per million tokens.
type ModelPrices struct{ Input, Output float64 }

// cost is what u costs at p.
func (p ModelPrices) cost(u llm.Usage) float64 {
	return (float64(u.InputTokens)*p.Input + float64(u.OutputTokens)*p.Output) / 1e6
}

// BudgetTool is the name an approval to spend more carries in place of a
// tool's.
const BudgetTool = "budget"

// Budgets counts what runs spend and holds them to their caps. Usage is
// added to the store after every model call, and the caps are checked
// before every one: a run at a cap pauses and asks, through the approver,
// for as much again, holding no worker while it waits. One Budgets serves
// a daemon across configurations, so runs of one tree asking at once wait
// for one decision.
type Budgets struct {
	store bot.BudgetStore
	log   *slog.Logger
	now   func() time.Time

	mu     sync.Mutex
	asking map[string]*askTurn // key → the runs asking for it, one at a time
	denied map[string]denial   // key@level/tree → why more was refused
	// flights are the model calls under way under each capped key, so
	// that runs calling at once (a fan-out of subagents) pass a cap by one
	// call, not by one call each.
	flights map[string]*flight
	// landings counts the calls counted under any key, so a run sees
	// whether one was while it read the counters.
	landings uint64
}

// askTurn lets the runs of this process that reach one key's cap ask for more
// one at a time; it is kept while one of them holds or waits for it.
type askTurn struct {
	held chan struct{} // cap 1: full while a run asks
	runs int           // runs holding or waiting for it
}

// flight is what runs of this process do under one capped key.
type flight struct {
	calls  int           // model calls admitted and not yet counted
	landed chan struct{} // closed, and replaced, when one is counted
}

// denial is a refusal of more budget, kept for the other runs of the tree
// that asked for deniedFor.
type denial struct {
	why string
	at  time.Time
}

// deniedFor is how long a refusal answers the tree that asked: longer than
// a tree's runs go on after it, and it bounds what a daemon that runs for
// months keeps.
const deniedFor = 24 * time.Hour

// NewBudgets returns the budgets kept in store.
func NewBudgets(store bot.BudgetStore, log *slog.Logger) *Budgets {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Budgets{store: store, log: log, now: time.Now, asking: map[string]*askTurn{}, denied: map[string]denial{},
		flights: map[string]*flight{}}
}

// budgetCap is one cap a run is held to: the key its spending is counted
// under and the cap before any approval.
type budgetCap struct {
	key      string
	tokens   int64
	wall     time.Duration
	cost     float64
	currency string
	// price is the most a token of the run's model costs, or 0 where its
	// model has no prices (its calls cost nothing).
	price float64
}

// budgetKeys are the keys a run's calls are counted under, and the caps
// among them.
func budgetKeys(rn *run, l BudgetLimits, now time.Time) ([]string, []budgetCap) {
	var keys []string
	var caps []budgetCap
	add := func(key string, c budgetCap) {
		keys = append(keys, key)
		if c.tokens > 0 || c.wall > 0 || c.cost > 0 {
			c.key = key
			caps = append(caps, c)
		}
	}
	if rn.rootWorkItem != "" {
		var price float64
		if p, ok := l.Prices[rn.def.ModelName()]; ok {
			price = max(p.Input, p.Output) / 1e6
		}
		add(bot.TreeBudgetKey(rn.rootWorkItem), budgetCap{tokens: l.TreeTokens, wall: l.TreeWallTime, cost: l.TreeCost, currency: l.Currency, price: price})
	}
	if r := rn.requester; r.Source != "" && r.ID != "" {
		add(bot.DailyBudgetKey(now, bot.BudgetRequester, r.Source+":"+r.ID), budgetCap{tokens: l.RequesterTokens})
	}
	add(bot.DailyBudgetKey(now, bot.BudgetAgent, rn.def.Name), budgetCap{tokens: l.AgentTokens})
	if th := rn.thread; th.Source == bot.SourceGitHub {
		add(bot.DailyBudgetKey(now, bot.BudgetRepo, th.Owner+"/"+th.Repo), budgetCap{tokens: l.RepoTokens})
	}
	return keys, caps
}

// budgetHit is a cap reached: what was reached, what an approval adds, and
// the level (the cap with what approvals added), in tokens or seconds.
type budgetHit struct {
	reached, more string
	// level is in tokens, seconds of wall time, or millionths of the
	// currency, as kind says.
	level int64
	kind  string
}

// Kinds of budget caps.
const (
	capTokens = "tokens"
	capWall   = "wall_time"
	capCost   = "cost"
)

// question is what the thread is asked.
func (h budgetHit) question() string {
	return fmt.Sprintf("budget reached (%s): approve %s more?", h.reached, h.more)
}

// over says whether s exceeds c.
func (c budgetCap) over(s bot.Spend, now time.Time) (budgetHit, bool) {
	if c.tokens > 0 {
		if level := c.tokens + s.GrantedTokens; s.Tokens >= level {
			return budgetHit{reached: fmt.Sprintf("%d tokens", level), more: fmt.Sprint(c.tokens), level: level, kind: capTokens}, true
		}
	}
	if c.wall > 0 && !s.Since.IsZero() {
		level := c.wall + time.Duration(s.GrantedSeconds)*time.Second
		if now.Sub(s.Since) >= level {
			return budgetHit{reached: level.String() + " of wall time", more: c.wall.String(), level: int64(level / time.Second), kind: capWall}, true
		}
	}
	if c.cost > 0 {
		if level := c.cost + s.GrantedCost; s.Cost >= level {
			return budgetHit{reached: fmt.Sprintf("%.2f %s", level, c.currency), more: fmt.Sprintf("%.2f %s", c.cost, c.currency),
				level: int64(math.Round(level * 1e6)), kind: capCost}, true
		}
	}
	return budgetHit{}, false
}

// room reports whether a call may start beside n others under way without
// the key passing c's cap by more than that call, at s: each call under way
// is expected to spend what the key's calls spent on average, and to cost
// at least that many tokens at the run's prices (calls of models without
// prices cost nothing and lower the average cost). Before any call of the
// key is counted nothing says what one spends, so its first call goes
// alone. A call whose model has no prices costs nothing, so a cost cap
// leaves it room.
func (c budgetCap) room(s bot.Spend, n int) bool {
	if n == 0 {
		return true
	}
	if c.tokens > 0 && (s.Calls == 0 || s.Tokens+int64(n)*(s.Tokens/s.Calls) >= c.tokens+s.GrantedTokens) {
		return false
	}
	switch {
	case c.cost <= 0 || c.price == 0:
		return true
	case s.Calls == 0:
		return false
	}
	each := max(s.Cost/float64(s.Calls), float64(s.Tokens)/float64(s.Calls)*c.price)
	return s.Cost+float64(n)*each < c.cost+s.GrantedCost
}

// admit returns the seat of rn's next model call when it may make it,
// after asking for more where a cap is reached and waiting, holding no
// worker, where the calls under way could reach one; else why it may not,
// which stops the run. Reading the counters failing stops it too: budgets
// fail closed. The seat is left when the call's usage is counted (spent)
// or the call failed.
func (b *Budgets) admit(ctx context.Context, rt *Runtime, rn *run) (*seat, error) {
	_, caps := budgetKeys(rn, rt.opts.BudgetLimits, b.now())
	st := &seat{b: b}
next:
	for {
		for _, c := range caps {
			gen := b.counted()
			spent, err := b.store.Spent(ctx, []string{c.key})
			if err != nil {
				st.leave()
				return nil, fmt.Errorf("the budget cannot be read, so no model call is made: %w", err)
			}
			if hit, over := c.over(spent[0], b.now()); over {
				st.leave()
				if err := b.ask(ctx, rt, rn, c, spent[0], hit); err != nil {
					return nil, err
				}
				st = &seat{b: b}
				continue next
			}
			if c.tokens <= 0 && c.cost <= 0 {
				continue // wall time is not spent a call at a time
			}
			landed, ok := b.board(c, spent[0], gen, st)
			if ok {
				continue
			}
			// Seats held on other keys are left while this one waits, so
			// a run never waits holding a place others count.
			st.leave()
			st = &seat{b: b}
			if landed != nil {
				if err := b.await(ctx, landed); err != nil {
					return nil, err
				}
			}
			continue next
		}
		return st, nil
	}
}

// counted returns how many calls were counted so far.
func (b *Budgets) counted() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.landings
}

// board seats st's call under c's key when the calls under way leave room
// at s, read when gen calls had been counted. Else it returns the channel
// closed when one of them is counted, or nil when a call was counted since
// s was read, which is then read again.
func (b *Budgets) board(c budgetCap, s bot.Spend, gen uint64, st *seat) (<-chan struct{}, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.landings != gen {
		return nil, false
	}
	f := b.flights[c.key]
	if f == nil {
		f = &flight{landed: make(chan struct{})}
		b.flights[c.key] = f
	}
	if c.room(s, f.calls) {
		f.calls++
		st.keys = append(st.keys, c.key)
		return nil, true
	}
	return f.landed, false
}

// await waits, holding no worker, until landed is closed.
func (b *Budgets) await(ctx context.Context, landed <-chan struct{}) error {
	return bot.Await(ctx, func() error {
		select {
		case <-landed:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// forget drops key's flight once no call is under way: the runs waiting on
// it were woken as the last one was counted. b.mu is held.
func (b *Budgets) forget(key string, f *flight) {
	if f.calls == 0 {
		delete(b.flights, key)
	}
}

// seat is a model call admitted under the capped keys of its run.
type seat struct {
	b    *Budgets
	keys []string
	left bool // b.mu
}

// leave tells the runs waiting for room under s's keys that its call was
// counted, or will never be. It is safe to call more than once, and on a
// nil seat.
func (s *seat) leave() {
	if s == nil || len(s.keys) == 0 {
		return
	}
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.left {
		return
	}
	s.left = true
	b.landings++
	for _, key := range s.keys {
		f := b.flights[key]
		f.calls--
		close(f.landed)
		f.landed = make(chan struct{})
		b.forget(key, f)
	}
}

// capped reports whether s's call is held to a token or cost cap.
func (s *seat) capped() bool { return s != nil && len(s.keys) > 0 }

// ask waits for one run of the process at a time to ask for more of c,
// and asks unless another run got it meanwhile; approved, c's key may
// spend another cap's worth.
func (b *Budgets) ask(ctx context.Context, rt *Runtime, rn *run, c budgetCap, spent bot.Spend, hit budgetHit) error {
	// A refusal answers the tree that asked: its other runs reaching the
	// same level stop without asking again, and another request that
	// reaches a day's cap asks anew.
	mark := fmt.Sprintf("%s@%s:%d/%s", c.key, hit.kind, hit.level, rn.rootWorkItem)
	b.mu.Lock()
	if refused, ok := b.denied[mark]; ok {
		b.mu.Unlock()
		return errors.New(refused.why)
	}
	tn := b.asking[c.key]
	if tn == nil {
		tn = &askTurn{held: make(chan struct{}, 1)}
		b.asking[c.key] = tn
	}
	tn.runs++
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		if tn.runs--; tn.runs == 0 {
			delete(b.asking, c.key)
		}
		b.mu.Unlock()
	}()
	// Waiting for the run that asks holds no worker either.
	if err := bot.Await(ctx, func() error {
		select {
		case tn.held <- struct{}{}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}); err != nil {
		return err
	}
	defer func() { <-tn.held }()
	// Another run may have been given more, or refused, while this one
	// waited its turn.
	cur, err := b.store.Spent(ctx, []string{c.key})
	if err != nil {
		return fmt.Errorf("the budget cannot be read, so no model call is made: %w", err)
	}
	if now, over := c.over(cur[0], b.now()); !over || now != hit {
		return nil
	}
	b.mu.Lock()
	refused, ok := b.denied[mark]
	b.mu.Unlock()
	if ok {
		return errors.New(refused.why)
	}

	reached := "budget reached (" + hit.reached + ")"
	if rt.opts.Approver == nil {
		return b.refuse(mark, reached+", and no one can approve more here")
	}
	why := hit.question()
	rt.report(ctx, rn, bot.ProgressEvent{Kind: bot.ProgressNote, Text: why})
	input, _ := json.Marshal(map[string]any{"budget": c.key, "level": hit.level, "spent_tokens": spent.Tokens})
	call := tools.Call{
		CallContext: tools.CallContext{Scope: tools.Scope{Agent: rn.def.Name, Profile: rn.def.Profile},
			SessionKey: rn.sessionKey, JobID: rn.jobID, WorkItemID: rn.rootWorkItem,
			CorrelationID: rn.correlationID, Requester: rn.requester},
		Tool:  tools.Info{Name: BudgetTool, Description: "spend more than the budget allows"},
		Input: input,
	}
	approved, err := rt.opts.Approver.Approve(ctx, call, why)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return b.refuse(mark, fmt.Sprintf("%s, and more was not approved: %v", reached, err))
	case !approved:
		return b.refuse(mark, reached+", and more was denied")
	}
	g := bot.Grant{Tokens: c.tokens, At: b.now()}
	switch hit.kind {
	case capWall:
		g = bot.Grant{Seconds: wallGrant(c, cur[0], b.now()), At: b.now()}
	case capCost:
		g = bot.Grant{Cost: c.cost, At: b.now()}
	}
	if _, err := b.store.GrantBudget(ctx, c.key, g); err != nil {
		return fmt.Errorf("more budget was approved but cannot be recorded: %w", err)
	}
	b.log.LogAttrs(ctx, slog.LevelInfo, "budget raised", slog.String("budget", c.key), slog.Int64("tokens", g.Tokens),
		slog.Int64("seconds", g.Seconds), slog.Float64("cost", g.Cost), slog.String("agent", rn.def.Name))
	return nil
}

// wallGrant is the seconds an approval of more wall time adds to c: as
// much again as the cap, counted from the approval, however long the
// decision took.
func wallGrant(c budgetCap, s bot.Spend, now time.Time) int64 {
	level := c.wall + time.Duration(s.GrantedSeconds)*time.Second
	more := max(c.wall, now.Sub(s.Since)+c.wall-level)
	return int64((more + time.Second - 1) / time.Second)
}

func (b *Budgets) refuse(mark, why string) error {
	now := b.now()
	b.mu.Lock()
	for m, d := range b.denied {
		if now.Sub(d.at) > deniedFor {
			delete(b.denied, m)
		}
	}
	b.denied[mark] = denial{why: why, at: now}
	b.mu.Unlock()
	return errors.New(why)
}

// usage is what one call of rn spent, under every key of rn.
func (b *Budgets) usage(rt *Runtime, rn *run, u llm.Usage) bot.Usage {
	now := b.now()
	l := rt.opts.BudgetLimits
	keys, _ := budgetKeys(rn, l, now)
	var cost float64
	if p, ok := l.Prices[rn.def.ModelName()]; ok {
		cost = p.cost(u)
	}
	return bot.Usage{Keys: keys, Tokens: u.Total(), Cost: cost, At: now}
}

// spend adds one call's usage to every key of rn. A failure to record it
// stops the run: what it spends must be counted.
func (b *Budgets) spend(ctx context.Context, rt *Runtime, rn *run, u llm.Usage) error {
	if err := b.store.AddUsage(ctx, b.usage(rt, rn, u)); err != nil {
		return fmt.Errorf("a model call's usage cannot be recorded, so no more calls are made: %w", err)
	}
	return nil
}

// admitCall returns the seat of rn's next model call, or why rn may not
// make it.
func (r *Runtime) admitCall(ctx, runCtx context.Context, rn *run) (*seat, string) {
	if r.opts.Budgets == nil {
		return nil, ""
	}
	st, err := r.opts.Budgets.admit(runCtx, r, rn)
	switch {
	case err == nil:
		return st, ""
	case runCtx.Err() != nil:
		return nil, interruption(ctx, runCtx, r.limits(rn.def))
	}
	return nil, "stopped: " + err.Error()
}

// spent counts a model call's tokens, and cost where its model has prices.
// The last call of a run that ends with its job (a subagent's: last, as
// its answer asks for no tools) is counted with the job's end instead, in
// the same transaction (bot.JobRecords): no call of the run follows it.
// Under a token or cost cap it is counted at once instead, before its seat
// is left: runs looking for room under the cap (a fan-out near it) count
// every call either under way or spent, never pass it by one they see
// neither way.
func (r *Runtime) spent(ctx context.Context, rn *run, u llm.Usage, last bool, st *seat) error {
	if r.opts.Budgets == nil {
		return nil
	}
	if last && rn.endsWithJob() && !st.capped() {
		usage := r.opts.Budgets.usage(r, rn, u)
		rn.lastUsage = &usage
		return nil
	}
	return r.opts.Budgets.spend(context.WithoutCancel(ctx), r, rn, u)
}
