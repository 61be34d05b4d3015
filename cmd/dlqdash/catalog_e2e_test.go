package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/store/pgtest"
)

// TestServeCatalogsTheEmulator is the catalog end to end with the real
// program: `dlqdash emulator` and `dlqdash serve` against it, the real SDK
// dead-lettering messages, read back through /api/v1 and `dlqdash export`,
// on a SQLite file and on a PostgreSQL database (pgtest: skipped outside CI
// when PostgreSQL is not installed).
func TestServeCatalogsTheEmulator(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testServeCatalogsTheEmulator(t, filepath.Join(t.TempDir(), "catalog.db"), env()) })
	t.Run("postgres", func(t *testing.T) {
		// No file beside a database server holds the audit key: it is given.
		testServeCatalogsTheEmulator(t, pgtest.Start(t).Database(t), env(envAuditKey, strings.Repeat("k", 32)))
	})
}

func testServeCatalogsTheEmulator(t *testing.T, db string, dbEnv func(string) string) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	conn, adminAddr := startTestEmulator(t, "")

	// Dead letters before serve starts, through the real SDK.
	client := testClient(t, conn)
	deadLetter := func(n int, reason string) {
		t.Helper()
		s, err := client.NewSender("queue.1", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		for i := range n {
			body := fmt.Sprintf(`{"order":%d,"note":"<script>alert(%d)</script>"}`, i, i)
			if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(body), MessageID: ptr(fmt.Sprintf("%s-%d", reason, i))}, nil); err != nil {
				t.Fatal(err)
			}
		}
		r, err := client.NewReceiverForQueue("queue.1", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(context.Background())
		deadLetterFrom(t, r, n, reason, "Timeout after 30012 ms")
	}
	deadLetter(5, "SqlTimeout")

	s := start(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--poll", "100ms", "--admin-endpoint", "http://" + adminAddr},
		func(k string) string {
			if k == envConnectionString {
				return conn
			}
			return dbEnv(k)
		})
	defer s.stop(t)

	getJSON := func(path string, v any) {
		t.Helper()
		resp, err := http.Get("http://" + s.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == 404 && strings.Contains(string(b), "in the catalog") {
			return // the entity is not cataloged yet: nothing to decode
		}
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d: %s", path, resp.StatusCode, b)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, b)
		}
	}
	type messages struct {
		Messages []struct {
			ID               string  `json:"id"`
			MessageID        string  `json:"message_id"`
			DeadLetterReason *string `json:"dead_letter_reason"`
			Subqueue         string  `json:"subqueue"`
		} `json:"messages"`
	}
	countMessages := func(q string) int {
		var m messages
		getJSON("/api/v1/messages?"+q, &m)
		return len(m.Messages)
	}
	waitFor(t, "the five dead letters in the API", func() bool { return countMessages("entity=queue.1&subqueue=dead_letter") == 5 })

	// A new dead letter shows up within about a second of polling.
	deadLetter(1, "ValidationFailed")
	waitFor(t, "the new dead letter", func() bool { return countMessages("reason=ValidationFailed") == 1 })

	var status struct {
		Healthy       bool    `json:"healthy"`
		LastSuccessAt *string `json:"last_success_at"`
		Namespace     string  `json:"namespace"`
	}
	getJSON("/api/v1/status", &status)
	if !status.Healthy || status.LastSuccessAt == nil || status.Namespace == "" {
		t.Errorf("status = %+v", status)
	}
	var ents struct {
		Entities []struct {
			Path            string `json:"path"`
			DeadLetterCount int64  `json:"dead_letter_count"`
		} `json:"entities"`
	}
	getJSON("/api/v1/entities", &ents)
	found := false
	for _, e := range ents.Entities {
		if e.Path == "queue.1" {
			found = e.DeadLetterCount == 6
		}
	}
	if !found {
		t.Errorf("entities = %+v, want queue.1 with 6 dead letters", ents)
	}
	var groups struct {
		Groups []struct {
			Reason  string `json:"reason"`
			Pattern string `json:"description_pattern"`
			Count   int64  `json:"count"`
		} `json:"groups"`
	}
	getJSON("/api/v1/groups", &groups)
	if len(groups.Groups) != 2 || groups.Groups[0].Pattern != "Timeout after <n> ms" {
		t.Errorf("groups = %+v", groups)
	}
	if n := countMessages("q=alert"); n != 6 {
		t.Errorf("search for a body word found %d, want 6", n)
	}

	// The overview shows the numbers, and the XSS body never reaches a page unescaped.
	resp, err := http.Get("http://" + s.addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `data-testid="dead-letter-total">6<`) || !strings.Contains(string(page), ">Live<") {
		t.Errorf("overview lacks the live count of 6 dead letters")
	}

	// Export from the same database while serve runs.
	var out, errOut syncBuffer
	if code := run(ctx, []string{"export", "--db", db, "--entity", "queue.1", "--subqueue", "dead_letter"}, dbEnv, &out, &errOut); code != 0 {
		t.Fatalf("export exit %d: %s", code, errOut.String())
	}
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m["body_base64"] == nil {
			t.Errorf("export line %q: %v", sc.Text(), err)
		}
		lines++
	}
	if lines != 6 {
		t.Errorf("export wrote %d lines, want 6", lines)
	}
}

func ptr[T any](v T) *T { return &v }
