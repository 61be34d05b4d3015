package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"
)

// sasAuthorization is a SharedAccessSignature header value the way Service
// Bus clients build one: sr is the lower-case query-escaped resource URL, the
// signature HMAC-SHA256 with the key over sr + "\n" + se.
func sasAuthorization(resource, keyName, key string, ttl time.Duration) string {
	sr := strings.ToLower(url.QueryEscape(resource))
	se := fmt.Sprint(time.Now().Add(ttl).Unix())
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(sr + "\n" + se))
	sig := url.QueryEscape(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return fmt.Sprintf("SharedAccessSignature sr=%s&sig=%s&se=%s&skn=%s", sr, sig, se, url.QueryEscape(keyName))
}

// adminFault sends method to http://adminAddr/$emulator/faults<pathQuery>
// with auth as the Authorization header ("" for none) and returns the status
// and body.
func adminFault(t *testing.T, method, adminAddr, pathQuery, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+adminAddr+"/$emulator/faults"+pathQuery, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, req.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func isServerBusy(err error) bool {
	var ae *goamqp.Error
	return errors.As(err, &ae) && ae.Condition == "com.microsoft:server-busy"
}

// TestRunEmulatorFaultInjectionOverAdmin: `dlqdash emulator` takes faults on
// its admin listener, and the real SDK sees them on the AMQP listener.
func TestRunEmulatorFaultInjectionOverAdmin(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"emulator", "--amqp-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json"}, env(), stdout, stderr)
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
	adminAddr := logAddr(stderr.String(), "emulator admin listening")
	if adminAddr == "" {
		t.Fatalf("no admin address logged:\n%s", stderr.String())
	}
	auth := sasAuthorization("http://"+adminAddr+"/", "RootManageSharedAccessKey", "SAS_KEY_VALUE", time.Hour)

	client, err := azservicebus.NewClientFromConnectionString(connStr, &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: 2, RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 40 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	sender, err := client.NewSender("queue.1", nil) // in the built-in sample namespace
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close(context.Background())
	sendCtx, sendCancel := context.WithTimeout(ctx, 20*time.Second)
	defer sendCancel()
	if err := sender.SendMessage(sendCtx, &azservicebus.Message{Body: []byte("warm-up")}, nil); err != nil {
		t.Fatalf("warm-up send: %v", err)
	}

	// Unsigned requests are refused and inject nothing.
	if code, body := adminFault(t, http.MethodPost, adminAddr, "/server-busy?entity=queue.1&for=1h", ""); code != http.StatusUnauthorized {
		t.Fatalf("unsigned POST = %d %s, want 401", code, body)
	}
	if err := sender.SendMessage(sendCtx, &azservicebus.Message{Body: []byte("still fine")}, nil); err != nil {
		t.Fatalf("send after a refused fault request: %v", err)
	}

	if code, body := adminFault(t, http.MethodPost, adminAddr, "/server-busy?entity=queue.1&for=1h", auth); code != http.StatusNoContent {
		t.Fatalf("POST server-busy = %d %s, want 204", code, body)
	}
	if err := sender.SendMessage(sendCtx, &azservicebus.Message{Body: []byte("refused")}, nil); !isServerBusy(err) {
		t.Fatalf("send while busy: %v, want com.microsoft:server-busy", err)
	}
	if code, body := adminFault(t, http.MethodDelete, adminAddr, "", auth); code != http.StatusNoContent {
		t.Fatalf("DELETE faults = %d %s, want 204", code, body)
	}
	if err := sender.SendMessage(sendCtx, &azservicebus.Message{Body: []byte("after clear")}, nil); err != nil {
		t.Fatalf("send after DELETE /$emulator/faults: %v", err)
	}

	// The AMQP-level hooks are wired too (not 501), and the SDK recovers from a drop.
	if code, body := adminFault(t, http.MethodPost, adminAddr, "/drop-connections", auth); code != http.StatusNoContent {
		t.Fatalf("POST drop-connections = %d %s, want 204", code, body)
	}
	if err := sender.SendMessage(sendCtx, &azservicebus.Message{Body: []byte("after drop")}, nil); err != nil {
		t.Fatalf("send after drop-connections: %v", err)
	}
	if code, body := adminFault(t, http.MethodPost, adminAddr, "/latency?d=100ms", auth); code != http.StatusNoContent {
		t.Fatalf("POST latency = %d %s, want 204", code, body)
	}
	start := time.Now()
	if err := sender.SendMessage(sendCtx, &azservicebus.Message{Body: []byte("slow")}, nil); err != nil {
		t.Fatalf("send with latency: %v", err)
	}
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Fatalf("send took %v with 100ms latency", d)
	}
	if code, body := adminFault(t, http.MethodDelete, adminAddr, "", auth); code != http.StatusNoContent {
		t.Fatalf("DELETE faults = %d %s, want 204", code, body)
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

func TestEmulatorHelpDocumentsFaults(t *testing.T) {
	_, err := parseConfig([]string{"emulator", "-h"}, env())
	var h *helpRequest
	if !errors.As(err, &h) {
		t.Fatalf("emulator -h = %v, want help", err)
	}
	for _, w := range []string{"Fault injection", "/$emulator/faults/server-busy?entity=", "/$emulator/faults/expire-locks",
		"/$emulator/faults/drop-connections", "/$emulator/faults/latency?d=", "DELETE /$emulator/faults", "SharedAccessSignature", "openssl"} {
		if !strings.Contains(h.text, w) {
			t.Errorf("emulator help lacks %q", w)
		}
	}
}
