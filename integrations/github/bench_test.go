package github

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"
)

// BenchmarkWebhookPullRequestOpened measures intake as GitHub sees it:
// verify, normalise and persist (an ingress record: nothing routes the
// example) through the real handler and a real bbolt store. p99-ns is the
// 99th percentile of one delivery.
func BenchmarkWebhookPullRequestOpened(b *testing.B) {
	e := newEnv(b)
	body := fixture(b, "pull_request/opened.payload.json")
	sig := sign(testSecret, body)
	var took []time.Duration
	n := 0
	for b.Loop() {
		n++
		req := httptest.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(body))
		req.Header.Set("X-GitHub-Event", "pull_request")
		req.Header.Set("X-GitHub-Delivery", "bench-"+strconv.Itoa(n))
		req.Header.Set("X-Hub-Signature-256", sig)
		rec := httptest.NewRecorder()
		start := time.Now()
		e.handler.ServeHTTP(rec, req)
		took = append(took, time.Since(start))
		if rec.Code != http.StatusAccepted {
			b.Fatalf("delivery %d: %d %s", n, rec.Code, rec.Body)
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkReadDelivery compares the acknowledgement path's reader with
// go-github's normalisation, on a 28 KB pull_request.opened.
func BenchmarkReadDelivery(b *testing.B) {
	body := fixture(b, "pull_request/opened.payload.json")
	for _, r := range []struct {
		name string
		read func(event, id string, payload []byte) (*delivery, error)
	}{{"reader", readDelivery}, {"go-github", normalize}} {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := r.read("pull_request", "d-1", body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
