package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"

	"github.com/dlqdash/dlqdash/dlq"
)

// The ingest*.go files are the catalog's write side: what the ingester calls
// (dlq.Catalog). Every method is one transaction on the writer connection.
// This one applies a page of a pass: new messages, changed states, and the
// messages of the page's range that have gone.

var _ dlq.Catalog = (*Store)(nil)

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
