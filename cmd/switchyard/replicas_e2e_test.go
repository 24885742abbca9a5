package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/storage/postgres/pgtest"
)

// replicaItemsEnv scales the replicas' acceptance test down for a quick
// run; the default is the acceptance's 5,000 work items.
const replicaItemsEnv = "SWITCHYARD_E2E_REPLICA_ITEMS"

// startPostgres starts a PostgreSQL server for one test from the installed
// programs, or skips the test saying why there is none and how to get one.
func startPostgres(t *testing.T) *pgtest.Server {
	t.Helper()
	pg, err := pgtest.Start()
	require.NoError(t, err)
	t.Cleanup(pg.Stop)
	pg.Skip(t)
	return pg
}

// replicaGitHub is the GitHub fake of the replicas' test: the outbox's
// routes, and the permission lookup of the intake, which says every author
// may write. Reactions are as GitHub keeps them, one of each content per
// comment and user: creating one that exists answers 200 with it and
// creates nothing (a replica killed after GitHub took its 👀 and before it
// recorded so has another replica ask again). It counts the reactions
// created and the requests that found theirs.
type replicaGitHub struct {
	*unreachableGitHub
	mu        sync.Mutex
	reactions map[string]int // "<comment id> <content>" → reactions created
	repeated  int            // requests for a reaction that existed
}

func (g *replicaGitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == "GET" && len(parts) == 6 && parts[3] == "collaborators" && parts[5] == "permission":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"permission": "write", "role_name": "write", "user": map[string]string{"login": parts[4]}})
		return
	case r.Method == "POST" && len(parts) == 7 && parts[4] == "comments" && parts[6] == "reactions":
		body, _ := io.ReadAll(r.Body)
		var c struct{ Content string }
		_ = json.Unmarshal(body, &c)
		key := parts[5] + " " + c.Content
		g.mu.Lock()
		exists := g.reactions[key] > 0
		if exists {
			g.repeated++
		} else {
			g.reactions[key]++
		}
		g.mu.Unlock()
		if exists {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"id": 1, "content": c.Content})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	g.unreachableGitHub.ServeHTTP(w, r)
}

// instantModel is an OpenAI-compatible model that answers at once.
func instantModel(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"fake",
		"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"done"}}],
		"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`)
}

