package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dlqdash/dlqdash/dlq"
)

// The ingest*.go files are the catalog's write side: what the ingester calls
// (dlq.Catalog). Every method is one transaction on the writer connection.
// This one applies a page of a pass: new messages, changed states, and the
// messages of the page's range that have gone.

var (
	_ dlq.Catalog = (*Store)(nil)
	_ dlq.Catalog = (*Namespace)(nil)
)

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

// ApplyPage writes one page of a pass (see dlq.Page): the page's new
// messages, the changed states of known ones, and the known messages of the
// page's range that it no longer holds (they have gone).
func (s *Store) ApplyPage(ctx context.Context, p dlq.Page) (dlq.PageResult, error) {
	return s.applyPage(ctx, "", p)
}

func (s *Store) applyPage(ctx context.Context, ns string, p dlq.Page) (dlq.PageResult, error) {
	var res dlq.PageResult
	sq, err := subQueueCode(p.SubQueue)
	if err != nil {
		return res, err
	}
	// A page the catalog holds none of yet (a bulk read of a DLQ's tail)
	// is prepared before the writer is taken: while the indexer holds it,
	// this runs on the other core.
	var prep []prepared
	if s.rangeIsNew(ctx, ns, p.Entity, sq, p.From, p.Through) {
		prep = prepareMessages(p.Messages, p.SubQueue)
	}
	tx, ic, err := s.beginIngest(ctx)
	if err != nil {
		return res, s.wrap("apply page", err)
	}
	defer ic.release() // after the Rollback below
	defer tx.Rollback()

	// Indexing inline takes the index file's lock before anything reads
	// that file in this transaction (insertMessages reads the watermark).
	// It never waits for an index run to take it: the run's transactions
	// can outlast busy_timeout, and this one holds the catalog's lock
	// meanwhile. The page is then left to the run (on PostgreSQL also to
	// another replica's batch: lockIndexInline).
	wantInline := len(p.Messages) > 0 && s.wantInline()
	if wantInline {
		if err := s.testFault(faultInlineDecided); err != nil {
			return res, err
		}
		wantInline = s.idx.writing.TryLock()
	}
	if wantInline {
		defer func() {
			tx.Rollback() // first: the run waits for the index file's lock, not for this
			s.idx.writing.Unlock()
		}()
		if wantInline, err = s.lockIndexInline(ctx, tx); err != nil {
			return res, s.wrap("apply page", err)
		}
	}
	eid, err := entityID(ctx, tx, ns, p.Entity)
	if err != nil {
		return res, err
	}
	now := p.SeenAt.UTC().UnixMilli()

	known, err := presentInRange(ctx, tx, eid, sq, p.From, p.Through)
	if err != nil {
		return res, fmt.Errorf("apply page of %s: %w", p.Entity, err)
	}

	counters := counts{}
	groups := newGroupTally()
	var fresh []newMessage
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
			counters.add(sq, st, 1)
			nm := newMessage{m: m, eid: eid, sq: sq, st: st, firstSeen: now, lastSeen: now}
			if prep != nil {
				nm.group = groups.addAs(prep[i].group, prep[i].grouped, m, now, true)
				nm.preview, nm.previewDone = prep[i].preview, true
			} else {
				nm.group = groups.add(m, p.SubQueue, now, true)
			}
			fresh = append(fresh, nm)
			continue
		}
		delete(known, m.SequenceNumber)
		if k.state != st || k.deliveryCount != m.DeliveryCount {
			if _, err := tx.ExecContext(ctx, `UPDATE messages SET state = ?, delivery_count = ? WHERE id = ?`,
				st, m.DeliveryCount, k.id); err != nil {
				return res, fmt.Errorf("update message: %w", err)
			}
			counters.add(sq, k.state, -1)
			counters.add(sq, st, 1)
			res.Updated++
		}
	}

	// Whatever is left in known was in the covered range and not returned:
	// it has left the broker.
	if res.Gone, err = markGone(ctx, tx, eid, sq, now, known, counters); err != nil {
		return res, err
	}
	if err := upsertGroups(ctx, tx, s.chunk, eid, groups.byID); err != nil {
		return res, fmt.Errorf("update failure groups: %w", err)
	}
	inline := false
	if len(fresh) > 0 {
		if res.New, err = insertMessages(ctx, tx, ic, s.chunk, fresh); err != nil {
			return res, fmt.Errorf("insert messages of %s: %w", p.Entity, err)
		}
		if wantInline {
			if inline, err = s.indexInline(ctx, tx, ic, res.New[0], res.New[len(res.New)-1]); err != nil {
				return res, err
			}
		}
	}
	if err := counters.write(ctx, tx, s.chunk, eid); err != nil {
		return res, err
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
		return res, s.wrap("apply page", err)
	}
	if inline {
		s.idx.wroteSegment()
	} else {
		s.idx.added(len(res.New))
	}
	return res, nil
}

