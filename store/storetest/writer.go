package storetest

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dlqdash/dlqdash/dlq"
)

// Entity is an entity row to create.
type Entity struct {
	Path   string
	Kind   dlq.Kind // default: subscription for a .../Subscriptions/... path, else queue
	Status string   // default Active
	Counts dlq.Counts
	// DeletedAt marks the entity deleted. Its messages should then be gone.
	DeletedAt *time.Time
}

// Writer inserts catalog rows on its own connection to a migrated database,
// in transactions of a few thousand rows. Close writes the counters and
// commits; rows are visible to other connections only after it.
type Writer struct {
	db                 *sql.DB
	tx                 *sql.Tx
	ins, body, fts     *sql.Stmt
	inTx               int
	now                int64
	entities           map[string]int64
	groups             map[string]*groupRow
	groupEntities      map[[2]int64]*counter
	counts             map[[3]int64]int64
	closed             bool
	bulk               bool
	pendingFTS         []ftsRow
	bodyIndexLimit     int
	previewRunes       int
	transactionRowsMax int
}

type ftsRow struct {
	id                        int64
	body, reason, desc, props string
}

type counter struct {
	present, total int64
	first, last    int64
}

type groupRow struct {
	id int64
	counter
}

// OpenSQL opens a plain read-write connection pool on an existing database,
// for tests that need to write what no API writes.
func OpenSQL(path string) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Set("mode", "rw")
	return sql.Open("sqlite", fileURI(path)+"?"+q.Encode())
}

func fileURI(path string) string {
	return "file:" + strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(path)
}

