package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
	"github.com/dlqdash/dlqdash/store/pgtest"
)

// TestTwoServesShareOnePostgres: two `dlqdash serve` replicas (pod-a, then
// pod-b) on one PostgreSQL database and one namespace, wired as serve
// wires them (the PostgreSQL store is a sharedStore). Only pod-a ingests:
// both say so in GET /api/v1/status, the lease stays at its first term,
// and every dead letter is cataloged exactly once, readable from either.
// When pod-a stops, pod-b takes the namespace over at the next term and
// catalogs what follows, still once each.
func TestTwoServesShareOnePostgres(t *testing.T) {
	emu := emulatortest.Start(t, emulator.Config{TickInterval: emulator.DefaultTickInterval})
	if _, err := emu.Namespace().CreateQueue("orders", broker.DefaultQueueProperties()); err != nil {
		t.Fatal(err)
	}
	emulatortest.FillDLQ(t, emu.Namespace(), "orders", 5, 32, nil)
	db := pgtest.Start(t).Database(t)
	serve := func(id string) *started {
		s := start(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--poll", "200ms",
			"--admin-endpoint", emu.AdminURL(), "--replica-id", id},
			env(envConnectionString, emu.ConnectionString(), envAuditKey, strings.Repeat("k", 32)))
		t.Cleanup(func() {
			s.cancel()
			select {
			case <-s.done:
			case <-time.After(10 * time.Second): // stopped by the test already
			}
		})
		return s
	}
	get := func(s *started, path string, v any) {
		t.Helper()
		res, err := http.Get("http://" + s.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %s: %v", path, b, err)
		}
	}
	ingester := func(s *started) string {
		var st struct {
			Namespaces []struct {
				IngesterReplica *string `json:"ingester_replica"`
			}
		}
		get(s, "/api/v1/status", &st)
		if len(st.Namespaces) != 1 || st.Namespaces[0].IngesterReplica == nil {
			return ""
		}
		return *st.Namespaces[0].IngesterReplica
	}
	listed := func(s *started) int {
		var page struct {
			Messages []json.RawMessage `json:"messages"`
		}
		get(s, "/api/v1/messages?limit=500", &page)
		return len(page.Messages)
	}
	conn, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// rows and distinct are the catalog's message rows and distinct
	// (entity, subqueue, sequence number) among them; holder and term the
	// ingest lease's.
	catalog := func() (rows, distinct int, holder string, term int64) {
		t.Helper()
		if err := conn.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT (entity_id, subqueue, sequence_number)) FROM messages`).
			Scan(&rows, &distinct); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(t.Context(), `SELECT coalesce(holder, ''), term FROM leases WHERE name LIKE 'ingest/%'`).
			Scan(&holder, &term); err != nil {
			t.Fatal(err)
		}
		return
	}

	a := serve("pod-a")
	waitFor(t, "pod-a ingesting the namespace", func() bool { return ingester(a) == "pod-a" && listed(a) == 5 })
	b := serve("pod-b")
	waitFor(t, "pod-b naming pod-a as the ingester", func() bool { return ingester(b) == "pod-a" && listed(b) == 5 })
	emulatortest.FillDLQ(t, emu.Namespace(), "orders", 3, 32, nil)
	waitFor(t, "the new dead letters on both", func() bool { return listed(a) == 8 && listed(b) == 8 })
	// pod-b campaigns every second meanwhile: it never took the lease.
	time.Sleep(1500 * time.Millisecond)
	if rows, distinct, holder, term := catalog(); rows != 8 || distinct != 8 || holder != "pod-a" || term != 1 {
		t.Errorf("with both up: %d message rows (%d distinct), lease held by %q at term %d; want 8, 8, pod-a, 1", rows, distinct, holder, term)
	}
	if ingester(a) != "pod-a" || ingester(b) != "pod-a" {
		t.Errorf("ingester on a %q, on b %q; want pod-a on both", ingester(a), ingester(b))
	}

	a.cancel()
	<-a.done
	waitFor(t, "pod-b taking the namespace over", func() bool { return ingester(b) == "pod-b" })
	emulatortest.FillDLQ(t, emu.Namespace(), "orders", 2, 32, nil)
	waitFor(t, "pod-b cataloging after the takeover", func() bool { return listed(b) == 10 })
	if rows, distinct, holder, term := catalog(); rows != 10 || distinct != 10 || holder != "pod-b" || term != 2 {
		t.Errorf("after the takeover: %d message rows (%d distinct), lease held by %q at term %d; want 10, 10, pod-b, 2", rows, distinct, holder, term)
	}
}
