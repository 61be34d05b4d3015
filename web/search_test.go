package web

import (
	"context"
	"encoding/json"
	"html"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// TestSearchCountsAreExact: a search is counted exactly (no cap of 200),
// by the page's count fragment and by GET /api/v1/messages/count alike.
func TestSearchCountsAreExact(t *testing.T) {
	fx := newAPIFixture(t)
	for _, q := range []string{"q=banana", "q=apple&entity=orders", "q=" + url.QueryEscape(`"timed out"`), "entity=orders", ""} {
		want := len(fx.walk(t, "/api/v1/messages?limit=7&"+q))
		res, v, body := fx.get(t, "/api/v1/messages/count?"+q)
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d %s", q, res.StatusCode, body)
		}
		if v["count"] != json.Number(strconv.Itoa(want)) || v["exact"] != true || v["cap"] != json.Number("10000") {
			t.Errorf("%s: %s, want count %d, exact", q, body, want)
		}
		_, frag := do(t, fx.h, httptest.NewRequestWithContext(t.Context(), "GET", "/messages/count?"+q, nil))
		if !strings.Contains(frag, `data-testid="matching-count">`+strconv.Itoa(want)+`<`) {
			t.Errorf("%s: the page's count, want %d:\n%s", q, want, frag)
		}
	}
}

// bigCount is a catalog with more matches than any cap.
type bigCount struct{ *store.Store }

func (bigCount) CountMessages(_ context.Context, _ dlq.Filter, max int64) (int64, error) {
	return max, nil
}

func TestSearchCountSaysMoreThanTenThousand(t *testing.T) {
	fx := newAPIFixture(t)
	h := New(Config{Catalog: bigCount{fx.st}}).Handler()
	res, body := do(t, h, httptest.NewRequestWithContext(t.Context(), "GET", "/api/v1/messages/count?q=banana", nil))
	if res.StatusCode != 200 || strings.TrimSpace(body) != `{"count":10000,"exact":false,"cap":10000}` {
		t.Errorf("API count: %d %s", res.StatusCode, body)
	}
	_, frag := do(t, h, httptest.NewRequestWithContext(t.Context(), "GET", "/messages/count?q=banana", nil))
	if !strings.Contains(frag, `data-testid="matching-count">more than 10,000<`) || strings.Contains(frag, "200") {
		t.Errorf("page count:\n%s", frag)
	}
}

// TestSearchSyntaxErrorIsA400: a quote left open is named, on the page (the
// filter's error on q), by the API and by the count.
func TestSearchSyntaxErrorIsA400(t *testing.T) {
	fx := newAPIFixture(t)
	body := fx.page(t, "/messages?q="+url.QueryEscape(`"banana`), 400)
	if !strings.Contains(body, `data-testid="filter-error" data-field="q"`) || !strings.Contains(body, "not closed") {
		t.Errorf("page: no error on q:\n%.2000s", body)
	}
	for _, target := range []string{"/api/v1/messages?q=", "/api/v1/messages/count?q="} {
		res, v, raw := fx.get(t, target+url.QueryEscape(`apple "banana`))
		if res.StatusCode != 400 || !strings.Contains(raw, `"q"`) || !strings.Contains(raw, "not closed") {
			t.Errorf("%s: %d %v", target, res.StatusCode, v)
		}
	}
}

var markRe = regexp.MustCompile(`<mark data-testid="match">([^<]*)</mark>`)

func marked(s string) []string {
	var out []string
	for _, m := range markRe.FindAllStringSubmatch(s, -1) {
		out = append(out, html.UnescapeString(m[1]))
	}
	return out
}

// TestSearchMatchesAreHighlighted: the list marks the matches in each
// preview and links to the message's page with the search, which marks
// them in the body; everything around a mark stays escaped text.
func TestSearchMatchesAreHighlighted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hl.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	bodies := []string{
		`<script>window.__xss=1</script> the script ran`,
		`{"note":"say \"quoted\" twice: quoted","size":"Größe GRÖSSE größe"}`,
		`plain text without it`,
	}
	var recs []dlq.Record
	for i, b := range bodies {
		recs = append(recs, dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Message: dlq.Message{
			SequenceNumber: int64(i + 1), State: dlq.StateActive, EnqueuedAt: ptr(t0), ContentType: ptr("text/plain"),
			DeadLetterReason: ptr("Bad"), Body: []byte(b)}})
	}
	ids := storetest.Insert(t, path, recs...)
	fx := &apiFixture{h: New(Config{Catalog: st}).Handler()}

	for _, tt := range []struct {
		q    string
		id   int64
		want []string
		raw  string // as the page must spell it around the mark
	}{
		{"script", ids[0], []string{"script", "script", "script"}, `&lt;<mark data-testid="match">script</mark>&gt;window.__xss=1&lt;/<mark data-testid="match">script</mark>&gt;`},
		{"quoted", ids[1], []string{"quoted", "quoted"}, `&#34;<mark data-testid="match">quoted</mark>\&#34;`},
		{"größe", ids[1], []string{"Größe", "größe"}, `<mark data-testid="match">Größe</mark> GRÖSSE <mark data-testid="match">größe</mark>`},
		{`"the scr"*`, ids[0], []string{"the script"}, `<mark data-testid="match">the script</mark> ran`},
	} {
		list := fx.page(t, "/messages?q="+url.QueryEscape(tt.q), 200)
		if got := rowIDs(list); len(got) != 1 || got[0] != strconv.FormatInt(tt.id, 10) {
			t.Fatalf("q=%s: rows %v", tt.q, got)
		}
		if got := marked(list); strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("q=%s: the preview marks %q, want %q", tt.q, got, tt.want)
		}
		link := "/messages/" + strconv.FormatInt(tt.id, 10) + "?" + url.Values{"q": {tt.q}}.Encode()
		if !strings.Contains(list, `href="`+html.EscapeString(link)+`"`) && !strings.Contains(list, `href="`+strings.ReplaceAll(link, "&", "&amp;")+`"`) {
			t.Errorf("q=%s: the row does not link to %s", tt.q, link)
		}
		page := fx.page(t, link, 200)
		body := page[strings.Index(page, `data-testid="body-text"`):]
		body = body[:strings.Index(body, "</pre>")]
		if got := marked(body); strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("q=%s: the body marks %q, want %q", tt.q, got, tt.want)
		}
		if !strings.Contains(page, tt.raw) {
			t.Errorf("q=%s: the body lacks %s:\n%s", tt.q, tt.raw, body)
		}
		if strings.Contains(page, "<script>window") || strings.Contains(list, "<script>window") {
			t.Fatalf("q=%s: the body's script is live markup", tt.q)
		}
		if !strings.Contains(page, `data-testid="body-matches"`) {
			t.Errorf("q=%s: the page does not say what is highlighted", tt.q)
		}
	}
	// Without a search, nothing is marked.
	if page := fx.page(t, "/messages/"+strconv.FormatInt(ids[0], 10), 200); strings.Contains(page, "<mark") {
		t.Error("a page opened without a search marks something")
	}
}

