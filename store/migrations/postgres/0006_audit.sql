-- 0006_audit (PostgreSQL twin of ../0006_audit.sql): the audit trail,
-- append-only through triggers.
CREATE TABLE audit_log (
    seq         bigint PRIMARY KEY,
    at          bigint NOT NULL,
    actor       text   NOT NULL,
    action      text   NOT NULL,
    params      text   NOT NULL,
    message_ids text   NOT NULL,
    outcome     text   NOT NULL,
    prev_hash   text   NOT NULL,
    hash        text   NOT NULL
);

CREATE INDEX audit_by_actor ON audit_log (actor, seq);
CREATE INDEX audit_by_action ON audit_log (action, seq);
CREATE INDEX audit_by_at ON audit_log (at, seq);

CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only';
END
$$;

CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
