package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// startEmulatorChild runs `dlqdash emulator` in a process of its own (the
// test binary as dlqdash, TestMain) and returns its connection string and
// admin address.
func startEmulatorChild(t *testing.T) (conn, adminAddr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "emulator", "--amqp-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, errOut := &syncBuffer{}, &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	waitFor(t, "the emulator's connection string and admin address", func() bool {
		adminAddr = logAddr(errOut.String(), "emulator admin listening")
		return strings.Contains(out.String(), "\n") && adminAddr != ""
	})
	return strings.TrimSpace(out.String()), adminAddr
}

// TestServeCatalogsOverWebSockets is a catalog over AMQP over WebSockets
// with the real program in two processes: `dlqdash emulator`, and `dlqdash
// serve --servicebus-transport websockets` whose connection string names a
// closed port, so that its AMQP connections can only be the WebSockets at
// /$servicebus/websocket on the emulator's admin listener (--admin-endpoint,
// as Azure serves both on 443). The dead letters the test makes through the
// real SDK (over TCP, to the emulator's AMQP port) reach the API, and the
// status is healthy.
func TestServeCatalogsOverWebSockets(t *testing.T) {
	conn, adminAddr := startEmulatorChild(t)

	client := testClient(t, conn)
	s, err := client.NewSender("queue.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.SendMessage(t.Context(), &azservicebus.Message{Body: []byte(fmt.Sprintf(`{"order":%d}`, i)), MessageID: ptr(fmt.Sprintf("ws-%d", i))}, nil); err != nil {
			t.Fatal(err)
		}
	}
	s.Close(context.Background())
	r, err := client.NewReceiverForQueue("queue.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	deadLetterFrom(t, r, 3, "OverWebSockets", "")
	r.Close(context.Background())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	endpoint, rest, ok := strings.Cut(conn, ";")
	if !ok || !strings.HasPrefix(endpoint, "Endpoint=sb://") {
		t.Fatalf("unexpected connection string %q", conn)
	}
	wsConn := "Endpoint=sb://" + closed + ";" + rest

	db := filepath.Join(t.TempDir(), "catalog.db")
	serve := startChild(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--poll", "100ms",
		"--admin-endpoint", "http://" + adminAddr, "--servicebus-transport", "websockets"},
		envConnectionString+"="+wsConn)
	defer serve.kill()

	type messages struct {
		Messages []struct {
			MessageID        string  `json:"message_id"`
			DeadLetterReason *string `json:"dead_letter_reason"`
		} `json:"messages"`
	}
	var m messages
	waitFor(t, "the three dead letters in the API, cataloged over websockets", func() bool {
		m = messages{}
		serve.api(t, "GET", "/api/v1/messages?entity=queue.1&subqueue=dead_letter", nil, &m)
		return len(m.Messages) == 3
	})
	for _, msg := range m.Messages {
		if !strings.HasPrefix(msg.MessageID, "ws-") || msg.DeadLetterReason == nil || *msg.DeadLetterReason != "OverWebSockets" {
			t.Errorf("cataloged %+v, want ws-* dead-lettered with OverWebSockets", msg)
		}
	}
	var status struct {
		Healthy bool    `json:"healthy"`
		Error   *string `json:"error"`
	}
	if code := serve.api(t, "GET", "/api/v1/status", nil, &status); code != 200 || !status.Healthy {
		t.Errorf("status %d %+v, want healthy", code, status)
	}
	if !strings.Contains(serve.stderr.String(), `"transport":"websockets"`) {
		t.Errorf("serve did not log its transport:\n%s", serve.stderr.String())
	}
}
