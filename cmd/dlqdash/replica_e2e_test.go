package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
)

// TestServeStatusNamesTheReplica: `dlqdash serve --replica-id` on SQLite is
// one replica alone that ingests its namespace: GET /api/v1/status says so
// (replica.id, and the namespace's ingester_replica), and every metric
// carries the replica label, dlqdash_namespace_ingesting being 1.
func TestServeStatusNamesTheReplica(t *testing.T) {
	emu := emulatortest.Start(t, emulator.Config{TickInterval: emulator.DefaultTickInterval})
	if _, err := emu.Namespace().CreateQueue("orders", broker.DefaultQueueProperties()); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "catalog.db")
	s := start(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--poll", "200ms", "--admin-endpoint", emu.AdminURL(), "--replica-id", "pod-a"},
		env(envConnectionString, emu.ConnectionString()))
	t.Cleanup(func() { s.cancel(); <-s.done })

	get := func(path string) string {
		t.Helper()
		res, err := http.Get("http://" + s.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	type statusBody struct {
		Healthy    bool `json:"healthy"`
		Replica    struct{ ID string }
		Namespaces []struct {
			Name            string  `json:"name"`
			IngesterReplica *string `json:"ingester_replica"`
		}
	}
	var st statusBody
	waitFor(t, "a healthy status", func() bool {
		st = statusBody{}
		if err := json.Unmarshal([]byte(get("/api/v1/status")), &st); err != nil {
			t.Fatal(err)
		}
		return st.Healthy
	})
	if st.Replica.ID != "pod-a" || len(st.Namespaces) != 1 || st.Namespaces[0].IngesterReplica == nil || *st.Namespaces[0].IngesterReplica != "pod-a" {
		t.Errorf("status %+v: want replica pod-a ingesting its one namespace", st)
	}
	ns := st.Namespaces[0].Name
	m := get("/metrics")
	if want := `dlqdash_namespace_ingesting{namespace="` + ns + `",replica="pod-a"} 1`; !strings.Contains(m, want) {
		t.Errorf("/metrics lacks %s", want)
	}
	for line := range strings.Lines(m) {
		if strings.HasPrefix(line, "dlqdash_") && !strings.Contains(line, `replica="pod-a"`) {
			t.Errorf("a series without the replica label: %s", line)
			break
		}
	}
}
