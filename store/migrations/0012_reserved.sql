-- 0012_reserved: a placeholder on branch s22-i19triage only. Migration
-- number 0012 belongs to another branch of this session; this file keeps
-- the versions gap-free (loadMigrations requires it) until the merge, which
-- replaces it with the real 0012. It changes nothing.
SELECT 1;
