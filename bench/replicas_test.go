package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/integrations/local"
	"github.com/switchyard/switchyard/storage/bolt"
	"github.com/switchyard/switchyard/storage/postgres"
	"github.com/switchyard/switchyard/storage/postgres/pgtest"
)

// replicaRequests is how many console messages each run of
// BenchmarkIntakeReplicas posts.
const replicaRequests = 10000

// intakeStore is what a replica's intake writes to and the count checked
// after a run.
type intakeStore interface {
	bot.Store
	local.OutboxReader
}

// BenchmarkIntakeReplicas measures the console's full intake path (HTTP
// over TCP, decode, routing, dedup, the commit, answered 202) with 64
// clients on one replica on bbolt, the baseline, and on one and on three
// replicas sharing one PostgreSQL database, in the same run. A replica here
// is an intake with its console and a store of its own (for PostgreSQL, its
// own connection pool), as each daemon process has; the clients spread
// over the replicas. Each run checks afterwards that the queue holds one
// work item per message: nothing lost, nothing doubled. The replicas share
// the machine's cores with the database and the clients, so the figures
// are recorded, not targeted.
func BenchmarkIntakeReplicas(b *testing.B) {
	for range b.N {
		bodies, _ := intakeMessages(b)
		bodies = bodies[:replicaRequests]
		boltRate, boltLat := measureReplicas(b, bodies, func() []intakeStore {
			s, err := bolt.Open(context.Background(), filepath.Join(b.TempDir(), "switchyard.db"), bolt.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return []intakeStore{s}
		})
		lines := []string{fmt.Sprintf("bbolt, 1 replica: %.0f req/s (p50 %s, p99 %s)", boltRate,
			boltLat.quantile(0.50).Round(time.Microsecond), boltLat.quantile(0.99).Round(time.Microsecond))}
		pg, err := pgtest.StartDurable()
		if err != nil {
			b.Fatal(err)
		}
		if !pg.Available() {
			lines = append(lines, "PostgreSQL: skipped, no server: install PostgreSQL (Debian: apt-get install postgresql) or set "+pgtest.EnvDSN)
		}
		for _, n := range []int{1, 3} {
			if !pg.Available() {
				break
			}
			dsn, err := pg.NewDatabase(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			rate, lat := measureReplicas(b, bodies, func() []intakeStore {
				var stores []intakeStore
				for range n {
					s, err := postgres.Open(context.Background(), dsn, postgres.Options{})
					if err != nil {
						b.Fatal(err)
					}
					stores = append(stores, s)
				}
				return stores
			})
			b.ReportMetric(rate, fmt.Sprintf("req/s-postgres-%d", n))
			lines = append(lines, fmt.Sprintf("PostgreSQL, %d replica%s: %.0f req/s (p50 %s, p99 %s): ratio %.2f to bbolt", n, plural(n), rate,
				lat.quantile(0.50).Round(time.Microsecond), lat.quantile(0.99).Round(time.Microsecond), rate/boltRate))
		}
		pg.Stop()
		b.ReportMetric(boltRate, "req/s-bolt")
		report(b, "intake: replicas on PostgreSQL beside one on bbolt (recorded, not targeted)", append(lines,
			fmt.Sprintf("%d clients, %d messages a run, each run's queue checked: one work item per message", intakeClients, len(bodies)),
			"the PostgreSQL server is local, on a unix socket, and syncs each commit as bbolt does")...)
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// measureReplicas posts bodies to the replicas open makes, spread over
// them, and checks that the queue holds one work item per body.
func measureReplicas(b *testing.B, bodies [][]byte, open func() []intakeStore) (float64, latencies) {
	b.Helper()
	stores := open()
	router, err := config.Default().Compile(builtinAgents)
	if err != nil {
		b.Fatal(err)
	}
	var addrs []string
	for _, s := range stores {
		intake := bot.NewIntake(bot.IntakeOptions{Store: s, Router: router})
		mux := http.NewServeMux()
		local.New(intake, s, nil).Mount(mux)
		srv := httptest.NewServer(mux)
		defer srv.Close()
		defer s.Close()
		addrs = append(addrs, srv.Listener.Addr().String())
	}

	lat := make(latencies, len(bodies))
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	runtime.GC()
	start := time.Now()
	for i := range intakeClients {
		wg.Go(func() {
			c, err := dialClient(addrs[i%len(addrs)])
			if err != nil {
				b.Error(err)
				return
			}
			defer c.Close()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(bodies) {
					return
				}
				t0 := time.Now()
				status, err := c.post("/api/v1/messages", bodies[i])
				if err != nil {
					b.Error(err)
					return
				}
				if status != http.StatusAccepted {
					b.Errorf("status %d", status)
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	rate := float64(len(bodies)) / time.Since(start).Seconds()
	depth, err := stores[0].QueueDepth(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if depth != len(bodies) {
		b.Fatalf("%d messages acknowledged, %d work items queued", len(bodies), depth)
	}
	return rate, lat
}
