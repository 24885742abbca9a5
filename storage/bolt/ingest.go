package bolt

import (
	"bytes"
	"context"
	"log/slog"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// Ingest persists an event in one group-committed transaction (DB.Batch):
// the payload, the dedup key, and the work item with its pending dispatch
// and its reaction, or the ingress record. A known, unexpired dedup key writes nothing and
// returns the original.
func (s *Store) Ingest(ctx context.Context, req bot.IngestRequest) (bot.IngestResult, error) {
	if err := ctx.Err(); err != nil {
		return bot.IngestResult{}, err
	}
	// Validate outside the batch: a failing batch function makes bbolt run
	// the whole batch again without it.
	if err := req.Validate(); err != nil {
		return bot.IngestResult{}, err
	}
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	req.Now = utc(req.Now)
	// A redelivery (Slack retries, GitHub redeliveries) or a replayed
	// request is answered from a read transaction, without waiting for a
	// batch to commit.
	if dup, err := s.duplicate(&req.Event, req.Now); err != nil || dup.Duplicate {
		return dup, err
	}
	p, err := planIngest(&req)
	if err != nil {
		return bot.IngestResult{}, err
	}
	var res bot.IngestResult
	err = s.group.do(func(tx *bolt.Tx) error {
		// bbolt may run this function more than once (when another function
		// of the batch fails); it only assigns res, which the last, committed
		// run leaves behind.
		r, err := p.write(txn{tx}, req.Now)
		res = r
		return err
	})
	if err != nil {
		return bot.IngestResult{}, s.wrap("ingest", err)
	}
	return res, nil
}

// Duplicate implements bot.IngestStore.
func (s *Store) Duplicate(ctx context.Context, ev *bot.Event, now time.Time) (bot.IngestResult, error) {
	if err := ctx.Err(); err != nil {
		return bot.IngestResult{}, err
	}
	return s.duplicate(ev, utc(now))
}

// duplicate looks up ev's dedup keys in a read transaction.
func (s *Store) duplicate(ev *bot.Event, now time.Time) (bot.IngestResult, error) {
	key, sig := ev.DedupKey(), ev.SignatureKey()
	if key == "" && sig == "" {
		return bot.IngestResult{}, nil
	}
	var dup bot.IngestResult
	err := s.view("ingest", func(t txn) error {
		var err error
		dup, err = t.duplicate(key, sig, now)
		return err
	})
	return dup, err
}

// write stores the plan unless its dedup key or its signature is taken, in
// which case it returns the original: another delivery of the event may
// have been in the same batch, or committed since the read transaction
// looked.
func (p *ingestPlan) write(t txn, now time.Time) (bot.IngestResult, error) {
	if dup, err := t.duplicate(p.dedupKey, p.sigKey, now); err != nil || dup.Duplicate {
		return dup, err
	}
	// A key expired but not yet swept is free again, and its old expiry
	// entry goes so the sweep does not delete the new one.
	var stale [][]byte
	for _, key := range []string{p.dedupKey, p.sigKey} {
		if v := t.bucket(bucketDedup).Get([]byte(key)); key != "" && len(v) >= 8 {
			stale = append(stale, append(append(make([]byte, 0, 8+len(key)), v[:8]...), key...))
		}
	}

	var seqs Seqs
	var err error
	if seqs.Event, err = t.bucket(bucketEvents).NextSequence(); err != nil {
		return bot.IngestResult{}, err
	}
	if p.workItem != nil {
		if seqs.WorkItem, err = t.bucket(bucketWorkItems).NextSequence(); err != nil {
			return bot.IngestResult{}, err
		}
		if seqs.Dispatch, err = t.bucket(bucketDispatches).NextSequence(); err != nil {
			return bot.IngestResult{}, err
		}
		if p.reaction != nil {
			if seqs.Outbox, err = t.bucket(bucketOutbox).NextSequence(); err != nil {
				return bot.IngestResult{}, err
			}
		}
	} else if seqs.Ingress, err = t.bucket(bucketIngress).NextSequence(); err != nil {
		return bot.IngestResult{}, err
	}
	records, counts, res := p.records(seqs)
	for _, k := range stale {
		if err := t.bucket(bucketDedupExpiry).Delete(k); err != nil {
			return bot.IngestResult{}, err
		}
	}
	for _, r := range records {
		if err := t.tx.Bucket([]byte(r.Bucket)).Put(r.Key, r.Value); err != nil {
			return bot.IngestResult{}, err
		}
	}
	for _, c := range counts {
		if err := t.add(c.name, c.delta); err != nil {
			return bot.IngestResult{}, err
		}
	}
	return res, nil
}

// duplicate returns the original of an event whose dedup key, or else
// whose signature key (Replayed), is known and not expired at now, with
// Duplicate set, or a zero result. Either key may be "".
func (t txn) duplicate(key, sig string, now time.Time) (bot.IngestResult, error) {
	if id, ok := t.dedupHit(key, now); ok {
		return t.original(id)
	}
	id, ok := t.dedupHit(sig, now)
	if !ok {
		return bot.IngestResult{}, nil
	}
	res, err := t.original(id)
	if bot.ErrorCode(err) == bot.ENOTFOUND {
		// Retention dropped what the request made; it is a replay all the
		// same.
		res, err = bot.IngestResult{Duplicate: true}, nil
	}
	res.Replayed = true
	return res, err
}

// dedupHit returns what a dedup key names when it is known and not expired
// at now.
func (t txn) dedupHit(key string, now time.Time) (string, bool) {
	if key == "" {
		return "", false
	}
	v := t.bucket(bucketDedup).Get([]byte(key))
	if len(v) < 8 || now.After(decodeTime(v[:8])) {
		return "", false
	}
	return string(v[8:]), true
}

// original returns what a dedup key's first event made.
func (t txn) original(id string) (bot.IngestResult, error) {
	if seq, ok := parseID(prefixIngress, id); ok {
		var in bot.IngressRecord
		found, err := t.get(bucketIngress, seqKey(seq), &in)
		if err != nil {
			return bot.IngestResult{}, err
		}
		if found {
			return bot.IngestResult{Duplicate: true, Ingress: &in}, nil
		}
	}
	rec, _, err := t.workItem(id)
	if err != nil {
		return bot.IngestResult{}, err
	}
	return bot.IngestResult{Duplicate: true, WorkItem: &rec.WorkItem}, nil
}

// expireChunk bounds one sweep transaction, so a large sweep does not hold
// the write lock long enough to stall intake.
const expireChunk = 1000

// ExpireDedup forgets dedup keys whose window ended before now. It walks the
// expiry index in time order, so its cost is the number of keys it removes.
func (s *Store) ExpireDedup(ctx context.Context, now time.Time) (int, error) {
	limit := timeKey(now)
	// Most sweeps find nothing: look first, so they do not write the file.
	var due bool
	err := s.view("expire dedup keys", func(t txn) error {
		k, _ := t.bucket(bucketDedupExpiry).Cursor().First()
		due = k != nil && bytes.Compare(k[:min(8, len(k))], limit) < 0
		return nil
	})
	if err != nil || !due {
		return 0, err
	}
	total := 0
	for done := false; !done; {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		err := s.update("expire dedup keys", func(t txn) error {
			n, err := expireDedup(t, limit)
			if err == nil {
				total += n
			}
			done = n < expireChunk
			return err
		})
		if err != nil {
			return total, err
		}
	}
	if total > 0 {
		s.log.Debug("dedup keys expired", slog.Int("count", total))
	}
	return total, nil
}

// expireDedup removes up to expireChunk expiry entries before limit, with
// their dedup keys, and returns how many entries it removed.
func expireDedup(t txn, limit []byte) (int, error) {
	expiry, dedup := t.bucket(bucketDedupExpiry), t.bucket(bucketDedup)
	var keys [][]byte
	c := expiry.Cursor()
	for k, _ := c.First(); k != nil && len(keys) < expireChunk; k, _ = c.Next() {
		if len(k) < 8 || bytes.Compare(k[:8], limit) >= 0 {
			break
		}
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		if err := expiry.Delete(k); err != nil {
			return 0, err
		}
		// The dedup entry carries a newer expiry when the key was reused
		// after this one ran out; it stays.
		if v := dedup.Get(k[8:]); len(v) >= 8 && bytes.Equal(v[:8], k[:8]) {
			if err := dedup.Delete(k[8:]); err != nil {
				return 0, err
			}
		}
	}
	return len(keys), nil
}

// GetEvent returns a stored event with its raw payload.
func (s *Store) GetEvent(ctx context.Context, ref string) (*bot.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var ev *bot.Event
	err := s.view("get event", func(t txn) error {
		seq, ok := parseID(prefixEvent, ref)
		var v []byte
		if ok {
			v = t.bucket(bucketEvents).Get(seqKey(seq))
		}
		if v == nil {
			return bot.Errorf(bot.ENOTFOUND, "event %q not found", ref)
		}
		var err error
		ev, err = decodeEvent(v, t.bucket(bucketPayloads).Get(seqKey(seq)))
		return err
	})
	return ev, err
}
