package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/dump"
)

var _ dump.Destination = (*Store)(nil)

// loadBatch is how many rows Load sends in one round trip.
const loadBatch = 1000

// dataTables are the tables that hold records, in the order Load names
// them when it finds the database holding some. leases and
// schema_migrations are not among them: they say which replica runs what
// and which schema the database has, not what the daemon keeps; nor is
// admin_sessions: a copy carries no sessions, people sign in again.
var dataTables = []string{
	"work_items", "events", "ingress", "dispatches", "jobs", "outbox", "approvals", "audit",
	"conversations", "transcripts", "installations", "packages", "skill_settings", "runs", "tasks",
	"budgets", "run_states", "schedules", "dedup", "deliveries", "thread_resets", "rules",
}

// Load writes the records of stream into the database, which must hold
// none, in one transaction sent in batches of rows: a load that fails
// leaves the database as empty as it found it. Each record keeps its id;
// the sequences go on after the highest id of each series, or after the
// last one the source gave out when that is higher, so the ids given out
// afterwards collide with none the source ever gave. Indexes, the
// active unit of each running job and the repositories of installations
// are written from the records.
func (s *Store) Load(ctx context.Context, stream func(fn func(dump.Record) error) error) error {
	if err := s.open(); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Replicas started on the database while it loads wait rather than
		// see half of it.
		if _, err := tx.Exec(ctx, "LOCK TABLE "+strings.Join(dataTables, ", ")+" IN EXCLUSIVE MODE"); err != nil {
			return err
		}
		if err := refuseNonEmpty(ctx, tx); err != nil {
			return err
		}
		l := &loader{tx: tx, last: map[dump.Series]int64{}}
		var own error
		err := stream(func(r dump.Record) error {
			if err := l.add(ctx, r); err != nil {
				own = fmt.Errorf("%s: %w", r.Kind(), err)
				return own
			}
			if l.batch.Len() >= loadBatch {
				own = l.flush(ctx)
			}
			return own
		})
		if err != nil && own == nil {
			return sourceError{err}
		}
		if err != nil {
			return err
		}
		if err := l.flush(ctx); err != nil {
			return err
		}
		return l.sequences(ctx)
	})
	if se, ok := errors.AsType[sourceError](err); ok {
		return se.err // the source's own, named by it
	}
	return s.wrap("load", err)
}

// sourceError is an error of the stream's source, not of the load.
type sourceError struct{ err error }

func (e sourceError) Error() string { return e.err.Error() }
func (e sourceError) Unwrap() error { return e.err }

// refuseNonEmpty fails naming the tables of the database that hold rows.
func refuseNonEmpty(ctx context.Context, tx pgx.Tx) error {
	parts := make([]string, len(dataTables))
	for i, t := range dataTables {
		parts[i] = fmt.Sprintf("SELECT '%s' WHERE EXISTS (SELECT 1 FROM %s)", t, t)
	}
	rows, err := tx.Query(ctx, strings.Join(parts, " UNION ALL "))
	if err != nil {
		return err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(found) > 0 {
		return bot.Errorf(bot.ECONFLICT, "the database is not empty (it holds %s); copy only into a database that holds no records",
			strings.Join(found, ", "))
	}
	return nil
}

// loader queues the rows of records in a batch. It is a querier whose
// Exec queues, so the functions that write a row for the store write it
// for Load too.
type loader struct {
	tx    pgx.Tx
	batch pgx.Batch
	last  map[dump.Series]int64
}

// Exec queues a statement, refusing at once text PostgreSQL cannot keep (a
// key an older bbolt store took: not UTF-8, or with NUL), so the load
// fails naming it rather than with the batch's error about some row.
func (l *loader) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	for _, a := range args {
		if text, ok := a.(string); ok && !storable(text) {
			return pgconn.CommandTag{}, bot.Errorf(bot.EINVALID, "%q is not UTF-8 text without NUL, which PostgreSQL cannot keep", text)
		}
	}
	l.batch.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

func (l *loader) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, fmt.Errorf("load: queries are not batched")
}

