package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
	"github.com/switchyard/switchyard/integrations/local"
	"github.com/switchyard/switchyard/skills"
	"github.com/switchyard/switchyard/storage/postgres/pgtest"
)

var pg *pgtest.Server

func TestMain(m *testing.M) { pgtest.Main(m, &pg) }

// Two replicas on one database in Socket Mode: one holds Slack's
// connection, the other stands by and is ready all the same; when the
// first stops, the second connects.
func TestSocketModeRunsOnOneReplicaAtATime(t *testing.T) {
	pg.Skip(t)
	dsn := pg.Database(t)
	fake := newSocketSlack(t)
	fake.open.Store(true)
	replica := func() (*running, *syncBuffer) {
		logs := &syncBuffer{}
		return start(t, func(o *daemon.Options) {
			o.Setup.Config.Storage = config.Storage{Driver: config.StoragePostgres, DSN: bot.Secret(dsn), MaxConns: 4}
			o.Setup.Config.Slack = &config.Slack{Mode: config.SlackSocket, AppToken: "xapp-1-test", BotToken: "xoxb-test", APIURL: fake.srv.URL + "/api/"}
			o.APIToken = "shared-token-0123456789"
			o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		}), logs
	}
	joined := func() int {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		return fake.joined
	}
	ready := func(r *running) string {
		_, body := r.do(t, "GET", "/readyz", "")
		var st struct{ Status string }
		require.NoError(t, json.Unmarshal(body, &st))
		return st.Status
	}

	a, aLogs := replica()
	require.Eventually(t, func() bool { return joined() == 1 }, 10*time.Second, 10*time.Millisecond)
	b, bLogs := replica()
	require.Eventually(t, func() bool { return ready(a) == "ready" && ready(b) == "ready" }, 10*time.Second, 10*time.Millisecond,
		"the replica standing by is not down")
	time.Sleep(6 * time.Second) // more than one renewal
	require.Equal(t, 1, joined(), "one connection while a replica holds the lease")
	require.Contains(t, aLogs.String(), "this replica holds Slack's Socket Mode connection")
	require.NotContains(t, bLogs.String(), "this replica holds")

	a.stop()
	require.Eventually(t, func() bool { return joined() == 2 }, 10*time.Second, 10*time.Millisecond, "the other replica takes over")
	require.Contains(t, bLogs.String(), "this replica holds Slack's Socket Mode connection")
	require.Equal(t, "ready", ready(b))
	require.False(t, strings.Contains(bLogs.String(), "xapp-1-test"))
}

// A database that stops answering makes the daemon unready and its intake
// refuse (503), so a load balancer and the senders try elsewhere or later,
// instead of acknowledging what cannot be stored.
func TestUnreachableDatabaseIsNotReadyAndRefusesIntake(t *testing.T) {
	own, err := pgtest.Start()
	require.NoError(t, err)
	t.Cleanup(own.Stop) // stopping twice is harmless
	own.Skip(t)
	dsn := own.Database(t)
	r := start(t, func(o *daemon.Options) {
		o.Setup.Config.Storage = config.Storage{Driver: config.StoragePostgres, DSN: bot.Secret(dsn), MaxConns: 4}
		o.APIToken = "shared-token-0123456789"
	})
	require.Equal(t, 202, r.status(t, "POST", "/api/v1/messages", `{"thread":"t1","text":"@coder hi","id":"before"}`))

	own.Stop()
	code, body := r.do(t, "GET", "/readyz", "")
	require.Equal(t, 503, code, string(body))
	require.Contains(t, string(body), "store unavailable")
	code, body = r.do(t, "POST", "/api/v1/messages", `{"thread":"t1","text":"@coder again","id":"after"}`)
	require.Equal(t, 503, code, string(body))
}

