package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/bot"
)

// ClaimNext leases the oldest claimable pending dispatch, with every later
// pending dispatch of its unit and agent, as one new job. First it ends the
// jobs whose lease ran out by req.Now, whoever ran them: their dispatches
// become pending again, or fail after MaxAttempts.
//
// Replicas claim concurrently: the pending rows are taken FOR UPDATE SKIP
// LOCKED, so two claims never wait on each other's rows; a transaction
// advisory lock on the unit and the active_units primary key make a unit's
// second claim find the first.
func (s *Store) ClaimNext(ctx context.Context, req bot.ClaimRequest) (bot.Claim, error) {
	if err := s.open(); err != nil {
		return bot.Claim{}, err
	}
	if err := req.Validate(); err != nil {
		return bot.Claim{}, err
	}
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	req.Now = utc(req.Now)
	// Idle workers poll: look without locking first.
	var work bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM jobs WHERE status = 'running' AND lease_expires <= $1)
		OR EXISTS (SELECT 1 FROM dispatches d WHERE status = 'pending' AND NOT EXISTS (SELECT 1 FROM active_units a WHERE a.unit = d.unit))`,
		nanos(req.Now)).Scan(&work)
	if err != nil || !work {
		return bot.Claim{}, s.wrap("claim next dispatch", err)
	}
	var (
		claim   bot.Claim
		expired []*jobRow
	)
	err = s.tx(ctx, "claim next dispatch", func(tx pgx.Tx) error {
		claim = bot.Claim{}
		var err error
		if expired, claim.Abandoned, err = expireLeases(ctx, tx, req); err != nil {
			return err
		}
		claim.Job, claim.WorkItems, err = claimOne(ctx, tx, req)
		return err
	})
	if err != nil {
		return bot.Claim{}, err
	}
	for _, j := range expired {
		s.log.Warn("job lease expired", slog.String("job", j.ID), slog.String("owner", j.Owner),
			slog.String("thread", j.Thread.Key()), slog.Time("lease_expires", j.LeaseExpires))
	}
	return claim, nil
}

// expireLeases ends every running job whose lease is not after req.Now.
func expireLeases(ctx context.Context, tx pgx.Tx, req bot.ClaimRequest) ([]*jobRow, []bot.WorkItem, error) {
	rows, err := tx.Query(ctx, `SELECT seq FROM jobs WHERE status = 'running' AND lease_expires <= $1 ORDER BY seq FOR UPDATE SKIP LOCKED`,
		nanos(req.Now))
	if err != nil {
		return nil, nil, err
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, nil, err
	}
	var (
		expired   []*jobRow
		abandoned []bot.WorkItem
	)
	for _, seq := range seqs {
		j, err := getJob(ctx, tx, formatID(prefixJob, seq), false)
		if err != nil {
			return nil, nil, err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM active_units WHERE unit = $1 AND job_seq = $2", j.unit, j.seq); err != nil {
			return nil, nil, err
		}
		now := req.Now
		j.Status = bot.JobExpired
		j.Error = fmt.Sprintf("lease expired at %s (worker %s died)", j.LeaseExpires.Format(time.RFC3339), j.Owner)
		j.FinishedAt = &now
		if err := putJob(ctx, tx, j); err != nil {
			return nil, nil, err
		}
		for _, id := range j.DispatchIDs {
			wi, err := expireDispatch(ctx, tx, id, j, req)
			if err != nil {
				return nil, nil, err
			}
			if wi == nil {
				continue
			}
			abandoned = append(abandoned, *wi)
			if err := tellAbandoned(ctx, tx, req, *wi); err != nil {
				return nil, nil, err
			}
		}
		expired = append(expired, j)
	}
	return expired, abandoned, nil
}

// expireDispatch makes a dispatch of an expired job pending again or, out
// of attempts, fails it with its work item, which it returns.
func expireDispatch(ctx context.Context, tx pgx.Tx, id string, j *jobRow, req bot.ClaimRequest) (*bot.WorkItem, error) {
	d, err := getDispatchID(ctx, tx, id, true)
	if err != nil {
		return nil, err
	}
	if d.Status != bot.DispatchLeased {
		return nil, nil
	}
	retry, status, run, why := d.Expired(&j.Job, req.MaxAttempts)
	if retry {
		d.LastError = j.Error
		return nil, requeue(ctx, tx, d, req.Now)
	}
	now := req.Now
	d.UpdatedAt = now
	d.Status = bot.DispatchFailed
	d.LastError = why
	if err := putDispatch(ctx, tx, d); err != nil {
		return nil, err
	}
	wi, err := setItemStatus(ctx, tx, d, status, now, func(wi *bot.WorkItem) {
		wi.Error = why
		wi.FinishedAt = &now
	})
	if err != nil || wi == nil {
		return wi, err
	}
	return wi, childEnded(ctx, tx, wi, run, "", why, now)
}

// requeue puts a dispatch of an ended job back in the queue, in its old
// place, with its work item queued; a dispatch whose work item was handed
// off meanwhile fails instead.
func requeue(ctx context.Context, tx pgx.Tx, d *dispatchRow, now time.Time) error {
	wi, err := getWorkItem(ctx, tx, d.WorkItemID, true)
	if err != nil {
		return err
	}
	d.UpdatedAt = now
	if wi.dispatch != d.seq {
		d.Status = bot.DispatchFailed
		d.LastError = fmt.Sprintf("superseded by the handoff to @%s", wi.Route.Agent)
		return putDispatch(ctx, tx, d)
	}
	d.Status = bot.DispatchPending
	if err := putDispatch(ctx, tx, d); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", notifyChannel, bot.TopicWork+":"); err != nil {
		return err
	}
	item, err := setItemStatus(ctx, tx, d, bot.StatusQueued, now, nil)
	if err != nil || item == nil {
		return err
	}
	return childRequeued(ctx, tx, item, now)
}

// setItemStatus moves the work item of d to status, applying edit, when d
// still carries it, and returns it; nil when d no longer carries it.
func setItemStatus(ctx context.Context, tx pgx.Tx, d *dispatchRow, status bot.WorkStatus, now time.Time, edit func(*bot.WorkItem)) (*bot.WorkItem, error) {
	wi, err := getWorkItem(ctx, tx, d.WorkItemID, true)
	if err != nil {
		return nil, err
	}
	if wi.dispatch != d.seq {
		return nil, nil
	}
	wi.Status = status
	wi.UpdatedAt = now
	if edit != nil {
		edit(&wi.WorkItem)
	}
	if err := putWorkItem(ctx, tx, wi); err != nil {
		return nil, err
	}
	return &wi.WorkItem, nil
}

// claimOne turns the oldest pending dispatch of a unit without a running
// job, and the later pending dispatches of that unit and agent, into a job.
func claimOne(ctx context.Context, tx pgx.Tx, req bot.ClaimRequest) (*bot.Job, []bot.WorkItem, error) {
	skip := []string{}
	for range 32 {
		var (
			lead        int64
			unit, agent string
		)
		err := tx.QueryRow(ctx, `SELECT seq, unit, agent FROM dispatches d
			WHERE status = 'pending' AND NOT (unit = ANY($1))
			AND NOT EXISTS (SELECT 1 FROM active_units a WHERE a.unit = d.unit)
			ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED`, skip).Scan(&lead, &unit, &agent)
		if err == pgx.ErrNoRows {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
		// Another claim may be taking the same unit: whoever holds its lock
		// goes on, the other looks elsewhere.
		var locked, active bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended($1, 17)),
			EXISTS (SELECT 1 FROM active_units WHERE unit = $1)`, unit).Scan(&locked, &active); err != nil {
			return nil, nil, err
		}
		if !locked || active {
			skip = append(skip, unit)
			continue
		}
		rows, err := tx.Query(ctx, `SELECT seq FROM dispatches
			WHERE status = 'pending' AND unit = $1 AND agent = $2 AND seq >= $3
			ORDER BY seq FOR UPDATE SKIP LOCKED`, unit, agent, lead)
		if err != nil {
			return nil, nil, err
		}
		seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return nil, nil, err
		}
		return startJob(ctx, tx, req, unit, agent, seqs)
	}
	return nil, nil, nil
}

