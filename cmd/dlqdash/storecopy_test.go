package main

import (
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/pgtest"
)

// TestStoreCopy runs `dlqdash store copy` from a SQLite catalog into a
// PostgreSQL database: it reports each table and the verification, and
// the copy lists the same messages.
func TestStoreCopy(t *testing.T) {
	ctx := t.Context()
	from := t.TempDir() + "/catalog.db"
	src, err := store.Open(ctx, from, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	if _, err := src.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}}, at); err != nil {
		t.Fatal(err)
	}
	reason := "SqlTimeout"
	var msgs []dlq.Message
	for i := range 1200 {
		enq := at.Add(time.Duration(i) * time.Second)
		msgs = append(msgs, dlq.Message{SequenceNumber: int64(i + 1), State: dlq.StateActive, MessageID: "m", EnqueuedAt: &enq,
			DeadLetterReason: &reason, Body: []byte("order failed")})
	}
	if _, err := src.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: 0, Through: 1 << 40,
		Messages: msgs, SeenAt: at}); err != nil {
		t.Fatal(err)
	}
	src.Close()

	to := pgtest.Start(t).Database(t)
	var out, errOut syncBuffer
	if code := run(ctx, []string{"store", "copy", "--from", from}, env(envDatabaseURL, to), &out, &errOut); code != 0 {
		t.Fatalf("store copy exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"messages: 1200 of 1200 rows", "messages_fts: 1200 of 1200 rows", "copied; every table"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	dst, err := store.Open(ctx, to, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if n, err := dst.CountMessages(ctx, dlq.Filter{Query: "order", Reason: reason}, 0); n != 1200 || err != nil {
		t.Errorf("the copy finds %d, %v", n, err)
	}
	if code := run(ctx, []string{"store", "copy", "--from", from, "--to", "x.db"}, env(), &out, &errOut); code != exitUsage {
		t.Errorf("--to a file: exit %d", code)
	}
}
