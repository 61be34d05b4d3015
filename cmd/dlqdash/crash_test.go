package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// childEnv makes the test binary run dlqdash itself (TestMain), so the
// crash test can kill a real process.
const childEnv = "DLQDASH_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// child is dlqdash serve in its own process.
type child struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	addr   string
}

func startChild(t *testing.T, args []string, envv ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], append(args, "--log-format", "json")...)
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), envv...)
	c := &child{cmd: cmd, stderr: &syncBuffer{}}
	cmd.Stderr = c.stderr
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the child's listening line", func() bool {
		c.addr = listenAddr(c.stderr.String())
		return c.addr != ""
	})
	return c
}

func (c *child) kill() {
	c.cmd.Process.Signal(syscall.SIGKILL)
	c.cmd.Wait()
}

func (c *child) api(t *testing.T, method, path string, body any, out any) int {
	t.Helper()
	return callAPI(t, c.addr, method, path, body, out)
}

// callAPI sends a JSON request to the dashboard at addr and decodes the
// answer into out (when not nil); it returns the status code.
func callAPI(t *testing.T, addr, method, path string, body any, out any) int {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+addr+path, r)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s = %d: %v: %s", method, path, resp.StatusCode, err, b)
		}
	}
	return resp.StatusCode
}

// TestCrashDuringReplay kills dlqdash serve (SIGKILL, a real process) at
// random points of two replay jobs and starts it again until they finish:
// to a target with duplicate detection nothing is lost or duplicated; to
// one without, nothing is lost and every duplicate is a flagged message.
func TestCrashDuringReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts processes for about half a minute")
	}
	cfg := filepath.Join(t.TempDir(), "Config.json")
	if err := os.WriteFile(cfg, []byte(`{"UserConfig":{"Namespaces":[{"Name":"crash","Queues":[
		{"Name":"dedup","Properties":{"RequiresDuplicateDetection":true,"DuplicateDetectionHistoryTimeWindow":"PT10M","LockDuration":"PT5S"}},
		{"Name":"plain","Properties":{"LockDuration":"PT5S"}}]}],"Logging":{"Type":"Console"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	conn, adminAddr := startTestEmulator(t, cfg)

	client := testClient(t, conn)
	const n = 300
	for _, q := range []string{"dedup", "plain"} {
		s, err := client.NewSender(q, nil)
		if err != nil {
			t.Fatal(err)
		}
		batch, err := s.NewMessageBatch(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			id := fmt.Sprintf("%s-%d", q, i)
			if err := batch.AddMessage(&azservicebus.Message{MessageID: &id, Body: []byte(id)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
		s.Close(ctx)
		r, err := client.NewReceiverForQueue(q, nil)
		if err != nil {
			t.Fatal(err)
		}
		for got := 0; got < n; {
			ms, err := r.ReceiveMessages(ctx, n-got, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				if err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: ptr("Crash")}); err != nil {
					t.Fatal(err)
				}
			}
			got += len(ms)
		}
		r.Close(ctx)
	}

	db := filepath.Join(t.TempDir(), "dlqdash.db")
	args := []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--poll", "100ms", "--admin-endpoint", "http://" + adminAddr}
	connEnv := envConnectionString + "=" + conn
	c := startChild(t, args, connEnv)
	defer func() { c.kill() }()
	for _, q := range []string{"dedup", "plain"} {
		waitFor(t, "the catalog of "+q, func() bool {
			var out struct{ Messages []json.RawMessage }
			c.api(t, "GET", "/api/v1/messages?limit=500&entity="+q, nil, &out)
			return len(out.Messages) == n
		})
	}
	var jobs []string
	for _, q := range []string{"dedup", "plain"} {
		var job struct{ ID string }
		if code := c.api(t, "POST", "/api/v1/jobs", map[string]any{"action": "replay", "rate_per_second": 150,
			"filter": map[string]any{"entity": q, "subqueue": "dead_letter"}}, &job); code != http.StatusCreated {
			t.Fatalf("create job for %s: %d", q, code)
		}
		jobs = append(jobs, job.ID)
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	kills := 0
	finished := func() bool {
		for _, id := range jobs {
			var j struct{ Status string }
			c.api(t, "GET", "/api/v1/jobs/"+id, nil, &j)
			if j.Status != "completed" {
				return false
			}
		}
		return true
	}
	for kills < 5 && !finished() {
		time.Sleep(time.Duration(100+rng.IntN(700)) * time.Millisecond)
		c.kill()
		kills++
		c = startChild(t, args, connEnv)
	}
	deadline := time.Now().Add(90 * time.Second)
	for !finished() {
		if time.Now().After(deadline) {
			t.Fatalf("the jobs did not finish after %d kills:\n%s", kills, c.stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("killed dlqdash %d times during the jobs", kills)

	type item struct {
		Message struct {
			MessageID string `json:"message_id"`
		}
		State         string
		CopyMessageID string `json:"copy_message_id"`
		Flagged       bool
	}
	for i, q := range []string{"dedup", "plain"} {
		var items []item
		for cursor := ""; ; {
			var out struct {
				Messages   []item
				NextCursor *string `json:"next_cursor"`
			}
			c.api(t, "GET", "/api/v1/jobs/"+jobs[i]+"/messages?limit=500&cursor="+cursor, nil, &out)
			items = append(items, out.Messages...)
			if out.NextCursor == nil {
				break
			}
			cursor = *out.NextCursor
		}
		flagged := map[string]bool{}
		for _, it := range items {
			if it.State != "completed" {
				t.Errorf("%s: message %s ended %s", q, it.Message.MessageID, it.State)
			}
			if it.Flagged {
				flagged[it.CopyMessageID] = true
			}
		}
		r, err := client.NewReceiverForQueue(q, nil)
		if err != nil {
			t.Fatal(err)
		}
		copies := map[string]int{}
		for {
			rctx, rcancel := context.WithTimeout(ctx, time.Second)
			ms, _ := r.ReceiveMessages(rctx, 500, nil)
			rcancel()
			if len(ms) == 0 {
				break
			}
			for _, m := range ms {
				copies[m.MessageID]++
				r.CompleteMessage(ctx, m, nil)
			}
		}
		r.Close(ctx)
		if len(copies) != n || len(items) != n {
			t.Errorf("%s: %d distinct copies for %d job messages, want %d: a message was lost", q, len(copies), len(items), n)
		}
		dups := 0
		for id, k := range copies {
			if k > 1 {
				dups += k - 1
				if q == "dedup" {
					t.Errorf("%s: copy %s arrived %d times on a target with duplicate detection", q, id, k)
				} else if !flagged[id] {
					t.Errorf("%s: copy %s arrived %d times but its message is not flagged", q, id, k)
				}
			}
		}
		t.Logf("%s: %d copies, %d duplicates, %d flagged", q, len(copies), dups, len(flagged))
		dl, err := client.NewReceiverForQueue(q, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
		if err != nil {
			t.Fatal(err)
		}
		left, err := dl.PeekMessages(ctx, 10, nil)
		dl.Close(ctx)
		if err != nil || len(left) != 0 {
			t.Errorf("%s: %d messages left in the DLQ (%v)", q, len(left), err)
		}
	}
	c.kill()
	if code, out, errOut := runCmd(t, "audit", "verify", "--db", db); code != 0 {
		t.Errorf("audit verify after the crashes: %d %s %s", code, out, errOut)
	}
}
