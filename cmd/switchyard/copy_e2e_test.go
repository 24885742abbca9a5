package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt"
)

// copyItems is the acceptance's count of work items moved to PostgreSQL.
const copyItems = 10_000

// TestStorageCopyBoltToPostgres is the acceptance test of moving up: a
// bbolt store with 10,000 work items, made through the store's intake, is
// copied by `switchyard storage copy` into an empty PostgreSQL database,
// and the daemon started on the database serves them: paging through the
// list reaches every one, workitems show and explain find one, and a new
// message gets a fresh id that none of them has.
func TestStorageCopyBoltToPostgres(t *testing.T) {
	pg := startPostgres(t)
	dsn := pg.EmptyDatabase(t)
	to := dsn
	if !strings.HasPrefix(dsn, "postgres") {
		to = "postgres:" + dsn // key=value pairs
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	file := filepath.Join(data, "switchyard.db")

	// The bbolt store, filled as the daemon's intake fills it: events
	// arriving together share a commit.
	s, err := bolt.Open(t.Context(), file, bolt.Options{})
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, copyItems)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < copyItems; i += 16 {
				now := time.Now()
				th := bot.LocalThread(fmt.Sprintf("t%d", i%500))
				_, err := s.Ingest(t.Context(), bot.IngestRequest{
					Event: bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, DeliveryID: fmt.Sprintf("k-%d", i),
						Actor: "alice", Text: fmt.Sprintf("@triage task %d", i), Thread: th, ReceivedAt: now},
					Route: &bot.Route{Agent: "triage", Kind: bot.RouteMention, Reason: "mention @triage"},
					Now:   now,
				})
				if err != nil {
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

	// A daemon running on the file holds it: the copy refuses to start.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("data_dir: ./data\n"), 0o600))
	r := run(t, dir, nil, "storage", "copy", "--from", "bolt:"+data, "--to", to)
	require.Equal(t, 1, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stderr, "the file is in use, by a running daemon most likely; stop it first")
	require.NoError(t, s.Close())

	// A copy killed with -9 once it has written its first rows keeps
	// nothing: the copy below, run again, finds the database empty and
	// moves each record once.
	killed := exec.Command(binary, "storage", "copy", "--from", "bolt:"+data, "--to", to)
	killed.Dir = dir
	require.NoError(t, killed.Start())
	exited := make(chan error, 1)
	go func() { exited <- killed.Wait() }()
	db, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	defer db.Close(context.WithoutCancel(t.Context()))
	for written := false; !written; {
		select {
		case err := <-exited:
			t.Fatalf("the copy ended (%v) before it could be killed half-way", err)
		default:
		}
		// Rows a transaction has not committed take pages all the same.
		err := db.QueryRow(t.Context(), `SELECT coalesce(sum(pg_relation_size(c.oid)), 0) > 0 FROM pg_class c
			WHERE c.relname IN ('work_items', 'events', 'dispatches') AND c.relkind = 'r'`).Scan(&written)
		require.NoError(t, err)
	}
	require.NoError(t, killed.Process.Kill())
	<-exited

	// The copy, timed.
	before, err := os.ReadFile(file)
	require.NoError(t, err)
	start := time.Now()
	r = run(t, dir, nil, "storage", "copy", "--from", "bolt:"+data, "--to", to)
	took := time.Since(start)
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("storage copy of %d work items: %s\n%s", copyItems, took.Round(time.Millisecond), r.stdout)
	require.Regexp(t, regexp.MustCompile(`(?m)^ +10000 work items$`), r.stdout)
	require.Regexp(t, regexp.MustCompile(`(?m)^ +10000 events$`), r.stdout)
	require.Contains(t, r.stdout, "copied ")
	require.NotContains(t, r.stdout+r.stderr, "password", "the DSN's secrets stay out of the output")
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, before, after, "the source is only read")

	// Again into the same database: refused, naming it.
	r = run(t, dir, nil, "storage", "copy", "--from", "bolt:"+file, "--to", to)
	require.Equal(t, 1, r.code, r.stdout)
	require.Contains(t, r.stderr, "is not empty (it holds work_items")

	// The daemon on the database.
	const token = "e2e-copy-token-0123456789"
	cfg := fmt.Sprintf("data_dir: ./data\nserver:\n  api_token: %s\nstorage:\n  driver: postgres\n  dsn: %q\n", token, dsn)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	p := serve(t, dir, freeAddr(t))
	env := append(p.env(), "SWITCHYARD_API_TOKEN="+token)

	seen := map[string]bool{}
	for cursor, pages := "", 0; ; pages++ {
		args := []string{"workitems", "list", "--json", "--limit", "1000"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		r := run(t, dir, env, args...)
		require.Equal(t, 0, r.code, r.stderr)
		var page []struct{ ID string }
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &page))
		for _, wi := range page {
			require.False(t, seen[wi.ID], "%s listed twice", wi.ID)
			seen[wi.ID] = true
		}
		if r.stderr == "" {
			break // no next page named
		}
		require.Less(t, pages, copyItems/1000, "more pages than work items")
		cursor = nextCursor(t, r.stderr)
	}
	require.Len(t, seen, copyItems)
	for i := 1; i <= copyItems; i++ {
		require.True(t, seen[fmt.Sprintf("wi_%d", i)], "wi_%d not listed", i)
	}

	r = run(t, dir, env, "workitems", "show", "wi_4321", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var wi struct {
		EventRef string `json:"event_ref"`
		Text     string
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &wi))
	require.Equal(t, "ev_4321", wi.EventRef)
	require.True(t, strings.HasPrefix(wi.Text, "@triage task "), wi.Text)

	r = run(t, dir, env, "explain", "--work-item", "wi_4321", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "triage")

	// A redelivery of a copied event is a duplicate of its work item; a
	// new message gets the next id.
	r = run(t, dir, env, "send", "--id", "k-0", "--thread", "t0", "--json", "@triage task 0")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"duplicate": true`)
	r = run(t, dir, env, "send", "--json", "@triage after the copy")
	require.Equal(t, 0, r.code, r.stderr)
	var sent struct {
		WorkItemID string `json:"work_item_id"`
		Duplicate  bool
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sent))
	require.False(t, sent.Duplicate)
	// PostgreSQL's sequences may skip a number (the duplicate took one),
	// never go back.
	n, err := strconv.Atoi(strings.TrimPrefix(sent.WorkItemID, "wi_"))
	require.NoError(t, err, sent.WorkItemID)
	require.Greater(t, n, copyItems, "the new work item's id follows the copied ones")
	require.False(t, seen[sent.WorkItemID])
}
