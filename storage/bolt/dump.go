package bolt

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strconv"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
	"github.com/switchyard/switchyard/storage/dump"
)

var _ dump.Source = (*Store)(nil)

// OpenReadOnly opens the store file at path to read it only, as storage
// copy does: nothing in the file is written, not even a migration. It
// fails, naming the file, when the file does not exist, when a running
// daemon holds it (bbolt's lock; ErrLocked after opts.LockTimeout), or
// when its schema is not the one this build writes.
func OpenReadOnly(ctx context.Context, path string, opts Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open %s: no such file", path)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, errors.Unwrap(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("open %s: not a regular file", path)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: opts.LockTimeout})
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("open %s: %w (waited %s)", path, ErrLocked, opts.LockTimeout)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
		return nil, fmt.Errorf("open %s: not a bbolt database, or a corrupt one: %w", path, err)
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte(bucketMeta))
		if meta == nil {
			return fmt.Errorf("open %s: not a Switchyard database (no %q bucket)", path, bucketMeta)
		}
		raw := meta.Get([]byte(schemaKey))
		if string(raw) != strconv.Itoa(SchemaVersion) {
			return fmt.Errorf("open %s: schema version %q, this build reads %d; start this version's daemon on it once to bring it up to date",
				path, raw, SchemaVersion)
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Store{db: db, path: path, log: opts.Logger, group: &groupCommit{db: db}}, nil
}

// Dump writes every record of the store to fn, in one read transaction,
// in the order of dump's kinds: the sequences of its ids first, then the
// records with their ids. Indexes and counters are left out; they follow
// from the records.
func (s *Store) Dump(ctx context.Context, fn func(dump.Record) error) error {
	return s.view("dump", func(t txn) error {
		if err := knownBuckets(t.tx); err != nil {
			return err
		}
		d := dumper{t: t, ctx: ctx, fn: fn}
		for _, step := range []func() error{
			d.sequences, d.events, d.dedup, d.deliveries, d.ingress, d.workItems, d.dispatches, d.jobs,
			d.outbox, d.schedules, d.audit, d.conversations, d.transcripts, d.installations, d.skills,
			d.approvals, d.ledger, d.budgets, d.runStates, d.rules,
		} {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	})
}

// knownBuckets fails on a top-level bucket Dump does not read, rather than
// leave its records behind: a file a newer build wrote, or a kind of
// record added without its place in the stream.
func knownBuckets(tx *bolt.Tx) error {
	known := map[string]bool{}
	for _, b := range Buckets() {
		known[string(b)] = true
	}
	for _, b := range [][]byte{
		bucketAudit, bucketApprovals, bucketBudgets, bucketRunStates, bucketConversations, bucketTranscripts,
		bucketInstallations, bucketLedger, bucketSkills, bucketRules,
		// Admin UI sessions are not copied: people sign in again.
		bucketAdminSessions, bucketAdminSessionsByExpiry,
	} {
		known[string(b)] = true
	}
	return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
		if !known[string(name)] {
			return fmt.Errorf("the store holds records this build cannot copy (bucket %q); copy with the build that wrote them", name)
		}
		return nil
	})
}

// dumper walks one read transaction.
type dumper struct {
	t   txn
	ctx context.Context
	fn  func(dump.Record) error
	n   int
}

func (d *dumper) emit(r dump.Record) error {
	// Checking the context on every record would cost more than the
	// record; every thousandth is often enough to stop promptly.
	if d.n++; d.n%1000 == 0 {
		if err := d.ctx.Err(); err != nil {
			return err
		}
	}
	return d.fn(r)
}

// each calls fn with every key and value of b (nil: none), the value
// copied: the stream may hold on to it after the transaction.
func each(b *bolt.Bucket, fn func(k, v []byte) error) error {
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, v []byte) error { return fn(k, bytes.Clone(v)) })
}

func decode(what string, k, v []byte, into any) error {
	if err := unmarshal(v, into); err != nil {
		return fmt.Errorf("decode %s %x: %w", what, k, err)
	}
	return nil
}

func (d *dumper) sequences() error {
	series := []struct {
		s dump.Series
		b *bolt.Bucket
	}{
		{dump.SeriesEvents, d.t.bucket(bucketEvents)},
		{dump.SeriesWorkItems, d.t.bucket(bucketWorkItems)},
		{dump.SeriesDispatches, d.t.bucket(bucketDispatches)},
		{dump.SeriesJobs, d.t.bucket(bucketJobs)},
		{dump.SeriesIngress, d.t.bucket(bucketIngress)},
		{dump.SeriesOutbox, d.t.bucket(bucketOutbox)},
	}
	if records, _, _ := auditBuckets(d.t.tx); records != nil {
		series = append(series, struct {
			s dump.Series
			b *bolt.Bucket
		}{dump.SeriesAudit, records})
	}
	if top := d.t.tx.Bucket(bucketLedger); top != nil {
		series = append(series, struct {
			s dump.Series
			b *bolt.Bucket
		}{dump.SeriesRuns, top.Bucket(ledgerRuns)}, struct {
			s dump.Series
			b *bolt.Bucket
		}{dump.SeriesTasks, top.Bucket(ledgerTasks)})
	}
	if rules := d.t.tx.Bucket(bucketRules); rules != nil {
		series = append(series, struct {
			s dump.Series
			b *bolt.Bucket
		}{dump.SeriesRules, rules})
	}
	for _, x := range series {
		if x.b == nil || x.b.Sequence() == 0 {
			continue
		}
		if err := d.emit(dump.Record{Sequence: &dump.Sequence{Series: x.s, Last: int64(x.b.Sequence())}}); err != nil {
			return err
		}
	}
	return nil
}

