-- 0009_job_redeadlettered: honest outcomes, and the canary and ramp options.
--
-- A replayed copy carries the application property dlqdash.job_id. When the
-- catalog inserts a dead-lettered message (subqueue 1 or 2) that carries it,
-- the trigger below counts it for that job: jobs.redeadlettered, and per new
-- reason in job_redeadlettered. The catalog inserts a message once (a page
-- seen again updates the row), so each copy counts once; the counters stay
-- when the copy later goes or retention removes it ("as cataloged").
--
-- canary_count, canary_watch_ms, pause_on_redeadletter (NULL: off) and
-- ramp_ms are the job's options; canary_verdict is '' until the canary was
-- judged, then 'passed' or 'failed'; guard_sent_base and
-- guard_redeadlettered_base are where the pause_on_redeadletter share starts
-- counting (moved when the guard pauses the job, so that a resume judges
-- the copies sent after it).
ALTER TABLE jobs ADD COLUMN redeadlettered INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN canary_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN canary_watch_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN pause_on_redeadletter REAL;
ALTER TABLE jobs ADD COLUMN ramp_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN canary_verdict TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN guard_sent_base INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN guard_redeadlettered_base INTEGER NOT NULL DEFAULT 0;

CREATE TABLE job_redeadlettered (
    job_id INTEGER NOT NULL REFERENCES jobs (id),
    reason TEXT    NOT NULL,
    count  INTEGER NOT NULL,
    PRIMARY KEY (job_id, reason)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER messages_redeadlettered AFTER INSERT ON messages
WHEN NEW.replay_count > 0 AND NEW.subqueue IN (1, 2)
    AND json_extract(NEW.properties, '$."dlqdash.job_id"') IS NOT NULL
BEGIN
    UPDATE jobs SET redeadlettered = redeadlettered + 1
        WHERE id = CAST(json_extract(NEW.properties, '$."dlqdash.job_id"') AS INTEGER);
    INSERT INTO job_redeadlettered (job_id, reason, count)
        SELECT id, coalesce(NEW.dead_letter_reason, ''), 1 FROM jobs
        WHERE id = CAST(json_extract(NEW.properties, '$."dlqdash.job_id"') AS INTEGER)
        ON CONFLICT (job_id, reason) DO UPDATE SET count = count + 1;
END;

-- Copies cataloged before this migration.
INSERT INTO job_redeadlettered (job_id, reason, count)
    SELECT j.id, coalesce(m.dead_letter_reason, ''), count(*)
    FROM messages m
    JOIN jobs j ON j.id = CAST(json_extract(m.properties, '$."dlqdash.job_id"') AS INTEGER)
    WHERE m.replay_count > 0 AND m.subqueue IN (1, 2)
    GROUP BY 1, 2;
UPDATE jobs SET redeadlettered = (SELECT coalesce(sum(count), 0) FROM job_redeadlettered r WHERE r.job_id = jobs.id);
