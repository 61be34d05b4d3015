-- 0012: reserved for issue 18's ingest branch (its migration 0012). This
-- placeholder keeps the versions without gaps on the read branch; at the
-- merge the ingest branch's 0012 replaces it (delete this file).
SELECT 1;
