-- 0014_group_triage: failure groups with triage state, and alerts (issue 19).
--
-- A group gets a name ('' means the one generated from its reason and
-- description pattern), a status (new, investigating, known, resolved), an
-- owner and notes; status_changed_at is when the status last changed (NULL:
-- never, it has been new since the group appeared).
--
-- A resolved group that receives new dead letters (its total grows: the
-- catalog inserts each message once) goes back to new. The trigger does it
-- in the catalog's own write, so the ingest path needs no change, and
-- records the reopening in group_reopenings; the alert loop turns each into
-- an audit entry (group_reopened) and marks it audited. reopened_at is the
-- latest reopening, shown on the group's page.
ALTER TABLE groups ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE groups ADD COLUMN status TEXT NOT NULL DEFAULT 'new'
	CHECK (status IN ('new', 'investigating', 'known', 'resolved'));
ALTER TABLE groups ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE groups ADD COLUMN notes TEXT NOT NULL DEFAULT '';
ALTER TABLE groups ADD COLUMN status_changed_at INTEGER;
ALTER TABLE groups ADD COLUMN reopened_at INTEGER;

CREATE TABLE group_reopenings (
	id       INTEGER PRIMARY KEY,
	group_id INTEGER NOT NULL REFERENCES groups (id),
	at       INTEGER NOT NULL,
	added    INTEGER NOT NULL, -- dead letters that reopened it
	audited  INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX group_reopenings_unaudited ON group_reopenings (id) WHERE audited = 0;

CREATE TRIGGER groups_reopen AFTER UPDATE OF total ON groups
	WHEN old.status = 'resolved' AND new.total > old.total
BEGIN
	UPDATE groups SET status = 'new',
		status_changed_at = CAST(unixepoch('subsec') * 1000 AS INTEGER),
		reopened_at = CAST(unixepoch('subsec') * 1000 AS INTEGER)
		WHERE id = new.id;
	INSERT INTO group_reopenings (group_id, at, added)
		VALUES (new.id, CAST(unixepoch('subsec') * 1000 AS INTEGER), new.total - old.total);
END;

-- Alert webhooks added on the Alerts page (those of the config file are not
-- stored). url is a secret: the dashboard shows only host after saving and
-- never logs it. events is a comma-separated list of the event names;
-- growth_per_minute and untriaged_after_ms are the thresholds of the
-- group_growth and untriaged events; base_url is where links point (the
-- origin of the page it was added on, unless --public-url is set).
CREATE TABLE alert_webhooks (
	id                 INTEGER PRIMARY KEY,
	name               TEXT    NOT NULL,
	url                TEXT    NOT NULL,
	host               TEXT    NOT NULL,
	format             TEXT    NOT NULL CHECK (format IN ('generic', 'slack', 'teams')),
	events             TEXT    NOT NULL,
	growth_per_minute  INTEGER NOT NULL DEFAULT 0,
	untriaged_after_ms INTEGER NOT NULL DEFAULT 0,
	base_url           TEXT    NOT NULL DEFAULT '',
	created_at         INTEGER NOT NULL,
	created_by         TEXT    NOT NULL,
	deleted_at         INTEGER
) STRICT;

-- What was sent, when, and what the webhook answered. webhook is
-- 'ui:<id>' or 'config:<name>'; subject is the group key or the job id.
CREATE TABLE alert_deliveries (
	id            INTEGER PRIMARY KEY,
	at            INTEGER NOT NULL,
	webhook       TEXT    NOT NULL,
	webhook_name  TEXT    NOT NULL,
	host          TEXT    NOT NULL,
	format        TEXT    NOT NULL,
	event         TEXT    NOT NULL,
	subject       TEXT    NOT NULL,
	title         TEXT    NOT NULL,
	link          TEXT    NOT NULL,
	status_code   INTEGER,
	error         TEXT    NOT NULL DEFAULT '',
	attempts      INTEGER NOT NULL
) STRICT;
CREATE INDEX alert_deliveries_by_subject ON alert_deliveries (webhook, event, subject, at);

-- The newest group the alert loop has considered for the new_group event:
-- groups cataloged before this migration are not new.
CREATE TABLE alert_cursor (
	id       INTEGER PRIMARY KEY CHECK (id = 1),
	group_id INTEGER NOT NULL
) STRICT;
INSERT INTO alert_cursor (id, group_id) SELECT 1, coalesce(max(id), 0) FROM groups;
