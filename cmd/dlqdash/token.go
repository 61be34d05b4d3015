package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/store"
)

// `dlqdash token create|list|revoke` (docs/api.md): API tokens, managed on the
// database directly, like `dlqdash audit`: whoever can write the database
// file administers dlqdash anyway. Safe beside a serving dlqdash; a
// revocation takes effect at the token's next request.

// TokenConfig configures the token subcommands (DB is their database).
type TokenConfig struct {
	Name    string
	Role    auth.Role
	Expires time.Duration // 0: never
}

func tokenCreateFlags(f *flagSet) {
	f.str("db", envDB, defaultDB, "SQLite database file or postgres:// URL (or DLQDASH_DATABASE_URL) of a dlqdash catalog (created and migrated if needed)")
	f.str("name", "", "", "the token's name (required): letters, digits, '.', '_' or '-'; never reused, even after revocation")
	f.str("role", "", "", "the token's role (required): viewer, operator or admin")
	f.str("expires", "", "", "how long the token is valid: a Go duration (720h) or days (90d); empty for never")
	auditKeyFlag(f)
}

func tokenListFlags(f *flagSet) {
	f.str("db", envDB, defaultDB, "SQLite database file or postgres:// URL (or DLQDASH_DATABASE_URL) of a dlqdash catalog (read only; never created or migrated)")
}

func tokenRevokeFlags(f *flagSet) {
	f.str("db", envDB, defaultDB, "SQLite database file or postgres:// URL (or DLQDASH_DATABASE_URL) of a dlqdash catalog")
	f.str("name", "", "", "the name of the token to revoke (required)")
	auditKeyFlag(f)
}

// parseToken checks the token subcommands' flags.
func parseToken(command string, f *flagSet, bad func(string, ...any) error) (TokenConfig, error) {
	v := func(name string) string {
		p, ok := f.values[name]
		if !ok {
			return ""
		}
		return strings.TrimSpace(*p)
	}
	var tc TokenConfig
	if command == "token list" {
		return tc, nil
	}
	if tc.Name = v("name"); tc.Name == "" {
		return tc, bad("--name is required")
	}
	if command == "token revoke" {
		return tc, nil
	}
	var err error
	if tc.Role, err = auth.ParseRole(v("role")); err != nil {
		if v("role") == "" {
			return tc, bad("--role is required: viewer, operator or admin")
		}
		return tc, bad("invalid --role %q: want viewer, operator or admin", v("role"))
	}
	if e := v("expires"); e != "" {
		if days, ok := strings.CutSuffix(e, "d"); ok {
			var n int
			if _, err := fmt.Sscanf(days, "%d", &n); err != nil || n < 1 || n > 3650 || fmt.Sprint(n) != days {
				return tc, bad("invalid --expires %q: want days such as 90d or a duration such as 720h", e)
			}
			tc.Expires = time.Duration(n) * 24 * time.Hour
		} else if tc.Expires, err = time.ParseDuration(e); err != nil || tc.Expires < time.Minute {
			return tc, bad("invalid --expires %q: want days such as 90d or a duration of at least 1m such as 720h", e)
		}
	}
	return tc, nil
}

// cliActor is who the audit trail says ran a token command: "cli:" and the
// operating system's user name (the database is not told who you are; the
// account that ran the command is the best witness there is).
func cliActor() string {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if name == "" {
		name = os.Getenv("USER")
	}
	if name == "" {
		return "cli"
	}
	return "cli:" + name
}

// keyCreatedNote says where a token command put the audit key it created.
func keyCreatedNote(stdout io.Writer) func(string) {
	return func(path string) {
		fmt.Fprintf(stdout, "created the audit key file %s (mode 0600): audit verify needs it; keep a copy away from the database\n", path)
	}
}

