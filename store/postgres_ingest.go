package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The ingest's inserts on PostgreSQL (issue 20): the rows of a page's new
// messages go in with COPY on the transaction's own connection, two COPYs
// a page (messages, bodies; the indexer writes the search documents and
// property rows behind, postgres_index.go), instead of multi-row INSERTs of up to 4,000 parameters, which PostgreSQL parsed,
// planned and inserted row by row (speculatively, for the property rows'
// ON CONFLICT) each time: BENCHMARKS.md, issue 20, has the figures.
//
// COPY runs inside the transaction that beginIngest began, after its write
// lock and its fencer: a page written under a stale lease term is refused
// before any COPY, and the COPYs commit or roll back with the rest of the
// page.

// ingestConn is the connection of an ingest transaction: for its COPYs on
// PostgreSQL, for the INSERTs that run below database/sql on SQLite
// (ingest_raw.go).
type ingestConn struct{ c *sql.Conn }

// beginIngest begins a write transaction as beginWrite does, on a
// connection of its own that it returns too. The caller ends the
// transaction and then calls release (deferred before the transaction's
// Rollback, so that it runs after it).
func (s *Store) beginIngest(ctx context.Context) (*sql.Tx, *ingestConn, error) {
	f := fenceOf(ctx)
	if !s.eng.postgres {
		s.beforeWrite(ctx)
		f = nil // a fencer is PostgreSQL's (beginWrite)
	}
	tx, conn, err := s.beginOnConn(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	return tx, &ingestConn{c: conn}, nil
}

// release returns the connection to the pool; the transaction must have
// ended (Close waits for it).
func (ic *ingestConn) release() {
	if ic != nil {
		ic.c.Close()
	}
}

// withConn runs fn with the transaction's pgx connection.
func (ic *ingestConn) withConn(fn func(c *pgx.Conn) error) error {
	return ic.c.Raw(func(dc any) error {
		pc, ok := dc.(*pgConn)
		if !ok {
			return fmt.Errorf("copy rows: the connection is a %T, not PostgreSQL's", dc)
		}
		return fn(pc.Conn.Conn())
	})
}

// pgString is s as the driver passes it (encodePGText: CheckNamedValue is
// not on COPY's way).
func pgString(s *string) any {
	if s == nil {
		return nil
	}
	return encodePGText(*s)
}

// copyMessagesPG writes msgs, whose ids are ids, with their bodies: the
// rows insertMessages's INSERTs write on SQLite, the same values. Their
// search documents and property rows are written behind, by the indexer
// (indexOncePG), as on SQLite.
func copyMessagesPG(ctx context.Context, ic *ingestConn, msgs []newMessage, ids []int64) error {
	rows := make([][]any, len(msgs))
	bodies := make([][]any, len(msgs))
	for i, nm := range msgs {
		m := nm.m
		gid, ttl, props, preview := nm.derived()
		id := ids[i]
		rows[i] = []any{id, nm.eid, int64(nm.sq), int64(nm.st), m.SequenceNumber, encodePGText(m.MessageID), pgString(m.CorrelationID),
			pgString(m.SessionID), pgString(m.PartitionKey), pgString(m.Subject), pgString(m.ContentType), pgString(m.ReplyTo),
			pgString(m.ReplyToSessionID), pgString(m.To), pgString(m.DeadLetterReason), pgString(m.DeadLetterErrorDescription),
			pgString(m.DeadLetterSource), int64(m.DeliveryCount), millis(m.EnqueuedAt), millis(m.ScheduledEnqueueAt),
			millis(m.ExpiresAt), ttl, encodePGText(props), int64(len(m.Body)), encodePGText(preview), gid, nm.firstSeen,
			nm.lastSeen, max(nm.replayCount, replayCountOf(props)), nm.gone}
		b := m.Body
		if b == nil {
			b = []byte{}
		}
		bodies[i] = []any{id, b}
	}
	return ic.withConn(func(c *pgx.Conn) error {
		if _, err := c.CopyFrom(ctx, pgx.Identifier{"messages"}, messageCopyColumns, pgx.CopyFromRows(rows)); err != nil {
			return fmt.Errorf("copy messages: %w", err)
		}
		if _, err := c.CopyFrom(ctx, pgx.Identifier{"bodies"}, []string{"message_id", "body"}, pgx.CopyFromRows(bodies)); err != nil {
			return fmt.Errorf("copy bodies: %w", err)
		}
		return nil
	})
}

// messageCopyColumns are messageColumns as COPY takes them.
var messageCopyColumns = strings.Fields(strings.ReplaceAll(messageColumns, ",", " "))

// appendPropertyRows appends the message_properties rows of a message
// whose id is id, properties props and enqueued time at (Unix ms, -1 for
// none): what the SQLite indexer writes too (index_properties.go), one row per top-level
// property of properties that are a JSON object, with the value as the
// property filter compares it (a string's characters, anything else its
// JSON text), values over maxIndexedValue bytes left out, and a pair the
// object holds twice (a repeated key with the same value) once, as the
// primary key keeps it.
//
// The keys in skip (decided not indexed: property_keys.go) have no rows.
//
// For COPY (forCopy) the strings are encoded as the driver encodes its
// parameters (encodePGText); for a statement's parameters they are not.
func appendPropertyRows(rows [][]any, props []byte, at, id int64, skip map[string]bool, forCopy bool) [][]any {
	for _, kv := range propertyPairs(props) {
		if skip[kv[0]] {
			continue
		}
		if forCopy {
			rows = append(rows, []any{encodePGText(kv[0]), encodePGText(kv[1]), at, id})
		} else {
			rows = append(rows, []any{kv[0], kv[1], at, id})
		}
	}
	return rows
}

// propertyPairs is the (key, value) pairs of the property rows of a
// message whose properties are props, keys not indexed included: each pair
// once, values over maxIndexedValue bytes left out.
func propertyPairs(props []byte) [][2]string {
	if len(props) == 0 {
		return nil // stored as {}: no rows
	}
	var out [][2]string
	for _, kv := range propertyValues(props) {
		if len(kv[1]) > maxIndexedValue || slices.Contains(out, kv) {
			continue
		}
		out = append(out, kv)
	}
	return out
}
