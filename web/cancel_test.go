package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
)

// inventoryBroker is a replay.Broker of one namespace for the inventory's
// actions: it knows the queue orders, the topic payments and its
// subscriptions, and records the cancellations it is asked for.
type inventoryBroker struct {
	replay.Broker // receivers and senders: not used by these tests
	mu            sync.Mutex
	cancels       []string // "entity seq,seq"
}

func (b *inventoryBroker) Entity(ctx context.Context, path string) (replay.EntityInfo, error) {
	switch path {
	case "orders":
		return replay.EntityInfo{Path: path, Kind: dlq.KindQueue, LockDuration: time.Minute}, nil
	case "payments":
		return replay.EntityInfo{Path: path, Kind: dlq.KindTopic}, nil
	case "payments/Subscriptions/audit":
		return replay.EntityInfo{Path: path, Kind: dlq.KindSubscription, Topic: "payments", LockDuration: time.Minute}, nil
	}
	return replay.EntityInfo{}, dlq.ErrEntityNotFound
}

func (b *inventoryBroker) Subscriptions(ctx context.Context, topic string, rulesUpTo int) ([]replay.Subscription, error) {
	return []replay.Subscription{
		{Name: "audit", RulesRead: true, Rules: []replay.Rule{{Name: "$Default", Kind: replay.RuleTrue}}},
		{Name: "billing", RulesRead: true, Rules: []replay.Rule{{Name: "$Default", Kind: replay.RuleSQL, Filter: "1=1"}}},
		{Name: "eu-only", RulesRead: true, Rules: []replay.Rule{{Name: "eu", Kind: replay.RuleSQL, Filter: "region = '<eu>'"}}},
		{Name: "eu-cards", RulesRead: true, Rules: []replay.Rule{{Name: "eu", Kind: replay.RuleCorrelation, Filter: `region = "EU"`,
			Correlation: &replay.Correlation{Properties: map[string]any{"region": "EU"}}}}},
	}, nil
}

func (b *inventoryBroker) CancelScheduled(ctx context.Context, entity string, seqs []int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := make([]string, len(seqs))
	for i, n := range seqs {
		s[i] = strconv.FormatInt(n, 10)
	}
	b.cancels = append(b.cancels, entity+" "+strings.Join(s, ","))
	return nil
}

func (b *inventoryBroker) cancelled() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.cancels)
}

// inventoryFixture: two namespaces (prod-eu, prod-us), each with a
// deferred message (seq 1) and a scheduled one (seq 2) in orders, and
// prod-eu with a dead letter of the subscription payments/Subscriptions/audit;
// the real replay engine over the real store (jobs are not run); proxy
// sign-in with these groups:
//
//	admins:    admins everywhere
//	ops:       operators everywhere
//	support:   viewers
//	eu-admins: admins of prod-eu, viewers of prod-us (access rules)
type inventoryFixture struct {
	st      *store.Store
	log     *audit.Log
	h       http.Handler
	brokers map[string]*inventoryBroker
	// ids: "prod-eu deferred", "prod-eu scheduled", "prod-eu dead letter", ...
	ids map[string]int64
}

