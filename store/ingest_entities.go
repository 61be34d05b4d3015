package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// entityID returns the id of the entity at path in namespace ns, or
// ErrNotFound.
func entityID(ctx context.Context, q querier, ns, path string) (int64, error) {
	var id int64
	err := q.QueryRowContext(ctx, `SELECT id FROM entities WHERE namespace = ? AND path = ?`, ns, path).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		if ns != "" {
			return 0, fmt.Errorf("entity %s in namespace %s: %w", path, ns, ErrNotFound)
		}
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
	return s.syncEntities(ctx, "", listed, at)
}

func (s *Store) syncEntities(ctx context.Context, ns string, listed []dlq.Entity, at time.Time) (dlq.EntitySync, error) {
	var res dlq.EntitySync
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return res, s.wrap("sync entities", err)
	}
	defer tx.Rollback()

	have, err := knownEntities(ctx, tx, ns)
	if err != nil {
		return res, fmt.Errorf("sync entities: %w", err)
	}

	now := at.UTC().UnixMilli()
	if res.Added, err = recordListed(ctx, tx, ns, listed, have, now); err != nil {
		return res, err
	}
	seen := make(map[string]bool, len(listed))
	for _, e := range listed {
		seen[e.Path] = true
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
	if _, err := tx.ExecContext(ctx, `UPDATE entities SET counts_at = ? WHERE deleted_at IS NULL AND namespace = ?`, now, ns); err != nil {
		return res, fmt.Errorf("sync entities: %w", err)
	}
	// The listing succeeded: this is the last successful read (LastSuccess).
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, lastSuccessKey(ns), at.UTC().Format(time.RFC3339Nano)); err != nil {
		return res, fmt.Errorf("sync entities: record the last successful read: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return res, s.wrap("sync entities", err)
	}
	return res, nil
}

// knownEntity is an entity row as SyncEntities compares it with a listing.
type knownEntity struct {
	id      int64
	deleted bool
	counts  dlq.Counts
}

// knownEntities reads every entity row of namespace ns, deleted ones too,
// by path.
func knownEntities(ctx context.Context, tx *sql.Tx, ns string) (map[string]knownEntity, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, path, deleted_at IS NOT NULL, active_count, dead_letter_count,
		transfer_dead_letter_count, scheduled_count FROM entities WHERE namespace = ?`, ns)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	have := map[string]knownEntity{}
	for rows.Next() {
		var k knownEntity
		var path string
		if err := rows.Scan(&k.id, &path, &k.deleted, &k.counts.Active, &k.counts.DeadLetter,
			&k.counts.TransferDeadLetter, &k.counts.Scheduled); err != nil {
			return nil, err
		}
		have[path] = k
	}
	return have, rows.Err()
}

// recordListed inserts the listed entities the catalog does not have,
// revives deleted ones listed again (both are returned, as added), and
// updates the counts that changed.
func recordListed(ctx context.Context, tx *sql.Tx, ns string, listed []dlq.Entity, have map[string]knownEntity, now int64) ([]string, error) {
	var added []string
	for _, e := range listed {
		k, ok := have[e.Path]
		c := e.Counts
		var err error
		switch {
		case !ok:
			_, err = tx.ExecContext(ctx, `INSERT INTO entities (namespace, kind, path, topic, created_at, active_count,
				dead_letter_count, transfer_dead_letter_count, scheduled_count, counts_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				ns, string(e.Kind), e.Path, e.Topic, now, c.Active, c.DeadLetter, c.TransferDeadLetter, c.Scheduled, now)
			added = append(added, e.Path)
		case k.deleted:
			_, err = tx.ExecContext(ctx, `UPDATE entities SET deleted_at = NULL, kind = ?, topic = ?, active_count = ?,
				dead_letter_count = ?, transfer_dead_letter_count = ?, scheduled_count = ?, counts_at = ? WHERE id = ?`,
				string(e.Kind), e.Topic, c.Active, c.DeadLetter, c.TransferDeadLetter, c.Scheduled, now, k.id)
			added = append(added, e.Path)
		case k.counts != c:
			_, err = tx.ExecContext(ctx, `UPDATE entities SET active_count = ?, dead_letter_count = ?,
				transfer_dead_letter_count = ?, scheduled_count = ?, counts_at = ? WHERE id = ?`,
				c.Active, c.DeadLetter, c.TransferDeadLetter, c.Scheduled, now, k.id)
		}
		if err != nil {
			return nil, fmt.Errorf("sync entity %s: %w", e.Path, err)
		}
	}
	return added, nil
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
	return s.saveSettings(ctx, "", settings)
}

func (s *Store) saveSettings(ctx context.Context, ns string, settings []dlq.Settings) error {
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return s.wrap("save settings", err)
	}
	defer tx.Rollback()
	for _, st := range settings {
		js, err := settingsJSON(st)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE entities SET settings = ?, status = ? WHERE namespace = ? AND path = ?`,
			js, st.Status, ns, st.Path); err != nil {
			return fmt.Errorf("save settings of %s: %w", st.Path, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return s.wrap("save settings", err)
	}
	return nil
}

const metaLastSuccess = "ingest.last_success_at"

// LastSuccess returns when the ingester last read the broker successfully,
// or nil if it never has.
func (s *Store) LastSuccess(ctx context.Context) (*time.Time, error) {
	return s.lastSuccess(ctx, "")
}

// lastSuccessKey is the meta key of namespace ns's last successful read
// (the unnamed namespace keeps the key of the days of one namespace).
func lastSuccessKey(ns string) string {
	if ns == "" {
		return metaLastSuccess
	}
	return metaLastSuccess + "/" + ns
}

func (s *Store) lastSuccess(ctx context.Context, ns string) (*time.Time, error) {
	v, err := s.Meta(ctx, lastSuccessKey(ns))
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
