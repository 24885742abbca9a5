package bolt

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// ClaimNext leases the oldest claimable pending dispatch, with every later
// pending dispatch of its thread and agent, as one new job. Before looking
// for work it ends the jobs whose lease ran out by req.Now: their dispatches
// become pending again, or fail when they have been claimed MaxAttempts
// times.
//
// A claim reads the running jobs (at most one per thread, so about as many
// as there are workers) and the pending index, never finished work.
func (s *Store) ClaimNext(ctx context.Context, req bot.ClaimRequest) (bot.Claim, error) {
	if err := ctx.Err(); err != nil {
		return bot.Claim{}, err
	}
	if err := req.Validate(); err != nil {
		return bot.Claim{}, err
	}
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	req.Now = utc(req.Now)
	// Idle workers poll: look in a read transaction first, so a poll that
	// finds nothing neither waits for the writer lock nor writes the file.
	var work bool
	err := s.view("claim next dispatch", func(t txn) error {
		var err error
		work, err = t.claimable(req.Now)
		return err
	})
	if err != nil || !work {
		return bot.Claim{}, err
	}
	var claim bot.Claim
	var expired []*bot.Job
	err = s.update("claim next dispatch", func(t txn) error {
		var err error
		expired, claim.Abandoned, err = t.expireLeases(req)
		if err != nil {
			return err
		}
		claim.Job, claim.WorkItems, err = t.claim(req)
		return err
	})
	if err != nil {
		return bot.Claim{}, err
	}
	// The worker reports the abandoned work items; the store tells which
	// leases ran out, which only it sees.
	for _, j := range expired {
		s.log.Warn("job lease expired", slog.String("job", j.ID), slog.String("owner", j.Owner),
			slog.String("thread", j.Thread.Key()), slog.Time("lease_expires", j.LeaseExpires))
	}
	return claim, nil
}

// claimable reports whether a claim at now would change anything: a lease
// has run out, or a pending dispatch's thread has no running job. It reads
// the running jobs' leases from jobs_active, never a job record.
func (t txn) claimable(now time.Time) (bool, error) {
	active := t.bucket(bucketActive)
	c := active.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		_, lease, ok := splitActive(v)
		if !ok {
			return false, fmt.Errorf("jobs_active entry of %q is %d bytes", k, len(v))
		}
		if !lease.After(now) {
			return true, nil
		}
	}
	pc := t.bucket(bucketPending).Cursor()
	for k, v := pc.First(); k != nil; k, v = pc.Next() {
		if unit, _ := splitPendingValue(v); active.Get([]byte(unit)) == nil {
			return true, nil
		}
	}
	return false, nil
}

// expireLeases ends every running job whose lease is not after req.Now.
func (t txn) expireLeases(req bot.ClaimRequest) (expired []*bot.Job, abandoned []bot.WorkItem, err error) {
	type running struct {
		unit string
		seq  uint64
		job  *bot.Job
	}
	var due []running
	c := t.bucket(bucketActive).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		seq, lease, ok := splitActive(v)
		if !ok {
			return nil, nil, fmt.Errorf("jobs_active entry of %q is %d bytes", k, len(v))
		}
		if lease.After(req.Now) {
			continue
		}
		j, err := t.jobAt(v[:8])
		if err != nil {
			return nil, nil, err
		}
		if j == nil {
			return nil, nil, fmt.Errorf("jobs_active names job_%d, which does not exist", seq)
		}
		due = append(due, running{unit: string(k), seq: seq, job: j})
	}
	for _, r := range due {
		if err := t.freeUnit(r.unit, r.seq); err != nil {
			return nil, nil, err
		}
		j := r.job
		j.Status = bot.JobExpired
		j.Error = fmt.Sprintf("lease expired at %s (worker %s died)", j.LeaseExpires.Format(time.RFC3339), j.Owner)
		j.FinishedAt = &req.Now
		if err := t.putJob(r.seq, j); err != nil {
			return nil, nil, err
		}
		for _, id := range j.DispatchIDs {
			wi, err := t.expireDispatch(id, j, req)
			if err != nil {
				return nil, nil, err
			}
			if wi == nil {
				continue
			}
			abandoned = append(abandoned, *wi)
			if err := t.tellAbandoned(req, *wi); err != nil {
				return nil, nil, err
			}
		}
		expired = append(expired, j)
	}
	return expired, abandoned, nil
}