func startJob(ctx context.Context, tx pgx.Tx, req bot.ClaimRequest, unit, agent string, seqs []int64) (*bot.Job, []bot.WorkItem, error) {
	var jobSeq int64
	if err := tx.QueryRow(ctx, "SELECT nextval('jobs_seq_seq')").Scan(&jobSeq); err != nil {
		return nil, nil, err
	}
	job := &bot.Job{
		ID: formatID(prefixJob, jobSeq), Agent: agent, Status: bot.JobRunning, Owner: req.Owner,
		LeaseExpires: req.Now.Add(req.Lease), StartedAt: req.Now,
	}
	var items []bot.WorkItem
	for i, seq := range seqs {
		d, err := getDispatch(ctx, tx, seq, false)
		if err != nil {
			return nil, nil, err
		}
		d.Status = bot.DispatchLeased
		d.Attempts++
		d.UpdatedAt = req.Now
		if err := putDispatch(ctx, tx, d); err != nil {
			return nil, nil, err
		}
		if i == 0 {
			job.Thread = d.Thread
			job.Attempt = d.Attempts
			job.Lane = d.Lane
		}
		job.DispatchIDs = append(job.DispatchIDs, d.ID)
		job.WorkItemIDs = append(job.WorkItemIDs, d.WorkItemID)
		wi, err := setItemStatus(ctx, tx, d, bot.StatusRunning, req.Now, func(wi *bot.WorkItem) { wi.FinishedAt = nil })
		if err != nil {
			return nil, nil, err
		}
		if wi != nil {
			if err := childClaimed(ctx, tx, wi, job.ID, d.ID, req.Now); err != nil {
				return nil, nil, err
			}
			items = append(items, *wi)
			wiSeq, _ := parseID(prefixWorkItem, wi.ID)
			if _, err := tx.Exec(ctx, "INSERT INTO job_work_items (work_item_seq, job_seq) VALUES ($1, $2)", wiSeq, jobSeq); err != nil {
				return nil, nil, err
			}
		}
	}
	doc, err := jsonDoc(job)
	if err != nil {
		return nil, nil, err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO jobs (seq, status, owner, lease_expires, unit, doc) VALUES ($1, $2, $3, $4, $5, $6)",
		jobSeq, string(job.Status), job.Owner, nanos(job.LeaseExpires), unit, doc); err != nil {
		return nil, nil, err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO active_units (unit, job_seq) VALUES ($1, $2)", unit, jobSeq); err != nil {
		return nil, nil, err
	}
	return job, items, nil
}

