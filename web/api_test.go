package web

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

func ptr[T any](v T) *T { return &v }

var t0 = time.Date(2026, 11, 22, 10, 42, 7, 123_000_000, time.UTC)

// apiFixture is a server on a real store filled with known messages.
type apiFixture struct {
	h    http.Handler
	st   *store.Store
	ids  []int64
	recs []dlq.Record
	logs *bytes.Buffer
}

const xssReason = `<script>alert("x")</script>`

func newAPIFixture(t *testing.T) *apiFixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "api.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	deleted := t0.Add(-time.Hour)
	storetest.AddEntities(t, path,
		storetest.Entity{Path: "orders", Counts: dlq.Counts{Active: 3, DeadLetter: 4, TransferDeadLetter: 1, Scheduled: 2}},
		storetest.Entity{Path: "payments", Kind: dlq.KindTopic},
		storetest.Entity{Path: "payments/Subscriptions/audit", Status: "ReceiveDisabled"},
		storetest.Entity{Path: "retired", DeletedAt: &deleted},
	)
	ttl := 90 * time.Second
	var recs []dlq.Record
	for i := range 30 {
		r := dlq.Record{
			Entity:   []string{"orders", "payments/Subscriptions/audit"}[i%2],
			SubQueue: dlq.SubQueueDeadLetter,
			Message: dlq.Message{
				SequenceNumber: int64(100 + i), State: dlq.StateActive, MessageID: fmt.Sprintf("m-%02d", i),
				DeliveryCount: uint32(i % 5), EnqueuedAt: ptr(t0.Add(time.Duration(i) * time.Minute)),
				DeadLetterReason:           ptr([]string{"SqlTimeout", "ValidationFailed", xssReason}[i%3]),
				DeadLetterErrorDescription: ptr(fmt.Sprintf("timed out after %d ms", 1000+i)),
				ApplicationProperties:      dlq.EncodeProperties(map[string]any{"tenant": fmt.Sprintf("t%d", i%4), "n": int64(i), "big": uint64(1<<64 - 1)}),
				ContentType:                ptr("application/json"),
				Body:                       []byte(fmt.Sprintf(`{"order":%d,"word":"%s"}`, i, []string{"apple", "banana"}[i%2])),
			},
			FirstSeenAt: t0.Add(time.Hour), LastSeenAt: t0.Add(2 * time.Hour),
		}
		switch i {
		case 3:
			r.SubQueue, r.State = dlq.SubQueueMain, dlq.StateDeferred
			r.DeadLetterReason, r.DeadLetterErrorDescription = nil, nil
		case 4:
			r.SubQueue, r.State = dlq.SubQueueMain, dlq.StateScheduled
			r.DeadLetterReason, r.DeadLetterErrorDescription = nil, nil
			r.ScheduledEnqueueAt = ptr(t0.Add(24 * time.Hour))
		case 5:
			r.SubQueue = dlq.SubQueueTransferDeadLetter
		case 6:
			r.GoneAt = ptr(t0.Add(3 * time.Hour))
		case 7:
			r.Body = []byte(`<html><script>alert(1)</script></html>`)
			r.ContentType = ptr("text/html")
		case 8:
			r.Body = []byte{0xff, 0x00, 0xfe}
			r.ContentType = nil
		case 9:
			r.TimeToLive = &ttl
			r.CorrelationID, r.Subject, r.To = ptr("corr"), ptr("OrderCreated"), ptr("elsewhere")
		case 10:
			r.EnqueuedAt = nil
		}
		recs = append(recs, r)
	}
	ids := storetest.Insert(t, path, recs...)
	for i := range recs {
		recs[i].ID = ids[i]
	}
	logs := &bytes.Buffer{}
	s := New(Config{Logger: slog.New(slog.NewTextHandler(logs, nil)), Catalog: st, Mode: "serve", Namespace: "contoso.servicebus.windows.net"})
	return &apiFixture{h: s.Handler(), st: st, ids: ids, recs: recs, logs: logs}
}