func listen(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// commentPayload is an issue_comment delivery: comment id on issue n of
// acme/api, by alice, saying text.
func commentPayload(t *testing.T, base map[string]any, id int64, n int, text string) []byte {
	t.Helper()
	p := map[string]any{}
	for k, v := range base {
		p[k] = v
	}
	issue := map[string]any{}
	for k, v := range base["issue"].(map[string]any) {
		issue[k] = v
	}
	issue["number"] = n
	comment := map[string]any{}
	for k, v := range base["comment"].(map[string]any) {
		comment[k] = v
	}
	comment["id"], comment["body"] = id, text
	comment["user"] = map[string]any{"login": "alice", "id": 7, "type": "User"}
	p["issue"], p["comment"] = issue, comment
	p["sender"] = map[string]any{"login": "alice", "id": 7, "type": "User"}
	p["repository"] = map[string]any{"id": 1, "name": "api", "full_name": "acme/api", "private": true,
		"owner": map[string]any{"login": "acme", "id": 2, "type": "Organization"}}
	p["installation"] = map[string]any{"id": 42}
	b, err := json.Marshal(p)
	require.NoError(t, err)
	return b
}

// TestThreeReplicasOnePostgres is the acceptance test of several replicas:
// three daemons (the real binary) share one PostgreSQL database behind the
// local console and GitHub's webhooks, with a model that answers at once.
// Work items are sent to all three, and one is killed with -9 midway.
// Afterwards every acknowledged event has its work item, once; no work
// item ran two jobs at once; every outbox message reached the GitHub fake
// once; the schedule fired once in each period.
func TestThreeReplicasOnePostgres(t *testing.T) {
	pg := startPostgres(t)
	dsn := pg.Database(t)
	items := 5000
	if v := os.Getenv(replicaItemsEnv); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, replicaItemsEnv)
		items = n
	}

	gh := &replicaGitHub{unreachableGitHub: newUnreachableGitHub(), reactions: map[string]int{}}
	ghAddr := listen(t, gh)
	modelAddr := listen(t, http.HandlerFunc(instantModel))
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	const token = "e2e-shared-token-0123456789"
	cfg := fmt.Sprintf(`server:
  api_token: %s
storage:
  driver: postgres
  dsn: %q
  max_conns: 8
dispatch:
  lease: 3s
models:
  default:
    provider: openai
    base_url: http://%s/v1
    model: fake
github:
  app_id: 1
  app_slug: switchyard
  private_key_file: ./app.pem
  webhook_secret: e2e-secret
  api_url: http://%s/
schedules:
  - name: tick
    cron: "@every 2s"
    agent: triage
    text: tick
`, token, dsn, modelAddr, ghAddr)

	// One after the other, so the schedule's first firing is decided once.
	var reps []*daemonProc
	for range 3 {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "app.pem"), pemKey, 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
		reps = append(reps, serve(t, dir, freeAddr(t)))
	}
	started := time.Now()

	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "github", "issue_comment", "created.payload.json"))
	require.NoError(t, err)
	var base map[string]any
	require.NoError(t, json.Unmarshal(raw, &base))

	var (
		killed    atomic.Bool
		mu        sync.Mutex
		local     = map[string]string{} // console message id → work item
		deliverys = map[string]int64{}  // acknowledged GitHub delivery → comment id
		refused   atomic.Int64
		next      atomic.Int64
		wg        sync.WaitGroup
	)
	send := func(i int) {
		alive := reps
		if killed.Load() {
			alive = reps[:2]
		}
		p := alive[i%len(alive)]
		if i%2 == 0 {
			id := fmt.Sprintf("m-%d", i)
			resp, err := p.post(token, "/api/v1/messages", fmt.Sprintf(`{"thread":"t%d","text":"@coder task %d","id":%q}`, i%97, i, id))
			if err != nil {
				refused.Add(1) // not acknowledged: not owed
				return
			}
			defer resp.Body.Close()
			var res struct {
				WorkItemID string `json:"work_item_id"`
			}
			if resp.StatusCode == http.StatusAccepted && json.NewDecoder(resp.Body).Decode(&res) == nil {
				mu.Lock()
				local[id] = res.WorkItemID
				mu.Unlock()
			} else {
				refused.Add(1)
			}
			return
		}
		delivery := fmt.Sprintf("gh-%d", i)
		comment := int64(5_000_000 + i)
		status, err := deliverTo(p.addr, "issue_comment", delivery, commentPayload(t, base, comment, i%89+1, fmt.Sprintf("@coder task %d", i)))
		if err != nil || status/100 != 2 {
			refused.Add(1)
			return
		}
		mu.Lock()
		deliverys[delivery] = comment
		mu.Unlock()
	}
	for range 12 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= items {
					return
				}
				if i == items/2 && killed.CompareAndSwap(false, true) {
					require.NoError(t, reps[2].cmd.Process.Signal(syscall.SIGKILL))
				}
				send(i)
			}
		})
	}
	wg.Wait()
	_ = reps[2].wait()
	sent := time.Since(started)
	acked := len(local) + len(deliverys)
	t.Logf("%d of %d events acknowledged in %s (%d refused or cut off by the kill)", acked, items, sent.Round(time.Millisecond), refused.Load())
	require.Greater(t, acked, items*9/10)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	db, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer db.Close(context.Background())
	count := func(sql string) int {
		t.Helper()
		var n int
		require.NoError(t, db.QueryRow(ctx, sql).Scan(&n))
		return n
	}
	// The schedule goes on firing while the checks below run: they look at
	// the work items there were when everything was finished, the newest
	// taken before the count so none of them can still be open.
	var last int
	for {
		last = count("SELECT coalesce(max(seq), 0) FROM work_items")
		open := count("SELECT count(*) FROM work_items WHERE status NOT IN ('done', 'failed', 'cancelled')")
		pending := count("SELECT count(*) FROM outbox WHERE pending")
		if open == 0 && pending == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after %s: %d work items unfinished, %d outbox messages pending", time.Since(started).Round(time.Second), open, pending)
		}
		time.Sleep(500 * time.Millisecond)
	}
	done := time.Since(started)
	t.Logf("all work items finished and messages delivered %s after the first was sent", done.Round(time.Millisecond))

	// Every acknowledged event has its work item, and one only.
	rows, err := db.Query(ctx, `SELECT seq, convert_from(doc, 'UTF8')::jsonb->>'source', convert_from(doc, 'UTF8')::jsonb->>'delivery_id',
		status FROM work_items WHERE seq <= $1`, last)
	require.NoError(t, err)
	byDelivery := map[string][]string{}
	var schedules []string
	for rows.Next() {
		var (
			seq                      int64
			source, delivery, status string
		)
		require.NoError(t, rows.Scan(&seq, &source, &delivery, &status))
		id := "wi_" + strconv.FormatInt(seq, 10)
		byDelivery[source+"/"+delivery] = append(byDelivery[source+"/"+delivery], id)
		if source == "schedule" {
			schedules = append(schedules, delivery)
		}
		require.Equal(t, "done", status, "work item %s", id)
	}
	require.NoError(t, rows.Err())
	for k, ids := range byDelivery {
		require.Len(t, ids, 1, "delivery %s made %v", k, ids)
	}
	for id, wi := range local {
		require.Equal(t, []string{wi}, byDelivery["local/"+id], "console message %s", id)
	}
	for d := range deliverys {
		require.Len(t, byDelivery["github/"+d], 1, "GitHub delivery %s", d)
	}

	// No work item ran two jobs at once.
	rows, err = db.Query(ctx, `SELECT x.work_item_seq, convert_from(j.doc, 'UTF8')::jsonb->>'started_at',
		coalesce(convert_from(j.doc, 'UTF8')::jsonb->>'finished_at', '') FROM job_work_items x JOIN jobs j ON j.seq = x.job_seq
		WHERE x.work_item_seq <= $1`, last)
	require.NoError(t, err)
	type span struct{ from, to time.Time }
	spans := map[int64][]span{}
	for rows.Next() {
		var (
			wi       int64
			from, to string
		)
		require.NoError(t, rows.Scan(&wi, &from, &to))
		require.NotEmpty(t, to, "a job of wi_%d never finished", wi)
		var s span
		s.from, err = time.Parse(time.RFC3339Nano, from)
		require.NoError(t, err)
		s.to, err = time.Parse(time.RFC3339Nano, to)
		require.NoError(t, err)
		spans[wi] = append(spans[wi], s)
	}
	require.NoError(t, rows.Err())
	retried := 0
	for wi, ss := range spans {
		slices.SortFunc(ss, func(a, b span) int { return a.from.Compare(b.from) })
		for i := 1; i < len(ss); i++ {
			require.False(t, ss[i].from.Before(ss[i-1].to), "wi_%d ran a job from %s while its job of %s to %s ran", wi, ss[i].from, ss[i-1].from, ss[i-1].to)
		}
		if len(ss) > 1 {
			retried++
		}
	}
	t.Logf("%d work items ran again after the kill", retried)

	// Every outbox message reached GitHub once: the 👀 on each comment,
	// each message (by its key) once.
	_, comments := gh.counts()
	gh.mu.Lock()
	reactions, repeated := maps.Clone(gh.reactions), gh.repeated
	gh.mu.Unlock()
	t.Logf("%d reactions asked for again after the kill, which GitHub keeps once", repeated)
	for d, comment := range deliverys {
		require.Equal(t, 1, reactions[strconv.FormatInt(comment, 10)+" eyes"], "👀 on the comment of %s", d)
	}
	for k, n := range reactions {
		require.Equal(t, 1, n, "reactions %s", k)
	}
	for k, n := range comments {
		require.Equal(t, 1, n, "comments of %s", k)
	}
	rows, err = db.Query(ctx, `SELECT key FROM outbox WHERE starts_with(destination, 'github/')
		AND convert_from(doc, 'UTF8')::jsonb->>'kind' <> 'reaction'`)
	require.NoError(t, err)
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	for _, k := range keys {
		require.Equal(t, 1, comments[k], "comments of outbox message %s", k)
	}
	require.Len(t, comments, len(keys), "comments only of outbox messages")
	require.Zero(t, count("SELECT count(*) FROM outbox WHERE dead"), "no message given up")

	// The schedule fired once in each period, across the replicas.
	var fired []time.Time
	for _, d := range schedules {
		at, ok := strings.CutPrefix(d, "tick@")
		require.True(t, ok, d)
		ts, err := time.Parse(time.RFC3339, at)
		require.NoError(t, err)
		fired = append(fired, ts)
	}
	slices.SortFunc(fired, time.Time.Compare)
	require.GreaterOrEqual(t, len(fired), 2, "the schedule fired while the replicas ran")
	for i := 1; i < len(fired); i++ {
		require.Equal(t, 2*time.Second, fired[i].Sub(fired[i-1]), "firings %s and %s", fired[i-1], fired[i])
	}
	t.Logf("the schedule fired %d times, once every 2 s", len(fired))
}