// expireDispatch makes a dispatch of an expired job pending again or, out of
// attempts, fails it with its work item, which it returns.
func (t txn) expireDispatch(id string, j *bot.Job, req bot.ClaimRequest) (*bot.WorkItem, error) {
	d, seq, err := t.dispatch(id)
	if err != nil {
		return nil, err
	}
	if d.Status != bot.DispatchLeased {
		return nil, nil
	}
	retry, status, run, why := d.Expired(j, req.MaxAttempts)
	if retry {
		d.LastError = j.Error
		return nil, t.requeue(seq, d, req.Now)
	}
	d.UpdatedAt = req.Now
	d.Status = bot.DispatchFailed
	d.LastError = why
	if err := t.putDispatch(seq, bot.DispatchLeased, d); err != nil {
		return nil, err
	}
	wi, err := t.setItemStatus(d, status, req.Now, func(wi *bot.WorkItem) {
		wi.Error = why
		wi.FinishedAt = &req.Now
	})
	if err != nil || wi == nil {
		return wi, err
	}
	return wi, t.childEnded(wi, run, "", why, req.Now)
}

// requeue puts a dispatch of an ended job back in the queue, in its old
// place, with its work item queued. A dispatch whose work item was handed
// off meanwhile is not run again: the handoff's dispatch carries the work
// item now. So a pending dispatch is always its work item's current one.
func (t txn) requeue(seq uint64, d *bot.Dispatch, now time.Time) error {
	rec, _, err := t.workItem(d.WorkItemID)
	if err != nil {
		return err
	}
	prev := d.Status
	d.UpdatedAt = now
	if rec.Dispatch != d.ID {
		d.Status = bot.DispatchFailed
		d.LastError = fmt.Sprintf("superseded by the handoff to @%s", rec.Route.Agent)
		return t.putDispatch(seq, prev, d)
	}
	d.Status = bot.DispatchPending
	if err := t.putDispatch(seq, prev, d); err != nil {
		return err
	}
	if err := t.addPending(seq, d); err != nil {
		return err
	}
	wi, err := t.setItemStatus(d, bot.StatusQueued, now, nil)
	if err != nil || wi == nil {
		return err
	}
	return t.childRequeued(wi, now)
}

// setItemStatus moves the work item of d to status, applying edit, when d
// still carries it (it was not handed off meanwhile), and returns the
// updated work item, or nil when d no longer carries it.
func (t txn) setItemStatus(d *bot.Dispatch, status bot.WorkStatus, now time.Time, edit func(*bot.WorkItem)) (*bot.WorkItem, error) {
	rec, seq, err := t.workItem(d.WorkItemID)
	if err != nil {
		return nil, err
	}
	if rec.Dispatch != d.ID {
		return nil, nil
	}
	prev := rec.Status
	rec.Status = status
	rec.UpdatedAt = now
	if edit != nil {
		edit(&rec.WorkItem)
	}
	if err := t.putWorkItem(seq, prev, rec); err != nil {
		return nil, err
	}
	return &rec.WorkItem, nil
}

// claim turns the oldest pending dispatch of a thread without a running job,
// and the later pending dispatches of that thread and agent, into a job.
func (t txn) claim(req bot.ClaimRequest) (*bot.Job, []bot.WorkItem, error) {
	active := t.bucket(bucketActive)
	var unit, agent string
	var lead []byte
	c := t.bucket(bucketPending).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		u, a := splitPendingValue(v)
		if active.Get([]byte(u)) == nil {
			unit, agent, lead = u, a, append([]byte(nil), k...)
			break
		}
	}
	if lead == nil {
		return nil, nil, nil
	}

	var seqs []uint64
	prefix := append([]byte(unit), 0)
	pc := t.bucket(bucketPendingByThread).Cursor()
	for k, v := pc.Seek(append(prefix, lead...)); k != nil && bytes.HasPrefix(k, prefix); k, v = pc.Next() {
		if len(k) == len(prefix)+8 && string(v) == agent {
			seqs = append(seqs, seqOf(k[len(prefix):]))
		}
	}
	return t.startJob(req, unit, agent, seqs)
}

