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

// earlier and later are the upserts' new first_seen_at and last_seen_at of
// table: the earlier and the later of the row's and the batch's (written
// with CASE, which both engines run; the columns are qualified, as
// PostgreSQL requires in ON CONFLICT DO UPDATE).
func earlier(table string) string {
	return "CASE WHEN excluded.first_seen_at < " + table + ".first_seen_at THEN excluded.first_seen_at ELSE " + table + ".first_seen_at END"
}

func later(table string) string {
	return "CASE WHEN excluded.last_seen_at > " + table + ".last_seen_at THEN excluded.last_seen_at ELSE " + table + ".last_seen_at END"
}

func upsertGroups(ctx context.Context, tx *sql.Tx, eid int64, groups map[string]*groupDelta) error {
	// In key order, so that the same batch makes the same group rows.
	for _, key := range slices.Sorted(maps.Keys(groups)) {
		d := groups[key]
		err := tx.QueryRowContext(ctx, `INSERT INTO groups (key, reason, description_pattern, present, total, first_seen_at, last_seen_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET present = groups.present + excluded.present, total = groups.total + excluded.total,
				first_seen_at = `+earlier("groups")+`, last_seen_at = `+later("groups")+`
			RETURNING id`,
			d.group.ID, d.group.Reason, d.group.DescriptionPattern, d.present, d.added, d.first, d.last).Scan(&d.id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO group_entities (group_id, entity_id, present, total, first_seen_at, last_seen_at)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (group_id, entity_id) DO UPDATE SET present = group_entities.present + excluded.present,
				total = group_entities.total + excluded.total,
				first_seen_at = `+earlier("group_entities")+`, last_seen_at = `+later("group_entities"),
			d.id, eid, d.present, d.added, d.first, d.last); err != nil {
			return err
		}
	}
	return nil
}
