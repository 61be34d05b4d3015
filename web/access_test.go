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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/views"
)

// accessFixture: two namespaces (prod-eu with 2 dead letters in orders,
// prod-us with 3), the real replay engine over the real store (its broker
// knows orders; jobs are not run), proxy sign-in from 10.0.0.0/8, and the
// access rules of the issue:
//
//	sre-eu:    operators of prod-eu, viewers of prod-us
//	eu-readers: viewers of prod-eu only (no role in prod-us)
//	outsiders: viewers by their group, with no role in any namespace
//	platform:  admins everywhere (no rule)
type accessFixture struct {
	st     *store.Store
	log    *audit.Log
	eng    *replay.Engine
	h      http.Handler
	hub    *Hub
	srv    *Server
	ids    map[string][]int64 // message ids by namespace
	logs   *bytes.Buffer
	policy auth.Policy
}

var accessMapping = auth.Mapping{Admin: []string{"platform"}, Operator: []string{"sre-eu"}, Viewer: []string{"eu-readers", "outsiders"}}

var accessRules = []auth.Rule{
	{Group: "sre-eu", Role: auth.Operator, Namespaces: []string{"prod-eu"}},
	{Group: "sre-eu", Role: auth.Viewer, Namespaces: []string{"prod-us"}},
	{Group: "eu-readers", Role: auth.Viewer, Namespaces: []string{"prod-eu"}},
	{Group: "outsiders", Role: auth.NoRole, Namespaces: []string{auth.AllNamespaces}},
}

func newAccessFixture(t *testing.T, rules []auth.Rule) *accessFixture {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "access.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fx := &accessFixture{st: st, ids: map[string][]int64{}, logs: &bytes.Buffer{}}
	for i, name := range []string{"prod-eu", "prod-us"} {
		ns := st.Namespace(name)
		if _, err := ns.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, t0); err != nil {
			t.Fatal(err)
		}
		var msgs []dlq.Message
		for j := range 2 + i {
			msgs = append(msgs, dlq.Message{SequenceNumber: int64(j + 1), State: dlq.StateActive,
				MessageID: fmt.Sprintf("%s-%d", name, j), EnqueuedAt: ptr(t0.Add(time.Duration(j) * time.Second)),
				DeadLetterReason: ptr("SqlTimeout")})
		}
		res, err := ns.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Through: math.MaxInt64,
			Messages: msgs, SeenAt: t0})
		if err != nil {
			t.Fatal(err)
		}
		fx.ids[name] = res.New
	}
	fx.log = audit.New(st)
	fx.eng, err = replay.New(replay.Config{Store: st, Audit: fx.log,
		Brokers: func(ns string) (replay.Broker, error) {
			if ns == "prod-eu" || ns == "prod-us" {
				return fuzzBroker{}, nil
			}
			return nil, fmt.Errorf("no namespace %q", ns)
		}})
	if err != nil {
		t.Fatal(err)
	}
	// 127.0.0.0/8: httptest's peer, for the websocket test.
	prefixes, _ := auth.ParsePrefixes("10.0.0.0/8,127.0.0.0/8")
	fx.policy = auth.Policy{Mapping: accessMapping, Rules: rules}
	fx.hub = NewHub(HubConfig{Catalog: st, Namespaces: []string{"prod-eu", "prod-us"}})
	hctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); fx.hub.Run(hctx) }()
	t.Cleanup(func() { cancel(); <-done })
	fx.srv = New(Config{Logger: slog.New(slog.NewTextHandler(fx.logs, nil)), Catalog: st, Audit: st, AuditLog: fx.log, Jobs: fx.eng,
		Hub: fx.hub, Namespaces: []string{"prod-eu", "prod-us"}, Access: fx.policy,
		MetricsHandler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("dlqdash_up 1\n")) }),
		Auth:           auth.New(auth.Config{Mode: auth.ModeProxy, Mapping: accessMapping, Store: st, TrustedProxies: prefixes})})
	fx.h = fx.srv.Handler()
	return fx
}

