-- 0013_reserved: a placeholder on branch s22-i19triage only. Migration
-- number 0013 belongs to another branch of this session; this file keeps
-- the versions gap-free (loadMigrations requires it) until the merge, which
-- replaces it with the real 0013. It changes nothing.
SELECT 1;
