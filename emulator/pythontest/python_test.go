package pythontest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
)

// python is the interpreter that has Debian's python3-azure: Debian's own,
// not whatever python3 comes first on PATH.
const python = "/usr/bin/python3"

// pythonWithSDK returns the interpreter when it can import azure.servicebus.
// Without it the test is skipped, except in CI, where .ci/run installs
// python3-azure and a skip would hide a missing install step.
func pythonWithSDK(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(python, "-c", "import azure.servicebus, uamqp").CombinedOutput()
	if err == nil {
		return python
	}
	why := string(lastLine(out))
	if why == "" {
		why = err.Error()
	}
	msg := python + " cannot import azure.servicebus (" + why + ")"
	if os.Getenv("CI") != "" {
		t.Fatal(msg + "; .ci/run installs it with apt-get install python3-azure")
	}
	t.Skip(msg + "; apt-get install -y python3-azure to run the Python SDK smoke test")
	return ""
}

func lastLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

// selfSigned makes a certificate for 127.0.0.1 and localhost, and writes it
// as PEM to dir/ca.pem for the Python side to trust.
func selfSigned(t *testing.T, dir string) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost", "127.0.0.1"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, path
}

// terminateTLS listens on a free loopback port with TLS and relays each
// connection's plain bytes to backend, for the rest of the test. Debian's
// SDK (azure-servicebus 7.8 over uamqp) speaks only AMQPS and its admin
// client only HTTPS, while the emulator serves plain AMQP and HTTP.
func terminateTLS(t *testing.T, cert tls.Certificate, backend string) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			front, err := ln.Accept()
			if err != nil {
				return
			}
			back, err := net.Dial("tcp", backend)
			if err != nil {
				front.Close()
				continue
			}
			track(front)
			track(back)
			wg.Add(2)
			go func() { defer wg.Done(); relay(back, front) }()
			go func() { defer wg.Done(); relay(front, back) }()
		}
	}()
	return ln.Addr().String()
}

// relay copies one direction until either side closes, then closes both so
// the other direction ends too.
func relay(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// runScript runs testdata/<script> with Debian's Python against emu, behind
// TLS, and returns the JSON object it printed last. The script fails the test
// by exiting non-zero with the step that failed.
func runScript(t *testing.T, py string, emu *emulator.Emulator, script string) []byte {
	t.Helper()
	dir := t.TempDir()
	cert, caPath := selfSigned(t, dir)
	amqps := terminateTLS(t, cert, emu.AMQPAddr().String())
	https := terminateTLS(t, cert, emu.AdminAddr().String())

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join("testdata", script))
	cmd.Env = append(os.Environ(),
		"SB_AMQPS="+amqps,
		"SB_HTTPS="+https,
		"SB_CA="+caPath,
		"SB_KEY_NAME="+emulator.DefaultKeyName,
		"SB_KEY="+emulator.DefaultKey,
		"REQUESTS_CA_BUNDLE="+caPath,
		"NO_PROXY=127.0.0.1,localhost",
		"no_proxy=127.0.0.1,localhost",
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", script, err, stdout.String(), stderr.String())
	}
	out := lastLine(stdout.Bytes())
	if !json.Valid(out) {
		t.Fatalf("%s printed no JSON result\nstdout:\n%s\nstderr:\n%s", script, stdout.String(), stderr.String())
	}
	t.Logf("%s observed: %s", script, out)
	return out
}

