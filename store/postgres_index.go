package store

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The indexer on PostgreSQL (issue 20): the ingest transaction COPYs a
// page's messages and bodies only; the search documents (messages_fts, a
// tsvector built in Go) and the property rows of every message above the
// watermark index.through are written behind it, up to indexMax messages a
// batch, on connections of their own (the search documents on one, the
// property rows on another, in parallel: indexOncePG), and the watermark
// moves in the search documents' transaction, which commits after the
// property rows' (ingest_index.go describes the design, which is
// SQLite's). The ingest's backend then spends its time on the messages and
// bodies, and the GIN index's and the property rows' work runs on two
// other backends.
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

// indexPropsLockKey is the lock of a batch's property rows, which it
// writes in a transaction of their own on a second connection while its
// first holds indexLockKey (indexOncePG). Everything else that writes or
// deletes index rows takes both, indexLockKey first (lockIndexPG).
const indexPropsLockKey = indexLockKey + 1

// lockIndexPG takes indexLockKey, then indexPropsLockKey, in tx until it
// ends: no batch runs meanwhile, nor the property rows' half of one whose
// first transaction ended without it (its replica died).
func lockIndexPG(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?), pg_advisory_xact_lock(?)`, indexLockKey, indexPropsLockKey); err != nil {
		return fmt.Errorf("lock the search index: %w", err)
	}
	return nil
}

// indexOncePG indexes up to indexMax messages above the watermark and
// reports whether more are left. It takes no write lock: the ingest goes on
// meanwhile.
//
// A batch is two transactions on two connections of the writer pool, in
// parallel, so that the search documents' backend (the GIN index) and the
// property rows' run on two cores: the first holds indexLockKey, reads the
// watermark, COPYs the search documents and moves the watermark; the
// second holds indexPropsLockKey and COPYs the property rows of the same
// messages. The first commits only after the second has: the watermark
// never covers a message whose property rows are not committed. A crash
// between the two commits leaves property rows above the watermark, of
// committed messages (the same rows a batch writes: reads find them
// right, and retention deletes them with their messages); every writer of
// property rows deletes those above the watermark before it writes its own
// (clearPropertiesAbove).
func (s *Store) indexOncePG(ctx context.Context) (indexLeft, error) {
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		return indexLeft{}, fmt.Errorf("index new messages: %w", err)
	}
	defer conn.Close()
	// The property rows' connection, before the lock: a write waiting for
	// indexLockKey (retention, CreateJob's tail) holds the write lock, the
	// writes queued behind it can hold the rest of the pool, and a batch
	// that took its second connection under the lock waited for them
	// (until the server ended its transaction, idle, after
	// replica.IdleInTransactionTimeout).
	pconn, err := s.writer.Conn(ctx)
	if err != nil {
		return indexLeft{}, fmt.Errorf("index new messages: %w", err)
	}
	defer pconn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return indexLeft{}, fmt.Errorf("index new messages: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, indexLockKey); err != nil {
		return indexLeft{}, fmt.Errorf("lock the search index: %w", err)
	}
	// Read after the lock (READ COMMITTED: this statement's snapshot
	// starts now), so the previous batch's watermark is seen.
	var through, newest int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(`+s.eng.watermarkSQL()+`, 0),
		coalesce((SELECT max(id) FROM messages), 0)`, metaIndexThrough).Scan(&through, &newest); err != nil {
		return indexLeft{}, fmt.Errorf("index new messages: %w", err)
	}
	hi := min(newest, through+s.indexBatchMax())
	if newest > through {
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		props := make(chan error, 1)
		go func() { props <- indexPropertiesPG(pctx, pconn, through, hi) }()
		// The search documents' COPY waits for the property rows before
		// it ends (waitProps): its transaction is never idle meanwhile,
		// which the server would end after
		// replica.IdleInTransactionTimeout, failing the batch.
		var perr error
		waited := false
		waitProps := func() error {
			perr, waited = <-props, true
			return perr
		}
		err = indexSearchRangePG(ctx, tx, &ingestConn{c: conn}, through, hi, waitProps)
		if !waited {
			if err != nil {
				cancel() // the property rows' transaction rolls back
			}
			perr = <-props
		}
		switch {
		case waited && perr != nil:
			err = perr // the COPY stopped for it
		case err == nil:
			err = perr
		}
		if err == nil {
			err = s.testFault(faultPropertiesCommitted)
		}
		if err != nil {
			return indexLeft{}, err
		}
		if err := setIndexThrough(ctx, tx, hi); err != nil {
			return indexLeft{}, err
		}
	}
	// The rows of keys decided not indexed, a minute after the decision:
	// under indexLockKey, which every writer of property rows holds or
	// waits behind (indexPropertiesPG runs only inside this function).
	purged, err := purgeUnindexedRows(ctx, tx, postgresEngine)
	if err != nil {
		return indexLeft{}, err
	}
	if newest <= through && purged == 0 {
		return indexLeft{}, nil
	}
	if err := tx.Commit(); err != nil {
		return indexLeft{}, fmt.Errorf("index new messages: %w", err)
	}
	return indexLeft{messages: hi < newest, rows: purged == purgeBatch}, nil
}