// startJob leases the pending dispatches seqs of unit and agent, oldest
// first, as a new job of req.Owner's, with their work items running.
func (t txn) startJob(req bot.ClaimRequest, unit, agent string, seqs []uint64) (*bot.Job, []bot.WorkItem, error) {
	job, jobSeq, err := t.newJob(req, agent)
	if err != nil {
		return nil, nil, err
	}
	var items []bot.WorkItem
	var itemSeqs []uint64
	for i, seq := range seqs {
		d, _, err := t.dispatch(formatID(prefixDispatch, seq))
		if err != nil {
			return nil, nil, err
		}
		if err := t.removePending(seq, d); err != nil {
			return nil, nil, err
		}
		prev := d.Status
		d.Status = bot.DispatchLeased
		d.Attempts++
		d.UpdatedAt = req.Now
		if err := t.putDispatch(seq, prev, d); err != nil {
			return nil, nil, err
		}
		if i == 0 {
			job.Thread = d.Thread
			job.Attempt = d.Attempts
			job.Lane = d.Lane
		}
		wiSeq, ok := parseID(prefixWorkItem, d.WorkItemID)
		if !ok {
			return nil, nil, fmt.Errorf("dispatch %s names work item %q", d.ID, d.WorkItemID)
		}
		job.DispatchIDs = append(job.DispatchIDs, d.ID)
		job.WorkItemIDs = append(job.WorkItemIDs, d.WorkItemID)
		itemSeqs = append(itemSeqs, wiSeq)
		wi, err := t.setItemStatus(d, bot.StatusRunning, req.Now, func(wi *bot.WorkItem) {
			wi.FinishedAt = nil
		})
		if err != nil {
			return nil, nil, err
		}
		if wi != nil {
			if err := t.childClaimed(wi, job.ID, d.ID, req.Now); err != nil {
				return nil, nil, err
			}
			items = append(items, *wi)
			if err := t.bucket(bucketJobsByItem).Put(binaryPair(wiSeq, jobSeq), []byte{}); err != nil {
				return nil, nil, err
			}
		}
	}
	if err := t.writeJob(jobSeq, job, unit, seqs, itemSeqs); err != nil {
		return nil, nil, err
	}
	return job, items, nil
}

// newJob allocates a job of req.Owner's, running agent under a lease from
// req.Now; its caller leases its dispatches and writes it (writeJob).
func (t txn) newJob(req bot.ClaimRequest, agent string) (*bot.Job, uint64, error) {
	seq, err := t.bucket(bucketJobs).NextSequence()
	if err != nil {
		return nil, 0, err
	}
	return &bot.Job{
		ID: formatID(prefixJob, seq), Agent: agent, Status: bot.JobRunning, Owner: req.Owner,
		LeaseExpires: req.Now.Add(req.Lease), StartedAt: req.Now,
	}, seq, nil
}

// writeJob stores a job that has just leased the dispatches seqs (of the
// work items itemSeqs) as the running job of unit.
func (t txn) writeJob(jobSeq uint64, job *bot.Job, unit string, seqs, itemSeqs []uint64) error {
	if err := t.putJob(jobSeq, job); err != nil {
		return err
	}
	if err := t.putJobItems(jobSeq, seqs, itemSeqs); err != nil {
		return err
	}
	return t.bucket(bucketActive).Put([]byte(unit), activeValue(jobSeq, job.LeaseExpires))
}

func binaryPair(a, b uint64) []byte {
	return append(seqKey(a), seqKey(b)...)
}

// heldJob returns a job that owner still runs, or ECONFLICT.
func (t txn) heldJob(jobID, owner string) (*bot.Job, uint64, error) {
	j, seq, err := t.job(jobID)
	if err != nil {
		return nil, 0, err
	}
	if j.Status != bot.JobRunning || j.Owner != owner {
		return nil, 0, bot.Errorf(bot.ECONFLICT, "job %s is no longer held by %s (status %s, owner %s)", jobID, owner, j.Status, j.Owner)
	}
	return j, seq, nil
}

// RenewLease extends the lease of a job owner still runs.
func (s *Store) RenewLease(ctx context.Context, jobID, owner string, until time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.update("renew lease", func(t txn) error {
		j, seq, err := t.heldJob(jobID, owner)
		if err != nil {
			return err
		}
		if j.Cancel != nil {
			return j.Cancel
		}
		j.LeaseExpires = utc(until)
		if err := t.putJob(seq, j); err != nil {
			return err
		}
		return t.setLease(jobUnit(j), seq, j.LeaseExpires)
	})
}

// FinishJob records the end of a job with its dispatches and work items and
// frees its thread.
func (s *Store) FinishJob(ctx context.Context, out bot.JobOutcome) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	end, err := checkOutcome(out)
	if err != nil {
		return err
	}
	// Jobs that end together (subagents spawned in one turn) share a
	// commit: the function may run more than once (see groupCommit) and
	// changes nothing but the transaction.
	return s.wrap("finish job", s.group.do(func(tx *bolt.Tx) error { return txn{tx}.finishJob(end) }))
}

