package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/replay"
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
	f.str("db", envDB, defaultDB, "SQLite database file or postgres:// URL (or DLQDASH_DATABASE_URL) of a dlqdash catalog (read only; never created or migrated)")
	auditKeyFlag(f)
	f.str("expect-head", "", "", "SEQ:HASH a head recorded earlier (dlqdash audit head, or serve's hourly 'audit head' log line): the chain must still reach it unchanged")
}

func auditHeadFlags(f *flagSet) {
	f.str("db", envDB, defaultDB, "SQLite database file or postgres:// URL (or DLQDASH_DATABASE_URL) of a dlqdash catalog (read only; never created or migrated)")
}

func auditExportFlags(f *flagSet) {
	f.str("db", envDB, defaultDB, "SQLite database file or postgres:// URL (or DLQDASH_DATABASE_URL) of a dlqdash catalog (read only; never created or migrated)")
	f.str("format", "", "jsonl", "jsonl (one entry object per line) or csv (a header row; params and message_ids as JSON text)")
	f.str("since", "", "", "only entries at or after this RFC 3339 time, e.g. 2026-11-22T10:00:00Z")
	f.str("until", "", "", "only entries before this RFC 3339 time")
}

// AuditVerifyConfig configures `dlqdash audit verify`.
type AuditVerifyConfig struct {
	ExpectHead audit.Head // zero: none
}

// parseAuditVerify checks audit verify's flags.
func parseAuditVerify(f *flagSet, bad func(string, ...any) error) (AuditVerifyConfig, error) {
	var a AuditVerifyConfig
	if s := strings.TrimSpace(f.get("expect-head")); s != "" {
		h, err := audit.ParseHead(s)
		if err != nil {
			return a, bad("invalid --expect-head: %v", err)
		}
		a.ExpectHead = h
	}
	return a, nil
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

// runAuditVerify walks the whole chain and prints "audit chain intact: N
// entries" and a line with the head and the key used, or the first entry that does not hold
// (exit 1). Then every job must have its creation entry, and its status
// (completed, cancelled, paused) the entry that records it.
func runAuditVerify(ctx context.Context, cfg Config, stdout io.Writer) error {
	st, err := store.OpenReadOnly(ctx, cfg.DB, store.Options{})
	if err != nil {
		return fmt.Errorf("audit verify: %w", err)
	}
	defer st.Close()
	key, from, _, err := loadAuditKey(cfg, false)
	if err != nil {
		return fmt.Errorf("audit verify: %w", err)
	}
	l := audit.New(st)
	if key != nil {
		if l, err = audit.NewKeyed(st, key); err != nil {
			return fmt.Errorf("audit verify: audit key from %s: %w", from, err)
		}
	}
	n, head, err := l.VerifyHead(ctx, cfg.AuditVerify.ExpectHead, nil)
	if err == nil {
		err = checkJobsAudited(ctx, st, n)
	}
	var broken *audit.BrokenChainError
	switch {
	case errors.As(err, &broken):
		fmt.Fprintln(stdout, broken.Error())
		return &reportedError{broken}
	case err != nil:
		return fmt.Errorf("audit verify: %w", err)
	}
	keyed := "no audit key found: checked as unkeyed SHA-256"
	if key != nil {
		keyed = "audit key from " + from
	}
	fmt.Fprintf(stdout, "audit chain intact: %d entries\nhead %s (%s)\n", n, head, keyed)
	return nil
}

// statusActions are the job statuses an audit entry records, by the
// action of that entry: a job whose status is one of these has at least
// one such entry (its status and the entry are one transaction).
var statusActions = map[replay.Status]string{
	replay.StatusCompleted:  audit.ActionJobCompleted,
	replay.StatusCancelling: audit.ActionJobCancelled,
	replay.StatusCancelled:  audit.ActionJobCancelled,
	replay.StatusPaused:     audit.ActionJobPaused,
}

// checkJobsAudited fails naming the first job without a successful
// creation entry (a chain emptied or cut before it, while the jobs table
// still tells of it), or whose status (completed, cancelled, paused) has
// no entry recording it.
func checkJobsAudited(ctx context.Context, st *store.Store, entries int) error {
	// The jobs each action's entries name; creations count only when
	// they succeeded.
	named := map[string]map[string]bool{}
	for _, action := range []string{audit.ActionReplayJobCreated, audit.ActionDiscardJobCreated, audit.ActionEditReplay,
		audit.ActionJobCompleted, audit.ActionJobCancelled, audit.ActionJobPaused} {
		creation := action == audit.ActionReplayJobCreated || action == audit.ActionDiscardJobCreated || action == audit.ActionEditReplay
		key := action
		if creation {
			key = "created"
		}
		if named[key] == nil {
			named[key] = map[string]bool{}
		}
		err := st.ScanAudit(ctx, audit.Filter{Action: action}, func(e audit.Entry) error {
			var p struct {
				JobID string `json:"job_id"`
			}
			if (!creation || e.Outcome == audit.OutcomeSucceeded) && json.Unmarshal(e.Params, &p) == nil && p.JobID != "" {
				named[key][p.JobID] = true
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	cursor := ""
	for {
		jobs, next, err := st.ListJobs(ctx, 500, cursor)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			id := strconv.FormatInt(j.ID, 10)
			if !named["created"][id] {
				got := ""
				if entries == 0 {
					got = "empty"
				}
				return &audit.BrokenChainError{Reason: audit.NoCreation, Want: id, Got: got}
			}
			if action, ok := statusActions[j.Status]; ok && !named[action][id] {
				return &audit.BrokenChainError{Reason: audit.NoStatusEntry, Want: id, Got: string(j.Status), Action: action}
			}
		}
		if next == "" {
			return nil
		}
		cursor = next
	}
}

// runAuditHead prints the newest entry as SEQ:HASH, to keep elsewhere and
// give to audit verify --expect-head later.
func runAuditHead(ctx context.Context, cfg Config, stdout io.Writer) error {
	st, err := store.OpenReadOnly(ctx, cfg.DB, store.Options{})
	if err != nil {
		return fmt.Errorf("audit head: %w", err)
	}
	defer st.Close()
	h, err := auditHead(ctx, st)
	if err != nil {
		return fmt.Errorf("audit head: %w", err)
	}
	fmt.Fprintln(stdout, h)
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
	ex, err := apijson.NewAuditExporter(w, cfg.AuditExport.Format)
	if err != nil {
		return fmt.Errorf("audit export: %w", err)
	}
	f := audit.Filter{Since: cfg.AuditExport.Since, Until: cfg.AuditExport.Until}
	if err := st.ScanAudit(ctx, f, ex.Write); err != nil {
		return fmt.Errorf("audit export: %w", err)
	}
	if err := ex.Finish(); err != nil {
		return fmt.Errorf("audit export: %w", err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("audit export: %w", err)
	}
	return nil
}