// faultPropertiesCommitted is the point of a batch on PostgreSQL where its
// property rows are committed and its search documents and watermark not.
const faultPropertiesCommitted = "properties_committed"

// indexPropertiesPG is the property rows' transaction of a batch
// (indexOncePG), on conn, a connection of its own: the rows of the messages
// above through up to hi, after those a crash left above the watermark
// through.
func indexPropertiesPG(ctx context.Context, conn *sql.Conn, through, hi int64) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("index properties: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, indexPropsLockKey); err != nil {
		return fmt.Errorf("lock the property index: %w", err)
	}
	if err := indexPropertiesRangePG(ctx, tx, &ingestConn{c: conn}, through, hi); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("index properties: %w", err)
	}
	return nil
}

// indexRangePG writes the search documents and property rows of the
// messages with ids above through up to hi, in tx, which holds both index
// locks (lockIndexPG, or indexLockKey and pg_try_advisory_xact_lock of
// indexPropsLockKey: lockIndexInline): what indexRange writes on SQLite,
// built in Go from the stored rows (tsvector, propertyValues). With COPY
// when tx runs on ic; a transaction begun without its connection
// (CreateJob's, for a tail) uses multi-row INSERTs.
func indexRangePG(ctx context.Context, tx *sql.Tx, ic *ingestConn, through, hi int64) error {
	if err := indexSearchRangePG(ctx, tx, ic, through, hi, nil); err != nil {
		return err
	}
	return indexPropertiesRangePG(ctx, tx, ic, through, hi)
}

