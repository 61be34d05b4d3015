-- 0003_read_indexes (PostgreSQL twin of ../0003_read_indexes.sql): the
-- message list's indexes, the same columns (PostgreSQL's planner chooses
-- among them; there is no INDEXED BY).
CREATE INDEX messages_by_time ON messages
	(coalesce(enqueued_at, -1), id, entity_id, subqueue, state, group_id, gone_at);

CREATE INDEX messages_by_entity ON messages
	(entity_id, coalesce(enqueued_at, -1), id, subqueue, state, group_id, gone_at);

CREATE INDEX messages_by_group ON messages
	(group_id, coalesce(enqueued_at, -1), id, entity_id, subqueue, state, gone_at)
	WHERE group_id IS NOT NULL;

CREATE INDEX messages_by_reason ON messages
	(dead_letter_reason, coalesce(enqueued_at, -1), id, entity_id, subqueue, state, gone_at)
	WHERE dead_letter_reason IS NOT NULL;

CREATE INDEX messages_by_state ON messages
	(state, coalesce(enqueued_at, -1), id, entity_id, subqueue, group_id, gone_at)
	WHERE state <> 0;

CREATE INDEX messages_by_subqueue ON messages
	(subqueue, coalesce(enqueued_at, -1), id, entity_id, state, group_id, gone_at)
	WHERE subqueue <> 1;
