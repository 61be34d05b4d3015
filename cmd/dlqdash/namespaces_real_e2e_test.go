package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/servicebus/devcred"
)

// The real program with several namespaces: `dlqdash serve --config` and
// `dlqdash emulator` each in a process of its own (the test binary as
// dlqdash, TestMain), as a team runs them.

// emulatorProc is a `dlqdash emulator` process.
type emulatorProc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	// conns and admins are each namespace's connection string (as printed)
	// and admin URL (as logged); without --namespace the one namespace is
	// under "".
	conns, admins map[string]string
}

// startEmulatorProc runs `dlqdash emulator` with args (on free loopback
// ports, JSON logs) and waits for its namespaces: n lines on stdout.
func startEmulatorProc(t *testing.T, n int, args ...string) *emulatorProc {
	t.Helper()
	args = append([]string{"emulator", "--amqp-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json"}, args...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out := &syncBuffer{}
	p := &emulatorProc{cmd: cmd, stderr: &syncBuffer{}, conns: map[string]string{}, admins: map[string]string{}}
	cmd.Stdout, cmd.Stderr = out, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT) // if the test stopped it
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	waitFor(t, "the emulator's namespaces", func() bool {
		if strings.Count(out.String(), "\n") < n {
			return false
		}
		for line := range strings.Lines(p.stderr.String()) {
			var rec struct {
				Msg, Namespace string
				AdminURL       string `json:"admin_url"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "emulator ready" {
				p.admins[rec.Namespace] = rec.AdminURL
			}
		}
		return len(p.admins) >= n
	})
	for line := range strings.Lines(out.String()) {
		line = strings.TrimSpace(line)
		if name, cs, ok := strings.Cut(line, " "); ok {
			p.conns[name] = cs
			continue
		}
		p.conns[""] = line // without --namespace: the one namespace
		for _, url := range p.admins {
			p.admins[""] = url
		}
	}
	return p
}

// endpoint is the host:port of a connection string's Endpoint.
func endpoint(t *testing.T, conn string) string {
	t.Helper()
	e, _, _ := strings.Cut(strings.TrimPrefix(conn, "Endpoint=sb://"), ";")
	if _, _, err := net.SplitHostPort(e); err != nil {
		t.Fatalf("connection string %q: %v", conn, err)
	}
	return e
}

// writeFile writes body to dir/name and returns the path.
func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// ordersConfig is an emulator entity file with one queue, orders.
const ordersConfig = `{"UserConfig":{"Namespaces":[{"Name":"ns","Queues":[{"Name":"orders","Properties":{"LockDuration":"PT5S"}}]}],"Logging":{"Type":"Console"}}}`

// sendAndDeadLetter sends a message with id and body to orders and
// dead-letters it with reason and desc, through the real SDK.
func sendAndDeadLetter(t *testing.T, client *azservicebus.Client, id, reason, desc string) {
	t.Helper()
	s, err := client.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if err := s.SendMessage(t.Context(), &azservicebus.Message{MessageID: &id, Body: []byte(`{"order":"` + id + `"}`)}, nil); err != nil {
		t.Fatal(err)
	}
	r, err := client.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	deadLetterFrom(t, r, 1, reason, desc)
}

// e2eStatus is GET /api/v1/status.
type e2eStatus struct {
	Healthy    bool    `json:"healthy"`
	Error      *string `json:"error"`
	Namespaces []struct {
		Name          string  `json:"name"`
		Healthy       bool    `json:"healthy"`
		LastSuccessAt *string `json:"last_success_at"`
		Error         *string `json:"error"`
	} `json:"namespaces"`
}

func (s e2eStatus) of(name string) (healthy bool, errText string, found bool) {
	for _, n := range s.Namespaces {
		if n.Name == name {
			if n.Error != nil {
				errText = *n.Error
			}
			return n.Healthy, errText, true
		}
	}
	return false, "", false
}

// e2eMessage is a message of GET /api/v1/messages.
type e2eMessage struct {
	ID               string  `json:"id"`
	Namespace        string  `json:"namespace"`
	Entity           string  `json:"entity"`
	MessageID        string  `json:"message_id"`
	DeadLetterReason *string `json:"dead_letter_reason"`
}

func listMessages(t *testing.T, c *child, query string) []e2eMessage {
	t.Helper()
	var out struct{ Messages []e2eMessage }
	if code := c.api(t, "GET", "/api/v1/messages?"+query, nil, &out); code != 200 {
		t.Fatalf("GET /api/v1/messages?%s: %d", query, code)
	}
	return out.Messages
}

// e2eJob is a job of the API.
type e2eJob struct {
	ID                   string  `json:"id"`
	Status               string  `json:"status"`
	Namespace            string  `json:"namespace"`
	DestinationNamespace *string `json:"destination_namespace"`
	LastError            *string `json:"last_error"`
	Counts               struct {
		Sent, Completed, Failed int
	} `json:"counts"`
}

// replayOne replays the message with catalog id through the API and waits
// for its job to complete: the copy sent, the original removed.
func replayOne(t *testing.T, c *child, id string) e2eJob {
	t.Helper()
	var j e2eJob
	if code := c.api(t, "POST", "/api/v1/jobs", map[string]any{"action": "replay", "ids": []string{id}}, &j); code != 201 && code != 202 && code != 200 {
		t.Fatalf("create the replay of %s: %d %+v", id, code, j)
	}
	waitForWithin(t, 20*time.Second, "the replay job "+j.ID+" completed", func() bool {
		c.api(t, "GET", "/api/v1/jobs/"+j.ID, nil, &j)
		if j.Status == "failed" || j.Status == "paused" {
			t.Fatalf("job %s %s: %+v", j.ID, j.Status, j)
		}
		return j.Status == "completed"
	})
	if j.Counts.Sent+j.Counts.Completed == 0 || j.Counts.Failed != 0 {
		t.Errorf("job %s counts %+v, want the message sent and completed", j.ID, j.Counts)
	}
	return j
}

// receiveOne receives one message from orders (waiting up to 5 s) and
// completes it; nil when none came.
func receiveOne(t *testing.T, client *azservicebus.Client, sub azservicebus.SubQueue) *azservicebus.ReceivedMessage {
	t.Helper()
	r, err := client.NewReceiverForQueue("orders", &azservicebus.ReceiverOptions{SubQueue: sub})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	ms, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		return nil
	}
	if err := r.CompleteMessage(t.Context(), ms[0], nil); err != nil {
		t.Fatal(err)
	}
	return ms[0]
}

// peekCount counts the messages in orders (or its dead-letter queue).
func peekCount(t *testing.T, client *azservicebus.Client, sub azservicebus.SubQueue) int {
	t.Helper()
	r, err := client.NewReceiverForQueue("orders", &azservicebus.ReceiverOptions{SubQueue: sub})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	ms, err := r.PeekMessages(t.Context(), 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}

// TestServeEntraOverTLS: `dlqdash emulator` over TLS (a certificate it
// generates and writes out) checking JWTs against a key file, and `dlqdash
// serve --config` with two namespaces signing in with credential: emulator
// (a token credential that signs its own JWTs) and trusting the written
// certificate with tls_ca_file. prod-eu has the right key: its dead letter
// is cataloged over AMQPS, its entity counts come from the admin API over
// HTTPS, and a replay of it completes (the copy in the queue, the dead
// letter gone). prod-us has a wrong key: its status is unhealthy with the
// broker's refusal of the credential in words, while prod-eu stays healthy
// and serve keeps running.
func TestServeEntraOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts dlqdash emulator and dlqdash serve")
	}
	dir := t.TempDir()
	key := "entra-e2e-signing-key-0123456789abcdef"
	keyFile := writeFile(t, dir, "jwt.key", key+"\n")
	wrongKeyFile := writeFile(t, dir, "wrong.key", "not-the-emulator-key-0123456789abcdef\n")
	caFile := filepath.Join(dir, "ca.pem")
	emu := startEmulatorProc(t, 2, "--config", writeFile(t, dir, "Config.json", ordersConfig),
		"--namespace", "prod-eu", "--namespace", "prod-us", "--tls-ca-out", caFile, "--jwt-key-file", keyFile)

	// The test's own client signs in the same way, trusting the same file.
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", caFile)
	}
	cred, err := devcred.New([]byte(key), devcred.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sdk := func(ns string) *azservicebus.Client {
		c, err := azservicebus.NewClient(endpoint(t, emu.conns[ns]), azcore.TokenCredential(cred),
			// ServerName: the SDK would check the certificate for host:port.
			&azservicebus.ClientOptions{TLSConfig: &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	eu := sdk("prod-eu")
	sendAndDeadLetter(t, eu, "tls-1", "SqlTimeout", "")

	nsEntry := func(name, keyFile string) string {
		return fmt.Sprintf(`  - name: %s
    fully_qualified_namespace: %s
    credential: emulator
    signing_key_file: %s
    tls_ca_file: %s
    admin_endpoint: %s
`, name, endpoint(t, emu.conns[name]), keyFile, caFile, emu.admins[name])
	}
	cfg := writeFile(t, dir, "dlqdash.yaml", "namespaces:\n"+nsEntry("prod-eu", keyFile)+nsEntry("prod-us", wrongKeyFile))
	serve := startChild(t, []string{"serve", "--config", cfg, "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "dlqdash.db"),
		"--poll", "200ms", "--servicebus-timeout", "5s"}, envConnectionString+"=", envConfig+"=")
	defer serve.kill()
	defer func() {
		if t.Failed() {
			t.Logf("serve:\n%s", serve.stderr.String())
		}
	}()

	// The data plane: the dead letter, cataloged over AMQPS with a token.
	var msgs []e2eMessage
	waitFor(t, "prod-eu's dead letter cataloged", func() bool {
		msgs = listMessages(t, serve, "namespace=prod-eu&subqueue=dead_letter")
		return len(msgs) == 1
	})
	if m := msgs[0]; m.MessageID != "tls-1" || m.Entity != "orders" || m.DeadLetterReason == nil || *m.DeadLetterReason != "SqlTimeout" {
		t.Errorf("cataloged %+v", m)
	}
	// The admin plane: the entity and its counts, over HTTPS with a token.
	var ents struct {
		Entities []struct {
			Namespace       string  `json:"namespace"`
			Path            string  `json:"path"`
			DeadLetterCount int     `json:"dead_letter_count"`
			CountsAt        *string `json:"counts_at"`
		} `json:"entities"`
	}
	serve.api(t, "GET", "/api/v1/entities", nil, &ents)
	if len(ents.Entities) != 1 || ents.Entities[0].Namespace != "prod-eu" || ents.Entities[0].Path != "orders" ||
		ents.Entities[0].DeadLetterCount != 1 || ents.Entities[0].CountsAt == nil {
		t.Errorf("entities %+v: want prod-eu's orders with one dead letter, counted (prod-us refused)", ents.Entities)
	}

	// The wrong key: prod-us unhealthy with the refusal in words; prod-eu
	// healthy; serve still serving.
	var st e2eStatus
	waitFor(t, "prod-us refused and prod-eu healthy", func() bool {
		st = e2eStatus{}
		serve.api(t, "GET", "/api/v1/status", nil, &st)
		euOK, _, _ := st.of("prod-eu")
		usOK, usErr, found := st.of("prod-us")
		return euOK && found && !usOK && usErr != ""
	})
	_, usErr, _ := st.of("prod-us")
	if !strings.Contains(usErr, "refused the credential for prod-us") || st.Healthy || st.Error == nil || !strings.HasPrefix(*st.Error, "prod-us: ") {
		t.Errorf("status %+v; prod-us's error %q: want the refusal of prod-us's credential, and the summary unhealthy naming prod-us", st, usErr)
	}
	t.Logf("prod-us: %s", usErr)

	// A replay over AMQPS with a token: the copy in orders, the original
	// gone from its dead-letter queue.
	replayOne(t, serve, msgs[0].ID)
	if got := receiveOne(t, eu, mainQueue); got == nil || got.ApplicationProperties["dlqdash.original_message_id"] != "tls-1" {
		t.Errorf("the replayed copy in prod-eu's orders: %+v", got)
	}
	if n := peekCount(t, eu, azservicebus.SubQueueDeadLetter); n != 0 {
		t.Errorf("prod-eu's orders still has %d dead letters after the replay", n)
	}
	if serve.cmd.ProcessState != nil {
		t.Fatalf("serve exited: %v", serve.cmd.ProcessState)
	}
}

// TestServeTwoEmulatorProcessesOneStopped: two namespaces on two `dlqdash
// emulator` processes, prod-eu over AMQP and prod-us over AMQP over
// WebSockets (transport: websockets in the config file; its connection
// string names a closed port, so WebSockets are its only way in). Both are
// cataloged; the same failure in both is one group counted in each; the
// namespace filter, jobs by namespace and a replay that stays in its
// namespace. Then prod-eu's process is stopped (SIGSTOP) for about 6 s:
// prod-eu turns unhealthy within max(3 × poll, 5 s) plus slack while
// prod-us stays healthy and catalogs a dead letter made during the freeze;
// after SIGCONT prod-eu recovers.
func TestServeTwoEmulatorProcessesOneStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two dlqdash emulators and dlqdash serve, and stops one for 6 s")
	}
	const poll = 200 * time.Millisecond
	stale := max(3*poll, 5*time.Second)
	dir := t.TempDir()
	entities := writeFile(t, dir, "Config.json", ordersConfig)
	euProc := startEmulatorProc(t, 1, "--config", entities)
	usProc := startEmulatorProc(t, 1, "--config", entities)
	clients := map[string]*azservicebus.Client{}
	for name, p := range map[string]*emulatorProc{"prod-eu": euProc, "prod-us": usProc} {
		c, err := azservicebus.NewClientFromConnectionString(p.conns[""], nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		clients[name] = c
	}
	// The same failure in both regions, and one only in prod-eu.
	sendAndDeadLetter(t, clients["prod-eu"], "eu-1", "SqlTimeout", "Timeout expired after 30 s")
	sendAndDeadLetter(t, clients["prod-eu"], "eu-2", "Validation", "order has no lines")
	sendAndDeadLetter(t, clients["prod-us"], "us-1", "SqlTimeout", "Timeout expired after 30 s")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	_, rest, _ := strings.Cut(usProc.conns[""], ";")
	usOverWS := "Endpoint=sb://" + closed + ";" + rest
	cfg := writeFile(t, dir, "dlqdash.yaml", `namespaces:
  - name: prod-eu
    connection_string_env: SB_PROD_EU
    admin_endpoint: `+euProc.admins[""]+`
  - name: prod-us
    connection_string_env: SB_PROD_US
    admin_endpoint: `+usProc.admins[""]+`
    transport: websockets
`)
	serve := startChild(t, []string{"serve", "--config", cfg, "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "dlqdash.db"),
		// The default Service Bus timeout (10 s): prod-eu's stop is found by
		// the stale bound, not by a call's deadline, and a slow read of
		// prod-us's on a loaded machine is not an error (with 2 s it was,
		// once in two dozen runs under -race).
		"--poll", poll.String()},
		"SB_PROD_EU="+euProc.conns[""], "SB_PROD_US="+usOverWS, envConnectionString+"=", envConfig+"=")
	defer serve.kill()
	defer func() {
		if t.Failed() {
			t.Logf("serve:\n%s", serve.stderr.String())
		}
	}()

	ids := func(ms []e2eMessage) string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Namespace+"/"+m.MessageID)
		}
		return strings.Join(out, " ")
	}
	waitFor(t, "both namespaces cataloged", func() bool {
		return len(listMessages(t, serve, "namespace=prod-eu")) == 2 && len(listMessages(t, serve, "namespace=prod-us")) == 1
	})
	// The namespace filter.
	if got := ids(listMessages(t, serve, "namespace=prod-us")); got != "prod-us/us-1" {
		t.Errorf("prod-us's messages: %s", got)
	}
	if got := ids(listMessages(t, serve, "namespace=prod-eu&reason=SqlTimeout")); got != "prod-eu/eu-1" {
		t.Errorf("prod-eu's SqlTimeout messages: %s", got)
	}
	if !strings.Contains(serve.stderr.String(), `"namespace":"prod-us","host":"`+closed+`","sign_in":"sas","transport":"websockets"`) {
		t.Errorf("prod-us was not opened over websockets")
	}
	if !strings.Contains(serve.stderr.String(), `"msg":"reading Service Bus","namespace":"prod-us","host":"`+closed+`","poll":"200ms","transport":"websockets"`) {
		t.Errorf("prod-us's reading line does not name its transport")
	}
	// One failure in two namespaces is one group with a count in each.
	var groups struct {
		Groups []struct {
			Reason     string `json:"reason"`
			Count      int    `json:"count"`
			Namespaces []struct {
				Name    string `json:"name"`
				Present int    `json:"present"`
			} `json:"namespaces"`
		} `json:"groups"`
	}
	serve.api(t, "GET", "/api/v1/groups", nil, &groups)
	byReason := map[string]string{}
	for _, g := range groups.Groups {
		var per []string
		for _, n := range g.Namespaces {
			per = append(per, n.Name+"="+strconv.Itoa(n.Present))
		}
		byReason[g.Reason] = fmt.Sprintf("%d [%s]", g.Count, strings.Join(per, " "))
	}
	if len(byReason) != 2 || !strings.HasPrefix(byReason["SqlTimeout"], "2 [") || !strings.Contains(byReason["SqlTimeout"], "prod-eu=1") ||
		!strings.Contains(byReason["SqlTimeout"], "prod-us=1") || byReason["Validation"] != "1 [prod-eu=1]" {
		t.Errorf("groups %v: want SqlTimeout once with 1 in each namespace, Validation 1 in prod-eu", byReason)
	}

	// A replay of prod-us's message stays in prod-us (over websockets): the
	// copy is in prod-us's orders and nothing reached prod-eu's.
	us1 := listMessages(t, serve, "namespace=prod-us")[0]
	job := replayOne(t, serve, us1.ID)
	if job.Namespace != "prod-us" || job.DestinationNamespace != nil {
		t.Errorf("job namespace %q destination %v, want prod-us and null", job.Namespace, job.DestinationNamespace)
	}
	if got := receiveOne(t, clients["prod-us"], mainQueue); got == nil || got.ApplicationProperties["dlqdash.original_message_id"] != "us-1" {
		t.Errorf("the copy in prod-us's orders: %+v", got)
	}
	if n := peekCount(t, clients["prod-eu"], mainQueue); n != 0 {
		t.Errorf("prod-eu's orders has %d messages after prod-us's replay, want none", n)
	}
	jobsOf := func(ns string) string {
		var out struct{ Jobs []e2eJob }
		serve.api(t, "GET", "/api/v1/jobs?namespace="+ns, nil, &out)
		var s []string
		for _, j := range out.Jobs {
			s = append(s, j.ID)
		}
		return strings.Join(s, ",")
	}
	if us, eu := jobsOf("prod-us"), jobsOf("prod-eu"); us != job.ID || eu != "" {
		t.Errorf("jobs of prod-us %q and of prod-eu %q, want %s and none", us, eu, job.ID)
	}

	// Freeze prod-eu's emulator.
	status := func() e2eStatus {
		var st e2eStatus
		serve.api(t, "GET", "/api/v1/status", nil, &st)
		return st
	}
	waitFor(t, "both healthy", func() bool { return status().Healthy })
	if err := euProc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			_ = euProc.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	defer thaw()
	sendAndDeadLetter(t, clients["prod-us"], "us-2", "Validation", "order has no lines")
	made := time.Now()
	waitForWithin(t, 5*time.Second, "prod-us's new dead letter cataloged with prod-eu stopped", func() bool {
		return strings.Contains(ids(listMessages(t, serve, "namespace=prod-us&subqueue=dead_letter")), "prod-us/us-2")
	})
	t.Logf("prod-us cataloged a dead letter %v after it was made, prod-eu stopped", time.Since(made).Round(time.Millisecond))
	var st e2eStatus
	waitForWithin(t, time.Until(stopped.Add(stale+2*time.Second)), "prod-eu unhealthy within max(3 × poll, 5 s) + 2 s of SIGSTOP", func() bool {
		st = status()
		ok, _, _ := st.of("prod-eu")
		return !ok
	})
	took := time.Since(stopped)
	euOK, euErr, _ := st.of("prod-eu")
	usOK, usErr, _ := st.of("prod-us")
	t.Logf("prod-eu unhealthy %v after SIGSTOP: %q", took.Round(time.Millisecond), euErr)
	if euOK || euErr == "" || !usOK || usErr != "" || st.Healthy {
		t.Errorf("with prod-eu stopped: summary healthy %v; prod-eu %v %q; prod-us %v %q", st.Healthy, euOK, euErr, usOK, usErr)
	}
	if d := 6*time.Second - time.Since(stopped); d > 0 {
		time.Sleep(d) // the freeze lasts ~6 s whatever the machine's speed
	}
	if ok, _, _ := status().of("prod-us"); !ok {
		t.Errorf("prod-us unhealthy at the end of prod-eu's freeze")
	}
	thaw()
	resumed := time.Now()
	waitForWithin(t, 30*time.Second, "prod-eu healthy after SIGCONT", func() bool { return status().Healthy })
	t.Logf("prod-eu healthy %v after SIGCONT", time.Since(resumed).Round(time.Millisecond))
	if serve.cmd.ProcessState != nil {
		t.Fatalf("serve exited: %v", serve.cmd.ProcessState)
	}
}