// get does a GET and decodes the JSON answer into a generic value.
func (fx *apiFixture) get(t *testing.T, target string) (*http.Response, map[string]any, string) {
	t.Helper()
	res, body := do(t, fx.h, httptest.NewRequestWithContext(t.Context(), "GET", target, nil))
	var v map[string]any
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		d := json.NewDecoder(strings.NewReader(body))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%s: invalid JSON %q: %v", target, body, err)
		}
	}
	return res, v, body
}

func messageIDs(t *testing.T, v map[string]any) []string {
	t.Helper()
	var ids []string
	for _, m := range v["messages"].([]any) {
		ids = append(ids, m.(map[string]any)["id"].(string))
	}
	return ids
}

// walk follows next_cursor through every page of target.
func (fx *apiFixture) walk(t *testing.T, target string) []string {
	t.Helper()
	var all []string
	seen := map[string]bool{}
	next := ""
	for range 1000 {
		u := target
		if next != "" {
			u += "&cursor=" + url.QueryEscape(next)
		}
		res, v, body := fx.get(t, u)
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d %s", u, res.StatusCode, body)
		}
		for _, id := range messageIDs(t, v) {
			if seen[id] {
				t.Fatalf("%s: message %s on two pages", target, id)
			}
			seen[id] = true
			all = append(all, id)
		}
		if v["next_cursor"] == nil {
			return all
		}
		next = v["next_cursor"].(string)
	}
	t.Fatal("pagination does not end")
	return nil
}

// storeIDs is what the store itself lists for f: the API must answer the
// same for the parameters that mean f.
func (fx *apiFixture) storeIDs(t *testing.T, f dlq.Filter) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for {
		recs, next, err := fx.st.ListMessages(t.Context(), f, 500, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			ids = append(ids, strconv.FormatInt(r.ID, 10))
		}
		if next == "" {
			return ids
		}
		cursor = next
	}
}

func TestAPIMessagesFilters(t *testing.T) {
	fx := newAPIFixture(t)
	since, until := t0.Add(5*time.Minute), t0.Add(20*time.Minute)
	g, _ := dlq.GroupOf(&fx.recs[0].Message, dlq.SubQueueDeadLetter)
	tests := []struct {
		query string
		f     dlq.Filter
		n     int // expected count, -1 to skip
	}{
		{"", dlq.Filter{}, 29},
		{"include_gone=true", dlq.Filter{IncludeGone: true}, 30},
		{"include_gone=1", dlq.Filter{IncludeGone: true}, 30},
		{"include_gone=0", dlq.Filter{}, 29},
		{"entity=orders", dlq.Filter{Entity: "orders"}, 14},
		{"entity=payments%2FSubscriptions%2Faudit", dlq.Filter{Entity: "payments/Subscriptions/audit"}, 15},
		{"reason=NoSuchReason", dlq.Filter{Reason: "NoSuchReason"}, 0},
		{"subqueue=main", dlq.Filter{SubQueue: dlq.SubQueueMain}, 2},
		{"subqueue=transfer_dead_letter", dlq.Filter{SubQueue: dlq.SubQueueTransferDeadLetter}, 1},
		{"subqueue=dead_letter", dlq.Filter{SubQueue: dlq.SubQueueDeadLetter}, 26},
		{"state=deferred", dlq.Filter{State: dlq.StateDeferred}, 1},
		{"state=scheduled", dlq.Filter{State: dlq.StateScheduled}, 1},
		{"state=active", dlq.Filter{State: dlq.StateActive}, 27},
		{"reason=SqlTimeout", dlq.Filter{Reason: "SqlTimeout"}, -1},
		{"reason=" + url.QueryEscape(xssReason), dlq.Filter{Reason: xssReason}, -1},
		{"group=" + g.ID, dlq.Filter{Group: g.ID}, -1},
		{"q=banana", dlq.Filter{Query: "banana"}, -1},
		{"q=" + url.QueryEscape("apple timed"), dlq.Filter{Query: "apple timed"}, -1},
		{"property=tenant%3Dt1", dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "t1"}}}, -1},
		{"property=tenant%3Dt1&property=n%3D5", dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "t1"}, {Key: "n", Value: "5"}}}, 1},
		{"property=big%3D18446744073709551615", dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "big", Value: "18446744073709551615"}}}, 29},
		{"property=big%3D18446744073709551616", dlq.Filter{Properties: []dlq.PropertyMatch{{Key: "big", Value: "18446744073709551616"}}}, 0},
		{"since=" + since.Format(time.RFC3339Nano), dlq.Filter{Since: &since}, -1},
		{"until=" + until.Format(time.RFC3339), dlq.Filter{Until: &until}, -1},
		{"since=2026-11-22T11:47:07%2B01:00&until=" + until.Format(time.RFC3339), dlq.Filter{Since: &since, Until: &until}, 13},
		{"entity=orders&subqueue=dead_letter&state=active&reason=SqlTimeout&q=apple&property=tenant%3Dt0&include_gone=true",
			dlq.Filter{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, State: dlq.StateActive, Reason: "SqlTimeout", Query: "apple",
				Properties: []dlq.PropertyMatch{{Key: "tenant", Value: "t0"}}, IncludeGone: true}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			want := fx.storeIDs(t, tt.f)
			if tt.n >= 0 && len(want) != tt.n {
				t.Fatalf("the store lists %d, the test expects %d", len(want), tt.n)
			}
			if tt.n < 0 && len(want) == 0 && !strings.Contains(tt.query, "include_gone") {
				t.Fatalf("filter matches nothing: a weak test")
			}
			for _, limit := range []string{"", "&limit=1", "&limit=4", "&limit=500"} {
				got := fx.walk(t, "/api/v1/messages?"+tt.query+limit)
				if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
					t.Fatalf("limit %q:\n got %v\nwant %v", limit, got, want)
				}
			}
		})
	}
}

