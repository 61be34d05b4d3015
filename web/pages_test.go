package web

import (
	"fmt"
	"html"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// page GETs an HTML page and checks its status.
func (fx *apiFixture) page(t *testing.T, target string, status int) string {
	t.Helper()
	res, body := do(t, fx.h, httptest.NewRequestWithContext(t.Context(), "GET", target, nil))
	if res.StatusCode != status {
		t.Fatalf("GET %s: status %d, want %d:\n%.3000s", target, res.StatusCode, status, body)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("GET %s: Content-Type %q", target, ct)
	}
	if !utf8.ValidString(body) {
		t.Errorf("GET %s: the page is not valid UTF-8", target)
	}
	if n := strings.Count(body, "<h1"); n != 1 {
		t.Errorf("GET %s: %d h1 elements, want 1", target, n)
	}
	return body
}

var rowIDRe = regexp.MustCompile(`data-testid="message-row" data-id="(\d+)"`)

// rowIDs are the catalog ids of a list page's rows, in order.
func rowIDs(body string) []string {
	var ids []string
	for _, m := range rowIDRe.FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

var nextRe = regexp.MustCompile(`<a href="([^"]+)" rel="next" data-testid="next-page"`)

func TestPagesRender(t *testing.T) {
	fx := newAPIFixture(t)
	for _, tt := range []struct{ target, want string }{
		{"/groups", `data-testid="group-rows"`},
		{"/groups?include_gone=true", `data-testid="group-row"`},
		{"/messages", `data-testid="message-rows"`},
		{"/messages/" + strconv.FormatInt(fx.ids[0], 10), `data-testid="system-properties"`},
		{"/", `data-testid="nav-messages"`},
	} {
		body := fx.page(t, tt.target, 200)
		if !strings.Contains(body, tt.want) {
			t.Errorf("GET %s lacks %s", tt.target, tt.want)
		}
	}
	body := fx.page(t, "/groups", 200)
	if !strings.Contains(body, `id="groups"`) || !strings.Contains(body, `href="/messages?group=`) {
		t.Errorf("groups page lacks the fragment id or the links:\n%s", body)
	}
	if !strings.Contains(body, `aria-current="page" data-testid="nav-groups"`) {
		t.Error("groups page: the navigation does not mark it current")
	}
}

func TestMessagesPageFilters(t *testing.T) {
	fx := newAPIFixture(t)
	all := rowIDs(fx.page(t, "/messages?include_gone=true", 200))
	if len(all) != 30 {
		t.Fatalf("all: %d rows, want 30", len(all))
	}
	// The same filters give the API's answer, empty form fields included.
	for _, q := range []string{
		"entity=orders", "state=deferred", "subqueue=transfer_dead_letter", "reason=SqlTimeout",
		"property=tenant%3Dt2", "q=banana", "since=" + url.QueryEscape(t0.Add(20*time.Minute).Format(time.RFC3339)),
		"include_gone=true&entity=orders",
	} {
		_, v, _ := fx.get(t, "/api/v1/messages?limit=500&"+q)
		want := messageIDs(t, v)
		got := rowIDs(fx.page(t, "/messages?"+q+"&group=&until=", 200))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: rows %v, want %v", q, got, want)
		}
		if len(got) == 0 || len(got) >= 29 {
			t.Errorf("%s: %d rows: the filter does not narrow", q, len(got))
		}
	}
	// datetime-local values are UTC.
	local := t0.Add(20 * time.Minute).Format("2006-01-02T15:04")
	got := rowIDs(fx.page(t, "/messages?since="+local, 200))
	_, v, _ := fx.get(t, "/api/v1/messages?limit=500&since="+url.QueryEscape(t0.Add(20*time.Minute).Truncate(time.Minute).Format(time.RFC3339)))
	if want := messageIDs(t, v); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("since=%s: rows %v, want %v", local, got, want)
	}
	// A group's page links from the groups page.
	gid := fx.recs[0].GroupID
	if gid == "" {
		g, _ := dlq.GroupOf(&fx.recs[0].Message, fx.recs[0].SubQueue)
		gid = g.ID
	}
	body := fx.page(t, "/messages?group="+url.QueryEscape(gid), 200)
	if n := len(rowIDs(body)); n == 0 || n >= 29 {
		t.Errorf("group: %d rows", n)
	}
	if _, frag := do(t, fx.h, httptest.NewRequestWithContext(t.Context(), "GET", "/messages/count?group="+url.QueryEscape(gid), nil)); !strings.Contains(frag, `data-testid="matching-count">`+strconv.Itoa(len(rowIDs(body)))+`<`) {
		t.Errorf("group: the count does not match the rows:\n%s", frag)
	}
	// Gone rows look gone.
	body = fx.page(t, "/messages?include_gone=true", 200)
	goneRow := fmt.Sprintf(`id="message-%d" data-testid="message-row" data-id="%d" class="gone"`, fx.ids[6], fx.ids[6])
	if !strings.Contains(body, goneRow) || !strings.Contains(body, `data-testid="gone">gone<`) {
		t.Errorf("the gone message's row does not look gone")
	}
}

