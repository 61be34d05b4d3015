-- 0017_job_sources: which job reads each entity's subqueue (package replay).
--
-- A job that scans a dead-letter queue leaves the messages it did not
-- select locked for as long as it reads the queue, so two jobs reading one
-- queue at once each hold the other's messages out of sight, and the one
-- that gives up waiting reported them failed. One row per (namespace,
-- entity, subqueue) names the one job reading it; another job waits for it
-- (saying so). term is the job's claim term when replicas share the store
-- (0 alone), so that a run whose claim was adopted cannot let go of the
-- hold its successor took; holder is the store's process token
-- (Store.HoldSource says when a hold is alive). Times are Unix ms UTC.
CREATE TABLE job_sources (
    namespace TEXT    NOT NULL,
    entity    TEXT    NOT NULL,
    subqueue  INTEGER NOT NULL,
    job_id    INTEGER NOT NULL,
    term      INTEGER NOT NULL,
    holder    TEXT    NOT NULL,
    held_at   INTEGER NOT NULL,
    PRIMARY KEY (namespace, entity, subqueue)
) STRICT, WITHOUT ROWID;
