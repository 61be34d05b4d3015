-- 0005_scheduled_index: the scheduled inventory lists messages soonest due
-- first; without an index on the due time SQLite sorted every scheduled
-- message for each page (138 ms at a million messages).
CREATE INDEX messages_by_due ON messages (state, coalesce(scheduled_enqueue_at, -1), id) WHERE state <> 0;
