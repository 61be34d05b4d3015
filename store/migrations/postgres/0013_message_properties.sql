-- 0013_message_properties (PostgreSQL twin of ../0013_message_properties.sql):
-- application properties as rows an index answers. The store writes them
-- from the properties it inserts (read_properties.go); the index on
-- message_id, which SQLite's table has not, lets retention delete a
-- message's rows without reading its JSON.
CREATE TABLE message_properties (
	key        text   COLLATE "C" NOT NULL,
	value      text   COLLATE "C" NOT NULL,
	at         bigint NOT NULL,
	message_id bigint NOT NULL,
	PRIMARY KEY (key, value, at, message_id)
);
CREATE INDEX message_properties_by_message ON message_properties (message_id);
-- The planner's estimate of a (key, value) pair's rows: without it
-- PostgreSQL multiplies the two columns' selectivities as if independent
-- (a value belongs to one key), underestimates a common pair, and sorts
-- all of its rows instead of walking the primary key in list order.
CREATE STATISTICS message_properties_key_value (mcv, dependencies) ON key, value FROM message_properties;
