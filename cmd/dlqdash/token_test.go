package main

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/web"
)

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestTokenCommands(t *testing.T) {
	db := filepath.Join(t.TempDir(), "dlqdash.db")
	code, out, errOut := runCmd(t, "token", "create", "--db", db, "--name", "ci-bot", "--role", "operator", "--expires", "90d")
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, errOut)
	}
	secret := lastLine(out)
	if !strings.HasPrefix(secret, auth.TokenPrefix) || strings.Contains(secret, " ") || !strings.Contains(out, `"ci-bot": role operator, expires`) {
		t.Fatalf("create printed:\n%s", out)
	}
	if code, _, errOut := runCmd(t, "token", "create", "--db", db, "--name", "ci-bot", "--role", "viewer"); code != 1 || !strings.Contains(errOut, "exists") {
		t.Errorf("duplicate: exit %d: %s", code, errOut)
	}
	code, out, _ = runCmd(t, "token", "create", "--db", db, "--name", "grafana", "--role", "viewer")
	if code != 0 || !strings.Contains(out, "never expires") {
		t.Fatalf("create grafana: %d %s", code, out)
	}

	// The token works on the API of a server on the same database.
	st, err := store.Open(t.Context(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := web.New(web.Config{Catalog: st, Auth: auth.New(auth.Config{Mode: auth.ModeProxy, Store: st})}).Handler()
	get := func() int {
		req := httptest.NewRequestWithContext(t.Context(), "GET", "/api/v1/entities", nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if got := get(); got != http.StatusOK {
		t.Fatalf("API with the new token: %d", got)
	}

	code, out, _ = runCmd(t, "token", "list", "--db", db)
	if code != 0 || !strings.Contains(out, "NAME") || !strings.Contains(out, "ci-bot") || !strings.Contains(out, "grafana") ||
		strings.Contains(out, secret) || strings.Count(out, "active") != 2 {
		t.Errorf("list: %d\n%s", code, out)
	}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 7 && f[0] == "ci-bot" && f[6] == "never" || len(f) == 7 && f[0] == "grafana" && f[6] != "never" {
			t.Errorf("last use wrong: %s", line)
		}
	}

	code, out, _ = runCmd(t, "token", "revoke", "--db", db, "--name", "ci-bot")
	if code != 0 || !strings.Contains(out, "revoked") {
		t.Fatalf("revoke: %d %s", code, out)
	}
	if got := get(); got != http.StatusUnauthorized {
		t.Errorf("API with the revoked token: %d", got)
	}
	if code, out, _ := runCmd(t, "token", "revoke", "--db", db, "--name", "ci-bot"); code != 0 || !strings.Contains(out, "already revoked") {
		t.Errorf("revoke again: %d %s", code, out)
	}
	if code, _, errOut := runCmd(t, "token", "revoke", "--db", db, "--name", "nobody"); code != 1 || !strings.Contains(errOut, `no token named "nobody"`) {
		t.Errorf("revoke unknown: %d %s", code, errOut)
	}
	if _, out, _ := runCmd(t, "token", "list", "--db", db); !strings.Contains(out, "revoked") {
		t.Errorf("list after revoke:\n%s", out)
	}

	// Creation and revocation are audited, by the command line's user.
	var entries []audit.Entry
	st.ScanAudit(t.Context(), audit.Filter{}, func(e audit.Entry) error { entries = append(entries, e); return nil })
	// The first command to write the trail keyed it (auditkey.go).
	if len(entries) == 0 || entries[0].Action != audit.ActionAuditKeyed {
		t.Fatalf("the chain does not start with its switch to the key: %+v", entries)
	}
	var got []string
	for _, e := range entries[1:] {
		got = append(got, e.Action+" "+string(e.Params))
		if !strings.HasPrefix(e.Actor, "cli") {
			t.Errorf("actor %q", e.Actor)
		}
	}
	if len(got) != 3 || !strings.HasPrefix(got[0], "token_created") || !strings.Contains(got[0], `"role":"operator"`) ||
		!strings.HasPrefix(got[2], "token_revoked") || strings.Contains(strings.Join(got, ""), secret) {
		t.Errorf("audit: %q", got)
	}
	if code, _, _ := runCmd(t, "audit", "verify", "--db", db); code != 0 {
		t.Error("the chain does not verify")
	}
}

func TestTokenCommandErrors(t *testing.T) {
	db := filepath.Join(t.TempDir(), "x.db")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"token", "create", "--db", db, "--role", "viewer"}, "--name is required"},
		{[]string{"token", "create", "--db", db, "--name", "x"}, "--role is required"},
		{[]string{"token", "create", "--db", db, "--name", "x", "--role", "root"}, `invalid --role "root"`},
		{[]string{"token", "create", "--db", db, "--name", "x", "--role", "viewer", "--expires", "soon"}, `invalid --expires "soon"`},
		{[]string{"token", "create", "--db", db, "--name", "x", "--role", "viewer", "--expires", "0d"}, `invalid --expires "0d"`},
		{[]string{"token", "revoke", "--db", db}, "--name is required"},
		{[]string{"token", "rotate"}, `unknown token subcommand "rotate"`},
	} {
		code, _, errOut := runCmd(t, tt.args...)
		if code != exitUsage || !strings.Contains(errOut, tt.want) {
			t.Errorf("%q: exit %d, %q; want 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
	if code, _, errOut := runCmd(t, "token", "create", "--db", db, "--name", "bad name", "--role", "viewer"); code != 1 || !strings.Contains(errOut, "invalid token name") {
		t.Errorf("bad name: %d %s", code, errOut)
	}
	if code, _, errOut := runCmd(t, "token", "list", "--db", filepath.Join(t.TempDir(), "missing.db")); code != 1 || !strings.Contains(errOut, "does not exist") {
		t.Errorf("list on a missing file: %d %s", code, errOut)
	}
	// Expiry as a duration.
	code, out, _ := runCmd(t, "token", "create", "--db", db, "--name", "short", "--role", "admin", "--expires", "2h")
	if code != 0 {
		t.Fatal(out)
	}
	exp, err := time.Parse(time.RFC3339, strings.TrimSuffix(strings.Fields(strings.SplitN(out, "expires ", 2)[1])[0], "."))
	if err != nil || exp.Sub(time.Now()) > 2*time.Hour || exp.Sub(time.Now()) < 2*time.Hour-time.Minute {
		t.Errorf("expiry %v (%v) from:\n%s", exp, err, out)
	}
}
