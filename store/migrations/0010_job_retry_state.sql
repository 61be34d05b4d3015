-- 0010_job_retry_state: a job says when it is retrying a failing broker, and
-- a cancel counts the messages it left unsent as cancelled (issue 15).
--
-- jobs gains what the engine knows while it retries: the last error (in
-- words), how many attempts the failing call has had and when the next one
-- is (Unix ms UTC), and the cancelled counter. The new status 'retrying' is
-- unfinished, so the partial index the engine's adoption query uses covers
-- it. job_messages is rebuilt for its CHECK constraint: 'cancelled' is a
-- final item state.
ALTER TABLE jobs ADD COLUMN cancelled INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN last_error TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN retry_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN next_attempt_at INTEGER;

DROP INDEX jobs_unfinished;
CREATE INDEX jobs_unfinished ON jobs (id) WHERE status IN ('queued', 'running', 'retrying', 'cancelling');

CREATE TABLE job_messages_new (
    job_id              INTEGER NOT NULL REFERENCES jobs (id),
    message_id          INTEGER NOT NULL,
    entity              TEXT    NOT NULL,
    subqueue            INTEGER NOT NULL,
    state               INTEGER NOT NULL,
    sequence_number     INTEGER NOT NULL,
    original_message_id TEXT    NOT NULL DEFAULT '',
    item_state          TEXT    NOT NULL DEFAULT 'pending'
        CHECK (item_state IN ('pending', 'locked', 'sent', 'completed', 'failed', 'skipped', 'cancelled')),
    copy_message_id     TEXT    NOT NULL DEFAULT '',
    error               TEXT    NOT NULL DEFAULT '',
    flagged             INTEGER NOT NULL DEFAULT 0,
    edit                TEXT,
    active              INTEGER NOT NULL DEFAULT 1,
    updated_at          INTEGER NOT NULL,
    PRIMARY KEY (job_id, message_id)
) STRICT, WITHOUT ROWID;

INSERT INTO job_messages_new SELECT job_id, message_id, entity, subqueue, state, sequence_number, original_message_id,
    item_state, copy_message_id, error, flagged, edit, active, updated_at FROM job_messages;
DROP TABLE job_messages;
ALTER TABLE job_messages_new RENAME TO job_messages;
CREATE UNIQUE INDEX job_messages_active ON job_messages (message_id) WHERE active = 1;
CREATE INDEX job_messages_by_message ON job_messages (message_id, job_id);
