-- QueueBox 0005: the install id, which makes every outbox message id unique across databases and schemas
-- (mirrors migrations/postgres/0005_install_id.sql by number and name; there is no SQL Server 0004).
-- Row ids are identities that start at 1 in every schema, so two QueueBox installs (or one schema dropped and
-- migrated again) deliver different messages under one row id, and a receiver that deduplicates on the message id
-- (JetStream's Nats-Msg-Id window, an inbox keyed by message-id, Idempotency-Key) drops the second as a duplicate.
-- Deliveries therefore carry <install id>-<row id> (see packages/core/src/ports/message-id.ts). The install id is
-- 32 lower-case hex digits, random (NEWID()), made here once; the store reads it once and keeps it. The binary
-- collation makes the check refuse upper-case digits as PostgreSQL's does.
-- One row: its primary key is a column that can only be 1. A copy of the database (a restored backup used as a
-- second install) keeps the id; give the copy one of its own before it delivers, then restart its processes:
--   UPDATE [queuebox].[install] SET id = LOWER(REPLACE(CAST(NEWID() AS NVARCHAR(36)), N'-', N''));  -- your schema
-- The INSERT is a batch of its own, after the batch that creates the table.

CREATE TABLE [$(schema)].[install] (
  singleton  BIT NOT NULL CONSTRAINT install_singleton_df DEFAULT 1,
  id         NVARCHAR(32) COLLATE Latin1_General_100_BIN2 NOT NULL,
  created_at DATETIME2(3) NOT NULL CONSTRAINT install_created_at_df DEFAULT SYSUTCDATETIME(),
  CONSTRAINT install_pkey PRIMARY KEY CLUSTERED (singleton),
  CONSTRAINT install_singleton_ck CHECK (singleton = 1),
  CONSTRAINT install_id_ck CHECK (LEN(id) = 32 AND id NOT LIKE N'%[^0-9a-f]%')
);
GO

INSERT INTO [$(schema)].[install] (id) VALUES (LOWER(REPLACE(CAST(NEWID() AS NVARCHAR(36)), N'-', N'')));
