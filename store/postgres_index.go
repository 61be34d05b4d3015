package store

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The indexer on PostgreSQL (issue 20): the ingest transaction COPYs a
// page's messages and bodies only; the search documents (messages_fts, a
// tsvector built in Go) and the property rows of every message above the
// watermark index.through are written behind it, up to indexMax messages a
// transaction, on a connection of their own, with two COPYs, and the
// watermark moves in the same transaction as the rows (ingest_index.go
// describes the design, which is SQLite's). The ingest's backend then
// spends its time on the messages and bodies, and the GIN index's and the
// property rows' work runs on another backend, on another core.
//
// Several replicas share one database, and each runs an indexer: a batch
// holds the advisory lock indexLockKey until it commits and reads the
// watermark after taking it, so batches run one at a time whichever replica
// runs them, and none indexes a message twice (messages_fts's primary key
// would refuse it anyway). A batch writes only rows derived from committed
// messages, the same rows whichever replica writes them, so it needs no
// lease: a replica that lost its ingest lease writes no message, and its
// indexer indexes only what the lease holder committed. Ids are assigned
// under the write lock and its transactions commit one at a time, so the
// committed messages are every id up to the newest the batch sees (but
// pruned ones): the watermark never passes a message still to commit.
//
// Retention (PruneGone) takes the same lock after the write lock, so a
// message is never deleted between the batch's read of it and its COPY
// (which would leave index rows without their message). Nothing takes the
// two locks in the other order: the indexer never takes the write lock.

// indexLockKey is the advisory lock an index batch holds on PostgreSQL:
// "dlqdash indexer" in ASCII, truncated.
const indexLockKey int64 = 0x646c7164696e6478

// lockIndexPG takes indexLockKey in tx until it ends.
func lockIndexPG(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, indexLockKey); err != nil {
		return fmt.Errorf("lock the search index: %w", err)
	}
	return nil
}

