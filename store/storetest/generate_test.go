package storetest

import (
	"path/filepath"
	"testing"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// TestGenerateIsConsistent generates a small catalog and checks that what
// the ingest keeps as counters agrees with the messages: present counts per
// entity, subqueue and state; failure groups' present and total counts, in
// all and per entity; the deleted entity's messages all gone; every
// generated entity listed with its status; and the search index holding
// every message.
func TestGenerateIsConsistent(t *testing.T) {
	const n = 3000
	path := filepath.Join(t.TempDir(), "catalog.db")
	s, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := Generate(t.Context(), path, n); err != nil {
		t.Fatal(err)
	}
	db, err := OpenSQL(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	one := func(q string) int64 {
		t.Helper()
		var v int64
		if err := db.QueryRowContext(t.Context(), q).Scan(&v); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return v
	}
	if got := one(`SELECT count(*) FROM messages`); got != n {
		t.Errorf("%d messages, want %d", got, n)
	}
	if got := one(`SELECT count(*) FROM messages_fts`); got != n {
		t.Errorf("%d search rows, want %d", got, n)
	}
	if got := one(`SELECT count(*) FROM bodies`); got != n {
		t.Errorf("%d bodies, want %d", got, n)
	}
	for what, q := range map[string]string{
		"present counts": `SELECT count(*) FROM (
			SELECT entity_id, subqueue, state, count(*) AS n FROM messages WHERE gone_at IS NULL GROUP BY 1, 2, 3) m
			FULL JOIN (SELECT * FROM catalog_counts WHERE present != 0) c USING (entity_id, subqueue, state)
			WHERE m.n IS NOT c.present`,
		"group counts": `SELECT count(*) FROM groups g WHERE
			present != (SELECT count(*) FROM messages m WHERE m.group_id = g.id AND m.gone_at IS NULL) OR
			total != (SELECT count(*) FROM messages m WHERE m.group_id = g.id)`,
		"group counts per entity": `SELECT count(*) FROM group_entities ge WHERE
			present != (SELECT count(*) FROM messages m WHERE m.group_id = ge.group_id AND m.entity_id = ge.entity_id AND m.gone_at IS NULL) OR
			total != (SELECT count(*) FROM messages m WHERE m.group_id = ge.group_id AND m.entity_id = ge.entity_id)`,
		"dead letters without a group":    `SELECT count(*) FROM messages WHERE subqueue != 0 AND group_id IS NULL`,
		"main-entity messages in a group": `SELECT count(*) FROM messages WHERE subqueue = 0 AND group_id IS NOT NULL`,
		"present messages of the deleted entity": `SELECT count(*) FROM messages m JOIN entities e ON e.id = m.entity_id
			WHERE e.path = '` + DeletedEntity + `' AND m.gone_at IS NULL`,
	} {
		if got := one(q); got != 0 {
			t.Errorf("%s: %d disagree", what, got)
		}
	}
	if got := one(`SELECT count(*) FROM messages WHERE gone_at IS NOT NULL`); got == 0 || got == n {
		t.Errorf("%d gone messages: want some, not all", got)
	}
	if got := one(`SELECT count(*) FROM messages WHERE replay_count > 0`); got == 0 {
		t.Error("no replayed copies")
	}

	s, err = store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	es, err := s.ListEntities(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != len(genEntities) {
		t.Errorf("%d entities, want %d", len(es), len(genEntities))
	}
	for _, e := range es {
		switch {
		case e.Path == DeletedEntity:
			if e.DeletedAt == nil || e.Counts != (dlq.Counts{}) {
				t.Errorf("%s = %+v, want deleted with no counts", e.Path, e)
			}
		case e.DeletedAt != nil || e.CountsAt == nil:
			t.Errorf("%s = %+v, want listed and not deleted", e.Path, e)
		case e.Path == "shipping-labels" && e.Status != "SendDisabled", e.Path != "shipping-labels" && e.Status != "Active":
			t.Errorf("%s: status %q", e.Path, e.Status)
		case e.Path == "payments/Subscriptions/fraud" && (e.Kind != dlq.KindSubscription || e.Topic != "payments"):
			t.Errorf("%s = %+v", e.Path, e)
		}
	}
	// The indexes dropped for the load are back.
	if got := one(`SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'messages' AND sql IS NOT NULL`); got == 0 {
		t.Error("the message indexes were not recreated")
	}
}
