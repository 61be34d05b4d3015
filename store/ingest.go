package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlqdash/dlqdash/dlq"
)

// This file is the catalog's write side: what the ingester calls
// (dlq.Catalog). Every method is one transaction on the writer connection.

// Limits of what the catalog derives from a body for lists and search.
const (
	// previewRunes is how much of a text body a list shows.
	previewRunes = 160
	// maxIndexedBody is how much of a text body full-text search indexes:
	// a 200 KiB JSON document is searchable by what its first 32 KiB say.
	maxIndexedBody = 32 << 10
)

var _ dlq.Catalog = (*Store)(nil)

// entityID returns the id of the entity at path, or ErrNotFound.
func entityID(ctx context.Context, q querier, path string) (int64, error) {
	var id int64
	err := q.QueryRowContext(ctx, `SELECT id FROM entities WHERE path = ?`, path).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("entity %s: %w", path, ErrNotFound)
	}
	return id, err
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// SyncEntities records the listed entities and their broker counts, and at
// as the last successful read of the broker (LastSuccess). Entities
// not listed any more are marked deleted: their present messages become gone
// and their read cursors are dropped, so that an entity created again under
// the same name (whose sequence numbers start again at 1) is read afresh.
func (s *Store) SyncEntities(ctx context.Context, listed []dlq.Entity, at time.Time) (dlq.EntitySync, error) {
	var res dlq.EntitySync
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return res, s.wrap("sync entities", err, DefaultBusyTimeout)
	}
	defer tx.Rollback()

	type known struct {
		id      int64
		deleted bool
		counts  dlq.Counts
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, path, deleted_at IS NOT NULL, active_count, dead_letter_count,
		transfer_dead_letter_count, scheduled_count FROM entities`)
	if err != nil {
		return res, fmt.Errorf("sync entities: %w", err)
	}
	have := map[string]known{}
	for rows.Next() {
		var k known
		var path string
		if err := rows.Scan(&k.id, &path, &k.deleted, &k.counts.Active, &k.counts.DeadLetter,
			&k.counts.TransferDeadLetter, &k.counts.Scheduled); err != nil {
			rows.Close()
			return res, fmt.Errorf("sync entities: %w", err)
		}
		have[path] = k
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("sync entities: %w", err)
	}

	now := at.UTC().UnixMilli()
	seen := make(map[string]bool, len(listed))
	for _, e := range listed {
		seen[e.Path] = true
		k, ok := have[e.Path]
		c := e.Counts
		switch {
		case !ok:
			_, err = tx.ExecContext(ctx, `INSERT INTO entities (kind, path, topic, created_at, active_count,
				dead_letter_count, transfer_dead_letter_count, scheduled_count, counts_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				string(e.Kind), e.Path, e.Topic, now, c.Active, c.DeadLetter, c.TransferDeadLetter, c.Scheduled, now)
			res.Added = append(res.Added, e.Path)
		case k.deleted:
			_, err = tx.ExecContext(ctx, `UPDATE entities SET deleted_at = NULL, kind = ?, topic = ?, active_count = ?,
				dead_letter_count = ?, transfer_dead_letter_count = ?, scheduled_count = ?, counts_at = ? WHERE id = ?`,
				string(e.Kind), e.Topic, c.Active, c.DeadLetter, c.TransferDeadLetter, c.Scheduled, now, k.id)
			res.Added = append(res.Added, e.Path)
		case k.counts != c:
			_, err = tx.ExecContext(ctx, `UPDATE entities SET active_count = ?, dead_letter_count = ?,
				transfer_dead_letter_count = ?, scheduled_count = ?, counts_at = ? WHERE id = ?`,
				c.Active, c.DeadLetter, c.TransferDeadLetter, c.Scheduled, now, k.id)
		}
		if err != nil {
			return res, fmt.Errorf("sync entity %s: %w", e.Path, err)
		}
	}
	for path, k := range have {
		if seen[path] || k.deleted {
			continue
		}
		gone, err := markEntityDeleted(ctx, tx, k.id, now)
		if err != nil {
			return res, fmt.Errorf("mark entity %s deleted: %w", path, err)
		}
		res.Deleted = append(res.Deleted, path)
		res.Gone = append(res.Gone, gone...)
	}
	// Every entity not deleted was just listed: one statement stamps them
	// all, rather than one per unchanged entity on every poll.
	if _, err := tx.ExecContext(ctx, `UPDATE entities SET counts_at = ? WHERE deleted_at IS NULL`, now); err != nil {
		return res, fmt.Errorf("sync entities: %w", err)
	}
	// The listing succeeded: this is the last successful read (LastSuccess).
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, metaLastSuccess, at.UTC().Format(time.RFC3339Nano)); err != nil {
		return res, fmt.Errorf("sync entities: record the last successful read: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return res, s.wrap("sync entities", err, DefaultBusyTimeout)
	}
	return res, nil
}

