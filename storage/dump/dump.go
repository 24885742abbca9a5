// Package dump is the store-neutral stream of records `switchyard storage
// copy` moves from one store to another: every record a store keeps, in
// the domain's types, with the ids and sequences it was given, so that the
// store it is loaded into answers every query as the one it came from and
// hands out ids that collide with none of them.
//
// A source writes the stream (Dump); a destination reads it (Load). Copy
// runs one into the other and counts what went across. What a store keeps
// only to answer faster (indexes, maintained counters, the expiry index of
// dedup keys) is not in the stream: the destination derives its own from
// the records. Leases replicas hold are not either: they belong to running
// processes, and a copy runs with none.
package dump

import (
	"context"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
)

// Kind names one kind of record, as Counts prints it.
type Kind string

// The kinds of record, in the order a source writes them: a record comes
// after those it refers to.
const (
	KindSequence     Kind = "sequence counters"
	KindEvent        Kind = "events"
	KindDedup        Kind = "dedup keys"
	KindDelivery     Kind = "deliveries"
	KindIngress      Kind = "ingress records"
	KindWorkItem     Kind = "work items"
	KindDispatch     Kind = "dispatches"
	KindJob          Kind = "jobs"
	KindOutbox       Kind = "outbox messages"
	KindSchedule     Kind = "schedule firings"
	KindAudit        Kind = "audit records"
	KindConversation Kind = "conversations"
	KindTranscript   Kind = "transcripts"
	KindInstallation Kind = "installations"
	KindPackage      Kind = "skill packages"
	KindSetting      Kind = "skill settings"
	KindApproval     Kind = "approvals"
	KindRun          Kind = "child runs"
	KindRunChild     Kind = "child run links"
	KindTask         Kind = "background tasks"
	KindReset        Kind = "thread resets"
	KindBudget       Kind = "budgets"
	KindRunState     Kind = "run states"
	KindRule         Kind = "routing rules"
)

// Record is one record of the stream: exactly one of its fields is set.
type Record struct {
	Sequence     *Sequence
	Event        *Event
	Dedup        *Dedup
	Delivery     *Delivery
	Ingress      *bot.IngressRecord
	WorkItem     *WorkItem
	Dispatch     *bot.Dispatch
	Job          *bot.Job
	Outbox       *bot.OutboxMessage
	Schedule     *Schedule
	Audit        *Audit
	Conversation *Conversation
	Transcript   *Transcript
	Installation *Installation
	Package      *skills.InstalledPackage
	Setting      *skills.Setting
	Approval     *bot.Approval
	Run          *bot.ChildRun
	RunChild     *RunChild
	Task         *bot.BackgroundTask
	Reset        *Reset
	Budget       *bot.Spend
	RunState     *RunState
	Rule         *bot.StoredRule
}

// Kind says which field of r is set, or "" when none is.
func (r *Record) Kind() Kind {
	switch {
	case r.Sequence != nil:
		return KindSequence
	case r.Event != nil:
		return KindEvent
	case r.Dedup != nil:
		return KindDedup
	case r.Delivery != nil:
		return KindDelivery
	case r.Ingress != nil:
		return KindIngress
	case r.WorkItem != nil:
		return KindWorkItem
	case r.Dispatch != nil:
		return KindDispatch
	case r.Job != nil:
		return KindJob
	case r.Outbox != nil:
		return KindOutbox
	case r.Schedule != nil:
		return KindSchedule
	case r.Audit != nil:
		return KindAudit
	case r.Conversation != nil:
		return KindConversation
	case r.Transcript != nil:
		return KindTranscript
	case r.Installation != nil:
		return KindInstallation
	case r.Package != nil:
		return KindPackage
	case r.Setting != nil:
		return KindSetting
	case r.Approval != nil:
		return KindApproval
	case r.Run != nil:
		return KindRun
	case r.RunChild != nil:
		return KindRunChild
	case r.Task != nil:
		return KindTask
	case r.Reset != nil:
		return KindReset
	case r.Budget != nil:
		return KindBudget
	case r.RunState != nil:
		return KindRunState
	case r.Rule != nil:
		return KindRule
	}
	return ""
}

