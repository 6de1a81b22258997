-- QueueBox 0006: the relay keeps the order of one aggregate id across relays (mirrors
-- migrations/postgres/0006_inbox_active_aggregate.sql by number and name). The relay forwards an inbox row into the
-- outbox under its aggregate_id as key, and its claim leaves a row of an aggregate id pending while an earlier row of
-- the same source and aggregate id is pending or processing outside its batch (see
-- packages/store-sqlserver/src/inbox-claim.ts, claimRelayInboxStatement). This filtered index answers that check,
-- and finds the oldest active row of an aggregate id, by one seek to (source, aggregate_id) and its active ids only.
-- aggregate_id keeps the database's default collation (0003 made only topic, key, source and idempotency_key
-- binary), so the claim seeks with a plain = in the column's own collation and then compares exactly: binary
-- collation and equal byte lengths, as for outbox keys.
-- 400 + 900 + 8 bytes: within SQL Server's 1,700-byte limit for a nonclustered index key.

CREATE INDEX inbox_active_aggregate ON [$(schema)].[inbox] (source, aggregate_id, id)
  WHERE state IN (N'pending', N'processing') AND aggregate_id IS NOT NULL;
