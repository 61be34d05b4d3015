-- 0021_reason_through_groups (PostgreSQL twin of ../0021_reason_through_groups.sql):
-- messages_by_reason is dropped; a reason filter goes through the reason's
-- groups (messages_by_group), and messages_ungrouped_reason holds the only
-- messages with a reason and no group (a main queue's).
DROP INDEX IF EXISTS messages_by_reason;

CREATE INDEX messages_ungrouped_reason ON messages
	(dead_letter_reason, coalesce(enqueued_at, -1), id, entity_id, subqueue, state, gone_at)
	WHERE dead_letter_reason IS NOT NULL AND group_id IS NULL;
