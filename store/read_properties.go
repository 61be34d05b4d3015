package store

import (
	"context"
	"fmt"
)

// Application properties as rows an index answers (migration 0013): one row
// of message_properties per top-level property of a message whose
// properties are a JSON object, keyed (key, value, at, message_id), at being
// the list's sort key. A property filter is a range of that key, in list
// order, or one lookup of the whole key for a given message.

// maxIndexedValue is the longest value (in bytes) message_properties holds;
// a filter on a longer value checks the message's JSON instead.
const maxIndexedValue = 256

// propertyExists is the filter term for one indexed property: one lookup of
// message_properties' whole key.
const propertyExists = `EXISTS (SELECT 1 FROM message_properties mp WHERE mp.key = ? AND mp.value = ?
	AND mp.at = ` + sortKey + ` AND mp.message_id = m.id)`

// On PostgreSQL the same term is written in one of two ways, for its
// planner (engine.propertyTerm): when a property drives the page, the
// other properties are looked up by the driving row's own key (p.at,
// p.message_id), which PostgreSQL turns into a merge of the two keys'
// ranges in list order (1.1 ms at 100k messages for two properties, where
// the term over m made it read every row of the commoner property: 36 ms);
// otherwise by message_id (an index SQLite's table has not).
const (
	propertyExistsDriven = `EXISTS (SELECT 1 FROM message_properties mp WHERE mp.key = ? AND mp.value = ?
	AND mp.at = p.at AND mp.message_id = p.message_id)`
	propertyExistsByMessage = `EXISTS (SELECT 1 FROM message_properties mp WHERE mp.message_id = m.id AND mp.key = ? AND mp.value = ?)`
)

// propertyTerm is t, a term of a compiled filter, as the engine runs it
// in a plan that a property drives (driven) or not.
func (e engine) propertyTerm(sql string, driven bool) string {
	if !e.postgres || sql != propertyExists {
		return sql
	}
	if driven {
		return propertyExistsDriven
	}
	return propertyExistsByMessage
}

// propertyCountCap bounds the rows counted to estimate a property driver:
// beyond it a property is common enough that any driver finds a page
// quickly, and counting further would cost more than it saves.
const propertyCountCap = 4000

// propertyRows counts the catalog's messages (gone ones too) with the
// property key = value, up to max.
func propertyRows(ctx context.Context, db queryer, key, value string, max int64) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM message_properties
		WHERE key = ? AND value = ? LIMIT ?) AS rows_with_it`, key, value, max).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count property %s: %w", key, err)
	}
	return n, nil
}