func TestAPIMessagesPage(t *testing.T) {
	fx := newAPIFixture(t)
	res, v, body := fx.get(t, "/api/v1/messages?limit=3")
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d %s", res.StatusCode, body)
	}
	ids := messageIDs(t, v)
	// Newest first: the fixture's enqueued times rise with the index.
	want := []string{strconv.FormatInt(fx.ids[29], 10), strconv.FormatInt(fx.ids[28], 10), strconv.FormatInt(fx.ids[27], 10)}
	if !slices.Equal(ids, want) {
		t.Errorf("first page %v, want %v", ids, want)
	}
	if _, ok := v["next_cursor"].(string); !ok {
		t.Errorf("next_cursor = %v, want a string", v["next_cursor"])
	}
	// The last page says so with null, and the message without an enqueued
	// time comes last.
	all := fx.walk(t, "/api/v1/messages?limit=7")
	if all[len(all)-1] != strconv.FormatInt(fx.ids[10], 10) {
		t.Errorf("last message %s, want the one without an enqueued time (%d)", all[len(all)-1], fx.ids[10])
	}
	_, v, _ = fx.get(t, "/api/v1/messages?limit=500")
	if v["next_cursor"] != nil {
		t.Errorf("next_cursor on the only page = %v, want null", v["next_cursor"])
	}
	// A list leaves bodies out.
	m := v["messages"].([]any)[0].(map[string]any)
	if _, ok := m["body_base64"]; ok {
		t.Error("the list includes body_base64")
	}
	if m["body_size"] == nil || m["body_preview"] == nil {
		t.Errorf("list message lacks body_size or body_preview: %v", m)
	}
	// Empty results are an empty array, not null.
	_, _, body = fx.get(t, "/api/v1/messages?reason=NoSuchReason")
	if !strings.Contains(body, `"messages":[]`) || !strings.Contains(body, `"next_cursor":null`) {
		t.Errorf("empty page = %s", body)
	}
}

