package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// This file is the catalog's read side: what the web API and export ask.
// Every query runs on the read pool (query_only), so none of them can block
// the ingester's writes, nor be blocked by them (WAL).

// Page sizes of ListMessages.
const (
	DefaultListLimit = 50
	MaxListLimit     = 500
)

// InvalidArgumentError reports an input the catalog cannot use, such as a
// cursor it did not issue. Param names the input as the API and the command
// line call it (cursor, q, property, subqueue, state).
type InvalidArgumentError struct {
	Param string
	Msg   string
}

func (e *InvalidArgumentError) Error() string { return "invalid " + e.Param + ": " + e.Msg }

// InvalidParameter names the bad parameter. Package web recognises errors by
// this method, since it must not import this package.
func (e *InvalidArgumentError) InvalidParameter() string { return e.Param }

// sortKey is the list order's key, spelled exactly as in the indexes of
// 0003_read_indexes.sql: newest first, messages without an enqueued time
// last, ties by id (both descending).
const sortKey = "coalesce(m.enqueued_at, -1)"

// pageKey is the sort key of one row: a cursor points just past it.
type pageKey struct {
	at int64 // coalesce(enqueued_at, -1)
	id int64
}

const cursorPrefix = "m1."

// encodeCursor makes the opaque cursor that continues after k.
func encodeCursor(k pageKey) string { return encodeKey(cursorPrefix, k) }

func decodeCursor(c string) (pageKey, error) {
	return decodeKey(cursorPrefix, c, "pass next_cursor from the previous page as it is")
}

// encodeKey and decodeKey are the opaque cursors of keyset pages: a prefix
// naming the kind of list, then the last row's sort key and id.
func encodeKey(prefix string, k pageKey) string {
	raw := strconv.FormatInt(k.at, 10) + "." + strconv.FormatInt(k.id, 10)
	return base64.RawURLEncoding.EncodeToString([]byte(prefix + raw))
}

func decodeKey(prefix, c, hint string) (pageKey, error) {
	bad := &InvalidArgumentError{Param: "cursor", Msg: "not a cursor this catalog issued: " + hint}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return pageKey{}, bad
	}
	rest, ok := strings.CutPrefix(string(b), prefix)
	if !ok {
		return pageKey{}, bad
	}
	at, id, ok := strings.Cut(rest, ".")
	if !ok {
		return pageKey{}, bad
	}
	var k pageKey
	if k.at, err = strconv.ParseInt(at, 10, 64); err != nil || k.at < -1 {
		return pageKey{}, bad
	}
	if k.id, err = strconv.ParseInt(id, 10, 64); err != nil || k.id <= 0 {
		return pageKey{}, bad
	}
	return k, nil
}

func keyOf(r *dlq.Record) pageKey {
	k := pageKey{at: -1, id: r.ID}
	if r.EnqueuedAt != nil {
		k.at = r.EnqueuedAt.UTC().UnixMilli()
	}
	return k
}

// recordColumns are the columns scanRecord reads, from messages m joined
// with recordJoins.
const recordColumns = `m.id, coalesce(e.path, ''), m.subqueue, m.state, m.sequence_number, m.message_id,
	m.correlation_id, m.session_id, m.partition_key, m.subject, m.content_type, m.reply_to,
	m.reply_to_session_id, m.to_address, m.dead_letter_reason, m.dead_letter_description,
	m.dead_letter_source, m.delivery_count, m.enqueued_at, m.scheduled_enqueue_at, m.expires_at,
	m.time_to_live_ms, m.properties, m.body_size, m.body_preview, coalesce(g.key, ''), m.first_seen_at,
	m.last_seen_at, m.gone_at, m.replay_count, coalesce(e.namespace, '')`

// recordJoins are LEFT JOINs so that messages stays the outer loop of every
// plan, whichever index drives it.
const recordJoins = `LEFT JOIN entities e ON e.id = m.entity_id LEFT JOIN groups g ON g.id = m.group_id`

