-- 0021_entity_reason_index (PostgreSQL twin of ../0021_entity_reason_index.sql):
-- an entity's messages of one dead-letter reason, in the list's order.
CREATE INDEX messages_by_entity_reason ON messages
	(entity_id, dead_letter_reason, coalesce(enqueued_at, -1), id, subqueue, state, group_id, gone_at)
	WHERE dead_letter_reason IS NOT NULL;
