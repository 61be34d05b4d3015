-- 0015_deferred_index (PostgreSQL twin of ../0015_deferred_index.sql): the
-- watermark of the search and property rows, index.through.
--
-- On SQLite an indexer writes those rows behind the ingest and moves the
-- watermark. On PostgreSQL the ingest writes them in the transaction that
-- inserts the messages (insertMessages) and moves the watermark in it too,
-- so it is always the newest message's id: reads never wait for it, and
-- it keeps the meaning it has on SQLite (every message at or below it is
-- indexed, none above; new messages get ids above it).
INSERT INTO meta (key, value)
	SELECT 'index.through', CAST(coalesce(max(id), 0) AS text) FROM messages
	ON CONFLICT (key) DO NOTHING;