// runTokenCreate prints what it made and, alone on the last line, the
// token: the only time it is ever shown.
func runTokenCreate(ctx context.Context, cfg Config, stdout io.Writer) error {
	st, err := store.Open(ctx, cfg.DB, store.Options{})
	if err != nil {
		return fmt.Errorf("token create: %w", err)
	}
	defer st.Close()
	auditLog, err := openAuditLog(ctx, cfg, st, keyCreatedNote(stdout))
	if err != nil {
		return fmt.Errorf("token create: %w", err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	t := auth.Token{Name: cfg.Token.Name, Role: cfg.Token.Role, CreatedAt: now, CreatedBy: cliActor()}
	if cfg.Token.Expires > 0 {
		exp := now.Add(cfg.Token.Expires)
		t.ExpiresAt = &exp
	}
	secret, t, err := auth.CreateToken(ctx, st, t)
	if errors.Is(err, auth.ErrNameTaken) {
		return fmt.Errorf("token create: a token named %q exists (names are never reused; list them with 'dlqdash token list')", t.Name)
	}
	if err != nil {
		return fmt.Errorf("token create: %w", err)
	}
	params := map[string]any{"name": t.Name, "role": t.Role.String(), "expires_at": nil}
	if t.ExpiresAt != nil {
		params["expires_at"] = t.ExpiresAt.Format(time.RFC3339)
	}
	if _, err := auditLog.Append(ctx, audit.Record{Actor: t.CreatedBy, Action: audit.ActionTokenCreated, Params: params}); err != nil {
		// The token exists but nobody could see who made it: take it back.
		if _, rerr := st.RevokeToken(ctx, t.Name, time.Now()); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return fmt.Errorf("token create: %w (the token was revoked)", err)
	}
	expires := "never expires"
	if t.ExpiresAt != nil {
		expires = "expires " + t.ExpiresAt.Format(time.RFC3339)
	}
	fmt.Fprintf(stdout, "created API token %q: role %s, %s.\n", t.Name, t.Role, expires)
	fmt.Fprintln(stdout, "It is shown only now; clients send it as 'Authorization: Bearer <token>':")
	fmt.Fprintln(stdout, secret)
	return nil
}

// runTokenList prints a table of every token, revoked ones included.
func runTokenList(ctx context.Context, cfg Config, stdout io.Writer) error {
	st, err := store.OpenReadOnly(ctx, cfg.DB, store.Options{})
	if err != nil {
		return fmt.Errorf("token list: %w", err)
	}
	defer st.Close()
	tokens, err := st.ListTokens(ctx)
	if err != nil {
		if v, verr := st.Version(ctx); verr == nil && v < 8 {
			fmt.Fprintln(stdout, "no API tokens (this database predates them)")
			return nil
		}
		return fmt.Errorf("token list: %w", err)
	}
	if len(tokens) == 0 {
		fmt.Fprintln(stdout, "no API tokens")
		return nil
	}
	when := func(t *time.Time, none string) string {
		if t == nil {
			return none
		}
		return t.UTC().Format(time.RFC3339)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tSTATE\tCREATED\tCREATED BY\tEXPIRES\tLAST USED")
	now := time.Now()
	for _, t := range tokens {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.Role, t.State(now), when(&t.CreatedAt, ""), t.CreatedBy,
			when(t.ExpiresAt, "never"), when(t.LastUsedAt, "never"))
	}
	return tw.Flush()
}

// runTokenRevoke revokes a token by name and audits it.
func runTokenRevoke(ctx context.Context, cfg Config, stdout io.Writer) error {
	st, err := store.Open(ctx, cfg.DB, store.Options{})
	if err != nil {
		return fmt.Errorf("token revoke: %w", err)
	}
	defer st.Close()
	auditLog, err := openAuditLog(ctx, cfg, st, keyCreatedNote(stdout))
	if err != nil {
		return fmt.Errorf("token revoke: %w", err)
	}
	now := time.Now().UTC()
	t, err := st.RevokeToken(ctx, cfg.Token.Name, now)
	if errors.Is(err, auth.ErrNotFound) {
		return fmt.Errorf("token revoke: there is no token named %q (see 'dlqdash token list')", cfg.Token.Name)
	}
	if err != nil {
		return fmt.Errorf("token revoke: %w", err)
	}
	if t.RevokedAt.Before(now.Truncate(time.Millisecond)) {
		fmt.Fprintf(stdout, "API token %q was already revoked at %s\n", t.Name, t.RevokedAt.Format(time.RFC3339))
		return nil
	}
	if _, err := auditLog.Append(ctx, audit.Record{Actor: cliActor(), Action: audit.ActionTokenRevoked,
		Params: map[string]any{"name": t.Name, "role": t.Role.String()}}); err != nil {
		return fmt.Errorf("token revoke: the token is revoked, but the audit entry failed: %w", err)
	}
	fmt.Fprintf(stdout, "revoked API token %q; it stops working at its next request\n", t.Name)
	return nil
}