func newInventoryFixture(t *testing.T) *inventoryFixture {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "inventory.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fx := &inventoryFixture{st: st, brokers: map[string]*inventoryBroker{}, ids: map[string]int64{}}
	for _, name := range []string{"prod-eu", "prod-us"} {
		fx.brokers[name] = &inventoryBroker{}
		ns := st.Namespace(name)
		if _, err := ns.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}, {Path: "payments", Kind: dlq.KindTopic},
			{Path: "payments/Subscriptions/audit", Kind: dlq.KindSubscription, Topic: "payments"}}, t0); err != nil {
			t.Fatal(err)
		}
		due := t0.Add(48 * time.Hour)
		res, err := ns.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueMain, Through: math.MaxInt64, SeenAt: t0,
			Messages: []dlq.Message{
				{SequenceNumber: 1, State: dlq.StateDeferred, MessageID: name + "-deferred", EnqueuedAt: ptr(t0)},
				{SequenceNumber: 2, State: dlq.StateScheduled, MessageID: name + "-scheduled", ScheduledEnqueueAt: &due},
			}})
		if err != nil || len(res.New) != 2 {
			t.Fatalf("apply page: %v %v", res, err)
		}
		fx.ids[name+" deferred"], fx.ids[name+" scheduled"] = res.New[0], res.New[1]
		if name == "prod-eu" {
			res, err := ns.ApplyPage(ctx, dlq.Page{Entity: "payments/Subscriptions/audit", SubQueue: dlq.SubQueueDeadLetter, Through: math.MaxInt64,
				SeenAt: t0, Messages: []dlq.Message{{SequenceNumber: 7, State: dlq.StateActive, MessageID: "pay-7", DeadLetterReason: ptr("Boom")}}})
			if err != nil || len(res.New) != 1 {
				t.Fatalf("apply page: %v %v", res, err)
			}
			fx.ids[name+" dead letter"] = res.New[0]
		}
	}
	fx.log = audit.New(st)
	eng, err := replay.New(replay.Config{Store: st, Audit: fx.log, Brokers: func(ns string) (replay.Broker, error) {
		if b := fx.brokers[ns]; b != nil {
			return b, nil
		}
		return nil, fmt.Errorf("no namespace %q", ns)
	}})
	if err != nil {
		t.Fatal(err)
	}
	mapping := auth.Mapping{Admin: []string{"admins", "eu-admins"}, Operator: []string{"ops"}, Viewer: []string{"support"}}
	prefixes, _ := auth.ParsePrefixes("10.0.0.0/8")
	policy := auth.Policy{Mapping: mapping, Rules: []auth.Rule{
		{Group: "eu-admins", Role: auth.Admin, Namespaces: []string{"prod-eu"}},
		{Group: "eu-admins", Role: auth.Viewer, Namespaces: []string{"prod-us"}},
	}}
	srv := New(Config{Logger: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)), Catalog: st, Audit: st, AuditLog: fx.log, Jobs: eng,
		Namespaces: []string{"prod-eu", "prod-us"}, Access: policy,
		Auth: auth.New(auth.Config{Mode: auth.ModeProxy, Mapping: mapping, Store: st, TrustedProxies: prefixes})})
	fx.h = srv.Handler()
	return fx
}

// as sends a request through the trusted proxy as a member of group.
func (fx *inventoryFixture) as(t *testing.T, group, method, target, contentType, body string) (int, string) {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), method, target, strings.NewReader(body))
	r.RemoteAddr = "10.1.2.3:40000"
	r.Header.Set("X-Forwarded-User", group+"-user")
	r.Header.Set("X-Forwarded-Groups", group)
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	if method == http.MethodPost {
		r.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	res, b := do(t, fx.h, r)
	return res.StatusCode, b
}

func (fx *inventoryFixture) id(key string) string { return strconv.FormatInt(fx.ids[key], 10) }

