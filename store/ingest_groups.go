package store

import (
	"context"
	"database/sql"
	"maps"
	"math"
	"slices"

	"github.com/dlqdash/dlqdash/dlq"
)

// groupDelta is a batch's change to one failure group, in one entity.
type groupDelta struct {
	group       dlq.Group
	id          int64
	present     int64
	added       int64
	first, last int64
}

// groupTally adds up a batch's new messages of one entity by failure group,
// for upsertGroups.
type groupTally struct {
	byID map[string]*groupDelta
	// byText caches the group of a (reason, description): normalising a
	// description is the costly part of grouping, and a batch of one
	// failure repeats the same few descriptions.
	byText map[[2]string]dlq.Group
}

func newGroupTally() *groupTally {
	return &groupTally{byID: map[string]*groupDelta{}, byText: map[[2]string]dlq.Group{}}
}

// add counts m, new to the catalog, in its group: present unless it is
// already gone, and dated by its enqueued time, or at when it has none. It
// returns the group's delta, nil for a message of the main entity (not a
// dead letter: no group).
func (t *groupTally) add(m *dlq.Message, q dlq.SubQueue, at int64, present bool) *groupDelta {
	if q == dlq.SubQueueMain {
		return nil
	}
	key := [2]string{deref(m.DeadLetterReason), deref(m.DeadLetterErrorDescription)}
	g, seen := t.byText[key]
	if !seen {
		g, _ = dlq.GroupOf(m, q)
		t.byText[key] = g
	}
	return t.addAs(g, true, m, at, present)
}

// addAs is add with m's group already known (grouped false: none).
func (t *groupTally) addAs(g dlq.Group, grouped bool, m *dlq.Message, at int64, present bool) *groupDelta {
	if !grouped {
		return nil
	}
	d := t.byID[g.ID]
	if d == nil {
		d = &groupDelta{group: g, first: math.MaxInt64, last: math.MinInt64}
		t.byID[g.ID] = d
	}
	if present {
		d.present++
	}
	d.added++
	if m.EnqueuedAt != nil {
		at = m.EnqueuedAt.UTC().UnixMilli()
	}
	d.first, d.last = min(d.first, at), max(d.last, at)
	return d
}

// upsertGroupSQL and upsertGroupEntitySQL add a batch's messages to a
// failure group and to its row for one entity (prepared once on SQLite:
// chunkStatements).
const (
	upsertGroupSQL = `INSERT INTO groups (key, reason, description_pattern, present, total, first_seen_at, last_seen_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET present = groups.present + excluded.present, total = groups.total + excluded.total,
				first_seen_at = ` + earlierGroups + `, last_seen_at = ` + laterGroups + `
			RETURNING id`
	upsertGroupEntitySQL = `INSERT INTO group_entities (group_id, entity_id, present, total, first_seen_at, last_seen_at)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (group_id, entity_id) DO UPDATE SET present = group_entities.present + excluded.present,
				total = group_entities.total + excluded.total,
				first_seen_at = ` + earlierGroupEntities + `, last_seen_at = ` + laterGroupEntities
)

// The upserts' new first_seen_at and last_seen_at of each table: the
// earlier and the later of the row's and the batch's (written with CASE,
// which both engines run; the columns are qualified, as PostgreSQL
// requires in ON CONFLICT DO UPDATE).
const (
	earlierGroups        = "CASE WHEN excluded.first_seen_at < groups.first_seen_at THEN excluded.first_seen_at ELSE groups.first_seen_at END"
	laterGroups          = "CASE WHEN excluded.last_seen_at > groups.last_seen_at THEN excluded.last_seen_at ELSE groups.last_seen_at END"
	earlierGroupEntities = "CASE WHEN excluded.first_seen_at < group_entities.first_seen_at THEN excluded.first_seen_at ELSE group_entities.first_seen_at END"
	laterGroupEntities   = "CASE WHEN excluded.last_seen_at > group_entities.last_seen_at THEN excluded.last_seen_at ELSE group_entities.last_seen_at END"
)

// upsertGroups writes a batch's group deltas of entity eid, with the
// statements prepared on SQLite's writer (stmts; unprepared on
// PostgreSQL).
func upsertGroups(ctx context.Context, tx *sql.Tx, stmts chunkStatements, eid int64, groups map[string]*groupDelta) error {
	if len(groups) == 0 {
		return nil
	}
	group, entity := stmts.stmt(ctx, tx, stmts.groups), stmts.stmt(ctx, tx, stmts.groupEntities)
	// In key order, so that the same batch makes the same group rows.
	for _, key := range slices.Sorted(maps.Keys(groups)) {
		d := groups[key]
		args := []any{d.group.ID, d.group.Reason, d.group.DescriptionPattern, d.present, d.added, d.first, d.last}
		var row *sql.Row
		if group != nil {
			row = group.QueryRowContext(ctx, args...)
		} else {
			row = tx.QueryRowContext(ctx, upsertGroupSQL, args...)
		}
		if err := row.Scan(&d.id); err != nil {
			return err
		}
		args = []any{d.id, eid, d.present, d.added, d.first, d.last}
		var err error
		if entity != nil {
			_, err = entity.ExecContext(ctx, args...)
		} else {
			_, err = tx.ExecContext(ctx, upsertGroupEntitySQL, args...)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
