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

// insertChunk is how many rows one multi-row INSERT carries at most: a
// statement per row costs more in the driver than in SQLite, and SQLite
// allows 32,766 parameters per statement. A page's rows go in as chunks of
// a power of two rows (64, then 32, 16, ... 1 for the rest), each a
// statement prepared once on the writer: preparing an INSERT of many rows
// costs as much as running it, and a page that is not a multiple of the
// chunk would otherwise prepare one for its tail every time.
const insertChunk = 64

// chunkStatements are the ingest's statements prepared once on the
// writer's connection (SQLite; nil on PostgreSQL, which copies the rows:
// postgres_ingest.go), and the engine they are for.
type chunkStatements struct {
	// raw is insertMessages' INSERTs, prepared on the writer's driver
	// connection the first time (ingest_raw.go).
	raw *rawInserts
	// groups and groupEntities are upsertGroups' upserts, counts is
	// counts.write's.
	groups, groupEntities, counts *sql.Stmt
	eng                           engine
}

// prepareChunks prepares the ingest's statements on the writer. Open calls
// it: preparing later, inside a transaction, would wait for the writer's one
// connection, which that transaction holds.
func (s *Store) prepareChunks(ctx context.Context) error {
	s.chunk.eng = s.eng
	if s.eng.postgres {
		return nil // COPY instead (postgres_ingest.go)
	}
	var errs []error
	prepare := func(q string) *sql.Stmt {
		st, err := s.writer.PrepareContext(ctx, q)
		errs = append(errs, err)
		return st
	}
	s.chunk.raw = &rawInserts{}
	s.chunk.groups = prepare(upsertGroupSQL)
	s.chunk.groupEntities = prepare(upsertGroupEntitySQL)
	s.chunk.counts = prepare(upsertCountSQL)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("prepare catalog inserts: %w", err)
	}
	return nil
}

// stmt is st in tx when it was prepared (SQLite), else nil.
func (c chunkStatements) stmt(ctx context.Context, tx *sql.Tx, st *sql.Stmt) *sql.Stmt {
	if st == nil {
		return nil
	}
	return tx.StmtContext(ctx, st)
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
		preview = bodyPreview(m.Body)
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
	indexed, args := full.eng.indexedThroughSQL()
	if err := tx.QueryRowContext(ctx, `SELECT `+full.eng.greatest(`coalesce((SELECT max(id) FROM messages), 0)`,
		`coalesce(`+indexed+`, 0)`)+` + 1`, args...).Scan(&next); err != nil {
		return nil, err
	}
	if ic == nil {
		return nil, errors.New("insert messages: the ingest transaction needs its connection (beginIngest)")
	}
	ids := make([]int64, len(msgs))
	for i := range ids {
		ids[i] = next + int64(i)
	}
	if full.eng.postgres {
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
	if err := ic.c.Raw(func(dc any) error { return full.raw.insertRaw(ctx, dc, msgs, next) }); err != nil {
		return nil, err
	}
	return ids, nil
}

// placeholders is "(?, ?), (?, ?)" for rows rows of cols columns.
func placeholders(rows, cols int) string {
	one := "(" + strings.Repeat("?, ", cols-1) + "?)"
	return strings.Repeat(one+", ", rows-1) + one
}
