-- 0012_search_bulk_merge: the search index merges wider and later (issue 18).
--
-- Every ingest transaction writes its terms to FTS5 as a new segment, and
-- FTS5 merged 16 segments of a level into one as soon as there were 16
-- (automerge 16 of 0004, and crisismerge's default of 16, which did almost
-- all the work: 13 % of the write side's CPU at 800,000 messages, with
-- stalls each time a higher level filled). A merge rewrites every term of
-- its segments, so how many times a message's terms are rewritten grows with
-- log16 of the catalog. Merging 64 at a time (crisismerge 64) rewrites them
-- about half as often at a million (measured in BENCHMARKS.md, issue 18),
-- and the lazy incremental merge (automerge) is off: the ingester's idle
-- 'merge' steps (MergeSearchIndex, whenever no entity is being read)
-- combine segments four at a time after a bulk read, so a search reads few
-- segments in steady state and at most 63 per level during a bulk read.
INSERT INTO messages_fts (messages_fts, rank) VALUES ('automerge', 0);
INSERT INTO messages_fts (messages_fts, rank) VALUES ('crisismerge', 64);
