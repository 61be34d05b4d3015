-- 0020_property_keys (PostgreSQL twin of ../0020_property_keys.sql):
-- property rows only for the keys worth indexing (issues 18 and 20;
-- store/property_keys.go). property_keys: per key, the messages the
-- indexer sampled with it (seen) and its decision (indexed: NULL while
-- undecided, 1 rows, 0 no rows) with its time (decided_at, Unix ms);
-- property_key_values: the distinct values
-- sampled of the undecided keys (a bounded sample, deleted at the
-- decision). On SQLite both live in the index file; here beside the rows.
CREATE TABLE property_keys (
	key     text    COLLATE "C" PRIMARY KEY,
	seen    bigint  NOT NULL DEFAULT 0,
	indexed integer,
	decided_at bigint
);
CREATE TABLE property_key_values (
	key   text COLLATE "C" NOT NULL,
	value text COLLATE "C" NOT NULL,
	PRIMARY KEY (key, value)
);
