package emulatortest_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
)

// echoServer echoes every byte back until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// readWithin reads what arrives within d.
func readWithin(t *testing.T, c net.Conn, n int, d time.Duration) (string, error) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, n)
	got, err := io.ReadFull(c, buf)
	return string(buf[:got]), err
}

func TestProxyFreezeHoldsBytesAndKeepsConnections(t *testing.T) {
	p := emulatortest.StartProxy(t, echoServer(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("one")); err != nil {
		t.Fatal(err)
	}
	if got, err := readWithin(t, c, 3, 2*time.Second); got != "one" {
		t.Fatalf("before the freeze: %q, %v", got, err)
	}

	p.Freeze()
	if _, err := c.Write([]byte("two")); err != nil {
		t.Fatalf("a write to a frozen proxy fails: %v (the socket should stay open)", err)
	}
	if got, err := readWithin(t, c, 3, 300*time.Millisecond); got != "" || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("frozen: read %q, %v; want nothing until the deadline", got, err)
	}
	// A connection opened during the freeze is accepted but not served.
	late, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("dial a frozen proxy: %v", err)
	}
	defer late.Close()
	if _, err := late.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	if got, err := readWithin(t, late, 4, 300*time.Millisecond); got != "" || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("frozen, new connection: read %q, %v; want nothing", got, err)
	}

	p.Thaw()
	if got, err := readWithin(t, c, 3, 2*time.Second); got != "two" {
		t.Fatalf("after the thaw: %q, %v; want the bytes held during the freeze", got, err)
	}
	if got, err := readWithin(t, late, 4, 2*time.Second); got != "late" {
		t.Fatalf("after the thaw, new connection: %q, %v", got, err)
	}
}

// The SDK through a Freezable: a frozen emulator answers nothing (the
// SDK's call runs into its context's deadline), a thawed one carries on
// over the same connection.
func TestFreezableEmulator(t *testing.T) {
	emu := emulatortest.Start(t, emulator.Config{})
	if _, err := emu.Namespace().CreateQueue("orders", broker.DefaultQueueProperties()); err != nil {
		t.Fatal(err)
	}
	fz := emulatortest.StartFreezable(t, emu)
	sb, err := azservicebus.NewClientFromConnectionString(fz.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	s, err := sb.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	send := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
	}
	if err := send(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	fz.Freeze()
	start := time.Now()
	if err := send(500 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("send while frozen: %v, want the deadline exceeded", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("send while frozen took %v", took)
	}
	fz.Thaw()
	if err := send(10 * time.Second); err != nil {
		t.Fatalf("send after the thaw: %v", err)
	}
	if n := emu.Stats().Totals.Send; n < 2 {
		t.Fatalf("the emulator counted %d sends, want at least 2", n)
	}
}

// CloseConnections ends the SDK's connection with the condition given, as
// a broker closing it would.
func TestFreezableCloseConnections(t *testing.T) {
	emu := emulatortest.Start(t, emulator.Config{})
	if _, err := emu.Namespace().CreateQueue("orders", broker.DefaultQueueProperties()); err != nil {
		t.Fatal(err)
	}
	fz := emulatortest.StartFreezable(t, emu)
	if err := fz.Admin().CloseConnections("amqp:not-allowed", "x"); err == nil {
		t.Fatal("CloseConnections on the admin proxy: no error")
	}
	sb, err := azservicebus.NewClientFromConnectionString(fz.ConnectionString(), &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	s, err := sb.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := fz.AMQP().CloseConnections("amqp:not-allowed", "closed by the test"); err != nil {
		t.Fatal(err)
	}
	err = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("y")}, nil)
	var connErr *goamqp.ConnError
	if !errors.As(err, &connErr) || connErr.RemoteErr == nil || connErr.RemoteErr.Condition != goamqp.ErrCondNotAllowed ||
		connErr.RemoteErr.Description != "closed by the test" {
		t.Fatalf("send after CloseConnections: %v, want the connection closed with amqp:not-allowed", err)
	}
}
