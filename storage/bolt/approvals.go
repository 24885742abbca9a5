package bolt

import (
	"bytes"
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// Approvals live in one top-level bucket of their own, created by the
// first write, so files written before approvals were stored need no
// migration:
//
//	approvals/records   id → bot.Approval JSON
//	approvals/by_key    key → id of the latest approval with that key
//	approvals/pending   created (8) + id → ""   while pending
//	approvals/decided   decided (8) + id → ""
var (
	bucketApprovals  = []byte("approvals")
	approvalsRecords = []byte("records")
	approvalsByKey   = []byte("by_key")
	approvalsPending = []byte("pending")
	approvalsDecided = []byte("decided")
)

type approvalBuckets struct {
	records, byKey, pending, decided *bolt.Bucket
}

// approvalBucketsOf returns the inner buckets, creating them in a writable
// transaction; in a read-only one it returns nil until the first write.
func approvalBucketsOf(tx *bolt.Tx) (*approvalBuckets, error) {
	if !tx.Writable() {
		top := tx.Bucket(bucketApprovals)
		if top == nil {
			return nil, nil
		}
		return &approvalBuckets{
			records: top.Bucket(approvalsRecords), byKey: top.Bucket(approvalsByKey),
			pending: top.Bucket(approvalsPending), decided: top.Bucket(approvalsDecided),
		}, nil
	}
	top, err := tx.CreateBucketIfNotExists(bucketApprovals)
	if err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", bucketApprovals, err)
	}
	var b approvalBuckets
	for _, inner := range []struct {
		name []byte
		into **bolt.Bucket
	}{{approvalsRecords, &b.records}, {approvalsByKey, &b.byKey}, {approvalsPending, &b.pending}, {approvalsDecided, &b.decided}} {
		if *inner.into, err = top.CreateBucketIfNotExists(inner.name); err != nil {
			return nil, fmt.Errorf("create bucket %s/%s: %w", bucketApprovals, inner.name, err)
		}
	}
	return &b, nil
}

func (b *approvalBuckets) get(id string) (*bot.Approval, error) {
	raw := b.records.Get([]byte(id))
	if raw == nil {
		return nil, nil
	}
	var a bot.Approval
	if err := unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("decode approval %s: %w", id, err)
	}
	return &a, nil
}

func approvalIndexKey(at []byte, id string) []byte {
	return append(bytes.Clone(at), id...)
}

func validApproval(a bot.Approval) error {
	switch {
	case a.ID == "" || len(a.ID) > bolt.MaxKeySize-8:
		return bot.Errorf(bot.EINVALID, "approval: id %q: want 1-%d bytes", a.ID, bolt.MaxKeySize-8)
	case a.Status != bot.ApprovalPending:
		return bot.Errorf(bot.EINVALID, "approval %s: a new approval is pending, not %s", a.ID, a.Status)
	case len(a.Key) > bolt.MaxKeySize:
		return bot.Errorf(bot.ETOOLARGE, "approval %s: key longer than %d bytes", a.ID, bolt.MaxKeySize)
	case a.ExpiresAt.IsZero():
		return bot.Errorf(bot.EINVALID, "approval %s: no expiry", a.ID)
	}
	return nil
}

// reusable reports whether a run asking with a's key waits on a.
func reusable(a *bot.Approval) bool {
	return a.Status == bot.ApprovalPending || !a.Taken
}

// CreateApproval stores a pending approval unless one with its key can be
// waited on.
func (s *Store) CreateApproval(ctx context.Context, a bot.Approval) (bot.Approval, bool, error) {
	if err := ctx.Err(); err != nil {
		return bot.Approval{}, false, err
	}
	if err := validApproval(a); err != nil {
		return bot.Approval{}, false, err
	}
	a.CreatedAt, a.ExpiresAt = utc(a.CreatedAt), utc(a.ExpiresAt)
	a.DecidedAt, a.DecidedBy, a.Taken = nil, "", false
	out, created := a, true
	err := s.update("create approval", func(t txn) error {
		b, err := approvalBucketsOf(t.tx)
		if err != nil {
			return err
		}
		if a.Key != "" {
			if id := b.byKey.Get([]byte(a.Key)); id != nil {
				prev, err := b.get(string(id))
				if err != nil {
					return err
				}
				if prev != nil && reusable(prev) {
					out, created = *prev, false
					return nil
				}
			}
		}
		if b.records.Get([]byte(a.ID)) != nil {
			return bot.Errorf(bot.ECONFLICT, "approval %s exists", a.ID)
		}
		if err := putJSON(b.records, []byte(a.ID), a); err != nil {
			return err
		}
		if a.Key != "" {
			if err := b.byKey.Put([]byte(a.Key), []byte(a.ID)); err != nil {
				return err
			}
		}
		return b.pending.Put(approvalIndexKey(timeKey(a.CreatedAt), a.ID), []byte{})
	})
	if err != nil {
		return bot.Approval{}, false, err
	}
	return out, created, nil
}

