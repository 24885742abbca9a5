package bolt

import (
	"bytes"
	"context"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// The audit log lives in one top-level bucket of its own, created by the
// first record, so files written before the policy existed need no
// migration. Records are opaque documents (package agents/policy encodes
// them), keyed by time so a listing since a moment is a seek:
//
//	audit/records      time (8) + seq (8) → document
//	audit/by_decision  decision + 0x00 + time (8) + seq (8) → ""
//
// The sequence keeps records of the same nanosecond apart and in append
// order.
var (
	bucketAudit     = []byte("audit")
	auditRecords    = []byte("records")
	auditByDecision = []byte("by_decision")
)

const (
	auditKeyLen         = 16 // time + sequence
	defaultAuditLimit   = 100
	maxAuditLimit       = 10_000
	maxAuditDecisionLen = 64
)

// auditBuckets returns the inner buckets, creating them in a writable
// transaction; in a read-only one they are nil until the first record.
func auditBuckets(tx *bolt.Tx) (records, byDecision *bolt.Bucket, err error) {
	if !tx.Writable() {
		top := tx.Bucket(bucketAudit)
		if top == nil {
			return nil, nil, nil
		}
		return top.Bucket(auditRecords), top.Bucket(auditByDecision), nil
	}
	top, err := tx.CreateBucketIfNotExists(bucketAudit)
	if err != nil {
		return nil, nil, err
	}
	if records, err = top.CreateBucketIfNotExists(auditRecords); err != nil {
		return nil, nil, err
	}
	if byDecision, err = top.CreateBucketIfNotExists(auditByDecision); err != nil {
		return nil, nil, err
	}
	return records, byDecision, nil
}

func validAuditDecision(decision string) error {
	if decision == "" || len(decision) > maxAuditDecisionLen || strings.ContainsRune(decision, 0) {
		return bot.Errorf(bot.EINVALID, "audit decision %q: want 1-%d characters without NUL", decision, maxAuditDecisionLen)
	}
	return nil
}

// AppendAudit adds one audit document at the given time under decision.
func (s *Store) AppendAudit(ctx context.Context, at time.Time, decision string, doc []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validAuditDecision(decision); err != nil {
		return err
	}
	if len(doc) == 0 {
		return bot.Errorf(bot.EINVALID, "audit record: empty document")
	}
	return s.update("append audit record", func(t txn) error {
		records, byDecision, err := auditBuckets(t.tx)
		if err != nil {
			return err
		}
		seq, err := records.NextSequence()
		if err != nil {
			return err
		}
		key := append(timeKey(at), seqKey(seq)...)
		if err := records.Put(key, doc); err != nil {
			return err
		}
		idx := make([]byte, 0, len(decision)+1+len(key))
		idx = append(append(append(idx, decision...), 0), key...)
		return byDecision.Put(idx, []byte{})
	})
}

// ListAudit returns a page of the documents recorded at or after since
// (zero: all), of the decision ("": any), newest first, at most limit (0:
// 100; at most 10000), after the page cursor ended ("": from the newest),
// and the cursor of the next page, "" after the last.
func (s *Store) ListAudit(ctx context.Context, since time.Time, decision string, limit int, cursor string) ([][]byte, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if decision != "" {
		if err := validAuditDecision(decision); err != nil {
			return nil, "", err
		}
	}
	switch {
	case limit <= 0:
		limit = defaultAuditLimit
	case limit > maxAuditLimit:
		limit = maxAuditLimit
	}
	before, err := decodeCursor(cursorAudit, cursor, auditKeyLen)
	if err != nil {
		return nil, "", err
	}
	var floor []byte
	if !since.IsZero() {
		floor = timeKey(since)
	}
	p := &pager{limit: limit}
	var out [][]byte
	err = s.view("list audit records", func(t txn) error {
		records, byDecision, err := auditBuckets(t.tx)
		if err != nil || records == nil {
			return err
		}
		take := func(key []byte) bool {
			if floor != nil && bytes.Compare(key[:8], floor) < 0 {
				return false
			}
			ok, goOn := p.take(key)
			if ok {
				if v := records.Get(key); v != nil {
					out = append(out, bytes.Clone(v))
				}
			}
			return goOn
		}
		var prefix []byte
		idx := records
		if decision != "" {
			prefix, idx = indexPrefix(decision), byDecision
		}
		return scanBefore(idx, prefix, auditKeyLen, before, func(k, _ []byte) (bool, error) {
			return take(k[len(prefix):]), nil
		})
	})
	return out, p.next(cursorAudit), err
}

// PruneAudit removes the records made before cutoff and returns how many it
// removed: the retention upkeep of the audit log. It removes at most
// sweepChunk records and as many index entries a transaction, and reads
// each decision's index only as far as its old entries go.
func (s *Store) PruneAudit(ctx context.Context, cutoff time.Time) (int, error) {
	end := timeKey(cutoff)
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		var records, entries int
		err := s.update("prune audit records", func(t txn) error {
			rb, byDecision, err := auditBuckets(t.tx)
			if err != nil {
				return err
			}
			var old [][]byte
			c := rb.Cursor()
			for k, _ := c.First(); k != nil && len(old) < sweepChunk && bytes.Compare(k[:min(8, len(k))], end) < 0; k, _ = c.Next() {
				old = append(old, bytes.Clone(k))
			}
			for _, k := range old {
				if err := rb.Delete(k); err != nil {
					return err
				}
			}
			// The index is by decision, then time: each decision's old
			// entries come first.
			var idx [][]byte
			ic := byDecision.Cursor()
			for k, _ := ic.First(); k != nil && len(idx) < sweepChunk; {
				i := bytes.IndexByte(k, 0)
				if i < 0 {
					k, _ = ic.Next()
					continue
				}
				prefix := bytes.Clone(k[:i+1])
				for ; k != nil && bytes.HasPrefix(k, prefix) && len(idx) < sweepChunk; k, _ = ic.Next() {
					if len(k) != len(prefix)+auditKeyLen || bytes.Compare(k[len(prefix):len(prefix)+8], end) >= 0 {
						break
					}
					idx = append(idx, bytes.Clone(k))
				}
				k, _ = ic.Seek(append(bytes.Clone(prefix[:i]), 1)) // the next decision
			}
			for _, k := range idx {
				if err := byDecision.Delete(k); err != nil {
					return err
				}
			}
			records, entries = len(old), len(idx)
			return nil
		})
		if err != nil {
			return total, err
		}
		total += records
		if records < sweepChunk && entries < sweepChunk {
			return total, nil
		}
	}
}