// markEntityDeleted marks an entity deleted, its present messages gone, and
// zeroes the counters they were in.
func markEntityDeleted(ctx context.Context, tx *sql.Tx, id, now int64) ([]int64, error) {
	if _, err := tx.ExecContext(ctx, `UPDATE entities SET deleted_at = ?, active_count = 0, dead_letter_count = 0,
		transfer_dead_letter_count = 0, scheduled_count = 0, counts_at = ? WHERE id = ?`, now, now, id); err != nil {
		return nil, err
	}
	// Group counters first, while the messages still read as present.
	if _, err := tx.ExecContext(ctx, `UPDATE groups SET present = present - coalesce((
			SELECT ge.present FROM group_entities ge WHERE ge.group_id = groups.id AND ge.entity_id = ?), 0)
		WHERE id IN (SELECT group_id FROM group_entities WHERE entity_id = ?)`, id, id); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE group_entities SET present = 0 WHERE entity_id = ?`, id); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE catalog_counts SET present = 0 WHERE entity_id = ?`, id); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM cursors WHERE entity_id = ?`, id); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `UPDATE messages SET gone_at = ? WHERE entity_id = ? AND gone_at IS NULL RETURNING id`, now, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var mid int64
		if err := rows.Scan(&mid); err != nil {
			return nil, err
		}
		ids = append(ids, mid)
	}
	return ids, rows.Err()
}

// settingsJSON is how an entity's settings are stored (entities.settings).
func settingsJSON(st dlq.Settings) (string, error) {
	b, err := json.Marshal(struct {
		Status                           string `json:"status"`
		LockDuration                     string `json:"lock_duration"`
		MaxDeliveryCount                 int32  `json:"max_delivery_count"`
		RequiresSession                  bool   `json:"requires_session"`
		RequiresDuplicateDetection       bool   `json:"requires_duplicate_detection"`
		DuplicateDetectionWindow         string `json:"duplicate_detection_window"`
		DefaultTimeToLive                string `json:"default_time_to_live"`
		DeadLetteringOnMessageExpiration bool   `json:"dead_lettering_on_message_expiration"`
		ForwardTo                        string `json:"forward_to,omitempty"`
		ForwardDeadLetteredMessagesTo    string `json:"forward_dead_lettered_messages_to,omitempty"`
	}{st.Status, st.LockDuration.String(), st.MaxDeliveryCount, st.RequiresSession, st.RequiresDuplicateDetection,
		st.DuplicateDetectionWindow.String(), st.DefaultTimeToLive.String(), st.DeadLetteringOnMessageExpiration,
		st.ForwardTo, st.ForwardDeadLetteredMessagesTo})
	if err != nil {
		return "", fmt.Errorf("encode settings of %s: %w", st.Path, err)
	}
	return string(b), nil
}

// SaveSettings records the entities' settings as JSON, and their status.
func (s *Store) SaveSettings(ctx context.Context, settings []dlq.Settings) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap("save settings", err, DefaultBusyTimeout)
	}
	defer tx.Rollback()
	for _, st := range settings {
		js, err := settingsJSON(st)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE entities SET settings = ?, status = ? WHERE path = ?`,
			js, st.Status, st.Path); err != nil {
			return fmt.Errorf("save settings of %s: %w", st.Path, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return s.wrap("save settings", err, DefaultBusyTimeout)
	}
	return nil
}

// knownRow is a present cataloged message as ApplyPage compares it.
type knownRow struct {
	id            int64
	state         int
	deliveryCount uint32
	groupID       sql.NullInt64
	messageID     sql.NullString
	enqueuedAt    sql.NullInt64
}

