package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt"
)

// manyWorkItems puts n work items in store, in threads t0…t49, from
// several clients at once as intake does; their delivery ids are m-<from>
// on.
func manyWorkItems(t *testing.T, store *bolt.Store, from, n int) {
	t.Helper()
	now := time.Now().UTC()
	const clients = 200
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			for i := from + c; i < from+n; i += clients {
				ev := bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, DeliveryID: fmt.Sprintf("m-%d", i), Actor: "carol",
					Text: fmt.Sprintf("message %d", i), Thread: bot.LocalThread(fmt.Sprintf("t%d", i%50)), ReceivedAt: now,
					Requester: bot.Requester{Source: bot.SourceLocal, ID: "carol"}}
				if _, err := store.Ingest(context.Background(), bot.IngestRequest{Event: ev,
					Route: &bot.Route{Agent: "ops", Kind: bot.RouteMention, Reason: "mention @ops"}, Now: now, DedupUntil: now.Add(time.Hour)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// listAll pages through query with limit until the listing ends and
// returns every item's id in the order given; between pages it calls
// between with the page's number.
func listAll(t *testing.T, h http.Handler, query string, limit int, between func(page int)) []string {
	t.Helper()
	var got []string
	cursor := ""
	for n := 0; ; n++ {
		q := query + "&limit=" + fmt.Sprint(limit)
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		rec := serve(t, h, http.MethodGet, "/api/v1/workitems?"+strings.TrimPrefix(q, "&"), "")
		require.Equal(t, http.StatusOK, rec.Code, "page %d: %s", n, rec.Body)
		items, next := page[admin.WorkItemSummary](t, rec)
		require.LessOrEqual(t, len(items), limit)
		if next != "" {
			require.Len(t, items, limit, "a page before the last is full")
		}
		got = append(got, ids(items)...)
		if next == "" {
			return got
		}
		if between != nil {
			between(n)
		}
		cursor = next
	}
}

// With 10,000 work items, the listing pages through every one of them
// exactly once, newest first, whatever the page size (the last page ends
// the listing, full or not), with filters, and while work items keep
// arriving (they come before the first page, never inside the listing); a
// cursor that is not one the listing gave out is refused with 400.
func TestPagingTenThousandWorkItems(t *testing.T) {
	const n = 10000
	store := openStore(t)
	began := time.Now()
	manyWorkItems(t, store, 0, n)
	t.Logf("%d work items stored in %s", n, time.Since(began))
	h := handler(admin.Options{Store: store})

	all := listAll(t, h, "", 1000, nil)
	require.Len(t, all, n)
	seen := map[string]bool{}
	for _, id := range all {
		require.False(t, seen[id], "%s listed twice", id)
		seen[id] = true
	}
	// Pages of one: the first ones, and a cursor across the end.
	cursor := ""
	for i := range 3 {
		q := "/api/v1/workitems?limit=1"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		items, next := page[admin.WorkItemSummary](t, serve(t, h, http.MethodGet, q, ""))
		require.Equal(t, all[i:i+1], ids(items))
		require.NotEmpty(t, next)
		cursor = next
	}
	// Pages of 1000 end exactly at the last item; pages of 999 leave
	// one short last page.
	require.Equal(t, all, listAll(t, h, "", 999, nil))

	// Filters with paging: a thread's 200 work items, in pages of 30.
	thread := listAll(t, h, "&thread=t7", 30, nil)
	require.Len(t, thread, n/50)
	rec := serve(t, h, http.MethodGet, "/api/v1/workitems?thread=t7&limit=1000", "")
	one, _ := page[admin.WorkItemSummary](t, rec)
	require.Equal(t, ids(one), thread, "paging a filter lists what one page of it lists")
	for _, wi := range one {
		require.Equal(t, "local:t7", wi.Thread)
	}
	queued := listAll(t, h, "&status=queued&thread=t7", 64, nil)
	require.Equal(t, thread, queued)
	require.Empty(t, listAll(t, h, "&status=done&thread=t7", 64, nil))

	// Work items arriving while someone pages are not inside the listing
	// they page through: no duplicate, no gap.
	added := n
	during := listAll(t, h, "", 900, func(page int) {
		if page%4 == 0 {
			manyWorkItems(t, store, added, 37)
			added += 37
		}
	})
	require.Equal(t, all, during)
	require.Len(t, listAll(t, h, "", 1000, nil), added)

	// Cursors not given out by this listing are refused, never a 500.
	rec = serve(t, h, http.MethodGet, "/api/v1/workitems?limit=10", "")
	_, next := page[admin.WorkItemSummary](t, rec)
	require.NotEmpty(t, next)
	for _, cursor := range []string{
		"garbage", "%zz", "AAAA", next[:len(next)-1], next + "A", strings.ToUpper(next), strings.Repeat("A", 10000),
		"-1", "0", "\x00", "../../", "eyJzZXEiOjF9", strings.Replace(next, next[:1], string(next[0]^1), 1),
	} {
		if cursor == next {
			continue
		}
		rec := serve(t, h, http.MethodGet, "/api/v1/workitems?limit=10&cursor="+url.QueryEscape(cursor), "")
		requireError(t, rec, http.StatusBadRequest, "cursor")
		require.Less(t, len(rec.Body.String()), 1000, "a cursor refused is not said back at length")
	}
}
