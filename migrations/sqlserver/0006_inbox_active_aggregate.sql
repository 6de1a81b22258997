-- QueueBox 0006: the relay keeps the order of one aggregate id across replicas and crashes (mirrors
-- migrations/postgres/0006_inbox_active_aggregate.sql by number and name). The relay forwards an inbox row into the
-- outbox under its aggregate_id as key; its claim now takes a row with an aggregate id only when no row of the same
-- source and aggregate id with a smaller id is pending or processing (see packages/store-sqlserver/src/inbox-claim.ts,
-- aggregateHead). This filtered index answers that NOT EXISTS by a seek to (source, aggregate_id) and its active ids
-- only. aggregate_id keeps the database's default collation (0003 made only topic, key, source and idempotency_key
-- binary), so the claim seeks on the column's own collation and then compares exactly: binary collation and equal
-- byte lengths, as for outbox keys.
-- 400 + 900 + 8 bytes: within SQL Server's 1,700-byte limit for a nonclustered index key.

CREATE INDEX inbox_active_aggregate ON [$(schema)].[inbox] (source, aggregate_id, id)
  WHERE state IN (N'pending', N'processing') AND aggregate_id IS NOT NULL;
