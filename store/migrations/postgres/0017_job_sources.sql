-- 0017_job_sources (PostgreSQL twin of ../0017_job_sources.sql): which job
-- reads each entity's subqueue, so that jobs on one queue run one at a time
-- across every replica.
CREATE TABLE job_sources (
    namespace text   NOT NULL,
    entity    text   NOT NULL,
    subqueue  bigint NOT NULL,
    job_id    bigint NOT NULL,
    term      bigint NOT NULL,
    holder    text   NOT NULL,
    held_at   bigint NOT NULL,
    PRIMARY KEY (namespace, entity, subqueue)
);