func TestMessagesPageBadFilter(t *testing.T) {
	fx := newAPIFixture(t)
	for _, tt := range []struct{ query, field string }{
		{"since=yesterday", "since"},
		{"state=sleeping", "state"},
		{"subqueue=x", "subqueue"},
		{"property=novalue", "property"},
		{"q=" + url.QueryEscape("!!!"), "q"},
		{"cursor=bogus", "cursor"},
		{"since=2026-11-22T10:00&until=2026-11-22T09:00", "until"},
		{"colour=red", "colour"},
	} {
		body := fx.page(t, "/messages?"+tt.query, 400)
		if !strings.Contains(body, `data-testid="filter-error" data-field="`+tt.field+`"`) {
			t.Errorf("%s: the error does not name %s:\n%s", tt.query, tt.field, body)
		}
		if !strings.Contains(body, `data-testid="filter-form"`) {
			t.Errorf("%s: the form is not re-rendered", tt.query)
		}
	}
	// The form keeps what was typed.
	body := fx.page(t, "/messages?since=yesterday&reason=SqlTimeout", 400)
	if !strings.Contains(body, `value="yesterday"`) || !strings.Contains(body, `value="SqlTimeout"`) {
		t.Errorf("the form lost the typed values")
	}
	fx.page(t, "/groups?include_gone=maybe", 400)
}

func TestMessagesPagePaging(t *testing.T) {
	path := filepath.Join(t.TempDir(), "paging.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var recs []dlq.Record
	for i := range 137 {
		at := t0.Add(time.Duration(i/3) * time.Second) // ties on the sort key
		recs = append(recs, dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Message: dlq.Message{
			SequenceNumber: int64(i + 1), State: dlq.StateActive, EnqueuedAt: &at, DeadLetterReason: ptr("R"),
			Body: []byte("hello")}})
	}
	storetest.Insert(t, path, recs...)
	fx := &apiFixture{h: New(Config{Catalog: st}).Handler()}
	seen := map[string]bool{}
	target := "/messages?entity=orders"
	pages := 0
	var last time.Time
	for target != "" {
		body := fx.page(t, strings.ReplaceAll(target, "&amp;", "&"), 200)
		pages++
		if pages > 1 && !strings.Contains(body, `data-testid="first-page"`) {
			t.Errorf("page %d has no first-page link", pages)
		}
		for _, id := range rowIDs(body) {
			if seen[id] {
				t.Fatalf("id %s on two pages", id)
			}
			seen[id] = true
		}
		for _, m := range regexp.MustCompile(`<time datetime="([^"]+)"`).FindAllStringSubmatch(body, -1) {
			at, _ := time.Parse(time.RFC3339, m[1])
			if pages > 1 && !last.IsZero() && at.After(last) {
				t.Errorf("not newest first: %s after %s", at, last)
			}
			last = at
		}
		target = ""
		if m := nextRe.FindStringSubmatch(body); m != nil {
			target = m[1]
		}
	}
	if len(seen) != 137 || pages != 3 {
		t.Errorf("saw %d messages on %d pages, want 137 on 3", len(seen), pages)
	}
}

