package bolt

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// Work items written before routes carried a kind read back with the kind
// their reason names, through every way a work item is read.
func TestWorkItemsWithoutKindReadWithTheirKind(t *testing.T) {
	s := openTest(t, t.TempDir())
	reasons := map[string]bot.RouteKind{
		"mention @coder":                        bot.RouteMention,
		"command /deploy":                       bot.RouteCommand,
		`rule "bugs" (priority 100)`:            bot.RouteRule,
		`content: keyword "deploy"`:             bot.RouteKeyword,
		"default":                               bot.RouteDefault,
		"handoff from @coder: needs a review":   bot.RouteHandoff,
		"handoff: @ops owns this thread (wi_7)": bot.RouteHandoff,
		`schedule "nightly"`:                    bot.RouteSchedule,
	}
	ids := map[string]bot.RouteKind{}
	for reason, kind := range reasons {
		res, err := s.Ingest(t.Context(), bot.IngestRequest{
			Event: bot.Event{Source: "local", Kind: bot.KindLocalMessage, Thread: bot.LocalThread("t"), Raw: []byte("{}")},
			Route: &bot.Route{Agent: "coder", Kind: kind, Reason: reason}, Now: time.Now(),
		})
		require.NoError(t, err)
		ids[res.WorkItem.ID] = kind
	}
	// Take the kinds out of the stored records, as earlier versions wrote them.
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketWorkItems))
		return b.ForEach(func(k, v []byte) error {
			old := strings.Replace(string(v), `"kind":"`, `"was":"`, 1)
			require.NotEqual(t, string(v), old)
			return b.Put(k, []byte(old))
		})
	}))
	for id, kind := range ids {
		wi, err := s.GetWorkItem(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, kind, wi.Route.Kind, wi.Route.Reason)
	}
	items, _, err := s.ListWorkItems(t.Context(), bot.WorkItemFilter{})
	require.NoError(t, err)
	require.Len(t, items, len(reasons))
	for _, wi := range items {
		require.Equal(t, ids[wi.ID], wi.Route.Kind, wi.Route.Reason)
	}
}

func TestIngestRefusesARouteWithoutKind(t *testing.T) {
	s := openTest(t, t.TempDir())
	_, err := s.Ingest(t.Context(), bot.IngestRequest{
		Event: bot.Event{Source: "local", Kind: bot.KindLocalMessage, Thread: bot.LocalThread("t")},
		Route: &bot.Route{Agent: "coder", Reason: "default"}, Now: time.Now(),
	})
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
	require.ErrorContains(t, err, `route to "coder" has no kind`)
}
