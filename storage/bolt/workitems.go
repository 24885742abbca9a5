package bolt

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// GetWorkItem returns a work item, or ENOTFOUND.
func (s *Store) GetWorkItem(ctx context.Context, id string) (*bot.WorkItem, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var wi *bot.WorkItem
	err := s.view("get work item", func(t txn) error {
		rec, _, err := t.workItem(id)
		if err == nil {
			wi = &rec.WorkItem
		}
		return err
	})
	return wi, err
}

// ListWorkItems returns a page of work items, newest first, and the cursor
// of the next page ("" after the last). A thread or status filter walks
// that index only; with both, the thread index is walked and the status
// index consulted per key. A conversation's work items come in one page.
func (s *Store) ListWorkItems(ctx context.Context, f bot.WorkItemFilter) ([]bot.WorkItem, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if f.Status != "" && !f.Status.Valid() {
		return nil, "", bot.Errorf(bot.EINVALID, "unknown work item status %q", f.Status)
	}
	if f.Conversation != "" && f.Cursor != "" {
		return nil, "", bot.Errorf(bot.EINVALID, "a conversation's work items come in one page: no cursor")
	}
	before, err := decodeCursor(cursorWorkItems, f.Cursor, 8)
	if err != nil {
		return nil, "", err
	}
	p := &pager{limit: bot.ListLimit(f.Limit)}
	out := []bot.WorkItem{}
	err = s.view("list work items", func(t txn) error {
		add := func(seq uint64) (bool, error) {
			key := seqKey(seq)
			ok, goOn := p.take(key)
			if !ok {
				return goOn, nil
			}
			var rec workItemRecord
			if _, err := t.get(bucketWorkItems, key, &rec); err != nil {
				return false, err
			}
			out = append(out, rec.WorkItem)
			return true, nil
		}
		index := func(bucket, value string, fn func(seq uint64) (bool, error)) error {
			prefix := indexPrefix(value)
			return scanBefore(t.bucket(bucket), prefix, 8, before, func(k, _ []byte) (bool, error) {
				return fn(seqOf(k[len(prefix):]))
			})
		}
		switch {
		case f.Job != "":
			return t.jobWorkItems(f.Job, f.Status, before, add)
		case f.Conversation != "":
			return scanConversation(t.bucket(bucketItemsByThread), f.Conversation, p.limit, add)
		case f.Thread != "" && f.Status != "":
			byStatus := t.bucket(bucketItemsByStatus)
			return index(bucketItemsByThread, f.Thread, func(seq uint64) (bool, error) {
				if byStatus.Get(indexKey(string(f.Status), seq)) == nil {
					return true, nil
				}
				return add(seq)
			})
		case f.Thread != "":
			return index(bucketItemsByThread, f.Thread, add)
		case f.Status != "":
			return index(bucketItemsByStatus, string(f.Status), add)
		}
		return scanBefore(t.bucket(bucketWorkItems), nil, 8, before, func(k, _ []byte) (bool, error) {
			return add(seqOf(k))
		})
	})
	if err != nil {
		return nil, "", err
	}
	return out, p.next(cursorWorkItems), nil
}

// jobWorkItems calls add with the work items job ran, newest first, below
// the cursor key before, those in status only when it is set.
func (t txn) jobWorkItems(job string, status bot.WorkStatus, before []byte, add func(seq uint64) (bool, error)) error {
	j, _, err := t.job(job)
	if err != nil {
		return err
	}
	var seqs []uint64
	for _, id := range j.WorkItemIDs {
		if seq, ok := parseID(prefixWorkItem, id); ok && !slices.Contains(seqs, seq) {
			seqs = append(seqs, seq)
		}
	}
	slices.SortFunc(seqs, func(a, b uint64) int { return cmp.Compare(b, a) })
	byStatus := t.bucket(bucketItemsByStatus)
	for _, seq := range seqs {
		if before != nil && bytes.Compare(seqKey(seq), before) >= 0 {
			continue
		}
		if status != "" && byStatus.Get(indexKey(string(status), seq)) == nil {
			continue
		}
		if more, err := add(seq); err != nil || !more {
			return err
		}
	}
	return nil
}

// scanConversation calls add with the work items of every thread of a
// conversation (thread keys conversation + "/" + ts), newest first, at most
// limit. The thread index is ordered by thread key, so a scan back from the
// end of the conversation's keys meets its latest threads first (Slack
// timestamps sort as they happen); what it collects is then put in
// creation order.
func scanConversation(b *bolt.Bucket, conversation string, limit int, add func(seq uint64) (bool, error)) error {
	prefix := []byte(conversation + "/")
	c := b.Cursor()
	k, _ := c.Seek(append(append([]byte(nil), prefix...), 0xff))
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	var seqs []uint64
	for ; k != nil && bytes.HasPrefix(k, prefix) && len(seqs) < limit; k, _ = c.Prev() {
		if len(k) < len(prefix)+9 || k[len(k)-9] != 0 {
			continue
		}
		seqs = append(seqs, seqOf(k[len(k)-8:]))
	}
	slices.SortFunc(seqs, func(a, b uint64) int { return cmp.Compare(b, a) })
	for _, seq := range seqs {
		if more, err := add(seq); err != nil || !more {
			return err
		}
	}
	return nil
}