func TestMessagePageBodies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bodies.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	xss := `<script>alert(1)</script>`
	img := `<img src=x onerror=alert(2)>`
	big := `{"items":[` + strings.Repeat(`{"sku":"abc","qty":1},`, 300<<10/21) + `{}]}`
	bodies := []struct {
		name, ct string
		body     []byte
	}{
		{"json", "application/json", []byte(`{"order":42,"note":"` + xss + `"}`)},
		{"xml", "application/xml", []byte(`<order><id>42</id><note>` + "&lt;script&gt;" + `</note></order>`)},
		{"text", "text/plain", []byte("plain words " + img)},
		{"binary", "", []byte{0xff, 0xfe, 0x00, 0x01, 'A'}},
		{"big", "application/json", []byte(big)},
		{"notjson", "application/json", []byte(`{"broken": `)},
		{"badxml", "text/xml", []byte(`<a><b></a>`)},
	}
	var recs []dlq.Record
	for i, b := range bodies {
		recs = append(recs, dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Message: dlq.Message{
			SequenceNumber: int64(i + 1), State: dlq.StateActive, EnqueuedAt: ptr(t0), ContentType: ptr(b.ct),
			DeadLetterReason: ptr(xss), DeadLetterErrorDescription: ptr(img + "\xff\xfe"), Subject: ptr("bad \xc3\x28 utf8"),
			ApplicationProperties: dlq.EncodeProperties(map[string]any{"tenant": img, xss: int64(7)}),
			Body:                  b.body}})
	}
	ids := storetest.Insert(t, path, recs...)
	fx := &apiFixture{h: New(Config{Catalog: st}).Handler()}
	pages := map[string]string{}
	for i, b := range bodies {
		pages[b.name] = fx.page(t, "/messages/"+strconv.FormatInt(ids[i], 10), 200)
	}
	kind := func(name, want string) {
		t.Helper()
		if !strings.Contains(pages[name], `data-testid="body" data-kind="`+want+`"`) {
			t.Errorf("%s: body not shown as %s", name, want)
		}
	}
	kind("json", "json")
	kind("xml", "xml")
	kind("text", "text")
	kind("binary", "hex")
	kind("big", "json")
	kind("notjson", "text")
	kind("badxml", "text")
	if !strings.Contains(pages["json"], "{\n  &#34;order&#34;: 42,") && !strings.Contains(pages["json"], "{\n  &quot;order&quot;: 42,") {
		t.Errorf("json is not indented:\n%s", pages["json"])
	}
	if !strings.Contains(pages["xml"], "<order>\n  &lt;id&gt;42") && !strings.Contains(pages["xml"], "&lt;order&gt;\n  &lt;id&gt;42&lt;/id&gt;") {
		t.Errorf("xml is not indented:\n%s", pages["xml"])
	}
	if !strings.Contains(pages["binary"], "ff fe 00 01 41") {
		t.Errorf("binary: no hex dump")
	}
	if !strings.Contains(pages["big"], `data-testid="body-truncated"`) || strings.Contains(pages["json"], `data-testid="body-truncated"`) {
		t.Errorf("truncation notice wrong")
	}
	if len(pages["big"]) > 200<<10 {
		t.Errorf("the big body's page is %d bytes", len(pages["big"]))
	}
	for name, p := range pages {
		for _, bad := range []string{xss, img, "<script>alert", "<img src"} {
			if strings.Contains(p, bad) {
				t.Errorf("%s: page contains %q unescaped", name, bad)
			}
		}
		if !strings.Contains(p, `href="/api/v1/messages/`) {
			t.Errorf("%s: no download link", name)
		}
	}
	if !strings.Contains(pages["json"], "&lt;img src=x onerror=alert(2)&gt;") {
		t.Errorf("the property value is not shown escaped")
	}
	list := fx.page(t, "/messages", 200)
	for _, bad := range []string{xss, img} {
		if strings.Contains(list, bad) {
			t.Errorf("list contains %q unescaped", bad)
		}
	}
	fx.page(t, "/messages/999999", 404)
	fx.page(t, "/messages/abc", 404)
	fx.page(t, "/messages/012", 404)
}

