package github

import (
	"bytes"
	"fmt"
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
//
// GitHub never signs the same body twice, and the daemon acts on a body it
// has seen signed once only, so each delivery is the fixture with a pull
// request id of its own, signed while the timer is stopped.
func BenchmarkWebhookPullRequestOpened(b *testing.B) {
	e := newEnv(b)
	fixed := fixture(b, "pull_request/opened.payload.json")
	const prID = `"id": 279147437,`
	at := bytes.Index(fixed, []byte(prID))
	if at < 0 {
		b.Fatalf("the fixture has no %s", prID)
	}
	at += len(`"id": `)
	var took []time.Duration
	n := 0
	for b.Loop() {
		n++
		b.StopTimer()
		body := bytes.Clone(fixed)
		copy(body[at:], fmt.Appendf(nil, "%09d", 279147437+n))
		sig := sign(testSecret, body)
		b.StartTimer()
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
