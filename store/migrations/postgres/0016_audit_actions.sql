-- 0016_audit_actions (PostgreSQL twin of ../0016_audit_actions.sql): the
-- audit trail read one row per action (issue 19). See the SQLite file for
-- what an action is; the store fills both tables in the transaction that
-- appends each entry (store/audit_actions.go), and the backfill below
-- indexes a trail kept before this migration (a PostgreSQL catalog of
-- schema 14 or 15) with the same rules.
CREATE TABLE audit_actions (
    id                    bigint PRIMARY KEY, -- the seq of its first entry
    group_key             text UNIQUE,        -- NULL: an action of one entry
    last_seq              bigint NOT NULL,
    first_at              bigint NOT NULL,
    last_at               bigint NOT NULL,
    actor                 text   NOT NULL,
    action                text   NOT NULL,
    outcome               text   NOT NULL,
    job_id                text,
    namespace             text,
    destination_namespace text,
    entries               bigint NOT NULL,
    messages              bigint NOT NULL
);

CREATE INDEX audit_actions_by_job ON audit_actions (job_id, id) WHERE job_id IS NOT NULL;
CREATE INDEX audit_actions_by_actor ON audit_actions (actor, id);
CREATE INDEX audit_actions_by_action ON audit_actions (action, id);
CREATE INDEX audit_actions_by_namespace ON audit_actions (namespace, id);
CREATE INDEX audit_actions_by_destination ON audit_actions (destination_namespace, id)
    WHERE destination_namespace IS NOT NULL;

CREATE TABLE audit_action_entries (
    action_id bigint NOT NULL,
    seq       bigint NOT NULL,
    PRIMARY KEY (action_id, seq)
);

-- dlqdash_json_string is a top-level string field of a JSON object held as
-- text; NULL when the text is not JSON, not an object, or its field is
-- missing or not a string (SQLite's json_valid, json_type = 'text' and
-- json_extract, as the SQLite migration uses them).
CREATE FUNCTION dlqdash_json_string(doc text, field text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    j json;
BEGIN
    BEGIN
        j := doc::json;
    EXCEPTION WHEN others THEN
        RETURN NULL;
    END;
    IF json_typeof(j) <> 'object' OR json_typeof(j -> field) IS DISTINCT FROM 'string' THEN
        RETURN NULL;
    END IF;
    RETURN j ->> field;
END
$$;

-- dlqdash_json_array is text holding a JSON array as json; an empty array
-- when it is not JSON or not an array (an entry's message_ids).
CREATE FUNCTION dlqdash_json_array(doc text) RETURNS json
    LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    j json;
BEGIN
    BEGIN
        j := doc::json;
    EXCEPTION WHEN others THEN
        RETURN '[]'::json;
    END;
    IF json_typeof(j) <> 'array' THEN
        RETURN '[]'::json;
    END IF;
    RETURN j;
END
$$;

-- audit_log_index is each entry's part of an action, as the backfill below
-- reads it (audit.Describe is the same in Go).
CREATE VIEW audit_log_index AS
SELECT seq, at, actor, action, outcome, job_id, namespace, destination_namespace, messages,
       CASE WHEN job_id IS NOT NULL AND action IN ('replay', 'discard', 'deferred_resolved',
                 'message_failed', 'message_skipped', 'message_flagged')
            THEN 'job:' || job_id || ':' || action || ':' || outcome || ':' || actor
       END AS group_key
FROM (SELECT seq, at, actor, action, outcome,
             nullif(dlqdash_json_string(params, 'job_id'), '') AS job_id,
             nullif(dlqdash_json_string(params, 'namespace'), '') AS namespace,
             nullif(dlqdash_json_string(params, 'destination_namespace'), '') AS destination_namespace,
             json_array_length(dlqdash_json_array(message_ids)) AS messages
      FROM audit_log) AS entries;

-- The trail kept so far. An action's namespaces are its first entry's, as
-- the store records them.
INSERT INTO audit_actions (id, group_key, last_seq, first_at, last_at, actor, action, outcome,
                           job_id, namespace, destination_namespace, entries, messages)
SELECT min(seq), min(group_key), max(seq), min(at), max(at),
       (array_agg(actor ORDER BY seq))[1], (array_agg(action ORDER BY seq))[1], (array_agg(outcome ORDER BY seq))[1],
       (array_agg(job_id ORDER BY seq))[1], (array_agg(namespace ORDER BY seq))[1],
       (array_agg(destination_namespace ORDER BY seq))[1], count(*), sum(messages)
FROM audit_log_index
GROUP BY coalesce(group_key, 'seq:' || seq);

INSERT INTO audit_action_entries (action_id, seq)
SELECT coalesce(a.id, l.seq), l.seq
FROM audit_log_index l LEFT JOIN audit_actions a ON a.group_key = l.group_key;

DROP VIEW audit_log_index;
