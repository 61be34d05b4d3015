-- 0019_index_file: the twin of the SQLite migration that moves the search
-- index and the property rows to the index file beside a SQLite catalog
-- (issue 18). PostgreSQL keeps them in its one database, written behind
-- the same watermark, so nothing changes here; the file exists so that
-- version 19 means the same schema on both engines.
SELECT 1;
