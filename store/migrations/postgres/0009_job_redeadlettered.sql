-- 0009_job_redeadlettered (PostgreSQL twin of ../0009_job_redeadlettered.sql):
-- a job's copies seen dead-lettered again, counted by a trigger at insert.
ALTER TABLE jobs ADD COLUMN redeadlettered bigint NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN canary_count bigint NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN canary_watch_ms bigint NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN pause_on_redeadletter double precision;
ALTER TABLE jobs ADD COLUMN ramp_ms bigint NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN canary_verdict text NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN guard_sent_base bigint NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN guard_redeadlettered_base bigint NOT NULL DEFAULT 0;

CREATE TABLE job_redeadlettered (
    job_id bigint NOT NULL REFERENCES jobs (id),
    reason text   COLLATE "C" NOT NULL,
    count  bigint NOT NULL,
    PRIMARY KEY (job_id, reason)
);

-- dlqdash_json_text is the text of a top-level field of a JSON object held
-- as text: a string's characters, anything else its JSON text; NULL when
-- the text is not JSON, not an object, or lacks the field (SQLite's
-- json_valid and json_extract, as the store uses them).
CREATE FUNCTION dlqdash_json_text(doc text, field text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    j json;
BEGIN
    BEGIN
        j := doc::json;
    EXCEPTION WHEN others THEN
        RETURN NULL;
    END;
    IF json_typeof(j) <> 'object' THEN
        RETURN NULL;
    END IF;
    IF json_typeof(j -> field) = 'string' THEN
        RETURN j ->> field;
    END IF;
    RETURN (j -> field)::text;
END
$$;

-- dlqdash_integer is SQLite's CAST(t AS INTEGER): the leading integer of
-- the text, 0 when it has none.
CREATE FUNCTION dlqdash_integer(t text) RETURNS bigint
    LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce((substring(t FROM '^\s*([-+]?[0-9]{1,18})'))::bigint, 0)
$$;

CREATE FUNCTION messages_redeadlettered() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    job bigint := dlqdash_integer(dlqdash_json_text(NEW.properties, 'dlqdash.job_id'));
BEGIN
    UPDATE jobs SET redeadlettered = redeadlettered + 1 WHERE id = job;
    INSERT INTO job_redeadlettered (job_id, reason, count)
        SELECT id, coalesce(NEW.dead_letter_reason, ''), 1 FROM jobs WHERE id = job
        ON CONFLICT (job_id, reason) DO UPDATE SET count = job_redeadlettered.count + 1;
    RETURN NULL;
END
$$;

CREATE TRIGGER messages_redeadlettered AFTER INSERT ON messages FOR EACH ROW
    WHEN (NEW.replay_count > 0 AND NEW.subqueue IN (1, 2)
        AND dlqdash_json_text(NEW.properties, 'dlqdash.job_id') IS NOT NULL)
    EXECUTE FUNCTION messages_redeadlettered();