func (d *dumper) events() error {
	payloads := d.t.bucket(bucketPayloads)
	return each(d.t.bucket(bucketEvents), func(k, v []byte) error {
		ev, err := decodeEvent(v, payloads.Get(k))
		if err != nil {
			return fmt.Errorf("event %d: %w", seqOf(k), err)
		}
		return d.emit(dump.Record{Event: &dump.Event{Seq: int64(seqOf(k)), Event: *ev}})
	})
}

func (d *dumper) dedup() error {
	return each(d.t.bucket(bucketDedup), func(k, v []byte) error {
		if len(v) < 8 {
			return fmt.Errorf("dedup key %q: record too short", k)
		}
		return d.emit(dump.Record{Dedup: &dump.Dedup{Key: string(k), Until: decodeTime(v[:8]), Ref: string(v[8:])}})
	})
}

func (d *dumper) deliveries() error {
	return each(d.t.bucket(bucketDeliveries), func(k, v []byte) error {
		return d.emit(dump.Record{Delivery: &dump.Delivery{Key: string(k), Ref: string(v)}})
	})
}

func (d *dumper) ingress() error {
	return each(d.t.bucket(bucketIngress), func(k, v []byte) error {
		var in bot.IngressRecord
		if err := decode("ingress record", k, v, &in); err != nil {
			return err
		}
		in.ID = formatID(prefixIngress, seqOf(k))
		return d.emit(dump.Record{Ingress: &in})
	})
}

func (d *dumper) workItems() error {
	return each(d.t.bucket(bucketWorkItems), func(k, v []byte) error {
		var rec workItemRecord
		if err := decode("work item", k, v, &rec); err != nil {
			return err
		}
		rec.ID = formatID(prefixWorkItem, seqOf(k))
		return d.emit(dump.Record{WorkItem: &dump.WorkItem{WorkItem: rec.WorkItem, DispatchID: rec.Dispatch}})
	})
}

func (d *dumper) dispatches() error {
	return each(d.t.bucket(bucketDispatches), func(k, v []byte) error {
		var dp bot.Dispatch
		if err := decode("dispatch", k, v, &dp); err != nil {
			return err
		}
		dp.ID = formatID(prefixDispatch, seqOf(k))
		return d.emit(dump.Record{Dispatch: &dp})
	})
}

func (d *dumper) jobs() error {
	return each(d.t.bucket(bucketJobs), func(k, _ []byte) error {
		j, err := d.t.jobAt(k)
		if err != nil {
			return fmt.Errorf("job %d: %w", seqOf(k), err)
		}
		j.ID = formatID(prefixJob, seqOf(k))
		return d.emit(dump.Record{Job: j})
	})
}

func (d *dumper) outbox() error {
	return each(d.t.bucket(bucketOutbox), func(k, v []byte) error {
		var m bot.OutboxMessage
		if err := decode("outbox message", k, v, &m); err != nil {
			return err
		}
		return d.emit(dump.Record{Outbox: &m})
	})
}

func (d *dumper) schedules() error {
	return each(d.t.bucket(bucketSchedules), func(k, v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("schedule %q: record of %d bytes", k, len(v))
		}
		return d.emit(dump.Record{Schedule: &dump.Schedule{Name: string(k), Last: decodeTime(v)}})
	})
}

func (d *dumper) audit() error {
	records, byDecision, err := auditBuckets(d.t.tx)
	if err != nil || records == nil {
		return err
	}
	// The decision of a record is in its index entry only.
	decisions := make(map[string]string, records.Stats().KeyN)
	err = byDecision.ForEach(func(k, _ []byte) error {
		if len(k) < auditKeyLen+1 {
			return fmt.Errorf("audit index entry %x too short", k)
		}
		decisions[string(k[len(k)-auditKeyLen:])] = string(k[:len(k)-auditKeyLen-1])
		return nil
	})
	if err != nil {
		return err
	}
	return each(records, func(k, v []byte) error {
		if len(k) != auditKeyLen {
			return fmt.Errorf("audit record key %x: want %d bytes", k, auditKeyLen)
		}
		decision, ok := decisions[string(k)]
		if !ok {
			return fmt.Errorf("audit record %x has no decision", k)
		}
		return d.emit(dump.Record{Audit: &dump.Audit{At: decodeTime(k[:8]), Decision: decision, Doc: v}})
	})
}

