-- 0001_init: the first tables.
--
-- meta holds small facts about this database (key/value).
-- entities is the catalog's list of Service Bus entities (queues, topics,
-- subscriptions) that dlqdash has discovered; messages come in later
-- migrations. Times are INTEGER Unix milliseconds UTC.

CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) STRICT;

CREATE TABLE entities (
	id         INTEGER PRIMARY KEY,
	kind       TEXT    NOT NULL CHECK (kind IN ('queue', 'topic', 'subscription')),
	path       TEXT    NOT NULL UNIQUE,
	created_at INTEGER NOT NULL
) STRICT;