// A routing rule made through one replica routes on the other at once,
// neither restarted nor reloaded: the change is told through the
// database's notifications, and the other replica builds its router again
// (or finds the change at its next look, every 5 s, when it was not yet
// listening).
func TestRuleMadeOnOneReplicaRoutesOnTheOther(t *testing.T) {
	pg.Skip(t)
	dsn := pg.Database(t)
	replica := func() *running {
		return start(t, func(o *daemon.Options) {
			o.Setup.Config.Storage = config.Storage{Driver: config.StoragePostgres, DSN: bot.Secret(dsn), MaxConns: 4}
			o.APIToken = "shared-token-0123456789"
			o.NewRunner = func(daemon.RunnerDeps) (bot.Runner, error) {
				return runnerFunc(func(context.Context, bot.RunRequest, bot.Progress) (bot.RunResult, error) {
					return bot.RunResult{Status: bot.ResultSuccess, Reply: "done"}, nil
				}), nil
			}
		})
	}
	a, b := replica(), replica()
	require.Equal(t, "ops", b.explain(t, "deploy the api").Agent, "the ops agent's keyword, before")

	var made bot.StoredRule
	a.json(t, "POST", "/api/v1/rules", `{"name":"deploys","priority":5,"agent":"coder","match":{"text":"(?i)\\bdeploy\\b"}}`, 201, &made)
	require.Eventually(t, func() bool { return b.explain(t, "deploy the api").Rule == "deploys" }, 15*time.Second, 10*time.Millisecond,
		"the other replica routes by the new rule")

	// And its intake does: a message sent to it goes to the rule's agent.
	code, body := b.do(t, "POST", "/api/v1/messages", `{"thread":"room","text":"deploy the api","id":"m-1"}`)
	require.Equal(t, 202, code, string(body))
	var res local.MessageResponse
	require.NoError(t, json.Unmarshal(body, &res), string(body))
	require.Equal(t, bot.Route{Agent: "coder", Kind: bot.RouteRule, Reason: `rule "deploys" (priority 5, stored:rule_1)`, Rule: "deploys", Origin: "stored:rule_1"}, res.Route)

	var rules admin.Rules
	b.json(t, "GET", "/api/v1/rules", "", 200, &rules)
	require.Equal(t, "stored:rule_1", rules.Rules[0].Origin)

	// Deleted on the other replica: the first one stops routing by it.
	b.json(t, "DELETE", "/api/v1/rules/rule_1", "", 200, nil)
	require.Eventually(t, func() bool { return a.explain(t, "deploy the api").Rule == "" }, 15*time.Second, 10*time.Millisecond)
}

