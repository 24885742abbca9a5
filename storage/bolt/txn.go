package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// txn gives typed access to the store's records inside one transaction and
// keeps the secondary indexes in step with the records they index.
type txn struct{ tx *bolt.Tx }

func (t txn) bucket(name string) *bolt.Bucket { return t.tx.Bucket([]byte(name)) }

// get decodes the JSON record under key into v and reports whether there
// was one.
func (t txn) get(bucket string, key []byte, v any) (bool, error) {
	raw := t.bucket(bucket).Get(key)
	if raw == nil {
		return false, nil
	}
	if err := unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("decode %s/%x: %w", bucket, key, err)
	}
	return true, nil
}

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	raw, err := marshal(v)
	if err != nil {
		return fmt.Errorf("encode %T: %w", v, err)
	}
	return b.Put(key, raw)
}

func (t txn) workItem(id string) (*workItemRecord, uint64, error) {
	seq, ok := parseID(prefixWorkItem, id)
	if ok {
		var rec workItemRecord
		found, err := t.get(bucketWorkItems, seqKey(seq), &rec)
		if err != nil || found {
			return &rec, seq, err
		}
	}
	return nil, 0, bot.Errorf(bot.ENOTFOUND, "work item %q not found", id)
}

// putWorkItem stores rec and moves it in the status index when its status
// changed from prev.
func (t txn) putWorkItem(seq uint64, prev bot.WorkStatus, rec *workItemRecord) error {
	if prev != rec.Status {
		idx := t.bucket(bucketItemsByStatus)
		if err := idx.Delete(indexKey(string(prev), seq)); err != nil {
			return err
		}
		if err := idx.Put(indexKey(string(rec.Status), seq), []byte{}); err != nil {
			return err
		}
	}
	return putJSON(t.bucket(bucketWorkItems), seqKey(seq), rec)
}

func (t txn) dispatch(id string) (*bot.Dispatch, uint64, error) {
	seq, ok := parseID(prefixDispatch, id)
	if ok {
		var d bot.Dispatch
		found, err := t.get(bucketDispatches, seqKey(seq), &d)
		if err != nil || found {
			return &d, seq, err
		}
	}
	return nil, 0, bot.Errorf(bot.ENOTFOUND, "dispatch %q not found", id)
}

// putDispatch stores d, whose status was prev ("" for a new dispatch), and
// keeps the counters of pending and leased dispatches.
func (t txn) putDispatch(seq uint64, prev bot.DispatchStatus, d *bot.Dispatch) error {
	if prev != d.Status {
		if name := dispatchCounter(prev); name != "" {
			if err := t.add(name, -1); err != nil {
				return err
			}
		}
		if name := dispatchCounter(d.Status); name != "" {
			if err := t.add(name, 1); err != nil {
				return err
			}
		}
	}
	return putJSON(t.bucket(bucketDispatches), seqKey(seq), d)
}

// addPending puts a dispatch into both pending indexes; its key is its
// sequence, so a dispatch given back keeps its place in the queue.
func (t txn) addPending(seq uint64, d *bot.Dispatch) error {
	unit := dispatchUnit(d)
	if err := t.bucket(bucketPending).Put(seqKey(seq), pendingValue(unit, d.Agent)); err != nil {
		return err
	}
	return t.bucket(bucketPendingByThread).Put(indexKey(unit, seq), []byte(d.Agent))
}

func (t txn) removePending(seq uint64, d *bot.Dispatch) error {
	if err := t.bucket(bucketPending).Delete(seqKey(seq)); err != nil {
		return err
	}
	return t.bucket(bucketPendingByThread).Delete(indexKey(dispatchUnit(d), seq))
}

func (t txn) job(id string) (*bot.Job, uint64, error) {
	seq, ok := parseID(prefixJob, id)
	if ok {
		j, err := t.jobAt(seqKey(seq))
		if err != nil || j != nil {
			return j, seq, err
		}
	}
	return nil, 0, bot.Errorf(bot.ENOTFOUND, "job %q not found", id)
}

// jobRecord is a job as stored. A job of one work item carries its
// dispatch and work item ids in these fields; a batch's id lists live once,
// in job_items, and its record has none. (Batches stored before job_items
// existed carry theirs here too.)
type jobRecord struct {
	bot.Job
	DispatchIDs []string `json:"dispatch_ids,omitempty"`
	WorkItemIDs []string `json:"work_item_ids,omitempty"`
}

