package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// slackReceiver is a Slack incoming webhook stand-in on 127.0.0.1: it
// keeps every body it is sent, with when it arrived.
type slackReceiver struct {
	mu   sync.Mutex
	got  []slackPost
	path string
}

type slackPost struct {
	at   time.Time
	text string
	body string
}

func (s *slackReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || r.URL.Path != s.path || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "not a webhook post", http.StatusBadRequest)
		return
	}
	var m struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Text == "" {
		http.Error(w, "invalid_payload", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.got = append(s.got, slackPost{at: time.Now(), text: m.Text, body: string(b)})
	s.mu.Unlock()
	io.WriteString(w, "ok")
}

func (s *slackReceiver) posts() []slackPost {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]slackPost(nil), s.got...)
}

// find returns the first post whose text contains part.
func (s *slackReceiver) find(part string) (slackPost, bool) {
	for _, p := range s.posts() {
		if strings.Contains(p.text, part) {
			return p, true
		}
	}
	return slackPost{}, false
}

// TestAlertsEndToEnd runs the real program, dlqdash serve with a config
// file naming a Slack-format webhook (a receiver in this test), against
// `dlqdash emulator`: a new failure group is told within 5 s of its first
// dead letter, linking under --public-url; a group renamed and marked known
// is silent afterwards, while a group left new that grows the same way is
// told it grows; the history lists what was sent and the answers.
func TestAlertsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the emulator and dlqdash serve")
	}
	dir := t.TempDir()
	emuCfg := filepath.Join(dir, "Config.json")
	if err := os.WriteFile(emuCfg, []byte(`{"UserConfig":{"Namespaces":[{"Name":"ns","Queues":[{"Name":"orders"}]}],"Logging":{"Type":"Console"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	conn, admin := startTestEmulator(t, emuCfg)

	hook := &slackReceiver{path: "/services/T000/B000/XXXXsecretXXXX"}
	srv := httptest.NewServer(hook) // 127.0.0.1
	defer srv.Close()

	cfgFile := filepath.Join(dir, "dlqdash.yaml")
	if err := os.WriteFile(cfgFile, []byte(`namespaces:
  - name: prod
    connection_string_env: SB_PROD
    admin_endpoint: http://`+admin+`
alerts:
  - name: ops-slack
    url_env: OPS_SLACK_URL
    format: slack
    events: [new_group, group_growth]
    growth_per_minute: 5
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, []string{"serve", "--config", cfgFile, "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "dlqdash.db"),
		"--poll", "100ms", "--public-url", "https://dlq.example.test/"},
		"SB_PROD="+conn, "OPS_SLACK_URL="+srv.URL+hook.path, envConnectionString+"=")
	defer c.kill()

	client := testClient(t, conn)
	sender, err := client.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close(context.Background())
	receiver, err := client.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer receiver.Close(context.Background())
	deadLetter := func(n int, reason, desc string) {
		t.Helper()
		for i := range n {
			if err := sender.SendMessage(t.Context(), &azservicebus.Message{Body: []byte(reason + " " + string(rune('a'+i%26)))}, nil); err != nil {
				t.Fatal(err)
			}
		}
		deadLetterFrom(t, receiver, n, reason, desc)
	}

	// A new group, told within 5 s of its first dead letter.
	start := time.Now()
	deadLetter(1, "OrderNotFound", "Order 4711 not found")
	deadLetter(1, "PaymentDeclined", "Card 4242 declined")
	var first slackPost
	waitForWithin(t, 5*time.Second, "a Slack alert of the new group", func() bool {
		var ok bool
		first, ok = hook.find("New failure group: OrderNotFound · Order <n> not found")
		return ok
	})
	t.Logf("the new group's alert arrived %v after its first dead letter", first.at.Sub(start).Round(time.Millisecond))
	var groups struct {
		Groups []struct{ ID, Reason, Name, Status string }
	}
	c.api(t, "GET", "/api/v1/groups", nil, &groups)
	keys := map[string]string{}
	for _, g := range groups.Groups {
		keys[g.Reason] = g.ID
	}
	orders, payments := keys["OrderNotFound"], keys["PaymentDeclined"]
	if orders == "" || payments == "" {
		t.Fatalf("groups %+v", groups)
	}
	if !strings.Contains(first.body, `"blocks"`) || !strings.Contains(first.body, "<https://dlq.example.test/groups/"+orders+"|") {
		t.Errorf("the Slack body does not link to the group's page: %s", first.body)
	}
	waitForWithin(t, 5*time.Second, "the second group's alert", func() bool {
		_, ok := hook.find("New failure group: PaymentDeclined")
		return ok
	})

	// Renamed and marked known: silent from now on.
	var patched struct{ Name, Status string }
	if code := c.api(t, "PATCH", "/api/v1/groups/"+url.PathEscape(orders), map[string]any{"name": "Orders deleted upstream", "status": "known"}, &patched); code != 200 ||
		patched.Name != "Orders deleted upstream" || patched.Status != "known" {
		t.Fatalf("patch: %d %+v", code, patched)
	}
	before := len(hook.posts())

	// Both groups grow the same way, once the alert loop has watched them
	// long enough to measure a rate (a tenth of its one-minute window).
	time.Sleep(time.Until(start.Add(7 * time.Second)))
	deadLetter(12, "OrderNotFound", "Order 4712 not found")
	deadLetter(12, "PaymentDeclined", "Card 4343 declined")
	waitForWithin(t, 15*time.Second, "the growth alert of the group left new", func() bool {
		_, ok := hook.find("Failure group growing: PaymentDeclined")
		return ok
	})
	time.Sleep(500 * time.Millisecond) // a delivery of the same evaluation still in flight
	for _, p := range hook.posts()[before:] {
		if strings.Contains(p.text, "OrderNotFound") || strings.Contains(p.text, "Orders deleted upstream") {
			t.Errorf("the known group alerted: %s", p.text)
		}
	}

	var hist struct {
		Deliveries []struct {
			Webhook, Host, Event, Subject, Link string
			StatusCode                          int `json:"status_code"`
			OK                                  bool
		}
	}
	c.api(t, "GET", "/api/v1/alerts/deliveries", nil, &hist)
	if len(hist.Deliveries) != len(hook.posts()) {
		t.Errorf("history has %d deliveries, the receiver %d", len(hist.Deliveries), len(hook.posts()))
	}
	for _, d := range hist.Deliveries {
		if !d.OK || d.StatusCode != 200 || d.Webhook != "ops-slack" || d.Host != strings.TrimPrefix(srv.URL, "http://") {
			t.Errorf("delivery %+v", d)
		}
	}
	if logs := c.stderr.String(); strings.Contains(logs, "XXXXsecretXXXX") {
		t.Error("the webhook URL is in the log")
	}
	if _, page := getPage(t, c.addr, "/alerts"); strings.Contains(page, "XXXXsecretXXXX") || !strings.Contains(page, "ops-slack") {
		t.Errorf("the Alerts page: %s", page)
	}
}

func getPage(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