// same reports whether m is the message the catalog knows under its
// sequence number. It is not when the numbering started again: an entity
// deleted and created while dlqdash was not running, or a new emulator
// namespace behind the same names. The old copy is then gone and m is new.
func (k knownRow) same(m *dlq.Message) bool {
	if k.messageID.String != m.MessageID {
		return false
	}
	if m.EnqueuedAt == nil || !k.enqueuedAt.Valid {
		return m.EnqueuedAt == nil && !k.enqueuedAt.Valid
	}
	return k.enqueuedAt.Int64 == m.EnqueuedAt.UTC().UnixMilli()
}

// counterKey addresses one row of catalog_counts.
type counterKey struct{ subqueue, state int }

// groupDelta is a page's change to one failure group.
type groupDelta struct {
	group       dlq.Group
	id          int64
	present     int64
	added       int64
	first, last int64
}

// ApplyPage writes one page of a pass (see dlq.Page).
func (s *Store) ApplyPage(ctx context.Context, p dlq.Page) (dlq.PageResult, error) {
	var res dlq.PageResult
	sq, err := subQueueCode(p.SubQueue)
	if err != nil {
		return res, err
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return res, s.wrap("apply page", err, DefaultBusyTimeout)
	}
	defer tx.Rollback()

	eid, err := entityID(ctx, tx, p.Entity)
	if err != nil {
		return res, err
	}
	now := p.SeenAt.UTC().UnixMilli()

	known, err := presentInRange(ctx, tx, eid, sq, p.From, p.Through)
	if err != nil {
		return res, fmt.Errorf("apply page of %s: %w", p.Entity, err)
	}

	counters := map[counterKey]int64{}
	groups := map[string]*groupDelta{}
	var fresh []*dlq.Message
	var freshGroups []*groupDelta // the group of each fresh message, nil for none
	// Normalising a description is the costly part of grouping, and a page
	// of one failure repeats the same few descriptions.
	groupOf := map[[2]string]dlq.Group{}
	for i := range p.Messages {
		m := &p.Messages[i]
		st, err := stateCode(m.State)
		if err != nil {
			return res, err
		}
		k, ok := known[m.SequenceNumber]
		if ok && !k.same(m) {
			ok = false // k stays in known, so it is marked gone below, before m is inserted
		}
		if !ok {
			fresh = append(fresh, m)
			counters[counterKey{sq, st}]++
			var d *groupDelta
			if p.SubQueue != dlq.SubQueueMain {
				key := [2]string{deref(m.DeadLetterReason), deref(m.DeadLetterErrorDescription)}
				g, seen := groupOf[key]
				if !seen {
					g, _ = dlq.GroupOf(m, p.SubQueue)
					groupOf[key] = g
				}
				d = groups[g.ID]
				if d == nil {
					d = &groupDelta{group: g, first: math.MaxInt64, last: math.MinInt64}
					groups[g.ID] = d
				}
				d.present++
				d.added++
				t := now
				if m.EnqueuedAt != nil {
					t = m.EnqueuedAt.UTC().UnixMilli()
				}
				d.first, d.last = min(d.first, t), max(d.last, t)
			}
			freshGroups = append(freshGroups, d)
			continue
		}
		delete(known, m.SequenceNumber)
		if k.state != st || k.deliveryCount != m.DeliveryCount {
			if _, err := tx.ExecContext(ctx, `UPDATE messages SET state = ?, delivery_count = ? WHERE id = ?`,
				st, m.DeliveryCount, k.id); err != nil {
				return res, fmt.Errorf("update message: %w", err)
			}
			counters[counterKey{sq, k.state}]--
			counters[counterKey{sq, st}]++
			res.Updated++
		}
	}

	// Whatever is left in known was in the covered range and not returned:
	// it has left the broker.
	if len(known) > 0 {
		stmt, err := tx.PrepareContext(ctx, `UPDATE messages SET gone_at = ? WHERE id = ?`)
		if err != nil {
			return res, err
		}
		defer stmt.Close()
		goneGroups := map[int64]int64{}
		for _, k := range known {
			if _, err := stmt.ExecContext(ctx, now, k.id); err != nil {
				return res, fmt.Errorf("mark message gone: %w", err)
			}
			counters[counterKey{sq, k.state}]--
			if k.groupID.Valid {
				goneGroups[k.groupID.Int64]++
			}
			res.Gone = append(res.Gone, k.id)
		}
		for gid, n := range goneGroups {
			if _, err := tx.ExecContext(ctx, `UPDATE groups SET present = present - ? WHERE id = ?`, n, gid); err != nil {
				return res, err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE group_entities SET present = present - ? WHERE group_id = ? AND entity_id = ?`,
				n, gid, eid); err != nil {
				return res, err
			}
		}
	}

	if err := upsertGroups(ctx, tx, eid, groups); err != nil {
		return res, fmt.Errorf("update failure groups: %w", err)
	}
	if len(fresh) > 0 {
		ids, err := insertMessages(ctx, tx, s.chunk, eid, sq, fresh, freshGroups, now)
		if err != nil {
			return res, fmt.Errorf("insert messages of %s: %w", p.Entity, err)
		}
		res.New = ids
	}
	for k, n := range counters {
		if n == 0 {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO catalog_counts (entity_id, subqueue, state, present) VALUES (?, ?, ?, ?)
			ON CONFLICT (entity_id, subqueue, state) DO UPDATE SET present = present + excluded.present`,
			eid, k.subqueue, k.state, n); err != nil {
			return res, fmt.Errorf("update counts: %w", err)
		}
	}
	// Everything present in the covered range was just seen.
	if len(p.Messages) > len(fresh) {
		if _, err := tx.ExecContext(ctx, `UPDATE messages SET last_seen_at = ? WHERE entity_id = ? AND subqueue = ?
			AND sequence_number BETWEEN ? AND ? AND gone_at IS NULL AND last_seen_at < ?`,
			now, eid, sq, p.From, p.Through, now); err != nil {
			return res, fmt.Errorf("update last seen: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return res, s.wrap("apply page", err, DefaultBusyTimeout)
	}
	return res, nil
}

func presentInRange(ctx context.Context, tx *sql.Tx, eid int64, sq int, from, through int64) (map[int64]knownRow, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, sequence_number, state, delivery_count, group_id, message_id, enqueued_at FROM messages
		WHERE entity_id = ? AND subqueue = ? AND sequence_number BETWEEN ? AND ? AND gone_at IS NULL`,
		eid, sq, from, through)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	known := map[int64]knownRow{}
	for rows.Next() {
		var k knownRow
		var seq int64
		if err := rows.Scan(&k.id, &seq, &k.state, &k.deliveryCount, &k.groupID, &k.messageID, &k.enqueuedAt); err != nil {
			return nil, err
		}
		known[seq] = k
	}
	return known, rows.Err()
}

func upsertGroups(ctx context.Context, tx *sql.Tx, eid int64, groups map[string]*groupDelta) error {
	for _, d := range groups {
		err := tx.QueryRowContext(ctx, `INSERT INTO groups (key, reason, description_pattern, present, total, first_seen_at, last_seen_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET present = present + excluded.present, total = total + excluded.total,
				first_seen_at = min(first_seen_at, excluded.first_seen_at), last_seen_at = max(last_seen_at, excluded.last_seen_at)
			RETURNING id`,
			d.group.ID, d.group.Reason, d.group.DescriptionPattern, d.present, d.added, d.first, d.last).Scan(&d.id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO group_entities (group_id, entity_id, present, total, first_seen_at, last_seen_at)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (group_id, entity_id) DO UPDATE SET present = present + excluded.present, total = total + excluded.total,
				first_seen_at = min(first_seen_at, excluded.first_seen_at), last_seen_at = max(last_seen_at, excluded.last_seen_at)`,
			d.id, eid, d.present, d.added, d.first, d.last); err != nil {
			return err
		}
	}
	return nil
}

// messageColumns are the columns insertMessages writes, in order.
const messageColumns = `id, entity_id, subqueue, state, sequence_number, message_id, correlation_id,
	session_id, partition_key, subject, content_type, reply_to, reply_to_session_id, to_address, dead_letter_reason,
	dead_letter_description, dead_letter_source, delivery_count, enqueued_at, scheduled_enqueue_at, expires_at,
	time_to_live_ms, properties, body_size, body_preview, group_id, first_seen_at, last_seen_at, replay_count`

const messageColumnCount = 29

// insertChunk is how many rows one multi-row INSERT carries: a statement per
// row costs more in the driver than in SQLite, and SQLite allows 32,766
// parameters per statement.
const insertChunk = 100

// chunkStatements are the prepared full-chunk INSERTs.
type chunkStatements struct {
	messages, bodies *sql.Stmt
}

// prepareChunks prepares the full-chunk INSERTs on the writer. Open calls
// it: preparing later, inside a transaction, would wait for the writer's one
// connection, which that transaction holds.
func (s *Store) prepareChunks(ctx context.Context) error {
	var err1, err2 error
	s.chunk.messages, err1 = s.writer.PrepareContext(ctx,
		"INSERT INTO messages ("+messageColumns+") VALUES "+placeholders(insertChunk, messageColumnCount))
	s.chunk.bodies, err2 = s.writer.PrepareContext(ctx, "INSERT INTO bodies (message_id, body) VALUES "+placeholders(insertChunk, 2))
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("prepare catalog inserts: %w", err)
	}
	return nil
}

func insertMessages(ctx context.Context, tx *sql.Tx, full chunkStatements, eid int64, sq int, msgs []*dlq.Message,
	groups []*groupDelta, now int64) ([]int64, error) {
	// Ids are assigned here rather than by SQLite so that rows can go in
	// many to a statement: the store has one writer connection and this runs
	// inside its transaction, so nobody else takes the next ids meanwhile.
	var next int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) + 1 FROM messages`).Scan(&next); err != nil {
		return nil, err
	}
	// The search rows go in with one statement per page: FTS5 flushes its
	// pending terms to a new segment at every statement, so a statement per
	// row would write a segment per row and spend its time merging them.
	ftsArgs := make([]any, 0, len(msgs)*5)
	ids := make([]int64, 0, len(msgs))
	rowArgs := make([]any, 0, insertChunk*messageColumnCount)
	bodyArgs := make([]any, 0, insertChunk*2)

	flush := func(n int) error {
		if n == 0 {
			return nil
		}
		if n == insertChunk {
			// Full chunks use statements prepared once on the writer's
			// connection: preparing a 2,800-parameter INSERT costs as much
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
	for i, m := range msgs {
		st, _ := stateCode(m.State) // checked by the caller
		var gid any
		if g := groups[i]; g != nil {
			gid = g.id
		}
		var ttl any
		if m.TimeToLive != nil {
			ttl = m.TimeToLive.Milliseconds()
		}
		props := string(m.ApplicationProperties)
		if props == "" {
			props = "{}"
		}
		text, isText := bodyText(m.Body)
		preview := ""
		if isText {
			preview = previewOf(text)
		} else {
			text = ""
		}
		id := next
		next++
		rowArgs = append(rowArgs, id, eid, sq, st, m.SequenceNumber, m.MessageID, m.CorrelationID,
			m.SessionID, m.PartitionKey, m.Subject, m.ContentType, m.ReplyTo, m.ReplyToSessionID, m.To,
			m.DeadLetterReason, m.DeadLetterErrorDescription, m.DeadLetterSource, m.DeliveryCount,
			millis(m.EnqueuedAt), millis(m.ScheduledEnqueueAt), millis(m.ExpiresAt), ttl, props,
			len(m.Body), preview, gid, now, now, replayCountOf(props))
		b := m.Body
		if b == nil {
			b = []byte{}
		}
		bodyArgs = append(bodyArgs, id, b)
		ftsArgs = append(ftsArgs, id, text, deref(m.DeadLetterReason), deref(m.DeadLetterErrorDescription), propertiesText(props))
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
	// One statement for the page, however many rows (a page is at most a
	// few hundred messages: far below SQLite's 32,766 parameters).
	for len(ftsArgs) > 0 {
		n := min(len(ftsArgs)/5, 6000)
		if _, err := tx.ExecContext(ctx, `INSERT INTO messages_fts (rowid, body, reason, description, properties) VALUES `+
			placeholders(n, 5), ftsArgs[:n*5]...); err != nil {
			return nil, fmt.Errorf("index for search: %w", err)
		}
		ftsArgs = ftsArgs[n*5:]
	}
	return ids, nil
}

// placeholders is "(?, ?), (?, ?)" for rows rows of cols columns.
func placeholders(rows, cols int) string {
	one := "(" + strings.Repeat("?, ", cols-1) + "?)"
	return strings.Repeat(one+", ", rows-1) + one
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// bodyText returns the part of a body worth indexing and previewing, and
// whether the body is text at all: valid UTF-8 without NUL bytes.
func bodyText(b []byte) (string, bool) {
	if len(b) > maxIndexedBody {
		b = b[:maxIndexedBody]
		// Do not let the cut split a rune and turn a text body into "binary".
		for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.Valid(b); i++ {
			b = b[:len(b)-1]
		}
	}
	if !utf8.Valid(b) || strings.ContainsRune(string(b), 0) {
		return "", false
	}
	return string(b), true
}

// previewOf is the start of a text body with whitespace collapsed.
func previewOf(text string) string {
	var b strings.Builder
	n := 0
	space := false
	for _, r := range text {
		if n >= previewRunes {
			b.WriteString("…")
			break
		}
		if r == ' ' || r == '\n' || r == '\r' || r == '\t' {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
			n++
		}
		space = false
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// ReplayCountProperty is the application property a replayed copy carries
// (docs/api.md): how many times its lineage was replayed.
const ReplayCountProperty = "dlqdash.replay_count"

// replayCountOf reads ReplayCountProperty from a properties object; 0 when
// absent or not a whole number. Only copies carry it, so the common case is
// one substring test.
func replayCountOf(props string) int64 {
	if !strings.Contains(props, ReplayCountProperty) {
		return 0
	}
	dec := json.NewDecoder(strings.NewReader(props))
	dec.UseNumber()
	var all map[string]any
	if dec.Decode(&all) != nil {
		return 0
	}
	n, ok := all[ReplayCountProperty].(json.Number)
	if !ok {
		return 0
	}
	v, err := n.Int64()
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// propertiesText flattens the properties JSON into words for the index:
// punctuation is ignored by the tokenizer, so the JSON text itself serves.
func propertiesText(js string) string { return js }

// SaveCursor stores the ingester's read state of one (entity, subqueue).
func (s *Store) SaveCursor(ctx context.Context, c dlq.Cursor) error {
	sq, err := subQueueCode(c.SubQueue)
	if err != nil {
		return err
	}
	var lastErr any
	if c.LastError != "" {
		lastErr = c.LastError
	}
	_, err = s.writer.ExecContext(ctx, `INSERT INTO cursors (entity_id, subqueue, floor, max_seen, broker_count, main_low,
			last_pass_at, last_full_at, full_duration_ms, last_error)
		SELECT id, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM entities WHERE path = ?
		ON CONFLICT (entity_id, subqueue) DO UPDATE SET floor = excluded.floor, max_seen = excluded.max_seen,
			broker_count = excluded.broker_count, main_low = excluded.main_low, last_pass_at = excluded.last_pass_at,
			last_full_at = excluded.last_full_at, full_duration_ms = excluded.full_duration_ms, last_error = excluded.last_error`,
		sq, c.Floor, c.MaxSeen, c.BrokerCount, c.MainLow, millis(c.LastPassAt), millis(c.LastFullAt),
		c.FullDuration.Milliseconds(), lastErr, c.Entity)
	if err != nil {
		return s.wrap("save cursor", err, DefaultBusyTimeout)
	}
	return nil
}

// Cursors returns every stored cursor of an entity that is not deleted, with
// the catalog's present count of its subqueue.
func (s *Store) Cursors(ctx context.Context) ([]dlq.Cursor, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT e.path, c.subqueue, c.floor, c.max_seen, c.broker_count, c.main_low,
			c.last_pass_at, c.last_full_at, c.full_duration_ms, coalesce(c.last_error, ''),
			coalesce((SELECT sum(present) FROM catalog_counts cc WHERE cc.entity_id = c.entity_id AND cc.subqueue = c.subqueue), 0)
		FROM cursors c JOIN entities e ON e.id = c.entity_id WHERE e.deleted_at IS NULL`)
	if err != nil {
		return nil, fmt.Errorf("read cursors: %w", err)
	}
	defer rows.Close()
	var out []dlq.Cursor
	for rows.Next() {
		var c dlq.Cursor
		var sq int
		var pass, full *int64
		var dur int64
		if err := rows.Scan(&c.Entity, &sq, &c.Floor, &c.MaxSeen, &c.BrokerCount, &c.MainLow, &pass, &full, &dur,
			&c.LastError, &c.Present); err != nil {
			return nil, fmt.Errorf("read cursors: %w", err)
		}
		c.SubQueue = subQueueOf(sq)
		c.LastPassAt, c.LastFullAt = timeOf(pass), timeOf(full)
		c.FullDuration = time.Duration(dur) * time.Millisecond
		out = append(out, c)
	}
	return out, rows.Err()
}

