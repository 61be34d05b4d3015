-- 0015_deferred_index: the search index and the property rows are written
-- behind the message rows (issue 18).
--
-- An ingest transaction writes the message rows and their bodies only; the
-- indexer (ingest_index.go) writes the search rows (messages_fts) and the
-- property rows (message_properties) of many transactions' messages at once,
-- in id order and in (key, value) order, so that FTS5 writes few large
-- segments and neighbouring property rows share pages. index.through is
-- its watermark: every message with an id at or below it is indexed, none
-- above it is. It is advanced in the same transaction as the index rows, so
-- after a crash the indexer resumes from it. New messages always get ids
-- above it (ingest_insert.go), even after the newest rows were pruned.
--
-- A catalog written before this migration indexed every message in its
-- ingest transaction: all of it is indexed.
INSERT INTO meta (key, value)
	SELECT 'index.through', CAST(coalesce(max(id), 0) AS TEXT) FROM messages;
