package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/store"
)

// dlqdash store copy (issue 20): a catalog moved to PostgreSQL with its
// history (messages, groups, jobs, the audit chain, tokens, sessions), for
// a team going from one instance on a SQLite file to replicas on
// PostgreSQL.

func storeCopyFlags(f *flagSet) {
	f.str("from", envDB, defaultDB, "the catalog to copy: a SQLite database file (read only; never migrated)")
	f.str("to", envDatabaseURL, "", "the PostgreSQL database to copy it into, a postgres:// URL (migrated first; rows it has are kept)")
}

func parseStoreCopy(cfg *Config, f *flagSet, bad func(string, ...any) error) error {
	cfg.DB = strings.TrimSpace(f.get("from"))
	if cfg.DB == "" {
		return bad("empty database path from %s", f.source("from"))
	}
	cfg.CopyTo = strings.TrimSpace(f.get("to"))
	switch {
	case cfg.CopyTo == "":
		return bad("--to (or %s) is required: the postgres:// URL of the database to copy into", envDatabaseURL)
	case !store.IsPostgresURL(cfg.CopyTo):
		return bad("--to must be a postgres:// or postgresql:// URL, not %q", cfg.CopyTo)
	}
	return nil
}

// copyReportEvery is how often a long table's progress is printed.
const copyReportEvery = 5 * time.Second

func runStoreCopy(ctx context.Context, cfg Config, stdout io.Writer) error {
	src, err := store.OpenReadOnly(ctx, cfg.DB, store.Options{})
	if err != nil {
		return fmt.Errorf("store copy: %w", err)
	}
	defer src.Close()
	dst, err := store.Open(ctx, cfg.CopyTo, store.Options{})
	if err != nil {
		return fmt.Errorf("store copy: %w", err)
	}
	defer dst.Close()
	fmt.Fprintf(stdout, "copying %s into %s\n", src.Path(), dst.Path())
	var last time.Time
	err = src.CopyTo(ctx, dst, func(p store.CopyProgress) {
		if p.Copied < p.Total && time.Since(last) < copyReportEvery {
			return
		}
		last = time.Now()
		fmt.Fprintf(stdout, "%s: %d of %d rows\n", p.Table, p.Copied, p.Total)
	})
	if err != nil {
		return fmt.Errorf("store copy: %w (run it again to continue: rows already copied are kept)", err)
	}
	fmt.Fprintln(stdout, "copied; every table has as many rows in the copy")
	return nil
}
