package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

var _ replay.Store = (*Store)(nil)

// Why a message was stored as skipped when its job was created.
const (
	skipGone        = "it had already left the broker when the job was created"
	skipScheduled   = "it is a scheduled message, not a dead letter: it is left alone"
	skipPoison      = "poison: its lineage was already replayed %d times or more (allow_poison replays it anyway)"
	skipCancelled   = "the job was cancelled before this message was sent; it is still in its queue"
	cancelledLocked = "the job was cancelled while this message's copy was being sent: the copy may or may not have " +
		"been sent, and the original is still in its queue"
	skipStopped = "the job ended (%s) before this message was sent; it is still in its queue"
)

// displayText is text a job record keeps for people to read (who created
// it, its reason and destination, a message's error, why it paused): valid
// UTF-8, each invalid byte sequence replaced by U+FFFD, so that every page
// and JSON answer shows what is stored. The catalog's own copies of message
// data keep their exact bytes; this is never applied to them.
func displayText(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// selectionWhere turns a replay selection into WHERE terms over messages m.
func selectionWhere(ctx context.Context, eng engine, q queryer, sel replay.Selection) (where []string, args []any, empty bool, err error) {
	switch {
	case sel.Filter != nil && len(sel.IDs) > 0:
		return nil, nil, false, &InvalidArgumentError{Param: "ids", Msg: "give ids or a filter, not both"}
	case sel.Filter != nil:
		c, err := compileFilter(ctx, eng, q, *sel.Filter)
		if err != nil {
			return nil, nil, false, err
		}
		if c.empty {
			return nil, nil, true, nil
		}
		where, args := c.scanWhere(eng)
		return where, args, false, nil
	case len(sel.IDs) > 0:
		return []string{"m.id IN (" + eng.jsonInts() + ")"}, []any{idList(sel.IDs)}, false, nil
	case sel.Entity != "":
		db := q
		q := sel.SubQueue
		if q == "" {
			q = dlq.SubQueueMain
		}
		code, err := subQueueCode(q)
		if err != nil {
			return nil, nil, false, &InvalidArgumentError{Param: "subqueue", Msg: err.Error()}
		}
		ids, err := entityIDs(ctx, db, sel.Namespace, sel.Entity)
		if err != nil {
			return nil, nil, false, err
		}
		switch {
		case len(ids) == 0:
			return nil, nil, false, &dlq.UnknownEntityError{Entity: sel.Entity}
		case len(ids) > 1:
			return nil, nil, false, &InvalidArgumentError{Param: "namespace", Msg: fmt.Sprintf(
				"%d namespaces have an entity %s: say which one with namespace", len(ids), sel.Entity)}
		}
		return []string{"m.entity_id = ?", "m.subqueue = ?",
				"m.sequence_number IN (" + eng.jsonInts() + ")", "m.gone_at IS NULL"},
			[]any{ids[0], code, idList(sel.SequenceNumbers)}, false, nil
	}
	return nil, nil, true, nil
}

// SummariseSelection implements replay.Store.
func (s *Store) SummariseSelection(ctx context.Context, sel replay.Selection, poisonCap, sample int) (replay.SelectionSummary, error) {
	var sum replay.SelectionSummary
	if sel.Filter != nil && usesIndexes(*sel.Filter) {
		if err := s.waitIndexed(ctx, -1); err != nil {
			return sum, fmt.Errorf("summarise selection: %w", err)
		}
	}
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return sum, fmt.Errorf("summarise selection: %w", err)
	}
	defer tx.Rollback()
	where, args, empty, err := selectionWhere(ctx, s.eng, tx, sel)
	if err != nil {
		return sum, fmt.Errorf("summarise selection: %w", err)
	}
	if empty {
		return sum, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT coalesce(e.namespace, ''), coalesce(e.path, ''), m.subqueue, count(*),
		sum(CASE WHEN m.gone_at IS NOT NULL THEN 1 ELSE 0 END), sum(CASE WHEN m.state = 2 THEN 1 ELSE 0 END),
		sum(CASE WHEN m.state = 1 THEN 1 ELSE 0 END), sum(CASE WHEN m.replay_count >= ? THEN 1 ELSE 0 END),
		sum(CASE WHEN EXISTS (SELECT 1 FROM job_messages jm WHERE jm.message_id = m.id AND jm.active = 1) THEN 1 ELSE 0 END),
		coalesce(min(m.time_to_live_ms), 0)
		FROM messages m LEFT JOIN entities e ON e.id = m.entity_id`+whereClause(where)+` GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
		append([]any{poisonCap}, args...)...)
	if err != nil {
		return sum, fmt.Errorf("summarise selection: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var src replay.SourceCount
		var sq, gone, sched, deferred, poison, inJobs int
		var minTTL int64
		if err := rows.Scan(&src.Namespace, &src.Entity, &sq, &src.Count, &gone, &sched, &deferred, &poison, &inJobs, &minTTL); err != nil {
			return sum, fmt.Errorf("summarise selection: %w", err)
		}
		src.SubQueue = subQueueOf(sq)
		sum.Sources = append(sum.Sources, src)
		sum.Total += src.Count
		sum.Gone += gone
		sum.Scheduled += sched
		sum.Deferred += deferred
		sum.Poison += poison
		sum.InJobs += inJobs
		if minTTL > 0 && (sum.MinTimeToLive == 0 || minTTL < sum.MinTimeToLive) {
			sum.MinTimeToLive = minTTL
		}
	}
	if err := rows.Err(); err != nil {
		return sum, fmt.Errorf("summarise selection: %w", err)
	}
	if sample > 0 && sum.Total > 0 {
		rows, err := tx.QueryContext(ctx, "SELECT "+recordColumns+" FROM messages m "+recordJoins+whereClause(where)+
			" ORDER BY m.id LIMIT ?", append(args, sample)...)
		if err != nil {
			return sum, fmt.Errorf("summarise selection: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanRecord(rows, false)
			if err != nil {
				return sum, fmt.Errorf("summarise selection: %w", err)
			}
			sum.Sample = append(sum.Sample, r)
		}
		if err := rows.Err(); err != nil {
			return sum, fmt.Errorf("summarise selection: %w", err)
		}
	}
	return sum, nil
}

// CreateJob implements replay.Store.
func (s *Store) CreateJob(ctx context.Context, j replay.Job, sel replay.Selection, poisonCap int) (replay.Job, error) {
	return s.CreateJobAudited(ctx, j, sel, poisonCap, nil)
}

// CreateJobAudited implements replay.Store: the job, its items and the
// audit entry entry makes from the job as created are one write
// transaction (on PostgreSQL holding the store's write lock, which
// serialises every replica's appends as AppendAudit's do), so a crash or
// an error between them leaves neither. A nil entry appends nothing.
func (s *Store) CreateJobAudited(ctx context.Context, j replay.Job, sel replay.Selection, poisonCap int,
	entry func(replay.Job) (audit.Build, error)) (replay.Job, error) {
	const op = "create job"
	indexTailToo := sel.Filter != nil && usesIndexes(*sel.Filter)
	if indexTailToo && !s.eng.postgres {
		defer s.holdIndexRuns()()
	}
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return j, s.wrap(op, err)
	}
	defer tx.Rollback()
	// The selection is frozen in this transaction, which holds the writer:
	// it indexes what the indexer has not yet itself (ingest_index.go), or
	// on PostgreSQL waits for the indexer (indexTailIn).
	if indexTailToo {
		if err := s.indexTailIn(ctx, tx); err != nil {
			return j, s.wrapBusy(op, err) // the indexer may hold the index file
		}
	}
	where, args, empty, err := selectionWhere(ctx, s.eng, tx, sel)
	if err != nil {
		return j, fmt.Errorf("%s: %w", op, err)
	}
	if empty {
		return j, &replay.PreconditionError{Msg: "the selection matches no messages"}
	}

	// Conflicts first, to name them.
	var conflict replay.ConflictError
	rows, err := tx.QueryContext(ctx, `SELECT jm.job_id, jm.message_id FROM messages m
		JOIN job_messages jm ON jm.message_id = m.id AND jm.active = 1`+whereClause(where), args...)
	if err != nil {
		return j, s.wrap(op, err)
	}
	seenJob := map[int64]bool{}
	for rows.Next() {
		var jobID, msgID int64
		if err := rows.Scan(&jobID, &msgID); err != nil {
			rows.Close()
			return j, s.wrap(op, err)
		}
		conflict.Count++
		if len(conflict.MessageIDs) < 10 {
			conflict.MessageIDs = append(conflict.MessageIDs, msgID)
		}
		if !seenJob[jobID] {
			seenJob[jobID] = true
			conflict.Jobs = append(conflict.Jobs, jobID)
		}
	}
	rows.Close()
	if conflict.Count > 0 {
		return j, &conflict
	}

	now := s.nowMillis()
	var filter any
	if len(j.Filter) > 0 {
		filter = string(j.Filter)
	}
	var edit any
	if sel.Edit != nil {
		b, err := json.Marshal(sel.Edit)
		if err != nil {
			return j, fmt.Errorf("%s: %w", op, err)
		}
		edit = string(b)
	}
	// A job acts on the messages of its namespace only (Submit checked that
	// the selection has no other; this keeps it so if one came since).
	where = append(where, "m.entity_id IN (SELECT id FROM entities WHERE namespace = ?)")
	args = append(args, j.Namespace)
	err = tx.QueryRowContext(ctx, `INSERT INTO jobs (action, status, created_at, created_by, destination, rate_per_second,
		scheduled_enqueue_at, reason, allow_poison, acknowledge_fan_out, filter,
		canary_count, canary_watch_ms, pause_on_redeadletter, ramp_ms, namespace, destination_namespace)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		string(j.Action), string(replay.StatusQueued), now, displayText(j.CreatedBy), displayText(j.Destination), j.RatePerSecond,
		millis(j.ScheduledEnqueueAt), displayText(j.Reason), j.AllowPoison, j.AcknowledgeFanOut, filter,
		j.Canary.Count, j.Canary.Watch.Milliseconds(), j.Canary.PauseOnRedeadletter, j.Canary.Ramp.Milliseconds(),
		j.Namespace, j.DestinationNamespace).Scan(&j.ID)
	if err != nil {
		return j, s.wrap(op, err)
	}
	poisonCheck := j.Action == replay.ActionReplay && !j.AllowPoison
	skip := `CASE WHEN m.gone_at IS NOT NULL THEN ? WHEN m.state = 2 THEN ? WHEN ? = 1 AND m.replay_count >= ? THEN ? ELSE '' END`
	skipArgs := []any{skipGone, skipScheduled, poisonCheck, poisonCap, fmt.Sprintf(skipPoison, poisonCap)}
	q := `INSERT INTO job_messages (job_id, message_id, entity, subqueue, state, sequence_number, original_message_id,
			item_state, error, active, edit, updated_at)
		SELECT ?, id, path, subqueue, state, sequence_number, message_id,
			CASE WHEN skip = '' THEN 'pending' ELSE 'skipped' END, skip, CASE WHEN skip = '' THEN 1 ELSE 0 END, ?, ?
		FROM (SELECT m.id, coalesce(e.path, '') AS path, m.subqueue, m.state, m.sequence_number,
			coalesce(m.message_id, '') AS message_id, ` + skip + ` AS skip
			FROM messages m LEFT JOIN entities e ON e.id = m.entity_id` + whereClause(where) + `) AS sel`
	qargs := append([]any{j.ID, edit, now}, skipArgs...)
	if _, err := tx.ExecContext(ctx, q, append(qargs, args...)...); err != nil {
		return j, s.wrap(op, err)
	}
	if err := setItemEdits(ctx, tx, j.ID, sel.Edits); err != nil {
		return j, fmt.Errorf("%s: %w", op, err)
	}
	if err := recountJob(ctx, tx, j.ID); err != nil {
		return j, s.wrap(op, err)
	}
	j, err = scanJob(tx.QueryRowContext(ctx, `SELECT `+s.eng.jobColumns()+` FROM jobs WHERE id = ?`, j.ID))
	if err != nil {
		return j, s.wrap(op, err)
	}
	if j.Total == 0 {
		return j, &replay.PreconditionError{Msg: "the selection matches no messages"}
	}
	if entry != nil {
		build, err := entry(j)
		if err != nil {
			return replay.Job{}, fmt.Errorf("%s: audit the creation: %w", op, err)
		}
		if err := s.testFault(faultBeforeCreationEntry); err != nil {
			return replay.Job{}, fmt.Errorf("%s: %w", op, err)
		}
		if _, err := appendAuditTx(ctx, s.eng, tx, build); err != nil {
			return replay.Job{}, s.wrap(op+": audit the creation", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return j, s.wrap(op, err)
	}
	return j, nil
}

// setItemEdits keeps each message's own edit with its item (a bulk edit).
func setItemEdits(ctx context.Context, tx *sql.Tx, jobID int64, edits map[int64]*replay.Edit) error {
	if len(edits) == 0 {
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, `UPDATE job_messages SET edit = ? WHERE job_id = ? AND message_id = ?`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for id, e := range edits {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if _, err := stmt.ExecContext(ctx, string(b), jobID, id); err != nil {
			return err
		}
	}
	return nil
}

// recountJob sets a job's counters from its items.
func recountJob(ctx context.Context, tx *sql.Tx, id int64) error {
	_, err := tx.ExecContext(ctx, `UPDATE jobs SET (total, pending, sent, completed, failed, skipped, cancelled, flagged) =
		(SELECT count(*), coalesce(sum(CASE WHEN item_state IN ('pending', 'locked') THEN 1 ELSE 0 END), 0),
			coalesce(sum(CASE WHEN item_state = 'sent' THEN 1 ELSE 0 END), 0),
			coalesce(sum(CASE WHEN item_state = 'completed' THEN 1 ELSE 0 END), 0),
			coalesce(sum(CASE WHEN item_state = 'failed' THEN 1 ELSE 0 END), 0),
			coalesce(sum(CASE WHEN item_state = 'skipped' THEN 1 ELSE 0 END), 0),
			coalesce(sum(CASE WHEN item_state = 'cancelled' THEN 1 ELSE 0 END), 0), coalesce(sum(flagged), 0)
		FROM job_messages WHERE job_id = ?) WHERE id = ?`, id, id)
	return err
}

const jobColumns = `id, action, status, created_at, created_by, destination, rate_per_second, scheduled_enqueue_at,
	reason, allow_poison, acknowledge_fan_out, filter, total, pending, sent, completed, failed, skipped, cancelled, flagged,
	paused_reason, last_error, retry_attempts, next_attempt_at, started_at, finished_at, namespace, destination_namespace, ` + jobCanaryColumns

func scanJob(row interface{ Scan(...any) error }) (replay.Job, error) {
	var (
		j                           replay.Job
		action, status              string
		created                     int64
		scheduled, started, finised *int64
		nextAttempt                 *int64
		filter                      *string
		c                           canaryRow
	)
	err := row.Scan(&j.ID, &action, &status, &created, &j.CreatedBy, &j.Destination, &j.RatePerSecond, &scheduled,
		&j.Reason, &j.AllowPoison, &j.AcknowledgeFanOut, &filter, &j.Total, &j.Counts.Pending, &j.Counts.Sent,
		&j.Counts.Completed, &j.Counts.Failed, &j.Counts.Skipped, &j.Counts.Cancelled, &j.Flagged, &j.PausedReason,
		&j.LastError, &j.RetryAttempts, &nextAttempt, &started, &finised, &j.Namespace, &j.DestinationNamespace,
		&c.redeadlettered, &c.reasons, &c.count, &c.watch, &c.pause, &c.ramp, &c.verdict, &c.sentBase, &c.backBase)
	if err != nil {
		return j, err
	}
	if err := c.into(&j); err != nil {
		return j, err
	}
	j.Action, j.Status = replay.Action(action), replay.Status(status)
	j.CreatedAt = time.UnixMilli(created).UTC()
	j.ScheduledEnqueueAt, j.StartedAt, j.FinishedAt = timeOf(scheduled), timeOf(started), timeOf(finised)
	j.NextAttemptAt = timeOf(nextAttempt)
	if filter != nil {
		j.Filter = json.RawMessage(*filter)
	}
	return j, nil
}

// Job implements replay.Store.
func (s *Store) Job(ctx context.Context, id int64) (replay.Job, error) {
	j, err := scanJob(s.reader.QueryRowContext(ctx, `SELECT `+s.eng.jobColumns()+` FROM jobs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return j, fmt.Errorf("job %d: %w", id, replay.ErrNotFound)
	}
	if err != nil {
		return j, fmt.Errorf("job %d: %w", id, err)
	}
	return j, nil
}

const jobCursorPrefix = "j"

func decodeIDCursor(prefix, cursor string) (int64, error) {
	if cursor == "" {
		return 0, nil
	}
	rest, ok := strings.CutPrefix(cursor, prefix)
	n, err := strconv.ParseInt(rest, 10, 64)
	if !ok || err != nil || n <= 0 {
		return 0, &InvalidArgumentError{Param: "cursor", Msg: "not a cursor this list returned: start again without it"}
	}
	return n, nil
}

func clampLimit(limit int) int {
	if limit <= 0 {
		return DefaultListLimit
	}
	return min(limit, MaxListLimit)
}

// ListJobs implements replay.Store.
func (s *Store) ListJobs(ctx context.Context, limit int, cursor string) ([]replay.Job, string, error) {
	return s.ListJobsIn(ctx, "", limit, cursor)
}

// ListJobsIn implements replay.Store: the jobs of namespace (the source
// messages'), every job when it is empty.
func (s *Store) ListJobsIn(ctx context.Context, namespace string, limit int, cursor string) ([]replay.Job, string, error) {
	limit = clampLimit(limit)
	after, err := decodeIDCursor(jobCursorPrefix, cursor)
	if err != nil {
		return nil, "", err
	}
	q := `SELECT ` + s.eng.jobColumns() + ` FROM jobs`
	var where []string
	args := []any{}
	if namespace != "" {
		where = append(where, "namespace = ?")
		args = append(args, namespace)
	}
	if after > 0 {
		where = append(where, "id < ?")
		args = append(args, after)
	}
	q += whereClause(where)
	page, err := readJobs(s.reader.QueryContext(ctx, q+` ORDER BY id DESC LIMIT ?`, append(args, limit+1)...))
	if err != nil {
		return nil, "", fmt.Errorf("list jobs: %w", err)
	}
	next := ""
	if len(page) > limit {
		page = page[:limit]
		next = jobCursorPrefix + strconv.FormatInt(page[limit-1].ID, 10)
	}
	return page, next, nil
}

// UnfinishedJobs implements replay.Store.
func (s *Store) UnfinishedJobs(ctx context.Context) ([]replay.Job, error) {
	js, err := readJobs(s.reader.QueryContext(ctx, `SELECT `+s.eng.jobColumns()+` FROM jobs `+s.eng.indexedBy("jobs_unfinished")+`
		WHERE status IN ('queued', 'running', 'retrying', 'cancelling') ORDER BY id`))
	if err != nil {
		return nil, fmt.Errorf("unfinished jobs: %w", err)
	}
	return js, nil
}

const itemColumns = `job_id, message_id, entity, subqueue, state, sequence_number, original_message_id, item_state,
	copy_message_id, error, flagged, edit, updated_at`

func scanItem(row interface{ Scan(...any) error }) (replay.Item, error) {
	var (
		it        replay.Item
		sq, st    int
		itemState string
		edit      *string
		updated   int64
	)
	if err := row.Scan(&it.JobID, &it.MessageID, &it.Entity, &sq, &st, &it.SequenceNumber, &it.OriginalMessageID,
		&itemState, &it.CopyMessageID, &it.Error, &it.Flagged, &edit, &updated); err != nil {
		return it, err
	}
	it.SubQueue, it.BrokerState, it.State = subQueueOf(sq), stateOf(st), replay.ItemState(itemState)
	it.UpdatedAt = time.UnixMilli(updated).UTC()
	if edit != nil {
		it.Edit = new(replay.Edit)
		if err := json.Unmarshal([]byte(*edit), it.Edit); err != nil {
			return it, fmt.Errorf("message %d's edit: %w", it.MessageID, err)
		}
	}
	return it, nil
}

// readItems reads job items; readJobs reads jobs.
func readItems(rows *sql.Rows, err error) ([]replay.Item, error) { return collect(rows, err, scanItem) }
func readJobs(rows *sql.Rows, err error) ([]replay.Job, error)   { return collect(rows, err, scanJob) }

// collect reads every row with scan; err is the query's.
func collect[T any](rows *sql.Rows, err error, scan func(interface{ Scan(...any) error }) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

const itemCursorPrefix = "i"

// ListItems implements replay.Store.
func (s *Store) ListItems(ctx context.Context, jobID int64, state replay.ItemState, limit int, cursor string) ([]replay.Item, string, error) {
	limit = clampLimit(limit)
	after, err := decodeIDCursor(itemCursorPrefix, cursor)
	if err != nil {
		return nil, "", err
	}
	q := `SELECT ` + itemColumns + ` FROM job_messages WHERE job_id = ? AND message_id > ?`
	args := []any{jobID, after}
	if state != "" {
		q += ` AND item_state = ?`
		args = append(args, string(state))
	}
	items, err := readItems(s.reader.QueryContext(ctx, q+` ORDER BY message_id LIMIT ?`, append(args, limit+1)...))
	if err != nil {
		return nil, "", fmt.Errorf("job %d's messages: %w", jobID, err)
	}
	next := ""
	if len(items) > limit {
		items = items[:limit]
		next = itemCursorPrefix + strconv.FormatInt(items[limit-1].MessageID, 10)
	}
	return items, next, nil
}

// UnfinishedItems implements replay.Store.
func (s *Store) UnfinishedItems(ctx context.Context, jobID int64) ([]replay.Item, error) {
	items, err := readItems(s.reader.QueryContext(ctx, `SELECT `+itemColumns+` FROM job_messages
		WHERE job_id = ? AND item_state IN ('pending', 'locked', 'sent') ORDER BY message_id`, jobID))
	if err != nil {
		return nil, fmt.Errorf("job %d's unfinished messages: %w", jobID, err)
	}
	return items, nil
}

// MessageHistory implements replay.Store.
func (s *Store) MessageHistory(ctx context.Context, messageID int64) ([]replay.Item, error) {
	items, err := readItems(s.reader.QueryContext(ctx, `SELECT `+itemColumns+` FROM job_messages
		WHERE message_id = ? ORDER BY job_id DESC`, messageID))
	if err != nil {
		return nil, fmt.Errorf("message %d's jobs: %w", messageID, err)
	}
	return items, nil
}

// bucket is the job counter an item state counts in.
func bucket(s replay.ItemState) int {
	switch s {
	case replay.ItemPending, replay.ItemLocked:
		return 0
	case replay.ItemSent:
		return 1
	case replay.ItemCompleted:
		return 2
	case replay.ItemFailed:
		return 3
	case replay.ItemCancelled:
		return 5
	}
	return 4 // skipped
}

// UpdateItems implements replay.Store.
//
// It writes each item once, with as few statements as the updates have
// distinct outcomes: a batch of the engine's (all locked with their copies'
// ids, all sent, or all completed) is one read of how many items are in
// which state, one UPDATE, the job's counters and the job read back, each
// prepared once (jobs_stmts.go). It used to be an UPDATE per item
// (BENCHMARKS.md, Replay). An item that stays unfinished keeps its place in
// the active set untouched (the unique partial index on active is then not
// rewritten).
func (s *Store) UpdateItems(ctx context.Context, jobID int64, ups []replay.Update) (replay.Job, error) {
	const op = "update job messages"
	js, err := s.prepareJobStatements(ctx)
	if err != nil {
		return replay.Job{}, s.wrap(op, err)
	}
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return replay.Job{}, s.wrap(op, err)
	}
	defer tx.Rollback()
	var delta [6]int
	flagged := 0
	groups, repeated := outcomeGroups(ups)
	if repeated {
		// An id given twice: apply the updates in order, from each item's
		// state, and group what each item becomes.
		if groups, err = s.finalGroups(ctx, tx.StmtContext(ctx, js.states), jobID, ups, &delta, &flagged); err != nil {
			return replay.Job{}, err
		}
	} else {
		// Each item has one update: count the group's items by state (the
		// unfinished ones, which are those its UPDATE moves).
		for _, g := range groups {
			if err := countGroup(ctx, tx.StmtContext(ctx, js.count), jobID, g, &delta, &flagged); err != nil {
				return replay.Job{}, s.wrap(op, err)
			}
		}
	}
	now := s.nowMillis()
	for _, g := range groups {
		st := js.set[b2i(g.k.st.Finished())][b2i(g.k.withCopy)]
		if _, err := tx.StmtContext(ctx, st).ExecContext(ctx, string(g.k.st), g.k.errText, g.k.flag, now,
			string(append(g.doc, ']')), jobID); err != nil {
			return replay.Job{}, s.wrap(op, err)
		}
	}
	if _, err := tx.StmtContext(ctx, js.counters).ExecContext(ctx, delta[0], delta[1], delta[2], delta[3], delta[4], delta[5],
		flagged, jobID); err != nil {
		return replay.Job{}, s.wrap(op, err)
	}
	return s.commitJobRow(tx, op, jobID, tx.StmtContext(ctx, js.job).QueryRowContext(ctx, jobID))
}

// outcome is what an UPDATE of UpdateItems sets.
type outcome struct {
	st       replay.ItemState
	errText  string
	flag     bool // ORed into the stored flag
	withCopy bool // each item's copy id is in the document
}

// outcomeGroup is the items of one outcome: their ids, and the document
// the UPDATE reads ([id, …], or [[id, copy id], …] withCopy; without the
// closing bracket).
type outcomeGroup struct {
	k   outcome
	ids []int64
	doc []byte
}

func (g *outcomeGroup) add(id int64, copyID string) {
	if len(g.doc) == 0 {
		g.doc = append(g.doc, '[')
	} else {
		g.doc = append(g.doc, ',')
	}
	g.ids = append(g.ids, id)
	if !g.k.withCopy {
		g.doc = strconv.AppendInt(g.doc, id, 10)
		return
	}
	g.doc = append(g.doc, '[')
	g.doc = strconv.AppendInt(g.doc, id, 10)
	g.doc = append(g.doc, ',')
	g.doc = appendJSONString(g.doc, copyID)
	g.doc = append(g.doc, ']')
}

// outcomeGroups groups updates by outcome, in order of first appearance;
// repeated reports an id given twice (then the groups are not usable).
func outcomeGroups(ups []replay.Update) (groups []*outcomeGroup, repeated bool) {
	seen := make(map[int64]struct{}, len(ups))
	index := map[outcome]*outcomeGroup{}
	for _, u := range ups {
		if _, ok := seen[u.MessageID]; ok {
			return nil, true
		}
		seen[u.MessageID] = struct{}{}
		k := outcome{u.State, displayText(u.Error), u.Flag, u.CopyMessageID != ""}
		g := index[k]
		if g == nil {
			g = &outcomeGroup{k: k}
			index[k] = g
			groups = append(groups, g)
		}
		g.add(u.MessageID, u.CopyMessageID)
	}
	return groups, false
}

// countGroup adds to the counters' deltas what moving g's unfinished items
// to its state changes.
func countGroup(ctx context.Context, stmt *sql.Stmt, jobID int64, g *outcomeGroup, delta *[6]int, flagged *int) error {
	rows, err := stmt.QueryContext(ctx, jobID, idList(g.ids))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var st replay.ItemState
		var n, unflagged int
		if err := rows.Scan(&st, &n, &unflagged); err != nil {
			return err
		}
		delta[bucket(st)] -= n
		delta[bucket(g.k.st)] += n
		if g.k.flag {
			*flagged += unflagged
		}
	}
	return rows.Err()
}

