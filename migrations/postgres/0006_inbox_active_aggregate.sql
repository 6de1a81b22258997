-- QueueBox 0006: the relay keeps the order of one aggregate id across replicas and crashes (mirrors
-- migrations/sqlserver/0006_inbox_active_aggregate.sql by number and name). The relay forwards an inbox row into the
-- outbox under its aggregate_id as key; its claim now takes a row with an aggregate id only when no row of the same
-- source and aggregate id with a smaller id is pending or processing (see packages/store-postgres/src/inbox-claim.ts,
-- aggregateHead). This index answers that NOT EXISTS by a seek to (source, aggregate_id) and its active ids only.
-- The index is built inside the migration's transaction (as in 0004), which blocks writes to the inbox for one
-- scan of it. Names are unqualified: the migrator sets search_path to the configured schema.

CREATE INDEX inbox_active_aggregate ON inbox (source, aggregate_id, id)
  WHERE state IN ('pending', 'processing') AND aggregate_id IS NOT NULL;