// SaveRunStateWithEnds saves a run's state and ends the jobs of ends in
// one transaction, which any end that cannot be written fails whole.
func (s *Store) SaveRunStateWithEnds(ctx context.Context, st bot.RunState, ends []bot.JobOutcome) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkRunState(st.WorkItemID, st.Doc); err != nil {
		return err
	}
	checked := make([]jobEnd, len(ends))
	for i, out := range ends {
		end, err := checkOutcome(out)
		if err != nil {
			return err
		}
		checked[i] = end
	}
	return s.wrap("save run state", s.group.do(func(tx *bolt.Tx) error {
		t := txn{tx}
		for _, end := range checked {
			if err := t.finishJob(end); err != nil {
				return err
			}
		}
		return t.saveRunState(st.WorkItemID, st.Doc)
	}))
}

// jobEnd is a job's end checked before its transaction.
type jobEnd struct {
	out          bot.JobOutcome
	now, usageAt time.Time
}

// checkOutcome checks out and fills in what it leaves to the store.
func checkOutcome(out bot.JobOutcome) (jobEnd, error) {
	if out.Now.IsZero() {
		out.Now = time.Now()
	}
	if !out.Success && out.Error == "" {
		out.Error = "the run failed"
	}
	usageAt, err := checkRecords(out.Records)
	if err != nil {
		return jobEnd{}, err
	}
	return jobEnd{out: out, now: utc(out.Now), usageAt: usageAt}, nil
}

// finishJob ends the job of e.out, which its owner must still hold, with
// its dispatches, work items and the records its run left.
func (t txn) finishJob(e jobEnd) error {
	out, now := e.out, e.now
	j, seq, err := t.heldJob(out.JobID, out.Owner)
	if err != nil {
		return err
	}
	if c := out.CancelledFirst(j); c != nil {
		return c
	}
	ended, err := t.writeRecords(out.Records, e.usageAt, now)
	if err != nil {
		return err
	}
	out.Follow(ended)
	dStatus, wStatus, rStatus := out.End(j, now)
	if err := t.putJob(seq, j); err != nil {
		return err
	}
	for _, id := range j.DispatchIDs {
		d, dSeq, err := t.dispatch(id)
		if err != nil {
			return err
		}
		prev := d.Status
		d.Status, d.UpdatedAt = dStatus, now
		if !out.Success {
			d.LastError = out.Error
		}
		if err := t.putDispatch(dSeq, prev, d); err != nil {
			return err
		}
		wi, err := t.setItemStatus(d, wStatus, now, func(wi *bot.WorkItem) {
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
			if err := t.childEnded(wi, rStatus, out.Summary, wi.Error, now); err != nil {
				return err
			}
		}
	}
	if err := t.enqueueEach(out.Messages, now, "the end of job "+j.ID); err != nil {
		return err
	}
	return t.freeUnit(jobUnit(j), seq)
}

// SaveJobRecords writes what a run left for a job that does not end here.
func (s *Store) SaveJobRecords(ctx context.Context, recs bot.JobRecords) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	usageAt, err := checkRecords(recs)
	if err != nil {
		return err
	}
	now := utc(time.Now())
	return s.update("save job records", func(t txn) error {
		_, err := t.writeRecords(recs, usageAt, now)
		return err
	})
}

// checkRecords checks recs and returns when their usage was spent.
func checkRecords(recs bot.JobRecords) (time.Time, error) {
	if err := recs.Validate(); err != nil {
		return time.Time{}, err
	}
	if t := recs.Transcript; t != nil {
		if err := validAgentKeys("transcript", t.JobID, t.RunID); err != nil {
			return time.Time{}, err
		}
	}
	if recs.Usage == nil {
		return time.Time{}, nil
	}
	return checkUsage(*recs.Usage)
}

// writeRecords writes what a run left for its job's end, checked by
// checkRecords, and returns the subagent's record recs.Run ended (nil
// without one) as it then stands.
func (t txn) writeRecords(recs bot.JobRecords, usageAt, now time.Time) (*bot.ChildRun, error) {
	if recs.Usage != nil {
		if err := t.addUsage(*recs.Usage, usageAt); err != nil {
			return nil, err
		}
	}
	if tr := recs.Transcript; tr != nil {
		if err := t.saveTranscript(tr.JobID, tr.RunID, tr.Doc); err != nil {
			return nil, err
		}
	}
	if recs.Run == nil {
		return nil, nil
	}
	return t.endRun(*recs.Run, now)
}

