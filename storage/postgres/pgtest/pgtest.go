// Package pgtest gives tests a real PostgreSQL server: one a test binary
// starts itself from the installed server programs (initdb and pg_ctl in a
// temporary directory, on a unix socket, as an unprivileged user when the
// tests run as root), or the one SWITCHYARD_TEST_POSTGRES_DSN names. Each
// test gets a fresh database, made from a template the migrations were
// applied to once.
//
// Where neither is available the tests that need PostgreSQL are skipped
// with a message saying so and how to enable them, and Main prints it
// once: never a silent pass.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/storage/postgres"
)

// EnvDSN names a server the tests use instead of starting one: a DSN whose
// user may create databases.
const EnvDSN = "SWITCHYARD_TEST_POSTGRES_DSN"

// Server is the PostgreSQL server of one test binary.
type Server struct {
	admin    string // DSN of a database to create others from
	template string // the migrated database each test's is a copy of
	prefix   string // of the databases this binary makes
	skip     string // why there is no server, when there is none
	stop     func()
	// down and up stop the server this binary started, as a crash would,
	// and start it again on the same data; nil for one it did not start.
	down, up func() error

	mu sync.Mutex // CREATE DATABASE from one template, one at a time
	n  atomic.Int64
}

// Main runs a test binary's tests with a server, which *pg points at
// while they run, and exits with their result.
func Main(m *testing.M, pg **Server) {
	s, err := Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		os.Exit(1)
	}
	if s.skip != "" {
		fmt.Fprintf(os.Stderr, "PostgreSQL suite skipped: %s\n", s.skip)
	}
	*pg = s
	code := m.Run()
	s.Stop()
	os.Exit(code)
}

// Start starts a server, or connects to the one EnvDSN names, and prepares
// the template database. A machine without PostgreSQL gives a Server whose
// tests skip (Available is false), not an error. A server Start starts
// trades durability for speed (no fsync): its data dies with it.
func Start() (*Server, error) { return start(false) }

// StartDurable is Start with a server that makes each commit durable
// (fsync, synchronous commit), as a production server does: for
// benchmarks set beside a store that syncs its commits.
func StartDurable() (*Server, error) { return start(true) }

func start(durable bool) (*Server, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	s := &Server{prefix: "switchyard_test_" + hex.EncodeToString(b[:]), stop: func() {}}
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		s.admin = dsn
	} else {
		bin, why := findBinaries()
		if bin == "" {
			s.skip = why + "; install PostgreSQL (Debian: apt-get install postgresql) or set " + EnvDSN +
				" to a server where the user may create databases"
			return s, nil
		}
		srv, err := startServer(bin, durable)
		if err != nil {
			return nil, err
		}
		s.admin, s.stop, s.down, s.up = srv.admin, srv.stop, srv.down, srv.up
	}
	s.template = s.prefix + "_template"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.exec(ctx, "CREATE DATABASE "+pgx.Identifier{s.template}.Sanitize()); err != nil {
		s.Stop()
		return nil, fmt.Errorf("create the template database: %w", err)
	}
	if _, err := postgres.Migrate(ctx, s.dsn(s.template)); err != nil {
		s.Stop()
		return nil, fmt.Errorf("migrate the template database: %w", err)
	}
	return s, nil
}

// Available reports whether there is a server; Skip says why not.
func (s *Server) Available() bool { return s.skip == "" }

// Skip skips t when there is no server, saying why.
func (s *Server) Skip(t testing.TB) {
	t.Helper()
	switch {
	case s == nil:
		t.Skip("PostgreSQL suite skipped: pgtest.Main did not run")
	case s.skip != "":
		t.Skip("PostgreSQL suite skipped: " + s.skip)
	}
}

// Database makes a fresh, migrated database for t and returns its DSN.
func (s *Server) Database(t testing.TB) string {
	t.Helper()
	s.Skip(t)
	dsn, err := s.NewDatabase(context.Background())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// NewDatabase makes a fresh, migrated database and returns its DSN.
func (s *Server) NewDatabase(ctx context.Context) (string, error) {
	name := s.prefix + "_" + strconv.FormatInt(s.n.Add(1), 10)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{s.template}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return s.dsn(name), nil
}

// EmptyDatabase makes a fresh database without the schema and returns its
// DSN: for tests of what migrating it does.
func (s *Server) EmptyDatabase(t testing.TB) string {
	t.Helper()
	s.Skip(t)
	name := s.prefix + "_" + strconv.FormatInt(s.n.Add(1), 10)
	if err := s.exec(context.Background(), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	return s.dsn(name)
}

// Stop drops the databases this binary made on a server it did not start,
// and stops one it started.
func (s *Server) Stop() {
	if s.admin != "" && os.Getenv(EnvDSN) != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, s.admin); err == nil {
			rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE starts_with(datname, $1)", s.prefix)
			if err == nil {
				names, _ := pgx.CollectRows(rows, pgx.RowTo[string])
				for _, n := range names {
					_, _ = conn.Exec(ctx, "DROP DATABASE "+pgx.Identifier{n}.Sanitize()+" WITH (FORCE)")
				}
			}
			_ = conn.Close(ctx)
		}
	}
	s.stop()
}

