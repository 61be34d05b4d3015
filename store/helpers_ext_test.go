package store_test

import (
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// openWithQueue opens a new store in a temp dir (closed when the test ends)
// whose catalog knows the queue "orders", listed at at.
func openWithQueue(t *testing.T, at time.Time) *store.Store { return openWithQueueOn(t, "sqlite", at) }

// openWithQueueOn is openWithQueue on engine (store.Engines).
func openWithQueueOn(t *testing.T, engine string, at time.Time) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), store.FreshTarget(t, engine), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.SyncEntities(t.Context(), []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, at); err != nil {
		t.Fatal(err)
	}
	return s
}
