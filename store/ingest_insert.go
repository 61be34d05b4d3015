package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/dlqdash/dlqdash/dlq"
)

// messageColumns are the columns insertMessages writes, in order.
const messageColumns = `id, entity_id, subqueue, state, sequence_number, message_id, correlation_id,
	session_id, partition_key, subject, content_type, reply_to, reply_to_session_id, to_address, dead_letter_reason,
	dead_letter_description, dead_letter_source, delivery_count, enqueued_at, scheduled_enqueue_at, expires_at,
	time_to_live_ms, properties, body_size, body_preview, group_id, first_seen_at, last_seen_at, replay_count, gone_at`

const messageColumnCount = 30

// insertChunk is how many rows one multi-row INSERT carries: a statement per
// row costs more in the driver than in SQLite, and SQLite allows 32,766
// parameters per statement.
const insertChunk = 100

// chunkStatements are the prepared full-chunk INSERTs, and the engine they
// are for.
type chunkStatements struct {
	messages, bodies *sql.Stmt
	eng              engine
}

// prepareChunks prepares the full-chunk INSERTs on the writer. Open calls
// it: preparing later, inside a transaction, would wait for the writer's one
// connection, which that transaction holds.
func (s *Store) prepareChunks(ctx context.Context) error {
	var err1, err2 error
	s.chunk.eng = s.eng
	if s.eng.postgres {
		return nil // COPY instead (postgres_ingest.go)
	}
	s.chunk.messages, err1 = s.writer.PrepareContext(ctx,
		"INSERT INTO messages ("+messageColumns+") VALUES "+placeholders(insertChunk, messageColumnCount))
	s.chunk.bodies, err2 = s.writer.PrepareContext(ctx, "INSERT INTO bodies (message_id, body) VALUES "+placeholders(insertChunk, 2))
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("prepare catalog inserts: %w", err)
	}
	return nil
}

// newMessage is a message to insert, with what the catalog records about it.
type newMessage struct {
	m                   *dlq.Message
	eid                 int64
	sq, st              int         // subqueue and state codes (checked)
	group               *groupDelta // nil for none
	firstSeen, lastSeen int64
	gone                any    // nil, or when it left the broker (Unix ms)
	replayCount         int64  // at least what its properties say (replayCountOf)
	preview             string // "" derives it from a text body, unless previewDone
	previewDone         bool
}

// derived is what a message's row holds beyond its fields, the same on
// both engines: its failure group's id (nil for none), its time to live
// in ms (nil for none), its application properties as JSON ("{}" for
// none) and its preview.
func (nm *newMessage) derived() (gid, ttl any, props, preview string) {
	m := nm.m
	if nm.group != nil {
		gid = nm.group.id
	}
	if m.TimeToLive != nil {
		ttl = m.TimeToLive.Milliseconds()
	}
	props = string(m.ApplicationProperties)
	if props == "" {
		props = "{}"
	}
	preview = nm.preview
	if preview == "" && !nm.previewDone {
		if text, isText := bodyText(m.Body); isText {
			preview = previewOf(text)
		}
	}
	return gid, ttl, props, preview
}

// insertMessages inserts msgs with their bodies and returns their ids, in
// order. The caller counts them (counters, groups) and tells the indexer
// once it has committed (s.idx.added): on SQLite the search and property
// rows are written behind (ingest_index.go), on PostgreSQL too
// (postgres_index.go), where the messages and bodies go in with COPY on
// the transaction's connection ic (beginIngest, postgres_ingest.go).
func insertMessages(ctx context.Context, tx *sql.Tx, ic *ingestConn, full chunkStatements, msgs []newMessage) ([]int64, error) {
	// Ids are assigned here rather than by SQLite so that rows can go in
	// many to a statement: the store has one writer connection and this runs
	// inside its transaction, so nobody else takes the next ids meanwhile.
	// They are above the index's watermark even when the newest rows were
	// pruned: the indexer indexes every id above it, and none below.
	var next int64
	if err := tx.QueryRowContext(ctx, `SELECT `+full.eng.greatest(`coalesce((SELECT max(id) FROM messages), 0)`,
		`coalesce(`+full.eng.watermarkSQL()+`, 0)`)+` + 1`, metaIndexThrough).Scan(&next); err != nil {
		return nil, err
	}
	if full.eng.postgres {
		if ic == nil {
			return nil, errors.New("insert messages: a PostgreSQL ingest transaction needs its connection (beginIngest)")
		}
		ids := make([]int64, len(msgs))
		for i := range ids {
			ids[i] = next + int64(i)
		}
		if len(ids) == 0 {
			return ids, nil
		}
		// The search documents and property rows are the indexer's
		// (postgres_index.go), behind the watermark, as on SQLite.
		if err := copyMessagesPG(ctx, ic, msgs, ids); err != nil {
			return nil, err
		}
		return ids, nil
	}
	ids := make([]int64, 0, len(msgs))
	rowArgs := make([]any, 0, insertChunk*messageColumnCount)
	bodyArgs := make([]any, 0, insertChunk*2)

	flush := func(n int) error {
		if n == 0 {
			return nil
		}
		if n == insertChunk {
			// Full chunks use statements prepared once on the writer's
			// connection: preparing a 3,000-parameter INSERT costs as much
			// as running it.
			if _, err := tx.StmtContext(ctx, full.messages).ExecContext(ctx, rowArgs...); err != nil {
				return err
			}
			if _, err := tx.StmtContext(ctx, full.bodies).ExecContext(ctx, bodyArgs...); err != nil {
				return err
			}
		} else {
			q := "INSERT INTO messages (" + messageColumns + ") VALUES " + placeholders(n, messageColumnCount)
			if _, err := tx.ExecContext(ctx, q, rowArgs...); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO bodies (message_id, body) VALUES "+placeholders(n, 2), bodyArgs...); err != nil {
				return err
			}
		}
		rowArgs, bodyArgs = rowArgs[:0], bodyArgs[:0]
		return nil
	}
	pending := 0
	for _, nm := range msgs {
		m := nm.m
		gid, ttl, props, preview := nm.derived()
		id := next
		next++
		rowArgs = append(rowArgs, id, nm.eid, nm.sq, nm.st, m.SequenceNumber, m.MessageID, m.CorrelationID,
			m.SessionID, m.PartitionKey, m.Subject, m.ContentType, m.ReplyTo, m.ReplyToSessionID, m.To,
			m.DeadLetterReason, m.DeadLetterErrorDescription, m.DeadLetterSource, m.DeliveryCount,
			millis(m.EnqueuedAt), millis(m.ScheduledEnqueueAt), millis(m.ExpiresAt), ttl, props,
			len(m.Body), preview, gid, nm.firstSeen, nm.lastSeen, max(nm.replayCount, replayCountOf(props)), nm.gone)
		b := m.Body
		if b == nil {
			b = []byte{}
		}
		bodyArgs = append(bodyArgs, id, b)
		ids = append(ids, id)
		if pending++; pending == insertChunk {
			if err := flush(pending); err != nil {
				return nil, err
			}
			pending = 0
		}
	}
	if err := flush(pending); err != nil {
		return nil, err
	}
	return ids, nil
}

// placeholders is "(?, ?), (?, ?)" for rows rows of cols columns.
func placeholders(rows, cols int) string {
	one := "(" + strings.Repeat("?, ", cols-1) + "?)"
	return strings.Repeat(one+", ", rows-1) + one
}
