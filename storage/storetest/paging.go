package storetest

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// idSeq is the number of an id ("wi_12" → 12), for checking order.
func idSeq(t *testing.T, id string) int {
	t.Helper()
	_, n, ok := strings.Cut(id, "_")
	require.True(t, ok, id)
	v, err := strconv.Atoi(n)
	require.NoError(t, err, id)
	return v
}

// pageAll follows a listing's cursors to the end, checking that every page
// but the last is full and that ids come newest first.
func pageAll(t *testing.T, limit int, list func(cursor string) ([]string, string)) []string {
	t.Helper()
	var all []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10000, "paging does not end")
		ids, next := list(cursor)
		if next != "" {
			require.Len(t, ids, limit, "a page that is not the last is full")
		}
		all = append(all, ids...)
		if next == "" {
			break
		}
		require.NotEqual(t, cursor, next, "the cursor moves on")
		cursor = next
	}
	for i := 1; i < len(all); i++ {
		require.Greater(t, idSeq(t, all[i-1]), idSeq(t, all[i]), "newest first, no repeats: %s before %s", all[i-1], all[i])
	}
	return all
}

func testPaging(t *testing.T, open Opener) {
	h := newHarness(t, open)
	const before, during = 1030, 300
	threads := []bot.Thread{bot.LocalThread("a"), bot.LocalThread("b")}
	ingestMany := func(n int, ignore bool) error {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for w := range 32 {
			wg.Go(func() {
				for i := w; i < n; i += 32 {
					ev := h.event(threads[i%2], fmt.Sprint(i))
					req := routed(ev, "coder", epoch())
					if ignore {
						req = ignored(ev, []string{bot.IgnoreBot, bot.IgnoreNoRoute}[i%2], epoch())
					}
					_, err := h.s.Ingest(h.ctx, req)
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
	require.NoError(t, ingestMany(before, false))
	require.NoError(t, ingestMany(before, true))
	everyItem := map[string]bool{}
	for _, wi := range h.list(bot.WorkItemFilter{Limit: 1000}) {
		everyItem[wi.ID] = true
	}
	require.Len(t, everyItem, 1000)

	workItems := func(f bot.WorkItemFilter) func(string) ([]string, string) {
		return func(cursor string) ([]string, string) {
			f.Cursor = cursor
			items, next, err := h.s.ListWorkItems(h.ctx, f)
			require.NoError(t, err)
			return ids(items), next
		}
	}
	ingress := func(f bot.IngressFilter) func(string) ([]string, string) {
		return func(cursor string) ([]string, string) {
			f.Cursor = cursor
			recs, next, err := h.s.ListIngress(h.ctx, f)
			require.NoError(t, err)
			out := make([]string, len(recs))
			for i, r := range recs {
				out[i] = r.ID
				if f.Reason != "" {
					require.Equal(t, f.Reason, r.Reason)
				}
			}
			return out, next
		}
	}

	// Page through everything while more arrives: nothing that was there
	// is skipped, nothing is repeated.
	t.Run("with concurrent inserts", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			err := ingestMany(during, false)
			if err == nil {
				err = ingestMany(during, true)
			}
			done <- err
		}()
		for _, tc := range []struct {
			name  string
			limit int
			list  func(int) func(string) ([]string, string)
			want  int // at least this many
		}{
			{"work items", 97, func(n int) func(string) ([]string, string) { return workItems(bot.WorkItemFilter{Limit: n}) }, before},
			{"work items of a thread", 50, func(n int) func(string) ([]string, string) {
				return workItems(bot.WorkItemFilter{Thread: "local:a", Limit: n})
			}, before / 2},
			{"queued work items of a thread", 1000, func(n int) func(string) ([]string, string) {
				return workItems(bot.WorkItemFilter{Thread: "local:b", Status: bot.StatusQueued, Limit: n})
			}, before / 2},
			{"queued work items", 333, func(n int) func(string) ([]string, string) {
				return workItems(bot.WorkItemFilter{Status: bot.StatusQueued, Limit: n})
			}, before},
			{"ingress", 101, func(n int) func(string) ([]string, string) { return ingress(bot.IngressFilter{Limit: n}) }, before},
			{"ingress by reason", 64, func(n int) func(string) ([]string, string) {
				return ingress(bot.IngressFilter{Reason: bot.IgnoreBot, Limit: n})
			}, before / 2},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got := pageAll(t, tc.limit, tc.list(tc.limit))
				require.GreaterOrEqual(t, len(got), tc.want)
				require.LessOrEqual(t, len(got), tc.want+during)
			})
		}
		require.NoError(t, <-done)
		// Every work item that was there before paging began was seen.
		got := pageAll(t, 97, workItems(bot.WorkItemFilter{Limit: 97}))
		seen := map[string]bool{}
		for _, id := range got {
			seen[id] = true
		}
		for id := range everyItem {
			require.True(t, seen[id], "%s skipped", id)
		}
		require.Len(t, got, before+during)
	})

	t.Run("a limit never cuts a list silently", func(t *testing.T) {
		items, next, err := h.s.ListWorkItems(h.ctx, bot.WorkItemFilter{Limit: 5000})
		require.NoError(t, err)
		require.Len(t, items, 1000, "at most 1000 a page")
		require.NotEmpty(t, next)

		// Exactly one page's worth: no cursor to an empty page.
		h2 := newHarness(t, open)
		for i := range 3 {
			h2.submit(bot.LocalThread("t"), "coder", fmt.Sprint(i))
		}
		items, next, err = h2.s.ListWorkItems(h2.ctx, bot.WorkItemFilter{Limit: 3})
		require.NoError(t, err)
		require.Len(t, items, 3)
		require.Empty(t, next)
		items, next, err = h2.s.ListWorkItems(h2.ctx, bot.WorkItemFilter{Limit: 2})
		require.NoError(t, err)
		require.Len(t, items, 2)
		require.NotEmpty(t, next)
		items, next, err = h2.s.ListWorkItems(h2.ctx, bot.WorkItemFilter{Limit: 2, Cursor: next})
		require.NoError(t, err)
		require.Len(t, items, 1)
		require.Empty(t, next)
	})

	t.Run("cursors are the listing's own", func(t *testing.T) {
		_, wiNext, err := h.s.ListWorkItems(h.ctx, bot.WorkItemFilter{Limit: 1})
		require.NoError(t, err)
		_, inNext, err := h.s.ListIngress(h.ctx, bot.IngressFilter{Limit: 1})
		require.NoError(t, err)
		for _, bad := range []string{"nonsense", "!!", inNext, wiNext + "x"} {
			_, _, err := h.s.ListWorkItems(h.ctx, bot.WorkItemFilter{Cursor: bad})
			requireCode(t, bot.EINVALID, err)
		}
		_, _, err = h.s.ListIngress(h.ctx, bot.IngressFilter{Cursor: wiNext})
		requireCode(t, bot.EINVALID, err)
		_, _, err = h.s.ListWorkItems(h.ctx, bot.WorkItemFilter{Conversation: "slack:T1/D1", Cursor: wiNext})
		requireCode(t, bot.EINVALID, err)
	})
}
