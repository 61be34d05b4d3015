package web

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// TestAPINamespaces: two namespaces with the same queue name. Every
// entity, message and group carries its namespace; the lists take
// namespace as a filter; the same failure in both is one group with a
// count per namespace.
func TestAPINamespaces(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "ns.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for i, name := range []string{"prod-eu", "prod-us"} {
		ns := st.Namespace(name)
		if _, err := ns.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, t0); err != nil {
			t.Fatal(err)
		}
		var msgs []dlq.Message
		for j := range 2 + i { // eu 2, us 3
			msgs = append(msgs, dlq.Message{SequenceNumber: int64(j + 1), State: dlq.StateActive,
				MessageID: fmt.Sprintf("%s-%d", name, j), EnqueuedAt: ptr(t0.Add(time.Duration(j) * time.Second)),
				DeadLetterReason: ptr("SqlTimeout")})
		}
		if _, err := ns.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Through: math.MaxInt64,
			Messages: msgs, SeenAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
	h := New(Config{Catalog: st, Namespaces: []string{"prod-eu", "prod-us"}}).Handler()
	get := func(target string) map[string]any {
		t.Helper()
		fx := &apiFixture{h: h}
		res, v, body := fx.get(t, target)
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d %s", target, res.StatusCode, body)
		}
		return v
	}
	namespacesOf := func(list []any) map[string]int {
		out := map[string]int{}
		for _, x := range list {
			ns, ok := x.(map[string]any)["namespace"].(string)
			if !ok {
				t.Errorf("no namespace key in %v", x)
			}
			out[ns]++
		}
		return out
	}
	if got := namespacesOf(get("/api/v1/messages")["messages"].([]any)); got["prod-eu"] != 2 || got["prod-us"] != 3 {
		t.Errorf("messages by namespace %v", got)
	}
	if got := namespacesOf(get("/api/v1/messages?namespace=prod-us&entity=orders")["messages"].([]any)); len(got) != 1 || got["prod-us"] != 3 {
		t.Errorf("messages of prod-us %v", got)
	}
	if got := namespacesOf(get("/api/v1/entities")["entities"].([]any)); got["prod-eu"] != 1 || got["prod-us"] != 1 {
		t.Errorf("entities by namespace %v", got)
	}
	if got := namespacesOf(get("/api/v1/entities?namespace=prod-eu")["entities"].([]any)); len(got) != 1 || got["prod-eu"] != 1 {
		t.Errorf("entities of prod-eu %v", got)
	}
	gs := get("/api/v1/groups")["groups"].([]any)
	if len(gs) != 1 {
		t.Fatalf("groups %v: want one SqlTimeout group across both namespaces", gs)
	}
	g := gs[0].(map[string]any)
	if fmt.Sprint(g["count"])+" "+fmt.Sprint(g["namespaces"]) != "5 [map[name:prod-us present:3 total:3] map[name:prod-eu present:2 total:2]]" {
		t.Errorf("group count and namespaces: %v %v", g["count"], g["namespaces"])
	}
	if n := len(get("/api/v1/groups?namespace=prod-eu")["groups"].([]any)); n != 1 {
		t.Errorf("groups of prod-eu: %d", n)
	}
	if n := len(get("/api/v1/groups?namespace=elsewhere")["groups"].([]any)); n != 0 {
		t.Errorf("groups of an unknown namespace: %d", n)
	}
	res, _ := do(t, h, httptest.NewRequestWithContext(ctx, "GET", "/api/v1/entities?namespace=a&namespace=b", nil))
	if res.StatusCode != 400 {
		t.Errorf("namespace given twice: %d, want 400", res.StatusCode)
	}
}

// twoNamespaceStore is a store whose namespaces prod-eu (2 dead letters)
// and prod-us (3) both have the queue orders, all with reason SqlTimeout.
func twoNamespaceStore(t *testing.T) *store.Store {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "ns.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for i, name := range []string{"prod-eu", "prod-us"} {
		ns := st.Namespace(name)
		if _, err := ns.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue,
			Counts: dlq.Counts{DeadLetter: int64(2 + i)}}}, t0); err != nil {
			t.Fatal(err)
		}
		var msgs []dlq.Message
		for j := range 2 + i {
			msgs = append(msgs, dlq.Message{SequenceNumber: int64(j + 1), State: dlq.StateActive,
				MessageID: fmt.Sprintf("%s-%d", name, j), EnqueuedAt: ptr(t0.Add(time.Duration(j) * time.Second)),
				DeadLetterReason: ptr("SqlTimeout")})
		}
		if _, err := ns.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Through: math.MaxInt64,
			Messages: msgs, SeenAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// TestPagesShowNamespaces: with two namespaces configured, the message,
