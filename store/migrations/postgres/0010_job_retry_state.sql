-- 0010_job_retry_state (PostgreSQL twin of ../0010_job_retry_state.sql).
ALTER TABLE jobs ADD COLUMN cancelled bigint NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN last_error text NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN retry_attempts bigint NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN next_attempt_at bigint;

DROP INDEX jobs_unfinished;
CREATE INDEX jobs_unfinished ON jobs (id) WHERE status IN ('queued', 'running', 'retrying', 'cancelling');

ALTER TABLE job_messages DROP CONSTRAINT job_messages_item_state_check;
ALTER TABLE job_messages ADD CONSTRAINT job_messages_item_state_check
    CHECK (item_state IN ('pending', 'locked', 'sent', 'completed', 'failed', 'skipped', 'cancelled'));
