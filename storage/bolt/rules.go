package bolt

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// Stored routing rules live in a top-level bucket of their own, created by
// the first write, so files written before they existed need no migration:
//
//	rules   8-byte sequence → bot.StoredRule JSON (id rule_<seq>)
//
// They are few and read whole whenever the router is built.
var (
	bucketRules               = []byte("rules")
	_           bot.RuleStore = (*Store)(nil)
)

// rulePrefix prefixes the ids of stored rules.
const rulePrefix = "rule_"

func rulesBucket(tx *bolt.Tx) (*bolt.Bucket, error) {
	if !tx.Writable() {
		return tx.Bucket(bucketRules), nil
	}
	b, err := tx.CreateBucketIfNotExists(bucketRules)
	if err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", bucketRules, err)
	}
	return b, nil
}

// ListRules returns every stored rule, in the order they were made.
func (s *Store) ListRules(ctx context.Context) ([]bot.StoredRule, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := []bot.StoredRule{}
	err := s.view("list rules", func(t txn) error {
		b, err := rulesBucket(t.tx)
		if err != nil || b == nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			var r bot.StoredRule
			if err := unmarshal(v, &r); err != nil {
				return fmt.Errorf("decode rule %x: %w", k, err)
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

// CreateRule stores a new rule under the next id.
func (s *Store) CreateRule(ctx context.Context, r bot.StoredRule) (bot.StoredRule, error) {
	if err := ctx.Err(); err != nil {
		return bot.StoredRule{}, err
	}
	r.ID = rulePrefix + "0" // checked with a placeholder; the id is given below
	if err := r.Validate(); err != nil {
		return bot.StoredRule{}, err
	}
	err := s.update("create rule", func(t txn) error {
		b, err := rulesBucket(t.tx)
		if err != nil {
			return err
		}
		if err := nameFree(b, r.Name, ""); err != nil {
			return err
		}
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		r.ID = formatID(rulePrefix, seq)
		return putJSON(b, seqKey(seq), r)
	})
	if err != nil {
		return bot.StoredRule{}, err
	}
	return r, nil
}

// UpdateRule replaces the rule of r's id, keeping who made it and when.
func (s *Store) UpdateRule(ctx context.Context, r bot.StoredRule) (bot.StoredRule, error) {
	if err := ctx.Err(); err != nil {
		return bot.StoredRule{}, err
	}
	seq, ok := parseID(rulePrefix, r.ID)
	if !ok {
		return bot.StoredRule{}, bot.Errorf(bot.ENOTFOUND, "no rule %q", r.ID)
	}
	err := s.update("update rule", func(t txn) error {
		b, err := rulesBucket(t.tx)
		if err != nil {
			return err
		}
		raw := b.Get(seqKey(seq))
		if raw == nil {
			return bot.Errorf(bot.ENOTFOUND, "no rule %q", r.ID)
		}
		var old bot.StoredRule
		if err := unmarshal(raw, &old); err != nil {
			return fmt.Errorf("decode rule %s: %w", r.ID, err)
		}
		r.CreatedBy, r.CreatedAt = old.CreatedBy, old.CreatedAt
		if err := r.Validate(); err != nil {
			return err
		}
		if err := nameFree(b, r.Name, r.ID); err != nil {
			return err
		}
		return putJSON(b, seqKey(seq), r)
	})
	if err != nil {
		return bot.StoredRule{}, err
	}
	return r, nil
}

// DeleteRule removes the rule of that id and returns it.
func (s *Store) DeleteRule(ctx context.Context, id string) (bot.StoredRule, error) {
	if err := ctx.Err(); err != nil {
		return bot.StoredRule{}, err
	}
	seq, ok := parseID(rulePrefix, id)
	if !ok {
		return bot.StoredRule{}, bot.Errorf(bot.ENOTFOUND, "no rule %q", id)
	}
	var old bot.StoredRule
	err := s.update("delete rule", func(t txn) error {
		b, err := rulesBucket(t.tx)
		if err != nil {
			return err
		}
		raw := b.Get(seqKey(seq))
		if raw == nil {
			return bot.Errorf(bot.ENOTFOUND, "no rule %q", id)
		}
		if err := unmarshal(raw, &old); err != nil {
			return fmt.Errorf("decode rule %s: %w", id, err)
		}
		return b.Delete(seqKey(seq))
	})
	return old, err
}

// nameFree fails when a stored rule other than the one of id is called
// name.
func nameFree(b *bolt.Bucket, name, id string) error {
	return b.ForEach(func(k, v []byte) error {
		var r bot.StoredRule
		if err := unmarshal(v, &r); err != nil {
			return fmt.Errorf("decode rule %x: %w", k, err)
		}
		if r.Name == name && r.ID != id {
			return bot.Errorf(bot.ECONFLICT, "duplicate rule name %q (also %s)", name, r.Origin())
		}
		return nil
	})
}