// markGone marks the known messages gone at now, takes them out of their
// counters and failure groups, and returns their ids.
func markGone(ctx context.Context, tx *sql.Tx, eid int64, sq int, now int64, known map[int64]knownRow, counters counts) ([]int64, error) {
	if len(known) == 0 {
		return nil, nil
	}
	stmt, err := tx.PrepareContext(ctx, `UPDATE messages SET gone_at = ? WHERE id = ?`)
	if err != nil {
		return nil, err
	}
	defer stmt.Close()
	var gone []int64
	goneGroups := map[int64]int64{}
	for _, k := range known {
		if _, err := stmt.ExecContext(ctx, now, k.id); err != nil {
			return nil, fmt.Errorf("mark message gone: %w", err)
		}
		counters.add(sq, k.state, -1)
		if k.groupID.Valid {
			goneGroups[k.groupID.Int64]++
		}
		gone = append(gone, k.id)
	}
	for gid, n := range goneGroups {
		if _, err := tx.ExecContext(ctx, `UPDATE groups SET present = present - ? WHERE id = ?`, n, gid); err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE group_entities SET present = present - ? WHERE group_id = ? AND entity_id = ?`,
			n, gid, eid); err != nil {
			return nil, err
		}
	}
	return gone, nil
}

// counterKey addresses one row of catalog_counts of an entity.
type counterKey struct{ subqueue, state int }

// counts are changes to an entity's present counts (catalog_counts).
type counts map[counterKey]int64

func (c counts) add(sq, st int, n int64) { c[counterKey{sq, st}] += n }

// upsertCountSQL adds to one of an entity's counters.
const upsertCountSQL = `INSERT INTO catalog_counts (entity_id, subqueue, state, present) VALUES (?, ?, ?, ?)
			ON CONFLICT (entity_id, subqueue, state) DO UPDATE SET present = catalog_counts.present + excluded.present`

// write adds the changes to entity eid's counters, with the statement
// prepared on SQLite's writer (stmts).
func (c counts) write(ctx context.Context, tx *sql.Tx, stmts chunkStatements, eid int64) error {
	var st *sql.Stmt
	for k, n := range c {
		if n != 0 && st == nil {
			st = stmts.stmt(ctx, tx, stmts.counts)
		}
		if n == 0 {
			continue
		}
		var err error
		if st != nil {
			_, err = st.ExecContext(ctx, eid, k.subqueue, k.state, n)
		} else {
			_, err = tx.ExecContext(ctx, upsertCountSQL, eid, k.subqueue, k.state, n)
		}
		if err != nil {
			return fmt.Errorf("update counts: %w", err)
		}
	}
	return nil
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

// prepared is what a new message's row needs that no database does: its
// failure group (normalising the description is the costly part) and its
// preview.
type prepared struct {
	group   dlq.Group
	grouped bool
	preview string
}

func prepareMessages(msgs []dlq.Message, q dlq.SubQueue) []prepared {
	out := make([]prepared, len(msgs))
	cache := map[[2]string]dlq.Group{}
	for i := range msgs {
		m := &msgs[i]
		if q != dlq.SubQueueMain {
			key := [2]string{deref(m.DeadLetterReason), deref(m.DeadLetterErrorDescription)}
			g, seen := cache[key]
			if !seen {
				g, _ = dlq.GroupOf(m, q)
				cache[key] = g
			}
			out[i].group, out[i].grouped = g, true
		}
		out[i].preview = bodyPreview(m.Body)
	}
	return out
}

// rangeIsNew reports whether the catalog has no present message of the
// entity's subqueue between from and through (read on the read pool: a
// hint, which the page's transaction checks).
func (s *Store) rangeIsNew(ctx context.Context, ns, entity string, sq int, from, through int64) bool {
	var none bool
	err := s.reader.QueryRowContext(ctx, `SELECT NOT EXISTS (SELECT 1 FROM entities e JOIN messages m ON m.entity_id = e.id
		WHERE e.namespace = ? AND e.path = ? AND m.subqueue = ? AND m.sequence_number BETWEEN ? AND ? AND m.gone_at IS NULL)`,
		ns, entity, sq, from, through).Scan(&none)
	return err == nil && none
}
