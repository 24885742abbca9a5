package bolt_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/storage/bolt"
)

// The audit log's contract is in storage/storetest; pruning is the bbolt
// store's own upkeep.
func TestAuditPruneDropsTheOldPart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "switchyard.db")
	s, err := bolt.Open(ctx, path, bolt.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })

	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i, d := range []string{"deny", "allow", "deny", "approved", "deny"} {
		require.NoError(t, s.AppendAudit(ctx, base.Add(time.Duration(i)*time.Minute), d, fmt.Appendf(nil, `{"n":%d}`, i)))
	}
	require.NoError(t, s.AppendAudit(ctx, base.Add(4*time.Minute), "deny", []byte(`{"n":5}`)))

	n, err := s.PruneAudit(ctx, base.Add(2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, 2, n)
	docs, _, err := s.ListAudit(ctx, time.Time{}, "", 0, "")
	require.NoError(t, err)
	require.Len(t, docs, 4)
	docs, _, err = s.ListAudit(ctx, time.Time{}, "deny", 0, "")
	require.NoError(t, err)
	require.Equal(t, []string{`{"n":5}`, `{"n":4}`, `{"n":2}`}, auditDocs(docs), "the decision index is pruned too")
}

func auditDocs(docs [][]byte) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = string(d)
	}
	return out
}
