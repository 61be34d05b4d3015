-- 0003_read_indexes: indexes for the message list, newest first.
--
-- Lists sort by coalesce(enqueued_at, -1) DESC, id DESC (messages without an
-- enqueued time last) and page by keyset on that pair. Every index below
-- starts with one filter's column (or none) followed by that sort key, so a
-- page is a bounded range scan whichever index drives it; the queries in
-- read_filter.go spell the expression exactly as here, or SQLite would not
-- match it. The planner there picks the index whose filter value has the
-- fewest rows, from the counter tables.
--
-- Each index also carries the other filter columns (entity, subqueue, state,
-- group, gone_at) after the sort key: SQLite checks a row against them in
-- the index, and reads the table row only for a match. A walk past rows that
-- do not match (a combination of filters with few or no matches) then costs
-- a fraction of a microsecond per row instead of a table lookup each. A
-- reason filter is checked through group_id (a group has one reason).
--
-- The partial indexes cover the uncommon values only: a filter on a common
-- value (the dead_letter subqueue, the active state) walks the time index,
-- where matches are dense anyway.

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