// heldJob returns a running job owner holds, locked, or ECONFLICT.
func heldJob(ctx context.Context, tx pgx.Tx, jobID, owner string) (*jobRow, error) {
	j, err := getJob(ctx, tx, jobID, true)
	if err != nil {
		return nil, err
	}
	if j.Status != bot.JobRunning || j.Owner != owner {
		return nil, bot.Errorf(bot.ECONFLICT, "job %s is no longer held by %s (status %s, owner %s)", jobID, owner, j.Status, j.Owner)
	}
	return j, nil
}

// RenewLease extends the lease of a job owner still runs.
func (s *Store) RenewLease(ctx context.Context, jobID, owner string, until time.Time) error {
	return s.tx(ctx, "renew lease", func(tx pgx.Tx) error {
		j, err := heldJob(ctx, tx, jobID, owner)
		if err != nil {
			return err
		}
		if j.Cancel != nil {
			return j.Cancel
		}
		j.LeaseExpires = utc(until)
		return putJob(ctx, tx, j)
	})
}

// FinishJob records the end of a job with its dispatches and work items
// and frees its unit.
func (s *Store) FinishJob(ctx context.Context, out bot.JobOutcome) error {
	out, err := checkOutcome(out)
	if err != nil {
		return err
	}
	return s.tx(ctx, "finish job", func(tx pgx.Tx) error { return finishJob(ctx, tx, out) })
}

// SaveRunStateWithEnds saves a run's state and ends the jobs of ends in
// one transaction, which any end that cannot be written fails whole.
func (s *Store) SaveRunStateWithEnds(ctx context.Context, st bot.RunState, ends []bot.JobOutcome) error {
	if err := checkRunState(st.WorkItemID, st.Doc); err != nil {
		return err
	}
	checked := make([]bot.JobOutcome, len(ends))
	for i, out := range ends {
		out, err := checkOutcome(out)
		if err != nil {
			return err
		}
		checked[i] = out
	}
	return s.tx(ctx, "save run state", func(tx pgx.Tx) error {
		for _, out := range checked {
			if err := finishJob(ctx, tx, out); err != nil {
				return err
			}
		}
		return saveRunState(ctx, tx, st.WorkItemID, st.Doc)
	})
}

// checkOutcome checks out and fills in what it leaves to the store.
func checkOutcome(out bot.JobOutcome) (bot.JobOutcome, error) {
	if out.Now.IsZero() {
		out.Now = time.Now()
	}
	out.Now = utc(out.Now)
	if !out.Success && out.Error == "" {
		out.Error = "the run failed"
	}
	return out, checkRecords(out.Records)
}

