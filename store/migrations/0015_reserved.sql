-- 0015_reserved: a placeholder so that 0017 applies on this branch; the
-- number is issue 18's (ingest speed). Replace this file with that branch's
-- migration when merging: it changes nothing.
SELECT 1;
