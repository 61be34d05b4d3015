-- 0013_message_properties: application properties in a form an index can
-- answer (issue 18).
--
-- A property filter (key = value) used to read each candidate row's JSON:
-- at a million messages a list filtered by two properties walked thousands
-- of rows per page. message_properties holds one row per top-level property
-- of every message whose properties are a JSON object, with the value as
-- the filter compares it: a string's characters, anything else its JSON
-- text (json_each's value for 'text', else properties -> fullkey), exactly
-- what the JSON check in read_filter.go computes. Values longer than 256
-- bytes are left out; a filter on such a value checks the JSON instead.
--
-- The primary key is the list's order within one (key, value): a page of a
-- property filter is a range of this one b-tree (at = coalesce(enqueued_at,
-- -1), the sort key of 0003, which never changes after insert), and a second
-- property is checked with one lookup of the whole key. There is no index on
-- message_id and no foreign key: the rows are found from the message's own
-- properties when it is deleted (PruneGone), and a cascade would need one.
CREATE TABLE message_properties (
	key        TEXT    NOT NULL,
	value      TEXT    NOT NULL,
	at         INTEGER NOT NULL,
	message_id INTEGER NOT NULL,
	PRIMARY KEY (key, value, at, message_id)
) STRICT, WITHOUT ROWID;

INSERT OR IGNORE INTO message_properties (key, value, at, message_id)
	SELECT key, value, at, id FROM (
		SELECT j.key AS key, CASE j.type WHEN 'text' THEN j.value ELSE m.properties -> j.fullkey END AS value,
			coalesce(m.enqueued_at, -1) AS at, m.id AS id
		FROM messages m, json_each(m.properties) j
		WHERE json_valid(m.properties) AND json_type(m.properties) = 'object')
	WHERE length(CAST(value AS BLOB)) <= 256
	ORDER BY 1, 2, 3, 4;