// finishJob ends the job of out, which its owner must still hold, with its
// dispatches, work items and the records its run left.
func finishJob(ctx context.Context, tx pgx.Tx, out bot.JobOutcome) error {
	now := out.Now
	j, err := heldJob(ctx, tx, out.JobID, out.Owner)
	if err != nil {
		return err
	}
	if c := out.CancelledFirst(&j.Job); c != nil {
		return c
	}
	if err := writeRecords(ctx, tx, out.Records, now); err != nil {
		return err
	}
	if end := out.Records.Run; end != nil {
		rec, _, err := getRun(ctx, tx, end.ID, false)
		if err != nil {
			return err
		}
		out.Follow(rec)
	}
	dStatus, wStatus, rStatus := out.End(&j.Job, now)
	if err := putJob(ctx, tx, j); err != nil {
		return err
	}
	for _, id := range j.DispatchIDs {
		d, err := getDispatchID(ctx, tx, id, true)
		if err != nil {
			return err
		}
		d.Status, d.UpdatedAt = dStatus, now
		if !out.Success {
			d.LastError = out.Error
		}
		if err := putDispatch(ctx, tx, d); err != nil {
			return err
		}
		wi, err := setItemStatus(ctx, tx, d, wStatus, now, func(wi *bot.WorkItem) {
			wi.Summary = out.Summary
			wi.Error = ""
			if !out.Success {
				wi.Error = out.Error
			}
			wi.FinishedAt = &now
		})
		if err != nil {
			return err
		}
		if wi != nil {
			if err := childEnded(ctx, tx, wi, rStatus, out.Summary, wi.Error, now); err != nil {
				return err
			}
		}
	}
	if err := enqueueEach(ctx, tx, out.Messages, now, "the end of job "+j.ID); err != nil {
		return err
	}
	return freeUnit(ctx, tx, j)
}

// freeUnit ends j's hold on its unit; the unit's next dispatch may be
// claimed, so idle workers are woken.
func freeUnit(ctx context.Context, tx pgx.Tx, j *jobRow) error {
	tag, err := tx.Exec(ctx, "DELETE FROM active_units WHERE unit = $1 AND job_seq = $2", j.unit, j.seq)
	if err != nil || tag.RowsAffected() == 0 {
		return err
	}
	var more bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM dispatches WHERE status = 'pending' AND unit = $1)", j.unit).Scan(&more); err != nil || !more {
		return err
	}
	_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", notifyChannel, bot.TopicWork+":")
	return err
}

// SaveJobRecords writes what a run left for a job that does not end here.
func (s *Store) SaveJobRecords(ctx context.Context, recs bot.JobRecords) error {
	if err := checkRecords(recs); err != nil {
		return err
	}
	now := utc(time.Now())
	return s.tx(ctx, "save job records", func(tx pgx.Tx) error { return writeRecords(ctx, tx, recs, now) })
}

// checkRecords checks recs before any of them is written.
func checkRecords(recs bot.JobRecords) error {
	if err := recs.Validate(); err != nil {
		return err
	}
	if t := recs.Transcript; t != nil {
		if err := validAgentKeys("transcript", t.JobID, t.RunID); err != nil {
			return err
		}
	}
	if recs.Usage != nil {
		return checkUsage(*recs.Usage)
	}
	return nil
}

// writeRecords writes what a run left for its job's end, checked by
// checkRecords.
func writeRecords(ctx context.Context, tx pgx.Tx, recs bot.JobRecords, now time.Time) error {
	if recs.Usage != nil {
		if err := addUsage(ctx, tx, *recs.Usage); err != nil {
			return err
		}
	}
	if t := recs.Transcript; t != nil {
		if err := saveTranscript(ctx, tx, t.JobID, t.RunID, t.Doc); err != nil {
			return err
		}
	}
	if recs.Run != nil {
		return endRun(ctx, tx, *recs.Run, now)
	}
	return nil
}

