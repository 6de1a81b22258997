-- QueueBox 0001: the outbox and inbox tables (see SCHEMA.md; mirrors migrations/postgres/0001_init.sql).
-- SQL Server has no search_path, so every name carries the schema as the placeholder $(schema): the migrator
-- replaces it with the validated schema name (which cannot contain ] or '). It is also sqlcmd's variable syntax:
--   sqlcmd -v schema=queuebox -i migrations/sqlserver/0001_init.sql
-- Times are UTC (SYSUTCDATETIME) in DATETIME2(3). JSON columns are NVARCHAR(MAX) with ISJSON checks. The payload
-- check wraps the value in [ ] because ISJSON(x) accepts only objects and arrays before SQL Server 2022, and a
-- payload may be any JSON value, as in PostgreSQL's JSONB. Filtered indexes need the session options SQL Server
-- requires for them (QUOTED_IDENTIFIER, ANSI_NULLS … ON), which mssql/tedious and every current driver set.

-- CREATE SCHEMA must be alone in its batch; dynamic SQL keeps this file one batch.
IF SCHEMA_ID(N'$(schema)') IS NULL EXEC(N'CREATE SCHEMA [$(schema)]');

CREATE TABLE [$(schema)].[outbox] (
  id           BIGINT IDENTITY(1, 1) NOT NULL,
  topic        NVARCHAR(400) NOT NULL,
  [key]        NVARCHAR(450) NULL,
  payload      NVARCHAR(MAX) NOT NULL CONSTRAINT outbox_payload_json_ck CHECK (ISJSON(N'[' + payload + N']') = 1),
  headers      NVARCHAR(MAX) NOT NULL CONSTRAINT outbox_headers_df DEFAULT N'{}'
                 CONSTRAINT outbox_headers_json_ck CHECK (ISJSON(headers) = 1),
  state        NVARCHAR(50) NOT NULL CONSTRAINT outbox_state_df DEFAULT N'pending',
  attempt      INT NOT NULL CONSTRAINT outbox_attempt_df DEFAULT 0,
  max_attempts INT NOT NULL CONSTRAINT outbox_max_attempts_ck CHECK (max_attempts > 0),
  scheduled_at DATETIME2(3) NOT NULL CONSTRAINT outbox_scheduled_at_df DEFAULT SYSUTCDATETIME(),
  claim_token  UNIQUEIDENTIFIER NULL,
  lease_until  DATETIME2(3) NULL,
  created_at   DATETIME2(3) NOT NULL CONSTRAINT outbox_created_at_df DEFAULT SYSUTCDATETIME(),
  updated_at   DATETIME2(3) NOT NULL CONSTRAINT outbox_updated_at_df DEFAULT SYSUTCDATETIME(),
  sent_at      DATETIME2(3) NULL,
  last_error   NVARCHAR(MAX) NULL,
  destination  NVARCHAR(200) NULL,
  CONSTRAINT outbox_pkey PRIMARY KEY CLUSTERED (id)
);

-- Claim of unordered rows: due pending rows without a key, oldest first.
CREATE INDEX outbox_due_unkeyed ON [$(schema)].[outbox] (scheduled_at, id)
  WHERE state = N'pending' AND [key] IS NULL;
-- Per-key heads: the claim reads the smallest active id of each key from this index.
CREATE INDEX outbox_active_key ON [$(schema)].[outbox] ([key], id)
  WHERE state IN (N'pending', N'processing') AND [key] IS NOT NULL;
-- Reclaim of expired leases.
CREATE INDEX outbox_lease ON [$(schema)].[outbox] (lease_until) WHERE state = N'processing';
-- Retention and stats.
CREATE INDEX outbox_state_updated ON [$(schema)].[outbox] (state, updated_at);

CREATE TABLE [$(schema)].[inbox] (
  id              BIGINT IDENTITY(1, 1) NOT NULL,
  source          NVARCHAR(200) NOT NULL,
  idempotency_key NVARCHAR(600) NOT NULL,
  event_type      NVARCHAR(400) NULL,
  aggregate_id    NVARCHAR(450) NULL,
  correlation_id  NVARCHAR(200) NULL,
  payload         NVARCHAR(MAX) NOT NULL CONSTRAINT inbox_payload_json_ck CHECK (ISJSON(N'[' + payload + N']') = 1),
  headers         NVARCHAR(MAX) NOT NULL CONSTRAINT inbox_headers_df DEFAULT N'{}'
                    CONSTRAINT inbox_headers_json_ck CHECK (ISJSON(headers) = 1),
  state           NVARCHAR(50) NOT NULL CONSTRAINT inbox_state_df DEFAULT N'pending',
  attempt         INT NOT NULL CONSTRAINT inbox_attempt_df DEFAULT 0,
  max_attempts    INT NOT NULL CONSTRAINT inbox_max_attempts_ck CHECK (max_attempts > 0),
  scheduled_at    DATETIME2(3) NOT NULL CONSTRAINT inbox_scheduled_at_df DEFAULT SYSUTCDATETIME(),
  claim_token     UNIQUEIDENTIFIER NULL,
  lease_until     DATETIME2(3) NULL,
  received_at     DATETIME2(3) NOT NULL CONSTRAINT inbox_received_at_df DEFAULT SYSUTCDATETIME(),
  updated_at      DATETIME2(3) NOT NULL CONSTRAINT inbox_updated_at_df DEFAULT SYSUTCDATETIME(),
  processed_at    DATETIME2(3) NULL,
  last_error      NVARCHAR(MAX) NULL,
  CONSTRAINT inbox_pkey PRIMARY KEY CLUSTERED (id),
  -- 400 + 1,200 bytes: within SQL Server's 1,700-byte limit for a nonclustered index key.
  CONSTRAINT inbox_source_idempotency_key_uq UNIQUE NONCLUSTERED (source, idempotency_key)
);

-- Relay and pull claims: due pending rows of a source, oldest first.
CREATE INDEX inbox_due ON [$(schema)].[inbox] (source, scheduled_at, id) WHERE state = N'pending';
-- Reclaim and takeover of expired leases.
CREATE INDEX inbox_lease ON [$(schema)].[inbox] (lease_until) WHERE state = N'processing';
-- Retention and stats.
CREATE INDEX inbox_state_updated ON [$(schema)].[inbox] (state, updated_at);
