-- 0006_audit: the audit trail (package audit). Entries are numbered by the
-- appender (last seq + 1, in one IMMEDIATE transaction) and hash-chained;
-- the triggers make the table append-only, so only someone editing the file
-- itself can change an entry, and `dlqdash audit verify` then shows it.
-- Times are Unix milliseconds UTC; params is canonical JSON (an object);
-- message_ids a JSON array of catalog ids.
CREATE TABLE audit_log (
    seq         INTEGER PRIMARY KEY,
    at          INTEGER NOT NULL,
    actor       TEXT    NOT NULL,
    action      TEXT    NOT NULL,
    params      TEXT    NOT NULL,
    message_ids TEXT    NOT NULL,
    outcome     TEXT    NOT NULL,
    prev_hash   TEXT    NOT NULL,
    hash        TEXT    NOT NULL
) STRICT;

CREATE INDEX audit_by_actor ON audit_log (actor, seq);
CREATE INDEX audit_by_action ON audit_log (action, seq);
CREATE INDEX audit_by_at ON audit_log (at, seq);

CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;

CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;
