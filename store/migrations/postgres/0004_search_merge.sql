-- 0004_search_merge (PostgreSQL twin of ../0004_search_merge.sql): FTS5's
-- merge setting has no PostgreSQL equivalent (the GIN index's pending list
-- is cleaned by MergeSearchIndex and autovacuum).
SELECT 1;
