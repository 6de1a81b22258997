-- QueueBox 0001: the outbox and inbox tables (see SCHEMA.md). Names are unqualified: the migrator sets
-- search_path to the configured schema for the length of the migration's transaction.

CREATE TABLE outbox (
  id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  topic        VARCHAR(400) NOT NULL,
  key          VARCHAR(450) NULL,
  payload      JSONB NOT NULL,
  headers      JSONB NOT NULL DEFAULT '{}',
  state        VARCHAR(50) NOT NULL DEFAULT 'pending',
  attempt      INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL CONSTRAINT outbox_max_attempts_ck CHECK (max_attempts > 0),
  scheduled_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  claim_token  UUID NULL,
  lease_until  TIMESTAMPTZ NULL,
  created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
  sent_at      TIMESTAMPTZ NULL,
  last_error   TEXT NULL,
  destination  VARCHAR(200) NULL
);

-- Claim of unordered rows: due pending rows without a key, oldest first.
CREATE INDEX outbox_due_unkeyed ON outbox (scheduled_at, id) WHERE state = 'pending' AND key IS NULL;
-- Per-key heads: the claim walks the distinct keys of this index and reads the smallest active id of each.
CREATE INDEX outbox_active_key ON outbox (key, id)
  WHERE state IN ('pending', 'processing') AND key IS NOT NULL;
-- Reclaim of expired leases.
CREATE INDEX outbox_lease ON outbox (lease_until) WHERE state = 'processing';
-- Retention and stats.
CREATE INDEX outbox_state_updated ON outbox (state, updated_at);

CREATE TABLE inbox (
  id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  source          VARCHAR(200) NOT NULL,
  idempotency_key VARCHAR(600) NOT NULL,
  event_type      VARCHAR(400) NULL,
  aggregate_id    VARCHAR(450) NULL,
  correlation_id  VARCHAR(200) NULL,
  payload         JSONB NOT NULL,
  headers         JSONB NOT NULL DEFAULT '{}',
  state           VARCHAR(50) NOT NULL DEFAULT 'pending',
  attempt         INTEGER NOT NULL DEFAULT 0,
  max_attempts    INTEGER NOT NULL CONSTRAINT inbox_max_attempts_ck CHECK (max_attempts > 0),
  scheduled_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
  claim_token     UUID NULL,
  lease_until     TIMESTAMPTZ NULL,
  received_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  processed_at    TIMESTAMPTZ NULL,
  last_error      TEXT NULL,
  CONSTRAINT inbox_source_idempotency_key_uq UNIQUE (source, idempotency_key)
);

-- Relay and pull claims: due pending rows of a source, oldest first.
CREATE INDEX inbox_due ON inbox (source, scheduled_at, id) WHERE state = 'pending';
-- Reclaim and takeover of expired leases.
CREATE INDEX inbox_lease ON inbox (lease_until) WHERE state = 'processing';
-- Retention and stats.
CREATE INDEX inbox_state_updated ON inbox (state, updated_at);
