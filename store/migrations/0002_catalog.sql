-- 0002_catalog: the message catalog.
--
-- entities gains what the ingester reads about each entity: its broker
-- counts (as last read), settings, and when it was noticed deleted.
-- cursors is the ingester's resumable read state per (entity, subqueue).
-- messages holds one row per message copy the catalog has seen; bodies keeps
-- the bytes apart so that list scans stay narrow. groups and group_entities
-- are the failure groups with counters kept incrementally; catalog_counts
-- holds present-message counts per (entity, subqueue, state) so no page
-- counts by scanning. messages_fts is a contentless FTS5 index (rowid =
-- messages.id) over body text, reason, description and properties.
-- depth_samples are broker counts over time for the charts.
--
-- Codes: subqueue 0 main, 1 dead_letter, 2 transfer_dead_letter;
-- state 0 active, 1 deferred, 2 scheduled. Times are Unix ms UTC.

ALTER TABLE entities ADD COLUMN topic TEXT NOT NULL DEFAULT '';
ALTER TABLE entities ADD COLUMN status TEXT NOT NULL DEFAULT 'Active';
ALTER TABLE entities ADD COLUMN settings TEXT NOT NULL DEFAULT '{}';
ALTER TABLE entities ADD COLUMN active_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE entities ADD COLUMN dead_letter_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE entities ADD COLUMN transfer_dead_letter_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE entities ADD COLUMN scheduled_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE entities ADD COLUMN counts_at INTEGER;
ALTER TABLE entities ADD COLUMN deleted_at INTEGER;

CREATE TABLE cursors (
	entity_id        INTEGER NOT NULL REFERENCES entities (id),
	subqueue         INTEGER NOT NULL CHECK (subqueue IN (0, 1, 2)),
	-- nothing new can arrive below floor (see package dlq)
	floor            INTEGER NOT NULL DEFAULT 0,
	max_seen         INTEGER NOT NULL DEFAULT -1,
	-- the broker's count for this subqueue when the last pass ended
	broker_count     INTEGER NOT NULL DEFAULT -1,
	-- lowest active or deferred sequence number seen by the last main pass
	main_low         INTEGER NOT NULL DEFAULT 0,
	last_pass_at     INTEGER,
	last_full_at     INTEGER,
	full_duration_ms INTEGER NOT NULL DEFAULT 0,
	last_error       TEXT,
	PRIMARY KEY (entity_id, subqueue)
) STRICT, WITHOUT ROWID;

CREATE TABLE groups (
	id                  INTEGER PRIMARY KEY,
	key                 TEXT    NOT NULL UNIQUE,
	reason              TEXT    NOT NULL,
	description_pattern TEXT    NOT NULL,
	present             INTEGER NOT NULL DEFAULT 0,
	total               INTEGER NOT NULL DEFAULT 0,
	first_seen_at       INTEGER NOT NULL,
	last_seen_at        INTEGER NOT NULL
) STRICT;

CREATE TABLE group_entities (
	group_id      INTEGER NOT NULL REFERENCES groups (id),
	entity_id     INTEGER NOT NULL REFERENCES entities (id),
	present       INTEGER NOT NULL DEFAULT 0,
	total         INTEGER NOT NULL DEFAULT 0,
	first_seen_at INTEGER NOT NULL,
	last_seen_at  INTEGER NOT NULL,
	PRIMARY KEY (group_id, entity_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE messages (
	id                   INTEGER PRIMARY KEY,
	entity_id            INTEGER NOT NULL REFERENCES entities (id),
	subqueue             INTEGER NOT NULL CHECK (subqueue IN (0, 1, 2)),
	state                INTEGER NOT NULL CHECK (state IN (0, 1, 2)),
	sequence_number      INTEGER NOT NULL,
	message_id           TEXT,
	correlation_id       TEXT,
	session_id           TEXT,
	partition_key        TEXT,
	subject              TEXT,
	content_type         TEXT,
	reply_to             TEXT,
	reply_to_session_id  TEXT,
	to_address           TEXT,
	dead_letter_reason   TEXT,
	dead_letter_description TEXT,
	dead_letter_source   TEXT,
	delivery_count       INTEGER NOT NULL,
	enqueued_at          INTEGER,
	scheduled_enqueue_at INTEGER,
	expires_at           INTEGER,
	time_to_live_ms      INTEGER,
	properties           TEXT    NOT NULL DEFAULT '{}',
	body_size            INTEGER NOT NULL,
	-- the first few hundred characters of a text body, for lists
	body_preview         TEXT    NOT NULL DEFAULT '',
	group_id             INTEGER REFERENCES groups (id),
	first_seen_at        INTEGER NOT NULL,
	last_seen_at         INTEGER NOT NULL,
	gone_at              INTEGER,
	replay_count         INTEGER NOT NULL DEFAULT 0
) STRICT;

-- One present copy per (entity, subqueue, sequence number): this is what
-- makes re-reads idempotent. Gone copies are history and may repeat (an
-- entity deleted and created again starts numbering at 1).
CREATE UNIQUE INDEX messages_present
	ON messages (entity_id, subqueue, sequence_number) WHERE gone_at IS NULL;
-- Retention finds gone messages by age.
CREATE INDEX messages_gone ON messages (gone_at) WHERE gone_at IS NOT NULL;

CREATE TABLE bodies (
	message_id INTEGER PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
	body       BLOB NOT NULL
) STRICT;

CREATE TABLE catalog_counts (
	entity_id INTEGER NOT NULL REFERENCES entities (id),
	subqueue  INTEGER NOT NULL,
	state     INTEGER NOT NULL,
	present   INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (entity_id, subqueue, state)
) STRICT, WITHOUT ROWID;

CREATE TABLE depth_samples (
	entity_id                  INTEGER NOT NULL REFERENCES entities (id),
	at                         INTEGER NOT NULL,
	active_count               INTEGER NOT NULL,
	dead_letter_count          INTEGER NOT NULL,
	transfer_dead_letter_count INTEGER NOT NULL,
	scheduled_count            INTEGER NOT NULL,
	PRIMARY KEY (entity_id, at)
) STRICT, WITHOUT ROWID;

CREATE VIRTUAL TABLE messages_fts USING fts5 (
	body, reason, description, properties,
	content = '', contentless_delete = 1,
	tokenize = 'unicode61 remove_diacritics 2'
);
