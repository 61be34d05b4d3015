package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/store"
)

// auditFixture is a server whose store holds 25 audit entries, one a
// minute from t0: every third by bob (the rest by local), even ones
// discards, odd ones replays.
func auditFixture(t *testing.T) http.Handler {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "audit.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l := audit.New(st)
	for i := range 25 {
		l.Now = func() time.Time { return t0.Add(time.Duration(i) * time.Minute) }
		ctx := t.Context()
		if i%3 == 0 {
			ctx = audit.WithActor(ctx, "bob")
		}
		action := audit.ActionReplay
		if i%2 == 0 {
			action = audit.ActionDiscard
		}
		if _, err := l.Append(ctx, audit.Record{Action: action, Params: map[string]any{"reason": "<b>x</b>", "i": i},
			MessageIDs: []string{fmt.Sprint(i + 1)}}); err != nil {
			t.Fatal(err)
		}
	}
	return New(Config{Catalog: st, Audit: st}).Handler()
}

type auditPage struct {
	Entries []struct {
		Seq        int64           `json:"seq"`
		At         string          `json:"at"`
		Actor      string          `json:"actor"`
		Action     string          `json:"action"`
		Params     json.RawMessage `json:"params"`
		MessageIDs []string        `json:"message_ids"`
		Outcome    string          `json:"outcome"`
		PrevHash   string          `json:"prev_hash"`
		Hash       string          `json:"hash"`
	} `json:"entries"`
	NextCursor *string `json:"next_cursor"`
}

func getAudit(t *testing.T, h http.Handler, target string) (int, auditPage, string) {
	t.Helper()
	res, body := do(t, h, httptest.NewRequestWithContext(t.Context(), "GET", target, nil))
	var p auditPage
	if res.StatusCode == http.StatusOK {
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatalf("%s: %v: %s", target, err, body)
		}
	}
	return res.StatusCode, p, body
}

func TestListAudit(t *testing.T) {
	h := auditFixture(t)

	code, p, body := getAudit(t, h, "/api/v1/audit?limit=2")
	if code != http.StatusOK || len(p.Entries) != 2 || p.NextCursor == nil {
		t.Fatalf("status %d: %s", code, body)
	}
	var keys map[string]json.RawMessage
	json.Unmarshal([]byte(body), &keys)
	var entry []map[string]json.RawMessage
	json.Unmarshal(keys["entries"], &entry)
	want := []string{"action", "actor", "at", "hash", "message_ids", "namespace", "outcome", "params", "prev_hash", "seq"}
	var got []string
	for k := range entry[0] {
		got = append(got, k)
	}
	if slices.Sort(got); !slices.Equal(got, want) {
		t.Fatalf("entry keys %v, want %v", got, want)
	}
	e := p.Entries[0]
	if e.Seq != 25 || e.At != "2026-11-22T11:06:07.123Z" || e.Actor != "bob" || e.Action != audit.ActionDiscard ||
		!slices.Equal(e.MessageIDs, []string{"25"}) || e.Outcome != "succeeded" || len(e.Hash) != 64 || e.PrevHash != p.Entries[1].Hash {
		t.Fatalf("newest entry %+v", e)
	}
	if string(e.Params) != `{"i":24,"reason":"\u003cb\u003ex\u003c/b\u003e"}` {
		t.Fatalf("params %s", e.Params)
	}

	walk := func(query string) []int64 {
		var seqs []int64
		cursor := ""
		for range 100 {
			u := "/api/v1/audit?limit=3&" + query
			if cursor != "" {
				u += "&cursor=" + url.QueryEscape(cursor)
			}
			code, p, body := getAudit(t, h, u)
			if code != http.StatusOK {
				t.Fatalf("%s: %d %s", u, code, body)
			}
			for _, e := range p.Entries {
				seqs = append(seqs, e.Seq)
			}
			if p.NextCursor == nil {
				return seqs
			}
			cursor = *p.NextCursor
		}
		t.Fatal("no last page")
		return nil
	}
	for _, tt := range []struct {
		query string
		want  []int64
	}{
		{"", []int64{25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}},
		{"actor=bob", []int64{25, 22, 19, 16, 13, 10, 7, 4, 1}},
		{"actor=local&action=replay", []int64{24, 20, 18, 14, 12, 8, 6, 2}},
		{"action=discard&since=2026-11-22T10:52:07.123Z&until=2026-11-22T10:58:07.123Z", []int64{15, 13, 11}},
		{"actor=nobody", nil},
	} {
		if got := walk(tt.query); !slices.Equal(got, tt.want) {
			t.Errorf("%q: seqs %v, want %v", tt.query, got, tt.want)
		}
	}

	for _, tt := range []struct{ query, param string }{
		{"action=replayed", "action"},
		{"since=yesterday", "since"},
		{"since=2026-11-22T10:00:00Z&until=2026-11-22T09:00:00Z", "until"},
		{"limit=0", "limit"},
		{"limit=501", "limit"},
		{"cursor=bogus", "cursor"},
		{"actor=a&actor=b", "actor"},
		{"user=bob", "user"},
		{"actor=bob%00", "actor"},
	} {
		code, _, body := getAudit(t, h, "/api/v1/audit?"+tt.query)
		if code != http.StatusBadRequest || !strings.Contains(body, `"invalid_argument"`) || !strings.Contains(body, `"`+tt.param+`"`) {
			t.Errorf("%q: %d %s; want 400 naming %s", tt.query, code, body, tt.param)
		}
	}
}

func TestListAuditWithoutTrail(t *testing.T) {
	s := New(Config{Catalog: brokenCatalog{}})
	res, body := do(t, s.Handler(), httptest.NewRequestWithContext(t.Context(), "GET", "/api/v1/audit", nil))
	if res.StatusCode != http.StatusNotFound || !strings.Contains(body, "audit trail") {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
}