// scanRecord reads one row of recordColumns, followed by the body if
// withBody.
func scanRecord(rows interface{ Scan(...any) error }, withBody bool) (dlq.Record, error) {
	var (
		r                        dlq.Record
		sq, st                   int
		msgID                    *string
		delivery                 int64
		enqueued, scheduled, exp *int64
		ttl, gone                *int64
		props                    string
		firstSeen, lastSeen      int64
		body                     []byte
	)
	dest := []any{&r.ID, &r.Entity, &sq, &st, &r.SequenceNumber, &msgID,
		&r.CorrelationID, &r.SessionID, &r.PartitionKey, &r.Subject, &r.ContentType, &r.ReplyTo,
		&r.ReplyToSessionID, &r.To, &r.DeadLetterReason, &r.DeadLetterErrorDescription,
		&r.DeadLetterSource, &delivery, &enqueued, &scheduled, &exp,
		&ttl, &props, &r.BodySize, &r.BodyPreview, &r.GroupID, &firstSeen,
		&lastSeen, &gone, &r.ReplayCount, &r.Namespace}
	if withBody {
		dest = append(dest, &body)
	}
	if err := rows.Scan(dest...); err != nil {
		return dlq.Record{}, err
	}
	r.SubQueue = subQueueOf(sq)
	r.State = stateOf(st)
	if msgID != nil {
		r.MessageID = *msgID
	}
	r.DeliveryCount = uint32(delivery)
	r.EnqueuedAt, r.ScheduledEnqueueAt, r.ExpiresAt = timeOf(enqueued), timeOf(scheduled), timeOf(exp)
	if ttl != nil {
		d := time.Duration(*ttl) * time.Millisecond
		r.TimeToLive = &d
	}
	r.ApplicationProperties = json.RawMessage(props)
	r.FirstSeenAt = time.UnixMilli(firstSeen).UTC()
	r.LastSeenAt = time.UnixMilli(lastSeen).UTC()
	r.GoneAt = timeOf(gone)
	if withBody {
		if body == nil {
			body = []byte{}
		}
		r.Body = body
	}
	return r, nil
}

// ListMessages returns one page of the messages matching f, newest first
// (by enqueued time; messages without one last; ties by id), without their
// bodies (BodySize and BodyPreview are set). cursor is "" for the first page
// or the next value of the page before; next is "" after the last page.
// limit is clamped to [1, MaxListLimit] (0 means DefaultListLimit).
//
// Pages are keyset-paginated: the cursor holds the last row's sort key, so a
// page deep in a million messages costs what the first one does, and rows
// added or removed between pages neither repeat nor shift the next page.
// A cursor that does not decode is an *InvalidArgumentError; an entity or
// group that does not exist simply matches nothing.
func (s *Store) ListMessages(ctx context.Context, f dlq.Filter, limit int, cursor string) ([]dlq.Record, string, error) {
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	var after *pageKey
	if cursor != "" {
		k, err := decodeCursor(cursor)
		if err != nil {
			return nil, "", err
		}
		after = &k
	}
	var recs []dlq.Record
	found := false
	if after == nil {
		var err error
		if recs, found, err = s.listNewest(ctx, f, limit); err != nil {
			return nil, "", fmt.Errorf("list messages: %w", err)
		}
	}
	if !found {
		p, err := s.planList(ctx, f, limit)
		if err != nil {
			return nil, "", fmt.Errorf("list messages: %w", err)
		}
		if p.empty {
			return nil, "", nil
		}
		if recs, err = queryPage(ctx, s.reader, p, after, limit); err != nil {
			return nil, "", fmt.Errorf("list messages: %w", err)
		}
	}
	var next string
	if len(recs) > limit {
		recs = recs[:limit]
		next = encodeCursor(keyOf(&recs[limit-1]))
	}
	return recs, next, nil
}

