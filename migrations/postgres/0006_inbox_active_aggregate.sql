-- QueueBox 0006: the relay keeps the order of one aggregate id across relays (mirrors
-- migrations/sqlserver/0006_inbox_active_aggregate.sql by number and name). The relay forwards an inbox row into the
-- outbox under its aggregate_id as key, and its claim leaves a row of an aggregate id pending while an earlier row of
-- the same source and aggregate id is pending or processing outside its batch (see
-- packages/store-postgres/src/inbox-claim.ts, relayClaimCtes). This index answers that check, and finds the oldest
-- active row of an aggregate id, by one descent to (source, aggregate_id) and its active ids only.
-- The index is built inside the migration's transaction (as in 0004), which blocks writes to the inbox for one
-- scan of it. Names are unqualified: the migrator sets search_path to the configured schema.

CREATE INDEX inbox_active_aggregate ON inbox (source, aggregate_id, id)
  WHERE state IN ('pending', 'processing') AND aggregate_id IS NOT NULL;