func (l *loader) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	return errRow{fmt.Errorf("load: queries are not batched")}
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

func (l *loader) flush(ctx context.Context) error {
	if l.batch.Len() == 0 {
		return nil
	}
	err := l.tx.SendBatch(ctx, &l.batch).Close()
	l.batch = pgx.Batch{}
	return err
}

// seq returns the number of id, which must have the prefix.
func seq(prefix, id string) (int64, error) {
	n, ok := parseID(prefix, id)
	if !ok {
		return 0, fmt.Errorf("id %q is not %sN", id, prefix)
	}
	return n, nil
}

// optSeq is seq of an id that may be empty: NULL then.
func optSeq(prefix, id string) (*int64, error) {
	if id == "" {
		return nil, nil
	}
	n, err := seq(prefix, id)
	return &n, err
}

func (l *loader) add(ctx context.Context, r dump.Record) error {
	switch {
	case r.Sequence != nil:
		l.last[r.Sequence.Series] = max(l.last[r.Sequence.Series], r.Sequence.Last)
		return nil
	case r.Event != nil:
		header, err := jsonDoc(&r.Event.Event)
		if err != nil {
			return err
		}
		var raw []byte
		if len(r.Event.Event.Raw) > 0 {
			raw = r.Event.Event.Raw
		}
		_, err = l.Exec(ctx, "INSERT INTO events (seq, header, raw) VALUES ($1, $2, $3)", r.Event.Seq, header, raw)
		return err
	case r.Dedup != nil:
		_, err := l.Exec(ctx, "INSERT INTO dedup (key, until, ref) VALUES ($1, $2, $3)", r.Dedup.Key, nanos(r.Dedup.Until), r.Dedup.Ref)
		return err
	case r.Delivery != nil:
		_, err := l.Exec(ctx, "INSERT INTO deliveries (key, ref) VALUES ($1, $2)", r.Delivery.Key, r.Delivery.Ref)
		return err
	case r.Ingress != nil:
		return l.ingress(ctx, r.Ingress)
	case r.WorkItem != nil:
		return l.workItem(ctx, r.WorkItem)
	case r.Dispatch != nil:
		return l.dispatch(ctx, r.Dispatch)
	case r.Job != nil:
		return l.job(ctx, r.Job)
	case r.Outbox != nil:
		return putOutbox(ctx, l, r.Outbox, true)
	case r.Schedule != nil:
		_, err := l.Exec(ctx, "INSERT INTO schedules (name, last_fired) VALUES ($1, $2)", r.Schedule.Name, nanos(r.Schedule.Last))
		return err
	case r.Audit != nil:
		_, err := l.Exec(ctx, "INSERT INTO audit (at, decision, doc) VALUES ($1, $2, $3)", nanos(r.Audit.At), r.Audit.Decision, r.Audit.Doc)
		return err
	case r.Conversation != nil:
		c := r.Conversation
		_, err := l.Exec(ctx, "INSERT INTO conversations (session_key, agent, doc) VALUES ($1, $2, $3)", c.SessionKey, c.Agent, c.Doc)
		return err
	case r.Transcript != nil:
		t := r.Transcript
		_, err := l.Exec(ctx, "INSERT INTO transcripts (job_id, run_id, doc) VALUES ($1, $2, $3)", t.JobID, t.RunID, t.Doc)
		return err
	case r.Installation != nil:
		return l.installation(ctx, r.Installation)
	case r.Package != nil:
		doc, err := jsonDoc(r.Package)
		if err != nil {
			return err
		}
		_, err = l.Exec(ctx, "INSERT INTO packages (name, doc) VALUES ($1, $2)", r.Package.Name, doc)
		return err
	case r.Setting != nil:
		return putSetting(ctx, l, *r.Setting)
	case r.Rule != nil:
		seq, ok := ruleSeq(r.Rule.ID)
		if !ok {
			return fmt.Errorf("rule id %q", r.Rule.ID)
		}
		return putRule(ctx, l, seq, *r.Rule)
	case r.Approval != nil:
		return putApproval(ctx, l, *r.Approval, true)
	case r.Run != nil:
		return l.run(ctx, r.Run)
	case r.RunChild != nil:
		n, err := seq(prefixRun, r.RunChild.RunID)
		if err != nil {
			return err
		}
		_, err = l.Exec(ctx, "INSERT INTO run_children (child_wi, run_seq) VALUES ($1, $2)", r.RunChild.WorkItemID, n)
		return err
	case r.Task != nil:
		return l.task(ctx, r.Task)
	case r.Reset != nil:
		_, err := l.Exec(ctx, "INSERT INTO thread_resets (session_key, at) VALUES ($1, $2)", r.Reset.SessionKey, nanos(r.Reset.At))
		return err
	case r.Budget != nil:
		doc, err := jsonDoc(r.Budget)
		if err != nil {
			return err
		}
		_, err = l.Exec(ctx, "INSERT INTO budgets (key, doc) VALUES ($1, $2)", r.Budget.Key, doc)
		return err
	case r.RunState != nil:
		_, err := l.Exec(ctx, "INSERT INTO run_states (work_item, doc) VALUES ($1, $2)", r.RunState.WorkItemID, r.RunState.Doc)
		return err
	}
	return fmt.Errorf("an empty record")
}

