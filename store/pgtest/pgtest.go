package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotInstalled reports that no PostgreSQL server binaries were found.
var ErrNotInstalled = errors.New("PostgreSQL is not installed (no initdb and postgres on PATH or under /usr/lib/postgresql/*/bin): install Debian's postgresql package")

// SettingsEnv names the environment variable whose space-separated
// name=value pairs are passed to the postmaster of every cluster, after the
// defaults: settings for a measurement, never needed by a test.
const SettingsEnv = "DLQDASH_PGTEST_SETTINGS"

// port names the socket file (.s.PGSQL.5432) inside the cluster's own
// directory; the cluster listens on no TCP port, so clusters never collide.
const port = 5432

// Cluster is a throwaway PostgreSQL cluster: a data directory in a temporary
// directory and a postmaster that is a child of the test binary, listening
// only on a unix socket in that directory. Trust authentication, superuser
// postgres.
type Cluster struct {
	dir     string // the temporary directory: the socket, data/ and server.log
	dataDir string
	logPath string
	proc    *os.Process
	exited  chan struct{} // closed when the postmaster has exited

	mu      sync.Mutex
	nextDB  int
	stop    sync.Once
	stopErr error
}

// Start starts a cluster of its own for tb, stopped at tb's cleanup. Outside
// CI it skips tb when PostgreSQL is not installed; under CI (CI=true) it
// fails instead. Tests that want one cluster for the whole test binary use
// Shared.
func Start(tb testing.TB) *Cluster {
	tb.Helper()
	c, err := start()
	if err != nil {
		failOrSkip(tb, err)
	}
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Errorf("stop PostgreSQL: %v", err)
		}
	})
	return c
}

func failOrSkip(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrNotInstalled) && os.Getenv("CI") != "true" {
		tb.Skipf("skipping: %v", err)
	}
	tb.Fatalf("start PostgreSQL: %v", err)
}

// SocketDir is the directory holding the cluster's unix socket.
func (c *Cluster) SocketDir() string { return c.dir }

// DSN is a postgres:// URL for database db as the superuser postgres over
// the unix socket.
func (c *Cluster) DSN(db string) string {
	q := url.Values{}
	q.Set("host", c.dir)
	q.Set("port", strconv.Itoa(port))
	q.Set("sslmode", "disable")
	return (&url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/" + db, RawQuery: q.Encode()}).String()
}

// Database creates a fresh, empty database (from template0) for tb, drops it
// at tb's cleanup (terminating what is still connected to it), and returns
// its DSN.
func (c *Cluster) Database(tb testing.TB) string {
	tb.Helper()
	c.mu.Lock()
	c.nextDB++
	name := fmt.Sprintf("t%d_%s", c.nextDB, dbSuffix(tb.Name()))
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.admin(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE template0"); err != nil {
		tb.Fatalf("create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		select {
		case <-c.exited:
			return // stopped already: the database went with the cluster
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.admin(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			tb.Errorf("drop database %s: %v", name, err)
		}
	})
	return c.DSN(name)
}

// dbSuffix keeps a readable, identifier-safe piece of the test's name, so
// that pg_stat_activity shows which test a connection belongs to.
func dbSuffix(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	return b.String()
}

func (c *Cluster) admin(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// Stop stops the postmaster the way pg_ctl stop -m immediate does (SIGQUIT:
// no checkpoint, the cluster is thrown away) and removes the directory.
// Safe to call more than once.
func (c *Cluster) Stop() error {
	c.stop.Do(func() {
		_ = c.proc.Signal(syscall.SIGQUIT)
		select {
		case <-c.exited:
		case <-time.After(15 * time.Second):
			_ = c.proc.Kill()
			<-c.exited
		}
		c.stopErr = os.RemoveAll(c.dir)
	})
	return c.stopErr
}

// start runs initdb and the postmaster. As root it runs both as the
// postgres user (or nobody), because both refuse to run as root.
func start() (*Cluster, error) {
	bin, err := findBinDir()
	if err != nil {
		return nil, err
	}
	cred, err := unprivileged()
	if err != nil {
		return nil, err
	}

	// A short directory: a unix socket's path must fit in about 100 bytes.
	base := os.TempDir()
	if len(base) > 60 {
		base = "/tmp"
	}
	sweep(base, time.Hour)
	dir, err := os.MkdirTemp(base, dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("create cluster directory: %w", err)
	}
	c := &Cluster{dir: dir, dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "server.log"), exited: make(chan struct{})}
	fail := func(err error) (*Cluster, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(fmt.Errorf("hand the cluster directory to uid %d: %w", cred.Uid, err))
		}
	}

	initdb := exec.Command(filepath.Join(bin, "initdb"),
		"-D", c.dataDir, "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C.UTF-8", "--no-sync", "--no-instructions")
	initdb.Env = serverEnv()
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %w: %s", err, lastLines(string(out), 10)))
	}

	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fail(fmt.Errorf("create server log: %w", err))
	}
	defer logFile.Close()

	// The postmaster is the test binary's own child with a parent-death
	// signal, rather than pg_ctl start's daemon: a test binary killed by its
	// -timeout (or a panic in TestMain) takes its clusters with it instead of
	// leaving them running on a shared machine. Go sends Pdeathsig when the
	// thread that started the child exits, so that thread stays locked to a
	// goroutine that lives as long as the postmaster.
	args := []string{"-D", c.dataDir, "-k", dir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=",
		// A throwaway cluster: durability buys nothing.
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "shared_buffers=32MB",
		"-c", "logging_collector=off"}
	// Settings of a measurement (shared_preload_libraries=pg_stat_statements,
	// say), space-separated name=value pairs, after the defaults.
	for _, kv := range strings.Fields(os.Getenv(SettingsEnv)) {
		args = append(args, "-c", kv)
	}
	postgres := exec.Command(filepath.Join(bin, "postgres"), args...)
	postgres.Env = serverEnv()
	postgres.Stdout = logFile
	postgres.Stderr = logFile
	postgres.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		if err := postgres.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = postgres.Wait()
		close(c.exited)
	}()
	if err := <-started; err != nil {
		return fail(fmt.Errorf("start postgres: %w", err))
	}
	c.proc = postgres.Process

	if err := c.waitReady(30 * time.Second); err != nil {
		log, _ := os.ReadFile(c.logPath)
		c.Stop()
		return nil, fmt.Errorf("%w; server log: %s", err, lastLines(string(log), 15))
	}
	return c, nil
}