// A skill setting made through the API of one replica is in effect on the
// other without a restart, and so is clearing it. A package installed on
// one replica only is that replica's: the other ignores the settings that
// name it, saying so once, and keeps serving.
func TestSkillSettingMadeOnOneReplicaIsInEffectOnTheOther(t *testing.T) {
	pg.Skip(t)
	dsn := pg.Database(t)
	replica := func() (*running, *syncBuffer) {
		logs := &syncBuffer{}
		return start(t, func(o *daemon.Options) {
			o.Setup.Config.Storage = config.Storage{Driver: config.StoragePostgres, DSN: bot.Secret(dsn), MaxConns: 4}
			o.APIToken = "shared-token-0123456789"
			o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		}), logs
	}
	a, _ := replica()
	b, bLogs := replica()
	effective := func(r *running, skill string) skills.Effective {
		var list []skills.Effective
		r.json(t, "GET", "/api/v1/skills/effective?repo=acme/web&agent=coder", "", 200, &list)
		for _, e := range list {
			if e.Name == skill {
				return e
			}
		}
		return skills.Effective{}
	}
	builtin := skills.Effective{Name: "release-notes", Package: "release-notes", Enabled: true, Scope: "default"}
	require.Equal(t, builtin, effective(b, "release-notes"), "before")

	a.json(t, "POST", "/api/v1/skills/release-notes/disable", `{"scope":"repo:acme/web"}`, 200, nil)
	off := skills.Effective{Name: "release-notes", Package: "release-notes", Scope: "repo:acme/web", Origin: "store"}
	require.Eventually(t, func() bool { return effective(b, "release-notes") == off }, 15*time.Second, 10*time.Millisecond,
		"the other replica has the setting")

	// Cleared on the other replica: the first one inherits again.
	b.json(t, "POST", "/api/v1/skills/release-notes/inherit", `{"scope":"repo:acme/web"}`, 200, nil)
	require.Eventually(t, func() bool { return effective(a, "release-notes") == builtin }, 15*time.Second, 10*time.Millisecond,
		"the first replica no longer has the setting")

	// A package installed and enabled on the first replica only.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(deployChecks), 0o644))
	a.json(t, "POST", "/api/v1/packages", `{"source":`+strconv.Quote(dir)+`,"enable":["repo:acme/web"]}`, 201, nil)
	require.True(t, effective(a, "deploy-check").Enabled)
	unknown := "a stored skill setting names no package or skill installed here"
	require.Eventually(t, func() bool { return strings.Contains(bLogs.String(), unknown) }, 15*time.Second, 10*time.Millisecond,
		"the other replica says it ignores the setting")
	require.Equal(t, skills.Effective{}, effective(b, "deploy-check"), "unknown there")

	// Its later changes still reach the other replica, which says so once.
	a.json(t, "POST", "/api/v1/skills/release-notes/disable", `{"scope":"org:acme"}`, 200, nil)
	require.Eventually(t, func() bool { return effective(b, "release-notes").Scope == "org:acme" }, 15*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, strings.Count(bLogs.String(), unknown), bLogs.String())
	require.Contains(t, bLogs.String(), "name=deploy-checks scope=repo:acme/web")
}

