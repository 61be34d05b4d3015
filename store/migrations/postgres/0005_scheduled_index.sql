-- 0005_scheduled_index (PostgreSQL twin of ../0005_scheduled_index.sql).
CREATE INDEX messages_by_due ON messages (state, coalesce(scheduled_enqueue_at, -1), id) WHERE state <> 0;
