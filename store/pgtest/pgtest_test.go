package pgtest_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dlqdash/dlqdash/store/pgtest"
)

var pg pgtest.Shared

func TestMain(m *testing.M) { os.Exit(pg.Run(m)) }

// Two tests' databases are separate databases on one server.
func TestSharedDatabasesAreFreshAndSeparate(t *testing.T) {
	ctx := t.Context()
	a, b := pg.Database(t), pg.Database(t)
	if a == b {
		t.Fatalf("two databases with one DSN %s", a)
	}
	ca := connect(t, a)
	cb := connect(t, b)
	if _, err := ca.Exec(ctx, "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := cb.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("a table created in one test database is visible in the other")
	}
	var pidA, pidB int
	if err := ca.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pidA); err != nil {
		t.Fatal(err)
	}
	if err := cb.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pidB); err != nil {
		t.Fatal(err)
	}
	if pidA == pidB {
		t.Fatalf("both connections on backend %d", pidA)
	}
	var enc, tz string
	if err := ca.QueryRow(ctx, "SELECT pg_encoding_to_char(encoding), current_setting('TimeZone') FROM pg_database WHERE datname = current_database()").Scan(&enc, &tz); err != nil {
		t.Fatal(err)
	}
	if enc != "UTF8" || tz != "UTC" {
		t.Fatalf("encoding %s, time zone %s: want UTF8 and UTC", enc, tz)
	}
}

// A cluster of its own is gone, process and directory, after Stop.
func TestStartAndStop(t *testing.T) {
	c := pgtest.Start(t)
	dsn := c.Database(t)
	conn := connect(t, dsn)
	var v string
	if err := conn.QueryRow(t.Context(), "SHOW server_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	t.Logf("server_version %s, socket in %s", v, c.SocketDir())
	conn.Close(t.Context())
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.SocketDir(), "data")); !os.IsNotExist(err) {
		t.Fatalf("data directory still there after Stop: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if c, err := pgx.Connect(ctx, dsn); err == nil {
		c.Close(ctx)
		t.Fatal("connected to a stopped cluster")
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