func (c *Cluster) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, c.DSN("postgres"))
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-c.exited:
			return errors.New("postgres exited during start")
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within %s: %w", limit, err)
		}
	}
}

const dirPrefix = "dlqdash-pg-"

// sweep removes the directories of clusters whose test binary was killed
// (the postmaster died with it, but nothing removed its directory): those
// older than age whose postmaster.pid is gone or names a process that no
// longer exists. A live cluster's directory is never touched.
func sweep(base string, age time.Duration) {
	dirs, _ := filepath.Glob(filepath.Join(base, dirPrefix+"*"))
	for _, dir := range dirs {
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() || time.Since(fi.ModTime()) < age {
			continue
		}
		if pid, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid")); err == nil {
			first, _, _ := strings.Cut(string(pid), "\n")
			if n, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && syscall.Kill(n, 0) != syscall.ESRCH {
				continue
			}
		}
		os.RemoveAll(dir)
	}
}

// findBinDir finds the directory with initdb and postgres: the one of
// initdb on PATH, else Debian's newest /usr/lib/postgresql/N/bin (Debian
// puts only wrappers on PATH).
func findBinDir() (string, error) { return findBinDirIn("/usr/lib/postgresql") }

func findBinDirIn(debianRoot string) (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if p, err = filepath.EvalSymlinks(p); err == nil {
			dir := filepath.Dir(p)
			if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
				return dir, nil
			}
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(debianRoot, "*", "bin"))
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	return "", ErrNotInstalled
}

// unprivileged is the identity to run initdb and postgres as: nil (this
// process's own) unless this process is root, in which case the postgres
// user that Debian's package creates, else nobody.
func unprivileged() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
	}
	return nil, errors.New("running as root, and PostgreSQL refuses to: no postgres or nobody user to run it as")
}

// serverEnv is a small, predictable environment for initdb and postgres:
// the test's locale variables must not change the cluster's.
func serverEnv() []string {
	return []string{"PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8", "TZ=UTC"}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Shared is one cluster for a whole test binary, started by the first test
// that asks for a database and stopped by Run after the last test. The zero
// value is ready to use:
//
//	var pg pgtest.Shared
//
//	func TestMain(m *testing.M) { os.Exit(pg.Run(m)) }
//
//	func TestSomething(t *testing.T) {
//		dsn := pg.Database(t) // a fresh database, dropped after the test
//		...
//	}
type Shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Database returns the DSN of a fresh database on the shared cluster,
// starting the cluster first if no test has yet. It skips or fails tb as
// Start does.
func (s *Shared) Database(tb testing.TB) string {
	tb.Helper()
	return s.Cluster(tb).Database(tb)
}

// Cluster is the shared cluster, started if no test has yet.
func (s *Shared) Cluster(tb testing.TB) *Cluster {
	tb.Helper()
	s.once.Do(func() { s.c, s.err = start() })
	if s.err != nil {
		failOrSkip(tb, s.err)
	}
	return s.c
}

// Run runs the tests and then stops the shared cluster if one started; its
// result is m.Run's, for os.Exit.
func (s *Shared) Run(m *testing.M) int {
	code := m.Run()
	if s.c != nil {
		if err := s.c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop PostgreSQL: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}