func (l *loader) ingress(ctx context.Context, in *bot.IngressRecord) error {
	n, err := seq(prefixIngress, in.ID)
	if err != nil {
		return err
	}
	ev, err := seq(prefixEvent, in.EventRef)
	if err != nil {
		return err
	}
	doc, err := jsonDoc(in)
	if err != nil {
		return err
	}
	_, err = l.Exec(ctx, "INSERT INTO ingress (seq, event_seq, reason, doc) VALUES ($1, $2, $3, $4)", n, ev, in.Reason, doc)
	return err
}

func (l *loader) workItem(ctx context.Context, wi *dump.WorkItem) error {
	n, err := seq(prefixWorkItem, wi.ID)
	if err != nil {
		return err
	}
	ev, err := optSeq(prefixEvent, wi.EventRef)
	if err != nil {
		return err
	}
	dp, err := optSeq(prefixDispatch, wi.DispatchID)
	if err != nil {
		return err
	}
	doc, err := jsonDoc(&wi.WorkItem)
	if err != nil {
		return err
	}
	_, err = l.Exec(ctx, "INSERT INTO work_items (seq, event_seq, thread, status, dispatch_seq, doc) VALUES ($1, $2, $3, $4, $5, $6)",
		n, ev, wi.Thread.Key(), string(wi.Status), dp, doc)
	return err
}

func (l *loader) dispatch(ctx context.Context, d *bot.Dispatch) error {
	n, err := seq(prefixDispatch, d.ID)
	if err != nil {
		return err
	}
	wi, err := seq(prefixWorkItem, d.WorkItemID)
	if err != nil {
		return err
	}
	doc, err := jsonDoc(d)
	if err != nil {
		return err
	}
	_, err = l.Exec(ctx, "INSERT INTO dispatches (seq, work_item_seq, unit, agent, status, doc) VALUES ($1, $2, $3, $4, $5, $6)",
		n, wi, dispatchUnit(d), d.Agent, string(d.Status), doc)
	return err
}

