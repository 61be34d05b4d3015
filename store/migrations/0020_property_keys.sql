-- 0020_property_keys: property rows only for the keys worth indexing
-- (issues 18 and 20; store/property_keys.go). The indexer learns, per key,
-- whether its values are (nearly) unique per message, and writes no rows
-- for such a key; a filter on it checks the JSON, narrowed by the search
-- index. On SQLite what it learned (property_keys, property_key_values)
-- lives in the index file beside the rows it describes, so it is rebuilt
-- with them: the index file's tables are created by Open (index_file.go's
-- indexSchema), not here. This migration is here so that version 20 means
-- the same schema on both engines.
SELECT 1;
