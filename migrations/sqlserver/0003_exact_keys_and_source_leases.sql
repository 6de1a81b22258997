-- QueueBox 0003: text keys compare as on PostgreSQL, one JSON value per payload, and the lease index per source
-- (mirrors migrations/postgres/0003_exact_keys_and_source_leases.sql by number and name).
--
-- 1. Binary collation. The default collation of an en-US install and of a new Azure SQL database
--    (SQL_Latin1_General_CP1_CI_AS) is case-insensitive, so ('stripe', 'Ab1') was a duplicate of ('stripe', 'ab1')
--    and the keys K and k shared one ordering chain while their application locks differed. topic, key, source and
--    idempotency_key now use Latin1_General_100_BIN2: equal means the same UTF-16 code units, as PostgreSQL's
--    deterministic collations compare. A column's collation cannot change while an index or constraint uses it,
--    so those are dropped first and built again at the end.
-- 2. Trailing spaces. T-SQL pads the shorter operand with spaces before comparing (in every collation, binary
--    ones included), so 'ab1' = 'ab1 ' holds. The unique key therefore also holds the byte length of source and
--    idempotency_key (persisted computed columns), and the statements compare lengths where they compare keys.
-- 3. Payload check. ISJSON(N'[' + payload + N']') = 1 also held for '' and '1,2' (zero or two values). A text is
--    exactly one JSON value when it is one inside [ ] (a list of values) and also the value of a member in
--    {"v": … } (one value, then nothing but ", name: value" could follow, which [ ] refuses). ISJSON(x, VALUE)
--    would say it directly, but its type constraint exists only from SQL Server 2022 on. The check is added WITH NOCHECK: rows stored
--    before are not re-read (a scan of every payload), and a claim dead-letters such a row alone.
-- 4. inbox_lease is keyed (source, lease_until), so a reclaim or takeover of some sources seeks their expired
--    rows only, instead of reading (and U-locking) the expired rows of every source.

DROP INDEX outbox_due_unkeyed ON [$(schema)].[outbox];
DROP INDEX outbox_active_key ON [$(schema)].[outbox];
ALTER TABLE [$(schema)].[inbox] DROP CONSTRAINT inbox_source_idempotency_key_uq;
DROP INDEX inbox_due ON [$(schema)].[inbox];
DROP INDEX inbox_lease ON [$(schema)].[inbox];
GO

ALTER TABLE [$(schema)].[outbox] ALTER COLUMN topic NVARCHAR(400) COLLATE Latin1_General_100_BIN2 NOT NULL;
ALTER TABLE [$(schema)].[outbox] ALTER COLUMN [key] NVARCHAR(450) COLLATE Latin1_General_100_BIN2 NULL;
ALTER TABLE [$(schema)].[inbox] ALTER COLUMN source NVARCHAR(200) COLLATE Latin1_General_100_BIN2 NOT NULL;
ALTER TABLE [$(schema)].[inbox] ALTER COLUMN idempotency_key NVARCHAR(600) COLLATE Latin1_General_100_BIN2 NOT NULL;
ALTER TABLE [$(schema)].[inbox] ADD source_bytes AS DATALENGTH(source) PERSISTED NOT NULL;
ALTER TABLE [$(schema)].[inbox] ADD idempotency_key_bytes AS DATALENGTH(idempotency_key) PERSISTED NOT NULL;
ALTER TABLE [$(schema)].[outbox] DROP CONSTRAINT outbox_payload_json_ck;
ALTER TABLE [$(schema)].[inbox] DROP CONSTRAINT inbox_payload_json_ck;
GO

ALTER TABLE [$(schema)].[outbox] WITH NOCHECK ADD CONSTRAINT outbox_payload_json_ck
  CHECK (ISJSON(N'[' + payload + N']') = 1 AND ISJSON(N'{"v":' + payload + N'}') = 1);
ALTER TABLE [$(schema)].[inbox] WITH NOCHECK ADD CONSTRAINT inbox_payload_json_ck
  CHECK (ISJSON(N'[' + payload + N']') = 1 AND ISJSON(N'{"v":' + payload + N'}') = 1);
-- 400 + 1,200 + 4 + 4 bytes: within SQL Server's 1,700-byte limit for a nonclustered index key.
ALTER TABLE [$(schema)].[inbox] ADD CONSTRAINT inbox_source_idempotency_key_uq
  UNIQUE NONCLUSTERED (source, idempotency_key, source_bytes, idempotency_key_bytes);
CREATE INDEX outbox_due_unkeyed ON [$(schema)].[outbox] (scheduled_at, id)
  WHERE state = N'pending' AND [key] IS NULL;
CREATE INDEX outbox_active_key ON [$(schema)].[outbox] ([key], id)
  WHERE state IN (N'pending', N'processing') AND [key] IS NOT NULL;
CREATE INDEX inbox_due ON [$(schema)].[inbox] (source, scheduled_at, id) WHERE state = N'pending';
CREATE INDEX inbox_lease ON [$(schema)].[inbox] (source, lease_until) WHERE state = N'processing';