// PresentCount is the catalog's count of present messages in one subqueue.
func (s *Store) PresentCount(ctx context.Context, entity string, q dlq.SubQueue) (int64, error) {
	sq, err := subQueueCode(q)
	if err != nil {
		return 0, err
	}
	var n int64
	err = s.reader.QueryRowContext(ctx, `SELECT coalesce(sum(cc.present), 0) FROM catalog_counts cc
		JOIN entities e ON e.id = cc.entity_id WHERE e.path = ? AND cc.subqueue = ?`, entity, sq).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count present messages of %s: %w", entity, err)
	}
	return n, nil
}

// RecordDepth stores one sample of an entity's broker counts.
func (s *Store) RecordDepth(ctx context.Context, entity string, c dlq.Counts, at time.Time) error {
	_, err := s.writer.ExecContext(ctx, `INSERT INTO depth_samples (entity_id, at, active_count, dead_letter_count,
			transfer_dead_letter_count, scheduled_count)
		SELECT id, ?, ?, ?, ?, ? FROM entities WHERE path = ?
		ON CONFLICT (entity_id, at) DO UPDATE SET active_count = excluded.active_count,
			dead_letter_count = excluded.dead_letter_count, transfer_dead_letter_count = excluded.transfer_dead_letter_count,
			scheduled_count = excluded.scheduled_count`,
		at.UTC().UnixMilli(), c.Active, c.DeadLetter, c.TransferDeadLetter, c.Scheduled, entity)
	if err != nil {
		return s.wrap("record depth", err, DefaultBusyTimeout)
	}
	return nil
}