// job writes a job with the work items it ran and, while it runs, the
// unit it holds.
func (l *loader) job(ctx context.Context, j *bot.Job) error {
	n, err := seq(prefixJob, j.ID)
	if err != nil {
		return err
	}
	u := pgUnit(j.Lane)
	if j.Lane == "" {
		first := ""
		if len(j.WorkItemIDs) > 0 {
			first = j.WorkItemIDs[0]
		}
		u = unit(j.Thread, first)
	}
	doc, err := jsonDoc(j)
	if err != nil {
		return err
	}
	if _, err := l.Exec(ctx, "INSERT INTO jobs (seq, status, owner, lease_expires, unit, doc) VALUES ($1, $2, $3, $4, $5, $6)",
		n, string(j.Status), j.Owner, nanos(j.LeaseExpires), u, doc); err != nil {
		return err
	}
	for _, id := range j.WorkItemIDs {
		wi, err := seq(prefixWorkItem, id)
		if err != nil {
			return err
		}
		if _, err := l.Exec(ctx, "INSERT INTO job_work_items (work_item_seq, job_seq) VALUES ($1, $2) ON CONFLICT DO NOTHING", wi, n); err != nil {
			return err
		}
	}
	if j.Status == bot.JobRunning {
		_, err = l.Exec(ctx, "INSERT INTO active_units (unit, job_seq) VALUES ($1, $2)", u, n)
	}
	return err
}

func (l *loader) installation(ctx context.Context, in *dump.Installation) error {
	rec := &installationRecord{ID: in.ID, Account: in.Account, Suspended: in.Suspended, Repos: in.Repos, UpdatedAt: in.UpdatedAt}
	if err := putInstallation(ctx, l, rec); err != nil {
		return err
	}
	keys, err := repoKeys(in.Repos)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if _, err := l.Exec(ctx, "INSERT INTO installation_repos (repo, installation) VALUES ($1, $2)", k, in.ID); err != nil {
			return err
		}
	}
	return nil
}

func (l *loader) run(ctx context.Context, r *bot.ChildRun) error {
	n, err := seq(prefixRun, r.ID)
	if err != nil {
		return err
	}
	doc, err := jsonDoc(r)
	if err != nil {
		return err
	}
	_, err = l.Exec(ctx, `INSERT INTO runs (seq, owner_session, owner_agent, parent_wi, status, archived, doc)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, n, r.SessionKey, r.AgentID, r.ParentLinks.WorkItemID, string(r.Status), r.ArchivedAt != nil, doc)
	return err
}

func (l *loader) task(ctx context.Context, bt *bot.BackgroundTask) error {
	n, err := seq(prefixTask, bt.ID)
	if err != nil {
		return err
	}
	doc, err := jsonDoc(bt)
	if err != nil {
		return err
	}
	_, err = l.Exec(ctx, `INSERT INTO tasks (seq, owner_session, owner_agent, creator_job, status, archived, doc)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, n, bt.SessionKey, bt.AgentID, bt.Creator.JobID, string(bt.Status), bt.ArchivedAt != nil, doc)
	return err
}

// series are the sequences of the id series: the sequence and the table
// and column that hold the ids it gave.
var series = []struct {
	name            dump.Series
	sequence, table string
}{
	{dump.SeriesEvents, "events_seq_seq", "events"},
	{dump.SeriesWorkItems, "work_items_seq_seq", "work_items"},
	{dump.SeriesDispatches, "dispatches_seq_seq", "dispatches"},
	{dump.SeriesJobs, "jobs_seq_seq", "jobs"},
	{dump.SeriesIngress, "ingress_seq_seq", "ingress"},
	{dump.SeriesOutbox, "outbox_seq", "outbox"},
	{dump.SeriesAudit, "audit_seq_seq", "audit"},
	{dump.SeriesRuns, "runs_seq_seq", "runs"},
	{dump.SeriesTasks, "tasks_seq_seq", "tasks"},
	{dump.SeriesRules, "rules_seq_seq", "rules"},
}

// sequences sets each sequence to go on after the highest id of its series
// in the database and the last one the source gave.
func (l *loader) sequences(ctx context.Context) error {
	for _, s := range series {
		_, err := l.tx.Exec(ctx, fmt.Sprintf(`SELECT setval('%s', greatest($1::bigint, (SELECT max(seq) FROM %s)))
			WHERE greatest($1::bigint, (SELECT max(seq) FROM %s)) > 0`, s.sequence, s.table, s.table), l.last[s.name])
		if err != nil {
			return fmt.Errorf("set the sequence of %s: %w", s.table, err)
		}
	}
	return nil
}