// ListJobs returns the jobs that ran a work item, oldest first.
func (s *Store) ListJobs(ctx context.Context, workItemID string) ([]bot.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := []bot.Job{}
	err := s.view("list jobs", func(t txn) error {
		_, wiSeq, err := t.workItem(workItemID)
		if err != nil {
			return err
		}
		return scanPrefix(t.bucket(bucketJobsByItem), seqKey(wiSeq), 8, false, func(k, _ []byte) (bool, error) {
			j, err := t.jobAt(k[8:])
			if err != nil {
				return false, err
			}
			if j != nil {
				out = append(out, *j)
			}
			return true, nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RerouteWorkItem hands a work item to hop.To: it records the hop, routes the
// work item to the new agent and queues a dispatch for it. A dispatch of the
// work item still waiting in the queue is dropped; one that is running
// finishes without changing the work item again.
func (s *Store) RerouteWorkItem(ctx context.Context, id string, hop bot.Hop) (*bot.WorkItem, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if hop.To == "" {
		return nil, bot.Errorf(bot.EINVALID, "reroute %s: no target agent", id)
	}
	if hop.At.IsZero() {
		hop.At = time.Now()
	}
	hop.At = utc(hop.At)
	var wi *bot.WorkItem
	err := s.update("reroute work item", func(t txn) error {
		rec, seq, err := t.workItem(id)
		if err != nil {
			return err
		}
		if len(rec.Hops) >= bot.MaxHops {
			return bot.Errorf(bot.ECONFLICT, "work item %s was handed off %d times already (limit %d)", id, len(rec.Hops), bot.MaxHops)
		}
		if hop.From == "" {
			hop.From = rec.Route.Agent
		}
		if err := t.supersede(rec.Dispatch, hop); err != nil {
			return err
		}
		dSeq, err := t.bucket(bucketDispatches).NextSequence()
		if err != nil {
			return err
		}
		d := &bot.Dispatch{
			ID: formatID(prefixDispatch, dSeq), WorkItemID: rec.ID, Agent: hop.To, Thread: rec.Thread,
			Status: bot.DispatchPending, CreatedAt: hop.At, UpdatedAt: hop.At,
		}
		if err := t.putDispatch(dSeq, "", d); err != nil {
			return err
		}
		if err := t.addPending(dSeq, d); err != nil {
			return err
		}
		prev := rec.Status
		reason := "handoff from @" + hop.From
		if hop.Reason != "" {
			reason += ": " + hop.Reason
		}
		rec.Hops = append(rec.Hops, hop)
		if rec.FirstRoute == nil {
			first := rec.Route
			rec.FirstRoute = &first
		}
		rec.Route = bot.Route{Agent: hop.To, Kind: bot.RouteHandoff, Reason: reason}
		rec.Status = bot.StatusQueued
		rec.Dispatch = d.ID
		rec.Summary, rec.Error, rec.FinishedAt = "", "", nil
		rec.UpdatedAt = hop.At
		if err := t.putWorkItem(seq, prev, rec); err != nil {
			return err
		}
		wi = &rec.WorkItem
		return nil
	})
	return wi, err
}

// supersede drops the work item's dispatch from the queue if it has not
// been claimed yet, so one work item never waits in the queue twice.
func (t txn) supersede(dispatchID string, hop bot.Hop) error {
	if dispatchID == "" {
		return nil
	}
	d, seq, err := t.dispatch(dispatchID)
	if err != nil || d.Status != bot.DispatchPending {
		return err
	}
	if err := t.removePending(seq, d); err != nil {
		return err
	}
	d.Status = bot.DispatchFailed
	d.LastError = fmt.Sprintf("superseded by the handoff to @%s", hop.To)
	d.UpdatedAt = hop.At
	return t.putDispatch(seq, bot.DispatchPending, d)
}

// ListIngress returns a page of ingress records, newest first, and the
// cursor of the next page ("" after the last).
func (s *Store) ListIngress(ctx context.Context, f bot.IngressFilter) ([]bot.IngressRecord, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	before, err := decodeCursor(cursorIngress, f.Cursor, 8)
	if err != nil {
		return nil, "", err
	}
	p := &pager{limit: bot.ListLimit(f.Limit)}
	out := []bot.IngressRecord{}
	err = s.view("list ingress", func(t txn) error {
		add := func(key []byte) (bool, error) {
			ok, goOn := p.take(key)
			if !ok {
				return goOn, nil
			}
			var in bot.IngressRecord
			if _, err := t.get(bucketIngress, key, &in); err != nil {
				return false, err
			}
			out = append(out, in)
			return true, nil
		}
		if f.Reason != "" {
			prefix := indexPrefix(f.Reason)
			return scanBefore(t.bucket(bucketIngressBy), prefix, 8, before, func(k, _ []byte) (bool, error) {
				return add(k[len(prefix):])
			})
		}
		return scanBefore(t.bucket(bucketIngress), nil, 8, before, func(k, _ []byte) (bool, error) {
			return add(k)
		})
	})
	if err != nil {
		return nil, "", err
	}
	return out, p.next(cursorIngress), nil
}