// deliverTo posts a signed GitHub webhook delivery and returns the status,
// or the error of a replica that is gone.
func deliverTo(addr, event, delivery string, payload []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/webhooks/github", strings.NewReader(string(payload)))
	if err != nil {
		return 0, err
	}
	signGitHub(req, event, delivery, payload)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// An approval a run asks for on one replica is decided through another,
// and the run goes on: the decision is in the database, and the replica
// running the work is told. When the replica that asked is killed with -9
// while it waits, another takes the work over once its lease runs out, and
// the resumed run waits on the same approval rather than asking again; the
// approval given then lets it go on there, and the command runs once.
func TestApprovalRequestedOnOneReplicaApprovedThroughAnother(t *testing.T) {
	for _, killed := range []bool{false, true} {
		name := map[bool]string{false: "the asking replica alive", true: "the asking replica killed with -9"}[killed]
		t.Run(name, func(t *testing.T) { approvedThroughAnother(t, killed) })
	}
}

func approvedThroughAnother(t *testing.T, killAsker bool) {
	pg := startPostgres(t)
	dsn := pg.Database(t)
	fake := &fakeOpenAI{quick: true, steps: []toolStep{bashStep(`echo 'kubectl apply -f deploy.yaml; touch ran' | sh`)}}
	modelAddr := listen(t, fake)
	const (
		admin    = "e2e-shared-token-0123456789"
		anaToken = "ana-token-0123456789"
	)
	cfg := fmt.Sprintf(`server:
  api_token: %s
  api_tokens:
    - {name: ana, token: %s}
storage:
  driver: postgres
  dsn: %q
dispatch:
  lease: 2s
models:
  default:
    provider: openai
    base_url: http://%s/v1
    model: fake
profiles:
  deployer:
    extends: contributor
    permissions: [deploy]
    approval: ["kubectl apply"]
    approvers: [ana]
`, admin, anaToken, dsn, modelAddr)
	replica := func() (string, string) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "agents"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "agents", "shipper.md"), []byte(
			"---\nname: shipper\ndescription: Ships releases.\nprofile: deployer\n---\nYou ship.\n"), 0o600))
		return dir, freeAddr(t)
	}
	env := func(p *daemonProc, token string) []string {
		return append(p.env(), "SWITCHYARD_API_TOKEN="+token)
	}
	ran := func(dir string) bool {
		_, err := os.Stat(filepath.Join(dir, "data", "workspaces", tools.WorkspaceName("local:ship"), "ran"))
		return err == nil
	}

	// Alone, replica A takes the work item and its run asks.
	dirA, addrA := replica()
	a := serve(t, dirA, addrA)
	r := run(t, dirA, env(a, admin), "send", "--thread", "ship", "@shipper deploy it")
	require.Equal(t, 0, r.code, r.stderr)
	var pending []struct{ ID, Tool, Status string }
	require.Eventually(t, func() bool {
		r := run(t, dirA, env(a, admin), "approvals", "list", "--json")
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &pending) == nil && len(pending) == 1
	}, 30*time.Second, 100*time.Millisecond)
	require.Equal(t, "bash", pending[0].Tool)
	require.False(t, ran(dirA), "nothing ran while the approval waits")

	// Replica B sees the same approval.
	dirB, addrB := replica()
	b := serve(t, dirB, addrB)
	r = run(t, dirB, env(b, admin), "approvals", "list", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, pending[0].ID)
	runner, runnerDir := a, dirA
	if killAsker {
		require.NoError(t, a.cmd.Process.Kill())
		<-a.done
		runner, runnerDir = b, dirB
		// B takes the work over when A's lease runs out, and its run waits
		// on the approval A asked for.
		db, err := pgx.Connect(t.Context(), dsn)
		require.NoError(t, err)
		defer db.Close(context.WithoutCancel(t.Context()))
		require.Eventually(t, func() bool {
			var expired, running int
			err := db.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE status = 'expired'), count(*) FILTER (WHERE status = 'running') FROM jobs`).
				Scan(&expired, &running)
			return err == nil && expired == 1 && running == 1
		}, 30*time.Second, 100*time.Millisecond, "B takes the work over")
	}
	r = run(t, dirB, env(b, anaToken), "approvals", "approve", pending[0].ID)
	require.Equal(t, 0, r.code, r.stderr)

	// The run goes on on the replica that runs the work: the command runs
	// in its workspace, and the work item finishes, with one approval
	// asked for.
	require.Eventually(t, func() bool {
		r := run(t, runnerDir, env(runner, admin), "workitems", "list", "--thread", "ship", "--json")
		var list []struct{ Status string }
		return json.Unmarshal([]byte(r.stdout), &list) == nil && len(list) == 1 && list[0].Status == "done"
	}, 30*time.Second, 100*time.Millisecond)
	require.True(t, ran(runnerDir), "the approved command ran on the replica that runs the work")
	require.False(t, ran(dirA) && ran(dirB), "the approved command ran once")
	r = run(t, dirB, env(b, admin), "approvals", "list", "--json", "--all")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 1, strings.Count(r.stdout, `"id"`), "one approval asked for: %s", r.stdout)
	require.Contains(t, r.stdout, `"approved"`)
}
