package storetest

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// Entity is an entity to create or update.
type Entity struct {
	Path   string
	Kind   dlq.Kind // default: subscription for a .../Subscriptions/... path, else queue
	Status string   // default Active
	Counts dlq.Counts
	// DeletedAt marks the entity deleted at that time, as the ingester does
	// when a listing leaves it out: its present messages become gone then.
	DeletedAt *time.Time
}

// OpenSQL opens a plain read-write connection pool on an existing database,
// for tests that need to write what no API writes.
func OpenSQL(path string) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Set("mode", "rw")
	db, err := sql.Open("sqlite", fileURI(path)+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	// One connection, kept, with the catalog's index file attached
	// (store.IndexPath): the search and property rows are there.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(0)
	db.SetConnMaxLifetime(0)
	if _, err := db.Exec(`ATTACH DATABASE ? AS idx`, fileURI(store.IndexPath(path))+"?mode=rw"); err != nil {
		db.Close()
		return nil, fmt.Errorf("attach the index file: %w", err)
	}
	return db, nil
}

func fileURI(path string) string {
	return "file:" + strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(path)
}

// Insert adds recs to the database at path (migrated) through the store's
// own ingest (store.Import: the inserts, failure groups and counters
// ApplyPage writes), creating the entities they name that do not exist, and
// returns their ids in order; the test fails on any error. Zero FirstSeenAt
// means now; zero LastSeenAt means FirstSeenAt; an empty BodyPreview is
// derived from a text body as the ingester derives it.
func Insert(tb testing.TB, path string, recs ...dlq.Record) []int64 {
	tb.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	defer s.Close()
	if err := addMissingEntities(ctx, s, recs); err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	ids, err := s.Import(ctx, recs)
	if err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	if err := s.Close(); err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	return ids
}

// AddEntities creates or updates entities in the database at path through
// the store's own listing (store.SyncEntities, and SaveSettings for their
// status); the test fails on any error.
func AddEntities(tb testing.TB, path string, es ...Entity) {
	tb.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	defer s.Close()
	if err := addEntities(ctx, s, time.Now(), es...); err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	if err := s.Close(); err != nil {
		tb.Fatalf("storetest: %v", err)
	}
}

// addMissingEntities creates the entities recs name that the catalog does
// not have yet, in the order they first appear.
func addMissingEntities(ctx context.Context, s *store.Store, recs []dlq.Record) error {
	have, err := s.ListEntities(ctx)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, e := range have {
		known[e.Path] = true
	}
	var missing []Entity
	for _, r := range recs {
		if !known[r.Entity] {
			known[r.Entity] = true
			missing = append(missing, Entity{Path: r.Entity})
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return addEntities(ctx, s, time.Now(), missing...)
}

// addEntities lists es, with every entity the catalog already has that is
// not deleted, as read at now (store.SyncEntities); then leaves each
// entity with a DeletedAt out of a listing at that time, which marks it
// deleted; and records every one's status (store.SaveSettings).
func addEntities(ctx context.Context, s *store.Store, now time.Time, es ...Entity) error {
	have, err := s.ListEntities(ctx)
	if err != nil {
		return err
	}
	var listed []dlq.Entity
	at := map[string]int{}
	put := func(e dlq.Entity) {
		if i, ok := at[e.Path]; ok {
			listed[i] = e
			return
		}
		at[e.Path] = len(listed)
		listed = append(listed, e)
	}
	for _, e := range have {
		if e.DeletedAt == nil {
			put(e.Entity)
		}
	}
	settings := make([]dlq.Settings, 0, len(es))
	for _, e := range es {
		if e.Kind == "" {
			e.Kind = kindOf(e.Path)
		}
		topic := ""
		if t, _, ok := strings.Cut(e.Path, "/Subscriptions/"); ok {
			topic = t
		}
		put(dlq.Entity{Path: e.Path, Kind: e.Kind, Topic: topic, Counts: e.Counts})
		status := e.Status
		if status == "" {
			status = "Active"
		}
		settings = append(settings, dlq.Settings{Path: e.Path, Status: status})
	}
	if _, err := s.SyncEntities(ctx, listed, now); err != nil {
		return err
	}
	deleted := false
	for _, e := range es {
		if e.DeletedAt == nil {
			continue
		}
		i := at[e.Path]
		listed = append(listed[:i], listed[i+1:]...)
		clear(at)
		for j, l := range listed {
			at[l.Path] = j
		}
		if _, err := s.SyncEntities(ctx, listed, *e.DeletedAt); err != nil {
			return err
		}
		deleted = true
	}
	if deleted {
		// The counts were read, and the namespace last read, now.
		if _, err := s.SyncEntities(ctx, listed, now); err != nil {
			return err
		}
	}
	return s.SaveSettings(ctx, settings)
}

func kindOf(path string) dlq.Kind {
	if strings.Contains(path, "/Subscriptions/") {
		return dlq.KindSubscription
	}
	return dlq.KindQueue
}
