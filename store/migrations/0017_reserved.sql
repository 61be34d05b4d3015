-- 0017 is assigned to another branch of issue 20 (replay jobs across
-- replicas). This file only keeps the versions contiguous on the branch
-- that adds 0018: when the branches are merged, delete it (and its
-- PostgreSQL twin) in favour of that branch's 0017.
SELECT 1;