// indexSearchRangePG writes the search documents of the messages with ids
// above through up to hi, in tx. With COPY when tx runs on ic: the
// documents are built on a goroutine while the server copies those built
// before them (a pipe), so that the Go side's largest part overlaps the
// server's. With COPY, beforeEnd (when not nil) runs once every document
// is sent and before the COPY ends, which it fails by an error.
func indexSearchRangePG(ctx context.Context, tx *sql.Tx, ic *ingestConn, through, hi int64, beforeEnd func() error) error {
	rows, err := tx.QueryContext(ctx, `SELECT m.id, b.body, coalesce(m.dead_letter_reason, ''),
		coalesce(m.dead_letter_description, ''), m.properties
		FROM messages m JOIN bodies b ON b.message_id = m.id WHERE m.id > ? AND m.id <= ? ORDER BY m.id`, through, hi)
	if err != nil {
		return fmt.Errorf("index new messages: %w", err)
	}
	var stored []storedForIndex
	for rows.Next() {
		var m storedForIndex
		if err := rows.Scan(&m.id, &m.body, &m.reason, &m.desc, &m.props); err != nil {
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
		for _, m := range stored {
			docs = append(docs, m.id, m.doc())
		}
		return insertIndexRowsPG(ctx, tx, docs, nil)
	}

	pr, pw := io.Pipe()
	built := make(chan struct{})
	go func() {
		defer close(built)
		w := bufio.NewWriterSize(pw, 64<<10)
		line := append(make([]byte, 0, 4096), pgCopyBinaryHeader...)
		for _, m := range stored {
			line = m.appendDocRow(line)
			if _, err := w.Write(line); err != nil {
				return // the COPY failed: pr was closed
			}
			line = line[:0]
		}
		if beforeEnd != nil {
			if err := w.Flush(); err != nil {
				return
			}
			if err := beforeEnd(); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		line = binary.BigEndian.AppendUint16(line, 0xffff) // the trailer: -1 fields
		if _, err := w.Write(line); err != nil {
			return
		}
		pw.CloseWithError(w.Flush())
	}()
	err = ic.withConn(func(c *pgx.Conn) error {
		_, err := c.PgConn().CopyFrom(ctx, pr, "COPY messages_fts (rowid, doc) FROM STDIN (FORMAT binary)")
		return err
	})
	// The builder stops if the COPY ended early, or never started; it is
	// done (beforeEnd with it) when this returns.
	pr.CloseWithError(io.ErrClosedPipe)
	<-built
	if err != nil {
		return fmt.Errorf("index for search: %w", err)
	}
	return nil
}

// pgCopyBinaryHeader starts COPY's binary format: its signature, no flags,
// no header extension.
const pgCopyBinaryHeader = "PGCOPY\n\xff\r\n\x00" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00"

// indexPropertiesRangePG writes the property rows of the messages with
// ids above through up to hi, in tx, which holds indexPropsLockKey, after
// deleting those a crash left above the watermark through
// (clearPropertiesAbove). With COPY when tx runs on ic.
func indexPropertiesRangePG(ctx context.Context, tx *sql.Tx, ic *ingestConn, through, hi int64) error {
	if err := clearPropertiesAbove(ctx, tx, through); err != nil {
		return err
	}
	set, err := readPropertyRows(ctx, tx, hi-through, `m.id > ? AND m.id <= ?`, through, hi)
	if err != nil {
		return fmt.Errorf("index properties: %w", err)
	}
	if len(set.rows) == 0 {
		return nil // every message of the range was pruned, or has no properties
	}
	// What the batch's first messages say of their keys first, so that a
	// key decided now has no rows of this batch.
	skip, err := learnPropertyKeysFrom(ctx, tx, postgresEngine, set.pairs(set.rows[:set.sampled]))
	if err != nil {
		return err
	}
	var propRows [][]any
	for _, r := range set.rows {
		key, value := set.strs[r.key], set.strs[r.value]
		switch {
		case skip[key]:
		case ic != nil: // COPY: strings as the driver encodes its parameters
			propRows = append(propRows, []any{encodePGText(key), encodePGText(value), r.at, r.id})
		default:
			propRows = append(propRows, []any{key, value, r.at, r.id})
		}
	}
	if len(propRows) == 0 {
		return nil
	}
	if ic == nil {
		return insertIndexRowsPG(ctx, tx, nil, propRows)
	}
	return ic.withConn(func(c *pgx.Conn) error {
		if _, err := c.CopyFrom(ctx, pgx.Identifier{"message_properties"}, []string{"key", "value", "at", "message_id"},
			pgx.CopyFromRows(propRows)); err != nil {
			return fmt.Errorf("index properties: %w", err)
		}
		return nil
	})
}

// clearPropertiesAbove deletes the property rows of the messages above the
// watermark through: a batch whose property rows committed and whose
// search documents and watermark did not (its replica died between the
// two commits) left them, and the next writes them again.
func clearPropertiesAbove(ctx context.Context, tx *sql.Tx, through int64) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM message_properties WHERE message_id > ?`, through); err != nil {
		return fmt.Errorf("index properties: %w", err)
	}
	return nil
}

// storedForIndex is what the indexer reads of a stored message for its
// search document.
type storedForIndex struct {
	id           int64
	body, props  []byte
	reason, desc string
}

// doc is the message's search document as text (tsvector).
func (m storedForIndex) doc() string {
	return tsvector(m.bodyText(), m.reason, m.desc, string(m.props))
}

// appendDocRow appends the message's messages_fts row in COPY's binary
// format: two fields, its id (int8) and its search document
// (appendTSVectorBinary).
func (m storedForIndex) appendDocRow(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 2)
	dst = binary.BigEndian.AppendUint32(dst, 8)
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.id))
	at := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = appendTSVectorBinary(dst, m.bodyText(), m.reason, m.desc, string(m.props))
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst
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
