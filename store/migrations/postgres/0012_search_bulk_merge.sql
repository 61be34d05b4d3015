-- 0012_search_bulk_merge (PostgreSQL twin of ../0012_search_bulk_merge.sql):
-- FTS5's merge settings have no PostgreSQL equivalent.
SELECT 1;
