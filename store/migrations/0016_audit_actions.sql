-- 0016_audit_actions: the audit trail read one row per action (issue 19).
--
-- A replay job writes an audit entry per batch of messages (replay,
-- discard, message_failed, ...): thousands of entries for one job's one
-- action. audit_actions groups them for the audit page, one row per
-- action: the entries of one job with the same action, outcome and actor
-- are one action (group_key); every other entry (a job's creation, its
-- completion, a sign-in, a triage change) is an action of its own
-- (group_key NULL). An action's id is the seq of its first entry;
-- audit_action_entries lists its entries.
--
-- Both tables are derived, read-side only: the store fills them in the
-- transaction that appends each entry (store/audit_actions.go, with
-- audit.Describe: the same rules as the view below, which indexes the trail
-- kept so far), and audit_log (the hash chain) is not touched. A tampered
-- entry whose params or message_ids are not JSON is still indexed, naming
-- no job or namespace and no messages.
CREATE TABLE audit_actions (
    id                    INTEGER PRIMARY KEY, -- the seq of its first entry
    group_key             TEXT UNIQUE,         -- NULL: an action of one entry
    last_seq              INTEGER NOT NULL,
    first_at              INTEGER NOT NULL,
    last_at               INTEGER NOT NULL,
    actor                 TEXT    NOT NULL,
    action                TEXT    NOT NULL,
    outcome               TEXT    NOT NULL,
    job_id                TEXT,
    namespace             TEXT,
    destination_namespace TEXT,
    entries               INTEGER NOT NULL,
    messages              INTEGER NOT NULL
) STRICT;

CREATE INDEX audit_actions_by_job ON audit_actions (job_id, id) WHERE job_id IS NOT NULL;
CREATE INDEX audit_actions_by_actor ON audit_actions (actor, id);
CREATE INDEX audit_actions_by_action ON audit_actions (action, id);
CREATE INDEX audit_actions_by_namespace ON audit_actions (namespace, id);
CREATE INDEX audit_actions_by_destination ON audit_actions (destination_namespace, id)
    WHERE destination_namespace IS NOT NULL;

CREATE TABLE audit_action_entries (
    action_id INTEGER NOT NULL,
    seq       INTEGER NOT NULL,
    PRIMARY KEY (action_id, seq)
) STRICT, WITHOUT ROWID;

-- audit_log_index is each entry's part of an action, as the backfill below
-- reads it (audit.Describe is the same in Go).
CREATE VIEW audit_log_index AS
SELECT seq, at, actor, action, outcome, job_id, namespace, destination_namespace, messages,
       CASE WHEN job_id IS NOT NULL AND action IN ('replay', 'discard', 'deferred_resolved',
                 'message_failed', 'message_skipped', 'message_flagged')
            THEN 'job:' || job_id || ':' || action || ':' || outcome || ':' || actor
       END AS group_key
FROM (SELECT seq, at, actor, action, outcome,
             CASE WHEN json_valid(params) AND json_type(params, '$.job_id') = 'text'
                  THEN nullif(json_extract(params, '$.job_id'), '') END AS job_id,
             CASE WHEN json_valid(params) AND json_type(params, '$.namespace') = 'text'
                  THEN nullif(json_extract(params, '$.namespace'), '') END AS namespace,
             CASE WHEN json_valid(params) AND json_type(params, '$.destination_namespace') = 'text'
                  THEN nullif(json_extract(params, '$.destination_namespace'), '') END AS destination_namespace,
             CASE WHEN json_valid(message_ids) AND json_type(message_ids) = 'array'
                  THEN json_array_length(message_ids) ELSE 0 END AS messages
      FROM audit_log);

-- The trail kept so far.
INSERT INTO audit_actions (id, group_key, last_seq, first_at, last_at, actor, action, outcome,
                           job_id, namespace, destination_namespace, entries, messages)
SELECT min(seq), group_key, max(seq), min(at), max(at), actor, action, outcome,
       job_id, namespace, destination_namespace, count(*), sum(messages)
FROM audit_log_index
GROUP BY coalesce(group_key, 'seq:' || seq);

INSERT INTO audit_action_entries (action_id, seq)
SELECT coalesce(a.id, l.seq), l.seq
FROM audit_log_index l LEFT JOIN audit_actions a ON a.group_key = l.group_key;

DROP VIEW audit_log_index;
