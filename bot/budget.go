package bot

import (
	"context"
	"time"
)

// Budgets: what a work item tree (a request and every run it started) may
// spend, and what each requester, agent and repository may spend per day.
// Usage is counted from what the model provider reports, per call, under
// keys; a cap is checked against the counters of its key before every model
// call, and an approval adds to what the key may spend.

// TreeBudgetKey is the key of a work item tree's spending.
func TreeBudgetKey(rootWorkItemID string) string { return "tree/" + rootWorkItemID }

// Daily budget kinds.
const (
	BudgetRequester = "requester"
	BudgetAgent     = "agent"
	BudgetRepo      = "repo"
)

// DailyBudgetKey is the key of what kind (requester, agent, repo) name
// spends on day, a UTC date.
func DailyBudgetKey(day time.Time, kind, name string) string {
	return "day/" + day.UTC().Format(time.DateOnly) + "/" + kind + "/" + name
}

// Usage is one model call's spending, added to each of Keys.
type Usage struct {
	Keys   []string
	Tokens int
	// Cost is in the configured currency; 0 where the model has no prices.
	Cost float64
	At   time.Time
}

// Validate checks that u adds nothing negative.
func (u Usage) Validate() error {
	if u.Tokens < 0 || u.Cost < 0 {
		return Errorf(EINVALID, "usage: negative tokens or cost")
	}
	return nil
}

// Spend is what a key has spent, and what approvals added to its caps.
type Spend struct {
	Key    string  `json:"key"`
	Tokens int64   `json:"tokens"`
	Cost   float64 `json:"cost"`
	Calls  int64   `json:"calls"`
	// Since is the first call counted; zero before any.
	Since   time.Time `json:"since"`
	Updated time.Time `json:"updated"`
	// Granted are what approvals added to the caps of the key.
	GrantedTokens  int64   `json:"granted_tokens,omitempty"`
	GrantedCost    float64 `json:"granted_cost,omitempty"`
	GrantedSeconds int64   `json:"granted_seconds,omitempty"`
}

// Count adds one call's usage, made at at, to s.
func (s *Spend) Count(u Usage, at time.Time) {
	s.Tokens += int64(u.Tokens)
	s.Cost += u.Cost
	s.Calls++
	if s.Since.IsZero() {
		s.Since = at
	}
	s.Updated = at
}

// Grant is what an approval adds to a key's caps.
type Grant struct {
	Tokens  int64
	Cost    float64
	Seconds int64
	At      time.Time
}

// BudgetStore keeps the counters.
type BudgetStore interface {
	// AddUsage adds one call's usage to every key of u in one transaction.
	AddUsage(ctx context.Context, u Usage) error
	// Spent returns the spending of each key, in order; a key nothing was
	// counted under is a zero Spend with its Key.
	Spent(ctx context.Context, keys []string) ([]Spend, error)
	// GrantBudget adds g to what key may spend and returns its spending.
	GrantBudget(ctx context.Context, key string, g Grant) (Spend, error)
	// SpentUnder returns the spending of the keys that start with prefix
	// ("day/2025-03-04/agent/": every agent's that day), in key order, at
	// most ListLimit(limit) of them, and whether there are more.
	SpentUnder(ctx context.Context, prefix string, limit int) (spent []Spend, more bool, err error)
}

// RunState is a run's state as the agent runtime saves it (RunStateStore),
// under its job's lead work item.
type RunState struct {
	WorkItemID string
	Doc        []byte
}

// RunStateStore keeps the state of a run turn by turn, as an opaque document
// the agent runtime encodes, under the job's lead work item: a job retried
// after a crash goes on from it instead of starting over.
type RunStateStore interface {
	SaveRunState(ctx context.Context, workItemID string, doc []byte) error
	// SaveRunStateWithEnds saves st as SaveRunState does and ends every
	// job of ends as FinishJob does, in one transaction: a run that took
	// its children's job ends (JobEnd) writes them with its next save. An
	// end that cannot be written (its job no longer held by its owner,
	// records that are not valid) fails the whole call and nothing is
	// written, so the caller can save its state alone and leave the ends
	// to their jobs.
	SaveRunStateWithEnds(ctx context.Context, st RunState, ends []JobOutcome) error
	// LoadRunState returns nil and no error when there is none.
	LoadRunState(ctx context.Context, workItemID string) ([]byte, error)
	DeleteRunState(ctx context.Context, workItemID string) error
}
