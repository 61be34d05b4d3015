-- 0007_jobs: replay and discard jobs (package replay).
--
-- jobs holds one row per job with its counters, kept by the same
-- transactions that change its messages' states. job_messages is the
-- per-message state machine: pending → locked → sent → completed, or failed
-- / skipped; each state is written before the broker call that follows it.
-- active is 1 while the message is unfinished in an unfinished job: the
-- unique index makes "a message is in at most one active job" a constraint.
-- Times are Unix ms UTC.
CREATE TABLE jobs (
    id                   INTEGER PRIMARY KEY,
    action               TEXT    NOT NULL CHECK (action IN ('replay', 'discard')),
    status               TEXT    NOT NULL,
    created_at           INTEGER NOT NULL,
    created_by           TEXT    NOT NULL,
    destination          TEXT    NOT NULL DEFAULT '',
    rate_per_second      REAL    NOT NULL DEFAULT 0,
    scheduled_enqueue_at INTEGER,
    reason               TEXT    NOT NULL DEFAULT '',
    allow_poison         INTEGER NOT NULL DEFAULT 0,
    acknowledge_fan_out  INTEGER NOT NULL DEFAULT 0,
    filter               TEXT,
    total                INTEGER NOT NULL DEFAULT 0,
    pending              INTEGER NOT NULL DEFAULT 0,
    sent                 INTEGER NOT NULL DEFAULT 0,
    completed            INTEGER NOT NULL DEFAULT 0,
    failed               INTEGER NOT NULL DEFAULT 0,
    skipped              INTEGER NOT NULL DEFAULT 0,
    flagged              INTEGER NOT NULL DEFAULT 0,
    paused_reason        TEXT    NOT NULL DEFAULT '',
    started_at           INTEGER,
    finished_at          INTEGER
) STRICT;

CREATE INDEX jobs_unfinished ON jobs (id) WHERE status IN ('queued', 'running', 'cancelling');

CREATE TABLE job_messages (
    job_id              INTEGER NOT NULL REFERENCES jobs (id),
    message_id          INTEGER NOT NULL,
    entity              TEXT    NOT NULL,
    subqueue            INTEGER NOT NULL,
    state               INTEGER NOT NULL,
    sequence_number     INTEGER NOT NULL,
    original_message_id TEXT    NOT NULL DEFAULT '',
    item_state          TEXT    NOT NULL DEFAULT 'pending'
        CHECK (item_state IN ('pending', 'locked', 'sent', 'completed', 'failed', 'skipped')),
    copy_message_id     TEXT    NOT NULL DEFAULT '',
    error               TEXT    NOT NULL DEFAULT '',
    flagged             INTEGER NOT NULL DEFAULT 0,
    edit                TEXT,
    active              INTEGER NOT NULL DEFAULT 1,
    updated_at          INTEGER NOT NULL,
    PRIMARY KEY (job_id, message_id)
) STRICT, WITHOUT ROWID;

CREATE UNIQUE INDEX job_messages_active ON job_messages (message_id) WHERE active = 1;
-- A message's history: every job it was in.
CREATE INDEX job_messages_by_message ON job_messages (message_id, job_id);
-- What became of a copy: a replayed copy carries dlqdash.replay_count, which
-- the catalog keeps in replay_count, so only copies are in this index (it
-- costs the ingest of ordinary dead letters nothing).
CREATE INDEX messages_copies ON messages (message_id) WHERE replay_count > 0;