// ReleaseJob gives a running job back: its dispatches are pending again in
// their old places, the attempt uncounted, its thread is free, and tell
// tells the thread so. A job whose work a person cancelled is not given
// back: the cancel is returned, and nothing written.
func (s *Store) ReleaseJob(ctx context.Context, jobID, owner string, now time.Time, tell []bot.OutboxMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if now.IsZero() {
		now = time.Now()
	}
	now = utc(now)
	return s.update("release job", func(t txn) error {
		j, seq, err := t.heldJob(jobID, owner)
		if err != nil {
			return err
		}
		if j.Cancel != nil {
			return j.Cancel
		}
		j.Status, j.FinishedAt = bot.JobReleased, &now
		if err := t.putJob(seq, j); err != nil {
			return err
		}
		for _, id := range j.DispatchIDs {
			d, dSeq, err := t.dispatch(id)
			if err != nil {
				return err
			}
			if d.Status != bot.DispatchLeased {
				continue
			}
			if d.Attempts > 0 {
				d.Attempts--
			}
			if err := t.requeue(dSeq, d, now); err != nil {
				return err
			}
		}
		if err := t.enqueueEach(tell, now, "job "+j.ID+" given back"); err != nil {
			return err
		}
		return t.freeUnit(jobUnit(j), seq)
	})
}

func firstOf(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

// QueueDepth counts pending dispatches and those leased by running jobs,
// from their counters.
func (s *Store) QueueDepth(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n := 0
	err := s.view("queue depth", func(t txn) error {
		n = int(t.count(counterDispatchesPending) + t.count(counterDispatchesLeased))
		return nil
	})
	return n, err
}

// setLease records the lease of the running job with seq in jobs_active.
func (t txn) setLease(unit string, jobSeq uint64, lease time.Time) error {
	active := t.bucket(bucketActive)
	if v := active.Get([]byte(unit)); len(v) < 8 || !bytes.Equal(v[:8], seqKey(jobSeq)) {
		return fmt.Errorf("job_%d runs but is not the active job of %q", jobSeq, unit)
	}
	return active.Put([]byte(unit), activeValue(jobSeq, lease))
}

// tellAbandoned writes the messages req.Abandon gives for wi, in the
// transaction that failed it.
func (t txn) tellAbandoned(req bot.ClaimRequest, wi bot.WorkItem) error {
	if req.Abandon == nil {
		return nil
	}
	return t.enqueueEach(req.Abandon(wi), req.Now, wi.ID+" given up")
}

// enqueueEach writes the messages that tell of what, in the transaction
// that does it: a reaction only when its key is new, the others replacing
// what their keys hold.
func (t txn) enqueueEach(msgs []bot.OutboxMessage, now time.Time, what string) error {
	for _, m := range msgs {
		if m.UpdatedAt.IsZero() {
			m.UpdatedAt = now
		}
		if err := m.Validate(); err != nil {
			return fmt.Errorf("a message telling of %s: %w", what, err)
		}
		if _, _, err := t.enqueue(m, m.Kind != bot.OutboxReaction); err != nil {
			return err
		}
	}
	return nil
}

// CancelWorkItem cancels a queued work item, or records the cancel on the
// running job of a running one for its worker.
func (s *Store) CancelWorkItem(ctx context.Context, id string, c bot.Cancelled) (*bot.WorkItem, *bot.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if c.At.IsZero() {
		c.At = time.Now()
	}
	c.At = utc(c.At)
	var (
		wi  *bot.WorkItem
		job *bot.Job
	)
	err := s.update("cancel work item", func(t txn) error {
		rec, wiSeq, err := t.workItem(id)
		if err != nil {
			return err
		}
		switch rec.Status {
		case bot.StatusQueued:
			if err := t.cancelPending(rec.Dispatch, c.Error(), c.At); err != nil {
				return err
			}
		case bot.StatusRunning:
			err := scanPrefix(t.bucket(bucketJobsByItem), seqKey(wiSeq), 8, false, func(k, _ []byte) (bool, error) {
				j, err := t.jobAt(k[8:])
				if err != nil || j == nil || j.Status != bot.JobRunning {
					return err == nil, err
				}
				if j.Cancel == nil {
					j.Cancel = &c
					if err := t.putJob(seqOf(k[8:]), j); err != nil {
						return false, err
					}
				}
				job = j
				return false, nil
			})
			if err != nil {
				return err
			}
			if job == nil {
				return bot.Errorf(bot.ECONFLICT, "work item %s is running but no job runs it", id)
			}
		default:
			return bot.Errorf(bot.ECONFLICT, "work item %s is %s already", id, rec.Status)
		}
		after, _, err := t.workItem(id)
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