func TestInventoryPage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inv.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	var recs []dlq.Record
	for i, h := range []int{5, 50, 2, 30} { // hours ago (deferred) or ahead (scheduled)
		enq := now.Add(-time.Duration(h) * time.Hour)
		due := now.Add(time.Duration(h) * time.Hour)
		recs = append(recs,
			dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueMain, Message: dlq.Message{SequenceNumber: int64(10 + i),
				State: dlq.StateDeferred, EnqueuedAt: &enq, Subject: ptr("<script>alert(1)</script>")}},
			dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueMain, Message: dlq.Message{SequenceNumber: int64(20 + i),
				State: dlq.StateScheduled, EnqueuedAt: &enq, ScheduledEnqueueAt: &due}})
	}
	ids := storetest.Insert(t, path, recs...)
	fx := &apiFixture{h: New(Config{Catalog: st, OrphanAfter: 24 * time.Hour}).Handler()}
	body := fx.page(t, "/inventory", 200)
	rowsOf := func(kind string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`data-testid="`+kind+`-row" data-id="(\d+)"`).FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	id := func(i int) string { return strconv.FormatInt(ids[i], 10) }
	// Deferred oldest first: 50h, 30h, 5h, 2h ago; scheduled soonest: 2h, 5h, 30h, 50h ahead.
	if got, want := rowsOf("deferred"), []string{id(2), id(6), id(0), id(4)}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("deferred %v, want %v", got, want)
	}
	if got, want := rowsOf("scheduled"), []string{id(5), id(1), id(7), id(3)}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("scheduled %v, want %v", got, want)
	}
	if n := strings.Count(body, `data-testid="orphan"`); n != 2 {
		t.Errorf("%d orphans flagged, want 2 (older than 24h)", n)
	}
	if strings.Contains(body, "<script>alert") {
		t.Error("subject not escaped")
	}
	fx.page(t, "/inventory?deferred=bogus", 400)
}

// The message list goes out with its rows, saying it is counting and where
// the count is; that URL answers the count paragraph.
func TestMessagesPageDoesNotWaitForItsCount(t *testing.T) {
	fx := newAPIFixture(t)
	body := fx.page(t, "/messages?entity=orders&property=tenant%3Dt2", 200)
	rows := rowIDs(body)
	if len(rows) == 0 {
		t.Fatal("no rows")
	}
	m := regexp.MustCompile(`data-count-src="([^"]+)"`).FindStringSubmatch(body)
	if m == nil || !strings.Contains(body, `data-testid="matching-count">Counting<`) || !strings.Contains(body, "/static/count.") {
		t.Fatalf("the page does not say it is counting:\n%.3000s", body)
	}
	src := html.UnescapeString(m[1])
	if src != "/messages/count?entity=orders&property=tenant%3Dt2" {
		t.Fatalf("count URL %q", src)
	}
	res, frag := do(t, fx.h, httptest.NewRequestWithContext(t.Context(), "GET", src, nil))
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET %s: %d %s\n%s", src, res.StatusCode, res.Header.Get("Content-Type"), frag)
	}
	want := fmt.Sprintf(`data-testid="matching-count">%d<`, len(rows))
	if !strings.Contains(frag, want) || strings.Contains(frag, `data-count-src="/`) || !strings.Contains(frag, `id="matching"`) ||
		!strings.Contains(frag, fmt.Sprintf(`data-select="Select all %d matching"`, len(rows))) {
		t.Errorf("count fragment, want %s:\n%s", want, frag)
	}
	// A bad filter is the form's error, as on the page.
	if res, _ := do(t, fx.h, httptest.NewRequestWithContext(t.Context(), "GET", "/messages/count?state=bogus", nil)); res.StatusCode != 400 {
		t.Errorf("bad filter: %d", res.StatusCode)
	}
}
