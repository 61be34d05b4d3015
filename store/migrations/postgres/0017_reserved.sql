-- 0017_reserved (PostgreSQL twin of ../0017_reserved.sql): a placeholder
-- for another branch's 0017; delete it at the merge.
SELECT 1;