// finalGroups reads the items' states, applies the updates in order (the
// later update of an id over the earlier one, a finished item never moved
// again, flags accumulating, an empty copy id keeping the one before),
// adds the changes to the counters' deltas, and groups what each item
// becomes by outcome.
func (s *Store) finalGroups(ctx context.Context, states *sql.Stmt, jobID int64, ups []replay.Update, delta *[6]int,
	flagged *int) ([]*outcomeGroup, error) {
	const op = "update job messages"
	ids := make([]int64, len(ups))
	for i, u := range ups {
		ids[i] = u.MessageID
	}
	olds, err := itemStates(ctx, states, jobID, ids)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	type final struct {
		st      replay.ItemState
		copyID  string
		errText string
		flag    bool
	}
	finals := make(map[int64]*final, len(ups))
	var order []int64
	for _, u := range ups {
		o, ok := olds[u.MessageID]
		if !ok || o.state.Finished() {
			continue // not the job's, or finished: never moved again
		}
		f := finals[u.MessageID]
		if f == nil {
			f = &final{}
			finals[u.MessageID] = f
			order = append(order, u.MessageID)
		}
		f.st, f.errText, f.flag = u.State, displayText(u.Error), f.flag || u.Flag
		if u.CopyMessageID != "" {
			f.copyID = u.CopyMessageID
		}
		delta[bucket(o.state)]--
		delta[bucket(u.State)]++
		if u.Flag && !o.flagged {
			*flagged++
			o.flagged = true
		}
		olds[u.MessageID] = itemState{u.State, o.flagged}
	}
	var groups []*outcomeGroup
	index := map[outcome]*outcomeGroup{}
	for _, id := range order {
		f := finals[id]
		k := outcome{f.st, f.errText, f.flag, f.copyID != ""}
		g := index[k]
		if g == nil {
			g = &outcomeGroup{k: k}
			index[k] = g
			groups = append(groups, g)
		}
		g.add(id, f.copyID)
	}
	return groups, nil
}

