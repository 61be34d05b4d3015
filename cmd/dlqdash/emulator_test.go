package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// toAdmin sends the admin client's requests, which always go to
// https://<namespace>/, to the emulator's admin listener instead.
type toAdmin struct{ addr string }

func (a toAdmin) Do(req *http.Request) (*http.Response, error) {
	req.URL.Scheme, req.URL.Host = "http", a.addr
	return http.DefaultClient.Do(req)
}

// logAddr returns the addr of the first JSON log line with message msg.
func logAddr(logs, msg string) string {
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == msg {
			return line.Addr
		}
	}
	return ""
}

func TestRunEmulatorServesSDKAndAdminClients(t *testing.T) {
	cfgFile := filepath.Join(t.TempDir(), "Config.json")
	err := os.WriteFile(cfgFile, []byte(`{"UserConfig":{"Namespaces":[{"Name":"sbemulatorns",
		"Queues":[{"Name":"invoices","Properties":{"MaxDeliveryCount":4}}],
		"Topics":[{"Name":"events","Subscriptions":[{"Name":"audit"}]}]}],"Logging":{"Type":"Console"}}}`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"emulator", "--amqp-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--config", cfgFile, "--log-format", "json"}, env(), stdout, stderr)
	}()
	waitFor(t, "the connection string on stdout", func() bool {
		select {
		case code := <-done:
			t.Fatalf("emulator exited early with %d:\n%s", code, stderr.String())
		default:
		}
		return strings.Contains(stdout.String(), "\n")
	})
	connStr := strings.TrimSpace(stdout.String())
	if !strings.HasPrefix(connStr, "Endpoint=sb://localhost:") || !strings.HasSuffix(connStr, "SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;") {
		t.Fatalf("connection string = %q", connStr)
	}

	// The real SDK sends to and receives from the configured queue.
	client, err := azservicebus.NewClientFromConnectionString(connStr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	sender, err := client.NewSender("invoices", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sender.SendMessage(ctx, &azservicebus.Message{Body: []byte("hello")}, nil); err != nil {
		t.Fatalf("send: %v", err)
	}
	receiver, err := client.NewReceiverForQueue("invoices", nil)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	msgs, err := receiver.ReceiveMessages(rctx, 1, nil)
	rcancel()
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "hello" {
		t.Fatalf("receive: %v, %d messages", err, len(msgs))
	}
	if err := receiver.CompleteMessage(ctx, msgs[0], nil); err != nil {
		t.Fatalf("complete: %v", err)
	}

	// The admin client, through a transport, sees the configured entities.
	adminAddr := logAddr(stderr.String(), "emulator admin listening")
	if adminAddr == "" {
		t.Fatalf("no admin address logged:\n%s", stderr.String())
	}
	ac, err := admin.NewClientFromConnectionString(connStr, &admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: toAdmin{adminAddr}}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := ac.GetQueue(ctx, "invoices", nil)
	if err != nil || q == nil || q.MaxDeliveryCount == nil || *q.MaxDeliveryCount != 4 {
		t.Fatalf("GetQueue(invoices) = %+v, %v", q, err)
	}
	sub, err := ac.GetSubscription(ctx, "events", "audit", nil)
	if err != nil || sub == nil {
		t.Fatalf("GetSubscription(events, audit) = %+v, %v", sub, err)
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit code %d after cancel:\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("emulator did not stop after its context was cancelled")
	}
}

func TestRunEmulatorBadConfigIsOneLine(t *testing.T) {
	cfgFile := filepath.Join(t.TempDir(), "Config.json")
	if err := os.WriteFile(cfgFile, []byte("{\"UserConfig\": {\n  \"Namespaces\": [ }\n}"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"emulator", "--amqp-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--config", cfgFile}, env(), &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit code = %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "dlqdash: emulator configuration: ") || !strings.Contains(last, "Config.json:2:") {
		t.Errorf("last stderr line = %q, want the configuration error with its line", last)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", stdout.String())
	}
}