func TestAPIBadParameters(t *testing.T) {
	fx := newAPIFixture(t)
	tests := []struct {
		query string
		param string
	}{
		{"limit=0", "limit"},
		{"limit=501", "limit"},
		{"limit=ten", "limit"},
		{"limit=-5", "limit"},
		{"since=yesterday", "since"},
		{"until=2026-11-22", "until"},
		{"since=2026-11-22T10:00:00Z&until=2026-11-22T09:00:00Z", "until"},
		{"subqueue=dlq", "subqueue"},
		{"state=asleep", "state"},
		{"property=tenant", "property"},
		{"property=%3Dvalue", "property"},
		{"cursor=not-a-cursor", "cursor"},
		{"include_gone=yes", "include_gone"},
		{"entitiy=orders", "entitiy"},
		{"entity=a&entity=b", "entity"},
		{"q=%21%21%21", "q"},
		{"q=" + strings.Repeat("x", 1001), "q"},
		{"property=a%3D1&property=a%3D1&property=a%3D1&property=a%3D1&property=a%3D1&property=a%3D1&property=a%3D1&property=a%3D1&property=a%3D1&property=a%3D1&property=a%3D1&property=a%3D1&property=a%3D1&property=a%3D1&property=a%3D1&property=a%3D1&property=a%3D1", "property"},
		{"%zz=1", "query"},
		// A NUL byte in any text parameter: 400 naming it, never a 500.
		{"q=a%00b", "q"},
		{"reason=a%00", "reason"},
		{"entity=orders%00", "entity"},
		{"property=k%3D%00", "property"},
		{"cursor=%00", "cursor"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			res, v, body := fx.get(t, "/api/v1/messages?"+tt.query)
			if res.StatusCode != 400 {
				t.Fatalf("status %d, want 400: %s", res.StatusCode, body)
			}
			e, _ := v["error"].(map[string]any)
			if e["code"] != "invalid_argument" || e["parameter"] != tt.param {
				t.Fatalf("error %v, want invalid_argument naming %s", e, tt.param)
			}
			if msg, _ := e["message"].(string); !strings.Contains(msg, tt.param) {
				t.Errorf("message %q does not name %s", msg, tt.param)
			}
		})
	}
	for _, target := range []string{"/api/v1/groups?entity=%00", "/api/v1/entities?bogus=1", "/api/v1/groups?include_gone=maybe", "/api/v1/status?x=1", "/api/v1/messages/1?body=1"} {
		if res, _, body := fx.get(t, target); res.StatusCode != 400 {
			t.Errorf("%s: status %d, want 400: %s", target, res.StatusCode, body)
		}
	}
}

func TestAPIMessageDetail(t *testing.T) {
	fx := newAPIFixture(t)
	id := fx.ids[9]
	res, v, body := fx.get(t, fmt.Sprintf("/api/v1/messages/%d", id))
	if res.StatusCode != 200 {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	g, _ := dlq.GroupOf(&fx.recs[9].Message, dlq.SubQueueDeadLetter)
	want := map[string]any{
		"id":                            strconv.FormatInt(id, 10),
		"entity":                        "payments/Subscriptions/audit",
		"subqueue":                      "dead_letter",
		"state":                         "active",
		"sequence_number":               json.Number("109"),
		"message_id":                    "m-09",
		"correlation_id":                "corr",
		"session_id":                    nil,
		"partition_key":                 nil,
		"subject":                       "OrderCreated",
		"content_type":                  "application/json",
		"reply_to":                      nil,
		"reply_to_session_id":           nil,
		"to":                            "elsewhere",
		"dead_letter_reason":            "SqlTimeout",
		"dead_letter_error_description": "timed out after 1009 ms",
		"dead_letter_source":            nil,
		"delivery_count":                json.Number("4"),
		"enqueued_at":                   "2026-11-22T10:51:07.123Z",
		"scheduled_enqueue_at":          nil,
		"expires_at":                    nil,
		"time_to_live":                  "1m30s",
		"application_properties":        map[string]any{"big": json.Number("18446744073709551615"), "n": json.Number("9"), "tenant": "t1"},
		"body_size":                     json.Number(strconv.Itoa(len(fx.recs[9].Body))),
		"body_preview":                  string(fx.recs[9].Body),
		"body_base64":                   base64.StdEncoding.EncodeToString(fx.recs[9].Body),
		"group_id":                      g.ID,
		"first_seen_at":                 "2026-11-22T11:42:07.123Z",
		"last_seen_at":                  "2026-11-22T12:42:07.123Z",
		"gone_at":                       nil,
		"replay_count":                  json.Number("0"),
		"namespace":                     "", // storetest fills the unnamed namespace
		// Never replayed: its lineage is itself.
		"lineage": fmt.Sprintf("[map[at:2026-11-22T11:42:07.123Z copy_message_id:<nil> current:true dead_letter_reason:SqlTimeout depth:0 "+
			"entity:payments/Subscriptions/audit event:dead_lettered id:%d job_id:<nil> state:<nil> subqueue:dead_letter]]", id),
	}
	for k, w := range want {
		got, ok := v[k]
		if !ok {
			t.Errorf("key %s missing", k)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("%s = %#v, want %#v", k, got, w)
		}
	}
	for k := range v {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected key %s", k)
		}
	}
	// Every integer digit survives: the raw text, not a float.
	if !strings.Contains(body, `"big":18446744073709551615`) {
		t.Errorf("big integer not kept exactly: %s", body)
	}

	// The message in the main entity: no group, a deferred state.
	_, v, _ = fx.get(t, fmt.Sprintf("/api/v1/messages/%d", fx.ids[3]))
	if v["group_id"] != nil || v["state"] != "deferred" || v["subqueue"] != "main" || v["dead_letter_reason"] != nil {
		t.Errorf("deferred message = %v", v)
	}
	// A gone message is still shown, with gone_at.
	_, v, _ = fx.get(t, fmt.Sprintf("/api/v1/messages/%d", fx.ids[6]))
	if v["gone_at"] != "2026-11-22T13:42:07.123Z" {
		t.Errorf("gone_at = %v", v["gone_at"])
	}
	// A binary body comes back exactly.
	_, v, _ = fx.get(t, fmt.Sprintf("/api/v1/messages/%d", fx.ids[8]))
	if b, _ := base64.StdEncoding.DecodeString(v["body_base64"].(string)); !bytes.Equal(b, []byte{0xff, 0, 0xfe}) || v["body_preview"] != "" {
		t.Errorf("binary body = %v / preview %q", b, v["body_preview"])
	}
}