func (fx *inventoryFixture) entries(t *testing.T, action string) []audit.Entry {
	t.Helper()
	var out []audit.Entry
	if err := fx.log.Scan(t.Context(), audit.Filter{Action: action}, func(e audit.Entry) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

const formType = "application/x-www-form-urlencoded"

// The inventory offers each row's actions to the roles that may take them,
// in the row's namespace: replay and discard of a deferred message to
// operators, cancel of a scheduled one to admins.
func TestInventoryActionsByRole(t *testing.T) {
	fx := newInventoryFixture(t)
	count := func(body, testid string) int { return strings.Count(body, `data-testid="`+testid+`"`) }
	for _, tt := range []struct {
		group          string
		replay, cancel int
		cancelIDs      []string
	}{
		{"admins", 2, 2, []string{fx.id("prod-eu scheduled"), fx.id("prod-us scheduled")}},
		{"ops", 2, 0, nil},
		{"support", 0, 0, nil},
		{"eu-admins", 1, 1, []string{fx.id("prod-eu scheduled")}},
	} {
		status, body := fx.as(t, tt.group, "GET", "/inventory", "", "")
		if status != 200 {
			t.Fatalf("%s: GET /inventory %d", tt.group, status)
		}
		if n := count(body, "deferred-replay"); n != tt.replay {
			t.Errorf("%s: %d enabled Replay… buttons, want %d", tt.group, n, tt.replay)
		}
		if n := count(body, "deferred-discard"); n != tt.replay {
			t.Errorf("%s: %d enabled Discard… buttons, want %d", tt.group, n, tt.replay)
		}
		if n := count(body, "scheduled-cancel"); n != tt.cancel {
			t.Errorf("%s: %d Cancel… links, want %d", tt.group, n, tt.cancel)
		}
		for _, id := range tt.cancelIDs {
			if !strings.Contains(body, `href="/messages/`+id+`/cancel"`) {
				t.Errorf("%s: no cancel link for message %s", tt.group, id)
			}
		}
		// Every row has its actions, disabled where the role does not allow them.
		if n := count(body, "deferred-actions"); n != 2 {
			t.Errorf("%s: %d deferred rows with actions, want 2", tt.group, n)
		}
		if tt.replay < 2 && !strings.Contains(body, `disabled title="Replaying needs the operator role in this namespace"`) {
			t.Errorf("%s: no disabled Replay… with its reason", tt.group)
		}
		if got, want := count(body, "deferred-replay-all"), min(tt.replay, 1); got != want {
			t.Errorf("%s: %d Replay every deferred message… buttons, want %d", tt.group, got, want)
		}
	}

	// Every deferred message at once: a frozen filter (state deferred)
	// whose dry run, spanning both namespaces, offers each one's share.
	_, body := fx.as(t, "admins", "GET", "/inventory", "", "")
	if !strings.Contains(body, `<input type="hidden" name="filter.state" value="deferred">`) {
		t.Fatalf("the every-deferred form does not freeze state=deferred")
	}
	status, body := fx.as(t, "admins", "POST", "/replays", formType, url.Values{"action": {"replay"}, "all_matching": {"true"}, "filter.state": {"deferred"}}.Encode())
	if status != http.StatusBadRequest || strings.Count(body, `data-testid="split-namespace"`) != 2 ||
		!strings.Contains(body, `data-namespace="prod-eu" data-count="1"`) || !strings.Contains(body, `data-namespace="prod-us" data-count="1"`) {
		t.Errorf("every deferred message's dry run: %d\n%.3000s", status, body)
	}
	status, body = fx.as(t, "admins", "POST", "/replays", formType, url.Values{"action": {"discard"}, "all_matching": {"true"},
		"filter.state": {"deferred"}, "filter.namespace": {"prod-eu"}}.Encode())
	if status != 200 {
		t.Fatalf("one namespace's deferred messages: %d", status)
	}
	wantTestid(t, body, "plan-total", "1")
	wantTestid(t, body, "plan-deferred", "1")
}

// Replay… of a deferred message on the inventory posts its id to the
// replay flow: the dry run counts it as deferred and sends it back to its
// queue; the job that starts holds it. A viewer is refused.
func TestInventoryReplayOfDeferred(t *testing.T) {
	fx := newInventoryFixture(t)
	id := fx.id("prod-eu deferred")
	status, body := fx.as(t, "ops", "POST", "/replays", formType, url.Values{"action": {"replay"}, "id": {id}}.Encode())
	if status != 200 {
		t.Fatalf("dry run: %d\n%.3000s", status, body)
	}
	wantTestid(t, body, "plan-total", "1")
	wantTestid(t, body, "plan-deferred", "1")
	wantTestid(t, body, "plan-destination", "orders")
	if !strings.Contains(body, "the queue itself") {
		t.Errorf("the dry run does not say the queue receives the copy")
	}
	status, _ = fx.as(t, "ops", "POST", "/jobs", formType, url.Values{"action": {"replay"}, "id": {id}}.Encode())
	if status != http.StatusSeeOther {
		t.Fatalf("start: %d", status)
	}
	created := fx.entries(t, audit.ActionReplayJobCreated)
	if len(created) != 1 || !slices.Equal(created[0].MessageIDs, []string{id}) || created[0].Actor != "proxy:ops-user" {
		t.Fatalf("job created entries %+v", created)
	}
	// The inventory says the message is in that job instead of offering
	// it again; once the job resolved it, says so until the catalog sees
	// it leave.
	var jobID int64
	if err := json.Unmarshal(created[0].Params, &struct {
		JobID *int64 `json:"job_id,string"`
	}{&jobID}); err != nil {
		t.Fatal(err)
	}
	rowOf := func(body string) string {
		i := strings.Index(body, `data-testid="deferred-row" data-id="`+id+`"`)
		if i < 0 {
			t.Fatalf("no inventory row for %s", id)
		}
		j := strings.Index(body[i:], "</tr>")
		return body[i : i+j]
	}
	_, body = fx.as(t, "ops", "GET", "/inventory", "", "")
	if row := rowOf(body); !strings.Contains(row, `data-testid="deferred-in-job"`) || !strings.Contains(row, fmt.Sprintf(`href="/jobs/%d"`, jobID)) ||
		strings.Contains(row, "deferred-replay") {
		t.Errorf("the row of a message in a job:\n%s", row)
	}
	if _, err := fx.st.UpdateItems(t.Context(), jobID, []replay.Update{{MessageID: fx.ids["prod-eu deferred"], State: replay.ItemLocked}}); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.st.UpdateItems(t.Context(), jobID, []replay.Update{{MessageID: fx.ids["prod-eu deferred"], State: replay.ItemCompleted}}); err != nil {
		t.Fatal(err)
	}
	_, body = fx.as(t, "ops", "GET", "/inventory", "", "")
	if row := rowOf(body); !strings.Contains(row, `data-testid="deferred-resolved"`) || strings.Contains(row, "deferred-replay") {
		t.Errorf("the row of a resolved message:\n%s", row)
	}
	// Discard… needs a reason, as for dead letters.
	status, body = fx.as(t, "ops", "POST", "/jobs", formType, url.Values{"action": {"discard"}, "id": {fx.id("prod-us deferred")}}.Encode())
	if status != http.StatusBadRequest || !strings.Contains(body, `data-field="reason"`) {
		t.Errorf("a discard without a reason: %d", status)
	}
	status, _ = fx.as(t, "support", "POST", "/replays", formType, url.Values{"action": {"replay"}, "id": {fx.id("prod-us deferred")}}.Encode())
	if status != http.StatusForbidden {
		t.Errorf("a viewer's replay of a deferred message: %d, want 403", status)
	}
	status, _ = fx.as(t, "eu-admins", "POST", "/jobs", formType, url.Values{"action": {"replay"}, "id": {fx.id("prod-us deferred")}}.Encode())
	if status != http.StatusForbidden {
		t.Errorf("a viewer of prod-us replaying its deferred message: %d, want 403", status)
	}
}

// An admin cancels a scheduled message on its page: a confirmation with a
// required reason, then the broker's cancel, audited with who, which
// message, the reason and the outcome.
func TestCancelScheduledPage(t *testing.T) {
	fx := newInventoryFixture(t)
	id := fx.id("prod-eu scheduled")
	// The message page offers it (and no replay); the inventory links it.
	status, body := fx.as(t, "admins", "GET", "/messages/"+id, "", "")
	if status != 200 || !strings.Contains(body, `data-testid="message-cancel-scheduled"`) || strings.Contains(body, `data-testid="message-replay"`) {
		t.Fatalf("message page of a scheduled message (%d): cancel offered %v, replay offered %v", status,
			strings.Contains(body, "message-cancel-scheduled"), strings.Contains(body, `data-testid="message-replay"`))
	}
	status, body = fx.as(t, "admins", "GET", "/messages/"+id+"/cancel", "", "")
	if status != 200 || !strings.Contains(body, `data-testid="cancel-form"`) {
		t.Fatalf("cancel page: %d", status)
	}
	// No reason: refused, nothing cancelled.
	status, body = fx.as(t, "admins", "POST", "/messages/"+id+"/cancel", formType, "reason=")
	if status != http.StatusBadRequest || !strings.Contains(body, `data-testid="cancel-error" data-field="reason"`) {
		t.Fatalf("without a reason: %d\n%.2000s", status, body)
	}
	if c := fx.brokers["prod-eu"].cancelled(); len(c) != 0 {
		t.Fatalf("cancelled without a reason: %v", c)
	}
	status, body = fx.as(t, "admins", "POST", "/messages/"+id+"/cancel", formType, "reason="+url.QueryEscape("campaign withdrawn <b>"))
	if status != 200 || !strings.Contains(body, `data-testid="cancel-done"`) {
		t.Fatalf("cancel: %d\n%.2000s", status, body)
	}
	if c := fx.brokers["prod-eu"].cancelled(); !slices.Equal(c, []string{"orders 2"}) {
		t.Fatalf("the broker cancelled %v, want orders 2", c)
	}
	if c := fx.brokers["prod-us"].cancelled(); len(c) != 0 {
		t.Fatalf("prod-us's broker cancelled %v", c)
	}
	es := fx.entries(t, audit.ActionScheduledCancelled)
	if len(es) != 1 {
		t.Fatalf("%d scheduled_cancelled entries, want 1", len(es))
	}
	var p struct {
		Namespace, Entity, Reason string
		SequenceNumbers           []int64 `json:"sequence_numbers"`
	}
	if err := json.Unmarshal(es[0].Params, &p); err != nil {
		t.Fatal(err)
	}
	if e := es[0]; e.Actor != "proxy:admins-user" || e.Outcome != audit.OutcomeSucceeded || !slices.Equal(e.MessageIDs, []string{id}) ||
		p.Namespace != "prod-eu" || p.Entity != "orders" || p.Reason != "campaign withdrawn <b>" || !slices.Equal(p.SequenceNumbers, []int64{2}) {
		t.Errorf("audit entry %+v, params %s", e, e.Params)
	}

	// A deferred message is not cancelled: the page says why, a POST is a 422.
	did := fx.id("prod-eu deferred")
	status, body = fx.as(t, "admins", "GET", "/messages/"+did+"/cancel", "", "")
	if status != 200 || !strings.Contains(body, `data-testid="cancel-not-scheduled"`) || strings.Contains(body, `data-testid="cancel-form"`) {
		t.Errorf("cancel page of a deferred message: %d", status)
	}
	status, _ = fx.as(t, "admins", "POST", "/messages/"+did+"/cancel", formType, "reason=x")
	if status != http.StatusUnprocessableEntity {
		t.Errorf("cancelling a deferred message: %d, want 422", status)
	}
}

// Only admins cancel, in the message's namespace, on the pages and the
// API: every refusal is a 403 that cancels nothing and is audited.
func TestCancelScheduledRefusals(t *testing.T) {
	fx := newInventoryFixture(t)
	eu, us := fx.id("prod-eu scheduled"), fx.id("prod-us scheduled")
	for _, tt := range []struct{ group, method, target, ct, body string }{
		{"ops", "GET", "/messages/" + eu + "/cancel", "", ""},
		{"ops", "POST", "/messages/" + eu + "/cancel", formType, "reason=x"},
		{"support", "POST", "/messages/" + eu + "/cancel", formType, "reason=x"},
		{"ops", "POST", "/api/v1/scheduled/cancel", "application/json", `{"ids":["` + eu + `"],"reason":"x"}`},
		{"eu-admins", "GET", "/messages/" + us + "/cancel", "", ""},
		{"eu-admins", "POST", "/messages/" + us + "/cancel", formType, "reason=x"},
		{"eu-admins", "POST", "/api/v1/scheduled/cancel", "application/json", `{"ids":["` + eu + `","` + us + `"],"reason":"x"}`},
		{"eu-admins", "POST", "/api/v1/scheduled/cancel", "application/json", `{"entity":"orders","namespace":"prod-us","sequence_numbers":[2],"reason":"x"}`},
	} {
		status, body := fx.as(t, tt.group, tt.method, tt.target, tt.ct, tt.body)
		if status != http.StatusForbidden {
			t.Errorf("%s %s %s as %s: %d, want 403\n%.500s", tt.method, tt.target, tt.body, tt.group, status, body)
		}
		if tt.group == "eu-admins" && !strings.Contains(body, "prod-us") {
			t.Errorf("%s %s as eu-admins: the refusal does not name prod-us:\n%.500s", tt.method, tt.target, body)
		}
	}
	for ns, b := range fx.brokers {
		if c := b.cancelled(); len(c) != 0 {
			t.Errorf("%s's broker cancelled %v after refusals", ns, c)
		}
	}
	if es := fx.entries(t, audit.ActionScheduledCancelled); len(es) != 0 {
		t.Errorf("%d scheduled_cancelled entries after refusals", len(es))
	}
	// One per refusal, but the two API refusals of eu-admins in prod-us,
	// which the guard records once (same actor, route and namespace).
	if es := fx.entries(t, audit.ActionDenied); len(es) != 7 {
		for _, e := range es {
			t.Logf("%s %s", e.Actor, e.Params)
		}
		t.Errorf("%d denied entries, want 7", len(es))
	}

	// The API, as an admin of prod-eu there: by sequence number, with a
	// deferred message's id skipped and said so.
	status, body := fx.as(t, "eu-admins", "POST", "/api/v1/scheduled/cancel", "application/json",
		`{"entity":"orders","namespace":"prod-eu","sequence_numbers":[2],"reason":"no longer needed"}`)
	if status != 200 {
		t.Fatalf("API cancel: %d %s", status, body)
	}
	var out struct {
		Cancelled []struct {
			ID, Namespace, Entity string
			SequenceNumber        int64 `json:"sequence_number"`
		}
		Skipped []struct{ ID, Reason string }
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Cancelled) != 1 || out.Cancelled[0].ID != eu || out.Cancelled[0].Namespace != "prod-eu" || out.Cancelled[0].SequenceNumber != 2 || len(out.Skipped) != 0 {
		t.Errorf("answer %s", body)
	}
	status, body = fx.as(t, "admins", "POST", "/api/v1/scheduled/cancel", "application/json",
		`{"ids":["`+us+`","`+fx.id("prod-us deferred")+`"],"reason":"cleanup"}`)
	if status != 200 || !strings.Contains(body, `"skipped":[{"id":"`+fx.id("prod-us deferred")+`"`) || !strings.Contains(body, "not a scheduled message") {
		t.Errorf("API cancel with a deferred id: %d %s", status, body)
	}
	if c := fx.brokers["prod-us"].cancelled(); !slices.Equal(c, []string{"orders 2"}) {
		t.Errorf("prod-us's broker cancelled %v", c)
	}
	status, body = fx.as(t, "admins", "POST", "/api/v1/scheduled/cancel", "application/json", `{"ids":["`+us+`"]}`)
	if status != http.StatusBadRequest || !strings.Contains(body, `"reason"`) {
		t.Errorf("API cancel without a reason: %d %s", status, body)
	}
}

// The dry run of a subscription's dead letter sent back through its topic
// lists who receives the copy, by name and with what each subscription's
// rules take; the acknowledgement and the refusal name them too.
func TestFanOutListedOnConfirmPage(t *testing.T) {
	fx := newInventoryFixture(t)
	id := fx.id("prod-eu dead letter")
	status, body := fx.as(t, "admins", "POST", "/replays", formType, url.Values{"action": {"replay"}, "id": {id}}.Encode())
	if status != 200 {
		t.Fatalf("dry run: %d", status)
	}
	subs := regexp.MustCompile(`data-testid="plan-subscription" data-name="([^"]*)" data-receives="([^"]*)"`).FindAllStringSubmatch(body, -1)
	var got []string
	for _, m := range subs {
		got = append(got, m[1]+"="+m[2])
	}
	if want := []string{"audit=all", "billing=all", "eu-only=if_filter_matches", "eu-cards=if_filter_matches"}; !slices.Equal(got, want) {
		t.Errorf("subscriptions listed %v, want %v", got, want)
	}
	for _, want := range []string{
		"a copy its filter matches: region = &#39;&lt;eu&gt;&#39;", // escaped
		"I understand: copies sent to the topic payments reach audit, billing and eu-only (every subscription whose filter matches), not only payments/Subscriptions/audit",
		"every copy reaches audit and billing",
		// The correlation filter is evaluated against the one message
		// selected (it has no region): not the copy.
		"not the copy (its filter: region = &#34;EU&#34;)",
		"eu-cards receives none",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the confirm page does not say %q", want)
		}
	}
	if strings.Contains(body, "set acknowledge_fan_out") {
		t.Errorf("the page tells people to set acknowledge_fan_out")
	}
	status, body = fx.as(t, "admins", "POST", "/jobs", formType, url.Values{"action": {"replay"}, "id": {id}}.Encode())
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "(audit, billing and eu-only)") || strings.Contains(body, "set acknowledge_fan_out") {
		t.Errorf("start without the acknowledgement: %d, the refusal must name the subscriptions in the page's words", status)
	}
	// The API's dry run lists them as data.
	status, body = fx.as(t, "admins", "POST", "/api/v1/jobs", "application/json", `{"action":"replay","ids":["`+id+`"],"dry_run":true}`)
	var dr struct {
		Targets []struct {
			FanOut        bool `json:"fan_out"`
			Subscriptions []struct {
				Name, Receives string
				Rules          []struct{ Name, Kind, Filter string }
				Copies         *int
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &dr); err != nil || status != 200 {
		t.Fatalf("API dry run %d: %v %s", status, err, body)
	}
	if len(dr.Targets) != 1 || !dr.Targets[0].FanOut || len(dr.Targets[0].Subscriptions) != 4 ||
		dr.Targets[0].Subscriptions[2].Receives != "if_filter_matches" || dr.Targets[0].Subscriptions[2].Rules[0].Filter != "region = '<eu>'" {
		t.Errorf("API dry run targets %s", body)
	}
	var copies []string
	for _, s := range dr.Targets[0].Subscriptions {
		if s.Copies == nil {
			copies = append(copies, s.Name+"=?")
		} else {
			copies = append(copies, fmt.Sprintf("%s=%d", s.Name, *s.Copies))
		}
	}
	if want := []string{"audit=1", "billing=1", "eu-only=?", "eu-cards=0"}; !slices.Equal(copies, want) {
		t.Errorf("copies %v, want %v", copies, want)
	}
}
