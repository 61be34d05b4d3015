package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/web/apijson"
)

// ExportConfig configures `dlqdash export`: the output format and the
// filter, as the message list's (docs/api.md).
type ExportConfig struct {
	Format      string // jsonl or csv
	Entity      string
	SubQueue    dlq.SubQueue
	State       dlq.State
	Reason      string
	Since       *time.Time
	Until       *time.Time
	IncludeGone bool
}

// Filter is the catalog filter the flags describe.
func (e ExportConfig) Filter() dlq.Filter {
	return dlq.Filter{Entity: e.Entity, SubQueue: e.SubQueue, State: e.State, Reason: e.Reason,
		Since: e.Since, Until: e.Until, IncludeGone: e.IncludeGone}
}

func exportFlags(f *flagSet) {
	f.str("db", envDB, defaultDB, "SQLite database file of a dlqdash catalog (read only; never created or migrated)")
	f.str("format", "", "jsonl", "jsonl (one message object per line, with body_base64) or csv (a header row; no body_base64 or application_properties)")
	f.str("entity", "", "", "only messages of this queue or subscription path, e.g. orders or payments/Subscriptions/audit")
	f.str("subqueue", "", "", "only this subqueue: dead_letter, transfer_dead_letter or main")
	f.str("state", "", "", "only this state: active, deferred or scheduled")
	f.str("reason", "", "", "only messages with exactly this dead-letter reason")
	f.str("since", "", "", "only messages enqueued at or after this RFC 3339 time, e.g. 2026-11-22T10:00:00Z")
	f.str("until", "", "", "only messages enqueued before this RFC 3339 time")
	f.boolean("include-gone", "also messages the catalog saw leave the broker")
}

// boolean adds a flag that is false unless given (--name or --name=true).
func (f *flagSet) boolean(name, meaning string) {
	f.bools[name] = f.fs.Bool(name, false, meaning)
	f.specs = append(f.specs, flagSpec{name: name, meaning: meaning})
}

// parseExport checks export's flags.
func parseExport(f *flagSet, bad func(string, ...any) error) (ExportConfig, error) {
	v := func(name string) string { return strings.TrimSpace(*f.values[name]) }
	e := ExportConfig{
		Format:      strings.ToLower(v("format")),
		Entity:      v("entity"),
		SubQueue:    dlq.SubQueue(v("subqueue")),
		State:       dlq.State(v("state")),
		Reason:      *f.values["reason"], // exact, spaces included
		IncludeGone: *f.bools["include-gone"],
	}
	if e.Format != "jsonl" && e.Format != "csv" {
		return e, bad("invalid --format %q: want jsonl or csv", v("format"))
	}
	if e.SubQueue != "" && !e.SubQueue.Valid() {
		return e, bad("invalid --subqueue %q: want dead_letter, transfer_dead_letter or main", e.SubQueue)
	}
	if e.State != "" && !e.State.Valid() {
		return e, bad("invalid --state %q: want active, deferred or scheduled", e.State)
	}
	for _, tf := range []struct {
		name string
		dst  **time.Time
	}{{"since", &e.Since}, {"until", &e.Until}} {
		s := v(tf.name)
		if s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return e, bad("invalid --%s %q: want an RFC 3339 time such as 2026-11-22T10:00:00Z", tf.name, s)
		}
		*tf.dst = &t
	}
	if e.Since != nil && e.Until != nil && !e.Until.After(*e.Since) {
		return e, bad("--until must be after --since")
	}
	return e, nil
}

// runExport writes the matching messages to stdout as they are read: memory
// does not grow with the catalog. It opens the database read only, so it
// runs beside a serving dlqdash and exports one consistent snapshot.
func runExport(ctx context.Context, cfg Config, stdout io.Writer) error {
	st, err := store.OpenReadOnly(ctx, cfg.DB, store.Options{})
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer st.Close()

	w := bufio.NewWriterSize(stdout, 64<<10)
	var write func(dlq.Record) error
	var finish func() error
	switch cfg.Export.Format {
	case "csv":
		cw := csv.NewWriter(w)
		if err := cw.Write(apijson.CSVHeader()); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		write = func(r dlq.Record) error { return cw.Write(apijson.NewMessage(r, false).CSVRecord()) }
		finish = func() error { cw.Flush(); return cw.Error() }
	default:
		enc := json.NewEncoder(w)
		write = func(r dlq.Record) error { return enc.Encode(apijson.NewMessage(r, true)) }
		finish = func() error { return nil }
	}
	if err := st.ExportMessages(ctx, cfg.Export.Filter(), write); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := finish(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}
