package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeAccessPerNamespace runs the real program: dlqdash serve --config
// with two SAS namespaces (two `dlqdash emulator`s), --auth proxy trusting
// the loopback address, and access rules making the operators of prod-eu
// viewers of prod-us. Through the proxy headers, such an operator sees both
// namespaces' dead letters, replays prod-eu's (the job runs to the end),
// and is refused prod-us's with a 403 naming the namespace and the role,
// recorded in the audit trail with the namespace.
func TestServeAccessPerNamespace(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two emulators and dlqdash serve")
	}
	connEU, adminEU := startQueueEmulator(t, "orders-eu")
	connUS, adminUS := startQueueEmulator(t, "orders-us")
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "dlqdash.yaml")
	if err := os.WriteFile(cfgFile, []byte(`namespaces:
  - name: prod-eu
    connection_string_env: SB_PROD_EU
    admin_endpoint: http://`+adminEU+`
  - name: prod-us
    connection_string_env: SB_PROD_US
    admin_endpoint: http://`+adminUS+`
access:
  - {group: sre-eu, role: operator, namespaces: [prod-eu]}
  - {group: sre-eu, role: viewer, namespaces: [prod-us]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, []string{"serve", "--config", cfgFile, "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "dlqdash.db"), "--poll", "100ms",
		"--auth", "proxy", "--trusted-proxies", "127.0.0.1", "--operator-groups", "sre-eu"},
		"SB_PROD_EU="+connEU, "SB_PROD_US="+connUS, envConnectionString+"=")
	defer c.kill()

	// call sends a request as the proxy would, for ana of sre-eu.
	call := func(method, path, body string, out any) (int, string) {
		t.Helper()
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(t.Context(), method, "http://"+c.addr+path, r)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-User", "ana")
		req.Header.Set("X-Forwarded-Groups", "sre-eu")
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if out != nil {
			json.Unmarshal(b, out)
		}
		return res.StatusCode, string(b)
	}
	type msg struct{ ID, Namespace string }
	var msgs struct{ Messages []msg }
	waitFor(t, "both namespaces' dead letters", func() bool {
		call("GET", "/api/v1/messages", "", &msgs)
		return len(msgs.Messages) == 2
	})
	ids := map[string]string{}
	for _, m := range msgs.Messages {
		ids[m.Namespace] = m.ID
	}
	if ids["prod-eu"] == "" || ids["prod-us"] == "" {
		t.Fatalf("messages %+v", msgs.Messages)
	}
	// Without the proxy's headers: nobody.
	if code := callAPI(t, c.addr, "GET", "/api/v1/messages", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("without identity headers: %d", code)
	}

	// Refused in prod-us, in words naming it and the role.
	code, body := call("POST", "/api/v1/jobs", `{"action":"replay","ids":["`+ids["prod-us"]+`"]}`, nil)
	if code != http.StatusForbidden || !strings.Contains(body, `"code":"permission_denied"`) ||
		!strings.Contains(body, "you are a viewer in prod-us; replaying there needs operator") {
		t.Fatalf("replay in prod-us: %d %s", code, body)
	}
	code, body = call("POST", "/api/v1/jobs", `{"action":"replay","ids":["`+ids["prod-eu"]+`"],"destination_namespace":"prod-us"}`, nil)
	if code != http.StatusForbidden || !strings.Contains(body, "you are a viewer in prod-us") {
		t.Fatalf("replay from prod-eu into prod-us: %d %s", code, body)
	}

	// Allowed in prod-eu: the job replays the message to the end.
	var job struct{ ID, Status, Namespace string }
	if code, body := call("POST", "/api/v1/jobs", `{"action":"replay","ids":["`+ids["prod-eu"]+`"]}`, &job); code != http.StatusCreated {
		t.Fatalf("replay in prod-eu: %d %s", code, body)
	}
	if job.Namespace != "prod-eu" {
		t.Errorf("job namespace %q", job.Namespace)
	}
	waitFor(t, "the prod-eu job to finish", func() bool {
		call("GET", "/api/v1/jobs/"+job.ID, "", &job)
		return job.Status == "completed"
	})

	// The refusals are in the audit trail with their namespace.
	var audit struct {
		Entries []struct {
			Actor, Action string
			Namespace     *string
			Params        map[string]any
		}
	}
	if code, body := call("GET", "/api/v1/audit?action=denied&namespace=prod-us", "", &audit); code != http.StatusOK || len(audit.Entries) == 0 {
		t.Fatalf("audit: %d %s", code, body)
	}
	for _, e := range audit.Entries {
		if e.Actor != "proxy:ana" || e.Namespace == nil || *e.Namespace != "prod-us" || e.Params["required_role"] != "operator" {
			t.Errorf("denied entry %+v", e)
		}
	}
	// The prod-us message is untouched: still there, in no job.
	var us struct{ Messages []json.RawMessage }
	call("GET", "/api/v1/messages?namespace=prod-us", "", &us)
	if len(us.Messages) != 1 || !bytes.Contains(us.Messages[0], []byte(`"replay_count":0`)) {
		t.Errorf("prod-us messages after the refusals: %s", us.Messages)
	}
}
