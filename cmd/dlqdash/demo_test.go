package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// TestDemoTwoNamespaces runs `dlqdash demo` over the catalog of an earlier
// demo (one namespace named "demo"): it catalogs both of today's
// namespaces, prod-eu and prod-us, each healthy in the status with its own
// entities and dead letters; the earlier rows carry on as prod-eu's, so no
// entity is left in a namespace nothing reads.
func TestDemoTwoNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	db := filepath.Join(t.TempDir(), "demo.db")
	at := time.Now().Add(-time.Hour).UTC()
	st, err := store.Open(t.Context(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	earlier := st.Namespace(legacyDemoNamespace)
	if _, err := earlier.SyncEntities(t.Context(), []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue, Counts: dlq.Counts{DeadLetter: 1}}}, at); err != nil {
		t.Fatal(err)
	}
	reason := "FromAnEarlierDemo"
	if _, err := earlier.ApplyPage(t.Context(), dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Through: math.MaxInt64, SeenAt: at,
		Messages: []dlq.Message{{SequenceNumber: 1 << 40, State: dlq.StateActive, MessageID: "earlier-1", EnqueuedAt: &at, DeadLetterReason: &reason}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	s := start(t, []string{"demo", "--addr", "127.0.0.1:0", "--db", db, "--poll", "200ms"}, env())
	defer s.stop(t)
	api := func(path string, out any) {
		t.Helper()
		if code := callAPI(t, s.addr, "GET", path, nil, out); code != 200 {
			t.Fatalf("GET %s: %d", path, code)
		}
	}
	type nsStatus struct {
		Name    string  `json:"name"`
		Healthy bool    `json:"healthy"`
		Error   *string `json:"error"`
	}
	var status struct {
		Healthy    bool       `json:"healthy"`
		Namespaces []nsStatus `json:"namespaces"`
	}
	waitForWithin(t, 30*time.Second, "both demo namespaces healthy", func() bool {
		api("/api/v1/status", &status)
		return status.Healthy && len(status.Namespaces) == 2 && status.Namespaces[0].Healthy && status.Namespaces[1].Healthy
	})
	if status.Namespaces[0].Name != "prod-eu" || status.Namespaces[1].Name != "prod-us" {
		t.Errorf("status namespaces %+v, want prod-eu and prod-us", status.Namespaces)
	}
	// The overview shows each namespace's health side by side.
	waitFor(t, "the overview showing both namespaces healthy", func() bool {
		_, home := get(t, "http://"+s.addr+"/")
		return strings.Contains(home, `data-namespace="prod-eu" data-healthy="true"`) &&
			strings.Contains(home, `data-namespace="prod-us" data-healthy="true"`)
	})
	type message struct {
		Namespace        string  `json:"namespace"`
		Entity           string  `json:"entity"`
		MessageID        string  `json:"message_id"`
		DeadLetterReason *string `json:"dead_letter_reason"`
	}
	for _, ns := range []string{"prod-eu", "prod-us"} {
		var list struct{ Messages []message }
		// The first dead letters come with the burst, which both namespaces'
		// traffic sends at once: slow under -race on a loaded machine.
		waitForWithin(t, time.Minute, "dead letters of "+ns, func() bool {
			api("/api/v1/messages?subqueue=dead_letter&limit=50&namespace="+ns, &list)
			return len(list.Messages) > 0
		})
		for _, m := range list.Messages {
			if m.Namespace != ns {
				t.Errorf("%s's list holds %s/%s", ns, m.Namespace, m.Entity)
			}
		}
	}
	var ents struct {
		Entities []struct{ Namespace, Path string }
	}
	api("/api/v1/entities", &ents)
	per := map[string][]string{}
	for _, e := range ents.Entities {
		per[e.Namespace] = append(per[e.Namespace], e.Path)
	}
	if len(per) != 2 || strings.Join(per["prod-eu"], ",") != strings.Join(per["prod-us"], ",") || len(per["prod-eu"]) < 8 {
		t.Errorf("entities by namespace %v: want the demo's entities in prod-eu and in prod-us and nowhere else", per)
	}
	var old struct{ Messages []message }
	api("/api/v1/messages?namespace=demo&include_gone=true", &old)
	if len(old.Messages) != 0 {
		t.Errorf("%d messages left in the earlier demo's namespace", len(old.Messages))
	}
	if !strings.Contains(s.stderr.String(), `"msg":"catalog adopted the earlier demo's namespace","from":"demo","namespace":"prod-eu","entities":1`) {
		t.Errorf("no adoption logged:\n%.3000s", s.stderr.String())
	}
	var lines int
	for line := range strings.Lines(s.stderr.String()) {
		var rec struct{ Msg, Namespace string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "demo namespace ready" {
			lines++
		}
	}
	if lines != 2 {
		t.Errorf("%d 'demo namespace ready' lines, want one per namespace", lines)
	}
}
