-- 0021_entity_reason_index: an index for an entity's messages of one
-- dead-letter reason (issue 18).
--
-- An entity with a reason filter is the triage page's most common list. It
-- used to be driven by messages_by_reason or messages_by_entity, whichever
-- value had fewer rows, checking the other in the index. When the two have
-- few messages in common, that walk goes through every row of the smaller
-- value: a reason with 400,000 messages in another queue cost 2.6 s at p99
-- for a list with 51 matches (BENCHMARKS.md). This index finds those
-- matches directly, in the list's order, like the others of
-- 0003_read_indexes.sql (the filter's columns, then the sort key, then the
-- other filter columns, checked in the index). The planner in
-- read_filter.go counts its rows from group_entities.
CREATE INDEX messages_by_entity_reason ON messages
	(entity_id, dead_letter_reason, coalesce(enqueued_at, -1), id, subqueue, state, group_id, gone_at)
	WHERE dead_letter_reason IS NOT NULL;