// Open opens a Writer on the database at path, which must exist and be
// migrated (store.Open does that). bulk trades durability for speed
// (synchronous off, a large cache), for generated benchmark data.
func Open(ctx context.Context, path string, bulk bool) (*Writer, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	if bulk {
		// A fresh file nobody else has open: no journal, no foreign key
		// checks (each would make every INSERT open a statement journal).
		q.Add("_pragma", "journal_mode(OFF)")
		q.Add("_pragma", "synchronous(OFF)")
		q.Add("_pragma", "cache_size(-262144)")
	} else {
		q.Add("_pragma", "foreign_keys(ON)")
		q.Add("_pragma", "synchronous(NORMAL)")
	}
	q.Set("_txlock", "immediate")
	q.Set("mode", "rw")
	db, err := sql.Open("sqlite", fileURI(path)+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	w := &Writer{
		db:                 db,
		bulk:               bulk,
		now:                time.Now().UnixMilli(),
		entities:           map[string]int64{},
		groups:             map[string]*groupRow{},
		groupEntities:      map[[2]int64]*counter{},
		counts:             map[[3]int64]int64{},
		bodyIndexLimit:     32 << 10,
		previewRunes:       160,
		transactionRowsMax: 5000,
	}
	if err := w.load(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return w, nil
}

// load reads the entities and groups already there, so that a Writer can
// add to a database another one filled.
func (w *Writer) load(ctx context.Context) error {
	rows, err := w.db.QueryContext(ctx, `SELECT id, path FROM entities`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id int64
		var path string
		if err := rows.Scan(&id, &path); err != nil {
			rows.Close()
			return err
		}
		w.entities[path] = id
	}
	rows.Close()
	rows, err = w.db.QueryContext(ctx, `SELECT id, key FROM groups`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		g := &groupRow{counter: counter{first: math.MaxInt64, last: math.MinInt64}}
		var key string
		if err := rows.Scan(&g.id, &key); err != nil {
			return err
		}
		w.groups[key] = g
	}
	return rows.Err()
}

func (w *Writer) begin(ctx context.Context) error {
	if w.tx != nil {
		return nil
	}
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	w.tx = tx
	if w.ins, err = tx.PrepareContext(ctx, insertMessage); err != nil {
		return err
	}
	if w.body, err = tx.PrepareContext(ctx, `INSERT INTO bodies (message_id, body) VALUES (?, ?)`); err != nil {
		return err
	}
	w.fts, err = tx.PrepareContext(ctx, `INSERT INTO messages_fts (rowid, body, reason, description, properties) VALUES (?, ?, ?, ?, ?)`)
	return err
}

func (w *Writer) commit() error {
	if w.tx == nil {
		return nil
	}
	// Search rows go in last, together: any statement that opens a
	// savepoint (as an INSERT with foreign keys does) makes FTS5 write
	// its pending terms out as a new segment, so interleaving them with
	// the message inserts would write one tiny segment per message and
	// spend most of the time merging them.
	for _, f := range w.pendingFTS {
		if _, err := w.fts.Exec(f.id, f.body, f.reason, f.desc, f.props); err != nil {
			return fmt.Errorf("insert search row: %w", err)
		}
	}
	w.pendingFTS = w.pendingFTS[:0]
	for _, st := range []*sql.Stmt{w.ins, w.body, w.fts} {
		if st != nil {
			st.Close()
		}
	}
	err := w.tx.Commit()
	w.tx, w.ins, w.body, w.fts, w.inTx = nil, nil, nil, nil, 0
	return err
}

// AddEntity creates an entity row (or updates the one at its path).
func (w *Writer) AddEntity(ctx context.Context, e Entity) error {
	if err := w.begin(ctx); err != nil {
		return err
	}
	if e.Kind == "" {
		e.Kind = kindOf(e.Path)
	}
	if e.Status == "" {
		e.Status = "Active"
	}
	topic := ""
	if t, _, ok := strings.Cut(e.Path, "/Subscriptions/"); ok {
		topic = t
	}
	var deleted any
	if e.DeletedAt != nil {
		deleted = e.DeletedAt.UnixMilli()
	}
	var id int64
	err := w.tx.QueryRowContext(ctx, `INSERT INTO entities (kind, path, topic, status, created_at, active_count,
			dead_letter_count, transfer_dead_letter_count, scheduled_count, counts_at, deleted_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (path) DO UPDATE SET kind = excluded.kind, topic = excluded.topic, status = excluded.status,
			active_count = excluded.active_count, dead_letter_count = excluded.dead_letter_count,
			transfer_dead_letter_count = excluded.transfer_dead_letter_count,
			scheduled_count = excluded.scheduled_count, counts_at = excluded.counts_at, deleted_at = excluded.deleted_at
		RETURNING id`,
		string(e.Kind), e.Path, topic, e.Status, w.now, e.Counts.Active, e.Counts.DeadLetter,
		e.Counts.TransferDeadLetter, e.Counts.Scheduled, w.now, deleted).Scan(&id)
	if err != nil {
		return fmt.Errorf("add entity %s: %w", e.Path, err)
	}
	w.entities[e.Path] = id
	return nil
}

func kindOf(path string) dlq.Kind {
	if strings.Contains(path, "/Subscriptions/") {
		return dlq.KindSubscription
	}
	return dlq.KindQueue
}

const insertMessage = `INSERT INTO messages (entity_id, subqueue, state, sequence_number, message_id, correlation_id,
	session_id, partition_key, subject, content_type, reply_to, reply_to_session_id, to_address, dead_letter_reason,
	dead_letter_description, dead_letter_source, delivery_count, enqueued_at, scheduled_enqueue_at, expires_at,
	time_to_live_ms, properties, body_size, body_preview, group_id, first_seen_at, last_seen_at, gone_at, replay_count)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`

// Add inserts one message (r.ID is ignored) with its body and search row,
// and counts it in its group and entity. A missing entity is created. Zero
// FirstSeenAt means now; zero LastSeenAt means FirstSeenAt; an empty
// BodyPreview is derived from a text body as the ingester does.
func (w *Writer) Add(ctx context.Context, r dlq.Record) (int64, error) {
	if _, ok := w.entities[r.Entity]; !ok {
		if err := w.AddEntity(ctx, Entity{Path: r.Entity}); err != nil {
			return 0, err
		}
	}
	if err := w.begin(ctx); err != nil {
		return 0, err
	}
	eid := w.entities[r.Entity]
	sq, st := subQueueCode(r.SubQueue), stateCode(r.State)
	first := ms(r.FirstSeenAt, w.now)
	last := ms(r.LastSeenAt, first)

	var gid any
	if g, ok := dlq.GroupOf(&r.Message, r.SubQueue); ok {
		// Groups date their messages by enqueued time, as the ingester does.
		t := first
		if r.EnqueuedAt != nil {
			t = r.EnqueuedAt.UnixMilli()
		}
		row, err := w.group(ctx, g, t)
		if err != nil {
			return 0, err
		}
		gid = row.id
		for _, c := range []*counter{&row.counter, w.groupEntity(row.id, eid)} {
			c.total++
			if r.GoneAt == nil {
				c.present++
			}
			c.first, c.last = min(c.first, t), max(c.last, t)
		}
	}
	if r.GoneAt == nil {
		w.counts[[3]int64{eid, int64(sq), int64(st)}]++
	}

	props := string(r.ApplicationProperties)
	if props == "" {
		props = "{}"
	}
	text, isText := bodyText(r.Body, w.bodyIndexLimit)
	preview := r.BodyPreview
	if preview == "" && isText {
		preview = previewOf(text, w.previewRunes)
	}
	var msgID, ttl, gone any
	if r.MessageID != "" {
		msgID = r.MessageID
	}
	if r.TimeToLive != nil {
		ttl = r.TimeToLive.Milliseconds()
	}
	if r.GoneAt != nil {
		gone = r.GoneAt.UnixMilli()
	}
	var id int64
	err := w.ins.QueryRowContext(ctx, eid, sq, st, r.SequenceNumber, msgID, r.CorrelationID, r.SessionID,
		r.PartitionKey, r.Subject, r.ContentType, r.ReplyTo, r.ReplyToSessionID, r.To, r.DeadLetterReason,
		r.DeadLetterErrorDescription, r.DeadLetterSource, r.DeliveryCount, msPtr(r.EnqueuedAt),
		msPtr(r.ScheduledEnqueueAt), msPtr(r.ExpiresAt), ttl, props, len(r.Body), preview, gid, first, last,
		gone, r.ReplayCount).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("insert message: %w", err)
	}
	b := r.Body
	if b == nil {
		b = []byte{}
	}
	if _, err := w.body.ExecContext(ctx, id, b); err != nil {
		return 0, fmt.Errorf("insert body: %w", err)
	}
	w.pendingFTS = append(w.pendingFTS, ftsRow{id, text, deref(r.DeadLetterReason), deref(r.DeadLetterErrorDescription), props})
	if w.inTx++; w.inTx >= w.transactionRowsMax {
		if err := w.commit(); err != nil {
			return 0, err
		}
	}
	return id, nil
}

func (w *Writer) group(ctx context.Context, g dlq.Group, at int64) (*groupRow, error) {
	if row, ok := w.groups[g.ID]; ok {
		return row, nil
	}
	row := &groupRow{counter: counter{first: math.MaxInt64, last: math.MinInt64}}
	err := w.tx.QueryRowContext(ctx, `INSERT INTO groups (key, reason, description_pattern, first_seen_at, last_seen_at)
		VALUES (?, ?, ?, ?, ?) RETURNING id`, g.ID, g.Reason, g.DescriptionPattern, at, at).Scan(&row.id)
	if err != nil {
		return nil, fmt.Errorf("insert group: %w", err)
	}
	w.groups[g.ID] = row
	return row, nil
}

func (w *Writer) groupEntity(gid, eid int64) *counter {
	k := [2]int64{gid, eid}
	c := w.groupEntities[k]
	if c == nil {
		c = &counter{first: math.MaxInt64, last: math.MinInt64}
		w.groupEntities[k] = c
	}
	return c
}

// Close adds the counters of everything added to the counter tables,
// commits and closes the connection.
func (w *Writer) Close(ctx context.Context) error {
	if w.closed {
		return nil
	}
	w.closed = true
	defer w.db.Close()
	if err := w.begin(ctx); err != nil {
		return err
	}
	for _, g := range w.groups {
		if g.total == 0 {
			continue
		}
		if _, err := w.tx.ExecContext(ctx, `UPDATE groups SET present = present + ?, total = total + ?,
			first_seen_at = min(first_seen_at, ?), last_seen_at = max(last_seen_at, ?) WHERE id = ?`,
			g.present, g.total, g.first, g.last, g.id); err != nil {
			return err
		}
	}
	for k, c := range w.groupEntities {
		if _, err := w.tx.ExecContext(ctx, `INSERT INTO group_entities (group_id, entity_id, present, total, first_seen_at, last_seen_at)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (group_id, entity_id) DO UPDATE SET present = present + excluded.present,
			total = total + excluded.total, first_seen_at = min(first_seen_at, excluded.first_seen_at),
			last_seen_at = max(last_seen_at, excluded.last_seen_at)`, k[0], k[1], c.present, c.total, c.first, c.last); err != nil {
			return err
		}
	}
	for k, n := range w.counts {
		if _, err := w.tx.ExecContext(ctx, `INSERT INTO catalog_counts (entity_id, subqueue, state, present) VALUES (?, ?, ?, ?)
			ON CONFLICT (entity_id, subqueue, state) DO UPDATE SET present = present + excluded.present`, k[0], k[1], k[2], n); err != nil {
			return err
		}
	}
	if err := w.commit(); err != nil {
		return err
	}
	if w.bulk {
		if _, err := w.db.ExecContext(ctx, `PRAGMA journal_mode=WAL`); err != nil {
			return err
		}
	}
	return w.db.Close()
}

// Insert adds recs to the database at path (migrated) and returns their ids
// in order; the test fails on any error.
func Insert(tb testing.TB, path string, recs ...dlq.Record) []int64 {
	tb.Helper()
	ctx := context.Background()
	w, err := Open(ctx, path, false)
	if err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	defer w.Close(ctx)
	ids := make([]int64, len(recs))
	for i, r := range recs {
		if ids[i], err = w.Add(ctx, r); err != nil {
			tb.Fatalf("storetest: record %d: %v", i, err)
		}
	}
	if err := w.Close(ctx); err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	return ids
}

// AddEntities creates or updates entity rows in the database at path.
func AddEntities(tb testing.TB, path string, es ...Entity) {
	tb.Helper()
	ctx := context.Background()
	w, err := Open(ctx, path, false)
	if err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	defer w.Close(ctx)
	for _, e := range es {
		if err := w.AddEntity(ctx, e); err != nil {
			tb.Fatalf("storetest: %v", err)
		}
	}
	if err := w.Close(ctx); err != nil {
		tb.Fatalf("storetest: %v", err)
	}
}

func subQueueCode(q dlq.SubQueue) int {
	switch q {
	case dlq.SubQueueMain:
		return 0
	case dlq.SubQueueTransferDeadLetter:
		return 2
	}
	return 1
}

func stateCode(s dlq.State) int {
	switch s {
	case dlq.StateDeferred:
		return 1
	case dlq.StateScheduled:
		return 2
	}
	return 0
}

func ms(t time.Time, def int64) int64 {
	if t.IsZero() {
		return def
	}
	return t.UnixMilli()
}

func msPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMilli()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// bodyText is what the search index holds of a body: its first limit bytes
// if it is text (valid UTF-8 without NUL), else nothing.
func bodyText(b []byte, limit int) (string, bool) {
	if len(b) > limit {
		b = b[:limit]
		for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.Valid(b); i++ {
			b = b[:len(b)-1]
		}
	}
	if !utf8.Valid(b) || strings.ContainsRune(string(b), 0) {
		return "", false
	}
	return string(b), true
}

// previewOf is the start of a text body with its whitespace collapsed.
func previewOf(text string, runes int) string {
	f := strings.Fields(text)
	var b strings.Builder
	n := 0
	for _, w := range f {
		if b.Len() > 0 {
			b.WriteByte(' ')
			n++
		}
		for _, r := range w {
			if n >= runes {
				b.WriteString("…")
				return b.String()
			}
			b.WriteRune(r)
			n++
		}
	}
	return b.String()
}