// TestPythonSDKSmoke runs testdata/python_smoke.py, which drives the
// emulator through Debian's azure-servicebus (7.8, over uamqp): admin, send,
// receive, dead-letter, defer, schedule, sessions and a full batch. The
// script asserts as it goes and prints what it observed; the test checks
// that too, and what the emulator counted.
func TestPythonSDKSmoke(t *testing.T) {
	py := pythonWithSDK(t)
	emu := emulatortest.Start(t, emulator.Config{})
	out := runScript(t, py, emu, "python_smoke.py")
	var got struct {
		AdminQueues            []string `json:"admin_queues"`
		AdminMaxDeliveryCount  int      `json:"admin_max_delivery_count"`
		Received               []string `json:"received"`
		SequenceNumbers        []int64  `json:"sequence_numbers"`
		DeferredSequenceNumber int64    `json:"deferred_sequence_number"`
		AbandonedDeliveryCount int      `json:"abandoned_delivery_count"`
		DeadLetterReason       string   `json:"dead_letter_reason"`
		DeadLetterDescription  string   `json:"dead_letter_description"`
		Scheduled              int      `json:"scheduled"`
		SessionMessages        []string `json:"session_messages"`
		SessionState           string   `json:"session_state"`
		NextSession            string   `json:"next_session"`
		BatchMaxSize           int      `json:"batch_max_size"`
		BatchSizes             []int    `json:"batch_sizes"`
		BatchMessages          int      `json:"batch_messages"`
		BatchReceived          int      `json:"batch_received"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	check := func(what string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("%s: observed %+v", what, got)
		}
	}
	check("admin lists both queues", slices.Equal(got.AdminQueues, []string{"py-queue", "py-sessions"}))
	check("admin reads back max delivery count 5", got.AdminMaxDeliveryCount == 5)
	check("six messages received", slices.Equal(got.Received, []string{"m1", "m2", "m3", "m4", "m5", "m6"}))
	check("sequence numbers 1..6", slices.Equal(got.SequenceNumbers, []int64{1, 2, 3, 4, 5, 6}))
	check("m5 deferred and received by its sequence number 5", got.DeferredSequenceNumber == 5)
	check("an abandoned message comes back with delivery count 1", got.AbandonedDeliveryCount == 1)
	check("dead-letter reason and description", got.DeadLetterReason == "SmokeReason" && got.DeadLetterDescription == "smoke description")
	check("one message scheduled", got.Scheduled == 1)
	check("session messages in order", slices.Equal(got.SessionMessages, []string{"a0", "a1", "a2"}))
	check("session state", got.SessionState == "step-1")
	check("next available session", got.NextSession == "beta")
	// The SDK sizes a batch against the link's max-message-size; batches of
	// 262,136 and 262,144 bytes (the limit) are taken, as Azure takes them.
	check("batch limit is the link's max-message-size", got.BatchMaxSize == 262144)
	check("batches sized 262,136 and 262,144 bytes", slices.Equal(got.BatchSizes, []int{262136, 262144}))
	check("every message of the full batches received", got.BatchMessages > 400 && got.BatchReceived == got.BatchMessages)

	// What the emulator counted matches what the script did.
	st := emu.Stats().Entities["py-queue"]
	if st.Send < int64(6+got.BatchMessages) {
		t.Errorf("emulator counted %d sends to py-queue, want at least %d", st.Send, 6+got.BatchMessages)
	}
}

// TestPyAMQPSmoke runs testdata/pyamqp_smoke.py with pyamqp, the AMQP stack
// of azure-servicebus 7.9 and later, which Debian ships inside azure-eventhub
// and which reads performative fields by position: send and receive (a 200 kB
// message too: several transfer frames each way), settle (accept, and reject
// as the dead-letter the pyamqp-based SDK sends), and accept the next
// available session, reading the attach reply as that SDK does.
func TestPyAMQPSmoke(t *testing.T) {
	py := pythonWithSDK(t)
	if out, err := exec.Command(py, "-c", "import azure.eventhub._pyamqp").CombinedOutput(); err != nil {
		t.Fatalf("python3-azure installed without azure.eventhub._pyamqp: %s", lastLine(out))
	}
	emu := emulatortest.Start(t, emulator.Config{})
	ns := emu.Namespace()
	if _, err := ns.CreateQueue("pyamqp-queue", broker.DefaultQueueProperties()); err != nil {
		t.Fatal(err)
	}
	sessions := broker.DefaultQueueProperties()
	sessions.RequiresSession = true
	if _, err := ns.CreateQueue("pyamqp-sessions", sessions); err != nil {
		t.Fatal(err)
	}
	out := runScript(t, py, emu, "pyamqp_smoke.py")
	var got struct {
		Sent            int      `json:"sent"`
		Received        []string `json:"received"`
		Settled         int      `json:"settled"`
		BigBytes        int      `json:"big_bytes"`
		Session         string   `json:"session"`
		SessionMessages []string `json:"session_messages"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.Sent != 3 || !slices.Equal(got.Received, []string{"pyamqp-0", "pyamqp-1", "pyamqp-2"}) || got.Settled != 3 || got.BigBytes != 204800 ||
		got.Session != "alpha" || !slices.Equal(got.SessionMessages, []string{"alpha-0", "alpha-1"}) {
		t.Fatalf("observed %+v", got)
	}
	// The settlements reached the broker: the queue is empty and the
	// rejected message is in the dead-letter queue with its reason.
	var live, dead []broker.Delivery
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		if live, err = ns.Peek("pyamqp-queue", 0, 10); err != nil {
			t.Fatal(err)
		}
		if dead, err = ns.Peek("pyamqp-queue/$DeadLetterQueue", 0, 10); err != nil {
			t.Fatal(err)
		}
		if (len(live) == 0 && len(dead) == 1) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(live) != 0 || len(dead) != 1 {
		t.Fatalf("after settling: %d messages in the queue, %d dead-lettered; want 0 and 1", len(live), len(dead))
	}
	m := dead[0].Message
	if string(m.GetData()) != "pyamqp-2" || m.ApplicationProperties["DeadLetterReason"] != "PyamqpReason" ||
		m.ApplicationProperties["DeadLetterErrorDescription"] != "pyamqp description" {
		t.Fatalf("dead letter %q with properties %v, want pyamqp-2 with reason PyamqpReason and description", m.GetData(), m.ApplicationProperties)
	}
}

// TestPythonSDKWebSocket runs testdata/websocket_smoke.py: Debian's
// azure-servicebus (7.8, over uamqp, whose WebSocket transport is its own C
// code) with TransportType.AmqpOverWebsocket against the emulator's admin
// listener behind TLS (/$servicebus/websocket): send, receive, complete,
// dead-letter, peek the DLQ. Every AMQP connection is a WebSocket.
func TestPythonSDKWebSocket(t *testing.T) {
	py := pythonWithSDK(t)
	emu := emulatortest.Start(t, emulator.Config{})
	if _, err := emu.Namespace().CreateQueue("ws-queue", broker.DefaultQueueProperties()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, caPath := selfSigned(t, dir)
	wss := terminateTLS(t, cert, emu.AdminAddr().String())

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join("testdata", "websocket_smoke.py"))
	cmd.Env = append(os.Environ(),
		"SB_WSS="+wss,
		"SB_CA="+caPath,
		"SB_KEY_NAME="+emulator.DefaultKeyName,
		"SB_KEY="+emulator.DefaultKey,
		"NO_PROXY=127.0.0.1,localhost",
		"no_proxy=127.0.0.1,localhost",
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("websocket_smoke.py: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := lastLine(stdout.Bytes())
	var got struct {
		Received   []string `json:"received"`
		DeadLetter []string `json:"dead_letter"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("websocket_smoke.py printed %q: %v\nstderr:\n%s", out, err, stderr.String())
	}
	t.Logf("websocket_smoke.py observed: %s", out)
	if !slices.Equal(got.Received, []string{"w0", "w1", "w2"}) {
		t.Errorf("received %v, want w0 w1 w2", got.Received)
	}
	if !slices.Equal(got.DeadLetter, []string{"w1", "OverWebSockets"}) {
		t.Errorf("dead letter %v, want w1 with reason OverWebSockets", got.DeadLetter)
	}
	if c := emu.Connections(); c.TCP != 0 || c.WebSocket == 0 {
		t.Errorf("Connections() = %+v, want websocket connections only", c)
	}
	if st := emu.Stats().Entity("ws-queue"); st.Send != 3 || st.Settle != 3 {
		t.Errorf("emulator counted %d sends and %d settlements on ws-queue, want 3 and 3", st.Send, st.Settle)
	}
}
