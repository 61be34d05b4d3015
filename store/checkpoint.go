package store

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"
)

// The write-ahead log is copied into the database (checkpointed) by a
// connection of its own, from its own goroutine, so that the copy runs on
// another core than the writer's transactions (issue 18: checkpoints were
// 5-7 % of the ingest's CPU, all of it on the writer). A PASSIVE checkpoint
// never waits for the writer nor for readers: it copies what no reader still
// needs. The writer's own automatic checkpoint stays as the backstop, at
// walCheckpointPages: it copies what the background one has not (frames
// committed while it ran) and lets the next transaction start the log over,
// so the log file stays bounded.
//
// The index file (index_file.go) has a checkpointer of its own beside the
// indexer, for the same reason: each index transaction writes thousands of
// pages, and its commit copied them back and waited for two fsyncs (35 ms
// each on the benchmark machine) before the indexer could go on.

// checkpointEvery is how often the background checkpoint runs while the
// writer commits (never while it does not).
const checkpointEvery = 250 * time.Millisecond

// checkpointer runs PASSIVE checkpoints on its own connection.
type checkpointer struct {
	db      *sql.DB
	commits atomic.Int64 // the writer's ingest commits, counted by committed
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// newCheckpointer starts checkpointing the database file at path: the
// catalog, or the index file (index_file.go), whose WAL the indexer's
// transactions write.
func newCheckpointer(path string, busy time.Duration) (*checkpointer, error) {
	db, err := sql.Open("sqlite", dsn(path, busy, false))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(0)
	c := &checkpointer{db: db, stop: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	return c, nil
}

// committed counts a commit of the file's writer.
func (c *checkpointer) committed() {
	if c != nil {
		c.commits.Add(1)
	}
}

func (c *checkpointer) loop() {
	defer close(c.done)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	var seen int64
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		if n := c.commits.Load(); n != seen {
			seen = n
			// A failure (busy, say) is left to the writer's own
			// checkpoint; the next tick tries again.
			_, _ = c.db.ExecContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`)
		}
	}
}

func (c *checkpointer) close() error {
	if c == nil {
		return nil
	}
	c.once.Do(func() { close(c.stop) })
	<-c.done
	return c.db.Close()
}