// Down stops a server the tests started, as a restart of the database
// takes it away: every connection is cut, and what it acknowledged is kept
// for Up.
func (s *Server) Down(t testing.TB) {
	t.Helper()
	s.Skip(t)
	if s.down == nil {
		t.Skip("PostgreSQL is the server " + EnvDSN + " names: the tests cannot stop it")
	}
	if err := s.down(); err != nil {
		t.Fatalf("pgtest: stop the server: %v", err)
	}
}

// Up starts again a server Down stopped, on its data and address.
func (s *Server) Up(t testing.TB) {
	t.Helper()
	if err := s.up(); err != nil {
		t.Fatalf("pgtest: start the server again: %v", err)
	}
}

func (s *Server) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.admin)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// dsn is the admin DSN pointed at database name.
func (s *Server) dsn(name string) string {
	if u, err := url.Parse(s.admin); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + name
		return u.String()
	}
	return s.admin + " dbname=" + name
}

// findBinaries returns the directory of initdb, pg_ctl and postgres: on
// PATH, or Debian's /usr/lib/postgresql/<version>/bin, the newest.
func findBinaries() (dir, why string) {
	has := func(d string) bool {
		for _, p := range []string{"initdb", "pg_ctl", "postgres"} {
			if fi, err := os.Stat(filepath.Join(d, p)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && has(filepath.Dir(real)) {
			return filepath.Dir(real), ""
		}
		if has(filepath.Dir(p)) {
			return filepath.Dir(p), ""
		}
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(versions, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range versions {
		if has(d) {
			return d, ""
		}
	}
	return "", "no PostgreSQL server programs found (initdb, pg_ctl and postgres on PATH or in /usr/lib/postgresql/<version>/bin)"
}

// started is a server startServer started: its admin DSN, how to stop it
// for good, and how to stop it and start it again on its data.
type started struct {
	admin    string
	stop     func()
	down, up func() error
}

// startServer initialises a cluster in a temporary directory and starts it
// on a unix socket there. PostgreSQL refuses to run as root: then the
// directory belongs to nobody, and the programs run as nobody. The
// settings trade durability for speed: a test server's data dies with it.
func startServer(bin string, durable bool) (*started, error) {
	dir, err := os.MkdirTemp("", "switchyard-pg-")
	if err != nil {
		return nil, err
	}
	as, err := runAs(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	data := filepath.Join(dir, "data")
	run := func(name string, args ...string) error {
		cmd := as(filepath.Join(bin, name), args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v\n%s", name, err, out)
		}
		return nil
	}
	if err := run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	const port = "5432"
	flags := []string{"-k", dir, "-p", port, "-c", "listen_addresses=", "-c", "max_connections=300", "-c", "shared_buffers=64MB"}
	if !durable {
		flags = append(flags, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	opts := strings.Join(flags, " ")
	up := func() error {
		if err := run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "start"); err != nil {
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			return fmt.Errorf("%w\n%s", err, log)
		}
		return nil
	}
	if err := up(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// A server that is not durable loses the commits it has not written
	// when it stops at once: down stops it as a restart does, cutting every
	// connection, with what it acknowledged kept.
	down := func() error { return run("pg_ctl", "-D", data, "-m", "fast", "-w", "stop") }
	return &started{
		admin: fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres sslmode=disable", dir, port),
		stop: func() {
			_ = run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
			os.RemoveAll(dir)
		},
		down: down,
		up:   up,
	}, nil
}

// runAs returns how to run the server programs: as they are, or as nobody
// when this process is root, after giving dir to nobody.
func runAs(dir string) (func(name string, args ...string) *exec.Cmd, error) {
	if os.Geteuid() != 0 {
		return exec.Command, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, errors.New("the tests run as root and PostgreSQL refuses root, but there is no user nobody to run it as")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return nil, errors.New("the tests run as root and PostgreSQL refuses root, but setpriv (util-linux) is not installed to run it as nobody")
	}
	return func(name string, args ...string) *exec.Cmd {
		full := append([]string{"--reuid=" + u.Uid, "--regid=" + u.Gid, "--clear-groups", "--", name}, args...)
		cmd := exec.Command(setpriv, full...)
		cmd.Dir = dir
		return cmd
	}, nil
}
