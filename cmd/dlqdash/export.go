package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/web/apijson"
)

// ExportConfig configures `dlqdash export`: the output format and the
// filter, the message list's (docs/api.md), read from flags by dlq.
type ExportConfig struct {
	Format string // jsonl or csv
	Filter dlq.Filter
}

func exportFlags(f *flagSet) {
	f.str("db", envDB, defaultDB, "SQLite database file or postgres:// URL (or DLQDASH_DATABASE_URL) of a dlqdash catalog (read only; never created or migrated)")
	f.str("format", "", "jsonl", "jsonl (one message object per line, with body_base64) or csv (a header row; no body_base64 or application_properties)")
	// The filter's flags are dlq's (one per key of the message list's
	// filter), listed in the help like the others.
	for _, name := range dlq.FilterFlags(f.fs) {
		f.specs = append(f.specs, flagSpec{name: name, meaning: f.fs.Lookup(name).Usage})
	}
}

// parseExport checks export's flags.
func parseExport(f *flagSet, bad func(string, ...any) error) (ExportConfig, error) {
	format := strings.TrimSpace(*f.values["format"])
	e := ExportConfig{Format: strings.ToLower(format)}
	if e.Format != "jsonl" && e.Format != "csv" {
		return e, bad("invalid --format %q: want jsonl or csv", format)
	}
	var err error
	if e.Filter, err = dlq.FilterFromFlags(f.fs); err != nil {
		return e, bad("%v", err)
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
	if err := st.ExportMessages(ctx, cfg.Export.Filter, write); err != nil {
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
