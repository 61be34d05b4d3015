-- 0019_index_file: the search index (messages_fts) and the property rows
-- (message_properties) live in the index file beside the catalog
-- (<db>-index, attached as idx and written by the indexer's own
-- connection; store/index_file.go, issue 18). The catalog's own copies are
-- dropped and its watermark removed; Open writes the index file again from
-- the messages behind a new watermark. Open's separateIndexes does the same
-- on every start; this migration is here so that the schema version says
-- the catalog moved, and an older dlqdash refuses it as too new instead of
-- failing on the missing tables.
--
-- The main. prefix matters: with the index file attached, an unqualified
-- name could resolve to the index file's table.
DROP TABLE IF EXISTS main.messages_fts;
DROP TABLE IF EXISTS main.message_properties;
DELETE FROM main.meta WHERE key = 'index.through';