// A person signed in through one replica is signed in on the other, and
// signing out through the other ends the session on both.
func TestAdminUISessionMadeOnOneReplicaIsAcceptedByTheOther(t *testing.T) {
	pg.Skip(t)
	dsn := pg.Database(t)
	replica := func() *running {
		return start(t, func(o *daemon.Options) {
			o.Setup.Config.Storage = config.Storage{Driver: config.StoragePostgres, DSN: bot.Secret(dsn), MaxConns: 4}
			o.APIToken = "shared-token-0123456789"
		})
	}
	a, b := replica(), replica()
	c := newAdminClient(t, a.base)
	resp, _ := c.signIn(url.Values{"token": {a.token}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	c.base = b.base
	resp, page := c.do("GET", "/admin/workitems", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the other replica knows the session")
	kept := *c.cookies["switchyard_session"]
	resp, _ = c.do("POST", "/admin/signout", url.Values{"csrf_token": {c.csrf(page)}}, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	c.base = a.base
	c.cookies["switchyard_session"] = &kept
	resp, _ = c.do("GET", "/admin/workitems", nil, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "signed out on both")
}

// A work item cancelled through one replica while the other runs it stops
// there at once: the lease is far too long for its renewal to be what
// stops it.
func TestCancelMadeOnOneReplicaStopsTheRunOnTheOther(t *testing.T) {
	pg.Skip(t)
	dsn := pg.Database(t)
	ran := make(chan string, 2)
	replica := func(name string) *running {
		return start(t, func(o *daemon.Options) {
			o.Setup.Config.Storage = config.Storage{Driver: config.StoragePostgres, DSN: bot.Secret(dsn), MaxConns: 4}
			o.Setup.Config.Dispatch.Lease = 10 * time.Minute
			o.APIToken = "shared-token-0123456789"
			o.NewRunner = func(daemon.RunnerDeps) (bot.Runner, error) {
				return runnerFunc(func(ctx context.Context, _ bot.RunRequest, _ bot.Progress) (bot.RunResult, error) {
					ran <- name
					<-ctx.Done()
					return bot.RunResult{}, context.Cause(ctx)
				}), nil
			}
		})
	}
	replicas := map[string]*running{"a": replica("a"), "b": replica("b")}
	code, body := replicas["a"].do(t, "POST", "/api/v1/messages", `{"thread":"room","text":"take your time"}`)
	require.Equal(t, 202, code, string(body))
	var res local.MessageResponse
	require.NoError(t, json.Unmarshal(body, &res), string(body))
	other := map[string]string{"a": "b", "b": "a"}[<-ran]

	var wi bot.WorkItem
	replicas[other].json(t, "POST", "/api/v1/workitems/"+res.WorkItemID+"/cancel", `{"reason":"not today"}`, 200, &wi)
	require.Eventually(t, func() bool {
		replicas[other].json(t, "GET", "/api/v1/workitems/"+res.WorkItemID, "", 200, &wi)
		return wi.Status.Finished()
	}, 15*time.Second, 10*time.Millisecond, "the run on the other replica stops")
	require.Equal(t, bot.StatusCancelled, wi.Status)
	require.Equal(t, "cancelled by admin: not today", wi.Error)
	require.Empty(t, ran, "not run again")
}

// A database that goes away (a restart of the server) and comes back: while
// it is away the replica is not ready and refuses intake rather than
// acknowledging what it cannot store; once it is back the replica is ready
// again without a restart of its own, takes new work and runs it, and
// what it acknowledged before runs once.
func TestADatabaseThatComesBackIsServedAgain(t *testing.T) {
	own, err := pgtest.Start()
	require.NoError(t, err)
	t.Cleanup(own.Stop)
	own.Skip(t)
	dsn := own.Database(t)
	var (
		mu   sync.Mutex
		runs = map[string]int{}
	)
	r := start(t, func(o *daemon.Options) {
		o.Setup.Config.Storage = config.Storage{Driver: config.StoragePostgres, DSN: bot.Secret(dsn), MaxConns: 4}
		o.APIToken = "shared-token-0123456789"
		o.NewRunner = func(daemon.RunnerDeps) (bot.Runner, error) {
			return runnerFunc(func(_ context.Context, req bot.RunRequest, _ bot.Progress) (bot.RunResult, error) {
				mu.Lock()
				defer mu.Unlock()
				for _, wi := range req.WorkItems {
					runs[wi.ID]++
				}
				return bot.RunResult{Status: bot.ResultSuccess, Reply: "done"}, nil
			}), nil
		}
	})
	post := func(text string) (int, string) {
		code, body := r.do(t, "POST", "/api/v1/messages", `{"thread":"room-`+text+`","text":"@coder `+text+`"}`)
		var res local.MessageResponse
		if code == 202 {
			require.NoError(t, json.Unmarshal(body, &res), string(body))
		}
		return code, res.WorkItemID
	}
	done := func(id string) bool {
		var wi bot.WorkItem
		r.json(t, "GET", "/api/v1/workitems/"+id, "", 200, &wi)
		return wi.Status == bot.StatusDone
	}
	code, before := post("before")
	require.Equal(t, 202, code)
	require.Eventually(t, func() bool { return done(before) }, 15*time.Second, 10*time.Millisecond)

	own.Down(t)
	code, body := r.do(t, "GET", "/readyz", "")
	require.Equal(t, 503, code, string(body))
	code, _ = post("while-away")
	require.Equal(t, 503, code, "intake refuses what it cannot store")

	own.Up(t)
	require.Eventually(t, func() bool { return r.status(t, "GET", "/readyz", "") == 200 }, 30*time.Second, 20*time.Millisecond,
		"ready again once the database is back")
	code, after := post("after")
	require.Equal(t, 202, code)
	require.Eventually(t, func() bool { return done(after) }, 30*time.Second, 20*time.Millisecond,
		"new work runs once the database is back")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{before: 1, after: 1}, runs, "each acknowledged work item ran once")
}

// Replicas whose clocks disagree by more than a lease still run each work
// item once: a's clock is a minute behind and b's a minute ahead, so by
// b's clock every lease a takes has long run out. Leases keep the
// database's time, so b takes none of a's work while a runs it.
func TestReplicasWhoseClocksDisagreeRunEachWorkItemOnce(t *testing.T) {
	pg.Skip(t)
	dsn := pg.Database(t)
	var (
		mu      sync.Mutex
		runs    = map[string][]string{} // work item → the replicas that ran it
		started = make(chan string, 4)
		release = make(chan struct{})
	)
	replica := func(name string, skew time.Duration) *running {
		return start(t, func(o *daemon.Options) {
			o.Setup.Config.Storage = config.Storage{Driver: config.StoragePostgres, DSN: bot.Secret(dsn), MaxConns: 4}
			o.Setup.Config.Dispatch.Lease = 3 * time.Second
			o.Setup.Config.Workers = 1
			o.APIToken = "shared-token-0123456789"
			o.Clock = func() time.Time { return time.Now().Add(skew) }
			o.NewRunner = func(daemon.RunnerDeps) (bot.Runner, error) {
				return runnerFunc(func(ctx context.Context, req bot.RunRequest, _ bot.Progress) (bot.RunResult, error) {
					mu.Lock()
					for _, wi := range req.WorkItems {
						runs[wi.ID] = append(runs[wi.ID], name)
					}
					mu.Unlock()
					started <- name
					if req.WorkItems[0].Thread == bot.LocalThread("slow") {
						select {
						case <-release:
						case <-ctx.Done():
							return bot.RunResult{}, context.Cause(ctx)
						}
					}
					return bot.RunResult{Status: bot.ResultSuccess, Reply: "done"}, nil
				}), nil
			}
		})
	}
	post := func(r *running, thread string) string {
		code, body := r.do(t, "POST", "/api/v1/messages", `{"thread":"`+thread+`","text":"@coder go"}`)
		require.Equal(t, 202, code, string(body))
		var res local.MessageResponse
		require.NoError(t, json.Unmarshal(body, &res), string(body))
		return res.WorkItemID
	}
	status := func(r *running, id string) bot.WorkStatus {
		var wi bot.WorkItem
		r.json(t, "GET", "/api/v1/workitems/"+id, "", 200, &wi)
		return wi.Status
	}

	a := replica("a", -time.Minute)
	slow := post(a, "slow")
	require.Equal(t, "a", <-started)

	// b's one worker is free and a's is not: b claims the next work item,
	// and looks at a's lease as it does.
	b := replica("b", time.Minute)
	quick := post(b, "quick")
	require.Eventually(t, func() bool { return status(b, quick) == bot.StatusDone }, 15*time.Second, 10*time.Millisecond)
	require.Equal(t, bot.StatusRunning, status(b, slow), "a still runs it")

	close(release)
	require.Eventually(t, func() bool { return status(a, slow) == bot.StatusDone }, 15*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string][]string{slow: {"a"}, quick: {"b"}}, runs, "each work item ran once")
}

// ownRole is a way into the database at dsn that the test can close: a
// role of its own, which goes when the test ends (after the replicas it
// started have stopped).
type ownRole struct {
	t     *testing.T
	admin *pgx.Conn
	name  string
	dsn   string // dsn as the role
}

func newOwnRole(t *testing.T, dsn string) *ownRole {
	t.Helper()
	admin, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	r := &ownRole{t: t, admin: admin, name: "own_" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	r.exec("CREATE ROLE " + r.name + " LOGIN SUPERUSER PASSWORD 'own-role'")
	t.Cleanup(func() {
		r.exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '" + r.name + "'")
		r.exec("DROP ROLE " + r.name)
		_ = admin.Close(context.Background())
	})
	r.dsn = dsn + " user=" + r.name + " password=own-role"
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.User = url.UserPassword(r.name, "own-role")
		r.dsn = u.String()
	}
	return r
}

func (r *ownRole) exec(sql string) {
	r.t.Helper()
	_, err := r.admin.Exec(context.Background(), sql)
	require.NoError(r.t, err, sql)
}

// shutOut lets the role make no new connection, and cuts those of its
// connections whose last statement matches like (all of them with "%").
func (r *ownRole) shutOut(like string) {
	r.t.Helper()
	r.exec("ALTER ROLE " + r.name + " NOLOGIN")
	r.exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '" + r.name + "' AND query LIKE '" + like + "'")
}

// letIn lets the role connect again.
func (r *ownRole) letIn() { r.t.Helper(); r.exec("ALTER ROLE " + r.name + " LOGIN") }

// A replica cut off from the database (a partition, a server that does
// not come back in time) stops its runs before their leases run out, so
// the replica that takes the work over never runs it beside them.
func TestAReplicaCutOffStopsItsRunsBeforeTheirLeasesRunOut(t *testing.T) {
	pg.Skip(t)
	dsn := pg.Database(t)
	// Replica a connects as a role of its own, which the test shuts out.
	role := newOwnRole(t, dsn)
	dsnA := role.dsn

	var (
		mu      sync.Mutex
		runs    = map[string][]string{} // work item → the replicas that ran it
		active  = map[string]int{}      // work item → runs going on now
		overlap bool
		started = make(chan string, 4)
	)
	replica := func(name, dsn string) *running {
		return start(t, func(o *daemon.Options) {
			o.Setup.Config.Storage = config.Storage{Driver: config.StoragePostgres, DSN: bot.Secret(dsn), MaxConns: 4}
			o.Setup.Config.Dispatch.Lease = 3 * time.Second
			o.APIToken = "shared-token-0123456789"
			o.NewRunner = func(daemon.RunnerDeps) (bot.Runner, error) {
				return runnerFunc(func(ctx context.Context, req bot.RunRequest, _ bot.Progress) (bot.RunResult, error) {
					id := req.WorkItems[0].ID
					mu.Lock()
					runs[id] = append(runs[id], name)
					active[id]++
					overlap = overlap || active[id] > 1
					mu.Unlock()
					defer func() {
						mu.Lock()
						active[id]--
						mu.Unlock()
					}()
					started <- name
					if name == "a" {
						<-ctx.Done() // a holds it until it can no longer
						return bot.RunResult{}, context.Cause(ctx)
					}
					return bot.RunResult{Status: bot.ResultSuccess, Reply: "done"}, nil
				}), nil
			}
		})
	}
	a := replica("a", dsnA)
	code, body := a.do(t, "POST", "/api/v1/messages", `{"thread":"held","text":"@coder go"}`)
	require.Equal(t, 202, code, string(body))
	var res local.MessageResponse
	require.NoError(t, json.Unmarshal(body, &res), string(body))
	require.Equal(t, "a", <-started)
	b := replica("b", dsn)

	// a can no longer reach the database: b takes the work over when a's
	// lease runs out, and a's run has stopped by then.
	role.shutOut("%")
	require.Equal(t, "b", <-started)
	require.Eventually(t, func() bool {
		var wi bot.WorkItem
		b.json(t, "GET", "/api/v1/workitems/"+res.WorkItemID, "", 200, &wi)
		return wi.Status == bot.StatusDone
	}, 15*time.Second, 10*time.Millisecond)
	role.letIn() // a shuts down cleanly
	mu.Lock()
	defer mu.Unlock()
	require.False(t, overlap, "the work item ran on both replicas at once")
	require.Equal(t, map[string][]string{res.WorkItemID: {"a", "b"}}, runs)
}

// A replica that no longer hears the others (its listening connection cut,
// and not made again: the server refuses it new connections) says so in
// /readyz, still 200, and still takes up work another replica took in, by
// polling; once it listens again it is ready.
func TestAReplicaThatDoesNotHearTheOthersIsDegradedAndPolls(t *testing.T) {
	pg.Skip(t)
	dsn := pg.Database(t)
	role := newOwnRole(t, dsn)
	ran := make(chan string, 4)
	release := make(chan struct{})
	replica := func(name, dsn string) *running {
		return start(t, func(o *daemon.Options) {
			o.Setup.Config.Storage = config.Storage{Driver: config.StoragePostgres, DSN: bot.Secret(dsn), MaxConns: 4}
			o.Setup.Config.Workers = 1
			o.APIToken = "shared-token-0123456789"
			o.NewRunner = func(daemon.RunnerDeps) (bot.Runner, error) {
				return runnerFunc(func(ctx context.Context, req bot.RunRequest, _ bot.Progress) (bot.RunResult, error) {
					ran <- name
					if req.WorkItems[0].Thread == bot.LocalThread("busy") {
						select {
						case <-release:
						case <-ctx.Done():
						}
					}
					return bot.RunResult{Status: bot.ResultSuccess, Reply: "done"}, nil
				}), nil
			}
		})
	}
	readiness := func(r *running) (int, string, map[string]string) {
		code, body := r.do(t, "GET", "/readyz", "")
		var st struct {
			Status string
			Down   map[string]string
		}
		require.NoError(t, json.Unmarshal(body, &st), string(body))
		return code, st.Status, st.Down
	}
	post := func(r *running, thread string) {
		code, body := r.do(t, "POST", "/api/v1/messages", `{"thread":"`+thread+`","text":"@coder go"}`)
		require.Equal(t, 202, code, string(body))
	}

	// b's one worker is kept busy, so what b takes in is a's to run.
	b := replica("b", dsn)
	post(b, "busy")
	require.Equal(t, "b", <-ran)
	a := replica("a", role.dsn)
	t.Cleanup(func() { close(release) })
	code, status, _ := readiness(a)
	require.Equal(t, 200, code)
	require.Equal(t, "ready", status)

	role.shutOut("LISTEN %")
	require.Eventually(t, func() bool { _, status, _ := readiness(a); return status == "degraded" }, 15*time.Second, 10*time.Millisecond)
	code, _, down := readiness(a)
	require.Equal(t, 200, code, "the replica serves meanwhile")
	require.Contains(t, down["notifications"], "not hearing the other replicas: ")
	require.Contains(t, down["notifications"], "reach this replica by polling")

	post(b, "later")
	select {
	case name := <-ran:
		require.Equal(t, "a", name, "a polls for the work b took in")
	case <-time.After(15 * time.Second):
		t.Fatal("the replica that does not hear the others never ran the work")
	}

	role.letIn()
	require.Eventually(t, func() bool { _, status, _ := readiness(a); return status == "ready" }, 30*time.Second, 20*time.Millisecond,
		"ready once it listens again")
}

// The database restarts while two replicas take messages and run them,
// and stays away longer than a lease: intake refuses meanwhile and the
// senders try again; afterwards every message has one work item, each
// done, and no work item ran on both replicas at once, though some ran
// through the restart (a run whose lease could not be renewed stopped
// before another took the work over).
func TestADatabaseRestartLongerThanALeaseWhileReplicasWork(t *testing.T) {
	own, err := pgtest.Start()
	require.NoError(t, err)
	t.Cleanup(own.Stop)
	own.Skip(t)
	dsn := own.Database(t)
	var (
		mu      sync.Mutex
		active  = map[string]int{}
		overlap []string
	)
	replica := func() *running {
		return start(t, func(o *daemon.Options) {
			o.Setup.Config.Storage = config.Storage{Driver: config.StoragePostgres, DSN: bot.Secret(dsn), MaxConns: 4}
			o.Setup.Config.Dispatch.Lease = 2 * time.Second
			o.APIToken = "shared-token-0123456789"
			o.NewRunner = func(daemon.RunnerDeps) (bot.Runner, error) {
				return runnerFunc(func(ctx context.Context, req bot.RunRequest, _ bot.Progress) (bot.RunResult, error) {
					id := req.WorkItems[0].ID
					mu.Lock()
					if active[id]++; active[id] > 1 {
						overlap = append(overlap, id)
					}
					mu.Unlock()
					defer func() {
						mu.Lock()
						active[id]--
						mu.Unlock()
					}()
					// The first message of each thread runs through the
					// database's absence, the others are quick.
					took := 300 * time.Millisecond
					if n, _ := strconv.Atoi(strings.TrimPrefix(req.WorkItems[0].Text, "@coder task ")); n < 6 {
						took = 6 * time.Second
					}
					select {
					case <-time.After(took):
						return bot.RunResult{Status: bot.ResultSuccess, Reply: "done"}, nil
					case <-ctx.Done():
						return bot.RunResult{}, context.Cause(ctx)
					}
				}), nil
			}
		})
	}
	reps := []*running{replica(), replica()}

	// Senders: each message until it is acknowledged, as a webhook's
	// sender retries a 503.
	const messages = 30
	acked := make([]string, messages)
	var senders sync.WaitGroup
	for i := range messages {
		senders.Go(func() {
			time.Sleep(time.Duration(i) * 100 * time.Millisecond)
			body := fmt.Sprintf(`{"thread":"room-%d","text":"@coder task %d","id":"m-%d"}`, i%6, i, i)
			for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				code, out := reps[i%2].do(t, "POST", "/api/v1/messages", body)
				if code != 202 {
					continue
				}
				var res local.MessageResponse
				if json.Unmarshal(out, &res) == nil {
					acked[i] = res.WorkItemID
				}
				return
			}
		})
	}
	time.Sleep(time.Second) // some acknowledged, some running
	own.Down(t)
	code, _ := reps[0].do(t, "GET", "/readyz", "")
	require.Equal(t, 503, code, "not ready while the database is away")
	time.Sleep(3 * time.Second) // longer than a lease
	own.Up(t)
	senders.Wait()

	seen := map[string]bool{}
	for i, id := range acked {
		require.NotEmpty(t, id, "message %d never acknowledged", i)
		require.False(t, seen[id], "%s acknowledged for two messages", id)
		seen[id] = true
	}
	for id := range seen {
		require.Eventually(t, func() bool {
			var wi bot.WorkItem
			reps[0].json(t, "GET", "/api/v1/workitems/"+id, "", 200, &wi)
			return wi.Status == bot.StatusDone
		}, 60*time.Second, 50*time.Millisecond, "%s done", id)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, overlap, "work items that ran on both replicas at once")
}

// The replica holding Slack's Socket Mode connection keeps it through a
// moment without the database (its connections cut, none allowed for a
// renewal or so) while the lease it holds lasts, instead of dropping Slack
// at the first renewal that fails.
func TestSocketModeOutlastsAMomentWithoutTheDatabase(t *testing.T) {
	pg.Skip(t)
	dsn := pg.Database(t)
	role := newOwnRole(t, dsn)
	fake := newSocketSlack(t)
	fake.open.Store(true)
	logs := &syncBuffer{}
	start(t, func(o *daemon.Options) {
		o.Setup.Config.Storage = config.Storage{Driver: config.StoragePostgres, DSN: bot.Secret(role.dsn), MaxConns: 4}
		o.Setup.Config.Slack = &config.Slack{Mode: config.SlackSocket, AppToken: "xapp-1-test", BotToken: "xoxb-test", APIURL: fake.srv.URL + "/api/"}
		o.APIToken = "shared-token-0123456789"
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	joined := func() int {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		return fake.joined
	}
	require.Eventually(t, func() bool { return joined() == 1 }, 10*time.Second, 10*time.Millisecond)
	until := func() int64 {
		var n int64
		require.NoError(t, role.admin.QueryRow(t.Context(), "SELECT until FROM leases WHERE name = 'slack-socket-mode'").Scan(&n))
		return n
	}

	role.shutOut("%")
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "renew the Socket Mode lease") }, 15*time.Second, 10*time.Millisecond)
	before := until()
	role.letIn()
	require.Eventually(t, func() bool { return until() > before }, 15*time.Second, 20*time.Millisecond, "the next renewal gets through")
	require.Equal(t, 1, joined(), "Slack's connection was kept")
	require.NotContains(t, logs.String(), "Socket Mode lease lost")
	require.NotContains(t, logs.String(), "not renewed before it runs out")
}