// TestMessagePropertiesAPI: the keys of the listed messages, the most
// common first, and a key's values within the list's filter; the page
// carries where to read them and how to add one.
func TestMessagePropertiesAPI(t *testing.T) {
	fx := newAPIFixture(t)
	res, v, body := fx.get(t, "/api/v1/messages/properties?entity=orders")
	if res.StatusCode != 200 {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	want := len(fx.walk(t, "/api/v1/messages?entity=orders"))
	keys := v["keys"].([]any)
	if len(keys) != 3 || v["sample"] != json.Number("500") {
		t.Fatalf("keys %s", body)
	}
	for _, k := range keys {
		if k.(map[string]any)["count"] != json.Number(strconv.Itoa(want)) {
			t.Errorf("key %v: want every one of the %d messages", k, want)
		}
	}
	// Orders are the even messages: tenants t0 and t2 only.
	_, v, body = fx.get(t, "/api/v1/messages/properties?entity=orders&key=tenant")
	vals := v["values"].([]any)
	if v["key"] != "tenant" || len(vals) != 2 {
		t.Fatalf("values %s", body)
	}
	sum := 0
	for _, x := range vals {
		m := x.(map[string]any)
		if m["value"] != "t0" && m["value"] != "t2" {
			t.Errorf("value %v is not an orders tenant", m["value"])
		}
		n, _ := strconv.Atoi(string(m["count"].(json.Number)))
		sum += n
		// The value filters to that many messages.
		got := len(fx.walk(t, "/api/v1/messages?entity=orders&property="+url.QueryEscape("tenant="+m["value"].(string))))
		if got != n {
			t.Errorf("tenant %v: %d messages, suggested for %d", m["value"], got, n)
		}
	}
	if sum != want {
		t.Errorf("values count %d messages, want %d", sum, want)
	}
	if res, _, body := fx.get(t, "/api/v1/messages/properties?entity=orders&key=a&key=b"); res.StatusCode != 400 {
		t.Errorf("key twice: %d %s", res.StatusCode, body)
	}
	if res, _, body := fx.get(t, "/api/v1/messages/properties?bogus=1"); res.StatusCode != 400 {
		t.Errorf("unknown parameter: %d %s", res.StatusCode, body)
	}
	// An unknown entity is answered as the list answers it.
	listRes, _, _ := fx.get(t, "/api/v1/messages?entity=nope")
	for _, target := range []string{"/api/v1/messages/properties?entity=nope", "/api/v1/messages/count?entity=nope"} {
		if res, _, body := fx.get(t, target); res.StatusCode != listRes.StatusCode {
			t.Errorf("%s: %d %s, want %d as the list", target, res.StatusCode, body, listRes.StatusCode)
		}
	}
	page := fx.page(t, "/messages?entity=orders&q=apple", 200)
	if !strings.Contains(page, `data-keys-src="/api/v1/messages/properties?entity=orders&amp;q=apple"`) ||
		!strings.Contains(page, `data-list-url="/messages?entity=orders&amp;q=apple"`) || !strings.Contains(page, "/static/properties.") {
		t.Errorf("the page's property picker:\n%.4000s", page)
	}
}

// TestSearchMarksAllOfALongBodyShown: the whole body a page shows (64 KiB)
// is marked, to its end.
func TestSearchMarksAllOfALongBodyShown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "long.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	body := "needle " + strings.Repeat("hay ", 15<<10) + "needle end"
	ids := storetest.Insert(t, path, dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Message: dlq.Message{
		SequenceNumber: 1, State: dlq.StateActive, EnqueuedAt: ptr(t0), ContentType: ptr("text/plain"), Body: []byte(body)}})
	fx := &apiFixture{h: New(Config{Catalog: st}).Handler()}
	page := fx.page(t, "/messages/"+strconv.FormatInt(ids[0], 10)+"?q=needle", 200)
	if got := marked(page); len(got) != 2 || !strings.Contains(page, "2 matches of “needle” highlighted in the body.") {
		t.Errorf("marks %q; the page:\n%.300s", got, page[strings.Index(page, `data-testid="body-matches"`):])
	}
	if !strings.Contains(page, `<mark data-testid="match">needle</mark> end`) {
		t.Error("the body's last match is not marked")
	}
}