func TestAPINotFound(t *testing.T) {
	fx := newAPIFixture(t)
	for _, target := range []string{
		"/api/v1/messages/999999", "/api/v1/messages/999999/body", "/api/v1/messages/abc",
		"/api/v1/messages/0", "/api/v1/messages/-1", "/api/v1/messages/007", "/api/v1/messages/99999999999999999999",
		"/api/v1/nothing", "/api/v2/messages",
	} {
		res, v, body := fx.get(t, target)
		if res.StatusCode != 404 {
			t.Errorf("%s: status %d, want 404: %s", target, res.StatusCode, body)
			continue
		}
		if e, _ := v["error"].(map[string]any); e["code"] != "not_found" || e["message"] == "" {
			t.Errorf("%s: body %s", target, body)
		}
	}
}

func TestAPIBodyDownload(t *testing.T) {
	fx := newAPIFixture(t)
	st := fx.st
	path := st.Path()
	extra := []struct {
		ct       *string
		wantType string
		wantExt  string
	}{
		{ptr("application/json; charset=utf-8"), "application/json; charset=utf-8", ".json"},
		{ptr("text/plain"), "text/plain", ".txt"},
		{ptr("text/csv; charset=\"iso-8859-1\""), "text/csv; charset=iso-8859-1", ".csv"},
		{ptr("application/vnd.order+json"), "application/vnd.order+json", ".json"},
		{ptr("text/plain; charset=\"utf-8\\\"; x=<script>\""), "text/plain", ".txt"},
		{ptr("text/html"), "application/octet-stream", ".bin"},
		{ptr("image/svg+xml"), "application/octet-stream", ".xml"},
		{ptr("application/xml"), "application/octet-stream", ".xml"},
		{ptr("application/javascript"), "application/octet-stream", ".bin"},
		{ptr("not a / type"), "application/octet-stream", ".bin"},
		{ptr(""), "application/octet-stream", ".bin"},
		{nil, "application/octet-stream", ".bin"},
	}
	var recs []dlq.Record
	for i, e := range extra {
		recs = append(recs, dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Message: dlq.Message{
			SequenceNumber: int64(5000 + i), State: dlq.StateActive, ContentType: e.ct,
			Body: []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>` + strconv.Itoa(i)),
		}})
	}
	ids := storetest.Insert(t, path, recs...)
	for i, e := range extra {
		name := "nil"
		if e.ct != nil {
			name = *e.ct
		}
		t.Run(name, func(t *testing.T) {
			res, body := do(t, fx.h, httptest.NewRequestWithContext(t.Context(), "GET", fmt.Sprintf("/api/v1/messages/%d/body", ids[i]), nil))
			if res.StatusCode != 200 {
				t.Fatalf("status %d", res.StatusCode)
			}
			if body != string(recs[i].Body) {
				t.Errorf("body %q, want %q", body, recs[i].Body)
			}
			h := res.Header
			if got := h.Get("Content-Type"); got != e.wantType {
				t.Errorf("Content-Type = %q, want %q", got, e.wantType)
			}
			if got, want := h.Get("Content-Disposition"), fmt.Sprintf("attachment; filename=message-%d%s", ids[i], e.wantExt); got != want {
				t.Errorf("Content-Disposition = %q, want %q", got, want)
			}
			if h.Get("X-Content-Type-Options") != "nosniff" {
				t.Error("no nosniff")
			}
			if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "sandbox") || !strings.Contains(csp, "default-src 'none'") {
				t.Errorf("CSP = %q", csp)
			}
			if h.Get("Content-Length") != strconv.Itoa(len(recs[i].Body)) {
				t.Errorf("Content-Length = %q", h.Get("Content-Length"))
			}
		})
	}
	// Binary bytes come back unchanged.
	res, body := do(t, fx.h, httptest.NewRequestWithContext(t.Context(), "GET", fmt.Sprintf("/api/v1/messages/%d/body", fx.ids[8]), nil))
	if res.StatusCode != 200 || body != "\xff\x00\xfe" {
		t.Errorf("binary body = %d %q", res.StatusCode, body)
	}
}

func TestAPIMessageDataIsEscaped(t *testing.T) {
	fx := newAPIFixture(t)
	for _, target := range []string{
		"/api/v1/messages?limit=500", "/api/v1/messages/" + strconv.FormatInt(fx.ids[7], 10), "/api/v1/groups",
		"/api/v1/messages?reason=" + url.QueryEscape(xssReason),
	} {
		res, v, body := fx.get(t, target)
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d", target, res.StatusCode)
		}
		if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
			t.Errorf("%s: Content-Type %q", target, res.Header.Get("Content-Type"))
		}
		if strings.Contains(body, "<script") || strings.Contains(body, "<html") {
			t.Errorf("%s: raw markup in the answer: %s", target, body)
		}
		if !strings.Contains(body, `\u003cscript\u003e`) {
			t.Errorf("%s: escaped markup not found", target)
		}
		_ = v
	}
	// The data is intact once decoded.
	_, v, _ := fx.get(t, "/api/v1/messages?reason="+url.QueryEscape(xssReason))
	msgs := v["messages"].([]any)
	if len(msgs) == 0 || msgs[0].(map[string]any)["dead_letter_reason"] != xssReason {
		t.Errorf("reason filter with markup = %v", msgs)
	}
}

type fakeStatus dlq.Status

func (f fakeStatus) Status() dlq.Status { return dlq.Status(f) }

func TestAPIStatus(t *testing.T) {
	fx := newAPIFixture(t)
	_, _, body := fx.get(t, "/api/v1/status")
	want := `{"namespace":"contoso.servicebus.windows.net","last_success_at":null,"healthy":false,"error":"catalog not running","error_since":null,"namespaces":[],"replica":{"id":""}}` + "\n"
	if body != want {
		t.Errorf("status without an ingester:\n got %s\nwant %s", body, want)
	}

	since := t0.Add(-time.Minute)
	for _, tt := range []struct {
		st   dlq.Status
		want string
	}{
		{dlq.Status{Namespace: "ns.example", LastSuccessAt: &t0, Healthy: true},
			`{"namespace":"ns.example","last_success_at":"2026-11-22T10:42:07.123Z","healthy":true,"error":null,"error_since":null,` +
				`"namespaces":[{"name":"ns.example","healthy":true,"last_success_at":"2026-11-22T10:42:07.123Z","error":null,"ingester_replica":null}],"replica":{"id":""}}`},
		{dlq.Status{LastSuccessAt: &t0, Error: "Service Bus unreachable: dial tcp: i/o timeout", ErrorSince: &since},
			`{"namespace":"x.example","last_success_at":"2026-11-22T10:42:07.123Z","healthy":false,"error":"Service Bus unreachable: dial tcp: i/o timeout","error_since":"2026-11-22T10:41:07.123Z",` +
				`"namespaces":[{"name":"x.example","healthy":false,"last_success_at":"2026-11-22T10:42:07.123Z","error":"Service Bus unreachable: dial tcp: i/o timeout","ingester_replica":null}],"replica":{"id":""}}`},
	} {
		s := New(Config{Catalog: fx.st, Status: fakeStatus(tt.st), Namespace: "x.example"})
		res, body := do(t, s.Handler(), httptest.NewRequestWithContext(t.Context(), "GET", "/api/v1/status", nil))
		if res.StatusCode != 200 || body != tt.want+"\n" {
			t.Errorf("status %d:\n got %s\nwant %s", res.StatusCode, body, tt.want)
		}
	}
}

func TestAPIEntities(t *testing.T) {
	fx := newAPIFixture(t)
	_, v, _ := fx.get(t, "/api/v1/entities")
	var paths []string
	byPath := map[string]map[string]any{}
	for _, e := range v["entities"].([]any) {
		m := e.(map[string]any)
		paths = append(paths, m["path"].(string))
		byPath[m["path"].(string)] = m
	}
	if want := []string{"orders", "payments", "payments/Subscriptions/audit"}; !slices.Equal(paths, want) {
		t.Fatalf("paths %v, want %v (deleted left out)", paths, want)
	}
	o := byPath["orders"]
	for k, w := range map[string]string{"kind": "queue", "active_count": "3", "dead_letter_count": "4",
		"transfer_dead_letter_count": "1", "scheduled_count": "2", "deferred_count": "0", "status": "Active", "topic": "<nil>", "deleted_at": "<nil>"} {
		if fmt.Sprint(o[k]) != w {
			t.Errorf("orders.%s = %v, want %s", k, o[k], w)
		}
	}
	if s := byPath["payments/Subscriptions/audit"]; s["kind"] != "subscription" || s["topic"] != "payments" ||
		s["status"] != "ReceiveDisabled" || fmt.Sprint(s["deferred_count"]) != "1" {
		t.Errorf("subscription = %v", s)
	}
	if byPath["payments"]["kind"] != "topic" {
		t.Errorf("topic = %v", byPath["payments"])
	}
	_, v, _ = fx.get(t, "/api/v1/entities?include_deleted=true")
	es := v["entities"].([]any)
	if len(es) != 4 {
		t.Fatalf("with deleted: %d entities", len(es))
	}
	for _, e := range es {
		if m := e.(map[string]any); m["path"] == "retired" && m["deleted_at"] != "2026-11-22T09:42:07.123Z" {
			t.Errorf("retired = %v", m)
		}
	}
}

func TestAPIGroups(t *testing.T) {
	fx := newAPIFixture(t)
	_, v, body := fx.get(t, "/api/v1/groups")
	gs := v["groups"].([]any)
	if len(gs) == 0 {
		t.Fatalf("no groups: %s", body)
	}
	total := 0
	for _, g := range gs {
		m := g.(map[string]any)
		for _, k := range []string{"id", "reason", "description_pattern", "entities", "count", "first_seen_at", "last_seen_at"} {
			if _, ok := m[k]; !ok {
				t.Errorf("group lacks %s: %v", k, m)
			}
		}
		if m["description_pattern"] != "timed out after <n> ms" {
			t.Errorf("pattern %v", m["description_pattern"])
		}
		n, _ := strconv.Atoi(string(m["count"].(json.Number)))
		total += n
		// The group's id filters the list to its present messages.
		_, lv, _ := fx.get(t, "/api/v1/messages?limit=500&group="+m["id"].(string))
		if got := len(lv["messages"].([]any)); got != n {
			t.Errorf("group %s: count %d, list %d", m["id"], n, got)
		}
	}
	if total != 27 { // present dead letters and transfer dead letters
		t.Errorf("counts add up to %d, want 27", total)
	}
	_, v, _ = fx.get(t, "/api/v1/groups?entity=orders")
	for _, g := range v["groups"].([]any) {
		if !slices.Contains(g.(map[string]any)["entities"].([]any), any("orders")) {
			t.Errorf("entity filter kept %v", g)
		}
	}
	_, v, _ = fx.get(t, "/api/v1/groups?entity=nope")
	if len(v["groups"].([]any)) != 0 {
		t.Errorf("unknown entity kept groups")
	}
}

// brokenCatalog fails every read with an error whose text must not leak.
type brokenCatalog struct{ Catalog }

func (brokenCatalog) ListMessages(context.Context, dlq.Filter, int, string) ([]dlq.Record, string, error) {
	return nil, "", errors.New("disk on fire: secret-detail")
}

func TestAPIInternalError(t *testing.T) {
	var logs bytes.Buffer
	s := New(Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Catalog: brokenCatalog{}})
	res, body := do(t, s.Handler(), httptest.NewRequestWithContext(t.Context(), "GET", "/api/v1/messages", nil))
	if res.StatusCode != 500 {
		t.Fatalf("status %d", res.StatusCode)
	}
	id := res.Header.Get("X-Request-Id")
	var e struct {
		Error struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			RequestID string `json:"request_id"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatal(err)
	}
	if e.Error.Code != "internal" || e.Error.RequestID != id || !strings.Contains(e.Error.Message, id) {
		t.Errorf("body %s, request id %s", body, id)
	}
	if strings.Contains(body, "secret-detail") {
		t.Error("500 leaks the raw error")
	}
	if n := strings.Count(logs.String(), "request failed"); n != 1 || !strings.Contains(logs.String(), "secret-detail") {
		t.Errorf("logged %d times:\n%s", n, logs.String())
	}
}

func TestAPIHead(t *testing.T) {
	fx := newAPIFixture(t)
	res, body := do(t, fx.h, httptest.NewRequestWithContext(t.Context(), "HEAD", "/api/v1/entities", nil))
	if res.StatusCode != 200 || body != "" {
		t.Errorf("HEAD = %d %q", res.StatusCode, body)
	}
}

// The cursor is opaque: it must not carry filter values in the clear.
func TestAPICursorIsOpaque(t *testing.T) {
	fx := newAPIFixture(t)
	_, v, _ := fx.get(t, "/api/v1/messages?limit=2")
	c := v["next_cursor"].(string)
	if !regexp.MustCompile(`^[A-Za-z0-9_-]+$`).MatchString(c) {
		t.Errorf("cursor %q is not URL-safe", c)
	}
}

// TestAPIStatusNamespaces: with several namespaces, each has its own
// status and the top-level fields are their summary (healthy only when all
// are; the error names the one that fails).
func TestAPIStatusNamespaces(t *testing.T) {
	fx := newAPIFixture(t)
	older := t0.Add(-time.Minute)
	set := dlq.StatusSet{
		fakeStatus(dlq.Status{Namespace: "prod-eu", LastSuccessAt: &t0, Healthy: true, Replica: "pod-a"}),
		fakeStatus(dlq.Status{Namespace: "prod-us", LastSuccessAt: &older, Error: "no successful read for 6 s", ErrorSince: &older}),
	}
	s := New(Config{Catalog: fx.st, Status: set, Replica: "pod-b"})
	res, body := do(t, s.Handler(), httptest.NewRequestWithContext(t.Context(), "GET", "/api/v1/status", nil))
	want := `{"namespace":"prod-eu, prod-us","last_success_at":"2026-11-22T10:41:07.123Z","healthy":false,` +
		`"error":"prod-us: no successful read for 6 s","error_since":"2026-11-22T10:41:07.123Z","namespaces":[` +
		`{"name":"prod-eu","healthy":true,"last_success_at":"2026-11-22T10:42:07.123Z","error":null,"ingester_replica":"pod-a"},` +
		`{"name":"prod-us","healthy":false,"last_success_at":"2026-11-22T10:41:07.123Z","error":"no successful read for 6 s","ingester_replica":null}],` +
		`"replica":{"id":"pod-b"}}` + "\n"
	if res.StatusCode != 200 || body != want {
		t.Errorf("status %d:\n got %s\nwant %s", res.StatusCode, body, want)
	}
}