// queryPage runs plan p for the page after the cursor: up to limit+1
// records, the one more saying that there is a next page.
func queryPage(ctx context.Context, db queryer, p listPlan, after *pageKey, limit int) ([]dlq.Record, error) {
	where, args := p.bounded(after)
	key, id := p.keys()
	q := "SELECT " + recordColumns + " FROM " + p.from() + " " + recordJoins + whereClause(where) +
		" ORDER BY " + key + " DESC, " + id + " DESC LIMIT ?"
	args = append(args, limit+1)
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	recs := make([]dlq.Record, 0, min(limit+1, 64))
	for rows.Next() {
		r, err := scanRecord(rows, false)
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	return recs, rows.Err()
}

// whereClause is " WHERE t1 AND t2 ...", or "" for no terms.
func whereClause(terms []string) string {
	if len(terms) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(terms, " AND ")
}

// GetMessage returns one cataloged message with its body, or an error
// wrapping ErrNotFound.
func (s *Store) GetMessage(ctx context.Context, id int64) (dlq.Record, error) {
	row := s.reader.QueryRowContext(ctx, "SELECT "+recordColumns+", b.body FROM messages m "+
		recordJoins+" LEFT JOIN bodies b ON b.message_id = m.id WHERE m.id = ?", id)
	r, err := scanRecord(row, true)
	if errors.Is(err, sql.ErrNoRows) {
		return dlq.Record{}, fmt.Errorf("message %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return dlq.Record{}, fmt.Errorf("get message %d: %w", id, err)
	}
	return r, nil
}

// MessageBody returns a message's exact body bytes and its content type (nil
// when the sender set none), or an error wrapping ErrNotFound.
func (s *Store) MessageBody(ctx context.Context, id int64) ([]byte, *string, error) {
	var body []byte
	var ct *string
	err := s.reader.QueryRowContext(ctx, `SELECT m.content_type, b.body FROM messages m
		LEFT JOIN bodies b ON b.message_id = m.id WHERE m.id = ?`, id).Scan(&ct, &body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, fmt.Errorf("message %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("message %d body: %w", id, err)
	}
	if body == nil {
		body = []byte{}
	}
	return body, ct, nil
}

// ListEntities returns every entity the catalog knows, by path, including
// deleted ones (DeletedAt set, counts zero): callers that show the namespace
// as it is now leave those out; an incident review may want them. Counts are
// the broker's as last read; Deferred comes from the catalog.
func (s *Store) ListEntities(ctx context.Context) ([]dlq.EntitySummary, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT e.namespace, e.path, e.kind, e.topic, e.status, e.active_count,
			e.dead_letter_count, e.transfer_dead_letter_count, e.scheduled_count, e.counts_at, e.deleted_at,
			coalesce((SELECT cc.present FROM catalog_counts cc
				WHERE cc.entity_id = e.id AND cc.subqueue = 0 AND cc.state = 1), 0)
		FROM entities e ORDER BY e.path, e.namespace`)
	if err != nil {
		return nil, fmt.Errorf("list entities: %w", err)
	}
	defer rows.Close()
	var out []dlq.EntitySummary
	for rows.Next() {
		var e dlq.EntitySummary
		var kind string
		var countsAt, deletedAt *int64
		if err := rows.Scan(&e.Namespace, &e.Path, &kind, &e.Topic, &e.Status, &e.Counts.Active, &e.Counts.DeadLetter,
			&e.Counts.TransferDeadLetter, &e.Counts.Scheduled, &countsAt, &deletedAt, &e.Deferred); err != nil {
			return nil, fmt.Errorf("list entities: %w", err)
		}
		e.Kind = dlq.Kind(kind)
		e.CountsAt, e.DeletedAt = timeOf(countsAt), timeOf(deletedAt)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list entities: %w", err)
	}
	return out, nil
}

// ListGroups returns every failure group from the counter tables (never by
// scanning messages), the ones with the most present messages first, then
// the most recently seen. Groups whose messages are all gone are included
// with Present zero.
func (s *Store) ListGroups(ctx context.Context) ([]dlq.GroupSummary, error) {
	// One transaction, so the groups and their entities are one snapshot.
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	defer tx.Rollback()

	// The same failure in two namespaces is one group, counted per
	// namespace: the sums are added up here from the rows that list the
	// paths (a second query grouping them cost the overview a statement and
	// a sort, a fifth of the page).
	rows, err := tx.QueryContext(ctx, `SELECT ge.group_id, e.namespace, e.path, ge.present, ge.total FROM group_entities ge
		JOIN entities e ON e.id = ge.entity_id ORDER BY ge.group_id, ge.present DESC, ge.total DESC, e.path`)
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	paths := map[int64][]string{}
	perNamespace := map[int64][]dlq.NamespaceCount{}
	seen := map[int64]map[string]bool{} // a path in two namespaces is listed once
	for rows.Next() {
		var gid, present, total int64
		var ns, path string
		if err := rows.Scan(&gid, &ns, &path, &present, &total); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list groups: %w", err)
		}
		counts := perNamespace[gid]
		i := slices.IndexFunc(counts, func(c dlq.NamespaceCount) bool { return c.Name == ns })
		if i < 0 {
			i = len(counts)
			counts = append(counts, dlq.NamespaceCount{Name: ns})
			perNamespace[gid] = counts
		}
		counts[i].Present += present
		counts[i].Total += total
		counts[i].Entities = append(counts[i].Entities, path)
		if seen[gid] == nil {
			seen[gid] = map[string]bool{}
		}
		if !seen[gid][path] {
			seen[gid][path] = true
			paths[gid] = append(paths[gid], path)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	for _, counts := range perNamespace {
		slices.SortFunc(counts, func(a, b dlq.NamespaceCount) int {
			return cmp.Or(cmp.Compare(b.Present, a.Present), cmp.Compare(b.Total, a.Total), strings.Compare(a.Name, b.Name))
		})
	}

	rows, err = tx.QueryContext(ctx, `SELECT id, key, reason, description_pattern, present, total, first_seen_at,
		last_seen_at, `+triageColumns+` FROM groups ORDER BY present DESC, last_seen_at DESC, key`)
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	defer rows.Close()
	var out []dlq.GroupSummary
	for rows.Next() {
		var g dlq.GroupSummary
		var id, first, last int64
		var t triageRow
		if err := rows.Scan(append([]any{&id, &g.ID, &g.Reason, &g.DescriptionPattern, &g.Present, &g.Total, &first, &last},
			t.dest()...)...); err != nil {
			return nil, fmt.Errorf("list groups: %w", err)
		}
		g.FirstSeenAt, g.LastSeenAt = time.UnixMilli(first).UTC(), time.UnixMilli(last).UTC()
		g.Triage = t.triage()
		g.Entities = paths[id]
		g.Namespaces = perNamespace[id]
		if g.Namespaces == nil {
			g.Namespaces = []dlq.NamespaceCount{}
		}
		if g.Entities == nil {
			g.Entities = []string{}
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	return out, nil
}