// as sends a request through the trusted proxy as user of groups.
func (fx *accessFixture) as(t *testing.T, user, groups, method, target, contentType, body string) (int, string) {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), method, target, strings.NewReader(body))
	r.RemoteAddr = "10.1.2.3:40000"
	r.Header.Set("X-Forwarded-User", user)
	r.Header.Set("X-Forwarded-Groups", groups)
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	if method == http.MethodPost && contentType == "application/x-www-form-urlencoded" {
		r.Header.Set("Origin", "http://example.com")
	}
	res, b := do(t, fx.h, r)
	return res.StatusCode, b
}

func (fx *accessFixture) id(ns string, i int) string { return strconv.FormatInt(fx.ids[ns][i], 10) }

// jobAs creates a job as an unlimited admin (platform) and returns its id.
func (fx *accessFixture) jobAs(t *testing.T, body string) string {
	t.Helper()
	code, b := fx.as(t, "pat", "platform", "POST", "/api/v1/jobs", "application/json", body)
	if code != http.StatusCreated {
		t.Fatalf("admin's job %s: %d %s", body, code, b)
	}
	var j struct{ ID string }
	json.Unmarshal([]byte(b), &j)
	return j.ID
}

func apiErr(t *testing.T, body string) (code, msg string) {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("not the error shape: %s", body)
	}
	return e.Error.Code, e.Error.Message
}

