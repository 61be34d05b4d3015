-- 0021_reason_through_groups: messages_by_reason is dropped (issue 18, the
-- ingest's half).
--
-- It was the widest of the list indexes every new message adds an entry to
-- (its entries carry the reason's text), and a reason filter can be
-- answered without it: a dead letter's failure group is derived from its
-- reason, so the messages of a reason are those of the reason's groups,
-- which messages_by_group holds in list order (read_filter.go drives a
-- reason with one group through it, and checks a reason against group_id
-- in whichever index drives otherwise).
--
-- The only messages with a reason and no group are those of a main queue
-- or subscription (GroupOf gives them none): a message resubmitted with the
-- dead-lettering properties copied. messages_ungrouped_reason holds those
-- alone, so that a reason filter still finds them; a dead letter adds no
-- entry to it.
DROP INDEX IF EXISTS messages_by_reason;

CREATE INDEX messages_ungrouped_reason ON messages
	(dead_letter_reason, coalesce(enqueued_at, -1), id, entity_id, subqueue, state, gone_at)
	WHERE dead_letter_reason IS NOT NULL AND group_id IS NULL;