// Sequence is the last number a store gave out in one series of ids, so
// the destination goes on after it even when the records that had the
// highest numbers are gone (retention removes them; an id is never given
// twice).
type Sequence struct {
	Series Series
	Last   int64
}

// Series names a series of ids.
type Series string

// The series of ids: wi_N, d_N, job_N, in_N, ev_N, run_N, task_N, the
// outbox's message sequence, and the audit log's.
const (
	SeriesEvents     Series = "events"
	SeriesWorkItems  Series = "work_items"
	SeriesDispatches Series = "dispatches"
	SeriesJobs       Series = "jobs"
	SeriesIngress    Series = "ingress"
	SeriesOutbox     Series = "outbox"
	SeriesAudit      Series = "audit"
	SeriesRuns       Series = "runs"
	SeriesTasks      Series = "tasks"
	SeriesRules      Series = "rules"
)

// Event is an event received (its id is ev_Seq) with the raw payload
// retention has not dropped.
type Event struct {
	Seq   int64
	Event bot.Event // Raw holds the payload, nil once dropped
}

// Dedup is a delivery id within its dedup window: until then a redelivery
// is a duplicate of Ref (a work item or ingress record id).
type Dedup struct {
	Key   string
	Until time.Time
	Ref   string
}

// Delivery is what a delivery made (a work item or ingress record id), for
// explain.
type Delivery struct {
	Key string
	Ref string
}

// WorkItem is a work item with the dispatch that carries it now.
type WorkItem struct {
	bot.WorkItem
	DispatchID string
}

// Schedule is a schedule's last firing.
type Schedule struct {
	Name string
	Last time.Time
}

// Audit is one audit document, in the order it was appended.
type Audit struct {
	At       time.Time
	Decision string
	Doc      []byte
}

// Conversation is an agent's conversation in a thread.
type Conversation struct {
	SessionKey, Agent string
	Doc               []byte
}

// Transcript is one run's transcript of a job, in the order the job's
// transcripts were first saved.
type Transcript struct {
	JobID, RunID string
	Doc          []byte
}

// Installation is a GitHub App installation and the repositories it
// covers.
type Installation struct {
	ID        int64
	Account   string
	Suspended bool
	Repos     []string
	UpdatedAt time.Time
}

// RunChild says which ledger record a child work item runs for.
type RunChild struct {
	WorkItemID, RunID string
}

// Reset is when a thread was last reset.
type Reset struct {
	SessionKey string
	At         time.Time
}

// RunState is the saved state of a work item's run.
type RunState struct {
	WorkItemID string
	Doc        []byte
}

// Source writes every record it keeps to fn, in the order of the kinds.
type Source interface {
	Dump(ctx context.Context, fn func(Record) error) error
}

// Destination loads a stream into a store that holds nothing: it refuses
// one that holds any record, naming what it found, and keeps nothing of a
// load that fails.
type Destination interface {
	Load(ctx context.Context, stream func(fn func(Record) error) error) error
}

// Counts is how many records of each kind went across.
type Counts map[Kind]int

// Kinds returns every kind of record in the order a source writes them.
func Kinds() []Kind {
	return []Kind{
		KindEvent, KindDedup, KindDelivery, KindIngress, KindWorkItem, KindDispatch, KindJob,
		KindOutbox, KindSchedule, KindAudit, KindConversation, KindTranscript, KindInstallation,
		KindPackage, KindSetting, KindApproval, KindRun, KindRunChild, KindTask, KindReset, KindBudget,
		KindRunState, KindRule,
	}
}

// Copy loads everything from holds into to, which must hold nothing, and returns how many records
// of each kind it copied. from is only read.
func Copy(ctx context.Context, from Source, to Destination) (Counts, error) {
	counts := Counts{}
	err := to.Load(ctx, func(fn func(Record) error) error {
		return from.Dump(ctx, func(r Record) error {
			k := r.Kind()
			if k == "" {
				return fmt.Errorf("copy: an empty record in the stream")
			}
			if k != KindSequence {
				counts[k]++
			}
			return fn(r)
		})
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}
