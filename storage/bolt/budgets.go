package bolt

import (
	"bytes"
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// Budget counters and run states live in top-level buckets of their own,
// created by the first write:
//
//	budgets     key ("tree/wi_7", "day/2025-03-04/agent/coder") → Spend JSON
//	run_states  work item id → the runtime's state document of its run
var (
	bucketBudgets   = []byte("budgets")
	bucketRunStates = []byte("run_states")
)

func validBudgetKey(key string) error {
	if key == "" || len(key) > bolt.MaxKeySize {
		return bot.Errorf(bot.EINVALID, "budget key %q: want 1-%d bytes", key, bolt.MaxKeySize)
	}
	return nil
}

func getSpend(b *bolt.Bucket, key string) (bot.Spend, error) {
	sp := bot.Spend{Key: key}
	if b == nil {
		return sp, nil
	}
	raw := b.Get([]byte(key))
	if raw == nil {
		return sp, nil
	}
	if err := unmarshal(raw, &sp); err != nil {
		return sp, fmt.Errorf("decode budget %s: %w", key, err)
	}
	return sp, nil
}

// AddUsage adds one call's usage to each of its keys.
func (s *Store) AddUsage(ctx context.Context, u bot.Usage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	at, err := checkUsage(u)
	if err != nil {
		return err
	}
	return s.update("add usage", func(t txn) error { return t.addUsage(u, at) })
}

// checkUsage checks u's keys and returns when it was spent.
func checkUsage(u bot.Usage) (time.Time, error) {
	if err := u.Validate(); err != nil {
		return time.Time{}, err
	}
	for _, k := range u.Keys {
		if err := validBudgetKey(k); err != nil {
			return time.Time{}, err
		}
	}
	if u.At.IsZero() {
		return utc(time.Now()), nil
	}
	return utc(u.At), nil
}

// addUsage adds u, at at, to each of its keys.
func (t txn) addUsage(u bot.Usage, at time.Time) error {
	b, err := t.tx.CreateBucketIfNotExists(bucketBudgets)
	if err != nil {
		return err
	}
	for _, k := range u.Keys {
		sp, err := getSpend(b, k)
		if err != nil {
			return err
		}
		sp.Count(u, at)
		if err := putJSON(b, []byte(k), &sp); err != nil {
			return err
		}
	}
	return nil
}

// Spent returns what each key has spent, in order.
func (s *Store) Spent(ctx context.Context, keys []string) ([]bot.Spend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]bot.Spend, len(keys))
	err := s.view("read budgets", func(t txn) error {
		b := t.tx.Bucket(bucketBudgets)
		for i, k := range keys {
			sp, err := getSpend(b, k)
			if err != nil {
				return err
			}
			out[i] = sp
		}
		return nil
	})
	return out, err
}

// SpentUnder returns the spending of the keys under prefix, in key order.
func (s *Store) SpentUnder(ctx context.Context, prefix string, limit int) ([]bot.Spend, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	limit = bot.ListLimit(limit)
	var (
		out  []bot.Spend
		more bool
	)
	err := s.view("read budgets", func(t txn) error {
		b := t.tx.Bucket(bucketBudgets)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
			if len(out) == limit {
				more = true
				return nil
			}
			var sp bot.Spend
			if err := unmarshal(v, &sp); err != nil {
				return fmt.Errorf("decode budget %s: %w", k, err)
			}
			out = append(out, sp)
		}
		return nil
	})
	return out, more, err
}

// GrantBudget adds g to what key may spend.
func (s *Store) GrantBudget(ctx context.Context, key string, g bot.Grant) (bot.Spend, error) {
	if err := ctx.Err(); err != nil {
		return bot.Spend{}, err
	}
	if err := validBudgetKey(key); err != nil {
		return bot.Spend{}, err
	}
	if g.Tokens < 0 || g.Cost < 0 || g.Seconds < 0 {
		return bot.Spend{}, bot.Errorf(bot.EINVALID, "budget grant of %s: negative amounts", key)
	}
	var sp bot.Spend
	err := s.update("grant budget", func(t txn) error {
		b, err := t.tx.CreateBucketIfNotExists(bucketBudgets)
		if err != nil {
			return err
		}
		if sp, err = getSpend(b, key); err != nil {
			return err
		}
		sp.GrantedTokens += g.Tokens
		sp.GrantedCost += g.Cost
		sp.GrantedSeconds += g.Seconds
		if !g.At.IsZero() {
			sp.Updated = utc(g.At)
		}
		return putJSON(b, []byte(key), &sp)
	})
	return sp, err
}

func validRunStateKey(workItemID string) error {
	if workItemID == "" || len(workItemID) > bolt.MaxKeySize {
		return bot.Errorf(bot.EINVALID, "run state: work item id %q: want 1-%d bytes", workItemID, bolt.MaxKeySize)
	}
	return nil
}

// SaveRunState replaces the state of the run of workItemID.
func (s *Store) SaveRunState(ctx context.Context, workItemID string, doc []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkRunState(workItemID, doc); err != nil {
		return err
	}
	return s.update("save run state", func(t txn) error { return t.saveRunState(workItemID, doc) })
}

func checkRunState(workItemID string, doc []byte) error {
	if err := validRunStateKey(workItemID); err != nil {
		return err
	}
	if len(doc) == 0 {
		return bot.Errorf(bot.EINVALID, "run state of %s: empty document", workItemID)
	}
	return nil
}

// saveRunState replaces the state of the run of workItemID.
func (t txn) saveRunState(workItemID string, doc []byte) error {
	b, err := t.tx.CreateBucketIfNotExists(bucketRunStates)
	if err != nil {
		return err
	}
	return b.Put([]byte(workItemID), doc)
}

// LoadRunState returns the state of the run of workItemID, nil when none.
func (s *Store) LoadRunState(ctx context.Context, workItemID string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := validRunStateKey(workItemID); err != nil {
		return nil, err
	}
	var doc []byte
	err := s.view("load run state", func(t txn) error {
		if b := t.tx.Bucket(bucketRunStates); b != nil {
			if v := b.Get([]byte(workItemID)); v != nil {
				doc = append([]byte(nil), v...)
			}
		}
		return nil
	})
	return doc, err
}

// DeleteRunState forgets the state of the run of workItemID.
func (s *Store) DeleteRunState(ctx context.Context, workItemID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validRunStateKey(workItemID); err != nil {
		return err
	}
	return s.update("delete run state", func(t txn) error {
		b := t.tx.Bucket(bucketRunStates)
		if b == nil {
			return nil
		}
		return b.Delete([]byte(workItemID))
	})
}