// An operator of prod-eu who is a viewer of prod-us: views both, replays
// in eu, is refused (403, in words naming the namespace and the role) when
// replaying, discarding or controlling jobs in us, or sending eu's
// messages into us; each refusal is audited with the namespace.
func TestAccessOperatorOfOneNamespace(t *testing.T) {
	fx := newAccessFixture(t, accessRules)
	ana := func(method, target, ct, body string) (int, string) {
		return fx.as(t, "ana", "sre-eu", method, target, ct, body)
	}
	// Views both.
	code, body := ana("GET", "/api/v1/messages", "", "")
	if code != 200 || strings.Count(body, `"namespace":"prod-eu"`) != 2 || strings.Count(body, `"namespace":"prod-us"`) != 3 {
		t.Fatalf("messages: %d %s", code, body)
	}
	if code, body := ana("GET", "/api/v1/messages/"+fx.id("prod-us", 0), "", ""); code != 200 {
		t.Errorf("a prod-us message: %d %s", code, body)
	}
	// Replays in eu.
	if code, body := ana("POST", "/api/v1/jobs", "application/json", `{"action":"replay","ids":["`+fx.id("prod-eu", 0)+`"]}`); code != 201 {
		t.Fatalf("replay in prod-eu: %d %s", code, body)
	}
	// Refused in us: the API, a dry run, a discard, a filter spanning both.
	for _, req := range []struct{ name, body, words string }{
		{"replay", `{"action":"replay","ids":["` + fx.id("prod-us", 0) + `"]}`, "you are a viewer in prod-us; replaying there needs operator"},
		{"dry run", `{"action":"replay","dry_run":true,"ids":["` + fx.id("prod-us", 1) + `"]}`, "you are a viewer in prod-us; replaying there needs operator"},
		{"discard", `{"action":"discard","reason":"x","ids":["` + fx.id("prod-us", 2) + `"]}`, "you are a viewer in prod-us; discarding there needs operator"},
		{"filter over both", `{"action":"replay","filter":{"entity":"orders"}}`, "you are a viewer in prod-us; replaying there needs operator"},
		{"filter of us", `{"action":"replay","filter":{"namespace":"prod-us","entity":"orders"}}`, "you are a viewer in prod-us"},
		{"eu into us", `{"action":"replay","ids":["` + fx.id("prod-eu", 1) + `"],"destination_namespace":"prod-us"}`,
			"you are a viewer in prod-us; replaying there into it needs operator"},
	} {
		code, body := ana("POST", "/api/v1/jobs", "application/json", req.body)
		c, msg := apiErr(t, body)
		if code != 403 || c != "permission_denied" || !strings.Contains(msg, req.words) {
			t.Errorf("%s: %d %s, want 403 saying %q", req.name, code, body, req.words)
		}
	}
	// The form: the confirm page (a dry run) and the start.
	form := url.Values{"action": {"replay"}, "id": {fx.id("prod-us", 0)}}.Encode()
	for _, path := range []string{"/replays", "/jobs"} {
		code, body := ana("POST", path, "application/x-www-form-urlencoded", form)
		if code != 403 || !strings.Contains(body, "you are a viewer in prod-us; replaying there needs operator") ||
			strings.Contains(body, "prod-us-0") {
			t.Errorf("form %s: %d\n%.3000s", path, code, body)
		}
	}
	// Jobs of us: pause and cancel refused; eu's job paused.
	usJob := fx.jobAs(t, `{"action":"replay","ids":["`+fx.id("prod-us", 1)+`"]}`)
	for _, verb := range []string{"pause", "cancel"} {
		code, body := ana("POST", "/api/v1/jobs/"+usJob+"/"+verb, "", "")
		if _, msg := apiErr(t, body); code != 403 || !strings.Contains(msg, "you are a viewer in prod-us; controlling its jobs needs operator") {
			t.Errorf("%s a prod-us job: %d %s", verb, code, body)
		}
		code, body = ana("POST", "/jobs/"+usJob+"/"+verb, "application/x-www-form-urlencoded", "")
		if code != 403 || !strings.Contains(body, "prod-us") {
			t.Errorf("%s a prod-us job from its page: %d %.500s", verb, code, body)
		}
	}
	if j, _ := fx.eng.Job(t.Context(), mustInt(t, usJob)); j.Status.Finished() || j.Status == replay.StatusPaused {
		t.Errorf("the refused controls changed the job: %s", j.Status)
	}
	euJob := fx.jobAs(t, `{"action":"replay","ids":["`+fx.id("prod-eu", 1)+`"]}`)
	if code, body := ana("POST", "/api/v1/jobs/"+euJob+"/cancel", "", ""); code != 200 {
		t.Errorf("cancel a prod-eu job: %d %s", code, body)
	}
	// The job page of us: no controls; the message page of us: replay
	// buttons off; of eu: on.
	if code, body := ana("GET", "/jobs/"+usJob, "", ""); code != 200 || strings.Contains(body, `data-testid="job-pause"`) {
		t.Errorf("prod-us job page: %d, controls shown: %v", code, strings.Contains(body, `data-testid="job-pause"`))
	}
	if _, body := ana("GET", "/messages/"+fx.id("prod-us", 2), "", ""); strings.Contains(body, `data-testid="message-replay"`) {
		t.Errorf("prod-us message page offers replay")
	}
	if _, body := ana("GET", "/messages/"+fx.id("prod-eu", 1), "", ""); !strings.Contains(body, `data-testid="message-replay"`) {
		t.Errorf("prod-eu message page offers no replay")
	}

	// Audited as denied entries with the namespace, and the audit API
	// shows it at the top level and filters by it.
	denied := 0
	if err := fx.log.Scan(t.Context(), audit.Filter{Action: audit.ActionDenied}, func(e audit.Entry) error {
		var p map[string]any
		json.Unmarshal(e.Params, &p)
		if p["namespace"] != "prod-us" || p["role"] != "viewer" || p["required_role"] != "operator" || e.Actor != "proxy:ana" {
			t.Errorf("denied entry %s", e.Params)
		}
		denied++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Rate-limited per actor, route and namespace: POST /api/v1/jobs,
	// POST /replays, POST /jobs, the two API controls and the two page ones.
	if denied != 7 {
		t.Errorf("%d denied entries, want 7 (one per route in prod-us)", denied)
	}
	code, body = ana("GET", "/api/v1/audit?namespace=prod-us&action=denied", "", "")
	var list struct {
		Entries []struct {
			Namespace *string
			Action    string
		}
	}
	json.Unmarshal([]byte(body), &list)
	if code != 200 || len(list.Entries) != 7 || list.Entries[0].Namespace == nil || *list.Entries[0].Namespace != "prod-us" {
		t.Errorf("audit of prod-us: %d %s", code, body)
	}
	code, body = ana("GET", "/api/v1/audit?namespace=prod-eu", "", "")
	json.Unmarshal([]byte(body), &list)
	if code != 200 || len(list.Entries) == 0 {
		t.Fatalf("audit of prod-eu: %d %s", code, body)
	}
	for _, e := range list.Entries {
		if e.Namespace == nil || *e.Namespace != "prod-eu" {
			t.Errorf("audit of prod-eu holds %+v", e)
		}
	}
	if code, body := ana("GET", "/audit?namespace=prod-us", "", ""); code != 200 || !strings.Contains(body, `data-testid="audit-entry-namespace">in prod-us<`) {
		t.Errorf("audit page of prod-us: %d", code)
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A job from eu into us, made by an admin: the eu operator may pause it
// (operator where its messages are) but not resume it (it sends into us).
func TestAccessCrossNamespaceJob(t *testing.T) {
	fx := newAccessFixture(t, accessRules)
	id := fx.jobAs(t, `{"action":"replay","ids":["`+fx.id("prod-eu", 0)+`"],"destination_namespace":"prod-us"}`)
	if code, body := fx.as(t, "ana", "sre-eu", "POST", "/api/v1/jobs/"+id+"/pause", "", ""); code != 200 {
		t.Fatalf("pause: %d %s", code, body)
	}
	code, body := fx.as(t, "ana", "sre-eu", "POST", "/api/v1/jobs/"+id+"/resume", "", "")
	if _, msg := apiErr(t, body); code != 403 || !strings.Contains(msg, "you are a viewer in prod-us; resuming a job that replays into it needs operator") {
		t.Errorf("resume: %d %s", code, body)
	}
}

// A viewer of prod-eu with no role in prod-us: every list leaves prod-us
// out (groups count eu only), asking for it is a 403, and its messages and
// jobs are refused by id.
func TestAccessListsHideANamespace(t *testing.T) {
	fx := newAccessFixture(t, accessRules)
	usJob := fx.jobAs(t, `{"action":"replay","ids":["`+fx.id("prod-us", 0)+`"]}`)
	euJob := fx.jobAs(t, `{"action":"replay","ids":["`+fx.id("prod-eu", 0)+`"]}`)
	bo := func(target string) (int, string) { return fx.as(t, "bo", "eu-readers", "GET", target, "", "") }
	for _, c := range []struct {
		target string
		eu     int
	}{
		{"/api/v1/messages", 2}, {"/api/v1/entities", 1}, {"/api/v1/jobs", 1},
	} {
		code, body := bo(c.target)
		if code != 200 || strings.Contains(body, "prod-us") || strings.Count(body, `"namespace":"prod-eu"`) != c.eu {
			t.Errorf("%s: %d %s", c.target, code, body)
		}
	}
	code, body := bo("/api/v1/groups")
	var gs struct {
		Groups []struct {
			Count      int64
			Namespaces []struct{ Name string }
		}
	}
	json.Unmarshal([]byte(body), &gs)
	if code != 200 || len(gs.Groups) != 1 || gs.Groups[0].Count != 2 || len(gs.Groups[0].Namespaces) != 1 || gs.Groups[0].Namespaces[0].Name != "prod-eu" {
		t.Errorf("groups: %d %s", code, body)
	}
	for _, target := range []string{"/api/v1/messages?namespace=prod-us", "/api/v1/messages/" + fx.id("prod-us", 0),
		"/api/v1/messages/" + fx.id("prod-us", 0) + "/body", "/api/v1/jobs/" + usJob, "/api/v1/jobs/" + usJob + "/messages",
		"/api/v1/entities?namespace=prod-us", "/api/v1/groups?namespace=prod-us", "/api/v1/jobs?namespace=prod-us",
		"/api/v1/audit?namespace=prod-us"} {
		code, body := bo(target)
		if _, msg := apiErr(t, body); code != 403 || !strings.Contains(msg, "you have no role in prod-us") {
			t.Errorf("%s: %d %s", target, code, body)
		}
	}
	if code, _ := bo("/api/v1/jobs/" + euJob); code != 200 {
		t.Errorf("an eu job: %d", code)
	}
	// The pages.
	for _, target := range []string{"/", "/messages", "/groups", "/jobs", "/inventory", "/audit"} {
		code, body := bo(target)
		if code != 200 || strings.Contains(body, "prod-us") {
			t.Errorf("page %s: %d, shows prod-us: %v", target, code, strings.Contains(body, "prod-us"))
		}
	}
	// The list's count fragment counts what the list shows, and refuses
	// a namespace the list refuses.
	if code, body := bo("/messages/count"); code != 200 || !strings.Contains(body, `<strong data-testid="matching-count">2</strong>`) {
		t.Errorf("count fragment: %d %s", code, body)
	}
	if code, body := bo("/messages/count?namespace=prod-us"); code != 403 || !strings.Contains(body, "you have no role in prod-us") {
		t.Errorf("count fragment of prod-us: %d %s", code, body)
	}
	// The audit API: the us job's creation is hidden, the eu one's shown.
	code, body = bo("/api/v1/audit")
	if code != 200 || strings.Contains(body, "prod-us") || !strings.Contains(body, `"namespace":"prod-eu"`) {
		t.Errorf("audit: %d %s", code, body)
	}
	// The audit's actions and export: the same, and an action of prod-us
	// is not found.
	for _, target := range []string{"/api/v1/audit/actions", "/api/v1/audit/export", "/api/v1/audit/export?format=csv"} {
		if code, body := bo(target); code != 200 || strings.Contains(body, "prod-us") || !strings.Contains(body, "prod-eu") {
			t.Errorf("%s: %d %s", target, code, body)
		}
	}
	for _, target := range []string{"/api/v1/audit/actions?namespace=prod-us", "/api/v1/audit/export?namespace=prod-us"} {
		if code, body := bo(target); code != 403 || !strings.Contains(body, "you have no role in prod-us") {
			t.Errorf("%s: %d %s", target, code, body)
		}
	}
	var usActions struct {
		Actions []struct{ ID int64 } `json:"actions"`
	}
	if code, body := fx.as(t, "pat", "platform", "GET", "/api/v1/audit/actions?job="+usJob, "", ""); code != 200 {
		t.Fatalf("admin's actions of job %s: %d %s", usJob, code, body)
	} else if json.Unmarshal([]byte(body), &usActions); len(usActions.Actions) == 0 {
		t.Fatalf("no actions of job %s: %s", usJob, body)
	}
	usAction := strconv.FormatInt(usActions.Actions[len(usActions.Actions)-1].ID, 10)
	for _, target := range []string{"/api/v1/audit/actions/" + usAction + "/messages", "/audit/actions/" + usAction} {
		if code, _ := bo(target); code != 404 {
			t.Errorf("%s (prod-us): %d, want 404", target, code)
		}
		if code, _ := fx.as(t, "pat", "platform", "GET", target, "", ""); code != 200 {
			t.Errorf("%s for the admin: %d", target, code)
		}
	}
	// The metrics cover every namespace: refused to bo, given to ana.
	if code, body := bo("/metrics"); code != 403 || !strings.Contains(body, "you have no role in prod-us") {
		t.Errorf("metrics for the viewer of prod-eu: %d %s", code, body)
	}
	if code, _ := fx.as(t, "ana", "sre-eu", "GET", "/metrics", "", ""); code != 200 {
		t.Errorf("metrics for the viewer of both: %d", code)
	}
	// The message list of prod-us says why it offers no replay.
	if _, body := fx.as(t, "ana", "sre-eu", "GET", "/messages?namespace=prod-us", "", ""); !strings.Contains(body, "you are a viewer in prod-us.") {
		t.Errorf("prod-us message list note missing")
	}
	// Who may view both sees both (the admin, no rule).
	if code, body := fx.as(t, "pat", "platform", "GET", "/api/v1/messages", "", ""); code != 200 || strings.Count(body, `"namespace":"prod-us"`) != 3 {
		t.Errorf("admin's messages: %d %s", code, body)
	}
}

// Without access rules a namespace-limited group does not exist: the same
// identity is an operator everywhere, as before.
func TestAccessWithoutRulesChangesNothing(t *testing.T) {
	fx := newAccessFixture(t, nil)
	code, body := fx.as(t, "ana", "sre-eu", "POST", "/api/v1/jobs", "application/json", `{"action":"replay","ids":["`+fx.id("prod-us", 0)+`"]}`)
	if code != 201 {
		t.Errorf("replay in prod-us without rules: %d %s", code, body)
	}
	if code, body := fx.as(t, "bo", "eu-readers", "GET", "/api/v1/messages", "", ""); code != 200 || strings.Count(body, `"namespace":"prod-us"`) != 3 {
		t.Errorf("messages without rules: %d %s", code, body)
	}
}

// The websocket sends nothing of a namespace the identity may not view:
// new message rows, changed rows and job updates of prod-us reach the
// viewer of both and not the viewer of prod-eu only.
func TestAccessLiveHidesANamespace(t *testing.T) {
	fx := newAccessFixture(t, accessRules)
	srv := httptest.NewServer(fx.h)
	t.Cleanup(srv.Close)
	dial := func(groups, query string) *websocket.Conn {
		t.Helper()
		before := fx.hub.clientCount()
		h := http.Header{"X-Forwarded-User": {"u-" + groups}, "X-Forwarded-Groups": {groups}}
		conn, res, err := websocket.DefaultDialer.DialContext(t.Context(), wsURL(srv, query), h)
		if err != nil {
			t.Fatalf("dial %s as %s: %v %v", query, groups, err, res)
		}
		t.Cleanup(func() { conn.Close() })
		waitUntil(t, "the connection to register", func() bool { return fx.hub.clientCount() > before })
		return conn
	}
	euOnly := dial("eu-readers", "page=messages&first=1")
	none := dial("outsiders", "page=messages&first=1")
	both := dial("sre-eu", "page=messages&first=1")
	euJobs := dial("eu-readers", "page=jobs&first=1")
	bothJobs := dial("sre-eu", "page=jobs&first=1")

	// A new message in prod-us, then one in prod-eu.
	add := func(ns, mid string, seq int64) int64 {
		res, err := fx.st.Namespace(ns).ApplyPage(t.Context(), dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Through: math.MaxInt64,
			Messages: []dlq.Message{{SequenceNumber: seq, State: dlq.StateActive, MessageID: mid, EnqueuedAt: ptr(t0.Add(time.Hour)),
				DeadLetterReason: ptr("SqlTimeout")}}, SeenAt: t0})
		if err != nil || len(res.New) != 1 {
			t.Fatalf("add %s: %v %v", mid, res, err)
		}
		fx.hub.Publish(dlq.Change{Kind: dlq.ChangeNew, Namespace: ns, Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, IDs: res.New})
		return res.New[0]
	}
	usID := add("prod-us", "us-new", 100)
	if op := until(t, both, views.FragmentID("message-rows", "")); !strings.Contains(op.HTML, "us-new") {
		t.Errorf("the viewer of both got %+v", op)
	}
	add("prod-eu", "eu-new", 100)
	op := until(t, euOnly, views.FragmentID("message-rows", ""))
	if strings.Contains(op.HTML, "us-new") || !strings.Contains(op.HTML, "eu-new") {
		t.Errorf("the viewer of prod-eu got %+v", op)
	}
	// A changed prod-us row goes to the viewer of both only.
	fx.hub.Publish(dlq.Change{Kind: dlq.ChangeUpdated, Namespace: "prod-us", Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, IDs: []int64{usID}})
	if op := until(t, both, views.FragmentID("message", strconv.FormatInt(usID, 10))); !strings.Contains(op.HTML, "us-new") {
		t.Errorf("changed row to the viewer of both: %+v", op)
	}

	// Job updates: a prod-us job reaches the viewer of both only; then a
	// prod-eu job reaches both, and is the first the eu-only page gets.
	usJob := replay.Job{ID: 501, Action: replay.ActionReplay, Status: replay.StatusRunning, Namespace: "prod-us", CreatedBy: "proxy:pat",
		CreatedAt: t0, Total: 1}
	fx.hub.PublishJob(usJob)
	if op := until(t, bothJobs, views.FragmentID("job", "501")); op.Op != "replace" {
		t.Errorf("us job to the viewer of both: %+v", op)
	}
	euJob := usJob
	euJob.ID, euJob.Namespace = 502, "prod-eu"
	fx.hub.PublishJob(euJob)
	for {
		op := next(t, euJobs)
		if strings.Contains(op.ID, "501") || strings.Contains(op.HTML, "prod-us") {
			t.Fatalf("the eu-only jobs page got the prod-us job: %+v", op)
		}
		if op.ID == views.FragmentID("job", "502") {
			break
		}
	}
	// And the eu-only message list got nothing of prod-us, the list of
	// someone with no namespace nothing at all: what is left to read
	// (within a short wait) has no such row.
	for _, c := range []struct {
		conn *websocket.Conn
		not  []string
	}{{euOnly, []string{"us-new", "prod-us"}}, {none, []string{"us-new", "eu-new", "prod-"}}} {
		c.conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		for {
			_, b, err := c.conn.ReadMessage()
			if err != nil {
				break
			}
			for _, s := range c.not {
				if bytes.Contains(b, []byte(s)) {
					t.Fatalf("a list got %s", b)
				}
			}
		}
	}
	// The list of someone with no namespace shows no message at all.
	if code, body := fx.as(t, "oz", "outsiders", "GET", "/api/v1/messages", "", ""); code != 200 || strings.Contains(body, "prod-") {
		t.Errorf("messages of one with no namespace: %d %s", code, body)
	}
}

// A bulk edit reads every selected message's body for its diff: with
// access rules it needs admin in each message's namespace before any diff
// is worked out, and the refusal shows nothing of the messages.
func TestAccessBulkEditPerNamespace(t *testing.T) {
	fx := newAccessFixture(t, []auth.Rule{
		{Group: "platform", Role: auth.Admin, Namespaces: []string{"prod-eu"}},
		{Group: "platform", Role: auth.Viewer, Namespaces: []string{"prod-us"}},
	})
	edit := func(id string) (int, string) {
		return fx.as(t, "pat", "platform", "POST", "/api/v1/jobs", "application/json",
			`{"action":"replay","ids":["`+id+`"],"dry_run":true,"edit":{"replace":[{"find":"x","with":"y"}]}}`)
	}
	if code, body := edit(fx.id("prod-eu", 0)); code != 200 || !strings.Contains(body, `"edit"`) {
		t.Errorf("bulk edit in prod-eu: %d %s", code, body)
	}
	code, body := edit(fx.id("prod-us", 0))
	if _, msg := apiErr(t, body); code != 403 || !strings.Contains(msg, "you are a viewer in prod-us; editing and replaying there needs admin") {
		t.Errorf("bulk edit in prod-us: %d %s", code, body)
	}
	if strings.Contains(body, "body_diff") || strings.Contains(body, "prod-us-0") {
		t.Errorf("the refusal shows the message: %s", body)
	}
	// The confirm page's bulk edit: refused before any diff is shown.
	form := url.Values{"action": {"replay"}, "id": {fx.id("prod-us", 0)}, "edit_find": {"x"}, "edit_with": {"y"}}.Encode()
	code, body = fx.as(t, "pat", "platform", "POST", "/replays", "application/x-www-form-urlencoded", form)
	if code != 403 || !strings.Contains(body, "editing and replaying there needs admin") || strings.Contains(body, "bulk-message") {
		t.Errorf("form bulk edit in prod-us: %d\n%.3000s", code, body)
	}
}

// A failure group seen in two namespaces lists, to a reader of one, only
// the entities of that one: another namespace's entity paths are not
// shown in the group's entities.
func TestAccessGroupEntitiesOfVisibleNamespaces(t *testing.T) {
	fx := newAccessFixture(t, accessRules)
	ctx := t.Context()
	us := fx.st.Namespace("prod-us")
	if _, err := us.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}, {Path: "us-secret-ledger", Kind: dlq.KindQueue}}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := us.ApplyPage(ctx, dlq.Page{Entity: "us-secret-ledger", SubQueue: dlq.SubQueueDeadLetter, Through: math.MaxInt64,
		Messages: []dlq.Message{{SequenceNumber: 1, State: dlq.StateActive, MessageID: "ledger-1", EnqueuedAt: ptr(t0),
			DeadLetterReason: ptr("SqlTimeout")}}, SeenAt: t0}); err != nil {
		t.Fatal(err)
	}
	// Both namespaces' entities for a reader of both; eu's only for bo.
	if code, body := fx.as(t, "ana", "sre-eu", "GET", "/api/v1/groups", "", ""); code != 200 || !strings.Contains(body, "us-secret-ledger") {
		t.Fatalf("groups for a viewer of both: %d %s", code, body)
	}
	for _, target := range []string{"/api/v1/groups", "/groups", "/"} {
		code, body := fx.as(t, "bo", "eu-readers", "GET", target, "", "")
		if code != 200 || strings.Contains(body, "us-secret-ledger") || !strings.Contains(body, "orders") {
			t.Errorf("%s for a viewer of prod-eu: %d, shows the prod-us entity: %v", target, code, strings.Contains(body, "us-secret-ledger"))
		}
	}
}

// Triaging a failure group needs operator in a namespace it was seen in:
// a viewer there (an operator elsewhere) is refused, an operator there may.
func TestAccessTriagePerNamespace(t *testing.T) {
	fx := newAccessFixture(t, accessRules)
	ctx := t.Context()
	us := fx.st.Namespace("prod-us")
	if _, err := us.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}, {Path: "ledger", Kind: dlq.KindQueue}}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := us.ApplyPage(ctx, dlq.Page{Entity: "ledger", SubQueue: dlq.SubQueueDeadLetter, Through: math.MaxInt64,
		Messages: []dlq.Message{{SequenceNumber: 1, State: dlq.StateActive, MessageID: "ledger-1", EnqueuedAt: ptr(t0),
			DeadLetterReason: ptr("OnlyInUS")}}, SeenAt: t0}); err != nil {
		t.Fatal(err)
	}
	gs, err := fx.st.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, g := range gs {
		keys[g.Reason] = g.ID
	}
	patch := func(key string) (int, string) {
		return fx.as(t, "ana", "sre-eu", "PATCH", "/api/v1/groups/"+key, "application/json", `{"status":"investigating"}`)
	}
	code, body := patch(keys["OnlyInUS"])
	if _, msg := apiErr(t, body); code != 403 || !strings.Contains(msg, "you are a viewer in prod-us; triaging its failure groups needs operator") {
		t.Errorf("triage of a prod-us group by a viewer there: %d %s", code, body)
	}
	if code, body := patch(keys["SqlTimeout"]); code != 200 {
		t.Errorf("triage of a group seen in prod-eu by its operator: %d %s", code, body)
	}
}
