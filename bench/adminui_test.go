package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/admin/ui"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/storage/bolt"
)

// adminWorkItems is how many work items the admin UI's list is measured
// over.
const adminWorkItems = 10000

// BenchmarkAdminWorkItemList measures the admin UI's work item list — the
// real handler behind sign-in: session, CSRF and security headers, one
// page of 50 from the store, the trees' spending, the template and the
// redactor — with 10,000 work items in the store, each page (the first,
// and pages deep in the listing through the cursor) against the store's own
// list call for the same page.
func BenchmarkAdminWorkItemList(b *testing.B) {
	for range b.N {
		ctx := context.Background()
		store, err := bolt.Open(ctx, filepath.Join(b.TempDir(), "switchyard.db"), bolt.Options{})
		if err != nil {
			b.Fatal(err)
		}
		seedWorkItems(b, store, adminWorkItems)
		redactor := bot.NewRedactor()
		audit, err := policy.NewAuditor(store, redactor)
		if err != nil {
			b.Fatal(err)
		}
		const token = "bench-admin-token-0123456789"
		u, err := ui.New(ui.Options{
			Admin:  admin.Options{Store: store},
			Tokens: []httpapi.Token{{Name: "admin", Value: token}}, Redactor: redactor, Audit: audit, Records: store,
			Sessions: store,
		})
		if err != nil {
			b.Fatal(err)
		}
		h := u.Handler()
		cookie := signIn(b, h, token)

		// The cursors of pages through the listing, as the store gives them.
		var cursors []string
		cursor := ""
		for range adminWorkItems / 50 {
			cursors = append(cursors, cursor)
			_, next, err := store.ListWorkItems(ctx, bot.WorkItemFilter{Limit: 50, Cursor: cursor})
			if err != nil {
				b.Fatal(err)
			}
			cursor = next
		}
		page := func(i int) string { return "/admin/workitems?cursor=" + url.QueryEscape(cursors[i%len(cursors)]) }

		const n = 2000
		storeLat := make(latencies, 0, n)
		pageLat := make(latencies, 0, n)
		for i := range n + 100 {
			c := cursors[(i*37)%len(cursors)]
			start := time.Now()
			if _, _, err := store.ListWorkItems(ctx, bot.WorkItemFilter{Limit: 50, Cursor: c}); err != nil {
				b.Fatal(err)
			}
			ds := time.Since(start)
			req := httptest.NewRequest("GET", page((i*37)%len(cursors)), nil)
			req.AddCookie(cookie)
			rec := httptest.NewRecorder()
			start = time.Now()
			h.ServeHTTP(rec, req)
			dp := time.Since(start)
			if rec.Code != http.StatusOK || strings.Count(rec.Body.String(), "<tr data-id=") != 50 {
				b.Fatalf("page %d: status %d, want 200 with 50 rows", i, rec.Code)
			}
			if i >= 100 { // warmed up
				storeLat = append(storeLat, ds)
				pageLat = append(pageLat, dp)
			}
		}
		if err := store.Close(); err != nil {
			b.Fatal(err)
		}
		p99 := pageLat.quantile(0.99)
		b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
		report(b, "admin UI: the work item list, a page of 50 among 10,000 work items, signed in",
			fmt.Sprintf("page (handler): p50 %s, p99 %s", pageLat.quantile(0.5), p99),
			fmt.Sprintf("baseline, the store's list call for the same page: p50 %s, p99 %s; the page costs %.1fx it at p99",
				storeLat.quantile(0.5), storeLat.quantile(0.99), float64(p99)/float64(max(storeLat.quantile(0.99), 1))),
			fmt.Sprintf("p99 is %.2f of the 50 ms target: %s", float64(p99)/float64(50*time.Millisecond), verdict(p99 < 50*time.Millisecond)),
		)
	}
}

// seedWorkItems makes n work items through the store's intake, from as
// many goroutines as the intake benchmark's clients.
func seedWorkItems(b *testing.B, store *bolt.Store, n int) {
	b.Helper()
	now := time.Now().UTC()
	var wg sync.WaitGroup
	errs := make(chan error, intakeClients)
	for c := range intakeClients {
		wg.Go(func() {
			for i := c; i < n; i += intakeClients {
				ev := bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, DeliveryID: fmt.Sprintf("seed-%d", i), Actor: "bench",
					Text: messageText(i), Thread: bot.LocalThread(fmt.Sprintf("t%d", i%500)), ReceivedAt: now,
					Requester: bot.Requester{Source: bot.SourceLocal, ID: "bench"}}
				ev.FillFromText()
				if _, err := store.Ingest(context.Background(), bot.IngestRequest{Event: ev,
					Route: &bot.Route{Agent: "coder", Kind: bot.RouteMention, Reason: "mention @coder"}, Now: now, DedupUntil: now.Add(time.Hour)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

var csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// signIn signs in to the UI with token and returns the session cookie.
func signIn(b *testing.B, h http.Handler, token string) *http.Cookie {
	b.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/admin/signin", nil))
	m := csrfField.FindStringSubmatch(rec.Body.String())
	if m == nil {
		b.Fatal("no CSRF token on the sign-in form")
	}
	form := url.Values{"token": {token}, "csrf_token": {m[1]}}
	req := httptest.NewRequest("POST", "/admin/signin", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range rec.Result().Cookies() {
		req.AddCookie(c)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	for _, c := range rec.Result().Cookies() {
		if c.Name == "switchyard_session" {
			return c
		}
	}
	b.Fatalf("sign-in: status %d and no session", rec.Code)
	return nil
}
