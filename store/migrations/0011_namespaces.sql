-- dlqdash:foreign-keys-off
-- 0011_namespaces: several Service Bus namespaces in one catalog (issue 17).
--
-- An entity is (namespace, path): the same queue name in two namespaces is
-- two entities, so entities is rebuilt for its new unique key (path alone
-- was UNIQUE). Rows cataloged before this migration get the namespace '':
-- the name of the single namespace they came from is not known in SQL. The
-- program adopts them on start (Store.AdoptUnnamed: '' becomes the first
-- configured namespace's name), so nothing is read twice. Messages, cursors,
-- groups' per-entity counters and depth samples reach their namespace
-- through their entity; failure groups stay namespace-wide (the same
-- failure in two namespaces is one group, counted per namespace through
-- group_entities).
--
-- jobs gains namespace (the source messages' namespace) and
-- destination_namespace ('' when the copies go back to the source's).
CREATE TABLE entities_new (
	id                         INTEGER PRIMARY KEY,
	namespace                  TEXT    NOT NULL DEFAULT '',
	kind                       TEXT    NOT NULL CHECK (kind IN ('queue', 'topic', 'subscription')),
	path                       TEXT    NOT NULL,
	created_at                 INTEGER NOT NULL,
	topic                      TEXT    NOT NULL DEFAULT '',
	status                     TEXT    NOT NULL DEFAULT 'Active',
	settings                   TEXT    NOT NULL DEFAULT '{}',
	active_count               INTEGER NOT NULL DEFAULT 0,
	dead_letter_count          INTEGER NOT NULL DEFAULT 0,
	transfer_dead_letter_count INTEGER NOT NULL DEFAULT 0,
	scheduled_count            INTEGER NOT NULL DEFAULT 0,
	counts_at                  INTEGER,
	deleted_at                 INTEGER,
	UNIQUE (namespace, path)
) STRICT;

INSERT INTO entities_new (id, namespace, kind, path, created_at, topic, status, settings, active_count,
		dead_letter_count, transfer_dead_letter_count, scheduled_count, counts_at, deleted_at)
	SELECT id, '', kind, path, created_at, topic, status, settings, active_count,
		dead_letter_count, transfer_dead_letter_count, scheduled_count, counts_at, deleted_at
	FROM entities;
DROP TABLE entities;
ALTER TABLE entities_new RENAME TO entities;
-- A filter by entity path without a namespace.
CREATE INDEX entities_by_path ON entities (path);

ALTER TABLE jobs ADD COLUMN namespace TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN destination_namespace TEXT NOT NULL DEFAULT '';
CREATE INDEX jobs_by_namespace ON jobs (namespace, id);