func (d *dumper) conversations() error {
	top := d.t.tx.Bucket(bucketConversations)
	if top == nil {
		return nil
	}
	return top.ForEachBucket(func(session []byte) error {
		return each(top.Bucket(session), func(agent, v []byte) error {
			return d.emit(dump.Record{Conversation: &dump.Conversation{SessionKey: string(session), Agent: string(agent), Doc: v}})
		})
	})
}

func (d *dumper) transcripts() error {
	top := d.t.tx.Bucket(bucketTranscripts)
	if top == nil {
		return nil
	}
	type entry struct {
		order uint64
		rec   dump.Transcript
	}
	return top.ForEachBucket(func(job []byte) error {
		var entries []entry
		err := each(top.Bucket(job), func(run, v []byte) error {
			if len(v) < 8 {
				return fmt.Errorf("transcript %s/%s: record too short", job, run)
			}
			entries = append(entries, entry{binary.BigEndian.Uint64(v[:8]), dump.Transcript{JobID: string(job), RunID: string(run), Doc: v[8:]}})
			return nil
		})
		if err != nil {
			return err
		}
		// A job's transcripts list in the order they were first saved.
		slices.SortFunc(entries, func(a, b entry) int { return cmp.Compare(a.order, b.order) })
		for i := range entries {
			if err := d.emit(dump.Record{Transcript: &entries[i].rec}); err != nil {
				return err
			}
		}
		return nil
	})
}

func (d *dumper) installations() error {
	top := d.t.tx.Bucket(bucketInstallations)
	if top == nil {
		return nil
	}
	return each(top.Bucket(installationsByID), func(k, v []byte) error {
		var rec installationRecord
		if err := decode("installation", k, v, &rec); err != nil {
			return err
		}
		return d.emit(dump.Record{Installation: &dump.Installation{
			ID: rec.ID, Account: rec.Account, Suspended: rec.Suspended, Repos: rec.Repos, UpdatedAt: rec.UpdatedAt,
		}})
	})
}

func (d *dumper) skills() error {
	packages, settings, err := skillsBuckets(d.t.tx)
	if err != nil {
		return err
	}
	err = each(packages, func(k, v []byte) error {
		var p skills.InstalledPackage
		if err := decode("skill package", k, v, &p); err != nil {
			return err
		}
		return d.emit(dump.Record{Package: &p})
	})
	if err != nil {
		return err
	}
	return each(settings, func(k, v []byte) error {
		var st skills.Setting
		if err := decode("skill setting", k, v, &st); err != nil {
			return err
		}
		return d.emit(dump.Record{Setting: &st})
	})
}

func (d *dumper) rules() error {
	return each(d.t.tx.Bucket(bucketRules), func(k, v []byte) error {
		var r bot.StoredRule
		if err := decode("rule", k, v, &r); err != nil {
			return err
		}
		return d.emit(dump.Record{Rule: &r})
	})
}

func (d *dumper) approvals() error {
	b, err := approvalBucketsOf(d.t.tx)
	if err != nil || b == nil {
		return err
	}
	return each(b.records, func(k, v []byte) error {
		var a bot.Approval
		if err := decode("approval", k, v, &a); err != nil {
			return err
		}
		return d.emit(dump.Record{Approval: &a})
	})
}

func (d *dumper) ledger() error {
	l, err := d.t.ledger()
	if err != nil || !l.present {
		return err
	}
	err = each(l.runs, func(k, v []byte) error {
		var r bot.ChildRun
		if err := decode("child run", k, v, &r); err != nil {
			return err
		}
		r.ID = prefixRun + strconv.FormatUint(seqOf(k), 10)
		return d.emit(dump.Record{Run: &r})
	})
	if err != nil {
		return err
	}
	err = each(l.byChild, func(k, v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("child run link %q: record of %d bytes", k, len(v))
		}
		return d.emit(dump.Record{RunChild: &dump.RunChild{WorkItemID: string(k), RunID: prefixRun + strconv.FormatUint(seqOf(v), 10)}})
	})
	if err != nil {
		return err
	}
	err = each(l.tasks, func(k, v []byte) error {
		var bt bot.BackgroundTask
		if err := decode("background task", k, v, &bt); err != nil {
			return err
		}
		bt.ID = prefixTask + strconv.FormatUint(seqOf(k), 10)
		return d.emit(dump.Record{Task: &bt})
	})
	if err != nil {
		return err
	}
	return each(l.resets, func(k, v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("thread reset %q: record of %d bytes", k, len(v))
		}
		return d.emit(dump.Record{Reset: &dump.Reset{SessionKey: string(k), At: decodeTime(v)}})
	})
}

func (d *dumper) budgets() error {
	return each(d.t.tx.Bucket(bucketBudgets), func(k, v []byte) error {
		var sp bot.Spend
		if err := decode("budget", k, v, &sp); err != nil {
			return err
		}
		sp.Key = string(k)
		return d.emit(dump.Record{Budget: &sp})
	})
}

func (d *dumper) runStates() error {
	return each(d.t.tx.Bucket(bucketRunStates), func(k, v []byte) error {
		return d.emit(dump.Record{RunState: &dump.RunState{WorkItemID: string(k), Doc: v}})
	})
}