// ReleaseJob gives a running job back: its dispatches are pending again in
// their old places, the attempt uncounted, its unit is free, and tell
// tells the thread so. A job whose work a person cancelled is not given
// back: the cancel is returned, and nothing written.
func (s *Store) ReleaseJob(ctx context.Context, jobID, owner string, now time.Time, tell []bot.OutboxMessage) error {
	if now.IsZero() {
		now = time.Now()
	}
	now = utc(now)
	return s.tx(ctx, "release job", func(tx pgx.Tx) error {
		j, err := heldJob(ctx, tx, jobID, owner)
		if err != nil {
			return err
		}
		if j.Cancel != nil {
			return j.Cancel
		}
		j.Status, j.FinishedAt = bot.JobReleased, &now
		if err := putJob(ctx, tx, j); err != nil {
			return err
		}
		for _, id := range j.DispatchIDs {
			d, err := getDispatchID(ctx, tx, id, true)
			if err != nil {
				return err
			}
			if d.Status != bot.DispatchLeased {
				continue
			}
			if d.Attempts > 0 {
				d.Attempts--
			}
			if err := requeue(ctx, tx, d, now); err != nil {
				return err
			}
		}
		if err := enqueueEach(ctx, tx, tell, now, "job "+j.ID+" given back"); err != nil {
			return err
		}
		return freeUnit(ctx, tx, j)
	})
}

// QueueDepth counts pending dispatches and those leased by running jobs.
func (s *Store) QueueDepth(ctx context.Context) (int, error) {
	if err := s.open(); err != nil {
		return 0, err
	}
	var n int
	err := s.pool.QueryRow(ctx, "SELECT count(*) FROM dispatches WHERE status IN ('pending', 'leased')").Scan(&n)
	return n, s.wrap("queue depth", err)
}

// tellAbandoned writes the messages req.Abandon gives for wi, in the
// transaction that failed it; a reaction that exists is left as it is.
func tellAbandoned(ctx context.Context, tx pgx.Tx, req bot.ClaimRequest, wi bot.WorkItem) error {
	if req.Abandon == nil {
		return nil
	}
	return enqueueEach(ctx, tx, req.Abandon(wi), req.Now, wi.ID+" given up")
}

// enqueueEach writes the messages that tell of what, in the transaction
// that does it: a reaction only when its key is new, the others replacing
// what their keys hold.
func enqueueEach(ctx context.Context, tx pgx.Tx, msgs []bot.OutboxMessage, now time.Time, what string) error {
	for _, m := range msgs {
		if m.UpdatedAt.IsZero() {
			m.UpdatedAt = now
		}
		if err := m.Validate(); err != nil {
			return fmt.Errorf("a message telling of %s: %w", what, err)
		}
		if _, _, err := enqueueTx(ctx, tx, m, m.Kind != bot.OutboxReaction); err != nil {
			return err
		}
	}
	return nil
}

// CancelWorkItem cancels a queued work item, or records the cancel on the
// running job of a running one for its worker.
func (s *Store) CancelWorkItem(ctx context.Context, id string, c bot.Cancelled) (*bot.WorkItem, *bot.Job, error) {
	if c.At.IsZero() {
		c.At = time.Now()
	}
	c.At = utc(c.At)
	var (
		wi  *bot.WorkItem
		job *bot.Job
	)
	err := s.tx(ctx, "cancel work item", func(tx pgx.Tx) error {
		wi, job = nil, nil
		rec, err := getWorkItem(ctx, tx, id, true)
		if err != nil {
			return err
		}
		switch rec.Status {
		case bot.StatusQueued:
			if err := cancelPending(ctx, tx, formatID(prefixDispatch, rec.dispatch), c.Error(), c.At); err != nil {
				return err
			}
		case bot.StatusRunning:
			var seq int64
			err := tx.QueryRow(ctx, `SELECT j.seq FROM job_work_items x JOIN jobs j ON j.seq = x.job_seq
				WHERE x.work_item_seq = $1 AND j.status = 'running' ORDER BY j.seq DESC LIMIT 1`, rec.seq).Scan(&seq)
			if errors.Is(err, pgx.ErrNoRows) {
				return bot.Errorf(bot.ECONFLICT, "work item %s is running but no job runs it", id)
			}
			if err != nil {
				return err
			}
			j, err := getJob(ctx, tx, formatID(prefixJob, seq), true)
			if err != nil {
				return err
			}
			if j.Cancel == nil {
				j.Cancel = &c
				if err := putJob(ctx, tx, j); err != nil {
					return err
				}
			}
			job = &j.Job
		default:
			return bot.Errorf(bot.ECONFLICT, "work item %s is %s already", id, rec.Status)
		}
		after, err := getWorkItem(ctx, tx, id, false)
		if err != nil {
			return err
		}
		wi = &after.WorkItem
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return wi, job, nil
}