// indexOncePG indexes up to indexMax messages above the watermark in one
// transaction on a connection of the writer pool, and reports whether more
// are left. It takes no write lock: the ingest goes on meanwhile.
func (s *Store) indexOncePG(ctx context.Context) (bool, error) {
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		return false, fmt.Errorf("index new messages: %w", err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("index new messages: %w", err)
	}
	defer tx.Rollback()
	if err := lockIndexPG(ctx, tx); err != nil {
		return false, err
	}
	// Read after the lock (READ COMMITTED: this statement's snapshot
	// starts now), so the previous batch's watermark is seen.
	var through, newest int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(`+s.eng.watermarkSQL()+`, 0),
		coalesce((SELECT max(id) FROM messages), 0)`, metaIndexThrough).Scan(&through, &newest); err != nil {
		return false, fmt.Errorf("index new messages: %w", err)
	}
	if newest <= through {
		return false, nil
	}
	hi := min(newest, through+indexMax)
	if err := indexRangePG(ctx, tx, &ingestConn{c: conn}, through, hi); err != nil {
		return false, err
	}
	if err := setIndexThrough(ctx, tx, hi); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("index new messages: %w", err)
	}
	return hi < newest, nil
}

// indexRangePG writes the search documents and property rows of the
// messages with ids above through up to hi, in tx, which holds
// indexLockKey: what indexRange writes on SQLite, built in Go from the
// stored rows (tsvector, propertyValues). With COPY when tx runs on ic: the
// documents are built on a goroutine while the server copies those built
// before them (a pipe), so that the Go side's largest part overlaps the
// server's. A transaction begun without its connection (CreateJob's, for a
// tail) uses multi-row INSERTs.
func indexRangePG(ctx context.Context, tx *sql.Tx, ic *ingestConn, through, hi int64) error {
	rows, err := tx.QueryContext(ctx, `SELECT m.id, b.body, coalesce(m.dead_letter_reason, ''),
		coalesce(m.dead_letter_description, ''), m.properties, coalesce(m.enqueued_at, -1)
		FROM messages m JOIN bodies b ON b.message_id = m.id WHERE m.id > ? AND m.id <= ? ORDER BY m.id`, through, hi)
	if err != nil {
		return fmt.Errorf("index new messages: %w", err)
	}
	var stored []storedForIndex
	for rows.Next() {
		var m storedForIndex
		if err := rows.Scan(&m.id, &m.body, &m.reason, &m.desc, &m.props, &m.at); err != nil {
			rows.Close()
			return fmt.Errorf("index new messages: %w", err)
		}
		stored = append(stored, m)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("index new messages: %w", err)
	}
	rows.Close()
	if len(stored) == 0 {
		return nil // every message of the range was pruned
	}
	if ic == nil {
		var docs []any
		var propRows [][]any
		for _, m := range stored {
			docs = append(docs, m.id, m.doc())
			propRows = appendPropertyRows(propRows, m.props, m.at, m.id, false)
		}
		return insertIndexRowsPG(ctx, tx, docs, propRows)
	}

	pr, pw := io.Pipe()
	var propRows [][]any
	built := make(chan struct{})
	go func() {
		defer close(built)
		w := bufio.NewWriterSize(pw, 64<<10)
		var line bytes.Buffer
		for _, m := range stored {
			line.Reset()
			line.WriteString(strconv.FormatInt(m.id, 10))
			line.WriteByte('\t')
			m.appendDocCopy(&line)
			line.WriteByte('\n')
			if _, err := w.Write(line.Bytes()); err != nil {
				return // the COPY failed: pr was closed
			}
			propRows = appendPropertyRows(propRows, m.props, m.at, m.id, true)
		}
		pw.CloseWithError(w.Flush())
	}()
	return ic.withConn(func(c *pgx.Conn) error {
		_, err := c.PgConn().CopyFrom(ctx, pr, "COPY messages_fts (rowid, doc) FROM STDIN")
		pr.CloseWithError(io.ErrClosedPipe) // the builder stops if the COPY ended early
		<-built
		if err != nil {
			return fmt.Errorf("index for search: %w", err)
		}
		if len(propRows) > 0 {
			if _, err := c.CopyFrom(ctx, pgx.Identifier{"message_properties"}, []string{"key", "value", "at", "message_id"},
				pgx.CopyFromRows(propRows)); err != nil {
				return fmt.Errorf("index properties: %w", err)
			}
		}
		return nil
	})
}

// storedForIndex is what the indexer reads of a stored message.
type storedForIndex struct {
	id, at       int64
	body, props  []byte
	reason, desc string
}

// doc is the message's search document as text (tsvector).
func (m storedForIndex) doc() string {
	return tsvector(m.bodyText(), m.reason, m.desc, string(m.props))
}

// appendDocCopy appends doc as a field of COPY's text format.
func (m storedForIndex) appendDocCopy(b *bytes.Buffer) {
	appendTSVectorCopy(b, m.bodyText(), m.reason, m.desc, string(m.props))
}

// bodyText is the body's searchable text, "" for a binary body.
func (m storedForIndex) bodyText() string {
	text, isText := bodyText(m.body)
	if !isText {
		return ""
	}
	return text
}

// insertIndexRowsPG writes docs (id, tsvector text pairs) and propRows
// with INSERTs of up to copyBatch rows in tx.
func insertIndexRowsPG(ctx context.Context, tx *sql.Tx, docs []any, propRows [][]any) error {
	for len(docs) > 0 {
		n := min(len(docs)/2, copyBatch)
		q := "INSERT INTO messages_fts (rowid, doc) VALUES " +
			strings.TrimSuffix(strings.Repeat("(?, CAST(? AS tsvector)), ", n), ", ")
		if _, err := tx.ExecContext(ctx, q, docs[:n*2]...); err != nil {
			return fmt.Errorf("index for search: %w", err)
		}
		docs = docs[n*2:]
	}
	for len(propRows) > 0 {
		n := min(len(propRows), copyBatch)
		args := make([]any, 0, n*4)
		for _, r := range propRows[:n] {
			args = append(args, r...)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO message_properties (key, value, at, message_id) VALUES "+
			placeholders(n, 4), args...); err != nil {
			return fmt.Errorf("index properties: %w", err)
		}
		propRows = propRows[n:]
	}
	return nil
}

// indexTailPG indexes every message above the watermark in tx, a write
// transaction (CreateJob's), after taking indexLockKey: SQLite's indexTail.
func indexTailPG(ctx context.Context, eng engine, tx *sql.Tx) error {
	if err := lockIndexPG(ctx, tx); err != nil {
		return err
	}
	var through, newest int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(`+eng.watermarkSQL()+`, 0),
		coalesce((SELECT max(id) FROM messages), 0)`, metaIndexThrough).Scan(&through, &newest); err != nil {
		return fmt.Errorf("index new messages: %w", err)
	}
	if newest <= through {
		return nil
	}
	if err := indexRangePG(ctx, tx, nil, through, newest); err != nil {
		return err
	}
	return setIndexThrough(ctx, tx, newest)
}
