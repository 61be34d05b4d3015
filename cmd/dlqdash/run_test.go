package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger
// and reads of a test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond until it is true or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitForWithin(t, 10*time.Second, what, cond)
}

// waitForWithin is waitFor with another limit.
func waitForWithin(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for an event
	}
}

// listenAddr finds the "dashboard listening" JSON log line and returns its addr.
func listenAddr(logs string) string {
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "dashboard listening" {
			return line.Addr
		}
	}
	return ""
}

type started struct {
	addr   string
	stderr *syncBuffer
	stdout *syncBuffer
	cancel context.CancelFunc
	done   chan int
}

// start runs the program in the background with args plus JSON logs and
// waits until it logs its address.
func start(t testing.TB, args []string, getenv func(string) string) *started {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	s := &started{stderr: &syncBuffer{}, stdout: &syncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	go func() { s.done <- run(ctx, append(args, "--log-format", "json"), getenv, s.stdout, s.stderr) }()
	waitFor(t, "the listening log line", func() bool {
		select {
		case code := <-s.done:
			t.Fatalf("run exited early with %d:\n%s", code, s.stderr.String())
		default:
		}
		s.addr = listenAddr(s.stderr.String())
		return s.addr != ""
	})
	return s
}

func (s *started) stop(t *testing.T) int {
	t.Helper()
	s.cancel()
	select {
	case code := <-s.done:
		return code
	case <-time.After(20 * time.Second):
		t.Fatalf("run did not return after its context was cancelled:\n%s", s.stderr.String())
		return -1
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestRunServesAndShutsDownCleanly(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  func(string) string
		want string // on the home page
	}{
		{"demo", []string{"demo"}, env(), ">Live<"},
		{"serve", []string{"serve"}, env(envConnectionString, goodConnStr), "contoso.servicebus.windows.net"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			db := filepath.Join(t.TempDir(), "run.db")
			s := start(t, append(tt.args, "--addr", "127.0.0.1:0", "--db", db), tt.env)

			host, port, err := net.SplitHostPort(s.addr)
			if err != nil || host != "127.0.0.1" || port == "0" {
				t.Fatalf("logged addr %q is not the real address", s.addr)
			}
			if code, body := get(t, "http://"+s.addr+"/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
				t.Fatalf("/healthz = %d %q", code, body)
			}
			// The demo's catalog goes live once its first read of the embedded
			// emulator succeeds.
			var code int
			var body string
			waitFor(t, "the home page to show "+tt.want, func() bool {
				code, body = get(t, "http://"+s.addr+"/")
				return code == 200 && strings.Contains(body, tt.want)
			})

			if code := s.stop(t); code != 0 {
				t.Fatalf("exit code %d after cancel, want 0:\n%s", code, s.stderr.String())
			}
			logs := s.stderr.String()
			for _, want := range []string{`"msg":"shutting down"`, `"msg":"stopped"`} {
				if !strings.Contains(logs, want) {
					t.Errorf("logs lack %s:\n%s", want, logs)
				}
			}
			assertNoSecret(t, "logs", logs)
			if _, err := net.DialTimeout("tcp", s.addr, time.Second); err == nil {
				t.Errorf("still accepting connections on %s after run returned", s.addr)
			}
			waitFor(t, "goroutines to finish", func() bool { return runtime.NumGoroutine() <= before })
		})
	}
}

// TestRunServeKeepsServingWhenServiceBusIsUnreachable: a namespace that
// cannot be reached is reported in the logs and retried; the dashboard
// serves meanwhile.
func TestRunServeKeepsServingWhenServiceBusIsUnreachable(t *testing.T) {
	// A port nothing listens on: reserve one and close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	conn := "Endpoint=sb://" + dead + "/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + testKey + ";UseDevelopmentEmulator=true"
	s := start(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "s.db"),
		"--admin-endpoint", "http://" + dead}, env(envConnectionString, conn))
	defer s.stop(t)
	waitFor(t, "a log line saying Service Bus cannot be read", func() bool {
		return strings.Contains(s.stderr.String(), "cannot read Service Bus")
	})
	resp, err := http.Get("http://" + s.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("healthz = %d while Service Bus is unreachable, want 200", resp.StatusCode)
	}
	assertNoSecret(t, "stderr", s.stderr.String())
}

func TestRunUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  func(string) string
	}{
		{"no command", nil, env()},
		{"unknown command", []string{"frobnicate"}, env()},
		{"bad address", []string{"demo", "--addr", "nowhere"}, env()},
		{"serve without connection string", []string{"serve"}, env()},
		{"malformed connection string", []string{"serve"}, env(envConnectionString, "Endpoint=sb://h;SharedAccessKey=hunter2")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tt.args, tt.env, &stdout, &stderr)
			if code != 2 {
				t.Errorf("exit code = %d, want 2", code)
			}
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "dlqdash: ") {
				t.Errorf("stderr is not one 'dlqdash: ...' line:\n%s", stderr.String())
			}
			if strings.Contains(stderr.String(), "goroutine ") || strings.Contains(stderr.String(), "Usage:") {
				t.Errorf("stderr has a stack trace or usage dump:\n%s", stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout not empty: %q", stdout.String())
			}
			assertNoSecret(t, "stderr", stderr.String())
		})
	}
}

func TestRunHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"demo", "-h"}, {"serve", "-h"}, {"emulator", "-h"}, {"healthcheck", "-h"}} {
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), args, env(), &stdout, &stderr); code != 0 {
			t.Errorf("%q: exit code %d, want 0", args, code)
		}
		if !strings.Contains(stdout.String(), "Usage:") || stderr.Len() != 0 {
			t.Errorf("%q: stdout %q, stderr %q", args, stdout.String(), stderr.String())
		}
	}
}

func TestRunHealthcheck(t *testing.T) {
	s := start(t, []string{"demo", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "h.db")}, env())
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"healthcheck", "--url", "http://" + s.addr + "/healthz"}, env(), &stdout, &stderr); code != 0 {
		t.Errorf("healthcheck of a running server: exit %d, stderr %q", code, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run(t.Context(), []string{"healthcheck"}, env(envAddr, s.addr), &stdout, &stderr); code != 0 {
		t.Errorf("healthcheck via DLQDASH_ADDR: exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run(t.Context(), []string{"healthcheck", "--url", "http://" + s.addr + "/nope"}, env(), &stdout, &stderr); code != 1 {
		t.Errorf("healthcheck of a 404: exit %d, want 1", code)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	stderr.Reset()
	if code := run(t.Context(), []string{"healthcheck", "--url", "http://" + s.addr + "/healthz"}, env(), &stdout, &stderr); code != 1 {
		t.Errorf("healthcheck of a stopped server: exit %d, want 1", code)
	}
	if n := strings.Count(stderr.String(), "\n"); n != 1 {
		t.Errorf("stderr is not one line: %q", stderr.String())
	}
}

func TestRunFailsClearlyWhenPortIsTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"demo", "--addr", ln.Addr().String(), "--db", filepath.Join(t.TempDir(), "p.db")}, env(), &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit code = %d, want 1", code)
	}
	last := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if l := last[len(last)-1]; !strings.HasPrefix(l, "dlqdash: listen") {
		t.Errorf("last stderr line = %q, want the listen error", l)
	}
}

// startTestEmulator runs `dlqdash emulator` in this process on free loopback
// ports, with the entities of configFile (a Config.json path; "" for the
// built-in sample), until the test ends. It returns the connection string
// and the admin API's address.
func startTestEmulator(tb testing.TB, configFile string) (conn, adminAddr string) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	args := []string{"emulator", "--amqp-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json"}
	if configFile != "" {
		args = append(args, "--config", configFile)
	}
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, env(), out, errOut) }()
	tb.Cleanup(func() { cancel(); <-done })
	waitFor(tb, "the emulator's connection string", func() bool { return strings.Contains(out.String(), "\n") })
	return strings.TrimSpace(out.String()), logAddr(errOut.String(), "emulator admin listening")
}

// deadLetterFrom receives n messages with r and dead-letters them with
// reason (and desc, when not empty), through the real SDK.
func deadLetterFrom(tb testing.TB, r *azservicebus.Receiver, n int, reason, desc string) {
	tb.Helper()
	opts := &azservicebus.DeadLetterOptions{Reason: &reason}
	if desc != "" {
		opts.ErrorDescription = &desc
	}
	ctx := context.Background()
	for got := 0; got < n; {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ms, err := r.ReceiveMessages(rctx, n-got, nil)
		cancel()
		if err != nil {
			tb.Fatal(err)
		}
		for _, m := range ms {
			if err := r.DeadLetterMessage(ctx, m, opts); err != nil {
				tb.Fatal(err)
			}
		}
		got += len(ms)
	}
}