// PruneGone deletes up to batch messages that left the broker before cutoff
// (their bodies and search entries with them), and up to batch depth
// samples older than cutoff. Small batches keep each transaction short, so
// the ingester never waits long for the writer.
func (s *Store) PruneGone(ctx context.Context, cutoff time.Time, batch int) (int, error) {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return 0, s.wrap("prune", err, DefaultBusyTimeout)
	}
	defer tx.Rollback()
	c := cutoff.UTC().UnixMilli()
	if _, err := tx.ExecContext(ctx, `DELETE FROM messages_fts WHERE rowid IN (
		SELECT id FROM messages WHERE gone_at < ? ORDER BY gone_at LIMIT ?)`, c, batch); err != nil {
		return 0, fmt.Errorf("prune search index: %w", err)
	}
	r, err := tx.ExecContext(ctx, `DELETE FROM messages WHERE id IN (
		SELECT id FROM messages WHERE gone_at < ? ORDER BY gone_at LIMIT ?)`, c, batch)
	if err != nil {
		return 0, fmt.Errorf("prune messages: %w", err)
	}
	n, _ := r.RowsAffected()
	if _, err := tx.ExecContext(ctx, `DELETE FROM depth_samples WHERE (entity_id, at) IN (
		SELECT entity_id, at FROM depth_samples WHERE at < ? LIMIT ?)`, c, batch); err != nil {
		return 0, fmt.Errorf("prune depth samples: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, s.wrap("prune", err, DefaultBusyTimeout)
	}
	return int(n), nil
}

