-- 0004_search_merge: let the search index merge less eagerly.
--
-- FTS5 writes each transaction's terms as a new segment and, by default,
-- merges as soon as four segments of a level exist. At a million messages
-- that merging was a third of the ingester's write time. Sixteen (the
-- largest automerge value) halves the merge work per message; searches read
-- a few more segments (measured in BENCHMARKS.md).
INSERT INTO messages_fts (messages_fts, rank) VALUES ('automerge', 16);