// appendJSONString appends s to b as a JSON string. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does.
func appendJSONString(b []byte, s string) []byte {
	simple := utf8.ValidString(s)
	for i := 0; simple && i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			simple = false
		}
	}
	if simple {
		return append(append(append(b, '"'), s...), '"')
	}
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// itemState is what UpdateItems needs to know of an item before it moves it.
type itemState struct {
	state   replay.ItemState
	flagged bool
}

// itemStates reads the states of a job's items (those of ids that are the
// job's).
func itemStates(ctx context.Context, stmt *sql.Stmt, jobID int64, ids []int64) (map[int64]itemState, error) {
	rows, err := stmt.QueryContext(ctx, jobID, idList(ids))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int64]itemState, len(ids))
	for rows.Next() {
		var id int64
		var o itemState
		if err := rows.Scan(&id, &o.state, &o.flagged); err != nil {
			return nil, err
		}
		out[id] = o
	}
	return out, rows.Err()
}

// SetStatus implements replay.Store.
func (s *Store) SetStatus(ctx context.Context, jobID int64, st replay.Status, reason string, from ...replay.Status) (replay.Job, error) {
	return s.SetStatusAudited(ctx, jobID, st, reason, nil, from...)
}

// SetStatusAudited implements replay.Store: the status change and the
// audit entry entry makes from the job it leaves are one write
// transaction (on PostgreSQL holding the store's write lock, which
// serialises every replica's appends as AppendAudit's do), so a crash or
// an error between them leaves neither. A nil entry appends nothing.
func (s *Store) SetStatusAudited(ctx context.Context, jobID int64, st replay.Status, reason string,
	entry func(replay.Job) (audit.Build, error), from ...replay.Status) (replay.Job, error) {
	const op = "set job status"
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return replay.Job{}, s.wrap(op, err)
	}
	defer tx.Rollback()
	if len(from) > 0 {
		j, err := scanJob(tx.QueryRowContext(ctx, `SELECT `+s.eng.jobColumns()+` FROM jobs WHERE id = ?`, jobID))
		if errors.Is(err, sql.ErrNoRows) {
			return j, fmt.Errorf("job %d: %w", jobID, replay.ErrNotFound)
		}
		if err != nil {
			return j, s.wrap(op, err)
		}
		if !slices.Contains(from, j.Status) {
			return j, &replay.StatusError{ID: jobID, Status: j.Status, To: st}
		}
	}
	now := s.nowMillis()
	var started, finished any
	if st == replay.StatusRunning {
		started = now
	}
	if st.Finished() {
		finished = now
	}
	// Leaving running or retrying ends any retrying.
	res, err := tx.ExecContext(ctx, `UPDATE jobs SET status = ?, paused_reason = ?, started_at = coalesce(started_at, ?),
		finished_at = coalesce(?, finished_at), retry_attempts = 0, next_attempt_at = NULL WHERE id = ?`,
		string(st), displayText(reason), started, finished, jobID)
	if err != nil {
		return replay.Job{}, s.wrap(op, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return replay.Job{}, fmt.Errorf("job %d: %w", jobID, replay.ErrNotFound)
	}
	if st.Finished() {
		// Unsent messages are still in their queues: cancelled (skipped
		// when the job ended another way), and free to be selected again.
		// A message whose copy was sent keeps its state (the engine says
		// what is left to do in its error); one whose copy was being sent
		// when the job was cancelled fails, saying so.
		unsent, why := "skipped", fmt.Sprintf(skipStopped, st)
		if st == replay.StatusCancelled {
			unsent, why = "cancelled", skipCancelled
			if _, err := tx.ExecContext(ctx, `UPDATE job_messages SET item_state = 'failed', error = ?, updated_at = ?
				WHERE job_id = ? AND item_state = 'locked'`, cancelledLocked, now, jobID); err != nil {
				return replay.Job{}, s.wrap(op, err)
			}
		}
		if err := finishPending(ctx, tx, jobID, unsent, why, now); err != nil {
			return replay.Job{}, s.wrap(op, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE job_messages SET active = 0 WHERE job_id = ? AND active = 1`, jobID); err != nil {
			return replay.Job{}, s.wrap(op, err)
		}
		if err := recountJob(ctx, tx, jobID); err != nil {
			return replay.Job{}, s.wrap(op, err)
		}
	}
	j, err := scanJob(tx.QueryRowContext(ctx, `SELECT `+s.eng.jobColumns()+` FROM jobs WHERE id = ?`, jobID))
	if err != nil {
		return j, s.wrap(op, err)
	}
	if entry != nil {
		build, err := entry(j)
		if err != nil {
			return replay.Job{}, fmt.Errorf("%s: audit the change: %w", op, err)
		}
		if err := s.testFault(faultBeforeStatusEntry); err != nil {
			return replay.Job{}, fmt.Errorf("%s: %w", op, err)
		}
		if _, err := appendAuditTx(ctx, s.eng, tx, build); err != nil {
			return replay.Job{}, s.wrap(op+": audit the change", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return j, s.wrap(op, err)
	}
	return j, nil
}

// finishPending finishes a job's pending messages with one state and
// reason (they leave the active set); the caller recounts the job.
func finishPending(ctx context.Context, tx *sql.Tx, jobID int64, st, why string, now int64) error {
	_, err := tx.ExecContext(ctx, `UPDATE job_messages SET item_state = ?, error = ?, active = 0, updated_at = ?
		WHERE job_id = ? AND item_state = 'pending'`, st, why, now, jobID)
	return err
}

// CancelUnsent implements replay.Store.
func (s *Store) CancelUnsent(ctx context.Context, jobID int64) (replay.Job, error) {
	const op = "cancel unsent job messages"
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return replay.Job{}, s.wrap(op, err)
	}
	defer tx.Rollback()
	if err := finishPending(ctx, tx, jobID, string(replay.ItemCancelled), skipCancelled, s.nowMillis()); err != nil {
		return replay.Job{}, s.wrap(op, err)
	}
	if err := recountJob(ctx, tx, jobID); err != nil {
		return replay.Job{}, s.wrap(op, err)
	}
	return s.commitJob(ctx, tx, op, jobID)
}

// SetRetrying implements replay.Store.
func (s *Store) SetRetrying(ctx context.Context, jobID int64, rs *replay.Retrying) (replay.Job, error) {
	const op = "record job retrying"
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return replay.Job{}, s.wrap(op, err)
	}
	defer tx.Rollback()
	j, err := scanJob(tx.QueryRowContext(ctx, `SELECT `+s.eng.jobColumns()+` FROM jobs WHERE id = ?`, jobID))
	if errors.Is(err, sql.ErrNoRows) {
		return j, fmt.Errorf("job %d: %w", jobID, replay.ErrNotFound)
	}
	if err != nil {
		return j, s.wrap(op, err)
	}
	st := j.Status
	switch {
	case rs != nil && (st == replay.StatusRunning || st == replay.StatusRetrying):
		st = replay.StatusRetrying
	case rs == nil && st == replay.StatusRetrying:
		st = replay.StatusRunning
	case st == replay.StatusCancelling, rs == nil && st == replay.StatusRunning:
	default:
		to := replay.StatusRetrying
		if rs == nil {
			to = replay.StatusRunning
		}
		return j, &replay.StatusError{ID: jobID, Status: j.Status, To: to}
	}
	if rs != nil {
		_, err = tx.ExecContext(ctx, `UPDATE jobs SET status = ?, last_error = ?, retry_attempts = ?, next_attempt_at = ?
			WHERE id = ?`, string(st), rs.LastError, rs.Attempts, rs.NextAttemptAt.UnixMilli(), jobID)
	} else {
		_, err = tx.ExecContext(ctx, `UPDATE jobs SET status = ?, retry_attempts = 0, next_attempt_at = NULL WHERE id = ?`,
			string(st), jobID)
	}
	if err != nil {
		return j, s.wrap(op, err)
	}
	if j, err = scanJob(tx.QueryRowContext(ctx, `SELECT `+s.eng.jobColumns()+` FROM jobs WHERE id = ?`, jobID)); err != nil {
		return j, s.wrap(op, err)
	}
	if err := tx.Commit(); err != nil {
		return j, s.wrap(op, err)
	}
	return j, nil
}

// GoneMessages implements replay.Store.
func (s *Store) GoneMessages(ctx context.Context, ids []int64) (map[int64]bool, error) {
	gone := map[int64]bool{}
	if len(ids) == 0 {
		return gone, nil
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT id FROM messages WHERE id IN (`+s.eng.jsonInts()+`)
		AND gone_at IS NOT NULL`, idList(ids))
	if err != nil {
		return nil, fmt.Errorf("gone messages: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("gone messages: %w", err)
		}
		gone[id] = true
	}
	return gone, rows.Err()
}

// CopiesOf implements replay.Store.
func (s *Store) CopiesOf(ctx context.Context, messageIDs []string) ([]dlq.Record, error) {
	if len(messageIDs) == 0 {
		return nil, nil
	}
	list, err := json.Marshal(messageIDs)
	if err != nil {
		return nil, fmt.Errorf("copies: %w", err)
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT `+recordColumns+` FROM messages m `+s.eng.indexedBy("messages_copies")+` `+recordJoins+`
		WHERE m.replay_count > 0 AND m.message_id IN (`+s.eng.jsonTexts()+`) ORDER BY m.id`, string(list))
	if err != nil {
		return nil, fmt.Errorf("copies: %w", err)
	}
	defer rows.Close()
	var recs []dlq.Record
	for rows.Next() {
		r, err := scanRecord(rows, false)
		if err != nil {
			return nil, fmt.Errorf("copies: %w", err)
		}
		recs = append(recs, r)
	}
	return recs, rows.Err()
}

// commitJob reads job jobID back inside tx, as the write just left it, and
// commits: what every job write returns.
func (s *Store) commitJob(ctx context.Context, tx *sql.Tx, op string, jobID int64) (replay.Job, error) {
	return s.commitJobRow(tx, op, jobID, tx.QueryRowContext(ctx, `SELECT `+s.eng.jobColumns()+` FROM jobs WHERE id = ?`, jobID))
}

// commitJobRow is commitJob with the job's row already queried (by a
// prepared statement, say).
func (s *Store) commitJobRow(tx *sql.Tx, op string, jobID int64, row *sql.Row) (replay.Job, error) {
	j, err := scanJob(row)
	if errors.Is(err, sql.ErrNoRows) {
		return j, fmt.Errorf("job %d: %w", jobID, replay.ErrNotFound)
	}
	if err != nil {
		return j, s.wrap(op, err)
	}
	if err := tx.Commit(); err != nil {
		return j, s.wrap(op, err)
	}
	return j, nil
}
