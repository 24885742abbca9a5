package policy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

// Audit decisions.
const (
	AuditAllow         = "allow"          // a sensitive call that was allowed
	AuditDeny          = "deny"           // a call refused by the policy
	AuditNeedsApproval = "needs_approval" // a call waiting for a person
	AuditApproved      = "approved"       // a person approved it
	AuditRejected      = "rejected"       // a person rejected it
	AuditExpired       = "expired"        // nobody decided in time: denied
	AuditCancelled     = "cancelled"      // the run ended before a decision
	AuditNotApprover   = "not_approver"   // someone not on the approver list tried to decide; nothing changed
	AuditWrongIdentity = "wrong_identity" // a request claimed to decide as someone other than who authenticated; nothing changed
	AuditFromRun       = "from_run"       // a decision came from inside an agent's run; nothing changed
	AuditChange        = "change"         // a person changed something through the admin UI or the API (Tool names what, By who)
)

// AuditDecisions are the decisions records are filtered by.
func AuditDecisions() []string {
	return []string{AuditAllow, AuditDeny, AuditNeedsApproval, AuditApproved, AuditRejected,
		AuditExpired, AuditCancelled, AuditNotApprover, AuditWrongIdentity, AuditFromRun, AuditChange}
}

// AuditRecord is one entry of the audit log. Arguments and Reason are
// redacted before they are stored.
type AuditRecord struct {
	ID        string    `json:"id"`
	Time      time.Time `json:"time"`
	Decision  string    `json:"decision"`
	Rule      string    `json:"rule,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Tool      string    `json:"tool"`
	Arguments string    `json:"arguments,omitempty"`
	Agent     string    `json:"agent,omitempty"`
	Profile   string    `json:"profile,omitempty"`
	// Requester is who asked for the work; Ceilings bound the agent's
	// profile in the run (see tools.Scope), the first from the requester.
	Requester     *bot.Requester `json:"requester,omitempty"`
	Ceilings      []bot.Ceiling  `json:"ceilings,omitempty"`
	WorkItemID    string         `json:"work_item_id,omitempty"`
	JobID         string         `json:"job_id,omitempty"`
	SessionKey    string         `json:"session_key,omitempty"`
	CorrelationID string         `json:"correlation_id,omitempty"`
	// ApprovalID and By name the approval and who decided it.
	ApprovalID string `json:"approval_id,omitempty"`
	By         string `json:"by,omitempty"`
}

// AuditFilter selects audit records, newest first. Zero fields select all;
// Limit 0 means the store's default (100).
type AuditFilter struct {
	Since    time.Time
	Decision string
	Limit    int
	Cursor   string // continues a listing after the page that returned it
}

// AuditStore keeps the audit log as opaque documents with the time and
// decision it is filtered by. storage/bolt implements it.
type AuditStore interface {
	AppendAudit(ctx context.Context, at time.Time, decision string, doc []byte) error
	// ListAudit returns a page of documents at or after since (zero: all),
	// of the decision ("" : any), newest first, at most limit (0: the
	// store's default), after the page cursor ended ("" : from the
	// newest), and the cursor of the next page, "" after the last.
	ListAudit(ctx context.Context, since time.Time, decision string, limit int, cursor string) (docs [][]byte, next string, err error)
}

// maxAuditArgs bounds the arguments kept per record.
const maxAuditArgs = 4 << 10

// Auditor writes and reads the audit log, redacting what it stores.
type Auditor struct {
	store  AuditStore
	redact *bot.Redactor
	now    func() time.Time
}

// NewAuditor returns an Auditor over store. A redactor is required: the
// log must not be a place secrets collect in.
func NewAuditor(store AuditStore, r *bot.Redactor) (*Auditor, error) {
	if store == nil {
		return nil, errors.New("audit: no store")
	}
	if r == nil {
		return nil, errors.New("audit: no redactor")
	}
	return &Auditor{store: store, redact: r, now: time.Now}, nil
}

// Record redacts rec, gives it an id and a time when it has none, and
// appends it.
func (a *Auditor) Record(ctx context.Context, rec AuditRecord) error {
	if rec.Time.IsZero() {
		rec.Time = a.now()
	}
	rec.Time = rec.Time.UTC()
	if rec.ID == "" {
		rec.ID = newID("au", rec.Time)
	}
	rec.Arguments = a.redact.Redact(capText(rec.Arguments, maxAuditArgs))
	rec.Reason = a.redact.Redact(rec.Reason)
	doc, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode audit record: %w", err)
	}
	if err := a.store.AppendAudit(ctx, rec.Time, rec.Decision, doc); err != nil {
		return fmt.Errorf("append audit record: %w", err)
	}
	return nil
}

// RecordCall records the Engine's decision about a call.
func (a *Auditor) RecordCall(ctx context.Context, call tools.Call, d Decision) error {
	decision := AuditAllow
	switch d.Verdict {
	case tools.Deny:
		decision = AuditDeny
	case tools.NeedsApproval:
		decision = AuditNeedsApproval
	}
	rec := AuditRecord{
		Decision: decision, Rule: d.Rule, Reason: d.Reason, Tool: call.Tool.Name, Arguments: string(call.Input),
		Agent: call.Agent, Profile: call.Profile, WorkItemID: call.WorkItemID, JobID: call.JobID,
		SessionKey: call.SessionKey, CorrelationID: call.CorrelationID, Ceilings: call.Ceilings,
	}
	if !call.Requester.IsZero() {
		r := call.Requester
		rec.Requester = &r
	}
	return a.Record(ctx, rec)
}

// List returns a page of the records f selects, newest first, and the
// cursor of the next page: what `switchyard audit` and /api/v1/audit show.
func (a *Auditor) List(ctx context.Context, f AuditFilter) ([]AuditRecord, string, error) {
	if f.Decision != "" && !slices.Contains(AuditDecisions(), f.Decision) {
		return nil, "", bot.Errorf(bot.EINVALID, "decision %q: want one of %s", f.Decision, strings.Join(AuditDecisions(), ", "))
	}
	docs, next, err := a.store.ListAudit(ctx, f.Since, f.Decision, f.Limit, f.Cursor)
	if err != nil {
		return nil, "", fmt.Errorf("list audit records: %w", err)
	}
	out := make([]AuditRecord, 0, len(docs))
	for _, doc := range docs {
		var rec AuditRecord
		if err := json.Unmarshal(doc, &rec); err != nil {
			return nil, "", fmt.Errorf("decode audit record: %w", err)
		}
		out = append(out, rec)
	}
	return out, next, nil
}

func capText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "…"
}

// newID returns prefix_<time><random>: sortable by creation, unguessable.
func newID(prefix string, t time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + strconv.FormatInt(t.UnixMilli(), 36) + hex.EncodeToString(b[:])
}
