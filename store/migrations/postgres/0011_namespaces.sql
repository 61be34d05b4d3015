-- 0011_namespaces (PostgreSQL twin of ../0011_namespaces.sql): an entity is
-- (namespace, path). No rebuild is needed: PostgreSQL changes the unique
-- key in place.
ALTER TABLE entities ADD COLUMN namespace text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE entities DROP CONSTRAINT entities_path_key;
ALTER TABLE entities ADD CONSTRAINT entities_namespace_path_key UNIQUE (namespace, path);
CREATE INDEX entities_by_path ON entities (path);

ALTER TABLE jobs ADD COLUMN namespace text NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN destination_namespace text NOT NULL DEFAULT '';
CREATE INDEX jobs_by_namespace ON jobs (namespace, id);