// FindApproval returns the approval a run asking with key would wait on:
// pending, or decided and not taken by a run yet. ENOTFOUND when there is
// none.
func (s *Store) FindApproval(ctx context.Context, key string) (bot.Approval, error) {
	if err := ctx.Err(); err != nil {
		return bot.Approval{}, err
	}
	var out *bot.Approval
	err := s.view("find approval", func(t txn) error {
		b, err := approvalBucketsOf(t.tx)
		if err != nil || b == nil || key == "" {
			return err
		}
		id := b.byKey.Get([]byte(key))
		if id == nil {
			return nil
		}
		a, err := b.get(string(id))
		if err == nil && a != nil && reusable(a) {
			out = a
		}
		return err
	})
	if err != nil {
		return bot.Approval{}, err
	}
	if out == nil {
		return bot.Approval{}, bot.Errorf(bot.ENOTFOUND, "no approval waits for %q", key)
	}
	return *out, nil
}

// GetApproval returns one approval, or ENOTFOUND.
func (s *Store) GetApproval(ctx context.Context, id string) (bot.Approval, error) {
	if err := ctx.Err(); err != nil {
		return bot.Approval{}, err
	}
	var out *bot.Approval
	err := s.view("get approval", func(t txn) error {
		b, err := approvalBucketsOf(t.tx)
		if err != nil || b == nil {
			return err
		}
		out, err = b.get(id)
		return err
	})
	if err != nil {
		return bot.Approval{}, err
	}
	if out == nil {
		return bot.Approval{}, bot.Errorf(bot.ENOTFOUND, "approval %q not found", id)
	}
	return *out, nil
}

// ListApprovals returns the pending approvals, oldest first, and with
// decided the latest limit decided ones after them, newest first.
func (s *Store) ListApprovals(ctx context.Context, decided bool, limit int) ([]bot.Approval, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit = bot.ListLimit(limit)
	out := []bot.Approval{}
	err := s.view("list approvals", func(t txn) error {
		b, err := approvalBucketsOf(t.tx)
		if err != nil || b == nil {
			return err
		}
		add := func(k []byte) (bool, error) {
			a, err := b.get(string(k[8:]))
			if err != nil || a == nil {
				return err == nil, err
			}
			out = append(out, *a)
			return true, nil
		}
		if err := scanAll(b.pending, false, func(k, _ []byte) (bool, error) { return add(k) }); err != nil {
			return err
		}
		if !decided {
			return nil
		}
		n := 0
		return scanAll(b.decided, true, func(k, _ []byte) (bool, error) {
			n++
			if n > limit {
				return false, nil
			}
			return add(k)
		})
	})
	return out, err
}

// DecideApproval ends a pending approval.
func (s *Store) DecideApproval(ctx context.Context, id string, o bot.ApprovalOutcome) (bot.Approval, error) {
	if err := ctx.Err(); err != nil {
		return bot.Approval{}, err
	}
	if !o.Status.Valid() || o.Status == bot.ApprovalPending {
		return bot.Approval{}, bot.Errorf(bot.EINVALID, "approval %s: cannot end as %q", id, o.Status)
	}
	var out bot.Approval
	err := s.update("decide approval", func(t txn) error {
		b, err := approvalBucketsOf(t.tx)
		if err != nil {
			return err
		}
		a, err := b.get(id)
		if err != nil {
			return err
		}
		if a == nil {
			return bot.Errorf(bot.ENOTFOUND, "approval %q not found", id)
		}
		out = *a
		if a.Status != bot.ApprovalPending {
			return bot.Errorf(bot.ECONFLICT, "approval %q is already %s", id, a.Status)
		}
		at := utc(o.At)
		a.Status, a.DecidedBy, a.DecidedAt, a.Taken = o.Status, o.By, &at, o.Taken
		if err := b.pending.Delete(approvalIndexKey(timeKey(a.CreatedAt), id)); err != nil {
			return err
		}
		if err := b.decided.Put(approvalIndexKey(timeKey(at), id), []byte{}); err != nil {
			return err
		}
		out = *a
		return putJSON(b.records, []byte(id), a)
	})
	return out, err
}

// TakeApproval records that a run received a decided approval's outcome.
func (s *Store) TakeApproval(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.update("take approval", func(t txn) error {
		b, err := approvalBucketsOf(t.tx)
		if err != nil {
			return err
		}
		a, err := b.get(id)
		switch {
		case err != nil:
			return err
		case a == nil:
			return bot.Errorf(bot.ENOTFOUND, "approval %q not found", id)
		case a.Status == bot.ApprovalPending:
			return bot.Errorf(bot.ECONFLICT, "approval %q is still pending", id)
		case a.Taken:
			return nil
		}
		a.Taken = true
		return putJSON(b.records, []byte(id), a)
	})
}
