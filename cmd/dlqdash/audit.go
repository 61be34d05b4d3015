package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/web/apijson"
)

// `dlqdash audit verify` and `dlqdash audit export` (docs/api.md): read-only
// commands over a database's audit trail, safe beside a serving dlqdash
// (like export).

// AuditExportConfig configures `dlqdash audit export`.
type AuditExportConfig struct {
	Format string // jsonl or csv
	Since  *time.Time
	Until  *time.Time
}

func auditVerifyFlags(f *flagSet) {
	f.str("db", envDB, defaultDB, "SQLite database file of a dlqdash catalog (read only; never created or migrated)")
}

func auditExportFlags(f *flagSet) {
	f.str("db", envDB, defaultDB, "SQLite database file of a dlqdash catalog (read only; never created or migrated)")
	f.str("format", "", "jsonl", "jsonl (one entry object per line) or csv (a header row; params and message_ids as JSON text)")
	f.str("since", "", "", "only entries at or after this RFC 3339 time, e.g. 2026-11-22T10:00:00Z")
	f.str("until", "", "", "only entries before this RFC 3339 time")
}

// parseAuditExport checks audit export's flags.
func parseAuditExport(f *flagSet, bad func(string, ...any) error) (AuditExportConfig, error) {
	v := func(name string) string { return strings.TrimSpace(*f.values[name]) }
	a := AuditExportConfig{Format: strings.ToLower(v("format"))}
	if a.Format != "jsonl" && a.Format != "csv" {
		return a, bad("invalid --format %q: want jsonl or csv", v("format"))
	}
	for _, tf := range []struct {
		name string
		dst  **time.Time
	}{{"since", &a.Since}, {"until", &a.Until}} {
		s := v(tf.name)
		if s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return a, bad("invalid --%s %q: want an RFC 3339 time such as 2026-11-22T10:00:00Z", tf.name, s)
		}
		*tf.dst = &t
	}
	if a.Since != nil && a.Until != nil && !a.Until.After(*a.Since) {
		return a, bad("--until must be after --since")
	}
	return a, nil
}

// reportedError is a failure the command already reported on stdout: run
// exits 1 without printing it again.
type reportedError struct{ err error }

func (e *reportedError) Error() string { return e.err.Error() }
func (e *reportedError) Unwrap() error { return e.err }

// runAuditVerify walks the whole chain and prints one line: "audit chain
// intact: N entries", or the first entry that does not hold (exit 1).
func runAuditVerify(ctx context.Context, cfg Config, stdout io.Writer) error {
	st, err := store.OpenReadOnly(ctx, cfg.DB, store.Options{})
	if err != nil {
		return fmt.Errorf("audit verify: %w", err)
	}
	defer st.Close()
	n, err := audit.New(st).Verify(ctx, nil)
	var broken *audit.BrokenChainError
	switch {
	case errors.As(err, &broken):
		fmt.Fprintln(stdout, broken.Error())
		return &reportedError{broken}
	case err != nil:
		return fmt.Errorf("audit verify: %w", err)
	}
	fmt.Fprintf(stdout, "audit chain intact: %d entries\n", n)
	return nil
}

// runAuditExport writes the entries in seq order as they are read, from one
// snapshot.
func runAuditExport(ctx context.Context, cfg Config, stdout io.Writer) error {
	st, err := store.OpenReadOnly(ctx, cfg.DB, store.Options{})
	if err != nil {
		return fmt.Errorf("audit export: %w", err)
	}
	defer st.Close()

	w := bufio.NewWriterSize(stdout, 64<<10)
	var write func(audit.Entry) error
	finish := func() error { return nil }
	switch cfg.AuditExport.Format {
	case "csv":
		cw := csv.NewWriter(w)
		if err := cw.Write(apijson.AuditCSVHeader()); err != nil {
			return fmt.Errorf("audit export: %w", err)
		}
		write = func(e audit.Entry) error { return cw.Write(apijson.NewAuditEntry(e).CSVRecord()) }
		finish = func() error { cw.Flush(); return cw.Error() }
	default:
		enc := json.NewEncoder(w)
		write = func(e audit.Entry) error { return enc.Encode(apijson.NewAuditEntry(e)) }
	}
	f := audit.Filter{Since: cfg.AuditExport.Since, Until: cfg.AuditExport.Until}
	if err := st.ScanAudit(ctx, f, write); err != nil {
		return fmt.Errorf("audit export: %w", err)
	}
	if err := finish(); err != nil {
		return fmt.Errorf("audit export: %w", err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("audit export: %w", err)
	}
	return nil
}
