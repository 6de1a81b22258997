-- QueueBox 0004: the (state, updated_at) indexes hold terminal rows only. Retention (purge of sent/processed and
-- dead rows by age) and the admin views of dead rows read them; pending and processing rows have partial indexes
-- of their own (due, active key, lease). As full indexes, every claim (pending -> processing) and every retry
-- (processing -> pending) also wrote an entry into them, one more index write per row on the hot path.
-- The indexes are rebuilt inside the migration's transaction, which blocks writes to the table for one scan of
-- it. Names are unqualified: the migrator sets search_path to the configured schema.

DROP INDEX outbox_state_updated;
CREATE INDEX outbox_state_updated ON outbox (state, updated_at) WHERE state NOT IN ('pending', 'processing');

DROP INDEX inbox_state_updated;
CREATE INDEX inbox_state_updated ON inbox (state, updated_at) WHERE state NOT IN ('pending', 'processing');
