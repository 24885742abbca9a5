package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/bot"
)

var _ bot.RuleStore = (*Store)(nil)

// rulePrefix prefixes the ids of stored rules, as the bbolt store's.
const rulePrefix = "rule_"

// ruleSeq returns the sequence of a rule id.
func ruleSeq(id string) (int64, bool) {
	rest, ok := strings.CutPrefix(id, rulePrefix)
	if !ok || rest == "" || rest[0] == '0' || rest[0] == '+' {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil && n > 0
}

// ListRules returns every stored rule, in the order they were made.
func (s *Store) ListRules(ctx context.Context) ([]bot.StoredRule, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, "SELECT doc FROM rules ORDER BY seq")
	if err != nil {
		return nil, s.wrap("list rules", err)
	}
	docs, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, s.wrap("list rules", err)
	}
	out := make([]bot.StoredRule, 0, len(docs))
	for _, doc := range docs {
		var r bot.StoredRule
		if err := json.Unmarshal(doc, &r); err != nil {
			return nil, fmt.Errorf("decode rule: %w", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// CreateRule stores a new rule under the next id.
func (s *Store) CreateRule(ctx context.Context, r bot.StoredRule) (bot.StoredRule, error) {
	r.ID = rulePrefix + "0" // checked with a placeholder; the id is given below
	if err := r.Validate(); err != nil {
		return bot.StoredRule{}, err
	}
	err := s.tx(ctx, "create rule", func(tx pgx.Tx) error {
		var seq int64
		if err := tx.QueryRow(ctx, "SELECT nextval('rules_seq_seq')").Scan(&seq); err != nil {
			return err
		}
		r.ID = rulePrefix + strconv.FormatInt(seq, 10)
		return putRule(ctx, tx, seq, r)
	})
	if err != nil {
		return bot.StoredRule{}, s.ruleError(r.Name, err)
	}
	return r, nil
}

// putRule writes r under seq, replacing what is there.
func putRule(ctx context.Context, q querier, seq int64, r bot.StoredRule) error {
	doc, err := jsonDoc(r)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `INSERT INTO rules (seq, name, doc) VALUES ($1, $2, $3)
		ON CONFLICT (seq) DO UPDATE SET name = EXCLUDED.name, doc = EXCLUDED.doc`, seq, r.Name, doc)
	return err
}

// ruleError says which rule has the name when a write found it taken.
func (s *Store) ruleError(name string, err error) error {
	if !isUniqueViolation(err) {
		return err
	}
	var doc []byte
	if qerr := s.pool.QueryRow(context.Background(), "SELECT doc FROM rules WHERE name = $1", name).Scan(&doc); qerr == nil {
		var other bot.StoredRule
		if json.Unmarshal(doc, &other) == nil {
			return bot.Errorf(bot.ECONFLICT, "duplicate rule name %q (also %s)", name, other.Origin())
		}
	}
	return bot.Errorf(bot.ECONFLICT, "duplicate rule name %q", name)
}

// UpdateRule replaces the rule of r's id, keeping who made it and when.
func (s *Store) UpdateRule(ctx context.Context, r bot.StoredRule) (bot.StoredRule, error) {
	seq, ok := ruleSeq(r.ID)
	if !ok {
		return bot.StoredRule{}, bot.Errorf(bot.ENOTFOUND, "no rule %q", r.ID)
	}
	err := s.tx(ctx, "update rule", func(tx pgx.Tx) error {
		var doc []byte
		if err := tx.QueryRow(ctx, "SELECT doc FROM rules WHERE seq = $1 FOR UPDATE", seq).Scan(&doc); err != nil {
			if err == pgx.ErrNoRows {
				return bot.Errorf(bot.ENOTFOUND, "no rule %q", r.ID)
			}
			return err
		}
		var old bot.StoredRule
		if err := json.Unmarshal(doc, &old); err != nil {
			return fmt.Errorf("decode rule %s: %w", r.ID, err)
		}
		r.CreatedBy, r.CreatedAt = old.CreatedBy, old.CreatedAt
		if err := r.Validate(); err != nil {
			return err
		}
		return putRule(ctx, tx, seq, r)
	})
	if err != nil {
		return bot.StoredRule{}, s.ruleError(r.Name, err)
	}
	return r, nil
}

// DeleteRule removes the rule of that id and returns it.
func (s *Store) DeleteRule(ctx context.Context, id string) (bot.StoredRule, error) {
	seq, ok := ruleSeq(id)
	if !ok {
		return bot.StoredRule{}, bot.Errorf(bot.ENOTFOUND, "no rule %q", id)
	}
	if err := s.open(); err != nil {
		return bot.StoredRule{}, err
	}
	var doc []byte
	if err := s.pool.QueryRow(ctx, "DELETE FROM rules WHERE seq = $1 RETURNING doc", seq).Scan(&doc); err != nil {
		if err == pgx.ErrNoRows {
			return bot.StoredRule{}, bot.Errorf(bot.ENOTFOUND, "no rule %q", id)
		}
		return bot.StoredRule{}, s.wrap("delete rule", err)
	}
	var old bot.StoredRule
	if err := json.Unmarshal(doc, &old); err != nil {
		return bot.StoredRule{}, fmt.Errorf("decode rule %s: %w", id, err)
	}
	return old, nil
}