const metaLastSuccess = "ingest.last_success_at"

// LastSuccess returns when the ingester last read the broker successfully,
// or nil if it never has.
func (s *Store) LastSuccess(ctx context.Context) (*time.Time, error) {
	v, err := s.Meta(ctx, metaLastSuccess)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil, fmt.Errorf("meta %s: %w", metaLastSuccess, err)
	}
	return &t, nil
}

// MergeSearchIndex does a bounded amount of the search index's merge work
// (about pages pages written), so that its segments, which automerge 16
// lets pile up during bulk writes, are combined while nothing else writes.
// It reports whether there was work to do.
func (s *Store) MergeSearchIndex(ctx context.Context, pages int) (bool, error) {
	before := s.totalChanges(ctx)
	if _, err := s.writer.ExecContext(ctx, `INSERT INTO messages_fts (messages_fts, rank) VALUES ('merge', ?)`, pages); err != nil {
		return false, s.wrap("merge search index", err, DefaultBusyTimeout)
	}
	// FTS5's documented test: fewer than two changes means nothing to merge.
	return s.totalChanges(ctx)-before >= 2, nil
}

// totalChanges is SQLite's count of rows changed on the writer connection;
// an FTS5 'merge' that finds nothing to do changes none.
func (s *Store) totalChanges(ctx context.Context) int64 {
	var n int64
	_ = s.writer.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&n)
	return n
}
