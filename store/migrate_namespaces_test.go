package store

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// TestMigration0011KeepsTheCatalog: a database written at schema 10 (one
// namespace, entities keyed by path) with an entity, its message, cursor,
// counters, depth sample, group and job is migrated with every row and
// every foreign key intact; its rows are the unnamed namespace until
// AdoptUnnamed names them, and then read on under that name.
func TestMigration0011KeepsTheCatalog(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "v10.db")
	db, err := sql.Open("sqlite", dsn(path, DefaultBusyTimeout, false))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, createMigrationsTable); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:10] {
		if _, err := db.ExecContext(ctx, m.sql); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations VALUES (?, ?, 0)`, m.version, m.name); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC).UnixMilli()
	for _, q := range []string{
		`INSERT INTO entities (id, kind, path, created_at, dead_letter_count, counts_at) VALUES (7, 'queue', 'orders', 1, 1, 1)`,
		`INSERT INTO groups (id, key, reason, description_pattern, present, total, first_seen_at, last_seen_at) VALUES (3, 'g-1', 'SqlTimeout', '', 1, 1, 1, 1)`,
		`INSERT INTO group_entities VALUES (3, 7, 1, 1, 1, 1)`,
		`INSERT INTO messages (id, entity_id, subqueue, state, sequence_number, message_id, dead_letter_reason, delivery_count,
			body_size, group_id, first_seen_at, last_seen_at, enqueued_at) VALUES (11, 7, 1, 0, 5, 'm-5', 'SqlTimeout', 1, 2, 3, 1, 1, 1)`,
		`INSERT INTO bodies VALUES (11, x'7b7d')`,
		`INSERT INTO catalog_counts VALUES (7, 1, 0, 1)`,
		`INSERT INTO cursors (entity_id, subqueue, max_seen, broker_count) VALUES (7, 1, 5, 1)`,
		`INSERT INTO depth_samples VALUES (7, 1, 0, 1, 0, 0)`,
		`INSERT INTO jobs (id, action, status, created_at, created_by) VALUES (2, 'replay', 'completed', 1, 'local')`,
		`INSERT INTO meta VALUES ('ingest.last_success_at', '2026-11-22T09:00:00Z')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	defer s.Close()
	if v, err := s.Version(ctx); err != nil || v != SchemaVersion() {
		t.Fatalf("version %d, %v", v, err)
	}
	rows, err := s.writer.QueryContext(ctx, `PRAGMA foreign_key_check`)
	if err != nil {
		t.Fatal(err)
	}
	if rows.Next() {
		t.Error("a foreign key is broken after the migration")
	}
	rows.Close()
	var fk int
	if err := s.writer.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
		t.Errorf("foreign keys %d, %v after the migration: want them enforced again", fk, err)
	}
	if n, err := s.AdoptUnnamed(ctx, "contoso.servicebus.windows.net"); err != nil || n != 1 {
		t.Fatalf("adopted %d, %v", n, err)
	}
	ns := s.Namespace("contoso.servicebus.windows.net")
	cs, err := ns.Cursors(ctx)
	if err != nil || len(cs) != 1 || cs[0].MaxSeen != 5 || cs[0].Present != 1 {
		t.Errorf("cursors %+v, %v", cs, err)
	}
	recs, _, err := s.ListMessages(ctx, dlq.Filter{Namespace: "contoso.servicebus.windows.net", Entity: "orders"}, 10, "")
	if err != nil || len(recs) != 1 || recs[0].ID != 11 || recs[0].GroupID != "g-1" {
		t.Fatalf("messages %+v, %v", recs, err)
	}
	if last, err := ns.LastSuccess(ctx); err != nil || last == nil || last.UnixMilli() != at {
		t.Errorf("last success %v, %v", last, err)
	}
	j, err := s.Job(ctx, 2)
	if err != nil || j.Namespace != "contoso.servicebus.windows.net" {
		t.Errorf("job %+v, %v: want the adopted namespace", j, err)
	}
	// The same path may now exist in a second namespace.
	if _, err := s.Namespace("other").SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, time.Now()); err != nil {
		t.Fatal(err)
	}
}