// group and overview pages show a namespace column, the message list a
// namespace select, and the overview each namespace's health; with one,
// the pages look as they did before namespaces.
func TestPagesShowNamespaces(t *testing.T) {
	st := twoNamespaceStore(t)
	older := t0.Add(-time.Minute)
	set := dlq.StatusSet{
		fakeStatus(dlq.Status{Namespace: "prod-eu", LastSuccessAt: &t0, Healthy: true}),
		fakeStatus(dlq.Status{Namespace: "prod-us", LastSuccessAt: &older, Error: "the broker is not answering"}),
	}
	page := func(h http.Handler, target string) string {
		t.Helper()
		res, body := do(t, h, httptest.NewRequestWithContext(t.Context(), "GET", target, nil))
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d", target, res.StatusCode)
		}
		return body
	}
	two := New(Config{Catalog: st, Status: set, Namespaces: []string{"prod-eu", "prod-us"}}).Handler()
	one := New(Config{Catalog: st, Status: set[0], Namespaces: []string{"prod-eu"}}).Handler()

	msgs := page(two, "/messages")
	if n := strings.Count(msgs, `data-testid="namespace"`); n != 5 {
		t.Errorf("/messages: %d namespace cells, want 5", n)
	}
	if !strings.Contains(msgs, `name="namespace"`) || !strings.Contains(msgs, `<option value="prod-us"`) {
		t.Errorf("/messages has no namespace select")
	}
	if got := strings.Count(page(two, "/messages?namespace=prod-us"), `data-testid="message-row"`); got != 3 {
		t.Errorf("/messages?namespace=prod-us: %d rows, want 3", got)
	}
	if g := page(two, "/groups"); !strings.Contains(g, "prod-us 3 · prod-eu 2") {
		t.Errorf("/groups without per-namespace counts")
	}
	home := page(two, "/")
	for _, want := range []string{`data-namespace="prod-eu" data-healthy="true"`, `data-namespace="prod-us" data-healthy="false"`,
		"the broker is not answering", `data-testid="entity-namespace">prod-us<`, "/messages?namespace=prod-us&amp;entity=orders"} {
		if !strings.Contains(home, want) {
			t.Errorf("overview lacks %s", want)
		}
	}
	if n := strings.Count(home, `data-testid="entity-row"`); n != 2 {
		t.Errorf("overview: %d entity rows, want orders twice", n)
	}

	for _, target := range []string{"/messages", "/groups", "/"} {
		body := page(one, target)
		for _, unwanted := range []string{`name="namespace"`, `data-testid="namespace-health"`, `data-testid="entity-namespace"`,
			`data-testid="group-namespaces"`, `<td data-testid="namespace">`, ">Namespace<"} {
			if strings.Contains(body, unwanted) {
				t.Errorf("%s with one namespace shows %s", target, unwanted)
			}
		}
	}
}

// TestReplayFormAndAPINameTheDestinationNamespace: the confirm page offers
// another namespace only with more than one configured, and the form and
// the API pass destination_namespace (and a sequence-number selection's
// namespace) to the engine as given; without it, none.
func TestReplayFormAndAPINameTheDestinationNamespace(t *testing.T) {
	fx := newJobsFixture(t)
	fx.h = New(Config{Catalog: fx.st, Jobs: fx.jobs, Audit: fx.st, Namespaces: []string{"prod-eu", "prod-us"}}).Handler()
	id := fmt.Sprint(fx.recs[0].ID)
	res, body := fx.post(t, "/replays", url.Values{"action": {"replay"}, "id": {id}})
	if res.StatusCode != 200 || !strings.Contains(body, `name="destination_namespace"`) || !strings.Contains(body, `<option value="prod-us"`) {
		t.Fatalf("confirm page %d without a destination namespace select", res.StatusCode)
	}
	fx.post(t, "/replays", url.Values{"action": {"replay"}, "id": {id}, "destination_namespace": {"prod-us"}})
	res, _ = do(t, fx.h, jsonRequest(t, `{"action":"replay","entity":"orders","sequence_numbers":[1],"namespace":"prod-eu","destination_namespace":"prod-us","dry_run":true}`))
	if res.StatusCode != 200 {
		t.Fatalf("API dry run: %d", res.StatusCode)
	}
	subs := fx.jobs.submits
	last2 := subs[len(subs)-2:]
	if subs[0].DestinationNamespace != "" || last2[0].DestinationNamespace != "prod-us" ||
		last2[1].DestinationNamespace != "prod-us" || last2[1].Selection.Namespace != "prod-eu" {
		t.Errorf("submissions %+v", subs)
	}

	one := New(Config{Catalog: fx.st, Jobs: fx.jobs, Audit: fx.st, Namespaces: []string{"prod-eu"}}).Handler()
	fx.h = one
	if _, body := fx.post(t, "/replays", url.Values{"action": {"replay"}, "id": {id}}); strings.Contains(body, `name="destination_namespace"`) {
		t.Errorf("one namespace: the confirm page offers a destination namespace")
	}
}

func jsonRequest(t *testing.T, body string) *http.Request {
	req := httptest.NewRequestWithContext(t.Context(), "POST", "/api/v1/jobs", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return req
}
