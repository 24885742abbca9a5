package bolt_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt"
)

func TestAuditListsNewestFirstByTimeAndDecision(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "switchyard.db")
	s, err := bolt.Open(path, bolt.Options{})
	require.NoError(t, err)

	// A store that never saw a record lists none, without failing.
	docs, _, err := s.ListAudit(ctx, time.Time{}, "", 0, "")
	require.NoError(t, err)
	require.Empty(t, docs)

	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	decisions := []string{"deny", "allow", "deny", "approved", "deny"}
	for i, d := range decisions {
		require.NoError(t, s.AppendAudit(ctx, base.Add(time.Duration(i)*time.Minute), d, fmt.Appendf(nil, `{"n":%d}`, i)))
	}
	// Two records in the same instant keep their append order.
	require.NoError(t, s.AppendAudit(ctx, base.Add(4*time.Minute), "deny", []byte(`{"n":5}`)))

	docs, _, err = s.ListAudit(ctx, time.Time{}, "", 0, "")
	require.NoError(t, err)
	require.Equal(t, []string{`{"n":5}`, `{"n":4}`, `{"n":3}`, `{"n":2}`, `{"n":1}`, `{"n":0}`}, auditDocs(docs))

	docs, _, err = s.ListAudit(ctx, time.Time{}, "deny", 0, "")
	require.NoError(t, err)
	require.Equal(t, []string{`{"n":5}`, `{"n":4}`, `{"n":2}`, `{"n":0}`}, auditDocs(docs))

	docs, _, err = s.ListAudit(ctx, base.Add(2*time.Minute), "deny", 0, "")
	require.NoError(t, err)
	require.Equal(t, []string{`{"n":5}`, `{"n":4}`, `{"n":2}`}, auditDocs(docs), "since is inclusive")

	docs, _, err = s.ListAudit(ctx, base.Add(time.Minute), "", 2, "")
	require.NoError(t, err)
	require.Equal(t, []string{`{"n":5}`, `{"n":4}`}, auditDocs(docs))

	docs, _, err = s.ListAudit(ctx, time.Time{}, "expired", 0, "")
	require.NoError(t, err)
	require.Empty(t, docs)

	// The log survives a reopen, and pruning drops the old part of both
	// the records and the decision index.
	require.NoError(t, s.Close())
	s, err = bolt.Open(path, bolt.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	n, err := s.PruneAudit(ctx, base.Add(2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, 2, n)
	docs, _, err = s.ListAudit(ctx, time.Time{}, "", 0, "")
	require.NoError(t, err)
	require.Len(t, docs, 4)
	docs, _, err = s.ListAudit(ctx, time.Time{}, "deny", 0, "")
	require.NoError(t, err)
	require.Equal(t, []string{`{"n":5}`, `{"n":4}`, `{"n":2}`}, auditDocs(docs))
}

func TestAuditRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	s, err := bolt.Open(filepath.Join(t.TempDir(), "switchyard.db"), bolt.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })

	err = s.AppendAudit(ctx, time.Now(), "", []byte(`{}`))
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
	err = s.AppendAudit(ctx, time.Now(), "de\x00ny", []byte(`{}`))
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
	err = s.AppendAudit(ctx, time.Now(), "deny", nil)
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
	_, _, err = s.ListAudit(ctx, time.Time{}, "de\x00ny", 0, "")
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))

	require.NoError(t, s.Close())
	err = s.AppendAudit(ctx, time.Now(), "deny", []byte(`{}`))
	require.Equal(t, bot.EUNAVAILABLE, bot.ErrorCode(err))
}

func auditDocs(docs [][]byte) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = string(d)
	}
	return out
}

// Paging through the audit log while records are appended skips and repeats
// none of those that were there, with or without a decision filter.
func TestAuditPagesThroughEverythingWhileRecordsArrive(t *testing.T) {
	ctx := context.Background()
	s, err := bolt.Open(filepath.Join(t.TempDir(), "switchyard.db"), bolt.Options{})
	require.NoError(t, err)
	defer s.Close()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const before, during = 1050, 200
	decision := func(i int) string { return []string{"deny", "allow", "needs_approval"}[i%3] }
	for i := range before {
		require.NoError(t, s.AppendAudit(ctx, base.Add(time.Duration(i)*time.Millisecond), decision(i), fmt.Appendf(nil, `{"n":%d}`, i)))
	}
	done := make(chan error, 1)
	go func() {
		var err error
		for i := before; i < before+during && err == nil; i++ {
			err = s.AppendAudit(ctx, base.Add(time.Duration(i)*time.Millisecond), decision(i), fmt.Appendf(nil, `{"n":%d}`, i))
		}
		done <- err
	}()
	pageAll := func(decision string, limit int) []string {
		t.Helper()
		var all []string
		cursor := ""
		for {
			docs, next, err := s.ListAudit(ctx, time.Time{}, decision, limit, cursor)
			require.NoError(t, err)
			if next != "" {
				require.Len(t, docs, limit)
			}
			all = append(all, auditDocs(docs)...)
			if next == "" {
				return all
			}
			cursor = next
		}
	}
	for _, tc := range []struct {
		decision string
		limit    int
	}{{"", 99}, {"deny", 40}, {"allow", 1000}} {
		got := pageAll(tc.decision, tc.limit)
		seen := map[string]bool{}
		last := before + during
		for _, doc := range got {
			require.False(t, seen[doc], "%s twice", doc)
			seen[doc] = true
			var n int
			_, err := fmt.Sscanf(doc, `{"n":%d}`, &n)
			require.NoError(t, err)
			require.Less(t, n, last, "newest first")
			last = n
		}
		for i := range before {
			if tc.decision == "" || decision(i) == tc.decision {
				require.True(t, seen[fmt.Sprintf(`{"n":%d}`, i)], "record %d skipped (%q)", i, tc.decision)
			}
		}
	}
	require.NoError(t, <-done)

	_, _, err = s.ListAudit(ctx, time.Time{}, "", 0, "not-a-cursor")
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
}