// jobAt returns the job under key with its id lists, or nil.
func (t txn) jobAt(key []byte) (*bot.Job, error) {
	var rec jobRecord
	found, err := t.get(bucketJobs, key, &rec)
	if err != nil || !found {
		return nil, err
	}
	j := rec.Job
	j.DispatchIDs, j.WorkItemIDs = rec.DispatchIDs, rec.WorkItemIDs
	if items := t.bucket(bucketJobItems).Get(key); items != nil {
		j.DispatchIDs, j.WorkItemIDs = nil, nil
		for i := 0; i+16 <= len(items); i += 16 {
			j.DispatchIDs = append(j.DispatchIDs, formatID(prefixDispatch, seqOf(items[i:i+8])))
			j.WorkItemIDs = append(j.WorkItemIDs, formatID(prefixWorkItem, seqOf(items[i+8:i+16])))
		}
	}
	return &j, nil
}

// putJob stores j, with its ids when it runs one work item; a batch's id
// lists are stored once, by putJobItems.
func (t txn) putJob(seq uint64, j *bot.Job) error {
	rec := jobRecord{Job: *j}
	if single(j) {
		rec.DispatchIDs, rec.WorkItemIDs = j.DispatchIDs, j.WorkItemIDs
	}
	return putJSON(t.bucket(bucketJobs), seqKey(seq), &rec)
}

// single reports whether j runs one work item, whose ids its record keeps.
func single(j *bot.Job) bool { return len(j.DispatchIDs) == 1 && len(j.WorkItemIDs) == 1 }

// putJobItems stores the (dispatch, work item) pairs a batch runs; a job
// of one work item has them in its record (putJob), and no entry here.
func (t txn) putJobItems(jobSeq uint64, dispatches, items []uint64) error {
	if len(dispatches) == 1 {
		return nil
	}
	v := make([]byte, 0, 16*len(dispatches))
	for i := range dispatches {
		v = binary.BigEndian.AppendUint64(v, dispatches[i])
		v = binary.BigEndian.AppendUint64(v, items[i])
	}
	return t.bucket(bucketJobItems).Put(seqKey(jobSeq), v)
}

// activeValue is a running job's entry in jobs_active: its sequence and
// lease, so a claim learns which leases ran out without reading jobs.
func activeValue(jobSeq uint64, lease time.Time) []byte {
	return append(seqKey(jobSeq), timeKey(lease)...)
}

// splitActive reads an entry of jobs_active.
func splitActive(v []byte) (jobSeq uint64, lease time.Time, ok bool) {
	if len(v) != 16 {
		return 0, time.Time{}, false
	}
	return seqOf(v[:8]), decodeTime(v[8:]), true
}

// freeUnit ends the active job of unit if it is the job with seq.
func (t txn) freeUnit(unit string, jobSeq uint64) error {
	active := t.bucket(bucketActive)
	if v := active.Get([]byte(unit)); len(v) >= 8 && bytes.Equal(v[:8], seqKey(jobSeq)) {
		return active.Delete([]byte(unit))
	}
	return nil
}

// scanPrefix calls fn with each key of b that is prefix followed by exactly
// suffixLen bytes, in key order or, with reverse, in reverse order.
func scanPrefix(b *bolt.Bucket, prefix []byte, suffixLen int, reverse bool, fn func(k, v []byte) (bool, error)) error {
	c := b.Cursor()
	var k, v []byte
	if reverse {
		// Seek past every key with the prefix, then step back onto the last.
		end := append(append([]byte(nil), prefix...), bytes.Repeat([]byte{0xff}, suffixLen+1)...)
		if k, _ = c.Seek(end); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
	} else {
		k, v = c.Seek(prefix)
	}
	for ; k != nil && bytes.HasPrefix(k, prefix); k, v = step(c, reverse) {
		if len(k) != len(prefix)+suffixLen {
			continue
		}
		more, err := fn(k, v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// scanAll is scanPrefix over a whole bucket of sequence keys.
func scanAll(b *bolt.Bucket, reverse bool, fn func(k, v []byte) (bool, error)) error {
	c := b.Cursor()
	var k, v []byte
	if reverse {
		k, v = c.Last()
	} else {
		k, v = c.First()
	}
	for ; k != nil; k, v = step(c, reverse) {
		more, err := fn(k, v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func step(c *bolt.Cursor, reverse bool) ([]byte, []byte) {
	if reverse {
		return c.Prev()
	}
	return c.Next()
}

func seqOf(b []byte) uint64 {
	var n uint64
	for _, c := range b {
		n = n<<8 | uint64(c)
	}
	return n
}

func countKeys(b *bolt.Bucket) int {
	n := 0
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	return n
}
